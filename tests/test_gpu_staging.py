"""Staging buffers of the device read path (``cuzarr.gpu.staging``): reused
between reads, bounded, and given back only when every upload from them is done."""

from __future__ import annotations

import threading

import numpy as np

import cuzarr
from cuzarr.gpu import staging
from cuzarr.gpu.executor import GpuExecutor
from cuzarr.gpu.staging import HostStaging
from cuzarr.storage import LocalStore


def test_blocks_are_reused_bounded_and_only_ours_taken_back():
    made = []

    def alloc(size):
        made.append(size)
        return np.empty(size, np.uint8)

    pool = HostStaging(keep_bytes=3 << 20, alloc=alloc)
    a, b = pool.take(10), pool.take((1 << 20) + 1)
    assert made == [1 << 20, 2 << 20] and len(a) == 10 and len(b) == (1 << 20) + 1
    pool.give(a)
    pool.give(a)  # given twice: kept once
    pool.give(np.empty(1 << 20, np.uint8)[:5])  # not ours: ignored
    assert pool.free_bytes == 1 << 20
    assert pool.take(100).base is a.base and made == [1 << 20, 2 << 20]
    pool.give(b)
    c = pool.take(1 << 20)
    pool.give(c)  # 2 + 1 MiB: at the cap
    pool.give(pool.take(4 << 20))  # beyond it: dropped
    assert pool.free_bytes == 3 << 20


def test_keep_bytes_follows_the_config():
    pool = HostStaging()
    with cuzarr.config.set({"gpu.staging_keep_bytes": 0}):
        pool.give(pool.take(10))
        assert pool.free_bytes == 0
    pool.give(pool.take(10))
    assert pool.free_bytes == 1 << 20


def test_keep_given_by_the_caller_and_dead_blocks_forgotten():
    """``give(buf, keep)`` takes the caller's limit (a read asks the setting
    once); a block the pool made and then dropped is forgotten when it dies,
    so a new array at the same address is not taken for it."""
    import gc

    pool = HostStaging()
    assert pool.keep_limit() == staging.KEEP_BYTES
    a = pool.take(10)
    pool.give(a, 0)  # the caller's limit: nothing kept
    assert pool.free_bytes == 0
    assert len(pool._ours) == 1
    del a
    gc.collect()
    assert pool._ours == {}  # its block died with its last view
    b = pool.take(10)
    pool.give(b, 1 << 20)
    pool.give(b, 1 << 20)  # twice: kept once
    assert pool.free_bytes == 1 << 20 and pool.take(5).base is b.base
    pool.clear()
    assert pool.free_bytes == 0


def test_device_reads_give_staging_back_and_reuse_it(tmp_path, monkeypatch):
    """The host twin of a device read takes its staging from the pool and gives
    it back: a second read of the same array allocates nothing new."""
    made = []
    pool = HostStaging(alloc=lambda n: made.append(n) or np.empty(n, np.uint8))
    monkeypatch.setattr(staging, "host_staging", pool)
    import cuzarr.gpu.reader as reader

    monkeypatch.setattr(reader, "host_staging", pool)
    data = np.arange(64 * 4096, dtype="<f4").reshape(64, 4096)
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype,
                            chunks=(4, 4096), compressors={"name": "zstd",
                                                           "configuration": {"level": 1}})
    a[...] = data
    # one read worker: how many batches are in flight at once does not vary
    with cuzarr.config.set({"gpu.emulate": True, "gpu.read_workers": 1,
                            "threading.max_workers": 1}):
        np.testing.assert_array_equal(a[...], data)
        first = list(made)
        held = pool.free_bytes
        np.testing.assert_array_equal(a[...], data)
    assert first and made == first and held == pool.free_bytes > 0


class _Event:
    def __init__(self) -> None:
        self.done = False


class _Stream:
    def __init__(self) -> None:
        self.events: list[_Event] = []

    def record(self) -> _Event:
        self.events.append(_Event())
        return self.events[-1]


def test_an_uploaded_buffer_goes_back_after_its_last_upload(monkeypatch):
    """A packed buffer uploaded by several sub-batches (one event each) returns
    to the pinned pool only when all their events are done, and only once."""
    given = []
    monkeypatch.setattr("cuzarr.gpu.executor.pinned_staging",
                        type("P", (), {"give": staticmethod(given.append)})())
    ex = object.__new__(GpuExecutor)  # the bookkeeping alone, no device
    ex._keep, ex._keep_lock = [], threading.Lock()
    ex.stream = _Stream()
    buf, other = np.empty(8, np.uint8), np.empty(8, np.uint8)
    ex._hold(buf)
    ex._hold(buf)
    ex._hold(other)
    e1, e2, e3 = ex.stream.events
    e1.done = True
    ex.forget_finished()
    assert given == []  # buf: one upload still running
    e2.done = e3.done = True
    ex.forget_finished()
    assert sorted(map(id, given)) == sorted([id(buf), id(other)]) and ex._keep == []


def test_pinned_pool_is_separate_from_the_host_twin():
    assert staging.pinned_staging is not staging.host_staging
    assert staging.pinned_staging._alloc is staging._pinned_block
