"""Concurrent writers: processes (and threads) writing one array lose nothing.

Disjoint chunk- and shard-aligned regions need no coordination. Writers whose
regions share chunks or shards (partial, read-modify-write updates) are made
safe on ``LocalStore`` by per-key locks (``LocalStore.lock_keys``) that the
array engine holds around every chunk write.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sys
import threading

import numpy as np
import pytest

import cuzarr
from cuzarr.api.asynchronous import open_array as async_open_array
from cuzarr.storage import LocalStore

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="fork"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]
NPROC = 4
ROUNDS = 6


def _ctx():
    return mp.get_context("fork" if sys.platform == "linux" else "spawn")


def _run(target, args_list):
    ctx = _ctx()
    ps = [ctx.Process(target=target, args=a) for a in args_list]
    for p in ps:
        p.start()
    for p in ps:
        p.join(60)
    assert [p.exitcode for p in ps] == [0] * len(ps)


def _after_fork() -> None:
    # cuzarr.runtime.sync.get_executor is not fork-aware (reported): a pool inherited
    # through fork has no threads, and work submitted to it never runs.
    import cuzarr.runtime.sync as s

    s._pool = None


def _disjoint(root: str, p: int, step: int) -> None:
    _after_fork()
    a = cuzarr.open_array(LocalStore(root), path="a")
    for r in range(ROUNDS):
        # rows p*step.. (chunk- or shard-aligned blocks owned by this process)
        a[p * step : (p + 1) * step, :] = p * 100 + r


def _interleaved(root: str, p: int) -> None:
    _after_fork()
    a = cuzarr.open_array(LocalStore(root), path="a")
    for r in range(ROUNDS):
        # every chunk (and shard) is partly covered by every process
        a[:, p::NPROC] = p * 100 + r + 1
        a[p::NPROC, 1] = -(p + 1)


def _make(root: str, sharded: bool) -> None:
    kw = {"chunks": (4, 4), "shards": (16, 16)} if sharded else {"chunks": (4, 4)}
    cuzarr.create_array(LocalStore(root), name="a", shape=(32, 32), dtype="i4", **kw)


@pytest.mark.parametrize("sharded", [False, True])
def test_disjoint_aligned_regions(tmp_path, sharded):
    root = str(tmp_path / "s")
    _make(root, sharded)
    step = 32 // NPROC if not sharded else 16  # chunk-aligned; shard-aligned
    n = 32 // step
    _run(_disjoint, [(root, p, step) for p in range(n)])
    a = cuzarr.open_array(root, path="a", mode="r")
    want = np.repeat(np.arange(n) * 100 + ROUNDS - 1, step)[:, None] * np.ones(32, int)
    np.testing.assert_array_equal(a[...], want)


@pytest.mark.parametrize("sharded", [False, True])
def test_overlapping_partial_writers_lose_nothing(tmp_path, sharded):
    root = str(tmp_path / "s")
    _make(root, sharded)
    _run(_interleaved, [(root, p) for p in range(NPROC)])
    got = cuzarr.open_array(root, path="a", mode="r")[...]
    want = np.empty((32, 32), dtype="i4")
    for p in range(NPROC):
        want[:, p::NPROC] = p * 100 + ROUNDS
    cols = [c for c in range(32) if c != 1]
    np.testing.assert_array_equal(got[:, cols], want[:, cols])
    for p in range(NPROC):
        rows = np.arange(p, 32, NPROC)
        # each element of column 1 holds one of the two writers' last values
        assert np.isin(got[rows, 1], [-(p + 1), 1 * 100 + ROUNDS]).all()


def test_threads_share_locks(tmp_path):
    """Locks also serialize writers in one process (one array object, many threads)."""
    a = cuzarr.create_array(LocalStore(tmp_path / "s"), shape=(400,), chunks=(40,), dtype="i4")

    def w(p: int) -> None:
        for _ in range(10):
            a[p::4] = p + 1

    ts = [threading.Thread(target=w, args=(p,)) for p in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_array_equal(a[:], np.arange(400) % 4 + 1)


def test_lock_keys_excludes(tmp_path):
    import asyncio

    s1, s2 = LocalStore(tmp_path), LocalStore(tmp_path)
    order: list[str] = []

    async def holder() -> None:
        async with s1.lock_keys(["a/c/0", "a/c/1"]):
            order.append("h-in")
            await asyncio.sleep(0.1)
            order.append("h-out")

    async def waiter() -> None:
        await asyncio.sleep(0.02)
        async with s2.lock_keys(["a/c/1"]):
            order.append("w-in")

    async def main() -> None:
        await asyncio.gather(holder(), waiter())

    asyncio.run(main())
    assert order == ["h-in", "h-out", "w-in"]

    # lock files are never listed as keys
    async def keys() -> list[str]:
        return [k async for k in s1.list()]

    assert asyncio.run(keys()) == []


def test_sharded_read_is_not_torn_by_a_shard_replaced_midway(tmp_path, monkeypatch):
    """A partial read of a shard reads its index, then the inner chunks it points
    to: both from the same file, even when a writer replaces the shard between."""
    from cuzarr.codecs.sharding import ShardingCodec

    a = cuzarr.create_array(
        LocalStore(tmp_path / "s"), shape=(64, 64), chunks=(8, 8), shards=(64, 64), dtype="i4"
    )
    old = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    new = np.random.default_rng(0).integers(0, 2**31, (64, 64), dtype="i4")  # sizes differ
    a[...] = old
    real = ShardingCodec.decode_index
    calls = []

    def decode_index(self, raw, shape, *size):  # (size: the shard's, where known)
        if not calls:
            calls.append(1)
            a[...] = new  # the shard is replaced between the index and the chunk reads
        return real(self, raw, shape, *size)

    monkeypatch.setattr(ShardingCodec, "decode_index", decode_index)
    got = a[8:16, 16:32]  # 2 of 64 inner chunks: index, then ranges
    assert calls
    np.testing.assert_array_equal(got, old[8:16, 16:32])
    np.testing.assert_array_equal(a[8:16, 16:32], new[8:16, 16:32])


_MANY_SHARDS = """
import resource, sys
import numpy as np
import cuzarr

