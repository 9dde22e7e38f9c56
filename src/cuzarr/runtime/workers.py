"""Batches run by worker loops: few thread hops for jobs that need no event loop.

A job on a store with blocking I/O (local files, memory) does its fetch, codec
work and store in one worker thread. Handing each batch to the pool from the
event loop costs a hop per batch: a wake-up of the loop thread, which on a busy
machine competes with the workers for the cores and the GIL (measured on 2
cores: repeated in-process reads of 256 x 1 MiB chunks took 0.161 s with 4
hops against 0.182 s with 64; a first read in a fresh process showed no
difference within the noise).
Here each of at most ``max_workers()`` pool tasks pulls the next batch from a
shared counter until none is left. After a time slice a task goes back to
the end of the pool's queue (by itself, not through the event loop), so other
requests queued on the shared pool still get their turn.

A batch can hand out parts of its own work with :func:`share` (a shard's inner
chunks): loops of the same call that have no batch left, and, in a call made
``helpable``, loops that never had one, take those parts too. Without it, a
write of one shard ran on one core, and the last shard of a call kept one core
busy while the others idled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzarr.runtime.sync import get_executor, max_workers

__all__ = ["SLICE_S", "pull_batches", "raise_mmap_threshold", "share"]

# How long a worker loop runs before it goes back to the end of the pool's queue.
SLICE_S = 0.02
# Outside worker loops, fewer parts than this run in turn: a pool hop (~50 us
# and a thread wake-up) costs about what a few 128 KiB inner chunks take.
POOL_SHARE_MIN = 4
# The batches whose batch (or shared work) the calling thread runs now.
_tls = threading.local()


class _Shared:
    """``fn(i)`` for ``i`` in ``range(n)``: the parts of one batch's work that
    other loops of its call may take (see :func:`share`)."""

    def __init__(self, fn: Callable[[int], Any], n: int) -> None:
        self.fn = fn
        self.n = n
        self.next = 0
        self.helpers = 0  # loops of other batches working on a part now
        self.results: list[Any] = [None] * n
        self.error: BaseException | None = None

    def open(self) -> bool:
        return self.next < self.n and self.error is None

    def work(self, lock: threading.Condition) -> None:
        """Run parts until none is left (or one failed)."""
        fn, results = self.fn, self.results
        while True:
            with lock:
                i = self.next
                if i >= self.n or self.error is not None:
                    return
                self.next = i + 1
            try:
                results[i] = fn(i)
            except BaseException as e:
                with lock:
                    if self.error is None:
                        self.error = e
                return

    def assist(self, lock: threading.Condition) -> None:
        """Run parts as a helper (counted in ``helpers`` already, under ``lock``)."""
        try:
            self.work(lock)
        finally:
            with lock:
                self.helpers -= 1
                lock.notify_all()

    def run_owned(self, lock: threading.Condition, on_close: Callable[[], Any]) -> list[Any]:
        """The owner's run: parts until none is left, then no part starts any more
        (``on_close`` runs, under ``lock``) and the helpers' parts end; the results,
        or the first error."""
        try:
            self.work(lock)
        finally:
            with lock:
                if self.error is None and self.next < self.n:
                    self.error = RuntimeError("shared work interrupted")
                self.next = self.n  # nobody takes another part
                on_close()
                while self.helpers:
                    lock.wait()
        if self.error is not None:
            raise self.error
        return self.results


class _Batches:
    """The shared counter of batches ``[lo, hi)`` over ``range(n)``, handed out
    from ``stripes`` contiguous runs of them in turn (see :meth:`set_stripes`)."""

    def __init__(self, n: int, size: int, helpable: bool = False) -> None:
        self._n = n
        self._size = max(1, size)
        self.set_stripes(1)
        self._lock = threading.Condition(threading.Lock())
        self.stop = False
        self.declined: list[tuple[int, int]] = []
        self.running = 0  # batches taken and not finished
        self.shared: list[_Shared] = []  # work the running batches hand out
        # Loops out of batches wait for shared work (else they only take what is
        # shared already).
        self.helpable = helpable

    def set_stripes(self, stripes: int) -> None:
        """Hand batches out from ``stripes`` contiguous runs of them in turn
        (before any is taken). Loops running at the same time then work far
        apart in the output: two loops taking neighbouring batches wrote the
        two halves of the same output pages (a 2-D read of 1 MiB chunks, two
        per row of the output), and faulted them in against each other:
        zarr-python's 1 MiB-chunk read through cuzarr's pipeline took ~29,000
        page faults where the output has 16,400 pages."""
        batches = -(-self._n // self._size)
        k = max(1, min(stripes, batches))
        self._stripe_next = [j * batches // k for j in range(k)]
        self._stripe_end = [(j + 1) * batches // k for j in range(k)]
        self._turn = 0

    def take(self) -> tuple[int, int] | None:
        with self._lock:
            if self.stop:
                return None
            nexts, ends = self._stripe_next, self._stripe_end
            k = len(nexts)
            for _ in range(k):
                j = self._turn
                self._turn = (j + 1) % k
                b = nexts[j]
                if b < ends[j]:
                    nexts[j] = b + 1
                    self.running += 1
                    lo = b * self._size
                    return lo, min(self._n, lo + self._size)
            return None

    def decline(self, lo: int, hi: int) -> None:
        with self._lock:
            self.declined.append((lo, hi))

    def done(self) -> None:
        with self._lock:
            self.running -= 1
            self._lock.notify_all()

    def halt(self) -> None:
        """No batch starts any more, and loops waiting for shared work return."""
        with self._lock:
            self.stop = True
            self._lock.notify_all()

    def help(self, end: float) -> bool:
        """Work on parts the running batches share until no batch runs (False) or
        the time slice is over (True)."""
        lock = self._lock
        while True:
            with lock:
                while True:
                    job = next((j for j in self.shared if j.open()), None)
                    if job is not None:
                        job.helpers += 1
                        break
                    if self.stop or self.running == 0 or not self.helpable:
                        return False
                    if time.perf_counter() >= end:
                        return True
                    # woken when a batch shares work or ends
                    lock.wait(0.05)
            job.assist(lock)
            if time.perf_counter() >= end:
                return True

    def share(self, fn: Callable[[int], Any], n: int) -> list[Any]:
        job = _Shared(fn, n)
        lock = self._lock
        with lock:
            self.shared.append(job)
            lock.notify_all()
        return job.run_owned(lock, lambda: self.shared.remove(job))


def share(fn: Callable[[int], Any], n: int) -> list[Any]:
    """``[fn(i) for i in range(n)]``, the parts run in parallel by this thread
    and by idle threads: in a batch of :func:`pull_batches`, the call's loops
    that have no batch left; elsewhere (for ``POOL_SHARE_MIN`` parts or more),
    up to ``max_workers() - 1`` helper tasks put on the codec pool, which take
    parts only if they start before the parts run out (this thread never waits
    for a task that has not started, so a busy pool cannot deadlock it).

    The first error of a part is raised once no part runs any more; parts not
    started by then are skipped. ``fn`` must be safe to call from any thread.
    """
    if n < 2:
        return [fn(i) for i in range(n)]
    batches = getattr(_tls, "batches", None)
    if batches is not None:
        return batches.share(fn, n)
    helpers = min(max_workers() - 1, n - 1)
    if helpers < 1 or n < POOL_SHARE_MIN:
        return [fn(i) for i in range(n)]
    return _share_on_pool(fn, n, helpers)


def _share_on_pool(fn: Callable[[int], Any], n: int, helpers: int) -> list[Any]:
    job = _Shared(fn, n)
    lock = threading.Condition(threading.Lock())
    # Helper tasks still queued when the parts are done hold only this empty
    # list, not the job and its results (a busy pool may run them much later).
    cell: list[_Shared] = [job]

    def helper() -> None:
        with lock:
            if not cell or not cell[0].open():
                return  # started too late: nothing left
            job = cell[0]
            job.helpers += 1
        job.assist(lock)

    pool = get_executor()
    for _ in range(helpers):
        try:
            pool.submit(helper)
        except RuntimeError:  # the pool is shut down: the rest runs here
            break
    return job.run_owned(lock, cell.clear)


def _drain(batches: _Batches, job: Callable[[int, int], bool | None], slice_s: float) -> bool:
    """Run batches until none is left and no running batch shares work (False),
    or until the time slice is over (True)."""
    end = time.perf_counter() + slice_s
    outer = getattr(_tls, "batches", None)
    _tls.batches = batches
    try:
        while True:
            b = batches.take()
            if b is None:
                return batches.help(end)
            try:
                if job(*b) is False:
                    batches.decline(*b)
            except BaseException:
                batches.halt()  # the other loops stop after their current batch
                raise
            finally:
                batches.done()
            if time.perf_counter() >= end:
                return True
    finally:
        _tls.batches = outer


class _Loops:
    """The worker loops of one :func:`pull_batches` call. ``done`` is set once
    the last of them has ended (with the first error of any), so the event loop
    is woken once per call, not once per loop: each wake-up is a write to the
    loop's self-pipe, a task step and future callbacks (a 64-sample training
    batch ran about 13 loop iterations)."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()
        # running from the start: a cancelled call cannot cancel it, and waits
        # (_settle) until the loops it stands for have ended
        self.done.set_running_or_notify_cancel()

    def finish(self, error: BaseException | None = None) -> None:
        """One loop has ended (``error``: what it raised)."""
        with self._lock:
            if error is not None and self._error is None:
                self._error = error
            self._left -= 1
            if self._left:
                return
        if self._error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(self._error)


