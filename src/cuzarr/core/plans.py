"""Engine plans and the two drivers that run them.

Every engine operation (read, write, read-modify-write, sharded read) is a *job*
whose work is cut into batches. A batch is a *plan*: a generator that yields
store requests and compute steps, and is sent each answer back::

    datas = yield Get(keys)                      # -> list of bytes or None
    blobs = yield GetRanges(requests)            # -> list of bytes or None
    yield Put(pairs); yield Delete(keys)         # -> None
    result = yield Compute(fn, *args)            # -> fn(*args)

A plan knows nothing of threads, event loops or store APIs, so one plan serves
every store. Exactly two drivers run plans:

- :func:`run_inline`: the store's blocking I/O (``store.sync_io()``: local
  files, memory), in the calling thread; compute steps run right there.
- :func:`run_async`: the store's async API; compute steps go to the codec pool.

:func:`execute` chooses between them for a whole job (and schedules its batches);
:func:`try_inline` runs a small job in the calling thread where that is possible
and cheaper than a trip through the event loop.

Key locks (``store.lock_keys``, LocalStore's fcntl locks) are taken by the
driver around a batch, never by the plan: inline, a batch whose locks are busy
is declined (nothing done) and handed to the async driver, which waits for them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cuzarr.buffer.aligned import ThreadBuffer
from cuzarr.runtime import native
from cuzarr.runtime.sync import get_executor, max_workers
from cuzarr.runtime.workers import pull_batches
from cuzarr.storage.base import Store, gather_or_cancel, run_job

__all__ = [
    "Compute",
    "Delete",
    "Get",
    "GetRanges",
    "Job",
    "Plan",
    "Put",
    "execute",
    "run_async",
    "run_inline",
    "try_inline",
]


@dataclass(slots=True)
class Get:
    """Values of ``keys`` (None where missing). ``reuse``: the values may lie in
    a buffer the calling thread reuses, valid until its next such request (one
    key: the store's ``get_reused``; several: read into this module's
    per-thread buffer by the store's ``get_into``, in C where built)."""

    keys: list[str]
    reuse: bool = False


@dataclass(slots=True)
class GetRanges:
    """Byte ranges ``[(key, byte request)]`` (None where the key is missing).
    ``reuse``: answers may share a buffer the store reuses for the next request
    (a plan consumes them before it asks again). ``sizes``: answered with
    ``(values, sizes)``, the values' whole sizes where the store tells them
    without reading them (None otherwise), asked alongside the ranges."""

    requests: list[tuple[str, Any]]
    reuse: bool = False
    sizes: bool = False


@dataclass(slots=True)
class Put:
    """Store ``pairs`` of (key, value)."""

    pairs: list[tuple[str, Any]]


@dataclass(slots=True)
class Delete:
    """Delete ``keys`` (missing ones are no error)."""

    keys: list[str]


#: CPU work (decode, encode, scatter): ``Compute(fn, *args)``, answered with
#: ``fn(*args)``. A ``functools.partial``: made in C, no Python call per step.
Compute = functools.partial


Request = Get | GetRanges | Put | Delete | Compute
#: A batch of a job: yields requests, is sent their answers, returns a result.
Plan = Generator[Request, Any, Any]


class Job(Protocol):
    """What the drivers need of an engine job."""

    #: batches are ranges of ``range(n)``
    n: int
    #: whether batches hold the store's key locks (``lock_keys``) while they run
    locking: bool
    #: a device reader or writer whose work ``finish`` waits for (None: no call)
    device: Any

    def plan(self, lo: int, hi: int) -> Plan:
        """The plan of batch ``lo:hi``."""

    def lock_keys(self, lo: int, hi: int) -> list[str] | None:
        """Keys to hold the store's key locks on while batch ``lo:hi`` runs."""

    def finish(self) -> None:
        """Called once every batch has run (or the job failed): device work waits here."""


def run_inline(plan: Plan, sio: Any) -> Any:
    """Run ``plan`` to its end with the store's blocking batch I/O, in this thread."""
    answer: Any = None
    try:
        while True:
            req = plan.send(answer)
            # compute steps and gets first: a small read is one of each
            if type(req) is Compute:
                answer = req()
            elif type(req) is Get and not req.reuse:
                answer = sio.get_many(req.keys)
            else:
                answer = _answer_inline(req, sio)
    except StopIteration as stop:
        return stop.value
    finally:
        # on an error (a store's, or a compute step's), the plan's own context
        # managers (pinned descriptors) end now, not when the traceback goes
        plan.close()


def _answer_inline(req: Request, sio: Any) -> Any:
    kind = type(req)
    if kind is Get:
        keys = req.keys  # type: ignore[union-attr]
        if len(keys) == 1 and sio.get_reused is not None:
            return [sio.get_reused(keys[0])]
        if len(keys) > 1 and sio.get_into is not None and native.available():
            return sio.get_into(keys, _place_reused)[0]
        return sio.get_many(keys)
    if kind is GetRanges:
        if req.reuse and sio.get_ranges_reused is not None:  # type: ignore[union-attr]
            return sio.get_ranges_reused(req.requests)  # type: ignore[union-attr]
        values = sio.get_ranges(req.requests)  # type: ignore[union-attr]
        if not req.sizes:  # type: ignore[union-attr]
            return values
        # the sizes after the reads: in a pinned block, of the same files
        get_sizes = getattr(sio, "get_sizes", None)
        keys = [k for k, _ in req.requests]  # type: ignore[union-attr]
        return values, [None] * len(keys) if get_sizes is None else get_sizes(keys)
    if kind is Put:
        return sio.set_many(req.pairs)  # type: ignore[union-attr]
    if kind is Delete:
        return sio.delete_many(req.keys)  # type: ignore[union-attr]
    raise TypeError(f"not an engine request: {req!r}")


# each thread's buffer for Get(reuse=True) of several keys (a batch of a few
# huge chunks is read into a buffer of its own, not kept by the thread)
_BATCHES = ThreadBuffer(keep_max=64 << 20)
# where each value starts in it: 64-byte aligned, so that none lies 1 to 31
# bytes past a page boundary, where the kernel's copy of a read runs at a fifth
# of the speed on AMD hosts (cuzarr.buffer.aligned)
_REUSED_ALIGN = 64


def _place_reused(sizes: Any) -> tuple[Any, np.ndarray]:
    """``SyncIO.get_into``'s ``place`` for ``Get(reuse=True)``: the values one
    after another in the calling thread's buffer (``sizes``: an int64 array,
    -1 where missing, or a list with None there)."""
    if type(sizes) is not np.ndarray:
        sizes = np.array([-1 if n is None else n for n in sizes], np.int64)
    at, total = native.place(sizes, 0, _REUSED_ALIGN)
    return _BATCHES.get(total), at


async def run_async(plan: Plan, store: Any) -> Any:
    """Run ``plan`` to its end with the store's async API; compute in the pool."""
    loop = asyncio.get_running_loop()
    pool = get_executor()
    answer: Any = None
    try:
        while True:
            req = plan.send(answer)
            kind = type(req)
            if kind is Compute:
                answer = await loop.run_in_executor(pool, req)
            elif kind is Get:
                answer = await store.get_many(req.keys)  # type: ignore[union-attr]
            elif kind is GetRanges:
                answer = await _get_ranges(store, req)  # type: ignore[arg-type]
            elif kind is Put:
                answer = await store.set_many(req.pairs)  # type: ignore[union-attr]
            elif kind is Delete:
                answer = await store.delete_many(req.keys)  # type: ignore[union-attr]
            else:
                raise TypeError(f"not an engine request: {req!r}")
    except StopIteration as stop:
        return stop.value
    finally:
        plan.close()


async def _get_ranges(store: Any, req: GetRanges) -> Any:
    if not req.sizes:
        return await store.get_partial_values(None, req.requests)
    # the sizes asked alongside the ranges: no extra round trip
    values, sizes = await asyncio.gather(
        store.get_partial_values(None, req.requests), _sizes(store, req.requests)
    )
    return values, sizes


async def _sizes(store: Any, reqs: list[tuple[str, Any]]) -> list[int | None]:
    """The sizes of the values at ``reqs``' keys, where the store asks for them
    without reading the value (``Store.getsize`` overridden); None otherwise,
    and where the size could not be had."""
    # a store's own cheap answer (FsspecStore: never a read of the whole value)
    ask = getattr(store, "told_size", None)
    if ask is None:
        if type(store).getsize is Store.getsize:
            return [None] * len(reqs)
        ask = store.getsize

    async def one(key: str) -> int | None:
        try:
            return await ask(key)
        except Exception:
            # missing, or a server that refuses HEAD: the read goes on without
            # the one check that needs the size (the index fetch beside it
            # reports a real failure itself)
            return None

    return list(await asyncio.gather(*(one(k) for k, _ in reqs)))


def _inline_batch(job: Job, store: Any, sio: Any, lo: int, hi: int) -> bool:
    """Batch ``lo:hi`` inline under its key locks if they are free at once;
    False (nothing done) when they are busy, or can only be awaited."""
    lock_keys = getattr(store, "lock_keys", None) if job.locking else None
    if lock_keys is None:
        run_inline(job.plan(lo, hi), sio)
        return True
    locks = lock_keys(job.lock_keys(lo, hi))
    if not hasattr(locks, "try_acquire") or not locks.try_acquire():
        return False
    try:
        run_inline(job.plan(lo, hi), sio)
    finally:
        locks.release()
    return True


async def _async_batch(job: Job, store: Any, sio: Any, lo: int, hi: int) -> None:
    lock_keys = getattr(store, "lock_keys", None) if job.locking else None
    if lock_keys is None:
        await run_async(job.plan(lo, hi), store)
        return
    # Waited for on the loop; then the batch's reads, codec work and writes
    # run under them, to their end even when the caller is cancelled: the
    # locks must outlast the writes they guard.
    async with lock_keys(job.lock_keys(lo, hi)):
        if sio is not None:
            await run_job(get_executor(), run_inline, job.plan(lo, hi), sio)
        else:
            await run_async(job.plan(lo, hi), store)


def try_inline(job: Job, store: Any, sio: Any = None) -> bool:
    """Run every batch of ``job`` in the calling thread with blocking I/O.

    False, with nothing done, when the store has no blocking I/O or a batch's
    key locks are busy (the caller then goes through :func:`execute`). The
    caller decides whether the job is small enough for this."""
    if sio is None:
        sio = store.sync_io()
        if sio is None:
            return False
    try:
        return _inline_batch(job, store, sio, 0, job.n) if job.n else True
    finally:
        if job.device is not None:
            job.finish()


async def execute(
    job: Job,
    store: Any,
    batch: int,
    loops: int | None = None,
    helpable: bool = False,
) -> None:
    """Run every batch of ``job``: the one place that chooses a driver.

    Stores with blocking I/O: worker loops in the pool run batch after batch
    inline (:func:`~cuzarr.runtime.workers.pull_batches`), with no trip through
    the event loop in between; batches whose locks were busy then go through
    the loop. Other stores: the async driver, a bounded number of batches at a
    time. ``loops`` bounds the worker loops, ``helpable`` lets idle ones take
    shared parts of a running batch (``workers.share``)."""
    sio = store.sync_io()
    try:
        if sio is not None:
            declined = await pull_batches(
                job.n,
                batch,
                lambda lo, hi: _inline_batch(job, store, sio, lo, hi),
                loops=loops,
                helpable=helpable,
            )
            if declined:
                await run_ranges(declined, lambda lo, hi: _async_batch(job, store, sio, lo, hi))
            return
        ranges = [(lo, min(job.n, lo + batch)) for lo in range(0, job.n, batch)]
        await run_ranges(ranges, lambda lo, hi: _async_batch(job, store, None, lo, hi))
    finally:
        if job.device is not None:
            job.finish()


async def run_ranges(ranges: Sequence[tuple[int, int]], work: Callable[[int, int], Any]) -> None:
    """``work(lo, hi)`` for every range, a bounded number at a time (each may
    hold buffers, descriptors and locks while it waits)."""
    limit = asyncio.Semaphore(max_workers() * 2 + 2)

    async def one(lo: int, hi: int) -> None:
        async with limit:
            await work(lo, hi)

    # one failing range stops the others, and is reported once they have unwound
    await gather_or_cancel(*(one(lo, hi) for lo, hi in ranges))
