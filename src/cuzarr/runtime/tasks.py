"""Tasks and threads: gathering that cancels the rest, cancellation-safe pool jobs,
and the pool that runs blocking store calls (``in_thread``)."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Iterable
from typing import Any

from cuzarr.runtime.pool import _Pool

__all__ = ["gather_or_cancel", "in_thread", "io_executor", "run_job"]


async def _wait_out(futures: Iterable[Any]) -> bool:
    """Wait until every one of ``futures`` is done, however often this task is
    cancelled meanwhile; whether a cancellation arrived."""
    cancelled = False
    pending = {f for f in futures if not f.done()}
    while pending:
        try:
            _, pending = await asyncio.wait(pending)
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


async def gather_or_cancel(*aws: Any) -> list[Any]:
    """``asyncio.gather``, except that when one fails (or this call is cancelled),
    the others are cancelled and waited for before the error propagates: once an
    operation has raised, none of its writes may still land, nor an error be left
    unseen. (Not built on ``gather``: cancelling that cancels the children a
    second time, which would cut short their own waits for threads.)"""
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await _wait_out(tasks)
        raise
    if all(t.done() and not t.cancelled() and t.exception() is None for t in tasks):
        return [t.result() for t in tasks]
    failed = next(
        (t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None
    )
    for t in tasks:
        t.cancel()
    cancelled = await _wait_out(tasks)
    for t in tasks:  # every error retrieved: none reported as "never retrieved"
        if not t.cancelled():
            t.exception()
    if cancelled or failed is None:
        raise asyncio.CancelledError
    raise failed.exception()  # type: ignore[misc]


async def run_job(executor: Any, fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` on ``executor`` (in a copy of this context). Cancelled
    before the job started, the job never runs; cancelled while it runs, this
    waits for it to end (a thread cannot be stopped), however often cancelled,
    before the cancellation goes on: a caller that has unwound knows its blocking
    work is over."""
    job = executor.submit(contextvars.copy_context().run, fn, *args)
    fut = asyncio.wrap_future(job)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if not job.cancel():
            await _wait_out([fut])
            if not fut.cancelled():
                fut.exception()  # retrieved: its error is not logged as unseen
        raise


_io_pool: Any = None
_io_pool_pid: int | None = None
_io_pool_lock = threading.Lock()


def _reset_io_pool_lock() -> None:
    # A thread of the parent (the loop's, in every in_thread call) may have held
    # the lock when another forked: the child's first call would wait forever.
    global _io_pool_lock
    _io_pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_io_pool_lock)


def _io_executor() -> Any:
    """The thread pool of ``in_thread``: one that keeps serving while the
    interpreter waits for user threads at exit (``runtime.sync._Pool``), made anew in
    a forked child, whose copy of the parent's pool has no threads."""
    global _io_pool, _io_pool_pid
    with _io_pool_lock:
        if _io_pool is None or _io_pool_pid != os.getpid():
            _io_pool = _Pool(min(32, (os.cpu_count() or 1) + 4), "cuzarr-store-io")
            _io_pool_pid = os.getpid()
        return _io_pool


async def in_thread(fn: Any, *args: Any) -> Any:
    """``asyncio.to_thread(fn, *args)`` with ``run_job``'s cancellation: a job not
    yet started never runs, a running one is waited for."""
    return await run_job(_io_executor(), fn, *args)


io_executor = _io_executor
