"""One background event loop that runs every async operation of the sync API.

The sync API (``Array``, ``Group``, ``open_array``...) submits coroutines to this
loop and waits for them, so each operation is written once, as async code.
Codec work runs in a thread pool owned here as well, sized by
``threading.max_workers``.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from cuzarr.config import config

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pool: ThreadPoolExecutor | None = None
_pool_size: int | None = None
_pool_pid: int | None = None
_pid: int | None = None


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


def get_loop() -> asyncio.AbstractEventLoop:
    """Return the background loop, starting it (again after a fork) if needed."""
    global _loop, _thread, _pid
    if _loop is not None and _pid == os.getpid():
        return _loop
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_run_loop, args=(loop,), name="cuzarr-io", daemon=True)
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
    return _loop


def max_workers() -> int:
    """Threads used for codec work: ``threading.max_workers`` or the CPU count."""
    n = config.get("threading.max_workers")
    if n is None:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, int(n or 1))


def get_executor() -> ThreadPoolExecutor:
    """Return the shared codec thread pool, rebuilt when its configured size changes."""
    global _pool, _pool_size, _pool_pid
    n = max_workers()
    if _pool is not None and _pool_size == n and _pool_pid == os.getpid():
        return _pool
    with _lock:
        if _pool is None or _pool_size != n or _pool_pid != os.getpid():
            # A child forked from a process with a pool inherits it without its
            # threads: it builds its own (and leaves the inherited one alone).
            old, old_pid = _pool, _pool_pid
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="cuzarr-codec")
            _pool_size, _pool_pid = n, os.getpid()
            if old is not None and old_pid == _pool_pid:
                old.shutdown(wait=False)
    return _pool


def sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the background loop and block until it finishes.

    Safe to call from any thread, including one that runs its own event loop
    (Jupyter). Calling it from inside a coroutine that runs on cuzarr's own loop
    would deadlock, so that raises ``RuntimeError`` instead.
    """
    loop = get_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError(
            "cuzarr's synchronous API was called from inside its own event loop; "
            "use the async API (cuzarr.api.asynchronous) from coroutines"
        )
    if timeout is None:
        timeout = config.get("async.timeout")
    started, ended = threading.Event(), threading.Event()

    async def run() -> T:
        started.set()
        try:
            return await coro
        finally:
            ended.set()

    future = asyncio.run_coroutine_threadsafe(run(), loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        if future.done():
            return future.result()  # it finished (or itself raised TimeoutError)
        # Stop the operation, and return only once it has unwound, so that no
        # write of a call reported as timed out lands afterwards. The probe runs
        # on the loop after the cancellation was delivered: a task that had not
        # started by then never runs at all.
        future.cancel()
        probe = threading.Event()
        loop.call_soon_threadsafe(probe.set)
        probe.wait()
        if started.is_set():
            ended.wait()
        else:
            coro.close()
        raise TimeoutError(
            f"cuzarr operation did not finish within {timeout} s (config 'async.timeout');"
            " it was cancelled"
        ) from None
    except BaseException:  # KeyboardInterrupt while waiting: stop the operation too
        future.cancel()
        raise


_semaphores: dict[int, tuple[int, asyncio.Semaphore]] = {}


def io_semaphore() -> asyncio.Semaphore:
    """The one global limit on concurrent store requests, per running loop."""
    loop = asyncio.get_running_loop()
    limit = int(config.get("async.concurrency"))
    entry = _semaphores.get(id(loop))
    if entry is None or entry[0] != limit:
        entry = (limit, asyncio.Semaphore(limit))
        _semaphores[id(loop)] = entry
    return entry[1]


def _shutdown() -> None:
    loop = _loop
    if loop is not None and loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)


atexit.register(_shutdown)
