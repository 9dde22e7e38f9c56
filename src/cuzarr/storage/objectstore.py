"""A store over obstore (the Rust ``object_store`` crate): S3, GCS, Azure, HTTP,
local files and memory, as zarr-python's ``zarr.storage.ObjectStore``.

Needs the optional ``obstore`` package (``pip install cuzarr[obstore]``)::

    import obstore.store
    from cuzarr.storage import ObjectStore

    store = ObjectStore(obstore.store.S3Store("bucket", region="us-east-1"))
    arr = cuzarr.open_array(store, path="data/temperature")
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    as_bytes_like,
    key_directory,
    normalize_key,
)

try:
    import obstore as obs
    from obstore.exceptions import AlreadyExistsError
except ImportError as _e:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "cuzarr.storage.ObjectStore needs the obstore package: pip install 'cuzarr[obstore]'"
    ) from _e

__all__ = ["ObjectStore"]


class ObjectStore(Store):
    """A store over an obstore store (``obstore.store.S3Store``, ``GCSStore``,
    ``AzureStore``, ``HTTPStore``, ``LocalStore``, ``MemoryStore``).

    Parameters
    ----------
    store
        The obstore store; keys are paths relative to its root (and prefix).
    read_only
        Refuse writes when true.
    """

    supports_partial_writes = False

    def __init__(self, store: Any, *, read_only: bool = False) -> None:
        if not type(store).__module__.startswith("obstore"):
            raise TypeError(f"ObjectStore needs an obstore store, not {type(store).__name__}")
        super().__init__(read_only=read_only)
        self.store = store

    def __repr__(self) -> str:
        return f"ObjectStore({self.store!r})"

    def __str__(self) -> str:
        return f"object_store://{self.store!r}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStore) and other.store is self.store

    def __hash__(self) -> int:
        return id(self.store)

    def __getstate__(self) -> dict[str, Any]:
        # obstore stores pickle (their configuration); dask workers rebuild them
        return {"store": self.store, "_read_only": self._read_only}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store = state["store"]
        self._read_only = state["_read_only"]

    # -- reads -----------------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        try:
            if byte_range is None:
                result = await obs.get_async(self.store, key)
                return bytes(await result.bytes_async())
            if isinstance(byte_range, RangeByteRequest):
                if byte_range.end <= byte_range.start:
                    # obstore refuses an empty range; the value must still exist
                    await obs.head_async(self.store, key)
                    return b""
                out = await obs.get_range_async(
                    self.store, key, start=byte_range.start, end=byte_range.end
                )
                return bytes(out)
            if isinstance(byte_range, OffsetByteRequest):
                opts: dict[str, Any] = {"range": {"offset": byte_range.offset}}
            elif isinstance(byte_range, SuffixByteRequest):
                opts = {"range": {"suffix": byte_range.suffix}}
            else:
                raise TypeError(f"unexpected byte range {byte_range!r}")
            result = await obs.get_async(self.store, key, options=opts)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            return None

    async def exists(self, key: str) -> bool:
        try:
            await obs.head_async(self.store, key)
        except FileNotFoundError:
            return False
        return True

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key`` (one HEAD request)."""
        meta = await obs.head_async(self.store, key)
        return int(meta["size"])

    # -- writes ----------------------------------------------------------------
    async def set(self, key: str, value: Any) -> None:
        self._check_writable()
        normalize_key(key)
        await obs.put_async(self.store, key, bytes(as_bytes_like(value)))

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        self._check_writable()
        normalize_key(key)
        with contextlib.suppress(AlreadyExistsError):
            await obs.put_async(self.store, key, bytes(as_bytes_like(value)), mode="create")

    async def delete(self, key: str) -> None:
        self._check_writable()
        with contextlib.suppress(FileNotFoundError):
            await obs.delete_async(self.store, key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        self._check_writable()
        await asyncio.gather(*(self.delete(k) for k in keys))

    # -- listing ---------------------------------------------------------------
    def list(self) -> AsyncIterator[str]:
        return self._list(None, "")

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # obstore matches whole path segments ("a" lists "a/x", not "ab"): list
        # the directory the prefix lies in, then keep the keys that start with it
        return self._list(key_directory(prefix)[:-1] or None, prefix)

    def _list(self, parent: str | None, prefix: str) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            async for batch in obs.list(self.store, parent):
                for meta in batch:
                    path = meta["path"]
                    if path.startswith(prefix):
                        yield path

        return gen()

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            base = prefix.rstrip("/")
            found = await obs.list_with_delimiter_async(self.store, base or None)
            cut = len(base) + 1 if base else 0
            for p in found["common_prefixes"]:
                yield p[cut:].rstrip("/")
            for meta in found["objects"]:
                yield meta["path"][cut:]

        return gen()
