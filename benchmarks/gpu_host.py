"""Host overhead of the device read path, on any machine (``gpu.py --host-only``).

Runs cuzarr's device read path (``gpu.emulate``: the same fetches, parsing,
validation and plans as on a GPU) with a *null* device executor, which neither
decodes nor scatters: what is left is the host's share of a device read. It
reads ``--gib`` of zstd float32 in 1 MiB chunks, plain and sharded (64 chunks
per shard), and times, interleaved, medians of ``--repeats``:

* the read with the null executor;
* the *pread limit*: a plain loop of ``os.preadv`` of the same files (the
  chunk files, or the shard files) into one preallocated buffer, whichever is
  faster of two such buffers: one holding all the files (a cold destination:
  it is larger than the CPU's cache) and one of ``REUSED_BYTES`` (or the
  largest file) that each file is read into again from its start when the next
  one would not fit (a destination in cache, as a read's reused staging is).

Per layout it prints::

    gpu-host: <us> us/chunk host overhead, staging <x> GB/s = <f> of the pread limit <layout>

where host overhead is (read - pread limit) / chunks (the median over repeats
of each read minus the pread loop run right after it): everything the read does
besides the byte copies that the plain loop does too (opening files, planning,
parsing headers, validation, packing, Python per chunk), and staging is the
compressed bytes over the read's time. Times are CPU seconds of the process
(all threads, ``time.process_time``: the kernel's page-cache copies count),
which other processes on a shared machine do not inflate; the wall-clock
figures follow on the next line. Reads run with ``--workers`` threads
(default 1, so the figure is per chunk of one thread's work).
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


class NullExecutor:
    """A device executor that takes prepared batches and does nothing with them
    (no decode, no scatter): the host half of a read, alone."""

    is_device = False

    def __init__(self) -> None:
        self.batches = 0
        self.streams = 0
        self.staged = 0

    def run(self, batch: Any, out: Any, fill: Any) -> None:
        self.batches += 1
        for rows in batch.streams.values():  # (no generator: this is timed too)
            self.streams += len(rows)

    def scatter_fancy(self, items: Any, chunks: Any, out: Any, fill: Any) -> None:
        raise AssertionError("the host-only benchmark reads slices only")

    def synchronize(self) -> None:
        """Nothing in flight."""


def _files(a: Any) -> list[tuple[str, int]]:
    """(path, size) of every chunk or shard file of the array ``a``."""
    root = Path(str(a.store.root)) / (a.path or "")
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if n == "zarr.json":
                continue
            p = os.path.join(dirpath, n)
            out.append((p, os.stat(p).st_size))
    out.sort()
    return out


# the reused destination of the pread limit: a device read's batch of 1 MiB
# chunks (cuzarr.core.engine.READ_BATCH_BYTES decoded) is about this much stored
REUSED_BYTES = 32 << 20


def _ones(n: int) -> np.ndarray:
    """``n`` page-aligned bytes of ones (here, not from cuzarr: A/B runs import
    older commits)."""
    raw = np.ones(n + 4096, np.uint8)
    skip = -raw.ctypes.data % 4096
    return raw[skip : skip + n]


def pread_loop(files: list[tuple[str, int]], buf: np.ndarray) -> int:
    """Read every file whole into ``buf``, one after another, starting again at
    its beginning where the next file would not fit; bytes read."""
    view = memoryview(buf)
    p = 0
    for path, n in files:
        if p + n > len(buf):
            p = 0
        fd = os.open(path, os.O_RDONLY)
        try:
            got = os.preadv(fd, [view[p : p + n]], 0)
        finally:
            os.close(fd)
        if got != n:
            raise OSError(f"{path}: short read")
        p += n
    return p


@contextlib.contextmanager
def null_device(null: NullExecutor):
    """Route the device read path's batches to ``null``."""
    import cuzarr
    import cuzarr.gpu.reader as rd

    stand_ins = {"_executor": lambda device: contextlib.nullcontext(null),
                 "_lease_executor": lambda device: null,
                 "_return_executor": lambda device, ex: None}
    # (only the hooks this version has: A/B runs against older commits)
    orig = {k: getattr(rd, k) for k in stand_ins if hasattr(rd, k)}
    for k in orig:
        setattr(rd, k, stand_ins[k])
    try:
        with cuzarr.config.set({"gpu.emulate": True}):
            yield
    finally:
        for k, v in orig.items():
            setattr(rd, k, v)


