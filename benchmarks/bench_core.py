#!/usr/bin/env python
"""Core benchmark: cuzarr vs zarr-python (two pipelines), zarrs and tensorstore.

Workloads (all Zarr v3, uint16 "smooth noise", zstd level 1):

* ``write``      full write of a >= 256 MiB array with ~1 MiB chunks to local disk
* ``read``       full read of the store each contender just wrote (page cache)
* ``tiny-write`` write of an array with ~20,000 tiny (2 KiB raw) chunks to an
                 in-memory store
* ``tiny-read``  full read of that in-memory array

Reference rows ("limit:*") show what plain numcodecs / python-zstandard reach
on the same chunks using every core, without any Zarr machinery.

Every measurement runs in a fresh subprocess (so peak RSS can be reported per
contender and per workload, and no contender warms another's caches). Contenders
are interleaved within each repeat; the table shows medians.

Usage::

    python benchmarks/bench_core.py [--size-mib 256] [--repeats 3] [--quick]
    python benchmarks/bench_core.py --quick --impl-module zarr   # dry run
    python benchmarks/bench_core.py --profile tiny-read          # cProfile cuzarr

See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA_DIR = REPO / ".bench_data"

COLS = 16384  # columns of the big array
CHUNKS = (512, 1024)  # 1 MiB uint16 chunks
TINY_CHUNKS = (32, 32)  # 2 KiB uint16 chunks
TINY_GRID_COLS = 200
DTYPE = "uint16"
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 1}}

LIB_CONTENDERS = ["cuzarr", "zarr", "zarr-fused", "zarrs", "tensorstore"]
LIMIT_CONTENDERS = ["limit:numcodecs", "limit:zstandard"]
WORKLOADS = ["write", "read", "tiny"]  # "tiny" yields tiny-write and tiny-read
RESULT_TAG = "BENCH_RESULT "
JSON_TAG = "BENCH_JSON "

PIPELINES = {
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarr-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
}


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def smooth_noise(shape: tuple[int, int], seed: int, block_rows: int = 512) -> np.ndarray:
    """Random walk along rows (steps in [-3, 3], halved): zstd-1 gets ~2.9x."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=np.uint16)
    for r0 in range(0, shape[0], block_rows):
        r1 = min(r0 + block_rows, shape[0])
        steps = rng.integers(-3, 4, size=(r1 - r0, shape[1]), dtype=np.int16)
        walk = np.cumsum(steps, axis=1, dtype=np.int16)
        walk //= 2
        out[r0:r1] = walk.view(np.uint16)
    return out


