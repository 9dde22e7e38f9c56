#!/usr/bin/env python
"""Latency benchmark: per-call cost of small operations, cuzarr vs zarr-python
(default pipeline) vs tensorstore (where the operation exists there).

Everything runs in one process. Every case is measured in rounds; in each round
every contender runs one batch of calls (the batch sized, once, to take about
``--batch-ms``), contenders interleaved and their order rotated from round to
round, so a slow stretch of machine load hits them alike. The table shows the
median over rounds of the microseconds per call, and ``xzarr`` / ``xts``: the
peer's median divided by cuzarr's (above 1: cuzarr is faster). Before each
batch the process waits until it is idle (zarr-python's ``tree()`` returns while
its threads still read member documents, which slowed whatever came next), the
garbage collector runs and is then off while the batch is timed. Each case's
result is checked once against numpy (a wrong one is printed with ``!!``).

Stores: ``local`` (a directory under ``--dir``, given to every library as a str
path, as users do) and ``memory`` (``cuzarr.storage.MemoryStore``,
``zarr.storage.MemoryStore``, tensorstore's ``memory`` kvstore).

Arrays: float32, shape (512, 256), chunks (64, 64) (16 KiB), zstd level 1,
Zarr v3 (and a v2 twin for ``open_array v2``). A row ``a[i]`` crosses 4 chunks.
Group cases use a hierarchy of 1,000 small arrays under one group, with
consolidated metadata (``cons``) and read without it (``plain``).

Cases (``--cases`` takes substrings of these names, comma separated):

  open_array v3 / v2 / v3 mode=a, open_group, open_group cons (1,000 members),
  members/keys/tree cons|plain, create_array, create_group,
  a[i,j], a[0:10,0:10], a[i] (4 chunks), a[chunk], vindex 10 pts, len(a),
  a.shape, attrs[k], attrs update, write a[i,j], write chunk, write 10x10 (RMW),
  async a[i,j] / a[0:10,0:10] / a[chunk], 8 threads a[i,j] (8 threads each
  reading single elements; us per call = wall time / all calls).
  (zarr-python 3.4's Array has no len(); tensorstore has no groups or
  attributes: those rows show "-". tensorstore's async rows await its futures.)

Usage::

    python benchmarks/bench_latency.py                    # everything (~1.5 min)
    python benchmarks/bench_latency.py --stores memory --cases "a[i,j],open_array"
    python benchmarks/bench_latency.py --profile "a[i,j]" --stores local   # cProfile cuzarr
    python benchmarks/bench_latency.py --import-time      # import cost (subprocesses)
    python benchmarks/bench_latency.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

SHAPE = (512, 256)
CHUNKS = (64, 64)
DTYPE = "float32"
N_MEMBERS = 1000
N_THREADS = 8
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 1}}
CONTENDERS = ["cuzarr", "zarr", "tensorstore"]

rng = np.random.default_rng(0)
DATA = (np.cumsum(rng.integers(-3, 4, size=SHAPE), axis=1) / 2).astype(DTYPE)
POINTS = (rng.integers(0, SHAPE[0], 10), rng.integers(0, SHAPE[1], 10))
SINGLE = [
    (int(i), int(j)) for i, j in zip(rng.integers(0, SHAPE[0], 64), rng.integers(0, SHAPE[1], 64))
]
CHUNK_SEL = (slice(128, 192), slice(64, 128))  # exactly chunk (2, 1)
SMALL_SEL = (slice(0, 10), slice(0, 10))
RMW_SEL = (slice(1, 11), slice(1, 11))
ROW = 300


class Case:
    """One timed operation: ``fn()`` does ``calls`` calls; ``check()`` returns the
    value of one call for the correctness check (or None)."""

    def __init__(self, fn: Callable[[], Any], calls: int = 1, expect: Any = None):
        self.fn = fn
        self.calls = calls
        self.expect = expect


# --------------------------------------------------------------------------
# zarr-python and cuzarr (same API)
# --------------------------------------------------------------------------


class ZarrLike:
    def __init__(self, name: str, root: Path) -> None:
        import importlib

        self.name = name
        self.mod = importlib.import_module(name)
        self.amod = importlib.import_module(name + ".api.asynchronous")
        self.smod = importlib.import_module(name + ".storage")
        self.root = root
        self.counter = itertools.count()

    def loc(self, kind: str, sub: str) -> Any:
        if kind == "local":
            p = self.root / self.name / sub
            p.mkdir(parents=True, exist_ok=True)
            return str(p)
        return self.smod.MemoryStore()

    def _create(self, store: Any, name: str | None, fmt: int = 3, **kw: Any) -> Any:
        if fmt == 3:
            comp: Any = [ZSTD_V3]
        else:
            import numcodecs

            comp = numcodecs.Zstd(level=1)
        return self.mod.create_array(
            store, name=name, shape=SHAPE, chunks=CHUNKS, dtype=DTYPE, compressors=comp,
            zarr_format=fmt, fill_value=0, **kw,
        )  # fmt: skip

    def cases(self, kind: str, which: Callable[[str], bool]) -> dict[str, Case]:
        mod = self.mod
        out: dict[str, Case] = {}
        st = self.loc(kind, "arrays")
        a3 = self._create(st, "v3", 3, attributes={"k": 1, "units": "m"})
        a3[...] = DATA
        st2 = self.loc(kind, "arrays2")  # v2 beside v3 would make the root both
        a2 = self._create(st2, "v2", 2)
        a2[...] = DATA
        w = self._create(st, "w", 3)
        w[...] = DATA
        if which("open_array"):
            out["open_array v3"] = Case(lambda: mod.open_array(st, path="v3", mode="r"))
            out["open_array v2"] = Case(lambda: mod.open_array(st2, path="v2", mode="r"))
            out["open_array v3 mode=a"] = Case(lambda: mod.open_array(st, path="v3"))
        if any(which(n) for n in ("open_group", "members", "keys", "tree", "group[")):
            gst = self.loc(kind, "hier")
            g = mod.create_group(gst, path="h")
            for k in range(N_MEMBERS):
                g.create_array(f"m{k:04d}", shape=(10,), chunks=(10,), dtype="int32")
            mod.consolidate_metadata(gst, path="h")
            gc_ = mod.open_group(gst, path="h", mode="r", use_consolidated=True)
            gp = mod.open_group(gst, path="h", mode="r", use_consolidated=False)
            out["open_group"] = Case(lambda: mod.open_group(st, mode="r", use_consolidated=False))
            out["open_group cons 1k"] = Case(
                lambda: mod.open_group(gst, path="h", mode="r", use_consolidated=True)
            )
            out["members() cons 1k"] = Case(lambda: gc_.members(), expect=N_MEMBERS)
            out["keys() cons 1k"] = Case(lambda: list(gc_.keys()), expect=N_MEMBERS)
            out["tree() cons 1k"] = Case(lambda: str(gc_.tree()))
            out["members() plain 1k"] = Case(lambda: gp.members(), expect=N_MEMBERS)
            out["keys() plain 1k"] = Case(lambda: list(gp.keys()), expect=N_MEMBERS)
            out["tree() plain 1k"] = Case(lambda: str(gp.tree()))
            out["group[name] plain"] = Case(lambda: gp["m0500"])
        if which("create"):
            cst = self.loc(kind, "create")
            out["create_array"] = Case(lambda: self._create(cst, f"c{next(self.counter)}"))
            out["create_group"] = Case(lambda: mod.create_group(cst, path=f"g{next(self.counter)}"))
        r = mod.open_array(st, path="v3", mode="r")
        i, j = SINGLE[0]
        out["a[i,j]"] = Case(lambda: r[i, j], expect=DATA[i, j])
        out["a[0:10,0:10]"] = Case(lambda: r[SMALL_SEL], expect=DATA[SMALL_SEL])
        out["a[i] 4 chunks"] = Case(lambda: r[ROW], expect=DATA[ROW])
        out["a[chunk]"] = Case(lambda: r[CHUNK_SEL], expect=DATA[CHUNK_SEL])
        out["vindex 10 pts"] = Case(lambda: r.vindex[POINTS], expect=DATA[POINTS])
        if hasattr(type(r), "__len__"):  # zarr-python 3.4's Array has none
            out["len(a)"] = Case(lambda: len(r), expect=SHAPE[0])
        out["a.shape"] = Case(lambda: r.shape, expect=SHAPE)
        out["attrs[k]"] = Case(lambda: r.attrs["units"], expect="m")
        wa = mod.open_array(st, path="w", mode="r+")
        ctr = itertools.count()
        out["attrs update"] = Case(lambda: wa.attrs.update({"n": next(ctr)}))
        one = np.float32(7)
        blk = DATA[CHUNK_SEL].copy()
        small = DATA[RMW_SEL] + 1
        out["write a[i,j]"] = Case(lambda: wa.__setitem__((i, j), one))
        out["write chunk"] = Case(lambda: wa.__setitem__(CHUNK_SEL, blk))
        out["write 10x10 RMW"] = Case(lambda: wa.__setitem__(RMW_SEL, small))
        # async API, on a loop of our own (as an asyncio application would)
        loop = asyncio.new_event_loop()
        ar = loop.run_until_complete(self.amod.open_array(store=st, path="v3", mode="r"))
        k_async = 20

        def run_async(sel: Any) -> Callable[[], Any]:
            async def many() -> Any:
                for _ in range(k_async):
                    v = await ar.getitem(sel)
                return v

            return lambda: loop.run_until_complete(many())

        out["async a[i,j]"] = Case(run_async((i, j)), k_async, expect=DATA[i, j])
        out["async a[0:10,0:10]"] = Case(run_async(SMALL_SEL), k_async, expect=DATA[SMALL_SEL])
        out["async a[chunk]"] = Case(run_async(CHUNK_SEL), k_async, expect=DATA[CHUNK_SEL])
        out["8 threads a[i,j]"] = threaded(lambda ij: r[ij])
        self._keep = (loop, a3, a2, w)
        return out


def threaded(read: Callable[[Any], Any]) -> Case:
    """N_THREADS threads, each reading K single elements; ``calls`` = all reads."""
    pool = ThreadPoolExecutor(N_THREADS)
    k = 16
    barrier = threading.Barrier(N_THREADS)

    def work(t: int) -> Any:
        barrier.wait()
        v = None
        for n in range(k):
            v = read(SINGLE[(t * k + n) % len(SINGLE)])
        return v

    def fn() -> Any:
        return [f.result() for f in [pool.submit(work, t) for t in range(N_THREADS)]][-1]

    last = SINGLE[((N_THREADS - 1) * k + k - 1) % len(SINGLE)]
    return Case(fn, N_THREADS * k, expect=DATA[last])


# --------------------------------------------------------------------------
# tensorstore
# --------------------------------------------------------------------------


class TensorStore:
    name = "tensorstore"

    def __init__(self, root: Path) -> None:
        import tensorstore as ts

        self.ts = ts
        self.root = root
        self.counter = itertools.count()

    def kv(self, kind: str, path: str) -> dict[str, Any]:
        if kind == "local":
            return {"driver": "file", "path": str(self.root / "tensorstore" / path) + "/"}
        return {"driver": "memory", "path": path + "/"}

    def _spec(self, kind: str, path: str, fmt: int = 3) -> dict[str, Any]:
        if fmt == 3:
            meta = {
                "shape": list(SHAPE),
                "data_type": DTYPE,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD_V3],
            }
            return {"driver": "zarr3", "kvstore": self.kv(kind, path), "metadata": meta}
        meta2 = {
            "shape": list(SHAPE),
            "chunks": list(CHUNKS),
            "dtype": "<f4",
            "fill_value": 0,
            "compressor": {"id": "zstd", "level": 1},
        }
        return {"driver": "zarr", "kvstore": self.kv(kind, path), "metadata": meta2}

    def cases(self, kind: str, which: Callable[[str], bool]) -> dict[str, Case]:
        ts = self.ts
        # file_io_sync off: nobody else fsyncs; one context per store kind so the
        # memory kvstore is shared by every open.
        ctx = ts.Context({"file_io_sync": False})
        out: dict[str, Case] = {}
        kw = {"context": ctx}
        for path, fmt in (("v3", 3), ("v2", 2), ("w", 3)):
            t = ts.open(
                self._spec(kind, path, fmt), create=True, delete_existing=True, **kw
            ).result()
            t.write(DATA).result()
        drv = {3: "zarr3", 2: "zarr"}
        if which("open_array"):
            for label, path, fmt in (("open_array v3", "v3", 3), ("open_array v2", "v2", 2)):
                spec = {"driver": drv[fmt], "kvstore": self.kv(kind, path)}
                out[label] = Case(
                    lambda spec=spec: ts.open(spec, open=True, read=True, **kw).result()
                )
            spec_a = {"driver": "zarr3", "kvstore": self.kv(kind, "v3")}
            out["open_array v3 mode=a"] = Case(
                lambda: ts.open(spec_a, open=True, read=True, write=True, **kw).result()
            )
        if which("create"):
            out["create_array"] = Case(
                lambda: ts.open(
                    self._spec(kind, f"create/c{next(self.counter)}"), create=True, **kw
                ).result()
            )
        r = ts.open(
            {"driver": "zarr3", "kvstore": self.kv(kind, "v3")}, open=True, read=True, **kw
        ).result()
        i, j = SINGLE[0]
        out["a[i,j]"] = Case(lambda: r[i, j].read().result(), expect=DATA[i, j])
        out["a[0:10,0:10]"] = Case(lambda: r[SMALL_SEL].read().result(), expect=DATA[SMALL_SEL])
        out["a[i] 4 chunks"] = Case(lambda: r[ROW].read().result(), expect=DATA[ROW])
        out["a[chunk]"] = Case(lambda: r[CHUNK_SEL].read().result(), expect=DATA[CHUNK_SEL])
        out["vindex 10 pts"] = Case(lambda: r.vindex[POINTS].read().result(), expect=DATA[POINTS])
        out["a.shape"] = Case(lambda: r.shape, expect=SHAPE)
        wa = ts.open(
            {"driver": "zarr3", "kvstore": self.kv(kind, "w")},
            open=True,
            read=True,
            write=True,
            **kw,
        ).result()
        one = np.float32(7)
        blk = DATA[CHUNK_SEL].copy()
        small = DATA[RMW_SEL] + 1
        out["write a[i,j]"] = Case(lambda: wa[i, j].write(one).result())
        out["write chunk"] = Case(lambda: wa[CHUNK_SEL].write(blk).result())
        out["write 10x10 RMW"] = Case(lambda: wa[RMW_SEL].write(small).result())
        loop = asyncio.new_event_loop()
        k_async = 20

        def run_async(sel: Any) -> Callable[[], Any]:
            async def many() -> Any:
                for _ in range(k_async):
                    v = await r[sel].read()
                return v

            return lambda: loop.run_until_complete(many())

        out["async a[i,j]"] = Case(run_async((i, j)), k_async, expect=DATA[i, j])
        out["async a[0:10,0:10]"] = Case(run_async(SMALL_SEL), k_async, expect=DATA[SMALL_SEL])
        out["async a[chunk]"] = Case(run_async(CHUNK_SEL), k_async, expect=DATA[CHUNK_SEL])
        out["8 threads a[i,j]"] = threaded(lambda ij: r[ij].read().result())
        self._keep = (loop, ctx)
        return out


# --------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------


ORDER = [
    "open_array v3", "open_array v2", "open_array v3 mode=a", "open_group",
    "open_group cons 1k", "members() cons 1k", "keys() cons 1k", "tree() cons 1k",
    "members() plain 1k", "keys() plain 1k", "tree() plain 1k", "group[name] plain",
    "create_array", "create_group",
    "a[i,j]", "a[0:10,0:10]", "a[i] 4 chunks", "a[chunk]", "vindex 10 pts",
    "len(a)", "a.shape", "attrs[k]", "attrs update",
    "write a[i,j]", "write chunk", "write 10x10 RMW",
    "async a[i,j]", "async a[0:10,0:10]", "async a[chunk]", "8 threads a[i,j]",
]  # fmt: skip


def check(name: str, contender: str, case: Case) -> None:
    got = case.fn()
    exp = case.expect
    if exp is None:
        return
    if isinstance(exp, int) and not isinstance(got, (int, np.integer)):
        got = len(list(got))
    ok = np.array_equal(np.asarray(got), np.asarray(exp))
    if not ok:
        print(f"  !! {contender} {name}: wrong result {got!r:.80} (expected {exp!r:.80})")


#: the timer of the batches: wall (perf_counter_ns) or, with ``--clock cpu``, the
#: CPU time of the whole process, every thread (process_time_ns), which a loaded
#: machine's preemption does not inflate
CLOCK = [time.perf_counter_ns]


def calibrate(case: Case, batch_s: float) -> int:
    """Invocations of ``case.fn`` per timed batch (about ``batch_s`` seconds)."""
    case.fn()  # warm
    n, t = 0, 0.0
    t0 = time.perf_counter()
    while t < min(batch_s, 0.05) or n < 2:
        case.fn()
        n += 1
        t = time.perf_counter() - t0
        if t > 0.2:
            break
    per = t / n
    return max(1, min(5000, round(batch_s / per)))


def settle(limit_s: float = 3.0) -> None:
    """Wait until this process is idle: zarr-python's tree() of a group read
    without consolidated metadata returns while its thread pool still reads
    member documents (measured: ~100 ms of CPU after the call), which slowed
    whatever ran next ~20x."""
    end = time.perf_counter() + limit_s
    while time.perf_counter() < end:
        c0 = time.process_time()
        time.sleep(0.005)
        if time.process_time() - c0 < 0.0005:
            return


def measure(
    cases: dict[str, dict[str, Case]], rounds: int, batch_s: float, label: str
) -> dict[str, dict[str, list[float]]]:
    """{case: {contender: [us per call, one per round]}}"""
    res: dict[str, dict[str, list[float]]] = {}
    names = [n for n in ORDER if any(n in c for c in cases.values())]
    for name in names:
        who = [c for c in CONTENDERS if name in cases.get(c, {})]
        batches = {}
        for c in who:
            case = cases[c][name]
            settle()
            check(name, c, case)
            batches[c] = calibrate(case, batch_s)
        # a slow case (>= 50 ms a call) gets fewer rounds
        slow = max(b for b in batches.values()) == 1
        n_rounds = max(3, rounds // 2) if slow else rounds
        res[name] = {c: [] for c in who}
        for rd in range(n_rounds):
            order = who[rd % len(who) :] + who[: rd % len(who)]
            for c in order:
                case = cases[c][name]
                n = batches[c]
                settle()
                gc.collect()
                gc.disable()
                t0 = CLOCK[0]()
                for _ in range(n):
                    case.fn()
                dt = CLOCK[0]() - t0
                gc.enable()
                res[name][c].append(dt / 1e3 / (n * case.calls))
        line = "  ".join(f"{c}={statistics.median(v):.1f}" for c, v in res[name].items())
        print(f"  [{label}] {name:22s} {line}", flush=True)
    return res


def fmt_us(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 10000:
        return f"{x / 1000:.1f}ms"
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def table(all_res: dict[str, dict[str, dict[str, list[float]]]]) -> str:
    lines = []
    hdr = f"{'case':24s} {'store':7s} {'cuzarr':>9s} {'zarr':>9s} {'tstore':>9s} {'xzarr':>7s} {'xts':>7s}"
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for name in ORDER:
        for kind, res in all_res.items():
            if name not in res:
                continue
            med = {c: statistics.median(v) for c, v in res[name].items()}
            cz = med.get("cuzarr")
            row = f"{name:24s} {kind:7s} " + " ".join(
                f"{fmt_us(med.get(c)):>9s}" for c in CONTENDERS
            )
            for peer in ("zarr", "tensorstore"):
                p = med.get(peer)
                row += f" {p / cz:7.2f}" if (p and cz) else f" {'-':>7s}"
            lines.append(row)
    return "\n".join(lines)


def import_time(n: int) -> None:
    """Median wall time of ``import X`` in fresh interpreters, and the largest
    cumulative entries of ``-X importtime`` for cuzarr. Bytecode is cached (in a
    temporary PYTHONPYCACHEPREFIX), as in any installed package: with
    PYTHONDONTWRITEBYTECODE set, every interpreter compiled cuzarr's sources
    anew (cuzarr's import then took ~1.8x as long); that figure is shown too."""
    py = sys.executable
    cache = tempfile.mkdtemp(prefix="cuzarr-pyc-")
    env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    nocache = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")

    def run(code: str, e: dict[str, str]) -> float:
        t0 = time.perf_counter()
        subprocess.run([py, "-c", code], check=True, env=e)
        return time.perf_counter() - t0

    try:
        mods = ("numpy", "cuzarr", "zarr", "tensorstore")
        run("import " + ", ".join(mods), env)  # fill the bytecode cache
        b = statistics.median(run("pass", env) for _ in range(n))
        print(f"python startup: {b * 1e3:.0f} ms (subtracted below)")
        for mod in mods:
            t = statistics.median(run(f"import {mod}", env) for _ in range(n))
            print(f"import {mod:12s} {(t - b) * 1e3:7.0f} ms")
        t = statistics.median(run("import cuzarr", nocache) for _ in range(n))
        print(
            f"import cuzarr, no bytecode cache (PYTHONDONTWRITEBYTECODE=1): {(t - b) * 1e3:.0f} ms"
        )
        r = subprocess.run(
            [py, "-X", "importtime", "-c", "import cuzarr"], capture_output=True, text=True, env=env
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:") :].split("|")
        rows.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
    rows.sort(reverse=True)
    print("cuzarr: largest cumulative import times (-X importtime, one run):")
    for cum, self_, mod in rows[:25]:
        print(f"  cum {cum / 1e3:7.1f} ms  self {self_ / 1e3:6.1f} ms  {mod}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="local,memory")
    ap.add_argument("--cases", default="", help="comma list of substrings of case names")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch-ms", type=float, default=15.0)
    ap.add_argument("--dir", default=None, help="where the local stores go (a temp dir)")
    ap.add_argument("--json", default=None, help="write the raw per-round numbers here")
    ap.add_argument("--profile", default=None, help="cProfile cuzarr on this case, then exit")
    ap.add_argument("--import-time", action="store_true", help="measure import cost only")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="time batches by wall clock or by the process's CPU time (all threads)",
    )
    args = ap.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.process_time_ns
    if args.import_time:
        import_time(7)
        return
    wanted = [s for s in args.cases.split(",") if s]

    def which(name: str) -> bool:
        return not wanted or any(w in name or name in w for w in wanted)

    root = Path(args.dir or tempfile.mkdtemp(prefix="cuzarr-latency-"))
    contenders = [c for c in args.contenders.split(",") if c]
    all_res: dict[str, Any] = {}
    t_start = time.perf_counter()
    try:
        for kind in [s for s in args.stores.split(",") if s]:
            cases: dict[str, dict[str, Case]] = {}
            for c in contenders:
                lib: Any = (
                    TensorStore(root / kind) if c == "tensorstore" else ZarrLike(c, root / kind)
                )
                got = lib.cases(kind, which)
                cases[c] = {k: v for k, v in got.items() if which(k)}
            if args.profile:
                case = cases["cuzarr"][args.profile]
                n = calibrate(case, 2.0)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(n):
                    case.fn()
                prof.disable()
                print(f"{args.profile} [{kind}]: {n * case.calls} calls")
                pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                continue
            all_res[kind] = measure(cases, args.rounds, args.batch_ms / 1e3, kind)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.profile:
        return
    import zarr

    import cuzarr

    print()
    print(
        f"µs per call ({args.clock} clock), median of rounds (python {sys.version.split()[0]}, cuzarr "
        f"{cuzarr.__version__}, zarr {zarr.__version__}, {os.cpu_count()} CPUs); "
        "xzarr / xts = peer time / cuzarr time (>1: cuzarr faster)"
    )
    print(table(all_res))
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(all_res, indent=1))


if __name__ == "__main__":
    main()
