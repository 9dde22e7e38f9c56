"""zarr-python's stores used by cuzarr: any ``zarr.abc.store.Store`` (its
``LocalStore``, ``FsspecStore``, ``ObjectStore``, ``ZipStore`` or a user's own)
behind cuzarr's store interface, so one store object serves both libraries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    as_bytes_like,
)

__all__ = ["ZarrPythonStore", "is_zarr_python_store"]


def is_zarr_python_store(obj: Any) -> bool:
    """Whether ``obj`` is a zarr-python store (without importing zarr: a store
    object of it means zarr is imported already)."""
    import sys

    abc = sys.modules.get("zarr.abc.store")
    return abc is not None and isinstance(obj, abc.Store)


def _zarr_range(byte_range: ByteRequest | None) -> Any:
    """cuzarr's byte request as zarr-python's (its stores take no other kind)."""
    if byte_range is None:
        return None
    from zarr.abc import store as zs

    if type(byte_range).__module__.startswith("zarr."):
        return byte_range
    if isinstance(byte_range, RangeByteRequest):
        return zs.RangeByteRequest(byte_range.start, byte_range.end)
    if isinstance(byte_range, OffsetByteRequest):
        return zs.OffsetByteRequest(byte_range.offset)
    if isinstance(byte_range, SuffixByteRequest):
        return zs.SuffixByteRequest(byte_range.suffix)
    raise TypeError(f"unsupported byte range {byte_range!r}")


def _bytes(buf: Any) -> bytes | None:
    return None if buf is None else buf.to_bytes()


class ZarrPythonStore(Store):
    """A zarr-python store seen through cuzarr's store interface.

    ``cuzarr.open_array(zarr_store)`` and the other entry points wrap a
    zarr-python store in this class themselves.

    Parameters
    ----------
    store : zarr.abc.store.Store
        The zarr-python store; reads and writes go to it (as its CPU buffers).
    read_only : bool, optional
        Refuse writes; default: the zarr-python store's own ``read_only``.
    """

    def __init__(self, store: Any, *, read_only: bool | None = None) -> None:
        if not is_zarr_python_store(store):
            raise TypeError(f"not a zarr-python store: {type(store).__name__}")
        super().__init__(read_only=bool(store.read_only if read_only is None else read_only))
        self.inner = store
        self.supports_writes = bool(getattr(store, "supports_writes", True))
        self.supports_deletes = bool(getattr(store, "supports_deletes", True))
        self.supports_listing = bool(getattr(store, "supports_listing", True))

    def __repr__(self) -> str:
        return f"ZarrPythonStore({self.inner!r})"

    @property
    def supports_consolidated_metadata(self) -> bool:
        """The zarr-python store's own answer (True for stores that predate the
        property); False for stores such as Icechunk's, which hold none."""
        return bool(getattr(self.inner, "supports_consolidated_metadata", True))

    def __str__(self) -> str:
        return str(self.inner)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZarrPythonStore) and other.inner == self.inner

    def __hash__(self) -> int:
        try:
            return hash(self.inner)
        except TypeError:
            # zarr-python's value-compared stores are not hashable: equal ones
            # share at least their type
            return hash(type(self.inner))

    @staticmethod
    def _prototype() -> Any:
        from zarr.core.buffer import default_buffer_prototype

        return default_buffer_prototype()

    async def _open(self) -> None:
        ensure = getattr(self.inner, "_ensure_open", None)
        if ensure is not None:
            await ensure()

    # -- reads ----------------------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        await self._open()
        return _bytes(await self.inner.get(key, self._prototype(), _zarr_range(byte_range)))

    async def exists(self, key: str) -> bool:
        await self._open()
        return bool(await self.inner.exists(key))

    async def getsize(self, key: str) -> int:
        await self._open()
        return int(await self.inner.getsize(key))

    # -- writes ---------------------------------------------------------------------
    async def set(self, key: str, value: Any) -> None:
        self._check_writable()
        await self._open()
        from zarr.core.buffer import cpu

        await self.inner.set(key, cpu.Buffer.from_bytes(bytes(as_bytes_like(value))))

    async def delete(self, key: str) -> None:
        self._check_writable()
        await self._open()
        await self.inner.delete(key)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await self._open()
        await self.inner.delete_dir(prefix)

    # -- listing --------------------------------------------------------------------
    def list(self) -> AsyncIterator[str]:
        return self._listing("list")

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        return self._listing("list_prefix", prefix)

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        return self._listing("list_dir", prefix)

    async def _listing(self, method: str, *args: str) -> AsyncIterator[str]:
        await self._open()
        async for key in getattr(self.inner, method)(*args):
            yield key

    def close(self) -> None:
        self.inner.close()
