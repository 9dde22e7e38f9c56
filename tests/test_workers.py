"""Worker loops (``cuzarr.runtime.workers.pull_batches``) and what runs on them:
local reads and writes, busy locks handed back to the loop, and a host-only
import that leaves the device and remote modules unloaded."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.runtime.sync import max_workers
from cuzarr.runtime.workers import pull_batches, share
from cuzarr.storage import LocalStore


def _run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize(("n", "size"), [(1, 1), (10, 1), (10, 3), (100, 7), (5, 50)])
def test_every_batch_runs_once(n, size):
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def job(lo: int, hi: int) -> None:
        with lock:
            seen.append((lo, hi))

    assert _run(pull_batches(n, size, job)) == []
    covered = sorted(i for lo, hi in seen for i in range(lo, hi))
    assert covered == list(range(n))
    assert all(hi - lo <= size for lo, hi in seen)


def test_nothing_to_do():
    assert _run(pull_batches(0, 4, lambda lo, hi: pytest.fail("called"))) == []


def test_loops_run_in_pool_threads_not_the_loop():
    names: set[str] = set()

    def job(lo: int, hi: int) -> None:
        names.add(threading.current_thread().name)
        time.sleep(0.002)

    async def main() -> str:
        await pull_batches(40, 1, job)
        return threading.current_thread().name

    loop_thread = _run(main())
    assert loop_thread not in names
    assert all(n.startswith("cuzarr-codec") for n in names)
    assert 1 <= len(names) <= max_workers()


def test_declined_batches_come_back_sorted():
    def job(lo: int, hi: int) -> bool:
        return lo % 2 == 0

    assert _run(pull_batches(10, 1, job)) == [(i, i + 1) for i in range(1, 10, 2)]


class _CountingJob:
    """A job that records the batches it started and how many run right now;
    it sleeps ``seconds`` and raises at batch ``fail_at``."""

    def __init__(self, seconds: float, fail_at: int | None = None) -> None:
        self.seconds = seconds
        self.fail_at = fail_at
        self.started: list[int] = []
        self.failed_at_start = -1  # len(started) when the failing batch raised
        self.running = 0
        self._lock = threading.Lock()

    def __call__(self, lo: int, hi: int) -> None:
        with self._lock:
            self.started.append(lo)
            self.running += 1
        try:
            if lo == self.fail_at:
                with self._lock:
                    self.failed_at_start = len(self.started)
                raise ValueError(f"batch {lo} is bad")
            time.sleep(self.seconds)
        finally:
            with self._lock:
                self.running -= 1


def test_first_error_raised_after_every_loop_ends():
    job = _CountingJob(0.005, fail_at=3)
    with pytest.raises(ValueError, match="batch 3"):
        _run(pull_batches(1000, 1, job))
    assert job.running == 0  # nothing still runs once the error is raised
    # no batch starts after the failing one ended: the other loops finish at
    # most the batch each was in (or had just taken)
    assert job.failed_at_start > 0
    assert len(job.started) <= job.failed_at_start + max_workers() - 1


def test_time_slice_lets_other_work_in():
    """A long job yields its pool thread between batches after each slice, so
    work submitted meanwhile runs before the long job ends."""
    events: list[str] = []

    def long_job(lo: int, hi: int) -> None:
        time.sleep(0.01)
        if lo == 59:
            events.append("long-done")

    async def main() -> None:
        from cuzarr.runtime.sync import get_executor

        loop = asyncio.get_running_loop()
        long = asyncio.ensure_future(pull_batches(60, 1, long_job, slice_s=0.02))
        await asyncio.sleep(0.05)
        futs = [loop.run_in_executor(get_executor(), events.append, "other")]
        await asyncio.gather(long, *futs)

    _run(main())
    assert events.index("other") < events.index("long-done")


def _hold_locks(store, keys):
    """Hold ``store``'s locks on ``keys`` from another thread's event loop until
    the returned event is set; (that thread, the event)."""
    held, release = threading.Event(), threading.Event()

    async def hold() -> None:
        async with store.lock_keys(keys):
            held.set()
            while not release.is_set():
                await asyncio.sleep(0.005)

    t = threading.Thread(target=lambda: asyncio.run(hold()))
    t.start()
    assert held.wait(5)
    return t, release


def test_write_waits_for_a_busy_lock_then_lands(tmp_path):
    """A batch whose key another writer has locked is handed back by the worker
    loop, waited for on the event loop, and written once the lock is free."""
    a = cuzarr.create_array(tmp_path / "a", shape=(64, 64), chunks=(8, 64), dtype="i4")
    a[...] = 1
    t, release = _hold_locks(LocalStore(tmp_path / "a"), ["c/3/0"])
    done = threading.Event()

    def write() -> None:
        a[4:60, 1:63] = 7  # partial chunks: read-modify-write under the locks
        done.set()

    w = threading.Thread(target=write)
    w.start()
    time.sleep(0.2)
    assert not done.is_set()  # chunk 3 is locked by the other writer
    release.set()
    t.join(5)
    w.join(10)
    assert done.is_set()
    want = np.ones((64, 64), "i4")
    want[4:60, 1:63] = 7
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path / "a", mode="r")[...], want)


def test_try_acquire_is_all_or_nothing(tmp_path):
    s1, s2 = LocalStore(tmp_path), LocalStore(tmp_path)
    first = s1.lock_keys(["x/0"])
    assert first.try_acquire()
    try:
        both = s2.lock_keys(["x/1", "x/0"])
        assert not both.try_acquire()  # x/0 busy: x/1 is not kept either
        lone = s2.lock_keys(["x/1"])
        assert lone.try_acquire()
        lone.release()
    finally:
        first.release()
    again = s2.lock_keys(["x/0", "x/1"])
    assert again.try_acquire()
    again.release()


LARGE_CHUNK_CODECS = {
    "zstd": {},
    "none": {"compressors": None},
    "gzip": {"compressors": [{"name": "gzip", "configuration": {"level": 1}}]},
    "blosc": {
        "compressors": [
            {
                "name": "blosc",
                "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle", "typesize": 4},
            }
        ]
    },
    "crc32c": {
        "compressors": [{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}]
    },
    "transpose": {"filters": [{"name": "transpose", "configuration": {"order": [1, 0]}}]},
    "big-endian": {"serializer": {"name": "bytes", "configuration": {"endian": "big"}}},
}


@pytest.mark.parametrize("codec", sorted(LARGE_CHUNK_CODECS))
def test_large_chunks_every_codec_through_reused_buffers(tmp_path, codec):
    """Large local chunks are read into a per-thread buffer that the next read
    overwrites: every codec chain must be done with it (copied out) by then."""
    data = (np.arange(1024 * 768, dtype="u4").reshape(1024, 768) * 2654435761) % 65521
    kw = LARGE_CHUNK_CODECS[codec]
    a = cuzarr.create_array(tmp_path / "a", shape=data.shape, chunks=(512, 256), dtype="u4", **kw)
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[700:100:-3, 5:700:7], data[700:100:-3, 5:700:7])
    z = zarr.open_array(str(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(z[...], data)


@pytest.mark.parametrize("chunks", [(512, 512), (16, 16)])  # large (1 per batch), small
def test_local_round_trip_through_worker_loops(tmp_path, chunks):
    data = np.arange(1024 * 1024, dtype="u4").reshape(1024, 1024) % 977
    a = cuzarr.create_array(tmp_path / "a", shape=data.shape, chunks=chunks, dtype="u4")
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[3:1000:3, ::-5], data[3:1000:3, ::-5])


def test_host_import_leaves_device_and_remote_modules_unloaded():
    code = (
        "import sys, cuzarr, numpy as np\n"
        "a = cuzarr.create_array({}, shape=(4,), dtype='i2'); a[...] = 1; a[...]\n"
        "print(sorted(m for m in sys.modules if m.startswith(('cuzarr.gpu.', 'cuzarr.storage.'))))\n"
        "print(cuzarr.storage.FsspecStore.__module__, 'ZipStore' in dir(cuzarr.storage))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, lazy = out.stdout.strip().splitlines()
    assert "cuzarr.gpu.reader" not in loaded and "cuzarr.gpu.executor" not in loaded
    for remote in ("fsspec", "fsspec_store", "http", "remote_requests", "asdf"):
        assert f"cuzarr.storage.{remote}" not in loaded
    assert lazy == "cuzarr.storage.fsspec_store True"
    with pytest.raises(AttributeError, match="NoSuchStore"):
        cuzarr.storage.NoSuchStore  # noqa: B018


def test_get_reused_reads_whole_values_into_a_thread_buffer(tmp_path, monkeypatch):
    from cuzarr.runtime.sync import sync
    from cuzarr.storage.local import files as local

    store = LocalStore(tmp_path)
    sync(store.set("a/b", b"x" * 1000))
    sync(store.set("c", b"0123456789"))
    sio = store.sync_io()
    first = sio.get_reused("a/b")
    assert bytes(first) == b"x" * 1000
    assert bytes(sio.get_reused("c")) == b"0123456789"
    assert sio.get_reused("missing") is None
    assert sio.get_reused("a") is None  # a directory
    monkeypatch.setattr(local, "REUSE_MAX", 100)
    big = sio.get_reused("a/b")  # over the limit: a value of its own
    assert isinstance(big, bytes) and big == b"x" * 1000


def test_large_chunk_corruption_names_the_key(tmp_path):
    """Large chunks (read one per batch into the reused buffer) still report
    a damaged chunk by its key, and the other chunks are not touched."""
    from cuzarr.errors import CodecError

    data = np.arange(512 * 1024, dtype="u4").reshape(512, 1024)
    a = cuzarr.create_array(tmp_path / "a", shape=data.shape, chunks=(256, 512), dtype="u4")
    a[...] = data
    victim = tmp_path / "a" / "c" / "1" / "0"
    victim.write_bytes(victim.read_bytes()[:-100])
    with pytest.raises(CodecError, match="c/1/0"):
        a[...]
    np.testing.assert_array_equal(a[:256], data[:256])


def test_writes_survive_the_lock_directory_being_removed(tmp_path, monkeypatch):
    """The lock directory is made once per process; a cleaner removing it later
    must not break writes."""
    import shutil

    from cuzarr.storage.local import locks

    # a lock directory of this test's own: other test processes' locks stay untouched
    monkeypatch.setenv(locks.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(locks, "_lock_state", None)
    a = cuzarr.create_array(tmp_path / "a", shape=(16, 16), chunks=(4, 4), dtype="i2")
    a[1:15, 1:15] = 3
    assert locks.lock_dir() == str(tmp_path / "locks")
    shutil.rmtree(locks.lock_dir())
    a[2:14, 2:14] = 5
    want = np.zeros((16, 16), "i2")
    want[1:15, 1:15] = 3
    want[2:14, 2:14] = 5
    np.testing.assert_array_equal(a[...], want)


@pytest.mark.parametrize("slice_s", [10.0, 0.001])
def test_cancelled_loops_stop_after_their_current_batch(slice_s):
    """Also when the loops go back to the pool's queue after every batch
    (short slices): the cancelled call waits for the batch running then."""
    job = _CountingJob(0.02)

    async def main() -> None:
        task = asyncio.ensure_future(pull_batches(10_000, 1, job, slice_s=slice_s))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert job.running == 0  # the cancellation came once the running batches ended
        n = len(job.started)
        await asyncio.sleep(0.1)
        assert len(job.started) == n  # and none started after

    _run(main())
    assert len(job.started) < 100


def test_get_ranges_reused(tmp_path, monkeypatch):
    from cuzarr.runtime.sync import sync
    from cuzarr.storage import OffsetByteRequest, RangeByteRequest
    from cuzarr.storage.local import files as local

    store = LocalStore(tmp_path)
    sync(store.set("k", bytes(range(100))))
    sio = store.sync_io()
    reqs = [
        ("k", RangeByteRequest(10, 20)),
        ("missing", RangeByteRequest(0, 5)),
        ("k", RangeByteRequest(95, 120)),  # runs past the end: what is there
        ("k", RangeByteRequest(5, 5)),
    ]
    got = sio.get_ranges_reused(reqs)
    assert [None if g is None else bytes(g) for g in got] == [
        bytes(range(10, 20)),
        None,
        bytes(range(95, 100)),
        b"",
    ]
    # other requests, or more than the buffer takes: get_ranges' own values
    mixed = sio.get_ranges_reused([("k", OffsetByteRequest(98)), ("k", RangeByteRequest(0, 2))])
    assert mixed == [bytes([98, 99]), bytes([0, 1])]
    monkeypatch.setattr(local, "REUSE_MAX", 4)
    assert sio.get_ranges_reused([("k", RangeByteRequest(0, 8))]) == [bytes(range(8))]


@pytest.mark.parametrize("part", [1, 3000, 1 << 20])
def test_sharded_local_reads_in_parts(tmp_path, monkeypatch, part):
    """Local shards are read a part at a time (parts smaller than one inner
    chunk included); missing inner chunks read as fill, and a shard cut short
    is an error naming it."""
    from cuzarr.core import shards
    from cuzarr.errors import CodecError

    monkeypatch.setattr(shards, "LOCAL_RANGE_MAX", part)
    data = (np.arange(96 * 80, dtype="i4").reshape(96, 80) * 7) % 1013
    a = cuzarr.create_array(
        tmp_path / "s",
        shape=data.shape,
        chunks=(16, 16),
        shards=(48, 32),
        dtype="i4",
        fill_value=-1,
    )
    a[...] = data
    a[16:32, 0:16] = -1  # an inner chunk equal to the fill: not stored
    want = data.copy()
    want[16:32, 0:16] = -1
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a[5:90:3, 70:3:-2], want[5:90:3, 70:3:-2])
    shard = tmp_path / "s" / "c" / "1" / "1"
    raw = shard.read_bytes()
    shard.write_bytes(raw[:100] + raw[-(16 * 6 + 4) :])  # data gone, index kept
    with pytest.raises(CodecError, match="c/1/1"):
        a[...]


def test_raise_mmap_threshold_is_monotonic_and_capped(monkeypatch):
    from cuzarr.runtime import workers

    monkeypatch.setattr(workers, "_primed", 0)
    workers.raise_mmap_threshold(4 << 20)
    assert workers._primed == 4 << 20
    workers.raise_mmap_threshold(1 << 20)  # lower: nothing to do
    assert workers._primed == 4 << 20
    workers.raise_mmap_threshold(1 << 40)  # glibc's dynamic threshold stops at 32 MiB
    assert workers._primed == workers._MMAP_MAX < 32 << 20


_MMAPPED_AFTER_PRIMING = """
import ctypes, sys
import numpy as np
from cuzarr.runtime import workers
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
        "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