def big_shape(size_mib: int) -> tuple[int, int]:
    rows = max(1, (size_mib * 2**20) // (2 * COLS))
    return (rows, COLS)


def tiny_shape(nchunks: int) -> tuple[int, int]:
    cols = min(TINY_GRID_COLS, nchunks)
    rows = -(-nchunks // cols)
    return (rows * TINY_CHUNKS[0], cols * TINY_CHUNKS[1])


def tiny_source(shape: tuple[int, int]) -> np.ndarray:
    return smooth_noise(shape, seed=1)


def split_chunks(data: np.ndarray, chunks: tuple[int, int]) -> list[bytes]:
    out = []
    for i in range(0, data.shape[0], chunks[0]):
        for j in range(0, data.shape[1], chunks[1]):
            out.append(np.ascontiguousarray(data[i : i + chunks[0], j : j + chunks[1]]).tobytes())
    return out


# --------------------------------------------------------------------------
# contender adapters (only imported inside worker processes)
# --------------------------------------------------------------------------


class ZarrLike:
    """zarr-python (any codec pipeline) or cuzarr (same API)."""

    def __init__(self, module: str, pipeline: str | None, mem: str):
        self.mod = importlib.import_module(module)
        self.mem = mem
        self.info: dict[str, Any] = {
            "module": module,
            "version": getattr(self.mod, "__version__", "?"),
        }
        if pipeline is not None:
            import zarr

            zarr.config.set({"codec_pipeline.path": pipeline})
            self.info["codec_pipeline"] = zarr.config.get("codec_pipeline.path")
            if pipeline.startswith("zarrs"):
                import zarrs

                self.info["zarrs_version"] = zarrs.__version__

    def mem_location(self) -> Any:
        if self.mem == "zarr":
            import zarr

            return zarr.storage.MemoryStore()
        if self.mem == "MemoryStore":
            return importlib.import_module(self.info["module"] + ".storage").MemoryStore()
        return {}

    def disk_location(self, path: Path) -> Any:
        return str(path)

    def create(self, loc: Any, shape, chunks) -> Any:
        return self.mod.create_array(
            loc,
            shape=shape,
            dtype=DTYPE,
            chunks=chunks,
            compressors=[ZSTD_V3],
            fill_value=0,
            zarr_format=3,
            overwrite=True,
        )

    def write(self, handle: Any, data: np.ndarray) -> None:
        handle[...] = data

    def open(self, loc: Any) -> Any:
        h = self.mod.open_array(loc, mode="r")
        pipe = getattr(getattr(h, "_async_array", None), "codec_pipeline", None)
        if pipe is not None and "codec_pipeline" in self.info:
            self.info["effective_pipeline"] = f"{type(pipe).__module__}.{type(pipe).__name__}"
        return h

    def read(self, handle: Any) -> np.ndarray:
        return handle[...]


class TensorStore:
    def __init__(self) -> None:
        import tensorstore as ts

        self.ts = ts
        # tensorstore fsyncs every file it writes by default; nobody else does.
        self.ctx = ts.Context({"file_io_sync": False})
        self.info = {
            "module": "tensorstore",
            "version": getattr(ts, "__version__", "?"),
            "context": {"file_io_sync": False},
        }
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            self.info["version"] = version("tensorstore")

    def mem_location(self) -> Any:
        return {"driver": "memory", "path": "tiny/"}

    def disk_location(self, path: Path) -> Any:
        return {"driver": "file", "path": str(path) + "/"}

    def create(self, loc: Any, shape, chunks) -> Any:
        spec = {
            "driver": "zarr3",
            "kvstore": loc,
            "metadata": {
                "shape": list(shape),
                "data_type": DTYPE,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD_V3],
            },
        }
        return self.ts.open(spec, create=True, delete_existing=True, context=self.ctx).result()

    def write(self, handle: Any, data: np.ndarray) -> None:
        handle.write(data).result()

    def open(self, loc: Any) -> Any:
        spec = {"driver": "zarr3", "kvstore": loc}
        return self.ts.open(spec, open=True, read=True, context=self.ctx).result()

    def read(self, handle: Any) -> np.ndarray:
        return handle.read().result()


def make_adapter(contender: str, impl_module: str, cuzarr_mem: str = "dict") -> Any:
    if contender == "cuzarr":
        return ZarrLike(impl_module, None, mem=cuzarr_mem)
    if contender in PIPELINES:
        return ZarrLike("zarr", PIPELINES[contender], mem="zarr")
    if contender == "tensorstore":
        return TensorStore()
    raise ValueError(contender)


# --------------------------------------------------------------------------
# "limit" reference rows: raw codec throughput on all cores, no Zarr machinery
# --------------------------------------------------------------------------


def _codec_factories(kind: str):
    if kind == "limit:numcodecs":
        import numcodecs

        def enc():
            return numcodecs.Zstd(level=1).encode

        def dec():
            return numcodecs.Zstd().decode

        return enc, dec, {"module": "numcodecs", "version": numcodecs.__version__}
    import zstandard

    def enc():
        return zstandard.ZstdCompressor(level=1).compress

    def dec():
        d = zstandard.ZstdDecompressor()
        return d.decompress

    return enc, dec, {"module": "zstandard", "version": zstandard.__version__}


def _run_sliced(items: list, make_fn, per_item, nthreads: int) -> int:
    """Split ``items`` into ``nthreads`` slices; one thread loops over each slice."""
    slices = [items[i::nthreads] for i in range(nthreads)]

    def work(sl):
        fn = make_fn()
        total = 0
        for it in sl:
            total += per_item(fn, it)
        return total

    with ThreadPoolExecutor(nthreads) as ex:
        return sum(ex.map(work, slices))


def _decode_len(fn, b) -> int:
    return len(fn(b))


def _read_decode_len(fn, path) -> int:
    with open(path, "rb") as f:
        return len(fn(f.read()))


# --------------------------------------------------------------------------
# worker (one measurement in one process)
# --------------------------------------------------------------------------


def to_numpy(a: Any) -> np.ndarray:
    """Host copy of a result (cuzarr may hand back a CuPy array when a GPU is used)."""
    if (
        not isinstance(a, np.ndarray)
        and hasattr(a, "get")
        and hasattr(a, "__cuda_array_interface__")
    ):
        a = a.get()
    return np.asarray(a)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm() -> int:
    """Peak RSS of this process image (VmHWM; unlike ru_maxrss it is not inherited
    from the forking parent across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Meter:
    """Times a block and records [RSS before, peak RSS during] for it."""

    def __init__(self, res: dict[str, Any]):
        self.res = res
        res["times"] = {}
        res["rss"] = {}

    @contextlib.contextmanager
    def measure(self, wl: str):
        self.res["hwm_reset"] = _reset_hwm()
        base = _rss()
        t0 = time.perf_counter()
        yield
        t = time.perf_counter() - t0
        self.res["times"][wl] = t
        self.res["rss"][wl] = [base, max(base, _hwm())]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    contender = spec["contender"]
    workload = spec["workload"]
    res: dict[str, Any] = {"contender": contender, "workload": workload}
    meter = Meter(res)
    store = Path(spec["store"])
    shape = tuple(spec["shape"])
    nthreads = os.cpu_count() or 1

    if contender.startswith("limit:"):
        mk_enc, mk_dec, info = _codec_factories(contender)
        res["info"] = info
        if workload == "write":
            chunks = split_chunks(np.load(spec["source"]), CHUNKS)
            with meter.measure("write"):
                nbytes = _run_sliced(chunks, mk_enc, _decode_len, nthreads)
            res["stored_bytes"] = nbytes
        elif workload == "read":
            files = sorted(p for p in Path(spec["chunk_dir"]).rglob("*") if p.is_file())
            with meter.measure("read"):
                nbytes = _run_sliced(files, mk_dec, _read_decode_len, nthreads)
            res["verified"] = nbytes == int(np.prod(shape)) * 2
            res["info"]["chunk_dir"] = spec["chunk_dir"]
        else:  # tiny: encode then decode, chunks held in memory
            tshape = tuple(spec["tiny_shape"])
            chunks = split_chunks(tiny_source(tshape), TINY_CHUNKS)
            out: list[Any] = [None] * nthreads

            def enc_slice(k):
                fn = mk_enc()
                out[k] = [fn(c) for c in chunks[k::nthreads]]

            with meter.measure("tiny-write"), ThreadPoolExecutor(nthreads) as ex:
                list(ex.map(enc_slice, range(nthreads)))
            comp = [c for part in out for c in part]
            with meter.measure("tiny-read"):
                nbytes = _run_sliced(comp, mk_dec, _decode_len, nthreads)
            res["verified"] = nbytes == int(np.prod(tshape)) * 2
            res["stored_bytes"] = sum(len(c) for c in comp)
        return res

    ad = make_adapter(contender, spec["impl_module"], spec.get("cuzarr_mem", "dict"))
    res["info"] = ad.info
    if workload == "write":
        data = np.load(spec["source"])
        h = ad.create(ad.disk_location(store), shape, CHUNKS)
        with meter.measure("write"):
            ad.write(h, data)
    elif workload == "read":
        t0 = time.perf_counter()
        h = ad.open(ad.disk_location(store))
        res["open_s"] = time.perf_counter() - t0
        with meter.measure("read"):
            out = ad.read(h)
        if spec["verify"]:
            out = to_numpy(out)
            src = np.load(spec["source"], mmap_mode="r")
            res["verified"] = bool(
                out.shape == src.shape and out.dtype == src.dtype and np.array_equal(out, src)
            )
    else:  # tiny
        tshape = tuple(spec["tiny_shape"])
        data = tiny_source(tshape)
        if spec.get("tiny_store") == "disk":
            tstore = Path(str(store) + "_tiny")
            shutil.rmtree(tstore, ignore_errors=True)
            loc = ad.disk_location(tstore)
        else:
            loc = ad.mem_location()
        h = ad.create(loc, tshape, TINY_CHUNKS)
        with meter.measure("tiny-write"):
            ad.write(h, data)
        del h
        t0 = time.perf_counter()
        h = ad.open(loc)
        res["open_s"] = time.perf_counter() - t0
        with meter.measure("tiny-read"):
            out = ad.read(h)
        if spec["verify"]:
            out = to_numpy(out)
            res["verified"] = bool(out.shape == data.shape and np.array_equal(out, data))
    return res


def worker_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = worker(spec)
        res["ok"] = True
        msgs = sorted({f"{w.category.__name__}: {w.message}"[:160] for w in caught})
        if msgs:
            res["warnings"] = msgs
    except BaseException as e:  # report anything, the parent continues
        res = {
            "ok": False,
            "contender": spec.get("contender"),
            "workload": spec.get("workload"),
            "error": f"{type(e).__name__}: {e}"[:300],
            "traceback": traceback.format_exc()[-3000:],
        }
    print(RESULT_TAG + json.dumps(res, default=str), flush=True)
    return 0


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_worker(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {timeout:.0f}s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"ok": False, "error": f"worker rc={proc.returncode}: " + " | ".join(tail)[-300:]}


def fmt_ratio(ref: float | None, t: float | None) -> str:
    if ref is None or t is None or t <= 0:
        return "-"
    return f"{ref / t:.2f}x"


def label(contender: str, impl: str) -> str:
    if contender == "cuzarr" and impl != "cuzarr":
        return f"cuzarr[={impl}]"
    return contender


def summarize(results: list[dict[str, Any]], args, sizes: dict[str, Any]) -> dict[str, Any]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        c = r["contender"]
        wls = list(r.get("times", {})) if r.get("ok") else r.get("workloads", [r["workload"]])
        for wl in wls:
            row = rows.setdefault(
                (wl, c),
                {
                    "times": [],
                    "errors": [],
                    "rss_peak": [],
                    "rss_delta": [],
                    "verified": None,
                    "stored": None,
                    "warnings": [],
                },
            )
            if not r.get("ok"):
                row["errors"].append(r.get("error", "?"))
                continue
            row["times"].append(r["times"][wl])
            if wl in r.get("rss", {}):
                base, peak = r["rss"][wl]
                row["rss_peak"].append(peak)
                row["rss_delta"].append(peak - base)
            if r.get("verified") is not None and wl in ("read", "tiny-read"):
                row["verified"] = bool(r["verified"]) and row["verified"] is not False
            if r.get("stored_bytes") and wl in ("write", "tiny-write"):
                row["stored"] = r["stored_bytes"]
            if "info" in r:
                row["info"] = r["info"]
            for w in r.get("warnings", []):
                if w not in row["warnings"]:
                    row["warnings"].append(w)
    for row in rows.values():
        row["median"] = statistics.median(row["times"]) if row["times"] else None
        row["min"] = min(row["times"]) if row["times"] else None
    return rows


def print_table(rows, args, sizes) -> None:
    wl_order = ["write", "read", "tiny-write", "tiny-read"]
    contenders = args.contenders + args.limits
    print()
    print(
        f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
        f"python={platform.python_version()} load avg (1/5/15 min) at start "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][0])}, at end "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][1])}"
    )
    print(
        f"big array: shape={sizes['shape']} uint16 = {sizes['big_bytes'] / 2**20:.0f} MiB, "
        f"chunks={CHUNKS} (1 MiB), zstd level 1, Zarr v3, local disk ({args.data_dir})"
    )
    print(
        f"tiny array: shape={sizes['tiny_shape']} uint16, chunks={TINY_CHUNKS} (2 KiB raw), "
        f"{sizes['tiny_n']} chunks, zstd level 1, "
        + ("in-memory store" if args.tiny_store == "memory" else "local disk (page cache)")
    )
    print(
        f"repeats={args.repeats}, contenders interleaved within each repeat; "
        "median seconds shown (min in brackets)."
    )
    print(
        "write: timed is `arr[...] = data` only (array creation untimed), no fsync for anyone "
        "(os.sync() between contenders, untimed; tensorstore file_io_sync=False)."
    )
    print(
        "read: timed is the full read; open is untimed. Reads come right after the writes, "
        "so every contender reads from the OS page cache (warm, same for all)."
    )
    print(
        "xzarr / xts = speedup vs zarr-python default pipeline / vs tensorstore "
        "(>1 = faster). RSS MiB = peak RSS of the measuring process during the timed op "
        "(VmHWM, reset just before it; includes the source/output arrays); dRSS = that peak "
        "minus the RSS just before the op (median over repeats)."
    )
    print(
        "limit:* rows = raw codec on all cores (thread per slice), no Zarr machinery, no "
        "assembly into an output array (read: file read + decode of the chunk files)."
    )
    hdr = (
        f"{'workload':<11} {'contender':<18} {'median s':>9} {'(min)':>8} {'GB/s':>7} "
        f"{'us/chunk':>9} {'xzarr':>7} {'xts':>7} {'RSS MiB':>8} {'dRSS':>7}  notes"
    )
    print()
    print(hdr)
    print("-" * len(hdr))
    for wl in wl_order:
        nbytes = sizes["big_bytes"] if wl in ("write", "read") else sizes["tiny_bytes"]
        nchunks = sizes["big_n"] if wl in ("write", "read") else sizes["tiny_n"]
        ref_z = rows.get((wl, "zarr"), {}).get("median")
        ref_t = rows.get((wl, "tensorstore"), {}).get("median")
        any_row = False
        for c in contenders:
            row = rows.get((wl, c))
            if row is None:
                continue
            any_row = True
            m = row["median"]
            notes = []
            if row["verified"] is True:
                notes.append("verified")
            elif row["verified"] is False:
                notes.append("MISMATCH!")
            if row["stored"]:
                notes.append(f"ratio {nbytes / row['stored']:.2f}")
            info = row.get("info") or {}
            eff = info.get("effective_pipeline")
            if eff and eff != info.get("codec_pipeline"):
                notes.append(f"FELL BACK to {eff.rsplit('.', 1)[-1]}")
            if row["warnings"]:
                notes.append(f"warning: {row['warnings'][0]}")
            if row["errors"]:
                notes.append(f"{len(row['errors'])} failed: {row['errors'][0]}")
            rss = f"{max(row['rss_peak']) / 2**20:.0f}" if row["rss_peak"] else "-"
            drss = f"{statistics.median(row['rss_delta']) / 2**20:.0f}" if row["rss_delta"] else "-"
            if m is None:
                print(
                    f"{wl:<11} {label(c, args.impl_module):<18} {'FAILED':>9} {'':>8} {'':>7} "
                    f"{'':>9} {'':>7} {'':>7} {'':>8} {'':>7}  {'; '.join(notes)}"
                )
                continue
            print(
                f"{wl:<11} {label(c, args.impl_module):<18} {m:9.3f} {'(' + format(row['min'], '.3f') + ')':>8} "
                f"{nbytes / m / 1e9:7.2f} {m / nchunks * 1e6:9.1f} "
                f"{fmt_ratio(ref_z, m):>7} {fmt_ratio(ref_t, m):>7} {rss:>8} {drss:>7}  "
                f"{'; '.join(notes)}"
            )
        if any_row:
            print()


def find_chunk_dir(stores: Path, order: list[str]) -> Path | None:
    for c in order:
        d = stores / c / "c"
        if d.is_dir():
            return d
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=None, help="big array MiB (default 256)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3")
    ap.add_argument("--tiny-chunks", type=int, default=None, help="default 20,000")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="defaults become 32 MiB, 2,000 tiny chunks, 1 repeat (smoke test)",
    )
    ap.add_argument(
        "--impl-module",
        default=os.environ.get("CUZARR_BENCH_IMPL", "cuzarr"),
        help="module behind the 'cuzarr' contender (e.g. 'zarr' for a dry run); "
        "env CUZARR_BENCH_IMPL",
    )
    ap.add_argument(
        "--contenders", default=",".join(LIB_CONTENDERS), help=f"comma list out of {LIB_CONTENDERS}"
    )
    ap.add_argument(
        "--limits",
        default=",".join(LIMIT_CONTENDERS),
        help="reference rows (comma list, '' for none)",
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma list of {WORKLOADS}")
    ap.add_argument(
        "--order",
        choices=["fixed", "rotate"],
        default="fixed",
        help="contender order within a repeat: fixed, or rotated by one each repeat",
    )
    ap.add_argument(
        "--cuzarr-mem",
        choices=["dict", "MemoryStore"],
        default="dict",
        help="in-memory store for the cuzarr contender (tiny workload)",
    )
    ap.add_argument(
        "--tiny-store",
        choices=["memory", "disk"],
        default="memory",
        help="where the tiny-chunk array lives (disk: a directory, read from page cache)",
    )
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--timeout", type=float, default=900.0, help="per measurement (s)")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    ap.add_argument(
        "--profile",
        choices=["tiny-read", "tiny-write", "read", "write"],
        help="profile one workload of --profile-contender (see --profiler)",
    )
    ap.add_argument("--profile-contender", default="cuzarr")
    ap.add_argument(
        "--profiler",
        choices=["cprofile", "py-spy", "attach"],
        default="cprofile",
        help="py-spy samples all threads (event loop, thread pool, native code)",
    )
    ap.add_argument("--profile-iters", type=int, default=1, help="timed iterations to profile")
    ap.add_argument("--py-spy", default=None, help="path to the py-spy executable")
    ap.add_argument(
        "--spy-gil",
        action="store_true",
        help="py-spy --gil: sample only the thread holding the GIL (Python-level CPU; "
        "C code that releases the GIL, like zstd, then disappears)",
    )
    ap.add_argument("--spy-rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._worker:
        return worker_main(args._worker)

    defaults = (32, 2000, 1) if args.quick else (256, 20_000, 3)
    if args.size_mib is None:
        args.size_mib = defaults[0]
    if args.tiny_chunks is None:
        args.tiny_chunks = defaults[1]
    if args.repeats is None:
        args.repeats = defaults[2]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.limits = [c for c in args.limits.split(",") if c]
    args.workloads = [w for w in args.workloads.split(",") if w]
    for c in args.contenders:
        if c not in LIB_CONTENDERS:
            ap.error(f"unknown contender {c!r}")
    for c in args.limits:
        if c not in LIMIT_CONTENDERS:
            ap.error(f"unknown limit row {c!r}")

    shape = big_shape(args.size_mib)
    tshape = tiny_shape(args.tiny_chunks)
    sizes = {
        "shape": shape,
        "big_bytes": int(np.prod(shape)) * 2,
        "big_n": -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1]),
        "tiny_shape": tshape,
        "tiny_bytes": int(np.prod(tshape)) * 2,
        "tiny_n": (tshape[0] // TINY_CHUNKS[0]) * (tshape[1] // TINY_CHUNKS[1]),
    }

    data_dir: Path = args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir / f"source_{shape[0]}x{shape[1]}_u16.npy"
    if not source.exists():
        t0 = time.perf_counter()
        tmp = source.with_suffix(".tmp.npy")
        np.save(tmp, smooth_noise(shape, seed=0))
        tmp.rename(source)
        print(f"generated {source} in {time.perf_counter() - t0:.1f}s", flush=True)
    stores = data_dir / "stores"

    if args.profile:
        return profile(args, source, stores / args.profile_contender, shape, tshape)

    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    for rep in range(args.repeats):
        verify = rep == 0
        order = list(args.contenders)
        if args.order == "rotate":
            k = rep % max(1, len(order))
            order = order[k:] + order[:k]
        for wl in args.workloads:
            for c in order + args.limits:
                store = stores / c
                spec = {
                    "contender": c,
                    "workload": wl,
                    "store": str(store),
                    "source": str(source),
                    "shape": shape,
                    "tiny_shape": tshape,
                    "impl_module": args.impl_module,
                    "cuzarr_mem": args.cuzarr_mem,
                    "tiny_store": args.tiny_store,
                    "verify": verify,
                }
                if wl == "write" and not c.startswith("limit:"):
                    shutil.rmtree(store, ignore_errors=True)
                    os.sync()
                if wl == "read" and c.startswith("limit:"):
                    cd = find_chunk_dir(
                        stores, ["zarr", "tensorstore", "zarrs", "zarr-fused", "cuzarr"]
                    )
                    if cd is None:
                        results.append(
                            {
                                "ok": False,
                                "contender": c,
                                "workload": wl,
                                "error": "no chunk files to read (no write succeeded)",
                            }
                        )
                        continue
                    spec["chunk_dir"] = str(cd)
                t0 = time.perf_counter()
                r = run_worker(spec, args.timeout)
                wall = time.perf_counter() - t0
                r.setdefault("contender", c)
                r.setdefault("workload", wl)
                r["repeat"] = rep
                if wl == "tiny":
                    r["workloads"] = ["tiny-write", "tiny-read"]
                if wl == "write" and not c.startswith("limit:"):
                    os.sync()  # flush dirty pages so they don't bill the next contender
                    if r.get("ok") and store.exists():
                        r["stored_bytes"] = dir_bytes(store)
                results.append(r)
                status = (
                    "ok " + " ".join(f"{k}={v:.3f}s" for k, v in r["times"].items())
                    if r.get("ok")
                    else "FAILED " + r.get("error", "")
                )
                print(
                    f"[rep {rep + 1}/{args.repeats}] {wl:<5} {label(c, args.impl_module):<16} "
                    f"{status}  (process {wall:.1f}s)",
                    flush=True,
                )
                if not r.get("ok") and r.get("traceback"):
                    print("    " + r["traceback"].strip().splitlines()[-1][:200], flush=True)

    rows = summarize(results, args, sizes)
    sizes["load"] = (load_start, os.getloadavg())
    print_table(rows, args, sizes)
    print(f"total wall time {time.perf_counter() - t_start:.0f}s")

    versions = {}
    for r in results:
        if r.get("ok") and "info" in r:
            versions[r["contender"]] = r["info"]
    out = {
        "machine": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": load_start,
            "loadavg_end": sizes["load"][1],
        },
        "params": {
            "size_mib": args.size_mib,
            "shape": shape,
            "chunks": CHUNKS,
            "tiny_shape": tshape,
            "tiny_chunks": TINY_CHUNKS,
            "tiny_n": sizes["tiny_n"],
            "repeats": args.repeats,
            "impl_module": args.impl_module,
            "cuzarr_mem": args.cuzarr_mem,
            "tiny_store": args.tiny_store,
            "order": args.order,
            "dtype": DTYPE,
            "codec": ZSTD_V3,
        },
        "versions": versions,
        "results": {
            f"{wl}/{c}": {
                "median_s": row["median"],
                "min_s": row["min"],
                "times_s": row["times"],
                "gbps": (
                    (sizes["big_bytes"] if wl in ("write", "read") else sizes["tiny_bytes"])
                    / row["median"]
                    / 1e9
                )
                if row["median"]
                else None,
                "us_per_chunk": (
                    row["median"]
                    / (sizes["big_n"] if wl in ("write", "read") else sizes["tiny_n"])
                    * 1e6
                )
                if row["median"]
                else None,
                "rss_peak_mib": max(row["rss_peak"]) / 2**20 if row["rss_peak"] else None,
                "verified": row["verified"],
                "stored_bytes": row["stored"],
                "errors": row["errors"],
                "warnings": row["warnings"],
            }
            for (wl, c), row in rows.items()
        },
    }
    line = json.dumps(out, default=str)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    print(JSON_TAG + line)
    if not args.keep:
        shutil.rmtree(stores, ignore_errors=True)
    return 0


def _profile_setup(args, source: Path, store: Path, shape, tshape):
    """Prepare one workload of one contender; return (region, check, n_chunks)."""
    ad = make_adapter(args.profile_contender, args.impl_module, args.cuzarr_mem)
    tiny = args.profile.startswith("tiny-")
    if tiny:
        data = tiny_source(tshape)
        if args.tiny_store == "disk":
            store.parent.mkdir(parents=True, exist_ok=True)
            loc = ad.disk_location(Path(str(store) + "_tiny"))
        else:
            loc = ad.mem_location()
        grid = TINY_CHUNKS
        n = (tshape[0] // TINY_CHUNKS[0]) * (tshape[1] // TINY_CHUNKS[1])
    else:
        data = np.load(source)
        store.parent.mkdir(parents=True, exist_ok=True)
        loc = ad.disk_location(store)
        grid = CHUNKS
        n = -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1])
    h = ad.create(loc, data.shape, grid)
    if args.profile.endswith("write"):

        def region():
            ad.write(h, data)

        def check():
            return np.array_equal(to_numpy(ad.read(ad.open(loc))), data)

    else:
        ad.write(h, data)
        rh = ad.open(loc)
        box: list[Any] = []

        def region():
            box[:] = [ad.read(rh)]

        def check():
            return np.array_equal(to_numpy(box[0]), data)

    return region, check, n


def _timed_iters(region, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        region()
        times.append(time.perf_counter() - t0)
    return times


def _report(args, times: list[float], n: int, ok: bool, note: str) -> None:
    m = statistics.median(times)
    print(
        f"{label(args.profile_contender, args.impl_module)} {args.profile}: "
        f"{len(times)} iteration(s), median {m:.3f}s ({m / n * 1e6:.1f} us/chunk), "
        f"verified={ok} ({note})",
        flush=True,
    )


def summarize_collapsed(path: Path, top: int = 25) -> None:
    """Print the top frames of a py-spy raw (collapsed stacks) file."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        total += c
        frames = [f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + c
        for f in set(frames):
            incl[f] = incl.get(f, 0) + c
    if not total:
        print("no samples")
        return
    print(
        f"\n=== py-spy: {total} samples over the timed iterations, all threads (a thread "
        "blocked on a lock or waiting to re-take the GIL can show as own time of the frame "
        "that released it) ==="
    )
    print(f"--- top {top} by own samples ---")
    for f, c in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")
    print(f"--- top {top} by inclusive samples ---")
    for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")


def profile(args, source: Path, store: Path, shape, tshape) -> int:
    """Profile one workload of one contender (cProfile in-process, or py-spy)."""
    if args.profiler == "py-spy":
        return profile_py_spy(args)
    region, check, n = _profile_setup(args, source, store, shape, tshape)
    if args.profiler == "attach":  # child of profile_py_spy: wait for the sampler
        print("READY", flush=True)
        sys.stdin.readline()
        times = _timed_iters(region, args.profile_iters)
        print("DONE", flush=True)
        sys.stdin.readline()  # py-spy has stopped: the check is not sampled
        _report(args, times, n, check(), "under py-spy")
    else:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        times = _timed_iters(region, args.profile_iters)
        prof.disable()
        _report(args, times, n, check(), "under cProfile: main thread only, slower")
        st = pstats.Stats(prof)
        st.strip_dirs()
        print("\n=== top 25 by own time (tottime) ===")
        st.sort_stats("tottime").print_stats(25)
        print("=== top 25 by cumulative time ===")
        st.sort_stats("cumulative").print_stats(25)
    if not args.keep and not args.profile.startswith("tiny-"):
        shutil.rmtree(store, ignore_errors=True)
    return 0


def profile_py_spy(args) -> int:
    """Run the workload in a child; attach py-spy only around the timed iterations."""
    spy = args.py_spy or shutil.which("py-spy")
    if not spy:
        print("py-spy not found (pip install py-spy, or pass --py-spy PATH)", file=sys.stderr)
        return 2
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--profiler") if "--profiler" in argv else -1
    if i >= 0:
        del argv[i : i + 2]
    argv = [a for a in argv if not a.startswith("--profiler=")]
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *argv, "--profiler", "attach"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    for line in child.stdout:
        if line.strip() == "READY":
            break
        print(line, end="")
    out = args.data_dir / f"pyspy_{args.profile_contender}_{args.profile}.txt"
    spy_cmd = [spy, "record", "--format", "raw", "-r", str(args.spy_rate), "-o", str(out)]
    spy_cmd += ["--pid", str(child.pid), "--nonblocking"] + (["--gil"] if args.spy_gil else [])
    spy_proc = subprocess.Popen(
        spy_cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # let py-spy attach
    child.stdin.write("GO\n")
    child.stdin.flush()
    for line in child.stdout:
        if line.strip() == "DONE":
            break
        print(line, end="")
    spy_proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        _, err = spy_proc.communicate(timeout=60)
    finally:
        child.stdin.write("GO\n")
        child.stdin.flush()
    for line in child.stdout:
        print(line, end="")
    child.wait()
    if not out.exists():
        print("py-spy wrote nothing:", err.strip()[-500:], file=sys.stderr)
        return 1
    summarize_collapsed(out)
    print(f"(raw stacks: {out}; feed to flamegraph.pl or speedscope)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
