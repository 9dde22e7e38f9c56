"""``cuzarr.runtime.sync.run_here``: an operation on stores with blocking I/O
run in the calling thread, on its own event loop (``read_many`` of such
stores goes this way), with the timeouts and unwinding of ``sync``."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import cuzarr
import cuzarr.core.lazy as lazy
from cuzarr.runtime import sync as rsync
from cuzarr.runtime.sync import run_here
from cuzarr.storage import LocalStore


async def _where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_runs_in_the_calling_thread_on_one_loop_per_thread():
    assert run_here(_where()) == threading.current_thread().name
    loops = []

    async def loop_of() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    loops.append(run_here(loop_of()))
    loops.append(run_here(loop_of()))
    assert loops[0] is loops[1] and loops[0] is not rsync.get_loop()
    got = {}

    def other() -> None:
        got["name"] = run_here(_where())
        got["loop"] = weakref.ref(run_here(loop_of()))

    t = threading.Thread(target=other, name="another")
    t.start()
    t.join()
    assert got["name"] == "another"
    gc.collect()
    loop = got["loop"]()
    assert loop is None or loop.is_closed()  # closed once its thread ended


def test_inside_a_running_loop_it_is_sync():
    async def main() -> str:
        return run_here(_where())  # (blocks this loop, as sync does in a notebook)

    assert asyncio.run(main()) == "cuzarr-io"


def test_a_timeout_cancels_and_unwinds_before_it_raises():
    unwound = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            unwound.append(True)

    t = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"async\.timeout"):
        run_here(slow(), timeout=0.05)
    assert unwound == [True] and time.perf_counter() - t < 10

    async def own() -> None:
        raise TimeoutError("the operation's own")

    with pytest.raises(TimeoutError, match="the operation's own"):
        run_here(own(), timeout=5)
    with cuzarr.config.set({"async.timeout": 0.05}), pytest.raises(
            TimeoutError, match=r"async\.timeout"):
        run_here(slow())


def test_an_error_propagates_and_the_loop_stays_usable():
    async def bad() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_here(bad())
    assert run_here(_where()) == threading.current_thread().name


def test_read_many_of_local_arrays_skips_the_loop_thread(tmp_path, monkeypatch):
    data = np.arange(40 * 8, dtype="i4").reshape(40, 8)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, chunks=(4, 8),
                            dtype=data.dtype)
    a[...] = data
    b = cuzarr.create_array(cuzarr.storage.MemoryStore(), shape=data.shape, chunks=(8, 8),
                            dtype=data.dtype)
    b[...] = data

    def refused(*args, **kwargs):
        raise AssertionError("went through the loop thread")

    monkeypatch.setattr(lazy, "sync", refused)
    idx = np.array([5, 1, 33, 17, 2])
    got = cuzarr.read_many([a.lazy[idx], b.lazy[idx], a.lazy[2:9]])
    np.testing.assert_array_equal(got[0], data[idx])
    np.testing.assert_array_equal(got[1], data[idx])
    np.testing.assert_array_equal(got[2], data[2:9])
    with cuzarr.config.set({"gpu.emulate": True}):
        (dev,) = cuzarr.read_many([a.lazy[idx]])
    np.testing.assert_array_equal(dev, data[idx])


def test_read_many_of_a_store_without_blocking_io_goes_through_sync(tmp_path, monkeypatch):
    data = np.arange(16, dtype="i4")
    store = cuzarr.storage.FsspecStore.from_url(f"file://{tmp_path / 'f'}")
    a = cuzarr.create_array(store, shape=data.shape, chunks=(4,), dtype=data.dtype)
    a[...] = data
    assert a.store.sync_io() is None
    seen = []
    real = lazy.sync

    def counted(coro, *args):
        seen.append(True)
        return real(coro, *args)

    monkeypatch.setattr(lazy, "sync", counted)
    (got,) = cuzarr.read_many([a.lazy[[3, 1]]])
    np.testing.assert_array_equal(got, data[[3, 1]])
    assert seen == [True]


def test_a_thread_loop_closed_leaves_the_store_pools_running(tmp_path):
    """A thread's own loop, closed when its thread ends, shuts down only what
    is its own: the store-I/O pool it borrowed goes on serving everyone."""
    from cuzarr.runtime.tasks import in_thread

    async def off_thread() -> str:
        return await in_thread(lambda: threading.current_thread().name)

    def other() -> None:
        run_here(off_thread())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    gc.collect()
    assert run_here(off_thread()).startswith("cuzarr-store-io")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(8,), chunks=(2,), dtype="i4")
    a[...] = np.arange(8)
    a.resize((10,))  # (a metadata write through the store-I/O pool)
    assert a.shape == (10,)


def _read_in_child(path: str) -> list[int]:
    a = cuzarr.open_array(path, mode="r")
    (got,) = cuzarr.read_many([a.lazy[[3, 1]]])
    return got.tolist()


def test_a_forked_child_reads_on_a_loop_of_its_own(tmp_path):
    """A child forked after its parent read through ``run_here`` (a data
    loader's workers) makes its own loop: the parent's, inherited with its
    selector, is neither used nor closed there."""
    import multiprocessing

    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(6,), chunks=(2,), dtype="i4")
    a[...] = np.arange(6)
    assert cuzarr.read_many([a.lazy[[3, 1]]])[0].tolist() == [3, 1]  # the parent's loop
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_read_in_child, (str(tmp_path / "a"),)) == [3, 1]
    assert cuzarr.read_many([a.lazy[[5]]])[0].tolist() == [5]  # the parent's, still open
