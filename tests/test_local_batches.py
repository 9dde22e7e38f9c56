"""LocalStore's batched small-file paths: ``_write_batch`` (paths planned first,
system calls in a tight loop, the general ``_write`` for whatever is unusual)
and the key locks as byte ranges (``_lock_runs``)."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys

import numpy as np
import pytest

import cuzarr
from cuzarr.errors import StoreKeyError
from cuzarr.storage import LocalStore
from cuzarr.storage.local import TEMP_PREFIX
from cuzarr.storage.local import files as local_mod
from cuzarr.storage.local.locks import _lock_runs

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX batch path")


def _files(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root).replace(os.sep, "/")] = f.read()
    return out


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_batch_into_new_and_nested_directories(tmp_path):
    s = LocalStore(tmp_path / "s")
    items = [(f"a/c/{i}/{j}", bytes([i, j]) * (i + j + 1)) for i in range(5) for j in range(7)]
    items += [("zarr.json", b"{}"), ("a/zarr.json", b"[]"), ("b/deep/er/x", b"x")]
    s._write_batch(items)
    assert _files(tmp_path / "s") == dict(items)
    # again, over the files now there (directories known): every value replaced
    s2 = [(k, v[::-1] + b"!") for k, v in items]
    s._write_batch(s2)
    assert _files(tmp_path / "s") == dict(s2)


def test_batch_takes_buffers_other_than_bytes(tmp_path):
    s = LocalStore(tmp_path)
    arr = np.arange(6, dtype="<u4")
    s._write_batch([("x/0", memoryview(arr)), ("x/1", bytearray(b"abc")), ("x/2", arr)])
    assert _files(tmp_path) == {"x/0": arr.tobytes(), "x/1": b"abc", "x/2": arr.tobytes()}


def test_a_taken_temporary_name_goes_the_general_way(tmp_path, monkeypatch):
    s = LocalStore(tmp_path)
    s._write_batch([("d/0", b"first"), ("d/1", b"first")])  # directory known
    start = 10**9
    monkeypatch.setattr(local_mod, "_tmp_count", itertools.count(start))
    # a file already sits at the name the batch's first temporary gets
    squatter = tmp_path / "d" / f"{TEMP_PREFIX}{local_mod._tmp_token}{start:x}-0"
    squatter.write_bytes(b"someone else's")
    s._write_batch([("d/0", b"new0"), ("d/1", b"new1")])
    got = _files(tmp_path)
    assert got["d/0"] == b"new0" and got["d/1"] == b"new1"
    assert squatter.read_bytes() == b"someone else's"  # not ours to remove


def test_a_failing_file_raises_cleans_up_and_leaks_no_descriptor(tmp_path):
    s = LocalStore(tmp_path)
    s._write_batch([("d/0", b"a"), ("d/1", b"b")])
    (tmp_path / "d" / "2").mkdir()  # a key whose path is a directory
    (tmp_path / "d" / "2" / "keep").write_bytes(b"k")
    before = _open_fds()
    with pytest.raises(OSError):
        s._write_batch([("d/0", b"A"), ("d/2", b"C"), ("d/3", b"D")])
    assert _open_fds() == before
    got = _files(tmp_path)
    assert got["d/0"] == b"A"  # written before the failing one
    assert "d/3" not in got  # the batch stopped there
    assert got["d/2/keep"] == b"k"
    assert not [k for k in got if TEMP_PREFIX in k]


def test_symlinked_directory_out_of_the_root_is_refused_in_a_batch(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, root / "a" / "c")
    # what looks like an abandoned temporary out there: not ours to clean
    victim = outside / f"{TEMP_PREFIX}abandoned-0"
    victim.write_bytes(b"v")
    s = LocalStore(root)
    with pytest.raises(ValueError, match="outside the store root"):
        s._write_batch([("a/c/0", b"x"), ("a/c/1", b"y")])
    assert sorted(p.name for p in outside.iterdir()) == [victim.name]


def test_symlinked_chunk_directory_is_refused_by_array_writes(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    a = cuzarr.create_array(LocalStore(root), name="a", shape=(64,), chunks=(2,), dtype="u1")
    os.symlink(outside, root / "a" / "c")
    victim = outside / f"{TEMP_PREFIX}abandoned-0"
    victim.write_bytes(b"v")
    with pytest.raises(ValueError, match="outside the store root"):
        a[:] = 1
    assert sorted(p.name for p in outside.iterdir()) == [victim.name]


@pytest.mark.parametrize("key", [["a"], bytearray(b"a"), {"a": 1}, 3])
def test_keys_that_are_not_str_are_store_key_errors(tmp_path, key):
    s = LocalStore(tmp_path)
    with pytest.raises(StoreKeyError, match="keys are str"):
        s._write_batch([("ok/0", b"x"), (key, b"y")])


def test_duplicate_keys_in_a_batch_last_wins(tmp_path):
    s = LocalStore(tmp_path)
    s._write_batch([("k/0", b"1"), ("k/0", b"2"), ("k/0", b"3")])
    assert _files(tmp_path) == {"k/0": b"3"}


def test_small_chunk_array_round_trip_and_no_temporaries(tmp_path):
    data = np.arange(96 * 80, dtype="u2").reshape(96, 80)
    a = cuzarr.create_array(tmp_path / "t", shape=data.shape, chunks=(4, 4), dtype="u2")
    a[...] = data
    a[3:50, 7:71] = data[3:50, 7:71] + 1  # partial chunks: read-modify-write
    want = data.copy()
    want[3:50, 7:71] += 1
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path / "t", mode="r")[...], want)
    assert not [k for k in _files(tmp_path) if TEMP_PREFIX in k]


# -- key locks as byte ranges ---------------------------------------------------


def test_neighbouring_chunk_keys_make_one_run():
    keys = [f"arr/c/3/{j}" for j in range(100)]
    runs = _lock_runs(keys)
    assert len(runs) == 1 and runs[0][1] == 100
    # v2 keys ('.' separated) too, and the order of the keys does not matter
    assert _lock_runs([f"arr/3.{j}" for j in (5, 3, 4)])[0][1] == 3
    # one key, one byte, always the same one
    assert _lock_runs(["arr/c/3/7"]) == [(runs[0][0] + 7, 1)]


def test_other_keys_are_hashed_apart_from_chunk_keys():
    runs = _lock_runs(["zarr.json", "a/b", "c/x1", f"c/{1 << 30}", "c/٣"])
    assert len(runs) == 5
    assert all(start >= 1 << 62 and n == 1 for start, n in runs)
    chunk = _lock_runs(["c/0"])[0][0]
    assert chunk < 1 << 62
    assert all(start + n <= (1 << 63) - 1 for start, n in runs)  # fits an off_t


def test_range_locks_exclude_across_stores(tmp_path):
    s1, s2 = LocalStore(tmp_path), LocalStore(tmp_path)
    held = s1.lock_keys([f"c/0/{j}" for j in range(10)])
    assert held.try_acquire()
    try:
        assert not s2.lock_keys(["c/0/5"]).try_acquire()
        assert not s2.lock_keys(["c/0/9", "c/0/10"]).try_acquire()
        other = s2.lock_keys(["c/0/10", "c/1/5", "zarr.json"])
        assert other.try_acquire()
        other.release()
    finally:
        held.release()
    assert s2.lock_keys(["c/0/5"]).try_acquire()


def test_range_locks_wait_for_each_other(tmp_path):
    s1, s2 = LocalStore(tmp_path), LocalStore(tmp_path)
    order: list[str] = []

    async def first():
        async with s1.lock_keys([f"c/{j}" for j in range(50)]):
            order.append("1 in")
            await asyncio.sleep(0.05)
            order.append("1 out")

    async def second():
        await asyncio.sleep(0.01)
        async with s2.lock_keys(["c/49", "c/50"]):
            order.append("2 in")

    async def main():
        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert order == ["1 in", "1 out", "2 in"]


class _CleanerFirst:
    """``fcntl`` as the local store sees it, except that the first ``flock`` on
    a temporary finds it removed by a cleaner (another writer's first write into
    the directory) between its creation and the lock."""

    def __init__(self, real, times: int) -> None:
        self._real = real
        self.left = times

    def __getattr__(self, name):
        return getattr(self._real, name)

    def flock(self, fd, op):
        if self.left > 0:
            path = os.readlink(f"/proc/self/fd/{fd}")
            if os.path.basename(path).startswith(TEMP_PREFIX):
                self.left -= 1
                os.unlink(path)
        return self._real.flock(fd, op)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("times", [1, 5])
def test_a_temporary_removed_before_its_lock_is_written_again(tmp_path, monkeypatch, times):
    fake = _CleanerFirst(local_mod.fcntl, times)
    monkeypatch.setattr(local_mod, "fcntl", fake)
    s = LocalStore(tmp_path)
    s._write("new/dir/0", b"zero")  # its directory is made by this write
    s._write_batch([("new/dir/1", b"one"), ("other/2", b"two")])
    assert fake.left == 0
    assert _files(tmp_path) == {"new/dir/0": b"zero", "new/dir/1": b"one", "other/2": b"two"}


def test_concat_values_are_written_whole_with_writev(tmp_path, monkeypatch):
    """A shard's parts (storage.base.Concat) go to a local file through writev,
    continued after short writes and past the per-call part limit; stores that
    do not take parts get bytes."""
    import os

    from cuzarr.storage.base import Concat
    from cuzarr.storage.local import files as local

    parts = [bytes([i % 251]) * (i % 7 + 1) for i in range(3000)]  # > IOV_MAX parts
    want = b"".join(parts)
    real = os.writev
    calls = []

    def short_writev(fd, bufs):  # at most 1000 bytes a call
        calls.append(len(bufs))
        data = b"".join(bytes(b) for b in bufs)[:1000]
        return real(fd, [data])

    monkeypatch.setattr(local, "_writev_os", short_writev)
    store = LocalStore(str(tmp_path))
    assert store.takes_parts
    store._write("c/0", Concat(parts))
    store._write_batch([("c/1", Concat(parts)), ("c/2", b"plain")])
    assert (tmp_path / "c" / "0").read_bytes() == want
    assert (tmp_path / "c" / "1").read_bytes() == want
    assert (tmp_path / "c" / "2").read_bytes() == b"plain"
    assert len(calls) > len(want) // 1000 and max(calls) <= local._IOV_MAX


def test_sharded_writes_hand_bytes_to_stores_that_take_no_parts(tmp_path):
    import numpy as np

    import cuzarr
    from cuzarr.storage import MemoryStore

    class Counting(LocalStore):  # overrides set: gets bytes only
        seen: list = []

        async def set(self, key, value):
            type(self).seen.append(type(value))
            await super().set(key, value)

    for store in (MemoryStore(), Counting(str(tmp_path / "s"))):
        a = cuzarr.create_array(store, shape=(64, 64), chunks=(16, 16), shards=(32, 64), dtype="i4")
        a[...] = np.arange(64 * 64, dtype="i4").reshape(64, 64)
        np.testing.assert_array_equal(a[...], np.arange(64 * 64).reshape(64, 64))
    assert Counting.seen and all(t in (bytes, memoryview, bytearray) for t in Counting.seen)