workers.raise_mmap_threshold(int(sys.argv[1]))
before = libc.mallinfo2().hblks
block = np.empty(24 << 20, dtype=np.uint8)  # untouched
print(libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc's allocator (mallinfo2, dynamic mmap threshold) only",
)
@pytest.mark.parametrize("ask", [64 << 20, 32 << 20])
def test_raise_mmap_threshold_takes_effect_for_large_chunks(ask):
    """A shard write asks for 32 MiB or more: glibc must then serve a 24 MiB buffer
    from its heap, not from a fresh mmap (a block of exactly 32 MiB freed once left
    the threshold where it was). In a fresh process: the threshold is the process's."""
    import ctypes

    if not hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2"):
        pytest.skip("glibc without mallinfo2")
    r = subprocess.run(
        [sys.executable, "-c", _MMAPPED_AFTER_PRIMING, str(ask)],
        capture_output=True, text=True, timeout=120,
        # a fixed threshold (MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES) turns the dynamic one off
        env={k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]  # no new mmapped block


def test_short_os_writes_are_continued(tmp_path, monkeypatch):
    """os.write may write less than asked: the rest is written, nothing lost."""
    from cuzarr.runtime.sync import sync
    from cuzarr.storage.local import files as local

    real_write = local.os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(memoryview(data)[:777]))

    value = bytes(range(256)) * 40
    store = LocalStore(tmp_path)
    monkeypatch.setattr(local.os, "write", short_write)
    try:
        store._write("a/k", value)
    finally:
        monkeypatch.undo()
    assert len(calls) == -(-len(value) // 777)
    assert sync(store.get("a/k")) == value


def test_busy_batches_wait_a_bounded_number_at_a_time(tmp_path):
    """Batches handed back because another writer holds their locks wait on the
    loop a few at a time (each holds a lock descriptor while it waits)."""
    import os

    n = 2048  # 32 batches of 64 chunks
    a = cuzarr.create_array(tmp_path / "a", shape=(n * 16384,), chunks=(16384,), dtype="f4")
    t, release = _hold_locks(LocalStore(tmp_path / "a"), [f"c/{i}" for i in range(n)])
    base = len(os.listdir("/proc/self/fd"))
    peak = [base]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], len(os.listdir("/proc/self/fd")))
            time.sleep(0.002)

    w = threading.Thread(target=watch)
    w.start()
    writer = threading.Thread(target=lambda: a.__setitem__(Ellipsis, 1.5))
    writer.start()
    time.sleep(0.3)
    release.set()
    writer.join(30)
    stop.set()
    w.join()
    t.join(5)
    assert peak[0] - base <= max_workers() * 2 + 2 + 4
    np.testing.assert_array_equal(a[::16384], np.full(n, 1.5, "f4"))


