"""Storage backends: ``MemoryStore``, ``LocalStore`` and the ``Store`` interface."""

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

__all__ = [
    "ByteRequest",
    "LocalStore",
    "MemoryStore",
    "OffsetByteRequest",
    "RangeByteRequest",
    "Store",
    "StorePath",
    "SuffixByteRequest",
    "make_store",
    "make_store_path",
]
