"""Platform fallbacks of ``LocalStore`` (``cuzarr.storage.local``) and of the
codecs, run on Linux with each Linux-only facility made unavailable, as it is
on macOS or Windows: ``os.preadv`` (macOS before 11, Windows), ``os.pread`` and
``os.writev`` (Windows), ``/proc/self/mountinfo`` (macOS, Windows), ``fcntl``
(Windows), rename-over of a file in use (Windows' sharing violations) and the
system libzstd (not installed). Each must give the same bytes and the same
guarantees where the platform allows; zarr-python reads what was written.
"""

from __future__ import annotations

import ctypes.util
import os
import threading
import time

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.codecs import libzstd
from cuzarr.runtime.sync import sync
from cuzarr.storage import LocalStore, RangeByteRequest
from cuzarr.storage.local import TEMP_PREFIX, files, locks, mounts

FACILITIES = ["preadv", "pread", "writev", "mountinfo", "fcntl", "all"]


def _disable(monkeypatch, what: str, tmp_path) -> None:
    """Make one platform facility unavailable to cuzarr (or all of them)."""
    if what in ("preadv", "all"):
        monkeypatch.setattr(files, "_preadv_os", files._pread_copy)
    if what in ("pread", "all"):
        monkeypatch.setattr(files, "_pread_os", files._lseek_read)
    if what in ("writev", "all"):
        monkeypatch.setattr(files, "_writev_os", files._writev_each)
    if what in ("mountinfo", "all"):
        monkeypatch.setattr(mounts, "MOUNTINFO", str(tmp_path / "no-such-mountinfo"))
        monkeypatch.setattr(mounts, "_fs_full", {})
    if what in ("fcntl", "all"):
        monkeypatch.setattr(files, "fcntl", None)
        monkeypatch.setattr(locks, "_MODE", "process")


@pytest.mark.parametrize("what", FACILITIES)
@pytest.mark.parametrize("sharded", [False, True])
def test_arrays_round_trip_without_the_facility(tmp_path, monkeypatch, what, sharded):
    _disable(monkeypatch, what, tmp_path)
    rng = np.random.default_rng(1)
    data = np.cumsum(rng.integers(-3, 4, (96, 200)), axis=1).astype("<i4")
    kw = {"chunks": (16, 40), "shards": (48, 80)} if sharded else {"chunks": (16, 40)}
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(path, shape=data.shape, dtype=data.dtype, fill_value=0, **kw)
    a[...] = data
    a[5:70, 3:150] = data[5:70, 3:150] * 2  # partial chunks: read-modify-write
    want = data.copy()
    want[5:70, 3:150] *= 2
    b = cuzarr.open_array(path, mode="r")
    np.testing.assert_array_equal(b[...], want)
    np.testing.assert_array_equal(b[7:90:3, 11:190:7], want[7:90:3, 11:190:7])
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], want)
    # and what zarr-python writes, cuzarr reads
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=data.shape, dtype=data.dtype, **kw)
    z[...] = data
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path / "z.zarr", mode="r")[...], data)
    assert not [n for _, _, fs in os.walk(tmp_path) for n in fs if n.startswith(TEMP_PREFIX)]


@pytest.mark.parametrize("what", ["preadv", "pread", "all"])
def test_store_reads_without_positioned_reads(tmp_path, monkeypatch, what):
    """Whole, ranged, reused and in-place reads give the same bytes."""
    store = LocalStore(tmp_path)
    value = bytes(range(256)) * 300
    sync(store.set("c/0", value))
    sio = store.sync_io()
    _disable(monkeypatch, what, tmp_path)
    assert bytes(sio.get_reused("c/0")) == value
    assert sync(store.get("c/0", byte_range=RangeByteRequest(1000, 5000))) == value[1000:5000]
    got = sio.get_ranges_reused([("c/0", RangeByteRequest(7, 70_000)), ("c/0", RangeByteRequest(0, 3))])
    assert [bytes(g) for g in got] == [value[7:70_000], value[:3]]
    assert sio.get_many(["c/0", "missing"]) == [value, None]


def test_unknown_file_system_confirms_short_reads(tmp_path, monkeypatch):
    """Without a mount table every file system counts as unknown: a read that
    comes back short is confirmed by one more (FUSE, NFS may read short)."""
    _disable(monkeypatch, "mountinfo", tmp_path)
    assert mounts._reads_full(str(tmp_path)) is False
    store = LocalStore(tmp_path / "s")
    items = [(f"c/{i}", bytes([i]) * (5000 + i)) for i in range(8)]
    sync(store.set_many(items))
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 4096)))
    assert store.sync_io().get_many([k for k, _ in items]) == [v for _, v in items]


