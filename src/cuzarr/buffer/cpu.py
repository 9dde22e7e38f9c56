"""The host (numpy) buffer prototype."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CpuPrototype", "cpu_prototype"]


def _dtype(dtype: Any) -> np.dtype:
    # cuzarr.metadata.dtypes.DataType carries its numpy dtype as .dtype
    inner = getattr(dtype, "dtype", None)
    return np.dtype(inner if isinstance(inner, np.dtype) else dtype)


class CpuPrototype:
    """numpy arrays in ordinary host memory."""

    name = "cpu"
    is_device = False

    @property
    def xp(self) -> Any:
        return np

    def empty(self, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
        return np.empty(shape, dtype=_dtype(dtype), order=order)  # type: ignore[call-overload]

    def zeros(self, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
        return np.zeros(shape, dtype=_dtype(dtype), order=order)  # type: ignore[call-overload]

    def full(self, shape: Any, fill_value: Any, dtype: Any, order: str = "C") -> np.ndarray:
        out = self.empty(shape, dtype, order)
        out[...] = fill_value
        return out

    def asarray(self, x: Any, dtype: Any = None) -> np.ndarray:
        if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
            x = x.get()  # a CuPy array: copy to the host
        return np.asarray(x, dtype=None if dtype is None else _dtype(dtype))

    def to_host(self, x: Any) -> np.ndarray:
        return self.asarray(x)

    def __repr__(self) -> str:
        return "<buffer prototype cpu>"


cpu_prototype = CpuPrototype()
