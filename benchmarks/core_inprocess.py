"""``bench_core.py --in-process``: every contender in ONE long-lived process.

A notebook or a service reads and writes many arrays in one process; the
default mode of ``bench_core.py`` (a fresh process per measurement) hides what
that process accumulates: a fragmented heap, idle thread pools, buffers kept or
dropped. Here every contender's adapter (the same ones as the default mode)
lives in one process; each repeat runs every contender's ``write``, ``read``,
``shard-write`` and ``shard-read`` in turn, contenders interleaved in an order
shuffled for each repeat (seeded by the repeat's number). A plain rotation kept
each contender's predecessor fixed: cuzarr always ran right after
tensorstore's sharded read, whose freed 4 KiB-page output left the kernel
compacting memory for huge pages during cuzarr's next call (the probe before
cuzarr's write took 0.15-0.67 s, before the others' 0.02-0.05 s).

Each measurement records:

* ``wall``: elapsed seconds (``time.perf_counter``);
* ``cpu``: CPU seconds of the whole process, all threads (``time.process_time``),
  and ``sys``, the part of them spent in the kernel (``getrusage``): page
  faults, file writes, memory compaction;
* ``faults``: minor page faults during the call (``getrusage``), i.e. first
  touches of memory the process had not used yet (or had given back);
* ``touch``: seconds a first touch of the same number of fresh bytes takes right
  then (an untimed probe before the call, numpy's default allocation). On this
  VM that cost varies at random, for any library (~3 ms/MiB at worst): the
  probe shows how much of a slow call the machine's page faults explain.

The summary gives each contender's best of the repeats and median, and
cuzarr's ratio to the best peer (best peer's time / cuzarr's: above 1, cuzarr
is faster).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

UNITS = ["write", "read", "shard-write", "shard-read"]


def minor_faults() -> int:
    """Minor + major page faults of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt + r.ru_majflt


def system_seconds() -> float:
    """CPU seconds this process has spent in the kernel so far (all threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def touch_probe(nbytes: int) -> float:
    """Seconds to allocate and first-touch ``nbytes`` of fresh memory (numpy)."""
    t0 = time.perf_counter()
    a = np.empty(nbytes, dtype=np.uint8)
    a.fill(1)
    t = time.perf_counter() - t0
    del a
    return t


def _measure(fn: Any, nbytes: int) -> tuple[Any, dict[str, float]]:
    touch = touch_probe(nbytes)
    # Write back what earlier writes left dirty, untimed, as the default mode does
    # (core_measure._flush_dirty_pages): otherwise the kernel's writeback of the
    # previous contender's 256 MiB store runs during, and is charged to, this call.
    if hasattr(os, "sync"):
        os.sync()
    gc.collect()
    f0 = minor_faults()
    s0 = system_seconds()
    c0 = time.process_time()
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    sys_s = system_seconds() - s0
    faults = minor_faults() - f0
    return out, {"wall": wall, "cpu": cpu, "sys": sys_s, "faults": faults, "touch": touch}


def _unit(ad: Any, unit: str, data: np.ndarray, loc_big: Any, loc_shard: Any, shards) -> Any:
    """The timed call of ``unit`` (set-up untimed), as a zero-argument function."""
    shape = data.shape
    if unit == "write":
        h = ad.create(loc_big, shape, CHUNKS)
        return lambda: ad.write(h, data)
    if unit == "shard-write":
        h = ad.create(loc_shard, shape, SHARD_INNER, shards=shards)
        return lambda: ad.write(h, data)
    h = ad.open(loc_big if unit == "read" else loc_shard)
    return lambda: ad.read(h)


class _Here:
    """A contender whose calls run in this process."""

    def __init__(self, ad: Any, data: np.ndarray, locs: tuple[Any, Any], shards: Any) -> None:
        self.ad, self.data, self.locs, self.shards = ad, data, locs, shards

    def run(self, unit: str) -> dict[str, float]:
        return _run_unit(self.ad, unit, self.data, self.locs, self.shards)

    def close(self) -> None:
        pass


def _run_unit(ad: Any, unit: str, data: np.ndarray, locs: Any, shards: Any) -> dict[str, float]:
    fn = _unit(ad, unit, data, *locs, shards)
    out, m = _measure(fn, data.nbytes)
    if unit.endswith("read"):
        m["ok"] = bool(np.array_equal(np.asarray(out), data))
    del out, fn
    return m


class _Own:
    """A contender in a long-lived process of its own (``separate``): a notebook
    that imports one library, measured without the others' effects on a shared
    process (one library's allocator settings are every library's there)."""

    def __init__(self, contender: str, impl_module: str, source: Path, stores: Path, shards):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        layout = (CHUNKS, SHARD_INNER)
        args = (child, contender, impl_module, str(source), str(stores), shards, layout)
        self.proc = ctx.Process(target=_serve, args=args, daemon=True)
        self.proc.start()
        child.close()
        ready = self.conn.recv()
        if ready != "ready":
            self.proc.join(10)
            raise RuntimeError(ready)

    def run(self, unit: str) -> dict[str, float]:
        self.conn.send(unit)
        m = self.conn.recv()
        if isinstance(m, str):
            raise RuntimeError(m)
        return m

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(30)


def _serve(conn: Any, contender: str, impl_module: str, source: str, stores: str, shards, layout):
    """A contender's own process: build its adapter, then run the units asked for."""
    global CHUNKS, SHARD_INNER
    CHUNKS, SHARD_INNER = layout
    try:
        import core_adapters  # benchmarks/ is on the path: spawn passes the parent's

        ad = core_adapters.make_adapter(contender, impl_module)
        data = np.load(source)
        locs = (
            ad.disk_location(Path(stores) / contender),
            ad.disk_location(Path(stores) / (contender + "_shard")),
        )
    except Exception as e:
        conn.send(f"{type(e).__name__}: {e}")
        return
    conn.send("ready")
    while (unit := conn.recv()) is not None:
        try:
            conn.send(_run_unit(ad, unit, data, locs, shards))
        except Exception as e:
            conn.send(f"{unit}: {type(e).__name__}: {e}")


