"""Who holds a store's per-key write locks, so that a wait that can never end is
refused instead of hanging.

A synchronous call made from a thread that runs an event loop (a coroutine in
Jupyter, a web handler) blocks that loop until cuzarr's own loop has done the
work. If an async write of that blocked loop holds the lock of a chunk the call
must also lock, the holder cannot run again until the call returns, and the call
cannot return until the holder lets go. ``runtime.sync.sync`` marks the operations it
runs with the loop it blocks (``BLOCKED_LOOP``); the stores' ``lock_keys`` note
the loop of each holder, and a waiter working for a blocked loop that finds its
key held by that very loop raises ``DeadlockError`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable
from typing import Any

from cuzarr.errors import DeadlockError
from cuzarr.runtime.sync import BLOCKED_LOOP

__all__ = ["BLOCKED_LOOP", "check_waiter", "held_by_running_loop", "released"]


_owners: dict[tuple[Any, str], asyncio.AbstractEventLoop] = {}
_guard = threading.Lock()


def held_by_running_loop(space: Any, keys: Iterable[Any]) -> None:
    """Note that a task of the running loop took the locks of ``keys`` in ``space``
    (one store's lock namespace)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    with _guard:
        for k in keys:
            _owners[(space, k)] = loop


def released(space: Any, keys: Iterable[Any]) -> None:
    """Forget the holders of ``keys``: called by a holder for exactly the keys it
    noted (so no other task holds them meanwhile: locks are exclusive)."""
    loop = None
    with contextlib.suppress(RuntimeError):
        loop = asyncio.get_running_loop()
    with _guard:
        for k in keys:
            if _owners.get((space, k)) is loop:
                del _owners[(space, k)]


def check_waiter(space: Any, keys: Iterable[Any], wanted: Any = None) -> None:
    """Raise ``DeadlockError`` if this waiter serves a synchronous call that blocks
    the loop holding one of ``keys`` (lock names: store keys, or a store's lock
    offsets, with ``wanted`` the store keys they lock, for the message)."""
    blocked = BLOCKED_LOOP.get()
    if blocked is None:
        return
    with _guard:
        stuck = [k for k in keys if _owners.get((space, k)) is blocked]
    if stuck:
        what = repr(stuck[0]) if wanted is None else f"one of {list(wanted)[:4]!r}"
        raise DeadlockError(
            f"a synchronous cuzarr call made from inside a running event loop must lock "
            f"{what}, which an async operation of that same loop holds (it is writing "
            "that chunk); the loop cannot run while the call blocks it. Await the async "
            "API (cuzarr.api.asynchronous) in coroutines instead"
        )
