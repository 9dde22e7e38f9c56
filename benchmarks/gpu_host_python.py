"""The Python work of a host-only device read, by thread CPU (no GPU needed).

``gpu.py --host-only`` compares a read's CPU time with a plain loop of preads:
on a shared machine the copies' cost moves by more than the whole host
overhead from one minute to the next. This script measures the part that does
not move with them: the CPU time of the read's Python, every thread's, with
``time.thread_time`` around each C call of the read (cuzarr's extension, and
``os.preadv``/``os.open``/``os.close`` where the store's Python path reads) and
around each batch. It prints, per read (medians):

    python: <ms> in batches + <ms> outside them = <us>/chunk  (<layout>)

"in batches" is a batch's own Python outside its C calls (the store's
Python around its reads, the plan, the batch's executor call), "outside
them" the read's other work (the selection's projections, the items and
keys, the job, the worker loops, garbage collection), i.e. the process's CPU
time outside the batches. To compare two versions, run it under each (for
example from a worktree, ``PYTHONPATH=<worktree>/src``) in alternation.

    python benchmarks/gpu_host_python.py --gib 1 --reads 10 --layouts plain,sharded
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the C calls of a device read: their time is not the Python's
NATIVE = ["open_sized", "place", "read_placed", "close_fds", "window_rows", "stream_rows",
          "frames_array", "index_rows"]
SYSTEM = ["preadv", "open", "close"]


def _timed(owner: Any, name: str, acc: dict[str, float], label: str) -> None:
    raw = getattr(owner, name)

    def timed(*a: Any, **k: Any) -> Any:
        t = time.thread_time()
        try:
            return raw(*a, **k)
        finally:
            acc[label] += time.thread_time() - t

    setattr(owner, name, timed)


def measure(a: Any, layout: str, reads: int) -> dict:
    """Per-read medians (ms) of the process's CPU, the batches', their C calls'."""
    import cuzarr
    import cuzarr.core.plans as plans
    from cuzarr.runtime import native
    from gpu_host import NullExecutor, null_device

    acc: dict[str, float] = collections.defaultdict(float)
    for name in NATIVE:
        if hasattr(native, name):
            _timed(native, name, acc, "c")
    for name in SYSTEM:
        _timed(os, name, acc, "c")
    _timed(plans, "_inline_batch", acc, "batches")
    rows: list[tuple[float, float, float]] = []
    conf = {"threading.max_workers": 1, "gpu.read_workers": 1}
    with cuzarr.config.set(conf), null_device(NullExecutor()):
        a[...]  # warm
        for _ in range(reads):
            acc.clear()
            c = time.process_time()
            a[...]
            rows.append((time.process_time() - c, acc["batches"], acc["c"]))
    nchunks = int(sum(1 for _ in _chunks(a)))
    process = statistics.median(r[0] for r in rows)
    inside = statistics.median(r[1] - r[2] for r in rows)
    outside = statistics.median(r[0] - r[1] for r in rows)
    print(f"python: {inside * 1e3:.2f} ms in batches + {outside * 1e3:.2f} ms outside them = "
          f"{(inside + outside) / nchunks * 1e6:.1f} us/chunk  ({layout}; read "
          f"{process * 1e3:.1f} ms of CPU, {nchunks} chunks)")
    return {"process_s": process, "batches_python_s": inside, "outside_s": outside,
            "chunks": nchunks}


def _chunks(a: Any) -> Any:
    import itertools

    return itertools.product(*(range(-(-s // c)) for s, c in zip(a.shape, a.chunks,
                                                                   strict=True)))


def main() -> None:
    from gpu import build

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--reads", type=int, default=10)
    ap.add_argument("--layouts", default="plain,sharded")
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    args = ap.parse_args()
    for layout in args.layouts.split(","):
        measure(build(Path(args.dir), args.gib, "zstd", layout == "sharded"), layout, args.reads)


if __name__ == "__main__":
    main()
