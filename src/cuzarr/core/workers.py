"""Batches run by worker loops: few thread hops for jobs that need no event loop.

A job on a store with blocking I/O (local files, memory) does its fetch, codec
work and store in one worker thread. Handing each batch to the pool from the
event loop costs a hop per batch: a wake-up of the loop thread, which on a busy
machine competes with the workers for the cores and the GIL (measured on 2
cores: repeated in-process reads of 256 x 1 MiB chunks took 0.161 s with 4
hops against 0.182 s with 64; a first read in a fresh process showed no
difference within the noise).
Here each of at most ``max_workers()`` pool tasks pulls the next batch from a
shared counter until none is left. A task returns to the loop after a time
slice, so other requests queued on the shared pool still get their turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable

import numpy as np

from cuzarr.core.sync import get_executor, max_workers

__all__ = ["SLICE_S", "pull_batches", "raise_mmap_threshold"]

# How long a worker loop runs before it goes back to the end of the pool's queue.
SLICE_S = 0.02


class _Batches:
    """The shared counter of batches ``[lo, hi)`` over ``range(n)``."""

    def __init__(self, n: int, size: int) -> None:
        self._next = 0
        self._n = n
        self._size = max(1, size)
        self._lock = threading.Lock()
        self.stop = False
        self.declined: list[tuple[int, int]] = []

    def take(self) -> tuple[int, int] | None:
        with self._lock:
            lo = self._next
            if self.stop or lo >= self._n:
                return None
            hi = min(self._n, lo + self._size)
            self._next = hi
            return lo, hi

    def decline(self, lo: int, hi: int) -> None:
        with self._lock:
            self.declined.append((lo, hi))


def _drain(batches: _Batches, job: Callable[[int, int], bool | None], slice_s: float) -> bool:
    """Run batches until none is left (False) or the time slice is over (True)."""
    end = time.perf_counter() + slice_s
    while True:
        b = batches.take()
        if b is None:
            return False
        try:
            if job(*b) is False:
                batches.decline(*b)
        except BaseException:
            batches.stop = True  # the other loops stop after their current batch
            raise
        if time.perf_counter() >= end:
            return True


async def pull_batches(
    n: int,
    size: int,
    job: Callable[[int, int], bool | None],
    slice_s: float = SLICE_S,
    loops: int | None = None,
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
    batches = _Batches(n, size)
    pool = get_executor()
    running: set[concurrent.futures.Future[bool]] = set()

    async def runner() -> None:
        while True:
            fut = pool.submit(_drain, batches, job, slice_s)
            running.add(fut)
            more = await asyncio.wrap_future(fut)
            running.discard(fut)
            if not more:
                return

    n_loops = max(1, min(max_workers(), loops or max_workers(), -(-n // batches._size)))
    try:
        results = await asyncio.gather(*(runner() for _ in range(n_loops)), return_exceptions=True)
    except BaseException:
        batches.stop = True
        await _settle(running)
        raise
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return sorted(batches.declined)


async def _settle(futures: set[concurrent.futures.Future[bool]]) -> None:
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
_MMAP_MAX = 32 << 20
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
