"""Where a GPU read spends its time (needs a CUDA device, CuPy, nvCOMP).

Reads one array (built by ``benchmarks/gpu.py``'s ``build``) into device memory
with 1, 2, 4, 8 and all worker threads (``gpu.read_workers``) and prints, per thread count, the median wall
time and the thread-summed time of each phase: fetching the chunk bytes,
``prepare_batch`` (parse, and pack what is not decoded in place), the upload, nvCOMP's decode, the
wait for its sizes, and the scatter. Then a cProfile of a one-thread read, and
the upload cost of pageable against pinned host memory. ``--json PATH`` writes
the figures (per thread count: every wall time, the median, each phase; the
uploads) with the run's environment (``gpu_report.py``).

    python benchmarks/gpu_phases.py --gib 1 --codec zstd --dir /tmp/cuzarr-gpu-bench
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

_acc: dict[str, float] = defaultdict(float)
_lock = threading.Lock()


def _timed(name, fn):
    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            with _lock:
                _acc[name] += time.perf_counter() - t

    return wrapper


def _instrument() -> None:
    import cupy

    import cuzarr.gpu.executor as ex
    import cuzarr.gpu.reader as rd
    from cuzarr.storage import local

    rd.prepare_batch = _timed("prepare_batch", rd.prepare_batch)
    ex.GpuExecutor.run = _timed("executor.run (all)", ex.GpuExecutor.run)
    ex.GpuExecutor._decode_streams = _timed("  decode_streams (+sizes wait)",
                                            ex.GpuExecutor._decode_streams)
    ex.GpuExecutor.scatter = _timed("  scatter", ex.GpuExecutor.scatter)
    local.LocalStore._read = _timed("LocalStore._read (file reads)", local.LocalStore._read)
    local.LocalStore._read_into = _timed("LocalStore._read_into (file reads)",
                                         local.LocalStore._read_into)
    orig_asarray = cupy.asarray

    def asarray(obj, *a, **kw):
        if isinstance(obj, np.ndarray) and obj.nbytes > (1 << 20):
            # pageable uploads only (fancy reads); batches upload with ndarray.set
            return _timed("  upload (cupy.asarray, pageable)", orig_asarray)(obj, *a, **kw)
        return orig_asarray(obj, *a, **kw)

    cupy.asarray = asarray
    ex_sync = rd._ThreadExecutor.synchronize
    rd._ThreadExecutor.synchronize = _timed("final synchronize", ex_sync)


def phases(a, gpu_read, repeats: int) -> dict[str, dict]:
    """Per thread count: wall times of the read and its phases, thread-summed,
    per read (printed)."""
    import os

    import cuzarr

    ncpu = len(os.sched_getaffinity(0))
    out: dict[str, dict] = {}
    for workers in sorted({1, 2, 4, 8, ncpu}):
        with cuzarr.config.set({"threading.max_workers": workers, "gpu.read_workers": workers}):
            gpu_read()
            walls = []
            _acc.clear()
            for _ in range(repeats):
                t = time.perf_counter()
                r = gpu_read()
                walls.append(time.perf_counter() - t)
                del r
            med = statistics.median(walls)
            print(f"workers={workers}: wall median {med:.4f} s "
                  f"({a.nbytes / 2**30 / med:.2f} GiB/s)")
            for k, v in sorted(_acc.items(), key=lambda kv: -kv[1]):
                print(f"    {k:34s} {v / repeats:8.4f} s per read (thread-summed)")
            out[str(workers)] = {"times_s": walls, "median_s": med,
                                 "gibs": a.nbytes / 2**30 / med,
                                 "phases_s": {k.strip(): v / repeats for k, v in _acc.items()}}
    return out


def profile(gpu_read) -> None:
    """A cProfile of a one-thread read (printed)."""
    import cuzarr

    with cuzarr.config.set({"threading.max_workers": 1}):
        pr = cProfile.Profile()
        pr.enable()
        gpu_read()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
        print(s.getvalue()[-6000:])


def uploads() -> dict[str, float]:
    """Milliseconds to upload 256 MiB from pageable and from pinned host memory,
    and to fill and copy as much on the host (printed)."""
    import cupy

    from cuzarr.buffer.gpu import pinned_prototype

    n = 256 << 20
    host = np.ones(n, np.uint8)
    pinned = pinned_prototype.empty((n,), np.uint8)
    pinned[...] = 1
    dev = cupy.empty(n, cupy.uint8)
    out = {}
    for name, fn in (("pageable cupy.asarray", lambda: cupy.asarray(host)),
                     ("pinned ndarray.set", lambda: dev.set(pinned))):
        ts = []
        for _ in range(5):
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            fn()
            cupy.cuda.runtime.deviceSynchronize()
            ts.append(time.perf_counter() - t)
        out[f"upload 256 MiB, {name}"] = statistics.median(ts) * 1e3
        print(f"upload 256 MiB {name:24s} {statistics.median(ts) * 1e3:7.1f} ms")
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        np.zeros(n, np.uint8)[:] = host
        ts.append(time.perf_counter() - t)
    out["host np.zeros + copy 256 MiB"] = statistics.median(ts) * 1e3
    print(f"host np.zeros + copy 256 MiB      {statistics.median(ts) * 1e3:7.1f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--codec", default="zstd")
    ap.add_argument("--layout", default="plain")
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="write the figures (and where they were measured) to PATH")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile listing")
    args = ap.parse_args()
    import cupy

    import cuzarr
    from gpu import build
    from gpu_report import environment, write_json

    record = {"env": environment("device"), "args": vars(args)}
    a = build(Path(args.dir), args.gib, args.codec, args.layout == "sharded")
    print(f"{args.codec} {args.layout}: {a.nchunks} chunks, {a.nbytes / 2**30:.3f} GiB")

    def gpu_read():
        with cuzarr.config.enable_gpu():
            r = a[...]
        cupy.cuda.runtime.deviceSynchronize()
        return r

    gpu_read()  # compile kernels, make codecs
    _instrument()
    record["workers"] = phases(a, gpu_read, args.repeats)
    write_json(args.json, record, quiet=True)
    if not args.no_profile:
        profile(gpu_read)
    record["uploads_ms"] = uploads()
    write_json(args.json, record)


if __name__ == "__main__":
    main()
