"""Storage backends and the ``Store`` interface.

``MemoryStore``, ``LocalStore``, ``ZipStore``, ``FsspecStore`` (S3, HTTP,
``memory://`` and other fsspec filesystems), ``HTTPStore``, ``ReferenceStore``
(kerchunk), ``N5Store`` (N5 containers shown as Zarr v2) and ``AsdfStore``
(the ndarrays of an ASDF file, read-only; needs the ``asdf`` package),
``ObjectStore`` (an obstore store; needs the ``obstore`` package),
``ManagedMemoryStore`` (a named dict ``memory://name`` finds) and
``GpuMemoryStore`` (values in device memory);
``WrapperStore`` and ``LoggingStore`` wrap any of them; ``ZarrPythonStore``
lets cuzarr use any zarr-python store (made for one passed in directly).
"""

from typing import TYPE_CHECKING, Any

from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from cuzarr.storage.common import StorePath, make_store, make_store_path
from cuzarr.storage.local import LocalStore
from cuzarr.storage.memory import MemoryStore

if TYPE_CHECKING:
    from cuzarr.storage.asdf import AsdfStore
    from cuzarr.storage.fsspec import (
        BucketNotFoundError,
        FsspecStore,
        HTTPStore,
        RangeMismatchError,
        RemoteStoreError,
        RetryPolicy,
        TruncatedRangeError,
    )
    from cuzarr.storage.memory_kinds import GpuMemoryStore, ManagedMemoryStore
    from cuzarr.storage.n5 import N5Store
    from cuzarr.storage.objectstore import ObjectStore
    from cuzarr.storage.reference import ReferenceStore
    from cuzarr.storage.wrapper import LoggingStore, WrapperStore
    from cuzarr.storage.zarr_python import ZarrPythonStore
    from cuzarr.storage.zip import ZipStore, ZipStoreError

# The other backends load when first named (PEP 562): a program that only reads
# local files does not pay for them (import time, resident memory).
_LAZY = {
    "AsdfStore": "asdf",
    "BucketNotFoundError": "fsspec",
    "FsspecStore": "fsspec",
    "HTTPStore": "fsspec",
    "RangeMismatchError": "fsspec",
    "RemoteStoreError": "fsspec",
    "RetryPolicy": "fsspec",
    "TruncatedRangeError": "fsspec",
    "N5Store": "n5",
    "GpuMemoryStore": "memory_kinds",
    "ManagedMemoryStore": "memory_kinds",
    "ObjectStore": "objectstore",
    "ReferenceStore": "reference",
    "ZipStore": "zip",
    "ZipStoreError": "zip",
    "WrapperStore": "wrapper",
    "LoggingStore": "wrapper",
    "ZarrPythonStore": "zarr_python",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cuzarr.storage' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"cuzarr.storage.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AsdfStore",
    "BucketNotFoundError",
    "ByteRequest",
    "FsspecStore",
    "GpuMemoryStore",
    "HTTPStore",
    "LocalStore",
    "LoggingStore",
    "ManagedMemoryStore",
    "MemoryStore",
    "N5Store",
    "ObjectStore",
    "OffsetByteRequest",
    "RangeByteRequest",
    "RangeMismatchError",
    "ReferenceStore",
    "RemoteStoreError",
    "RetryPolicy",
    "Store",
    "StorePath",
    "SuffixByteRequest",
    "TruncatedRangeError",
    "WrapperStore",
    "ZarrPythonStore",
    "ZipStore",
    "ZipStoreError",
    "make_store",
    "make_store_path",
]