def _timed(fn: Any, wall: list[float], cpu: list[float], user: list[float]) -> None:
    t, c, u = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    fn()
    cpu.append(time.process_time() - c)
    user.append(resource.getrusage(resource.RUSAGE_SELF).ru_utime - u.ru_utime)
    wall.append(time.perf_counter() - t)


def measure(a: Any, layout: str, repeats: int, workers: int) -> dict:
    """Figures of one layout (both clocks); prints its line."""
    import cuzarr

    files = _files(a)
    total = sum(n for _, n in files)
    # faulted in once, as a reused staging buffer is; page-aligned, as staging
    # is: reads 16 bytes into a page (np.empty's start) copy at a fifth of the
    # speed on AMD hosts, which would lower the limit (cuzarr.buffer.aligned)
    buf = _ones(total)
    small = _ones(max(REUSED_BYTES, max(n for _, n in files)))
    nchunks = int(np.prod([-(-s // c) for s, c in zip(a.shape, a.chunks, strict=True)]))
    null = NullExecutor()
    conf = {"threading.max_workers": workers, "gpu.read_workers": workers}
    wall: dict[str, list[float]] = {"read": [], "pread": [], "whole": [], "reused": []}
    cpu: dict[str, list[float]] = {"read": [], "pread": [], "whole": [], "reused": []}
    # user CPU alone (getrusage): the library's own work; the copies, opens and
    # seeks are the kernel's
    user: dict[str, list[float]] = {"read": [], "whole": [], "reused": []}
    with cuzarr.config.set(conf), null_device(null):
        a[...]  # warm: imports, the staging pool, the page cache
        for _ in range(repeats):  # interleaved
            _timed(lambda: a[...], wall["read"], cpu["read"], user["read"])
            _timed(lambda: pread_loop(files, buf), wall["whole"], cpu["whole"], user["whole"])
            _timed(lambda: pread_loop(files, small), wall["reused"], cpu["reused"],
                   user["reused"])
            for times in (wall, cpu):  # the limit: the faster destination, each round
                times["pread"].append(min(times["whole"][-1], times["reused"][-1]))
    fig = {}
    for clock, times in (("cpu", cpu), ("wall", wall)):
        t_read = statistics.median(times["read"])
        t_pread = statistics.median(times["pread"])
        # each read against the pread loop run right after it: the median of
        # those differences, which a slow spell of the machine shifts less than
        # the difference of the two medians (kept as us_per_chunk_of_medians)
        pairs = [r - p for r, p in zip(times["read"], times["pread"], strict=True)]
        over = statistics.median(pairs)
        fig[clock] = {"us_per_chunk": over / nchunks * 1e6,
                      "us_per_chunk_of_medians": (t_read - t_pread) / nchunks * 1e6,
                      "staging_gbs": total / (t_pread + over) / 1e9,
                      "fraction": t_pread / (t_pread + over),
                      "read_s": t_read, "pread_s": t_pread, "reads_s": times["read"],
                      "preads_s": times["pread"],
                      "pread_whole_s": statistics.median(times["whole"]),
                      "pread_reused_s": statistics.median(times["reused"])}
    fig["user"] = {k: statistics.median(v) for k, v in user.items()}
    fig["user"]["us_per_chunk"] = (fig["user"]["read"] - fig["user"]["whole"]) / nchunks * 1e6
    c, w = fig["cpu"], fig["wall"]
    print(f"gpu-host: {c['us_per_chunk']:.1f} us/chunk host overhead, staging "
          f"{c['staging_gbs']:.2f} GB/s = {c['fraction']:.2f} of the pread limit {layout}")
    print(f"  ({nchunks} chunks, {len(files)} files, {total / 1e6:.0f} MB compressed, "
          f"{workers} worker(s), {null.batches} batches; CPU seconds (all threads): read "
          f"{c['read_s']:.4f}, pread loop {c['pread_s']:.4f} (one buffer for all "
          f"{c['pread_whole_s']:.4f}, reused {c['pread_reused_s']:.4f}); wall: read {w['read_s']:.4f}, "
          f"pread loop {w['pread_s']:.4f} = {w['us_per_chunk']:.1f} us/chunk, "
          f"{w['fraction']:.2f}; user CPU: read {fig['user']['read']:.4f}, pread loop "
          f"{fig['user']['whole']:.4f} = {fig['user']['us_per_chunk']:.1f} us/chunk)")
    return {"chunks": nchunks, "files": len(files), "bytes": total, **fig}


# the steps of a device read timed by phases(): (module, attribute, name)
PHASES = [
    ("cuzarr.storage.local.batchread", "_open_all", "open+size"),
    ("cuzarr.storage.local.batchread", "_read_placed_all", "reads"),
    # (where older versions had them: A/B runs against older commits)
    ("cuzarr.storage.local.store", "LocalStore._open_all", "open+size"),
    ("cuzarr.storage.local.store", "_read_placed_all", "reads"),
    # the same steps through the C loops (storage.native_io), one call a batch
    ("cuzarr.runtime.native", "open_sized", "open+size"),
    ("cuzarr.runtime.native", "read_placed", "reads"),
    ("cuzarr.gpu.reader", "prepare_batch", "prepare"),
    ("cuzarr.gpu.batch", "_scan_in_place", "scan"),
    ("cuzarr.gpu.batch", "build_plan", "plan"),
    # a batch of a read planned and scanned in one C call (gpu.batch._prepare_window)
    ("cuzarr.runtime.native", "window_rows", "plan+scan"),
    ("cuzarr.core.shards", "ShardReadJob._from_buffer", "shard indexes"),
]


@contextlib.contextmanager
def _timing(acc: dict[str, float]) -> Any:
    """Each PHASES step adds the CPU time of the thread that runs it to ``acc``."""
    import importlib

    undo = []
    for mod_name, attr, name in PHASES:
        owner: Any = importlib.import_module(mod_name)
        *path, leaf = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = getattr(owner, leaf, None)
        if fn is None:  # a step this version does not have
            continue

        def timed(*args: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
            t = time.thread_time()
            try:
                return _fn(*args, **kw)
            finally:
                acc[_name] = acc.get(_name, 0.0) + time.thread_time() - t

        setattr(owner, leaf, timed)
        undo.append((owner, leaf, fn))
    try:
        yield
    finally:
        for owner, leaf, fn in undo:
            setattr(owner, leaf, fn)


def phases(a: Any, layout: str, nchunks: int, workers: int, reads: int = 5) -> dict:
    """Where a read's CPU time goes, per chunk (us): each PHASES step (the file
    loops, the copies they make, the batch's preparation) and the rest (items,
    keys, plans, threads), over ``reads`` reads.
    Prints one line."""
    import cuzarr

    acc: dict[str, float] = {}
    conf = {"threading.max_workers": workers, "gpu.read_workers": workers}
    with cuzarr.config.set(conf), null_device(NullExecutor()):
        a[...]
        with _timing(acc):
            c = time.process_time()
            for _ in range(reads):
                a[...]
            total = time.process_time() - c
    us = {k: v / reads / nchunks * 1e6 for k, v in acc.items()}
    counted = sum(v for k, v in us.items() if k not in ("scan", "plan", "plan+scan"))
    us["everything else"] = total / reads / nchunks * 1e6 - counted
    print(f"gpu-host phases {layout}, us/chunk of CPU: " + ", ".join(
        f"{k} {v:.1f}" for k, v in us.items()) + " (scan, plan and plan+scan are part of prepare; "
        "reads include the kernel's copies)")
    return us


def run(root: Path, gib: float, repeats: int, workers: int, layouts: list[str]) -> dict:
    """Measure every layout; returns {layout: figures} and prints its lines."""
    from gpu import build

    out = {}
    for layout in layouts:
        a = build(root, gib, "zstd", layout == "sharded")
        fig = measure(a, layout, repeats, workers)
        fig["phases_us_per_chunk"] = phases(a, layout, fig["chunks"], workers)
        out[layout] = fig
    return out
