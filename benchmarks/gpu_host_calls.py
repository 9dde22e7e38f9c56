"""Host CPU per call of a training batch on the device read path (no GPU needed).

A training loop reads many small batches: ``ArrayDataset.read_batch(indices)``
of random samples, one planned read each. On a device a 64 MiB batch takes
about 2 ms at 30 GiB/s, so the host's fixed cost per call bounds the training
goal (at least 0.7 of a plain read's throughput) as much as its cost per chunk.
This script runs such calls with the null executor of ``gpu_host.py`` (no
decode, no scatter) and prints, per call, the process's CPU time and each
thread's (the caller, cuzarr's event loop ``io``, the codec pool), for:

* ``tiny``: samples of 1 KiB (one chunk each): the fixed cost, little copying;
* ``plain`` and ``sharded``: the host-only benchmark's 1 MiB samples.

Next to them, the machine's floor for a call that crosses threads: a no-op
``cuzarr.runtime.sync.sync`` call, a bare asyncio ``run_coroutine_threadsafe``
round trip, and a hand-off through two queues (each thread wake-up costs tens
of microseconds of CPU on a virtual machine).

    python benchmarks/gpu_host_calls.py [--calls 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

TINY_SHAPE = (4096, 256)  # float32 rows of 1 KiB, one chunk each


def _thread_cpu() -> dict[str, float]:
    out = {}
    for t in threading.enumerate():
        try:
            out[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (OSError, TypeError, ValueError):  # a thread gone meanwhile
            continue
    return out


def _tiny(root: Path) -> Any:
    import cuzarr

    path = root / "tiny-plain"
    if (path / "zarr.json").exists():
        return cuzarr.open_array(str(path), mode="r")
    a = cuzarr.create_array(str(path), shape=TINY_SHAPE, chunks=(1, TINY_SHAPE[1]),
                            dtype="float32", overwrite=True)
    a[...] = np.random.default_rng(0).random(TINY_SHAPE, dtype=np.float32)
    return a


def per_call(a: Any, batch: int, calls: int, rounds: int) -> dict[str, Any]:
    """Median over ``rounds`` of the CPU per call of ``calls`` random batches."""
    import cuzarr
    from cuzarr.torch import ArrayDataset

    ds = ArrayDataset(a)
    rng = np.random.default_rng(1)
    cpu, wall, threads = [], [], []
    with cuzarr.config.set({"gpu.emulate": True}):
        # warm: imports, staging, and every key's path checked by the store (a
        # training loop's first epoch does that once)
        order = rng.permutation(len(ds))
        for lo in range(0, len(order), batch):
            ds.read_batch(order[lo : lo + batch])
        for _ in range(rounds):
            idxs = [rng.permutation(len(ds))[:batch] for _ in range(calls)]
            c0, p0, w0 = _thread_cpu(), time.process_time(), time.perf_counter()
            for idx in idxs:
                ds.read_batch(idx)
            w, p, c1 = time.perf_counter() - w0, time.process_time() - p0, _thread_cpu()
            cpu.append(p / calls * 1e6)
            wall.append(w / calls * 1e6)
            threads.append({k.replace("cuzarr-", ""): (v - c0.get(k, 0.0)) / calls * 1e6
                            for k, v in c1.items()})
    names = sorted({k for t in threads for k in t})
    by_thread = {k: statistics.median(t.get(k, 0.0) for t in threads) for k in names}
    pool = sum(v for k, v in by_thread.items() if k.startswith("codec"))
    return {"batch": batch, "calls": calls, "cpu_us": statistics.median(cpu),
            "wall_us": statistics.median(wall), "cpu_rounds_us": cpu,
            "caller_us": by_thread.get("MainThread", 0.0), "loop_us": by_thread.get("io", 0.0),
            "pool_us": pool}


def floors(n: int = 2000) -> dict[str, float]:
    """CPU per call (all threads) of calls that only cross threads."""
    from cuzarr.runtime.sync import sync

    async def noop() -> int:
        return 1

    def timed(fn: Any) -> float:
        for _ in range(100):
            fn()
        p = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - p) / n * 1e6

    out = {"cuzarr_sync_noop_us": timed(lambda: sync(noop()))}
    loop = asyncio.new_event_loop()
    th = threading.Thread(target=loop.run_forever, daemon=True)
    th.start()
    out["asyncio_roundtrip_us"] = timed(
        lambda: asyncio.run_coroutine_threadsafe(noop(), loop).result())
    loop.call_soon_threadsafe(loop.stop)
    th.join()
    loop.close()
    q_in: queue.SimpleQueue[int] = queue.SimpleQueue()
    q_out: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        while (v := q_in.get()) >= 0:
            q_out.put(v)

    th = threading.Thread(target=echo, daemon=True)
    th.start()
    out["queue_handoff_us"] = timed(lambda: (q_in.put(1), q_out.get()))
    q_in.put(-1)
    th.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from gpu import build
    from gpu_host import NullExecutor, null_device

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    arrays = {"tiny": _tiny(root), "plain": build(root, 1, "zstd", False),
              "sharded": build(root, 1, "zstd", True)}
    rows = []
    with null_device(NullExecutor()):
        for name, batch in (("tiny", 16), ("tiny", 64), ("plain", 16), ("plain", 64),
                            ("sharded", 64)):
            calls = args.calls if name == "tiny" else max(8, args.calls // 4)
            r = {"array": name, **per_call(arrays[name], batch, calls, args.rounds)}
            rows.append(r)
            print(f"gpu-host call: {name:7s} {batch:3d} samples: {r['cpu_us']:7.0f} us CPU "
                  f"(caller {r['caller_us']:.0f}, event loop {r['loop_us']:.0f}, codec pool "
                  f"{r['pool_us']:.0f}), wall {r['wall_us']:.0f} us", flush=True)
    fl = floors()
    print("floors, us CPU per call: " + ", ".join(f"{k} {v:.0f}" for k, v in fl.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"calls": rows, "floors": fl}, indent=1))


if __name__ == "__main__":
    main()