def test_store_locks_that_can_only_be_awaited():
    """A store subclass whose ``lock_keys`` is a plain async context manager
    (no ``try_acquire``): its batches take the awaited path."""
    import contextlib

    from cuzarr.storage import MemoryStore

    entered: list[int] = []

    class LockedMemoryStore(MemoryStore):
        @contextlib.asynccontextmanager
        async def lock_keys(self, keys):
            entered.append(len(list(keys)))
            yield

    a = cuzarr.create_array(LockedMemoryStore(), shape=(64,), chunks=(8,), dtype="i4")
    a[1:63] = 5
    want = np.zeros(64, "i4")
    want[1:63] = 5
    np.testing.assert_array_equal(a[...], want)
    assert sum(entered) == 8


def test_pickled_store_finds_its_lock_directory_anew(tmp_path):
    import pickle

    store = LocalStore(tmp_path)
    locks = store.lock_keys(["k"])
    assert locks.try_acquire()
    locks.release()
    assert store._lock_base is not None
    assert pickle.loads(pickle.dumps(store))._lock_base is None


def test_pool_resized_while_a_call_runs_keeps_serving_it():
    """Another thread changing ``threading.max_workers`` mid-call rebuilds the
    pool; the running call keeps submitting its batches to the pool it holds."""
    from cuzarr.runtime import sync

    seen: list[int] = []

    def job(lo: int, hi: int) -> None:
        if lo == 0:
            with cuzarr.config.set({"threading.max_workers": sync.max_workers() + 1}):
                sync.get_executor()  # as a call in another thread would
        seen.append(lo)

    _run(pull_batches(8, 1, job, slice_s=0.0))
    assert sorted(seen) == list(range(8))


