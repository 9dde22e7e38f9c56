"""A call that raises or is cancelled has unwound: its sibling tasks are stopped
and waited for, threads it started have ended (or never started), however often
it is cancelled meanwhile (storage.base.gather_or_cancel / run_job / in_thread).
Lock-owner records of lockers cancelled part-way: test_sync_in_loop_deadlock.py."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import cuzarr
from cuzarr.core.plans import run_ranges as _run_ranges
from cuzarr.errors import MetadataError
from cuzarr.storage.base import gather_or_cancel, in_thread, run_job


def _slow(done: threading.Event) -> None:
    time.sleep(0.3)
    done.set()


async def _cancel_after(coro, delay: float) -> None:
    t = asyncio.ensure_future(coro)
    await asyncio.sleep(delay)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t


@pytest.mark.parametrize("shape", ["in_thread", "gathered", "pool job", "ranges", "failed"])
def test_cancelled_calls_wait_for_their_threads(shape):
    done = threading.Event()
    pool = ThreadPoolExecutor(2)

    async def boom():
        await asyncio.sleep(0.05)
        raise OSError("first")

    async def work(lo, hi):
        if lo == 0:
            await run_job(pool, _slow, done)
        else:
            await asyncio.sleep(10)

    make = {
        "in_thread": lambda: in_thread(_slow, done),
        "gathered": lambda: gather_or_cancel(in_thread(_slow, done), asyncio.sleep(10)),
        "pool job": lambda: gather_or_cancel(run_job(pool, _slow, done), asyncio.sleep(10)),
        "ranges": lambda: _run_ranges([(0, 1), (1, 2)], work),
        # a sibling fails, then the caller is cancelled during the cleanup
        "failed": lambda: gather_or_cancel(in_thread(_slow, done), boom()),
    }[shape]

    async def main():
        await _cancel_after(make(), 0.1)
        assert done.is_set()  # the thread ended before the call unwound

    asyncio.run(main())
    pool.shutdown()


def test_the_first_failure_is_raised_and_siblings_stop():
    ran: list[str] = []

    async def fail():
        await asyncio.sleep(0.01)
        raise ValueError("first")

    async def slow():
        try:
            await asyncio.sleep(10)
        finally:
            ran.append("stopped")

    async def main():
        with pytest.raises(ValueError, match="first"):
            await gather_or_cancel(fail(), slow(), slow())
        assert ran == ["stopped", "stopped"]
        assert await gather_or_cancel() == []
        assert await gather_or_cancel(asyncio.sleep(0, 1), asyncio.sleep(0, 2)) == [1, 2]

    asyncio.run(main())


def test_jobs_not_started_when_cancelled_never_run():
    pool = ThreadPoolExecutor(2)
    started: list[int] = []

    def job(i):
        started.append(i)
        time.sleep(0.1)

    async def main():
        await _cancel_after(gather_or_cancel(*(run_job(pool, job, i) for i in range(40))), 0.15)
        n = len(started)
        await asyncio.sleep(0.4)
        assert len(started) == n <= 6  # what was running, never the queued rest

    asyncio.run(main())
    pool.shutdown()


def test_what_cuzarr_writes_it_reads_back_under_the_edge_cap(monkeypatch):
    """A plain list of more edges than the cap was accepted, then written run-length
    encoded, which the cap refused to read back."""
    from cuzarr.metadata import chunk_grid

    monkeypatch.setattr(chunk_grid, "MAX_EDGES", 100)  # the rule, at a test's size
    with pytest.raises(MetadataError, match="chunk edges"):
        cuzarr.create_array({}, shape=(101,), chunks=[[1] * 101], dtype="u1")
    a = cuzarr.create_array({}, shape=(100,), chunks=[[1] * 100], dtype="u1")
    assert cuzarr.open_array(a.store).shape == (100,)