def test_without_file_locks_threads_still_exclude_each_other(tmp_path, monkeypatch):
    """With no file-locking facility, the threads of one process still take
    each other's key locks: 4 threads writing disjoint cells of one chunk, one
    cell per call, lose nothing."""
    _disable(monkeypatch, "fcntl", tmp_path)
    n, nthreads = 400, 4
    a = cuzarr.create_array(tmp_path / "a", shape=(n,), chunks=(n,), dtype="i4", fill_value=0)
    errors: list[BaseException] = []

    def writer(p: int) -> None:
        try:
            for cell in range(p, n, nthreads):
                a[cell] = cell + 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=writer, args=(p,)) for p in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors
    np.testing.assert_array_equal(a[...], np.arange(1, n + 1))
    assert locks._local_held == set()  # every lock given back


def test_without_flock_old_temporaries_are_removed_by_age(tmp_path, monkeypatch):
    """Without flock nothing marks a live writer's temporary: the first write
    into a directory removes temporaries older than ``_STALE_AGE_S`` only."""
    _disable(monkeypatch, "fcntl", tmp_path)
    d = tmp_path / "s" / "c"
    d.mkdir(parents=True)
    old, new = d / f"{TEMP_PREFIX}old-0", d / f"{TEMP_PREFIX}new-0"
    old.write_bytes(b"killed writer")
    new.write_bytes(b"live writer")
    past = time.time() - files._STALE_AGE_S - 60
    os.utime(old, (past, past))
    sync(LocalStore(tmp_path / "s").set("c/0", b"x"))
    assert not old.exists() and new.read_bytes() == b"live writer"
    assert (d / "0").read_bytes() == b"x"


def _sharing_violation() -> PermissionError:
    e = PermissionError(13, "The process cannot access the file because it is being used")
    e.winerror = 32  # ERROR_SHARING_VIOLATION, as Windows reports it
    return e


def test_replace_retries_sharing_violations(tmp_path, monkeypatch):
    """Windows refuses to replace a file another handle holds open; such a
    replace is retried until the handle goes, and other errors raise at once."""
    real = os.replace
    fails = [2]

    def in_use_twice(src, dst):
        if fails[0]:
            fails[0] -= 1
            raise _sharing_violation()
        real(src, dst)

    monkeypatch.setattr(files, "_WINDOWS", True)
    monkeypatch.setattr(os, "replace", in_use_twice)
    store = LocalStore(tmp_path / "s")
    monkeypatch.setattr(files, "fcntl", None)  # as on Windows: closed before the rename
    sync(store.set("c/0", b"new"))
    assert (tmp_path / "s" / "c" / "0").read_bytes() == b"new" and fails == [0]

    monkeypatch.setattr(os, "replace", lambda s, d: (_ for _ in ()).throw(_sharing_violation()))
    with pytest.raises(PermissionError):
        files.replace_retrying(str(tmp_path / "x"), str(tmp_path / "y"), tries=3)
    calls = []

    def denied(src, dst):
        calls.append(src)
        raise PermissionError(13, "denied")  # no winerror: not a sharing violation

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        files.replace_retrying(str(tmp_path / "x"), str(tmp_path / "y"))
    assert len(calls) == 1
    # and no temporary is left behind by the failed write
    with pytest.raises(PermissionError):
        sync(store.set("c/1", b"v"))
    assert sorted(os.listdir(tmp_path / "s" / "c")) == ["0"]


def test_zstd_without_the_system_library(tmp_path, monkeypatch):
    """No libzstd on the system (or one too old): numcodecs decodes, with the
    same values."""
    monkeypatch.setattr(libzstd, "_candidates", lambda: ["libcuzarr-no-such-zstd.so.9"])
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(libzstd, "_loaded", False)
    monkeypatch.setattr(libzstd, "_lib", None)
    assert not libzstd.available()
    data = np.cumsum(np.random.default_rng(2).integers(-3, 4, (300, 700)), axis=1).astype("u2")
    zstd = [{"name": "zstd", "configuration": {"level": 1}}]
    a = cuzarr.create_array(tmp_path / "a", shape=data.shape, chunks=(256, 512), dtype="u2",
                            compressors=zstd)
    a[...] = data
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path / "a", mode="r")[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)
    assert libzstd._lib is None


def test_exclusive_writes_without_flock(tmp_path, monkeypatch):
    """``set_if_not_exists`` without flock (the temporary closed before it is
    linked into place, as Windows needs): the first value stays, nothing is
    left behind."""
    _disable(monkeypatch, "fcntl", tmp_path)
    store = LocalStore(tmp_path / "s")
    sync(store.set_if_not_exists("c/0", b"first"))
    sync(store.set_if_not_exists("c/0", b"second"))
    assert sync(store.get("c/0")) == b"first"
    assert os.listdir(tmp_path / "s" / "c") == ["0"]