def test_io_semaphores_of_closed_loops_are_forgotten():
    """Each asyncio.run is a new loop with its own I/O semaphore: closed loops'
    entries (which keep the loop alive once a task waited) are dropped."""
    from cuzarr.runtime import sync

    async def take() -> None:
        async with sync.io_semaphore():
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(take(), take())  # the second waits: bound to the loop

    before = len(sync._semaphores)
    with cuzarr.config.set({"async.concurrency": 1}):
        for _ in range(10):
            asyncio.run(main())
    assert len(sync._semaphores) <= before + 1


def test_numcodecs_is_imported_only_when_a_codec_needs_it(tmp_path):
    """Reading a plain zstd array on a machine with libzstd never needs numcodecs
    (~7 MiB resident, ~40 ms to import); a writable handle loads it when opened
    (large zstd chunks compress through it), not inside its first write."""
    from cuzarr.codecs import libzstd

    if not libzstd.available():
        pytest.skip("without the system libzstd, large zstd frames decode through numcodecs")
    d = np.arange(300_000, dtype="u2").reshape(300, 1000)
    for name, chunks in (("big", (256, 512)), ("small", (16, 16))):
        cuzarr.create_array(tmp_path / name, shape=d.shape, chunks=chunks, dtype="u2")[...] = d
    code = (
        "import sys, cuzarr, numpy as np\n"
        f"p = {str(tmp_path)!r}\n"
        "for name in ('big', 'small'):\n"
        "    r = cuzarr.open_array(p + '/' + name, mode='r')\n"
        "    assert int(r[...].sum()) == int(np.arange(300_000, dtype='u2').sum()), name\n"
        "    assert int(r[5:290:7, 3:999:11].sum()) > 0\n"
        "print('numcodecs' in sys.modules)\n"
        "w = cuzarr.open_array(p + '/big', mode='r+')\n"
        "print('numcodecs' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("loops", [-3, -1, 0, 1, 7])
def test_any_loops_value_runs_every_batch(loops):
    seen: list[int] = []
    lock = threading.Lock()

    def job(lo: int, hi: int) -> None:
        with lock:
            seen.extend(range(lo, hi))

    assert _run(pull_batches(23, 4, job, loops=loops)) == []
    assert sorted(seen) == list(range(23))


# ---------------------------------------------------------------------------
# share: parts of a batch's work taken by the call's idle loops
# ---------------------------------------------------------------------------


@pytest.fixture
def two_workers():
    with cuzarr.config.set({"threading.max_workers": 2}):
        yield


def _parts_job(n_parts: int, seconds: float, log: list[tuple[int, int]], fail_at: int = -1):
    """A batch job that shares ``n_parts`` parts, each sleeping ``seconds`` (the
    GIL released, as codec calls do); records (part, thread) pairs."""

    def part(i: int) -> int:
        log.append((i, threading.get_ident()))
        if i == fail_at:
            raise ValueError(f"part {i} is bad")
        time.sleep(seconds)
        return i * i

    results: dict[int, list[int]] = {}

    def job(lo: int, hi: int) -> None:
        results[lo] = share(part, n_parts)

    return job, results


def test_share_outside_a_batch_takes_idle_pool_threads(two_workers):
    seen: list[int] = []

    def part(i: int) -> int:
        seen.append(threading.get_ident())
        time.sleep(0.003)
        return i + 1

    assert share(part, 40) == list(range(1, 41))
    assert len(seen) == 40 and len(set(seen)) == 2
    assert share(part, 0) == []


def test_share_with_one_worker_runs_in_turn_here():
    me = threading.get_ident()
    seen: list[int] = []
    with cuzarr.config.set({"threading.max_workers": 1}):
        assert share(lambda i: seen.append(threading.get_ident()) or i, 5) == list(range(5))
    assert set(seen) == {me}


def test_share_on_a_busy_pool_does_not_wait_for_its_helpers(two_workers):
    """Every pool thread busy (here: blocked until the shared work is done):
    the helper tasks cannot start, and the caller does all parts itself."""
    from cuzarr.runtime.sync import get_executor

    release = threading.Event()
    pool = get_executor()
    blockers = [pool.submit(release.wait, 10) for _ in range(2)]
    try:
        me = threading.get_ident()
        seen: list[int] = []
        assert share(lambda i: seen.append(threading.get_ident()) or -i, 8) == [
            -i for i in range(8)
        ]
        assert set(seen) == {me}
    finally:
        release.set()
        for b in blockers:
            b.result()


def test_share_outside_a_batch_raises_the_first_error(two_workers):
    started: list[int] = []

    def part(i: int) -> None:
        started.append(i)
        if i == 3:
            raise KeyError("part 3")
        time.sleep(0.002)

    with pytest.raises(KeyError, match="part 3"):
        share(part, 100)
    n = len(started)
    time.sleep(0.03)
    assert len(started) == n < 100


def test_idle_loops_help_with_the_parts_of_a_single_batch(two_workers):
    log: list[tuple[int, int]] = []
    job, results = _parts_job(40, 0.003, log)
    assert _run(pull_batches(1, 1, job, helpable=True)) == []
    assert results == {0: [i * i for i in range(40)]}  # in order, whoever ran them
    assert sorted(i for i, _ in log) == list(range(40))  # each part once
    assert len({t for _, t in log}) == 2  # the loop with no batch took parts too


def test_without_helpable_a_single_batch_runs_on_one_thread(two_workers):
    log: list[tuple[int, int]] = []
    job, results = _parts_job(20, 0.001, log)
    _run(pull_batches(1, 1, job))
    assert results == {0: [i * i for i in range(20)]}
    assert len({t for _, t in log}) == 1


def test_a_loop_out_of_batches_helps_with_the_last_one(two_workers):
    log: list[tuple[int, int]] = []
    parts, _ = _parts_job(40, 0.003, log)
    owner: dict[int, int] = {}

    def job(lo: int, hi: int) -> None:
        owner[lo] = threading.get_ident()
        if lo == 1:
            parts(lo, hi)  # the long batch shares its parts

    _run(pull_batches(2, 1, job, helpable=True))
    threads = {t for _, t in log}
    assert len(threads) == 2 and owner[1] in threads


def test_an_error_in_a_shared_part_is_raised_once_no_part_runs(two_workers):
    log: list[tuple[int, int]] = []
    job, results = _parts_job(200, 0.002, log, fail_at=10)
    running_after: list[int] = []
    with pytest.raises(ValueError, match="part 10"):
        _run(pull_batches(1, 1, job, helpable=True))
    n = len(log)
    time.sleep(0.05)
    running_after.append(len(log) - n)
    assert running_after == [0]  # nothing ran on after the call ended
    assert n < 200  # the parts after the failure were skipped
    assert results == {}


def test_shared_parts_may_share_again(two_workers):
    def inner(i: int) -> int:
        time.sleep(0.001)
        return i

    def outer(i: int) -> list[int]:
        return [10 * i + x for x in share(inner, 5)]

    results: list[list[list[int]]] = []

    def job(lo: int, hi: int) -> None:
        results.append(share(outer, 6))

    _run(pull_batches(1, 1, job, helpable=True))
    assert results == [[[10 * i + x for x in range(5)] for i in range(6)]]


def test_a_failing_batch_stops_the_helpers_of_the_others(two_workers):
    log: list[tuple[int, int]] = []
    parts, _ = _parts_job(30, 0.002, log)

    def job(lo: int, hi: int) -> None:
        if lo == 0:
            time.sleep(0.01)
            raise ValueError("batch 0 is bad")
        parts(lo, hi)

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="batch 0"):
        _run(pull_batches(3, 1, job, helpable=True))
    assert time.perf_counter() - t0 < 5
    n = len(log)
    time.sleep(0.05)
    assert len(log) == n


