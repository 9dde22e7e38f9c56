"""Crash safety: writers killed with SIGKILL at random moments never leave a torn
chunk, shard or metadata document, and their temporaries are never read as data
and are removed by the next writer.

``CUZARR_KILL_TRIALS`` (default 100) sets the number of kills, split over plain
chunks (40%), shards (40%) and metadata updates (20%).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time

import numpy as np
import pytest

import cuzarr
from cuzarr.storage import LocalStore
from cuzarr.storage.local import TEMP_PREFIX

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

TRIALS = int(os.environ.get("CUZARR_KILL_TRIALS", "100"))
SHAPE = (32, 32)


def _after_fork() -> None:
    # cuzarr.runtime.sync.get_executor is not fork-aware (reported): a pool inherited
    # through fork has no threads, and work submitted to it never runs.
    import cuzarr.runtime.sync as s

    s._pool = None


def _writer(root: str, kind: str, seed: int, ready, done) -> None:  # child process
    _after_fork()
    rng = random.Random(seed)
    a = cuzarr.open_array(LocalStore(root), path="a", mode="a")
    ready.set()
    k = seed * 1000
    while True:
        k += 1
        if kind == "plain":
            # whole array, or a chunk-aligned block, or a partial (read-modify-write)
            r = rng.random()
            if r < 0.4:
                a[...] = k
            elif r < 0.7:
                i, j = rng.randrange(8) * 4, rng.randrange(8) * 4
                a[i : i + 4, j : j + 4] = k
            else:
                # partly covered chunks are rewritten whole: every chunk stays uniform
                i, j = rng.randrange(8) * 4, rng.randrange(8) * 4
                a[i : i + 4, j : j + 4] = k
                a[i : i + 2, j : j + 4] = k  # partial update of the same chunk
                a[i + 2 : i + 4, j : j + 4] = k
        elif kind == "shard":
            r = rng.random()
            if r < 0.3:
                a[...] = k
            else:  # one inner chunk: a partial shard update
                i, j = rng.randrange(8) * 4, rng.randrange(8) * 4
                a[i : i + 4, j : j + 4] = k
        else:
            a.attrs["k"] = k
            a.attrs.update({"big": "x" * rng.randrange(1, 5000), "k2": k})
            a.resize((SHAPE[0] + 4 * (k % 3), SHAPE[1]))
        done.value += 1  # one writer at a time: no lock needed (see the test)


def _check_uniform_chunks(a: cuzarr.Array) -> None:
    data = a[...]
    rows, cols = data.shape
    for i in range(0, rows, 4):
        for j in range(0, cols, 4):
            block = data[i : i + 4, j : j + 4]
            # every (inner) chunk holds one version: old or new, never a mix
            assert (block == block.flat[0]).all(), (i, j, block)


def _temps(root: str) -> list[str]:
    out = []
    for dirpath, _d, files in os.walk(root):
        out += [os.path.join(dirpath, f) for f in files if f.startswith(TEMP_PREFIX)]
    return out


def _make(root: str, kind: str) -> None:
    if kind == "shard":
        cuzarr.create_array(
            LocalStore(root),
            name="a",
            shape=SHAPE,
            chunks=(4, 4),
            shards=(16, 16),
            dtype="i8",
            fill_value=0,
        )
    else:
        cuzarr.create_array(
            LocalStore(root),
            name="a",
            shape=SHAPE,
            chunks=(4, 4),
            dtype="i8",
            fill_value=0,
            compressors=[{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}]
            if kind == "plain"
            else "auto",
        )


@pytest.mark.parametrize("kind,share", [("plain", 0.4), ("shard", 0.4), ("metadata", 0.2)])
def test_sigkill_never_tears(tmp_path, kind, share):
    n = max(1, round(TRIALS * share))
    root = str(tmp_path / "store")
    _make(root, kind)
    ctx = mp.get_context("fork" if sys.platform == "linux" else "spawn")
    rng = random.Random(1234)
    temps_seen = 0
    # No lock: a writer SIGKILLed while holding a Value's lock would leave it held
    # for ever, and the next read of done.value here would hang (seen once).
    done = ctx.Value("i", 0, lock=False)
    progressed = 0
    for t in range(n):
        ready = ctx.Event()
        before = done.value
        p = ctx.Process(target=_writer, args=(root, kind, t + 1, ready, done), daemon=True)
        p.start()
        assert ready.wait(30)
        time.sleep(rng.uniform(0.005, 0.12))
        os.kill(p.pid, signal.SIGKILL)
        p.join(10)
        assert p.exitcode == -signal.SIGKILL
        progressed += done.value > before
        temps = _temps(root)
        temps_seen += len(temps)
        # metadata always parses; every chunk and shard decodes to one version
        with open(os.path.join(root, "a", "zarr.json")) as fh:
            meta = json.loads(fh.read())
        assert meta["node_type"] == "array"
        store = LocalStore(root, read_only=True)
        a = cuzarr.open_array(store, path="a", mode="r")
        if kind == "metadata":
            assert a.shape[0] in (32, 36, 40) and a.shape[1] == 32
            attrs = dict(a.attrs)
            assert ("k" not in attrs) or isinstance(attrs["k"], int)
        else:
            _check_uniform_chunks(a)
        # temporaries are never listed as keys
        import asyncio

        async def keys(store: LocalStore = store) -> list[str]:
            return [k async for k in store.list()]

        assert not [k for k in asyncio.run(keys()) if TEMP_PREFIX in k]
    # the next writer removes what killed writers left, in every directory it writes
    w = cuzarr.open_array(LocalStore(root), path="a", mode="a")
    if kind == "metadata":
        w.attrs["done"] = True
        assert not [p for p in _temps(root) if os.path.dirname(p) == os.path.join(root, "a")]
    else:
        w[...] = 7
        assert _temps(root) == []
        assert (w[...] == 7).all()
    # the writers did work before being killed (most kills land mid-write)
    assert progressed >= n // 2, (progressed, n)
    print(f"{kind}: {n} kills, {done.value} writes completed, {temps_seen} temporaries seen")


def test_next_writer_removes_only_dead_temporaries(tmp_path):
    root = tmp_path / "s"
    a = cuzarr.create_array(LocalStore(root), name="a", shape=(8,), chunks=(4,), dtype="i4")
    a[:] = 1
    d = root / "a" / "c"
    dead = d / f"{TEMP_PREFIX}deadbeef-0"
    dead.write_bytes(b"garbage")
    # a live writer's temporary: locked by this process through another descriptor
    import fcntl

    live = d / f"{TEMP_PREFIX}cafe-1"
    fd = os.open(live, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        b = cuzarr.open_array(LocalStore(root), path="a")
        np.testing.assert_array_equal(b[:], [1] * 8)  # temporaries never read
        b[:4] = 2  # first write into c/ through this store object cleans it
        assert not dead.exists()
        assert live.exists()
        assert LocalStore(root).cleanup_temporaries() == 0  # live one kept
    finally:
        os.close(fd)
    assert LocalStore(root).cleanup_temporaries() == 1
    assert not live.exists()