def run_in_process(
    contenders: list[str],
    make_adapter: Any,
    source: Path,
    stores: Path,
    shards: tuple[int, int],
    repeats: int,
    impl_module: str,
    separate: bool = False,
) -> dict[str, Any]:
    """Run the long-lived-process comparison; print the table, return the raw
    numbers. All contenders in this process, or (``separate``) each in a
    long-lived process of its own, driven from here in the same interleaved order."""
    data = np.load(source)
    nbytes = data.nbytes
    stores.mkdir(parents=True, exist_ok=True)
    runners: dict[str, Any] = {}
    for c in contenders:
        try:
            if separate:
                runners[c] = _Own(c, impl_module, source, stores, shards)
            else:
                ad = make_adapter(c, impl_module)
                locs = (ad.disk_location(stores / c), ad.disk_location(stores / (c + "_shard")))
                runners[c] = _Here(ad, data, locs, shards)
        except Exception as e:  # not installed: left out, said so
            print(f"  {c}: left out ({type(e).__name__}: {e})"[:160], flush=True)
    if separate:
        del data  # the contenders' processes hold their own copies
    raw: dict[str, dict[str, list[dict[str, float]]]] = {
        c: {u: [] for u in UNITS} for c in runners
    }
    names = list(runners)
    try:
        for r in range(repeats):
            order = list(names)
            random.Random(r).shuffle(order)  # varied predecessors, the same order every run
            print(f"[{r + 1}/{repeats}] order: {', '.join(order)}", flush=True)
            for c in order:
                for unit in UNITS:
                    m = runners[c].run(unit)
                    raw[c][unit].append(m)
                    print(
                        f"[{r + 1}/{repeats}] {unit:<12} {c:<12} wall {m['wall']:.3f}s "
                        f"cpu {m['cpu']:.3f}s (sys {m['sys']:.3f}s) faults {m['faults']:>7} "
                        f"touch {m['touch']:.3f}s",
                        flush=True,
                    )
    finally:
        for runner in runners.values():
            runner.close()
    shutil.rmtree(stores, ignore_errors=True)
    summary = summarize(raw)
    print_summary(summary, nbytes)
    return {"raw": raw, "summary": summary, "separate": separate}


def summarize(raw: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    """Per unit and contender: best and median wall, median cpu, faults, touch."""
    out: dict[str, Any] = {}
    for unit in UNITS:
        rows = {}
        for c, units in raw.items():
            ms = units[unit]
            if not ms:
                continue
            walls = [m["wall"] for m in ms]
            rows[c] = {
                "best": min(walls),
                "median": statistics.median(walls),
                "cpu_median": statistics.median(m["cpu"] for m in ms),
                "sys_median": statistics.median(m.get("sys", 0.0) for m in ms),
                "faults_median": statistics.median(m["faults"] for m in ms),
                "touch_median": statistics.median(m["touch"] for m in ms),
                "verified": all(m.get("ok", True) for m in ms),
            }
        peers = {c: v for c, v in rows.items() if c != "cuzarr"}
        if "cuzarr" in rows and peers:
            cz = rows["cuzarr"]
            best = min(peers, key=lambda c: peers[c]["best"])
            med = min(peers, key=lambda c: peers[c]["median"])
            cpu = min(peers, key=lambda c: peers[c]["cpu_median"])
            rows["_ratio"] = {
                "best_peer": best,
                "best_of": peers[best]["best"] / cz["best"],
                "median_peer": med,
                "median": peers[med]["median"] / cz["median"],
                # CPU seconds: what a loaded machine (wall > CPU) does not distort
                "cpu_peer": cpu,
                "cpu": peers[cpu]["cpu_median"] / cz["cpu_median"],
            }
        out[unit] = rows
    return out


def print_summary(summary: dict[str, Any], nbytes: int) -> None:
    mib = nbytes / (1 << 20)
    print(f"\nin-process, {mib:.0f} MiB; seconds (best / median), cpu and faults medians")
    print(
        f"{'row':<12} {'contender':<12} {'best':>7} {'median':>7} {'cpu':>7} {'sys':>6} "
        f"{'faults':>8} {'touch':>7}"
    )
    for unit, rows in summary.items():
        for c, v in rows.items():
            if c == "_ratio":
                continue
            flag = "" if v["verified"] else "  WRONG RESULT"
            print(
                f"{unit:<12} {c:<12} {v['best']:7.3f} {v['median']:7.3f} "
                f"{v['cpu_median']:7.3f} {v['sys_median']:6.3f} {v['faults_median']:8.0f} "
                f"{v['touch_median']:7.3f}{flag}"
            )
        r = rows.get("_ratio")
        if r:
            print(
                f"{unit:<12} {'cuzarr vs':<12} best-of: {r['best_of']:.2f} ({r['best_peer']}), "
                f"median: {r['median']:.2f} ({r['median_peer']}), "
                f"cpu: {r['cpu']:.2f} ({r['cpu_peer']})  (>1: cuzarr faster)"
            )


# chunk layout of bench_core (set by bench_core before use; no import cycle)
CHUNKS: tuple[int, int] = (512, 1024)
SHARD_INNER: tuple[int, int] = (256, 256)
