"""One background event loop that runs every async operation of the sync API.

The sync API (``Array``, ``Group``, ``open_array``...) submits coroutines to this
loop and waits for them, so each operation is written once, as async code.
Codec work runs in a thread pool owned here as well, sized by
``threading.max_workers``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from cuzarr.config import config
from cuzarr.runtime.pool import _Pool
from cuzarr.runtime.tasks import io_executor

T = TypeVar("T")

#: The event loop the synchronous call being served blocks (None: none); the key
#: locks of the stores (``storage.keylocks``) refuse waits that would deadlock it.
BLOCKED_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "cuzarr_blocked_loop", default=None
)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pool: ThreadPoolExecutor | None = None
_pool_size: int | None = None
_pool_pid: int | None = None


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock when another forked: the
    # child has only the forking thread, which would then wait on it forever.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
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
            # store calls in threads (asyncio.to_thread) keep working, as the
            # codec pool does, while the interpreter waits for user threads
            n_io = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default
            io_pool = _Pool(n_io, thread_name_prefix="cuzarr-io-pool")
            loop.set_default_executor(io_pool)
            thread = threading.Thread(target=_run_loop, args=(loop,), name="cuzarr-io", daemon=True)
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
            # All of cuzarr's threads start with the loop, while threads can still
            # start: a user thread that Python waits for at exit may be the first
            # to need a pool (the calling thread may have done all before inline).
            io_pool.start()
            started = loop
        else:
            started = None
    if started is not None:
        get_executor().start()  # (takes _lock itself)
        io_executor().start()
    return started if started is not None else _loop


def max_workers() -> int:
    """Threads used for codec work: ``threading.max_workers`` or the CPU count."""
    n = config.get("threading.max_workers")
    if n is None:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, int(n or 1))


def device_read_workers() -> int:
    """Threads feeding one device read: ``gpu.read_workers``, at most
    :func:`max_workers` (``None``: that many)."""
    n = config.get("gpu.read_workers", None)
    return max(1, min(max_workers(), int(n) if n else max_workers()))


def get_executor() -> _Pool:
    """Return the shared codec thread pool, rebuilt when its configured size changes."""
    global _pool, _pool_size, _pool_pid
    n = max_workers()
    if _pool is not None and _pool_size == n and _pool_pid == os.getpid():
        return _pool
    with _lock:
        if _pool is None or _pool_size != n or _pool_pid != os.getpid():
            # A child forked from a process with a pool inherits it without its
            # threads: it builds its own (and leaves the inherited one alone).
            # A resized pool is not shut down: calls still running (in other
            # threads) hold it and keep submitting batches to it. Its idle
            # threads end once the last of them lets it go (ThreadPoolExecutor
            # stops its workers when it is garbage collected).
            _pool = _Pool(max_workers=n, thread_name_prefix="cuzarr-codec")
            _pool_size, _pool_pid = n, os.getpid()
    return _pool


def _unwind_grace(timeout: float) -> float:
    """Seconds a timed-out call waits for its cancelled operation to unwind (as
    long again as the timeout, at least 1 s: enough for running batches to end)."""
    return max(1.0, float(timeout))


def _cancelled_after(timeout: float) -> TimeoutError:
    """The error of an operation cancelled when ``async.timeout`` ran out."""
    return TimeoutError(
        f"cuzarr operation did not finish within {timeout} s (config 'async.timeout');"
        " it was cancelled"
    )


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
    # state[0]: the operation started; state[1]: the caller gave up on it. Both
    # change under ``state_lock``, so that exactly one side owns ``coro``: the
    # loop runs it, or (never started) the calling thread closes it.
    state = [False, False]
    state_lock = threading.Lock()
    ended = threading.Event()
    try:
        blocked = asyncio.get_running_loop()  # this call blocks the caller's loop
    except RuntimeError:
        blocked = None

    async def run() -> T:
        with state_lock:
            if state[1]:
                raise asyncio.CancelledError
            state[0] = True
        if blocked is not None:
            BLOCKED_LOOP.set(blocked)  # this task's context and its children's
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
        # write of a call reported as timed out lands afterwards. One that has
        # not started by now never starts (the loop may not even have created
        # its task yet, when it was busy for longer than the timeout).
        future.cancel()
        with state_lock:
            state[1] = True
            started = state[0]
        if not started:
            coro.close()
        elif not ended.wait(_unwind_grace(timeout)):
            # Something the operation awaits ignores cancellation, or blocks the
            # loop thread itself: a timeout must not turn into a hang.
            raise TimeoutError(
                f"cuzarr operation did not finish within {timeout} s (config "
                f"'async.timeout') and did not stop within {_unwind_grace(timeout)} s "
                "of being cancelled; it may still complete"
            ) from None
        raise _cancelled_after(timeout) from None
    except BaseException:  # KeyboardInterrupt while waiting: stop the operation too
        future.cancel()
        raise


async def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on cuzarr's background loop, from a coroutine on any loop.

    The operations of every caller then share that loop and its one limit on
    store requests (:func:`io_semaphore`) -- the same as the sync API's -- and the
    stores' per-loop resources (HTTP sessions) it already holds; the caller's loop
    stays free while they run. Cancelling the caller cancels the operation;
    ``async.timeout`` bounds it as it bounds :func:`sync`'s (``TimeoutError``,
    the operation cancelled).
    """
    loop = get_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    running = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
    timeout = config.get("async.timeout")
    if timeout is None:
        return await running
    try:
        async with asyncio.timeout(float(timeout)) as limit:
            return await running
    except TimeoutError:
        if not limit.expired():
            raise  # the operation's own TimeoutError
        raise _cancelled_after(timeout) from None