def _drain_slices(pool: Any, batches: _Batches, job: Callable[[int, int], bool | None],
                  slice_s: float, loops: _Loops) -> None:
    """One worker loop's time slice (:func:`_drain`); while batches are left, the
    loop goes back to the end of the pool's queue itself, and tells ``loops``
    when it ends. (Each slice used to return to the event loop, which queued
    the next: a wake-up of the loop thread and a hop per slice, ~1 ms of a
    1 GiB read's CPU on 2 cores.)"""
    try:
        while _drain(batches, job, slice_s):
            try:
                pool.submit(_drain_slices, pool, batches, job, slice_s, loops)
                return
            except RuntimeError:  # the pool is shut down: the loop goes on here
                continue
    except BaseException as e:
        loops.finish(e)
        return
    loops.finish()


async def pull_batches(
    n: int,
    size: int,
    job: Callable[[int, int], bool | None],
    slice_s: float = SLICE_S,
    loops: int | None = None,
    helpable: bool = False,
) -> list[tuple[int, int]]:
    """Run ``job(lo, hi)`` over consecutive batches of ``range(n)`` in the pool.

    Parameters
    ----------
    n, size
        Items in all, and items per batch.
    job
        Runs in a pool thread; returning ``False`` declines the batch, which is
        then handed back (a job that would have to wait, for a lock say).
    slice_s
        Seconds a worker loop runs before it yields its pool thread.
    loops
        At most this many batches run at once (default: the pool's size).
    helpable
        The jobs hand out work with :func:`share`: start ``loops`` loops even
        when there are fewer batches, so that the others help.

    Returns
    -------
    list of (lo, hi)
        The declined batches, for the caller to run another way.

    Every loop has finished when this returns, also when a job raised (the
    first error is raised then, and no batch starts after it) and when the call
    is cancelled (the loops stop after the batch each is running, and the
    cancellation propagates once those batches are done).
    """
    if n <= 0:
        return []
    batches = _Batches(n, size, helpable)
    pool = get_executor()
    n_loops = max(1, min(max_workers(), loops or max_workers()))
    if not helpable:
        n_loops = min(n_loops, -(-n // batches._size))
    batches.set_stripes(n_loops)
    group = _Loops(n_loops)
    for _ in range(n_loops):
        try:
            pool.submit(_drain_slices, pool, batches, job, slice_s, group)
        except RuntimeError as e:  # the pool is shut down: this loop never runs
            group.finish(e)
    try:
        await asyncio.wrap_future(group.done)
    except BaseException:
        batches.halt()
        await _settle({group.done})
        raise
    return sorted(batches.declined)


async def _settle(futures: set[concurrent.futures.Future[Any]]) -> None:
    """Wait until the batches now running in ``futures`` end (a cancelled call
    must not return while its jobs still write into its output or store)."""
    pending = [f for f in futures if not f.done()]
    while pending:
        # cancelled again: the batches still have to end first
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.001)
        pending = [f for f in pending if not f.done()]


# glibc serves allocations above its mmap threshold (128 KiB at start) with a
# fresh mmap each, and raises the threshold to the size of any such block that
# is freed (up to 32 MiB). A compressor allocates each chunk's output at the
# codec's bound (about the chunk's size) and shrinks it: a write of 1 MiB chunks
# did an mmap, ~90 page faults, an mremap and an munmap per chunk (the munmap
# with the GIL held), ~7% of its time.
# glibc takes a freed block's size as the new threshold only if that size, its
# header and page rounding included, is at most 32 MiB: a block of exactly
# 32 MiB changed nothing (shard writes asked for it, and were left unprimed:
# ~8,000-24,000 page faults per 256 MiB write in a process of their own). The
# largest block that counts is a page short of it; 64 KiB short leaves room.
_MMAP_MAX = (32 << 20) - (64 << 10)
_primed = 0


def raise_mmap_threshold(nbytes: int) -> None:
    """Let the allocator serve transient buffers of up to ``nbytes`` from its
    heap: allocate and free one block of that size (a no-op where the threshold
    is already that high, fixed by ``MALLOC_MMAP_THRESHOLD_``, or not glibc's)."""
    global _primed
    n = min(int(nbytes), _MMAP_MAX)
    if n <= _primed:
        return
    _primed = n
    block = np.empty(n, dtype=np.uint8)  # untouched: no pages are faulted in
    del block
