"""Buffer prototypes: where the arrays a read returns (and the scratch buffers it
uses) live.

A prototype is a small object that allocates arrays in one kind of memory:

* ``cpu`` (:mod:`cuzarr.buffer.cpu`): numpy arrays in ordinary host memory.
* ``gpu`` (:mod:`cuzarr.buffer.gpu`): CuPy arrays in device memory.
* ``pinned`` (:mod:`cuzarr.buffer.gpu`): numpy arrays in page-locked host memory
  (staging for host-to-device copies).

Every prototype has ``name``, ``is_device``, ``xp`` (the array module),
``empty(shape, dtype, order="C")``, ``zeros(...)``, ``full(shape, fill_value,
dtype, order="C")``, ``asarray(x)`` (copy into this memory only if needed) and
``to_host(x)``. Importing this package never imports CuPy: the gpu prototypes
import it on first use and raise ``RuntimeError`` naming the missing package.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.buffer.cpu import CpuPrototype, cpu_prototype
from cuzarr.buffer.gpu import (
    GpuPrototype,
    PinnedHostPrototype,
    gpu_available,
    gpu_prototype,
    is_device_array,
    pinned_prototype,
)

__all__ = [
    "BufferPrototype",
    "CpuPrototype",
    "GpuPrototype",
    "PinnedHostPrototype",
    "array_module",
    "cpu_prototype",
    "default_buffer_prototype",
    "default_prototype",
    "device_dtype",
    "device_index",
    "get_prototype",
    "gpu_available",
    "gpu_prototype",
    "host_selection",
    "is_device_array",
    "pinned_prototype",
    "prototype_for",
    "shares_memory",
]

BufferPrototype = CpuPrototype | GpuPrototype | PinnedHostPrototype

_BY_NAME = {"cpu": cpu_prototype, "gpu": gpu_prototype, "pinned": pinned_prototype}


def get_prototype(name: str | Any) -> BufferPrototype:
    """The prototype called ``name`` (``"cpu"``, ``"gpu"``, ``"pinned"``); a
    prototype object is returned as is."""
    if not isinstance(name, str):
        if hasattr(name, "empty") and hasattr(name, "is_device"):
            return name
        raise TypeError(f"not a buffer prototype: {name!r}")
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown buffer prototype {name!r}; expected one of {sorted(_BY_NAME)}"
        ) from None


def default_prototype() -> BufferPrototype:
    """The prototype selected by ``cuzarr.config`` key ``buffer`` (``"cpu"`` by
    default; ``cuzarr.config.enable_gpu()`` selects ``"gpu"``)."""
    from cuzarr.config import config

    return get_prototype(config.get("buffer", "cpu") or "cpu")


def default_buffer_prototype() -> BufferPrototype:
    """:func:`default_prototype` under zarr-python's name: the prototype the
    ``buffer`` config key selects, which ``prototype=`` arguments take."""
    return default_prototype()


def prototype_for(meta_array: Any) -> BufferPrototype:
    """The prototype whose arrays are like ``meta_array`` (``None`` means the
    configured default): numpy arrays give ``cpu``, CuPy (or any
    ``__cuda_array_interface__``) arrays give ``gpu``."""
    if meta_array is None:
        return default_prototype()
    if isinstance(meta_array, str) or (
        hasattr(meta_array, "empty") and hasattr(meta_array, "is_device")
    ):
        return get_prototype(meta_array)
    if is_device_array(meta_array):
        return gpu_prototype
    if hasattr(meta_array, "__array_interface__") or hasattr(meta_array, "__array__"):
        return cpu_prototype
    raise TypeError(f"cannot choose a buffer prototype for {type(meta_array).__name__}")


def array_module(x: Any) -> Any:
    """``cupy`` for device arrays, ``numpy`` otherwise."""
    if is_device_array(x):
        from cuzarr.buffer.gpu import import_cupy

        return import_cupy()
    return np


def shares_memory(a: Any, b: Any) -> bool:
    """``numpy.shares_memory`` that also answers for CuPy arrays (and a mix)."""
    da, db = is_device_array(a), is_device_array(b)
    if da != db:
        return False
    if da:
        return bool(array_module(a).shares_memory(a, b))
    return bool(np.shares_memory(a, b))


def host_selection(selection: Any) -> Any:
    """The selection with any device index arrays (CuPy integer arrays or masks)
    copied to the host: plans are made on the host, indices are small."""
    if isinstance(selection, tuple):
        if not any(is_device_array(s) for s in selection):
            return selection
        return tuple(_to_host(s) for s in selection)
    if isinstance(selection, list) and any(is_device_array(s) for s in selection):
        return [_to_host(s) for s in selection]
    return _to_host(selection)


def _to_host(x: Any) -> Any:
    if is_device_array(x):
        get = getattr(x, "get", None)
        return get() if callable(get) else np.asarray(x)
    return x


def device_dtype(dtype: np.dtype) -> np.dtype | None:
    """The dtype a device (CuPy) output of an array of ``dtype`` has, or ``None``
    when CuPy cannot hold it (strings, objects, structured, datetime, and
    extension types such as bfloat16): such reads stay on the host."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biufc" or dtype.fields:
        return None
    if dtype.kind == "f" and dtype.itemsize not in (2, 4, 8):
        return None
    return dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype


def device_index(block: Any, index: Any) -> Any:
    """``index`` (a tuple of host index arrays and slices) ready to index ``block``:
    the arrays moved to the device when ``block`` lives there."""
    if not is_device_array(block) or not isinstance(index, tuple):
        return index
    xp = prototype_for(block).xp
    return tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)