_semaphores: dict[int, tuple[int, asyncio.Semaphore, asyncio.AbstractEventLoop]] = {}


def io_semaphore() -> asyncio.Semaphore:
    """The one global limit on concurrent store requests, per running loop."""
    loop = asyncio.get_running_loop()
    limit = int(config.get("async.concurrency"))
    entry = _semaphores.get(id(loop))
    if entry is None or entry[0] != limit or entry[2] is not loop:
        if entry is None:
            # Forget loops that have closed: a program calling asyncio.run again
            # and again would otherwise keep every one of them (and a semaphore).
            for key, e in list(_semaphores.items()):
                if e[2].is_closed():
                    _semaphores.pop(key, None)
        entry = (limit, asyncio.Semaphore(limit), loop)
        _semaphores[id(loop)] = entry
    return entry[1]


def _shutdown() -> None:
    loop = _loop
    if loop is not None and loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)


atexit.register(_shutdown)


class _Lent(ThreadPoolExecutor):
    """The store-I/O pool lent to a thread's own loop as its default executor:
    closing that loop shuts its default executor down, which must leave the
    shared pool running. (A ``ThreadPoolExecutor`` subclass, as an event loop
    requires; none of the base class's machinery is used.)"""

    def __init__(self) -> None:  # (no threads of its own)
        pass

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return io_executor().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing: the pool is cuzarr's, not the loop's."""


class _ThreadLoop:
    """A calling thread's own event loop (see :func:`run_here`), closed when
    the thread ends and drops it; made again in a forked child."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(_Lent())
        self.pid = os.getpid()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (also at interpreter exit)
            if self.pid == os.getpid() and not self.loop.is_closed():
                self.loop.close()


_here = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    held = getattr(_here, "held", None)
    if held is None or held.pid != os.getpid() or held.loop.is_closed():
        held = _here.held = _ThreadLoop()
    return held.loop


def run_here(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` to its end in the calling thread, on an event loop of this
    thread (made on its first call), and return what it returns.

    For operations whose stores do blocking I/O in worker threads (local
    files, memory): :func:`sync` hands every call to cuzarr's loop thread and
    waits for it there, two thread wake-ups of ~30 us of CPU each on a virtual
    machine plus the futures between the loops (a no-op ``sync`` call: ~220 us
    of CPU on the 2-CPU VM); a training loop makes thousands of such calls. A
    store with state bound to cuzarr's loop (an HTTP session) must go through
    :func:`sync`. From a thread that runs an event loop, and from cuzarr's own
    loop, this is :func:`sync`. ``timeout`` (default: ``async.timeout``) and an
    interrupt stop the operation as :func:`sync`'s do: it is cancelled and
    unwinds before the error is raised.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # (a notebook's loop, or cuzarr's: sync says what to do)
        return sync(coro, timeout)
    if timeout is None:
        timeout = config.get("async.timeout")
    loop = _thread_loop()
    task = loop.create_task(coro)
    try:
        if timeout is None:
            return loop.run_until_complete(task)
        return loop.run_until_complete(asyncio.wait_for(task, float(timeout)))
    except TimeoutError:
        if not task.cancelled():
            raise  # the operation's own TimeoutError
        raise _cancelled_after(timeout) from None
    except BaseException:  # KeyboardInterrupt: stop the operation, let it unwind
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise
