"""``bench_core.py --in-process``: every contender in ONE long-lived process.

A notebook or a service reads and writes many arrays in one process; the
default mode of ``bench_core.py`` (a fresh process per measurement) hides what
that process accumulates: a fragmented heap, idle thread pools, buffers kept or
dropped. Here every contender's adapter (the same ones as the default mode)
lives in one process; each repeat runs every contender's ``write``, ``read``,
``shard-write`` and ``shard-read`` in turn, contenders interleaved and their
order rotated from repeat to repeat.

Each measurement records:

* ``wall``: elapsed seconds (``time.perf_counter``);
* ``cpu``: CPU seconds of the whole process, all threads (``time.process_time``);
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

import gc
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
    gc.collect()
    f0 = minor_faults()
    c0 = time.process_time()
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    faults = minor_faults() - f0
    return out, {"wall": wall, "cpu": cpu, "faults": faults, "touch": touch}


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


def run_in_process(
    contenders: list[str],
    make_adapter: Any,
    source: Path,
    stores: Path,
    shards: tuple[int, int],
    repeats: int,
    impl_module: str,
) -> dict[str, Any]:
    """Run the in-process comparison; print the table, return the raw numbers."""
    data = np.load(source)
    nbytes = data.nbytes
    adapters: dict[str, Any] = {}
    for c in contenders:
        try:
            adapters[c] = make_adapter(c, impl_module)
        except Exception as e:  # not installed: left out, said so
            print(f"  {c}: left out ({type(e).__name__}: {e})"[:160], flush=True)
    stores.mkdir(parents=True, exist_ok=True)
    locs = {
        c: (ad.disk_location(stores / c), ad.disk_location(stores / (c + "_shard")))
        for c, ad in adapters.items()
    }
    raw: dict[str, dict[str, list[dict[str, float]]]] = {
        c: {u: [] for u in UNITS} for c in adapters
    }
    names = list(adapters)
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for c in order:
            ad = adapters[c]
            for unit in UNITS:
                fn = _unit(ad, unit, data, *locs[c], shards)
                out, m = _measure(fn, nbytes)
                if unit.endswith("read"):
                    m["ok"] = bool(np.array_equal(np.asarray(out), data))
                del out, fn
                raw[c][unit].append(m)
                print(
                    f"[{r + 1}/{repeats}] {unit:<12} {c:<12} wall {m['wall']:.3f}s "
                    f"cpu {m['cpu']:.3f}s faults {m['faults']:>7} touch {m['touch']:.3f}s",
                    flush=True,
                )
    shutil.rmtree(stores, ignore_errors=True)
    summary = summarize(raw)
    print_summary(summary, nbytes)
    return {"raw": raw, "summary": summary}


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
        f"{'row':<12} {'contender':<12} {'best':>7} {'median':>7} {'cpu':>7} "
        f"{'faults':>8} {'touch':>7}"
    )
    for unit, rows in summary.items():
        for c, v in rows.items():
            if c == "_ratio":
                continue
            flag = "" if v["verified"] else "  WRONG RESULT"
            print(
                f"{unit:<12} {c:<12} {v['best']:7.3f} {v['median']:7.3f} "
                f"{v['cpu_median']:7.3f} {v['faults_median']:8.0f} {v['touch_median']:7.3f}{flag}"
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
