"""Turn what a caller passes as ``store`` into a store plus a path inside it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuzarr.storage.base import Store
from cuzarr.storage.local import LocalStore
from cuzarr.storage.memory import MemoryStore

__all__ = ["StoreLike", "StorePath", "join_path", "make_store", "normalize_path"]


def normalize_path(path: str | None) -> str:
    """Strip slashes and reject '.'/'..' components in a node path."""
    if not path:
        return ""
    parts = [p for p in str(path).replace("\\", "/").split("/") if p]
    for p in parts:
        if p in (".", ".."):
            raise ValueError(f"invalid node path {path!r}: '.' and '..' are not allowed")
    return "/".join(parts)


def join_path(*parts: str) -> str:
    """Join node path parts with '/', skipping empty ones."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


@dataclass(frozen=True)
class StorePath:
    """A store and a node path inside it."""

    store: Store
    path: str = ""

    def key(self, name: str) -> str:
        """The store key of ``name`` relative to this node."""
        return f"{self.path}/{name}" if self.path else name

    def __truediv__(self, other: str) -> StorePath:
        return StorePath(self.store, join_path(self.path, other))

    def __str__(self) -> str:
        # zarr-python's form: the store's URL, then the path
        return f"{self.store}/{self.path}" if self.path else str(self.store)


StoreLike = Store | str | os.PathLike | dict | StorePath | None


def _is_url(s: str) -> bool:
    return "://" in s and not s.startswith("file://")


def make_store(
    store: Any, *, mode: str = "a", storage_options: dict[str, Any] | None = None
) -> Store:
    """Build (or pass through) a ``Store`` for ``store``; read-only when ``mode == 'r'``."""
    read_only = mode == "r"
    if isinstance(store, StorePath):
        store = store.store
    if storage_options and not isinstance(store, (str, os.PathLike)):
        # as zarr-python: options that would silently do nothing are refused
        raise TypeError(
            f"storage_options were given, but a {type(store).__name__} store takes none "
            "(only URL strings do)"
        )
    if store is None:
        result: Store = MemoryStore()
    elif isinstance(store, Store):
        result = store
        if read_only and not store.read_only:
            result = store.with_read_only(True)
        return result
    elif isinstance(store, dict):
        result = MemoryStore(store)
    elif isinstance(store, (str, os.PathLike)):
        s = os.fspath(store)
        if s.startswith("file://"):
            s = s[len("file://") :]
        if _is_url(s):
            if s.startswith("memory://") and not storage_options:
                # a live ManagedMemoryStore's name, as in zarr-python; else fsspec's
                from cuzarr.storage.memory_kinds import managed_store_for_url

                managed = managed_store_for_url(s, read_only)
                if managed is not None:
                    return managed
            return _url_store(s, storage_options, read_only)
        suffix = s.rstrip("/\\").lower()
        if suffix.endswith(".n5") and storage_options:
            # an N5 container's own options: N5Store(dimension_order=, byte_order=)
            from cuzarr.storage.n5 import N5Store

            unknown = set(storage_options) - {"dimension_order", "byte_order"}
            if unknown:
                raise TypeError(
                    f"storage_options of an N5 path are dimension_order and byte_order, "
                    f"not {sorted(unknown)}"
                )
            return N5Store(s, read_only=read_only, **storage_options)
        if storage_options:
            raise TypeError("storage_options are only accepted with URL stores (and .n5 paths)")
        if suffix.endswith(".zip"):
            from cuzarr.storage.zip import ZipStore

            return ZipStore(s, mode="r" if read_only else "a")
        if suffix.endswith(".n5"):
            from cuzarr.storage.n5 import N5Store

            return N5Store(s, read_only=read_only)
        result = LocalStore(Path(s))
    else:
        from cuzarr.storage.zarr_python import ZarrPythonStore, is_zarr_python_store

        mapping_like = all(hasattr(store, a) for a in ("__getitem__", "__setitem__", "keys"))
        if type(store).__module__.startswith("obstore."):
            from cuzarr.storage.objectstore import ObjectStore

            result = ObjectStore(store)
        elif is_zarr_python_store(store):
            result = ZarrPythonStore(store)
        elif mapping_like:
            result = MemoryStore(store)
        else:
            raise TypeError(f"unsupported store type {type(store).__name__}")
    if read_only:
        result = result.with_read_only(True)
    return result


def only_zarr_format(store: Any) -> int | None:
    """The one Zarr format ``store`` (any StoreLike) can hold, or None for both:
    2 for an N5 container (an ``N5Store`` or a ``*.n5`` path)."""
    if isinstance(store, StorePath):
        store = store.store
    if isinstance(store, Store):
        return store.only_zarr_format
    if isinstance(store, (str, os.PathLike)):
        s = os.fspath(store)
        if s.startswith("file://") or not _is_url(s):
            return 2 if s.rstrip("/\\").lower().endswith(".n5") else None
    return None


def make_store_path(
    store: Any,
    path: str | None = None,
    *,
    mode: str = "a",
    storage_options: dict[str, Any] | None = None,
) -> StorePath:
    """A ``StorePath`` for ``store`` (any StoreLike) and ``path``."""
    base = ""
    if isinstance(store, StorePath):
        base = store.path
    s = make_store(store, mode=mode, storage_options=storage_options)
    return StorePath(s, join_path(base, normalize_path(path)))


def _url_store(url: str, storage_options: dict[str, Any] | None, read_only: bool) -> Store:
    if url.startswith("reference://"):
        from cuzarr.storage.reference import ReferenceStore

        opts = dict(storage_options or {})
        fo = opts.pop("fo", None) or url[len("reference://") :]
        return ReferenceStore(fo, **opts)
    try:
        from cuzarr.storage.fsspec import FsspecStore
    except ImportError as e:  # pragma: no cover - depends on the optional module
        raise ValueError(f"URL stores need cuzarr.storage.fsspec: {e}") from e
    return FsspecStore.from_url(url, storage_options=storage_options, read_only=read_only)
