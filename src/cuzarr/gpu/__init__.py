"""GPU execution: the scatter plan (descriptor tables), nvCOMP stream formats,
the CUDA kernel loader and the device executor.

Importing this package (and ``plan``/``formats``) never needs CuPy; ``kernels``
and ``executor`` import CuPy and nvCOMP only when they run on a device. See
docs/gpu.md.
"""

from __future__ import annotations

__all__ = ["executor", "formats", "kernels", "plan"]
