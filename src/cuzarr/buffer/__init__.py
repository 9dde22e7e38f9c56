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
    "cpu_prototype",
    "default_prototype",
    "get_prototype",
    "gpu_available",
    "gpu_prototype",
    "is_device_array",
    "pinned_prototype",
    "prototype_for",
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
