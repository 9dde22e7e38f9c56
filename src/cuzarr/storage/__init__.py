"""Storage backends and the ``Store`` interface.

``MemoryStore``, ``LocalStore``, ``ZipStore``, ``FsspecStore`` (S3, HTTP,
``memory://`` and other fsspec filesystems), ``HTTPStore``, ``ReferenceStore``
(kerchunk), ``N5Store`` (N5 containers shown as Zarr v2) and ``AsdfStore``
(the ndarrays of an ASDF file, read-only; needs the ``asdf`` package).
"""

from cuzarr.storage.asdf import AsdfStore
from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from cuzarr.storage.common import StorePath, make_store, make_store_path
from cuzarr.storage.fsspec import FsspecStore, HTTPStore, RemoteStoreError, RetryPolicy
from cuzarr.storage.local import LocalStore
from cuzarr.storage.memory import MemoryStore
from cuzarr.storage.n5 import N5Store
from cuzarr.storage.reference import ReferenceStore
from cuzarr.storage.zip import ZipStore

__all__ = [
    "AsdfStore",
    "ByteRequest",
    "FsspecStore",
    "HTTPStore",
    "LocalStore",
    "MemoryStore",
    "N5Store",
    "OffsetByteRequest",
    "RangeByteRequest",
    "ReferenceStore",
    "RemoteStoreError",
    "RetryPolicy",
    "Store",
    "StorePath",
    "SuffixByteRequest",
    "ZipStore",
    "make_store",
    "make_store_path",
]
