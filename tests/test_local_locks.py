"""Key locks of ``LocalStore`` (``cuzarr.storage.local.locks``): every cuzarr
writer of one chunk file takes the same lock, however it spells the store's
root and whatever its temporary directory is.

Processes are started fresh (``subprocess``), each with its own ``TMPDIR`` and
its own spelling of the array's location (the array's directory as the root;
the group's directory as the root with ``path="u"``; a path through ``..``; a
symlink to the group), and write disjoint cells of one chunk or of one shard,
one cell per call: each call is a read-modify-write of the same file, so a
missing lock shows as lost cells.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cuzarr
from cuzarr.storage.local import locks

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symlinks, fork-free spawn")

NPROC = 4
# Writes per process and run: 4 x 160 x 2 layouts = 1,280 with this platform's
# locks; half that for the other platforms' modes run here (CI time).
WRITES = {"ofd": 160, "flock": 80, "msvcrt": 80}

_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import cuzarr
    from cuzarr.storage.local import locks

    how, where, p, nproc, writes, go, mode = sys.argv[1:8]
    # "flock": Linux's range locks made unavailable, as on macOS and BSD
    locks._MODE = mode
    if mode == "msvcrt":
        # Windows' msvcrt.locking (a non-blocking lock, or an unlock, of n bytes
        # from the file position, per handle; OSError when taken), played by
        # Linux's per-description range locks: runs cuzarr's Windows path
        import fcntl, struct, types

        def locking(fd, op, n):
            pos = os.lseek(fd, 0, os.SEEK_CUR)
            kind = fcntl.F_UNLCK if op == 0 else fcntl.F_WRLCK
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, 0, pos, n, 0))
            except BlockingIOError:
                raise PermissionError(13, "Permission denied") from None

        locks.msvcrt = types.SimpleNamespace(locking=locking, LK_UNLCK=0, LK_NBLCK=2)
    p, nproc, writes = int(p), int(nproc), int(writes)
    if how == "array":
        a = cuzarr.open_array(where, mode="r+")
    elif how == "path":
        a = cuzarr.open_array(where, path="u", mode="r+")
    else:
        a = cuzarr.open_group(where, mode="r+")["u"]
    while not os.path.exists(go):
        time.sleep(0.005)
    for i in range(writes):
        cell = i * nproc + p  # disjoint cells, all in one chunk (or shard)
        a[0, cell] = cell + 1
    """
)


def _spellings(tmp_path) -> list[tuple[str, str]]:
    """Four ways to name the array ``g.zarr/u``: (how it is opened, where)."""
    g = tmp_path / "g.zarr"
    (tmp_path / "other").mkdir()
    os.symlink(g, tmp_path / "link.zarr")
    return [
        ("array", str(g / "u")),
        ("path", str(g)),
        ("array", str(tmp_path / "other" / ".." / "g.zarr" / "u")),
        ("group", str(tmp_path / "link.zarr")),
    ]


def _run_writers(tmp_path, name: str, mode: str) -> np.ndarray:
    go = tmp_path / f"go-{name}"
    procs = []
    for p, (how, where) in enumerate(_spellings(tmp_path / name)):
        tmp = tmp_path / name / f"tmp{p}"  # each writer its own temp directory
        tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=os.pathsep.join(sys.path))
        args = [how, where, str(p), str(NPROC), str(WRITES.get(mode, 160)), str(go), mode]
        procs.append(
            subprocess.Popen([sys.executable, "-c", _WRITER, *args], env=env, cwd=tmp)
        )
    time.sleep(0.5)  # let every writer import and open before the start
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    return cuzarr.open_array(str(tmp_path / name / "g.zarr" / "u"), mode="r")[0]


@pytest.mark.parametrize(
    "mode", ["ofd", "flock", "msvcrt"] if locks._MODE == "ofd" else [locks._MODE]
)
@pytest.mark.parametrize("layout", ["chunk", "shard"])
def test_writers_of_one_file_share_a_lock_whatever_the_root_and_tmpdir(tmp_path, layout, mode):
    n = NPROC * WRITES.get(mode, 160)
    (tmp_path / layout).mkdir()
    g = cuzarr.open_group(str(tmp_path / layout / "g.zarr"), mode="w")
    if layout == "chunk":
        g.create_array("u", shape=(1, n), chunks=(1, n), dtype="i4", fill_value=0)
    else:
        g.create_array("u", shape=(1, n), chunks=(1, n // 8), shards=(1, n), dtype="i4",
                       fill_value=0)
    got = _run_writers(tmp_path, layout, mode)
    lost = int(np.count_nonzero(got != np.arange(1, n + 1)))
    assert lost == 0, f"{lost} of {n} writes lost"


def test_lock_identity_is_the_chunk_file(tmp_path):
    """The identity of a key's lock: the same for every spelling of the file's
    path, different for different files."""
    g = tmp_path / "g.zarr"
    (g / "u").mkdir(parents=True)
    os.symlink(g, tmp_path / "link")
    a = cuzarr.storage.LocalStore(g / "u")
    b = cuzarr.storage.LocalStore(g)
    c = cuzarr.storage.LocalStore(tmp_path / "link" / "." / "u")
    keys = ["c/0/5", "c/0/6", "zarr.json", "c/x"]
    ids = [locks.lock_runs(s, keys) for s in (a, c)]
    assert ids[0] == ids[1] == locks.lock_runs(b, ["u/" + k for k in keys])
    assert len(ids[0]) == 3  # c/0/5 and c/0/6 on neighbouring bytes: one run
    assert locks.lock_runs(b, keys) != ids[0]


def test_lock_files_are_bounded_and_outside_tmpdir(tmp_path, monkeypatch):
    """The lock directory does not follow ``TMPDIR``; and however many stores
    are written, it holds the same fixed set of files."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv(locks.LOCK_DIR_ENV, raising=False)
    assert not any(c.startswith(str(tmp_path)) for c in locks._lock_dir_candidates())
    # a lock directory of this test's own (other tests' writers lock meanwhile)
    monkeypatch.setenv(locks.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(locks, "_lock_state", None)
    for i in range(40):
        a = cuzarr.create_array(tmp_path / f"s{i}", shape=(8,), chunks=(4,), dtype="i2")
        a[1:3] = i
    assert locks.lock_dir() == str(tmp_path / "locks")
    names = set(os.listdir(tmp_path / "locks"))
    assert names and names <= {locks.stripe_name(i) for i in range(locks.STRIPES)}


@pytest.mark.skipif(locks.fcntl is None, reason="needs fcntl")
def test_lock_files_of_earlier_versions_are_swept(tmp_path, monkeypatch):
    """The per-root lock files earlier versions left under the temp directory
    go once nobody holds them; held ones and other files stay."""
    import fcntl
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    d = tmp_path / f"cuzarr-locks-{os.getuid()}"
    d.mkdir()
    free, held, byte = "a" * 24, "b" * 24, "c" * 24 + "-" + "0" * 16
    for name in (free, held, byte, "notes.txt"):
        (d / name).write_bytes(b"")
    fd = os.open(d / held, os.O_RDWR)
    try:
        if locks._OFD:
            assert locks._try_lock_range(fd, 1 << 40, 1)  # a key's byte, far out
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
        assert locks.sweep_legacy() == 2
        assert sorted(os.listdir(d)) == sorted([held, "notes.txt"])
    finally:
        os.close(fd)
    os.unlink(d / "notes.txt")
    assert locks.sweep_legacy() == 1 and not d.exists()  # emptied: removed