a = cuzarr.create_array(sys.argv[1], shape=(8192,), chunks=(1,), shards=(4,), dtype="i4",
                        compressors=None)
a[:] = np.arange(8192, dtype="i4")
resource.setrlimit(resource.RLIMIT_NOFILE, (160, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with cuzarr.config.set({"threading.max_workers": 8}):
    assert (a[::4] == np.arange(0, 8192, 4)).all()  # partial shard reads
    assert (a[:] == np.arange(8192)).all()
print("ok", flush=True)
"""


def test_sharded_reads_of_many_shards_stay_within_the_open_file_limit(tmp_path):
    """Descriptors pinned for a sharded read are held per group of a few shards,
    not for a whole batch of 64 per worker (8 workers under 160 open files used to
    fail with EMFILE)."""
    import subprocess

    p = subprocess.run(
        [sys.executable, "-c", _MANY_SHARDS, str(tmp_path / "a")],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ok" in p.stdout


_LATE_WRITER = """
import concurrent.futures.thread as cft, sys, threading, time
import numpy as np
import cuzarr

root = sys.argv[1]
a = cuzarr.create_array(root, name="a", shape=(64,), chunks=(8,), dtype="i4")
a[:] = 1  # the pools exist and have run work

def late() -> None:
    threading.main_thread().join()
    while not cft._shutdown:  # concurrent.futures' exit hook has run
        time.sleep(0.001)
    b = cuzarr.open_array(root, path="a")
    b[:] = np.arange(64)
    b.attrs["done"] = True
    print("late", int(b[:].sum()), flush=True)

threading.Thread(target=late).start()
"""


def test_threads_still_running_at_interpreter_exit_keep_working(tmp_path):
    """A non-daemon thread that reads and writes after the main thread has ended
    (Python waits for it) is served: cuzarr's pools survive concurrent.futures'
    exit hook."""
    import subprocess

    root = str(tmp_path / "s")
    p = subprocess.run(
        [sys.executable, "-c", _LATE_WRITER, root], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert "late 2016" in p.stdout, p.stderr
    b = cuzarr.open_array(root, path="a", mode="r")
    np.testing.assert_array_equal(b[:], np.arange(64))
    assert b.attrs["done"] is True


def test_fork_while_another_thread_holds_the_loop_lock(tmp_path):
    import os
    import time

    from cuzarr.runtime import sync as sync_mod

    a = cuzarr.create_array(tmp_path / "a", shape=(4,), chunks=(2,), dtype="i4")
    held, release = threading.Event(), threading.Event()

    def hold():
        with sync_mod._lock:
            held.set()
            release.wait()

    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    try:
        pid = os.fork()
        if pid == 0:  # child: the holder thread does not exist here
            code = 1
            try:
                sync_mod._loop = None  # force the child to build its own loop
                b = cuzarr.open_array(tmp_path / "a", mode="r+")
                b[:] = 7
                code = 0 if (b[:] == 7).all() else 2
            finally:
                os._exit(code)
    finally:
        release.set()
        t.join()
    deadline = 20
    t0 = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - t0 > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child deadlocked on the lock held at fork time")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(a[:], 7)


FIELDS = np.dtype([(f"f{p}", "<i4") for p in range(NPROC)])
def _field_writer(root: str, p: int) -> None:
    _after_fork()
    a = cuzarr.open_array(LocalStore(root), path="a")
    name = f"f{p}"
    for r in range(ROUNDS):
        v = p * 100 + r + 1
        # every record's chunk is shared with the other writers' fields
        kind = r % 6
        if kind == 0:
            a.set_basic_selection(slice(None), v, fields=name)
        elif kind == 1:
            a.set_coordinate_selection(np.arange(32)[::-1], v, fields=[name])
        elif kind == 2:
            a.set_orthogonal_selection((np.arange(32),), v, fields=name)
        elif kind == 3:
            a[:, name] = v
        elif kind == 4:
            a[np.arange(32), name] = v  # advanced, with a field
        else:
            a.set_mask_selection(np.ones(32, bool), v, fields=name)


class _ReadsLag(LocalStore):
    """A LocalStore whose reads return 20 ms after the bytes were read: the
    window in which another writer changes the chunk."""

    async def get(self, key, prototype=None, byte_range=None):
        value = await super().get(key, prototype, byte_range)
        await asyncio.sleep(0.02)
        return value


@pytest.mark.parametrize("sharded", [False, True])
def test_pointwise_write_keeps_a_concurrent_write_between_its_points(tmp_path, sharded):
    # a[[0, 1, 8], [0, 1, 8]] spans (0, 1) and (1, 0) without selecting them: a
    # write of (0, 1) made meanwhile must survive (it was lost when the elements
    # between the points were read before the chunk's lock was taken).
    root = str(tmp_path / "s")
    _make(root, sharded)

    async def main() -> np.ndarray:
        a = await async_open_array(_ReadsLag(root), path="a", mode="r+")
        b = await async_open_array(LocalStore(root), path="a", mode="r+")

        async def other() -> None:
            await asyncio.sleep(0.005)
            await b.setitem((0, 1), 7)

        idx = np.array([0, 1, 8])
        await asyncio.gather(a.setitem((idx, idx), 5), other())
        return await b.getitem(slice(None))

    got = asyncio.run(main())
    want = np.zeros((32, 32), dtype="i4")
    want[[0, 1, 8], [0, 1, 8]] = 5
    want[0, 1] = 7
    np.testing.assert_array_equal(got, want)


def test_writers_of_different_fields_lose_nothing(tmp_path):
    root = str(tmp_path / "s")
    cuzarr.create_array(
        LocalStore(root), name="a", shape=(32,), chunks=(8,), dtype=FIELDS, zarr_format=2,
        fill_value=None,
    )
    _run(_field_writer, [(root, p) for p in range(NPROC)])
    got = cuzarr.open_array(root, path="a", mode="r")[...]
    for p in range(NPROC):
        np.testing.assert_array_equal(got[f"f{p}"], np.full(32, p * 100 + ROUNDS))
