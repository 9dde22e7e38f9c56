"""Device (CuPy) and pinned-host buffer prototypes.

CuPy is imported on first use, never at import time; without it every
allocation raises ``RuntimeError`` naming the package to install.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cuzarr.buffer.cpu import CpuPrototype, _dtype

__all__ = [
    "GpuPrototype",
    "PinnedHostPrototype",
    "gpu_available",
    "gpu_prototype",
    "import_cupy",
    "is_device_array",
    "pinned_prototype",
]

_INSTALL_HINT = (
    "GPU buffers need the 'cupy' package (CuPy for CUDA 13: pip install cupy-cuda13x, "
    "or pip install 'cuzarr[gpu]')"
)


def import_cupy() -> Any:
    """``import cupy``, or ``RuntimeError`` naming the missing package."""
    try:
        import cupy
    except ImportError as e:
        raise RuntimeError(f"{_INSTALL_HINT}: {e}") from e
    return cupy


_DEVICE_SEEN = False


def _device_cupy() -> Any:
    """``import_cupy()`` for an allocation: ``RuntimeError`` saying so when CuPy
    imports but finds no usable CUDA device (no GPU, no driver), instead of
    CUDA's own error from deep inside CuPy's memory pool."""
    global _DEVICE_SEEN
    cp = import_cupy()
    if not _DEVICE_SEEN:
        try:
            n = int(cp.cuda.runtime.getDeviceCount())
        except Exception as e:
            raise RuntimeError(
                "GPU buffers were requested (prototype='gpu', meta_array or "
                "cuzarr.config.enable_gpu()) but CuPy finds no usable CUDA device "
                f"({type(e).__name__}: {e}); read with prototype='cpu' or "
                "cuzarr.config.enable_cpu()"
            ) from e
        if n < 1:
            raise RuntimeError(
                "GPU buffers were requested (prototype='gpu', meta_array or "
                "cuzarr.config.enable_gpu()) but CuPy finds no CUDA device; read "
                "with prototype='cpu' or cuzarr.config.enable_cpu()"
            )
        _DEVICE_SEEN = True
    return cp


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False


def is_device_array(x: Any) -> bool:
    """True for arrays in device memory (CuPy, or anything with
    ``__cuda_array_interface__``)."""
    return hasattr(x, "__cuda_array_interface__")


def _check_dtype(dt: np.dtype) -> np.dtype:
    if dt.hasobject:
        raise TypeError(f"dtype {dt} (Python objects) cannot live in device memory")
    return dt


class GpuPrototype:
    """CuPy arrays in device memory (the current device)."""

    name = "gpu"
    is_device = True

    @property
    def xp(self) -> Any:
        return import_cupy()

    def empty(self, shape: Any, dtype: Any, order: str = "C") -> Any:
        cp = _device_cupy()
        return cp.empty(shape, dtype=_check_dtype(_dtype(dtype)), order=order)

    def zeros(self, shape: Any, dtype: Any, order: str = "C") -> Any:
        cp = _device_cupy()
        return cp.zeros(shape, dtype=_check_dtype(_dtype(dtype)), order=order)

    def full(self, shape: Any, fill_value: Any, dtype: Any, order: str = "C") -> Any:
        out = self.empty(shape, dtype, order)
        dt = out.dtype
        if dt.kind in "biufc" and not dt.fields:
            out.fill(np.asarray(fill_value, dtype=dt)[()])
        else:  # structured / datetime / bytes: broadcast from a host array
            host = np.full((), fill_value, dtype=dt)
            out[...] = import_cupy().asarray(host)
        return out

    def asarray(self, x: Any, dtype: Any = None) -> Any:
        cp = _device_cupy()
        return cp.asarray(x, dtype=None if dtype is None else _dtype(dtype))

    def to_host(self, x: Any) -> np.ndarray:
        if is_device_array(x):
            return import_cupy().asnumpy(x)
        return np.asarray(x)

    def __repr__(self) -> str:
        return "<buffer prototype gpu>"


class PinnedHostPrototype(CpuPrototype):
    """numpy arrays in page-locked host memory (fast, asynchronous host-to-device
    copies). The memory is freed when the last numpy view of it goes away.
    Allocation differs from :class:`CpuPrototype`; ``full`` and ``to_host`` are its."""

    name = "pinned"

    def empty(self, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
        cp = _device_cupy()
        dt = _check_dtype(_dtype(dtype))
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        nbytes = max(1, math.prod(shape) * dt.itemsize)
        mem = cp.cuda.alloc_pinned_memory(nbytes)
        flat = np.frombuffer(mem, dtype=np.uint8, count=nbytes)
        arr = flat[: math.prod(shape) * dt.itemsize].view(dt)
        return arr.reshape(shape, order=order)  # type: ignore[call-overload]

    def zeros(self, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
        out = self.empty(shape, dtype, order)
        out[...] = 0
        return out

    def asarray(self, x: Any, dtype: Any = None) -> np.ndarray:
        if is_device_array(x):
            x = import_cupy().asnumpy(x)
        x = np.asarray(x, dtype=None if dtype is None else _dtype(dtype))
        out = self.empty(x.shape, x.dtype)
        out[...] = x
        return out

    def __repr__(self) -> str:
        return "<buffer prototype pinned>"


gpu_prototype = GpuPrototype()
pinned_prototype = PinnedHostPrototype()
