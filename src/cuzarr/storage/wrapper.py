"""Stores that wrap another store: ``WrapperStore`` (delegates everything, a base
for stores that change or watch another's behaviour) and ``LoggingStore`` (logs
and counts every call), under zarr-python's names and signatures."""

from __future__ import annotations

import copy
import logging
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cuzarr.storage.base import ByteRequest, Store, SyncIO

__all__ = ["LoggingStore", "WrapperStore"]

# what a subclass may override to see (or change) every single-key operation
_HOOKS = ("get", "set", "delete")


def _forwarded(name: str) -> Any:
    """A read-only property answering the wrapped store's attribute ``name``."""
    return property(lambda self: getattr(self._store, name), doc=f"The wrapped store's ``{name}``.")


class WrapperStore(Store):
    """A store that hands every operation to the store it wraps (``._store``).

    Subclass it to change or watch another store's behaviour: a subclass that
    overrides ``get``, ``set`` or ``delete`` sees every read, write or delete the
    library makes through it (the batch methods then go through those overrides,
    and the engine's blocking fast paths are off). A plain ``WrapperStore`` keeps
    the wrapped store's fast paths.

    Parameters
    ----------
    store
        The store to wrap.
    """

    def __init__(self, store: Store) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"WrapperStore wraps a cuzarr Store, got {type(store).__name__}")
        super().__init__(read_only=store.read_only)
        self._store = store
        if callable(getattr(store, "lock_keys", None)):
            # per-key locks are about keys, not about how values travel
            self.lock_keys = store.lock_keys

    def _with_store(self, store: Store) -> WrapperStore:
        """A wrapper like this one around ``store``: a shallow copy, so a subclass's
        state (counters, logs) is shared with the copy that, say, ``open_array(...,
        mode="r")`` makes with ``with_read_only``."""
        other = copy.copy(self)
        other._store = store
        other._read_only = store.read_only
        if callable(getattr(store, "lock_keys", None)):
            other.lock_keys = store.lock_keys
        return other

    @classmethod
    async def open(cls, store_cls: type[Store], *args: Any, **kwargs: Any) -> WrapperStore:
        """Wrap ``store_cls(*args, **kwargs)`` (zarr-python's ``WrapperStore.open``)."""
        return cls(store_cls(*args, **kwargs))

    def _plain(self, *names: str) -> bool:
        """Whether this class leaves ``names`` as WrapperStore defines them."""
        return self._keeps(WrapperStore, *names)

    # -- capabilities ------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return self._store.read_only

    def _check_writable(self) -> None:
        self._store._check_writable()

    # the wrapped store's capabilities, read through
    supports_writes = _forwarded("supports_writes")
    supports_deletes = _forwarded("supports_deletes")
    supports_listing = _forwarded("supports_listing")
    supports_partial_writes = _forwarded("supports_partial_writes")

    @property
    def takes_parts(self) -> bool:
        # a Concat may reach the wrapped store only where no override looks at values
        return self._plain("set", "set_many") and bool(getattr(self._store, "takes_parts", False))

    def sync_io(self) -> SyncIO | None:
        if not self._plain(*_HOOKS, "get_many", "set_many", "delete_many"):
            return None
        return self._store.sync_io()

    def with_read_only(self, read_only: bool = False) -> WrapperStore:
        return self._with_store(self._store.with_read_only(read_only))

    # -- reads -------------------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        return await self._store.get(key, prototype, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[bytes | None]:
        if not self._plain("get"):
            return await super().get_partial_values(prototype, key_ranges)
        return await self._store.get_partial_values(prototype, key_ranges)

    async def get_many(self, keys: Sequence[str], prototype: Any = None) -> list[bytes | None]:
        if not self._plain("get"):
            return await super().get_many(keys, prototype)
        return await self._store.get_many(keys, prototype)

    async def exists(self, key: str) -> bool:
        return await self._store.exists(key)

    async def getsize(self, key: str) -> int:
        if not self._plain("get"):
            return await super().getsize(key)
        return await self._store.getsize(key)

    async def getsize_prefix(self, prefix: str) -> int:
        return await self._store.getsize_prefix(prefix)

    # -- writes ------------------------------------------------------------------
    async def set(self, key: str, value: Any) -> None:
        await self._store.set(key, value)

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        if not self._plain("set"):
            return await super().set_if_not_exists(key, value)
        await self._store.set_if_not_exists(key, value)

    async def set_many(self, items: Sequence[tuple[str, Any]]) -> None:
        if not self._plain("set"):
            return await super().set_many(items)
        await self._store.set_many(items)

    async def delete(self, key: str) -> None:
        await self._store.delete(key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        if not self._plain("delete"):
            return await super().delete_many(keys)
        await self._store.delete_many(keys)

    async def delete_dir(self, prefix: str) -> None:
        if not self._plain("delete"):
            return await super().delete_dir(prefix)
        await self._store.delete_dir(prefix)

    async def clear(self) -> None:
        if not self._plain("delete"):
            return await super().clear()
        await self._store.clear()

    # -- listing -----------------------------------------------------------------
    def list(self) -> AsyncIterator[str]:
        return self._store.list()

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        return self._store.list_prefix(prefix)

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        return self._store.list_dir(prefix)

    async def is_empty(self, prefix: str = "") -> bool:
        return await self._store.is_empty(prefix)

    # -- life cycle --------------------------------------------------------------
    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> WrapperStore:
        self._store.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.__exit__(*exc)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._store == other._store  # type: ignore[attr-defined]

    def __hash__(self) -> int:  # equal stores hash alike
        return hash((type(self), self._store))

    def __str__(self) -> str:
        return f"wrapping-{self._store}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r})"


class LoggingStore(WrapperStore):
    """A store that logs every call to the store it wraps, and counts them.

    Each call logs ``Calling <Store>.<method>(<key>)`` and ``Finished ... [<s> s]``
    at INFO level on the logger ``LoggingStore(<store>)``; ``counter[method]``
    counts the calls. Batch reads, writes and deletes are logged key by key, so
    ``counter["get"]`` is the number of values (chunks, shard ranges, metadata
    documents) read.

    Parameters
    ----------
    store
        The store to wrap.
    log_level
        Level of the logger (default ``"DEBUG"``: every call shows).
    log_handler
        Handler to add to the logger. Without one, a handler that writes to
        standard output is added when no logger up the hierarchy has a handler.
    """

    def __init__(
        self,
        store: Store,
        log_level: str = "DEBUG",
        log_handler: logging.Handler | None = None,
    ) -> None:
        super().__init__(store)
        self.counter: defaultdict[str, int] = defaultdict(int)
        self.log_level = log_level
        self.log_handler = log_handler
        self.logger = logging.getLogger(f"LoggingStore({store})")
        self.logger.setLevel(log_level)
        if log_handler is not None:
            if log_handler not in self.logger.handlers:
                self.logger.addHandler(log_handler)
        elif not self.logger.hasHandlers():
            # nothing configured anywhere: show the calls on standard output
            handler = logging.StreamHandler(stream=sys.stdout)
            handler.setLevel(log_level)
            handler.setFormatter(
                logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s")
            )
            self.logger.addHandler(handler)

    @classmethod
    async def open(cls, store_cls: type[Store], *args: Any, **kwargs: Any) -> LoggingStore:
        level = kwargs.pop("log_level", "DEBUG")
        handler = kwargs.pop("log_handler", None)
        return cls(store_cls(*args, **kwargs), log_level=level, log_handler=handler)

    @contextmanager
    def log(self, hint: Any = "", *, method: str | None = None) -> Iterator[None]:
        """Log the start and end (with its duration) of one call, and count it,
        as zarr-python's ``LoggingStore.log(hint)``: ``method`` defaults to the
        name of the method that opened the context (a subclass's own methods
        log under their names)."""
        if method is None:
            # the caller of contextmanager's __enter__ -> this generator
            method = sys._getframe(2).f_code.co_name
        op = f"{type(self._store).__name__}.{method}" + (f"({hint})" if hint != "" else "")
        self.counter[method] += 1
        self.logger.info(" Calling %s", op)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.logger.info("Finished %s [%.2f s]", op, time.perf_counter() - t0)

    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        with self.log(method="get", hint=key):
            return await self._store.get(key, prototype, byte_range)

    async def exists(self, key: str) -> bool:
        with self.log(method="exists", hint=key):
            return await self._store.exists(key)

    async def getsize(self, key: str) -> int:
        with self.log(method="getsize", hint=key):
            return await self._store.getsize(key)

    async def set(self, key: str, value: Any) -> None:
        with self.log(method="set", hint=key):
            await self._store.set(key, value)

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        with self.log(method="set_if_not_exists", hint=key):
            await self._store.set_if_not_exists(key, value)

    async def delete(self, key: str) -> None:
        with self.log(method="delete", hint=key):
            await self._store.delete(key)

    async def delete_dir(self, prefix: str) -> None:
        with self.log(method="delete_dir", hint=prefix):
            await self._store.delete_dir(prefix)

    async def clear(self) -> None:
        with self.log(method="clear"):
            await self._store.clear()

    async def is_empty(self, prefix: str = "") -> bool:
        with self.log(method="is_empty", hint=prefix):
            return await self._store.is_empty(prefix)

    def list(self) -> AsyncIterator[str]:
        return self._logged_listing("list", "", self._store.list())

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        return self._logged_listing("list_prefix", prefix, self._store.list_prefix(prefix))

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        return self._logged_listing("list_dir", prefix, self._store.list_dir(prefix))

    async def _logged_listing(
        self, method: str, hint: str, it: AsyncIterator[str]
    ) -> AsyncIterator[str]:
        with self.log(hint, method=method):
            async for key in it:
                yield key

    def __str__(self) -> str:
        return f"logging-{self._store}"
