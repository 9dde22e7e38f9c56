"""zarr-python's other in-memory stores: ``ManagedMemoryStore`` (a named dict that a
``memory://name`` URL finds again) and ``GpuMemoryStore`` (values in device memory)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any

import numpy as np

from cuzarr.buffer.gpu import _device_cupy
from cuzarr.storage.base import as_bytes_like
from cuzarr.storage.memory import MemoryStore, _KeyLocks

__all__ = ["GpuMemoryStore", "ManagedMemoryStore", "managed_store_for_url"]


class _ManagedDict(dict):  # type: ignore[type-arg]
    """A plain dict that a weak reference can point to."""

    __slots__ = ("__weakref__",)


class _Registry:
    """Managed dicts by name, held weakly: a dict goes when its last store does."""

    def __init__(self) -> None:
        self._dicts: weakref.WeakValueDictionary[str, _ManagedDict] = weakref.WeakValueDictionary()
        self._counter = 0
        self._lock = threading.Lock()

    def get_or_create(self, name: str | None) -> tuple[_ManagedDict, str]:
        with self._lock:
            if name is None:
                name = str(self._counter)
                self._counter += 1
                while name in self._dicts:
                    name = str(self._counter)
                    self._counter += 1
            elif not name or "/" in name:
                raise ValueError(
                    f"a store name must be non-empty and cannot contain '/': {name!r} "
                    "(use path= for a path inside the store)"
                )
            d = self._dicts.get(name)
            if d is None:
                d = self._dicts[name] = _ManagedDict()
            return d, name

    def get(self, name: str) -> _ManagedDict | None:
        return self._dicts.get(name)


_REGISTRY = _Registry()


class _Prefixed(MutableMapping[str, Any]):
    """The keys of ``base`` under ``prefix``, without it."""

    def __init__(self, base: MutableMapping[str, Any], prefix: str) -> None:
        self.base = base
        self.prefix = prefix

    def __getitem__(self, key: str) -> Any:
        return self.base[self.prefix + key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.base.get(self.prefix + key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self.base[self.prefix + key] = value

    def __delitem__(self, key: str) -> None:
        del self.base[self.prefix + key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (self.prefix + key) in self.base

    def __iter__(self) -> Iterator[str]:
        n = len(self.prefix)
        return iter([k[n:] for k in list(self.base) if k.startswith(self.prefix)])

    def __len__(self) -> int:
        return sum(1 for k in list(self.base) if k.startswith(self.prefix))


def _split_url(url: str) -> tuple[str, str]:
    if not url.startswith("memory://"):
        raise ValueError(f"expected a 'memory://' URL, got {url!r}")
    name, _, path = url[len("memory://") :].strip("/").partition("/")
    return name, path


class ManagedMemoryStore(MemoryStore):
    """An in-memory store owning a named dict, which ``memory://<name>`` URLs (and
    :meth:`from_url`) find again in this process, as zarr-python's.

    Parameters
    ----------
    name : str, optional
        The store's name (a new unique one when omitted). Stores of one name share
        their dict; it is freed when the last of them is.
    path : str
        A path inside the store that every key is under.
    read_only : bool
        Refuse writes when true.
    """

    def __init__(self, name: str | None = None, *, path: str = "", read_only: bool = False) -> None:
        base, self._name = _REGISTRY.get_or_create(name)
        self._base = base
        self.path = path.strip("/")
        view = _Prefixed(base, self.path + "/") if self.path else base
        super().__init__(view, read_only=read_only)

    @property
    def name(self) -> str:
        """The name in the store's ``memory://`` URL."""
        return self._name

    @classmethod
    def from_url(cls, url: str, *, read_only: bool = False) -> ManagedMemoryStore:
        """The store of a ``memory://name[/path]`` URL; ``ValueError`` when no store
        of that name is alive."""
        name, path = _split_url(url)
        if _REGISTRY.get(name) is None:
            raise ValueError(
                f"no memory store is named {name!r} (it was never made, or was freed): {url}"
            )
        return cls(name, path=path, read_only=read_only)

    def __str__(self) -> str:
        return f"memory://{self._name}" + (f"/{self.path}" if self.path else "")

    def __repr__(self) -> str:
        return f"ManagedMemoryStore('{self}')"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ManagedMemoryStore)
            and other._base is self._base
            and other.path == self.path
            and other.read_only == self.read_only
        )

    def __hash__(self) -> int:
        return hash((id(self._base), self.path))

    def __reduce__(self) -> Any:
        # a copy in another process has no registry entry: it gets the name, a new dict
        return (
            ManagedMemoryStore,
            (self._name,),
            {"path": self.path, "_read_only": self.read_only},
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._read_only = state["_read_only"]
        if self.path:
            self._store_dict = _Prefixed(self._base, self.path + "/")

    def lock_keys(self, keys: Iterable[str]) -> _KeyLocks:
        # locks are per backing dict: stores over other paths of it share them
        prefix = self.path + "/" if self.path else ""
        return _KeyLocks(self._base, [prefix + k for k in keys])


def managed_store_for_url(url: str, read_only: bool) -> ManagedMemoryStore | None:
    """The managed store a ``memory://`` URL names, if one of that name is alive
    (else ``None``: the URL goes to fsspec's memory file system, as before)."""
    name, _ = _split_url(url)
    if _REGISTRY.get(name) is None:
        return None
    return ManagedMemoryStore.from_url(url, read_only=read_only)


class GpuMemoryStore(MemoryStore):
    """An in-memory store whose values live in GPU memory (CuPy ``uint8`` arrays), as
    zarr-python's ``GpuMemoryStore``. Reads copy a value back to the host: the codecs
    then decode it as for any store. Needs CuPy and a CUDA device.

    Parameters
    ----------
    store_dict : MutableMapping, optional
        The mapping holding the device arrays (a new dict when omitted).
    read_only : bool
        Refuse writes when true.
    """

    def __init__(
        self, store_dict: MutableMapping[str, Any] | None = None, *, read_only: bool = False
    ) -> None:
        try:
            self._cp = _device_cupy()
        except RuntimeError as e:
            raise RuntimeError(f"GpuMemoryStore needs CuPy and a CUDA device: {e}") from e
        super().__init__(store_dict, read_only=read_only)

    @classmethod
    def from_dict(cls, store_dict: MutableMapping[str, Any]) -> GpuMemoryStore:
        """A store holding a device copy of each value of ``store_dict``."""
        store = cls()
        for key, value in store_dict.items():
            store._store_dict[key] = store._to_device(value)
        return store

    def __repr__(self) -> str:
        return f"GpuMemoryStore(<{len(self._store_dict)} keys>)"

    def __str__(self) -> str:
        return f"gpumemory://{id(self._store_dict)}"

    def _to_device(self, value: Any) -> Any:
        if hasattr(value, "__cuda_array_interface__"):
            return self._cp.asarray(value).view(self._cp.uint8).ravel()
        host = np.frombuffer(bytes(as_bytes_like(value)), dtype=np.uint8)
        return self._cp.asarray(host)

    def _as_bytes(self, value: Any) -> bytes:  # type: ignore[override]
        if hasattr(value, "__cuda_array_interface__"):
            return self._cp.asnumpy(value).tobytes()
        return MemoryStore._as_bytes(value)

    async def set(self, key: str, value: Any, byte_range: tuple[int, int] | None = None) -> None:
        await super().set(key, value, byte_range)
        self._store_dict[key] = self._to_device(self._store_dict[key])

    async def getsize(self, key: str) -> int:
        try:
            value = self._store_dict[key]
        except KeyError:
            raise FileNotFoundError(key) from None
        return int(value.nbytes) if hasattr(value, "nbytes") else len(value)
