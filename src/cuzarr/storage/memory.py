"""An in-memory store over a ``dict``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, MutableMapping, Sequence
from typing import Any

from cuzarr.storage import keylocks
from cuzarr.storage.base import (
    ByteRequest,
    Store,
    SyncIO,
    as_bytes_like,
    normalize_key,
    slice_bytes,
)

__all__ = ["MemoryStore"]

# In-process per-key locks, taken by the engine around chunk writes so concurrent
# partial writers in threads never lose each other's updates. A locker takes all
# its keys at once or none, so none deadlock. Held keys per mapping, by id
# (mappings need not be hashable); an entry goes when its set empties, so a freed
# mapping's id can be reused safely.
_HELD: dict[int, set[str]] = {}
_HELD_GUARD = threading.Lock()


class _KeyLocks:
    """Exclusive locks on a set of keys of one mapping, for ``async with`` (polled,
    never blocking the loop) or ``try_acquire``/``release`` from worker threads."""

    def __init__(self, mapping: object, keys: Iterable[str]) -> None:
        self.mid = id(mapping)
        self.wanted = keys if isinstance(keys, (list, tuple)) else list(keys)
        self.held = False

    def try_acquire(self) -> bool:
        with _HELD_GUARD:
            held = _HELD.get(self.mid)
            if held is None:
                _HELD[self.mid] = set(self.wanted)
            elif held.isdisjoint(self.wanted):
                held.update(self.wanted)
            else:
                return False
        self.held = True
        return True

    def release(self) -> None:
        if self.held:
            with _HELD_GUARD:
                held = _HELD[self.mid]
                held.difference_update(self.wanted)
                if not held:
                    del _HELD[self.mid]
            self.held = False

    async def __aenter__(self) -> _KeyLocks:
        delay = 0.0005
        while not self.try_acquire():
            keylocks.check_waiter(self.mid, self.wanted)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        keylocks.held_by_running_loop(self.mid, self.wanted)
        return self

    async def __aexit__(self, *exc: object) -> None:
        keylocks.released(self.mid, self.wanted)
        self.release()


class MemoryStore(Store):
    """Keys and values held in a (possibly caller-owned) mutable mapping.

    Parameters
    ----------
    store_dict
        The mapping to use; a caller's ``dict`` sees every write. A new dict
        when omitted.
    read_only
        Refuse writes when true.
    """

    def __init__(
        self, store_dict: MutableMapping[str, Any] | None = None, *, read_only: bool = False
    ) -> None:
        super().__init__(read_only=read_only)
        self._store_dict: MutableMapping[str, Any] = {} if store_dict is None else store_dict

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._store_dict)} keys>)"

    def __str__(self) -> str:
        return f"memory://{id(self._store_dict)}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryStore) and other._store_dict is self._store_dict

    def __hash__(self) -> int:  # equal stores (one mapping) hash alike
        return id(self._store_dict)

    @staticmethod
    def _as_bytes(value: Any) -> bytes:
        if isinstance(value, bytes):
            return value
        to_bytes = getattr(value, "to_bytes", None)  # zarr-python Buffer objects
        if callable(to_bytes):
            return to_bytes()
        return bytes(value)

    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        value = self._store_dict.get(key)
        if value is None:
            return None
        return slice_bytes(self._as_bytes(value), byte_range)

    async def get_many(self, keys: Sequence[str], prototype: Any = None) -> list[bytes | None]:
        if type(self).get is not MemoryStore.get:
            return await super().get_many(keys, prototype)
        return self._get_many_sync(keys)

    async def exists(self, key: str) -> bool:
        return key in self._store_dict

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key`` (``FileNotFoundError`` if it holds nothing)."""
        try:
            value = self._store_dict[key]
        except KeyError:
            raise FileNotFoundError(key) from None
        try:
            return memoryview(value).nbytes  # a caller's dict may hold numpy arrays
        except TypeError:
            return len(value)

    async def set(self, key: str, value: Any, byte_range: tuple[int, int] | None = None) -> None:
        """Store ``value`` at ``key``; with ``byte_range`` (start, end), replace
        those bytes of the value already there (zarr-python's ``MemoryStore``)."""
        self._check_writable()
        normalize_key(key)
        value = bytes(as_bytes_like(value))
        if byte_range is not None:
            old = self._store_dict.get(key)
            if old is None:
                raise KeyError(key)
            start, end = byte_range
            old = self._as_bytes(old)
            value = old[:start] + value + old[end:]
        self._store_dict[key] = value

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if type(self).set is not MemoryStore.set:
            return await super().set_many(items)
        self._check_writable()
        for key, _ in items:
            normalize_key(key)
        for key, value in items:
            self._store_dict[key] = value if isinstance(value, bytes) else bytes(value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        self._store_dict.pop(key, None)

    async def delete_many(self, keys: Sequence[str]) -> None:
        if type(self).delete is not MemoryStore.delete:
            return await super().delete_many(keys)
        self._check_writable()
        for key in keys:
            self._store_dict.pop(key, None)

    def lock_keys(self, keys: Iterable[str]) -> _KeyLocks:
        """Exclusive in-process locks on ``keys`` (shared by every ``MemoryStore``
        over the same mapping), for ``async with``; plain ``set`` does not take them."""
        return _KeyLocks(self._store_dict, keys)

    def sync_io(self) -> SyncIO | None:
        if not self._keeps(MemoryStore, "get", "set", "delete"):
            return None
        return SyncIO(
            self._get_many_sync,
            self._set_many_sync,
            self._delete_many_sync,
            self._get_ranges_sync,
            get_sizes=self._sizes_sync,
        )

    def _sizes_sync(self, keys: Sequence[str]) -> list[int | None]:
        d = self._store_dict
        return [None if (v := d.get(k)) is None else len(self._as_bytes(v)) for k in keys]

    def _get_ranges_sync(self, reqs: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        d = self._store_dict
        out: list[bytes | None] = []
        for key, rng in reqs:
            value = d.get(key)
            out.append(None if value is None else slice_bytes(self._as_bytes(value), rng))
        return out

    def _get_many_sync(self, keys: Sequence[str]) -> list[bytes | None]:
        d = self._store_dict
        out: list[bytes | None] = []
        for key in keys:
            value = d.get(key)
            out.append(
                value if value is None or isinstance(value, bytes) else self._as_bytes(value)
            )
        return out

    def _set_many_sync(self, items: Sequence[tuple[str, bytes]]) -> None:
        # Only the engine calls this, with keys it built from validated node paths.
        self._check_writable()
        for key, value in items:
            self._store_dict[key] = value if isinstance(value, bytes) else bytes(value)

    def _delete_many_sync(self, keys: Sequence[str]) -> None:
        self._check_writable()
        for key in keys:
            self._store_dict.pop(key, None)

    def list(self) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            for key in list(self._store_dict):
                yield key

        return gen()
