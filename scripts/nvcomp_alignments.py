"""Print nvCOMP's decompression alignment requirements (input, output, temp)
per codec and backend, from its C API (a host call: no device needed).

The Python binding only reports the most restrictive of the three
(``Codec.get_required_decompression_alignment``); cuzarr's
``gpu.executor.INPUT_ALIGN`` decides which streams are decoded where they were
read, so the input figure is the one that matters.

    python scripts/nvcomp_alignments.py
"""

from __future__ import annotations

import ctypes
import os
import sys


class _Align(ctypes.Structure):
    _fields_ = [("input", ctypes.c_size_t), ("output", ctypes.c_size_t),
                ("temp", ctypes.c_size_t)]


class _Opts(ctypes.Structure):  # nvcompBatched*DecompressOpts_t: backend + 60 reserved bytes
    _fields_ = [("backend", ctypes.c_int), ("reserved", ctypes.c_char * 60)]


def main() -> int:
    try:
        import nvidia.libnvcomp as pkg
    except ImportError:
        print("nvcomp alignments: nvidia-libnvcomp is not installed")
        return 1
    root = next(iter(pkg.__path__))
    lib = ctypes.CDLL(os.path.join(root, "lib64", "libnvcomp.so.6"))
    for name in ("Zstd", "LZ4", "Deflate", "Gzip"):
        fn = getattr(lib, f"nvcompBatched{name}DecompressGetRequiredAlignments", None)
        if fn is None:
            continue
        for backend, label in ((0, "default"), (2, "cuda")):
            a = _Align()
            status = fn(_Opts(backend=backend), ctypes.byref(a))
            print(f"nvcomp alignments {name:8s} {label:8s} status {status} "
                  f"input {a.input} output {a.output} temp {a.temp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
