"""``ndim``, ``size`` and ``nbytes``: what follows from a ``shape`` and a ``dtype``."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Shaped"]


class Shaped:
    """The sizes of anything with a ``shape`` and a numpy ``dtype`` (arrays, their
    handles and lazy views)."""

    shape: Any
    dtype: Any

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Size of the uncompressed data (item size x number of elements)."""
        return self.size * self.dtype.itemsize
