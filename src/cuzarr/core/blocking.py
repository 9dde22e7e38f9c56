"""Metadata operations of the sync API run in the calling thread.

A sync call normally hands its coroutine to cuzarr's event-loop thread and waits
(:func:`cuzarr.core.sync.sync`). On this machine that round trip alone cost
~70 us: more than writing an array's metadata to a memory store, and a third of
``create_array`` on local disk. For stores with cheap blocking I/O (their
``sync_io()``), :func:`run_blocking` instead drives the same coroutine in the
calling thread with :data:`BLOCKING` set. The code it reaches then does its store
I/O through :func:`blocking_path` (the store's blocking calls behind the async
methods it awaits), so no ``await`` suspends; where that cannot be done it raises
:class:`NotBlocking` *before writing anything*, and :func:`run_blocking` runs a
fresh coroutine on the loop instead.

Callers only hand :func:`run_blocking` coroutines whose every store access goes
through :func:`blocking_path` (creating a node: no chunk data). One that suspends
anyway is a bug, reported as such.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from cuzarr.storage.base import normalize_key
from cuzarr.storage.common import StorePath

T = TypeVar("T")

__all__ = ["BLOCKING", "NotBlocking", "blocking_path", "run_blocking"]

#: Set while :func:`run_blocking` drives a coroutine in the calling thread.
BLOCKING: ContextVar[bool] = ContextVar("cuzarr_blocking", default=False)


class NotBlocking(Exception):
    """This operation cannot run in the calling thread (raised before any write)."""


class _BlockingStore:
    """A store's ``sync_io()`` behind the async calls the node-metadata helpers
    make (``get_many``, ``set_many``, ``delete``): awaiting them never suspends.
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

    def __repr__(self) -> str:
        return repr(self._store)

    def __str__(self) -> str:
        return str(self._store)


def blocking_path(sp: StorePath, *, overwrite: bool = False) -> StorePath:
    """``sp`` itself, or, under :func:`run_blocking`, ``sp`` over its store's
    blocking I/O; :class:`NotBlocking` when the store has none, or ``overwrite``
    (deleting a node's subtree is not among the blocking calls)."""
    if not BLOCKING.get():
        return sp
    sio = sp.store.sync_io() if not overwrite else None
    if sio is None:
        raise NotBlocking
    return StorePath(_BlockingStore(sp.store, sio), sp.path)  # type: ignore[arg-type]


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` in the calling thread with :data:`BLOCKING` set, or, if it
    raises :class:`NotBlocking`, a new ``make()`` on cuzarr's event loop.

    Parameters
    ----------
    make : callable
        Returns the coroutine; called a second time for the loop.

    Returns
    -------
    The coroutine's result.
    """
    from cuzarr.core import sync as _sync

    # cuzarr's threads start now, as they did when every call went through the
    # loop: a thread Python waits for at exit cannot start them any more
    _sync.get_loop()
    if threading.current_thread() is _sync._thread:
        return _sync.sync(make())  # the sync API on cuzarr's own loop: its error
    token = BLOCKING.set(True)
    try:
        coro = make()
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except NotBlocking:
            pass
        else:
            coro.close()
            raise RuntimeError(
                "cuzarr internal error: an operation run in the calling thread waited "
                "on the event loop"
            )
    finally:
        BLOCKING.reset(token)
    return _sync.sync(make())