@pytest.mark.parametrize("threshold", [0, 1 << 40])
def test_sharded_writes_and_reads_are_alike_with_parts_shared_or_not(
    tmp_path, monkeypatch, two_workers, threshold
):
    """A shard coded in parallel holds the same bytes as one coded in turn, and
    reads back (whole, partially, updated in place) the same."""
    from cuzarr.codecs import sharding

    rng = np.random.default_rng(7)
    data = rng.integers(0, 2000, size=(384, 320), dtype=np.uint16)
    data[:128, :64] = 0  # an all-fill inner chunk: left out of its shard

    def write(path, min_nbytes):
        monkeypatch.setattr(sharding, "SHARE_MIN_NBYTES", min_nbytes)
        a = cuzarr.create_array(
            str(path), shape=data.shape, chunks=(64, 64), shards=(256, 256), dtype="uint16",
            fill_value=0, compressors=[{"name": "zstd", "configuration": {"level": 1}}],
        )
        a[...] = data
        a[100:300:3, 50:70] = 9  # read-modify-write of touched inner chunks
        return a

    shared = write(tmp_path / "shared", threshold)
    write(tmp_path / "serial", 1 << 40)
    want = data.copy()
    want[100:300:3, 50:70] = 9
    monkeypatch.setattr(sharding, "SHARE_MIN_NBYTES", threshold)
    np.testing.assert_array_equal(shared[...], want)
    np.testing.assert_array_equal(shared[5:380:7, ::-3], want[5:380:7, ::-3])
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "shared"))[...], want)
    files = sorted(p.relative_to(tmp_path / "serial") for p in (tmp_path / "serial").rglob("c/*/*"))
    assert files
    for f in files:
        assert (tmp_path / "shared" / f).read_bytes() == (tmp_path / "serial" / f).read_bytes()


def test_helper_tasks_queued_on_a_busy_pool_do_not_hold_the_results(two_workers):
    """share's helper tasks that start after the parts ran out keep nothing of
    the job alive (its results may be large)."""
    import gc
    import weakref

    from cuzarr.runtime.sync import get_executor

    class Big:
        pass

    release = threading.Event()
    pool = get_executor()
    blockers = [pool.submit(release.wait, 10) for _ in range(2)]
    try:
        results = share(lambda i: Big(), 4)
        refs = [weakref.ref(r) for r in results]
        del results
        gc.collect()
        assert all(r() is None for r in refs)  # while the helper tasks still wait
    finally:
        release.set()
        for b in blockers:
            b.result()
