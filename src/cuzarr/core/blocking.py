"""Metadata operations of the sync API run in the calling thread.

A sync call normally hands its coroutine to cuzarr's event-loop thread and waits
(:func:`cuzarr.runtime.sync.sync`). On this machine that round trip alone cost
~70 us: more than writing an array's metadata to a memory store, and a third of
``create_array`` on local disk. For stores with cheap blocking I/O (their
``sync_io()``), :func:`run_blocking` instead drives the same coroutine in the
calling thread with :data:`BLOCKING` set. The code it reaches then does its store
I/O through :func:`on_blocking_io` (the store's blocking calls behind the async
methods it awaits), so no ``await`` suspends; where that cannot be done (another
store, an overwrite) it suspends *before touching the store*, and
:func:`run_blocking` hands that same coroutine, as it stands, to the loop. The
coroutine is made once: its arguments (an iterator given as ``shape=``, say) are
used once, and what it did before the hand-over (checks, building metadata) is
not done again.

Callers only hand :func:`run_blocking` coroutines whose every store access goes
through :func:`on_blocking_io` (creating a node: no chunk data). One that
suspends on anything else is a bug, reported as such.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from cuzarr.storage.base import normalize_key
from cuzarr.storage.common import StorePath

T = TypeVar("T")

__all__ = ["BLOCKING", "on_blocking_io", "run_blocking"]

#: Set while :func:`run_blocking` drives a coroutine in the calling thread.
BLOCKING: ContextVar[bool] = ContextVar("cuzarr_blocking", default=False)


class _BlockingStore:
    """A store's ``sync_io()`` behind the async calls the node-metadata helpers
    make (``get``, ``get_many``, ``set``, ``set_many``, ``delete``): awaiting
    them never suspends.
    It prints as the store, so that errors read as they do on the loop."""

    __slots__ = ("_sio", "_store")

    def __init__(self, store: Any, sio: Any) -> None:
        self._store = store
        self._sio = sio

    @property
    def read_only(self) -> bool:
        return bool(self._store.read_only)

    async def get_many(self, keys: Sequence[str], prototype: Any = None) -> list[Any]:
        # whole values as bytes (get_ranges), as load_node_metadata_sync reads them
        return list(self._sio.get_ranges([(k, None) for k in keys]))

    async def set_many(self, items: Sequence[tuple[str, Any]]) -> None:
        for key, _ in items:
            normalize_key(key)  # the async set_many's check
        self._sio.set_many(list(items))

    async def delete(self, key: str) -> None:
        self._sio.delete_many([key])

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        return self._sio.get_ranges([(key, byte_range)])[0]

    async def set(self, key: str, value: Any) -> None:
        await self.set_many([(key, value)])

    def __repr__(self) -> str:
        return repr(self._store)

    def __str__(self) -> str:
        return str(self._store)


# the async methods the node-metadata helpers call, which _BlockingStore replaces
_FACADE_METHODS = (
    "get",
    "get_many",
    "get_partial_values",
    "set",
    "set_many",
    "delete",
    "delete_many",
)


@functools.lru_cache(maxsize=256)
def _offers_own_batches(cls: type) -> bool:
    """Whether ``cls`` leaves the batch methods the facade replaces as the class
    that gives it ``sync_io`` defines them: a subclass of ``MemoryStore`` or
    ``LocalStore`` that overrides ``set_many`` (say) sees every metadata write
    through it, as it did before the facade (``sync_io`` itself only looks at
    ``get``/``set``/``delete``)."""
    owner = next((c for c in cls.__mro__ if "sync_io" in c.__dict__), None)
    return owner is not None and all(
        getattr(cls, n, None) is getattr(owner, n, None) for n in _FACADE_METHODS
    )


def _facade_sio(store: Any) -> Any:
    """``store.sync_io()`` where the facade may stand for ``store``'s async batch
    methods (those of every store a ``WrapperStore`` hands them to), else None."""
    # (no WrapperStore exists unless its module, loaded lazily, is)
    wrapper = sys.modules.get("cuzarr.storage.wrapper")
    inner = store
    while True:
        if not _offers_own_batches(type(inner)):
            return None
        if wrapper is None or not isinstance(inner, wrapper.WrapperStore):
            return store.sync_io()
        inner = inner._store


def _blocking_path(sp: StorePath, overwrite: bool) -> StorePath | None:
    """``sp`` over its store's blocking I/O, or None when the store has none, or
    ``overwrite`` (deleting a node's subtree is not among the blocking calls)."""
    sio = _facade_sio(sp.store) if not overwrite else None
    if sio is None:
        return None
    return StorePath(_BlockingStore(sp.store, sio), sp.path)  # type: ignore[arg-type]


class _ToLoop:
    """Awaited where an operation :func:`run_blocking` drives must go on on the
    loop: the coroutine suspends, yielding this object, and is handed over."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield self


_TO_LOOP = _ToLoop()


async def on_blocking_io(sp: StorePath, *, overwrite: bool = False) -> StorePath:
    """``sp`` itself, or, under :func:`run_blocking`, ``sp`` over its store's
    blocking I/O. Where that cannot be (no blocking I/O, a store whose batch
    methods are its own, ``overwrite``), the calling coroutine moves to the loop
    here, before the store is touched, and gets ``sp`` back there."""
    if not BLOCKING.get():
        return sp
    blocking = _blocking_path(sp, overwrite)
    if blocking is not None:
        return blocking
    await _TO_LOOP  # run_blocking goes on with this coroutine on the loop
    return sp


@types.coroutine
def _resume(coro: Coroutine[Any, Any, T]) -> Generator[Any, Any, T]:
    # ``await coro`` refuses a coroutine suspended in an ``await``; ``yield from``
    # resumes it (sending None into _ToLoop.__await__) and passes on everything
    # (values, cancellation) as ``await`` would.
    return (yield from coro)  # type: ignore[misc]


async def _continue(coro: Coroutine[Any, Any, T]) -> T:
    return await _resume(coro)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` in the calling thread with :data:`BLOCKING` set; where it
    awaits :func:`on_blocking_io` and the store cannot serve it there, the
    coroutine goes on, as it is, on cuzarr's event loop.

    Parameters
    ----------
    make : callable
        Returns the coroutine (called once).

    Returns
    -------
    The coroutine's result.
    """
    from cuzarr.runtime import sync as _sync

    # cuzarr's threads start now, as they did when every call went through the
    # loop: a thread Python waits for at exit cannot start them any more
    _sync.get_loop()
    if threading.current_thread() is _sync._thread:
        return _sync.sync(make())  # the sync API on cuzarr's own loop: its error
    token = BLOCKING.set(True)
    try:
        coro = make()
        try:
            waited = coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if waited is not _TO_LOOP:
            coro.close()
            raise RuntimeError(
                "cuzarr internal error: an operation run in the calling thread "
                "waited on the event loop"
            )
    finally:
        BLOCKING.reset(token)
    # the rest on the loop, outside BLOCKING (the loop's task gets this context)
    return _sync.sync(_continue(coro))
