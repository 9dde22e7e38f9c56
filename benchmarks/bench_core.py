#!/usr/bin/env python
"""Core benchmark: cuzarr vs zarr-python (two pipelines), zarrs and tensorstore.

Workloads (all Zarr v3, uint16 "smooth noise", zstd level 1):

* ``write``        full write of a >= 256 MiB array with ~1 MiB chunks to local disk
* ``read``         full read of the store each contender just wrote (page cache)
* ``tiny``         write, then full read, of an array with ~20,000 tiny (2 KiB raw)
                   chunks in an in-memory store (rows ``tiny-write``, ``tiny-read``)
* ``shard-write``  full write of the same data as a sharded array (32 MiB shards of
                   128 KiB inner chunks)
* ``shard-read``   full read of that sharded store
* ``shard-random`` 1,000 random 16x16 reads (one call each) from the sharded store
* ``sel-strided``  ``a[::7, ::13]`` of the 1 MiB-chunk array (every chunk)
* ``sel-rows``     ``a[1000:5000:3, :]``
* ``sel-oindex``   ``a.oindex[i, j]``, sorted random int arrays on both axes
* ``sel-vindex``   ``a.vindex[i, j]``, 100,000 random points

Reference rows ("limit:*") show what plain numcodecs / python-zstandard reach
on the same chunks using every core, without any Zarr machinery.

Every measurement runs in a fresh subprocess (so peak RSS can be reported per
contender and per workload, and no contender warms another's caches). Contenders
are interleaved within each repeat; the table shows medians, and a summary block
compares cuzarr with the best peer of each workload: the ratio of medians, the
"paired" ratio (median over repeats of the two times measured in the same
repeat, which a slow stretch of machine load hits alike) and the ratio of mins.

Usage::

    python benchmarks/bench_core.py [--size-mib 256] [--repeats 3] [--quick]
    python benchmarks/bench_core.py --workloads shard,sel --order rotate
    python benchmarks/bench_core.py --quick --impl-module zarr   # dry run
    python benchmarks/bench_core.py --profile tiny-read          # cProfile cuzarr
    python benchmarks/bench_core.py --in-process --size-mib 64  # one long-lived process
    python benchmarks/bench_core.py --in-process --separate     # a long-lived process each

See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import atexit
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
SHARD_INNER = (256, 256)  # 128 KiB uint16 inner chunks
SHARD_MAX = (2048, 8192)  # 32 MiB uint16 shards (smaller only if the array is)
RANDOM_N = 1000  # random small reads from the sharded array
RANDOM_WIN = 16  # ... of RANDOM_WIN x RANDOM_WIN elements each
VINDEX_POINTS = 100_000
DTYPE = "uint16"
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 1}}

LIB_CONTENDERS = ["cuzarr", "zarr", "zarr-fused", "zarrs", "tensorstore"]
PEERS = ["zarr", "zarr-fused", "zarrs", "tensorstore"]
LIMIT_CONTENDERS = ["limit:numcodecs", "limit:zstandard", "limit:libzstd", "limit:assemble"]
# limit:assemble = limit:libzstd (or limit:numcodecs) plus what any full read must also do: copy each
# decoded chunk into its place in one fresh output array (no Zarr machinery); for write, what any
# writer must also do: copy each chunk out of the source and write it to a file of its own
ASSEMBLE = "limit:assemble"
DECODE_LIMITS = ["limit:numcodecs", "limit:zstandard", "limit:libzstd"]
SEL_UNITS = ["sel-strided", "sel-rows", "sel-oindex", "sel-vindex"]
SHARD_UNITS = ["shard-write", "shard-read", "shard-random"]
ONE_SHARD_MAX = (4096, 8192)  # "one-shard": an array that is one 64 MiB shard
# a "unit" is what one process measures (in --isolation measurement); "tiny" and
# "one-shard" yield two table rows each (their write, then their read), every other
# unit one row of its own name.
UNITS = ["write", "read", "tiny", *SHARD_UNITS, "one-shard", *SEL_UNITS]
WORKLOADS = UNITS
ALIASES = {
    "all": UNITS,
    "core": ["write", "read", "tiny"],
    "shard": [*SHARD_UNITS, "one-shard"],
    "sel": SEL_UNITS,
    "select": SEL_UNITS,
}
ROWS_OF_UNIT = {
    "tiny": ["tiny-write", "tiny-read"],
    "one-shard": ["one-shard-write", "one-shard-read"],
}
ROW_ORDER = [
    "write", "read", "tiny-write", "tiny-read", *SHARD_UNITS,
    "one-shard-write", "one-shard-read", *SEL_UNITS,
]  # fmt: skip
# a unit that reads a store needs the unit that writes it (run untimed as set-up if
# it was not selected)
NEEDS = {
    "read": "write",
    **{u: "write" for u in SEL_UNITS},
    "shard-read": "shard-write",
    "shard-random": "shard-write",
}
LIMIT_UNITS = ["write", "read", "tiny", "shard-read"]  # units with limit:* rows

FULL_READS = ["read", "tiny-read", "shard-read"]  # rows with an RSS/out column
RSS_GOAL_ROWS = ["read", "shard-read"]  # the >= 256 MiB reads the RSS goal is about
WRITE_UNITS = {"write": "", "shard-write": "_shard"}  # unit -> store suffix
RESULT_TAG = "BENCH_RESULT "
JSON_TAG = "BENCH_JSON "

PIPELINES = {
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarr-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
}


def limit_units(contender: str) -> list[str]:
    return ["write", "read"] if contender == ASSEMBLE else LIMIT_UNITS


def rows_of(unit: str) -> list[str]:
    return ROWS_OF_UNIT.get(unit, [unit])


def expand_units(spec: str) -> list[str]:
    """'a,b,c' (units or aliases) -> units in canonical order."""
    want: set[str] = set()
    for w in (w.strip() for w in spec.split(",")):
        if not w:
            continue
        if w in ALIASES:
            want.update(ALIASES[w])
        elif w in UNITS:
            want.add(w)
        elif w in ("tiny-write", "tiny-read"):
            want.add("tiny")
        elif w in ("one-shard-write", "one-shard-read"):
            want.add("one-shard")
        else:
            raise ValueError(f"unknown workload {w!r} (known: {UNITS}, aliases {list(ALIASES)})")
    return [u for u in UNITS if u in want]


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


def shard_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """SHARD_MAX, shrunk (in whole inner chunks) for arrays smaller than that."""
    return tuple(  # type: ignore[return-value]
        max(inner, min(mx, (n // inner) * inner))
        for n, inner, mx in zip(shape, SHARD_INNER, SHARD_MAX)
    )


def one_shard_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """ONE_SHARD_MAX, or the big array's shape where that is smaller (in whole
    inner chunks)."""
    return tuple(  # type: ignore[return-value]
        max(inner, min(mx, (n // inner) * inner))
        for n, inner, mx in zip(shape, SHARD_INNER, ONE_SHARD_MAX)
    )


def random_windows(shape: tuple[int, int], n: int = RANDOM_N, w: int = RANDOM_WIN):
    """Top-left corners of ``n`` random ``w x w`` windows (deterministic)."""
    rng = np.random.default_rng(5)
    ys = rng.integers(0, shape[0] - w + 1, n)
    xs = rng.integers(0, shape[1] - w + 1, n)
    return [(int(y), int(x)) for y, x in zip(ys, xs)]


def windows_chunks_touched(shape, chunks, n: int = RANDOM_N, w: int = RANDOM_WIN) -> float:
    """Mean number of chunks one random window touches."""
    tot = 0
    for y, x in random_windows(shape, n, w):
        tot += ((y + w - 1) // chunks[0] - y // chunks[0] + 1) * (
            (x + w - 1) // chunks[1] - x // chunks[1] + 1
        )
    return tot / n


def selection(name: str, shape: tuple[int, int]) -> tuple[str, tuple]:
    """(kind, selection) of a sel-* workload; kind is basic, oindex or vindex."""
    rows, cols = shape
    if name == "sel-strided":
        return "basic", (slice(None, None, 7), slice(None, None, 13))
    if name == "sel-rows":
        r0 = min(1000, rows // 8)
        r1 = min(5000, max(r0 + 1, rows * 5 // 8))
        return "basic", (slice(r0, r1, 3), slice(None))
    if name == "sel-oindex":
        rng = np.random.default_rng(11)
        i = np.sort(rng.choice(rows, max(1, rows // 8), replace=False))
        j = np.sort(rng.choice(cols, max(1, cols // 8), replace=False))
        return "oindex", (i, j)
    if name == "sel-vindex":
        rng = np.random.default_rng(12)
        i = rng.integers(0, rows, VINDEX_POINTS)
        j = rng.integers(0, cols, VINDEX_POINTS)
        return "vindex", (i, j)
    raise ValueError(name)


def expected_selection(src: np.ndarray, kind: str, sel: tuple) -> np.ndarray:
    if kind == "basic":
        return np.asarray(src[sel])
    if kind == "oindex":
        return np.asarray(src[np.ix_(*sel)])
    return np.asarray(src[sel])  # vindex: numpy advanced indexing of int arrays


def selection_stats(name: str, shape: tuple[int, int]) -> tuple[int, int]:
    """(output bytes, chunks touched) of a sel-* workload on the CHUNKS grid."""
    kind, sel = selection(name, shape)
    idx = []
    for ax, s in enumerate(sel):
        idx.append(np.arange(shape[ax])[s] if isinstance(s, slice) else np.asarray(s))
    if kind == "vindex":
        ncc = -(-shape[1] // CHUNKS[1])
        touched = len(np.unique((idx[0] // CHUNKS[0]) * ncc + idx[1] // CHUNKS[1]))
        return len(idx[0]) * 2, int(touched)
    touched = len(np.unique(idx[0] // CHUNKS[0])) * len(np.unique(idx[1] // CHUNKS[1]))
    return len(idx[0]) * len(idx[1]) * 2, int(touched)


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
        self.pipeline = pipeline
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

    def _own_pipeline(self) -> Any:
        """zarr-python binds its codec pipeline to an array when the array is created
        or opened, from the global ``codec_pipeline.path``: set it to this adapter's
        for that moment only. With several zarr-python adapters in one process
        (``--in-process``), a setting made once at construction would leave every
        one of them with the last adapter's pipeline."""
        if self.pipeline is None:
            return contextlib.nullcontext()
        import zarr

        return zarr.config.set({"codec_pipeline.path": self.pipeline})

    def create(self, loc: Any, shape, chunks, shards=None) -> Any:
        kw = {"shards": tuple(shards)} if shards is not None else {}
        with self._own_pipeline():
            return self._create(loc, shape, chunks, kw)

    def _create(self, loc: Any, shape, chunks, kw: dict[str, Any]) -> Any:
        return self.mod.create_array(
            loc,
            shape=shape,
            dtype=DTYPE,
            chunks=chunks,
            compressors=[ZSTD_V3],
            fill_value=0,
            zarr_format=3,
            overwrite=True,
            **kw,
        )

    def write(self, handle: Any, data: np.ndarray) -> None:
        handle[...] = data

    def open(self, loc: Any) -> Any:
        with self._own_pipeline():
            h = self.mod.open_array(loc, mode="r")
        pipe = getattr(getattr(h, "_async_array", None), "codec_pipeline", None)
        if pipe is not None and "codec_pipeline" in self.info:
            self.info["effective_pipeline"] = f"{type(pipe).__module__}.{type(pipe).__name__}"
        return h

    def read(self, handle: Any) -> np.ndarray:
        return handle[...]

    def select(self, handle: Any, kind: str, sel: tuple) -> Any:
        if kind == "oindex":
            return handle.oindex[sel]
        if kind == "vindex":
            return handle.vindex[sel]
        return handle[sel]


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

    def create(self, loc: Any, shape, chunks, shards=None) -> Any:
        inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD_V3]
        if shards is None:
            grid, codecs = list(chunks), inner_codecs
        else:
            grid = list(shards)
            codecs = [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": list(chunks),
                        "codecs": inner_codecs,
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                        "index_location": "end",
                    },
                }
            ]
        spec = {
            "driver": "zarr3",
            "kvstore": loc,
            "metadata": {
                "shape": list(shape),
                "data_type": DTYPE,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": codecs,
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

    def select(self, handle: Any, kind: str, sel: tuple) -> Any:
        if kind == "oindex":
            return handle.oindex[sel].read().result()
        if kind == "vindex":
            return handle.vindex[sel].read().result()
        return handle[sel].read().result()


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
    if kind == ASSEMBLE:
        # the fastest decode binding on hand (the one cuzarr uses by default)
        try:
            return _libzstd_factories()
        except (OSError, AttributeError):
            kind = "limit:numcodecs"
    if kind == "limit:numcodecs":
        import numcodecs

        def enc():
            return numcodecs.Zstd(level=1).encode

        def dec():
            return numcodecs.Zstd().decode

        return enc, dec, {"module": "numcodecs", "version": numcodecs.__version__}
    if kind == "limit:libzstd":
        return _libzstd_factories()
    import zstandard

    def enc():
        return zstandard.ZstdCompressor(level=1).compress

    def dec():
        d = zstandard.ZstdDecompressor()
        return d.decompress

    return enc, dec, {"module": "zstandard", "version": zstandard.__version__}


def _libzstd_factories():
    """The system's libzstd through ctypes, one context and one reused output
    buffer per thread: what a binding that decodes in place can reach."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.ZSTD_createDCtx.restype = vp
    lib.ZSTD_createCCtx.restype = vp
    lib.ZSTD_decompressDCtx.restype = sz
    lib.ZSTD_decompressDCtx.argtypes = [vp, vp, sz, vp, sz]
    lib.ZSTD_compressCCtx.restype = sz
    lib.ZSTD_compressCCtx.argtypes = [vp, vp, sz, vp, sz, ctypes.c_int]
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_getFrameContentSize.argtypes = [vp, sz]
    lib.ZSTD_compressBound.restype = sz
    lib.ZSTD_compressBound.argtypes = [sz]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [sz]
    lib.ZSTD_versionString.restype = ctypes.c_char_p

    def addr(b):
        a = b if isinstance(b, np.ndarray) else np.frombuffer(b, dtype=np.uint8)
        return a.ctypes.data, a.nbytes

    def enc():
        ctx = lib.ZSTD_createCCtx()
        buf = np.empty(0, np.uint8)

        def f(c):
            nonlocal buf
            p, n = addr(c)
            cap = lib.ZSTD_compressBound(n)
            if buf.nbytes < cap:
                buf = np.empty(cap, np.uint8)
            r = lib.ZSTD_compressCCtx(ctx, buf.ctypes.data, cap, p, n, 1)
            if lib.ZSTD_isError(r):
                raise RuntimeError("ZSTD_compressCCtx failed")
            return buf[:r].tobytes()  # callers keep them, as the others' bytes

        return f

    def dec():
        ctx = lib.ZSTD_createDCtx()
        buf = np.empty(0, np.uint8)

        def f(b, out=None):
            nonlocal buf
            p, n = addr(b)
            size = lib.ZSTD_getFrameContentSize(p, n)
            if out is not None:
                dst = out.reshape(-1).view(np.uint8)
            else:
                if buf.nbytes < size:
                    buf = np.empty(size, np.uint8)
                dst = buf[:size]
            r = lib.ZSTD_decompressDCtx(ctx, dst.ctypes.data, dst.nbytes, p, n)
            if lib.ZSTD_isError(r) or r != size:
                raise RuntimeError("ZSTD_decompressDCtx failed")
            return memoryview(dst)[:r]

        return f

    return enc, dec, {"module": "libzstd (ctypes)", "version": lib.ZSTD_versionString().decode()}


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


def _flush_dirty_pages() -> None:
    """Write back the dirty pages earlier writes left (untimed): on this VM the
    kernel's writeback of a 93 MB store competed with whatever ran next (the demo's
    read took 0.17 s or 0.29 s at random after a write), so a measurement after
    another contender's write paid for it."""
    if hasattr(os, "sync"):
        os.sync()


class Meter:
    """Times a block and records [RSS before, peak RSS during] for it."""

    def __init__(self, res: dict[str, Any], prewarm_bytes: int = 0):
        self.res = res
        self.prewarm_bytes = prewarm_bytes
        res["times"] = {}
        res["cpu"] = {}
        res["rss"] = {}

    @contextlib.contextmanager
    def measure(self, wl: str):
        if self.prewarm_bytes:
            # Touch and free more memory than the op will allocate, untimed: on this
            # VM a fresh process's first touch of 256 MiB took 28 ms or, at random
            # (3 of 8 runs), 430 ms (pages the host had not backed yet). Afterwards
            # the op gets pages already backed, whoever the contender is (10 of 10
            # runs at 28 ms); it is the state of any process that ran a while.
            warm = np.ones(self.prewarm_bytes, dtype=np.uint8)
            del warm
        _flush_dirty_pages()
        self.res["hwm_reset"] = _reset_hwm()
        base = _rss()
        c0 = time.process_time()
        t0 = time.perf_counter()
        yield
        t = time.perf_counter() - t0
        # CPU seconds of the process, every thread: what preemption by other
        # jobs on a loaded machine does not inflate
        self.res["cpu"][wl] = time.process_time() - c0
        self.res["times"][wl] = t
        self.res["rss"][wl] = [base, max(base, _hwm())]


def _read_shard_decode_len(fn, path, n_inner: int) -> int:
    """Read one shard file, parse its index (at the end: n x (offset, nbytes) uint64
    LE + crc32c), decode every stored inner chunk."""
    with open(path, "rb") as f:
        buf = f.read()
    idx = np.frombuffer(buf, "<u8", count=2 * n_inner, offset=len(buf) - 16 * n_inner - 4)
    mv = memoryview(buf)
    total = 0
    for off, nb in idx.reshape(n_inner, 2).tolist():
        if off != 2**64 - 1:
            total += len(fn(mv[off : off + nb]))
    return total


# --------------------------------------------------------------------------
# worker (one measurement -- or, with --isolation contender, all of one
# contender's workloads -- in one process)
# --------------------------------------------------------------------------


def _limit_unit(kind: str, unit: str, spec: dict[str, Any], meter: Meter, res: dict) -> None:
    mk_enc, mk_dec, _ = _codec_factories(kind)
    shape = tuple(spec["shape"])
    nthreads = os.cpu_count() or 1
    if unit == "write" and kind == ASSEMBLE:
        data = np.load(spec["source"])
        store = Path(spec["store"])  # set aside before this process, as for the libraries
        with meter.measure("write"):
            nbytes = _store_chunks(data, store, mk_enc, nthreads)
        res["stored_bytes"]["write"] = nbytes
    elif unit == "write":
        chunks = split_chunks(np.load(spec["source"]), CHUNKS)
        with meter.measure("write"):
            nbytes = _run_sliced(chunks, mk_enc, _decode_len, nthreads)
        res["stored_bytes"]["write"] = nbytes
    elif unit == "read" and kind == ASSEMBLE:
        cdir = Path(spec["chunk_dir"])
        files = sorted(
            (p, tuple(int(x) for x in p.relative_to(cdir).parts))
            for p in cdir.rglob("*")
            if p.is_file()
        )
        with meter.measure("read"):
            out = _assemble(files, shape, mk_dec, nthreads)
        if spec.get("verify"):
            res["verified"]["read"] = bool(
                np.array_equal(out, np.load(spec["source"], mmap_mode="r"))
            )
        res["info"]["chunk_dir"] = spec["chunk_dir"]
        del out
        res["info"]["first_touch_s"] = _first_touch(shape, nthreads)
    elif unit == "read":
        files = sorted(p for p in Path(spec["chunk_dir"]).rglob("*") if p.is_file())
        with meter.measure("read"):
            nbytes = _run_sliced(files, mk_dec, _read_decode_len, nthreads)
        # edge chunks are stored whole (padded): every chunk decodes to CHUNKS
        n_chunks = int(np.prod([-(-n // c) for n, c in zip(shape, CHUNKS)]))
        res["verified"]["read"] = nbytes == n_chunks * int(np.prod(CHUNKS)) * 2
        res["info"]["chunk_dir"] = spec["chunk_dir"]
    elif unit == "shard-read":
        files = sorted(p for p in Path(spec["shard_dir"]).rglob("*") if p.is_file())
        n_inner = int(np.prod([s // c for s, c in zip(spec["shard_shape"], SHARD_INNER)]))

        def per_file(fn, path):
            return _read_shard_decode_len(fn, path, n_inner)

        with meter.measure("shard-read"):
            nbytes = _run_sliced(files, mk_dec, per_file, nthreads)
        # inner chunks are padded at the array edge, and all-fill ones may be absent
        res["verified"]["shard-read"] = nbytes >= int(np.prod(shape)) * 2 * 0.99
        res["info"]["shard_dir"] = spec["shard_dir"]
    elif unit == "tiny":  # encode then decode, chunks held in memory
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
        res["verified"]["tiny-read"] = nbytes == int(np.prod(tshape)) * 2
        res["stored_bytes"]["tiny-write"] = sum(len(c) for c in comp)
    else:
        raise ValueError(f"no limit row for {unit}")


def _store_chunks(data: np.ndarray, store: Path, mk_enc, nthreads: int) -> int:
    """What any writer of the big array must do, on all cores, with no Zarr machinery:
    copy each chunk out of the source, encode it (as limit:libzstd), and write it to
    its own file under ``store`` (a temporary file renamed into place, as cuzarr's
    LocalStore writes; no fsync, as nobody fsyncs here)."""
    c0, c1 = CHUNKS
    keys = [(i, j) for i in range(-(-data.shape[0] // c0)) for j in range(-(-data.shape[1] // c1))]
    for i in {i for i, _ in keys}:
        (store / "c" / str(i)).mkdir(parents=True, exist_ok=True)

    def work(sl):
        enc = mk_enc()
        total = 0
        for i, j in sl:
            blob = enc(np.ascontiguousarray(data[i * c0 : (i + 1) * c0, j * c1 : (j + 1) * c1]))
            path = store / "c" / str(i) / str(j)
            tmp = path.with_name(f".{j}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, path)
            total += len(blob)
        return total

    with ThreadPoolExecutor(nthreads) as ex:
        return sum(ex.map(work, [keys[k::nthreads] for k in range(nthreads)]))


def _first_touch(shape: tuple[int, ...], nthreads: int) -> float:
    """Seconds to write zeros into a fresh array of ``shape`` on all cores: the kernel's
    zeroing of its new pages, which no full read into fresh memory escapes."""
    warm = np.ones(int(np.prod(shape)) * 2 * 5 // 4, dtype=np.uint8)  # as Meter does
    del warm
    t0 = time.perf_counter()
    flat = np.empty(shape, dtype=DTYPE).reshape(-1)
    n = flat.size

    def touch(k):
        flat[k * n // nthreads : (k + 1) * n // nthreads] = 0

    with ThreadPoolExecutor(nthreads) as ex:
        list(ex.map(touch, range(nthreads)))
    return time.perf_counter() - t0


def _assemble(files: list, shape: tuple[int, ...], mk_dec, nthreads: int) -> np.ndarray:
    """Read and decode every chunk file on all cores (as limit:libzstd does), each
    into a per-thread buffer, and copy it into its place in a fresh output array."""
    out = np.empty(shape, dtype=DTYPE)
    c0, c1 = CHUNKS

    def work(sl):
        dec = mk_dec()
        tmp = np.empty(CHUNKS, dtype=DTYPE)
        for path, (i, j) in sl:
            with open(path, "rb") as f:
                dec(f.read(), out=tmp)
            dst = out[i * c0 : (i + 1) * c0, j * c1 : (j + 1) * c1]
            dst[...] = tmp[: dst.shape[0], : dst.shape[1]]

    with ThreadPoolExecutor(nthreads) as ex:
        list(ex.map(work, [files[k::nthreads] for k in range(nthreads)]))
    return out


def _same(out: Any, expected: np.ndarray) -> bool:
    out = to_numpy(out)
    return bool(
        out.shape == expected.shape
        and out.dtype == expected.dtype
        and np.array_equal(out, expected)
    )


def _lib_unit(ad: Any, unit: str, spec: dict[str, Any], meter: Meter, res: dict) -> None:
    shape = tuple(spec["shape"])
    big = Path(spec["store"])
    sharded = Path(spec["store"] + "_shard")
    verify = spec["verify"]

    def src_mmap() -> np.ndarray:
        return np.load(spec["source"], mmap_mode="r")

    def timed_open(loc: Any) -> Any:
        t0 = time.perf_counter()
        h = ad.open(loc)
        res["open_s"][unit] = time.perf_counter() - t0
        return h

    def write_then_read(h: Any, loc: Any, data: np.ndarray, unit: str) -> None:
        """The two rows of a write-then-read unit: the write through ``h``, then a
        full read through a handle opened anew (untimed)."""
        write_row, read_row = rows_of(unit)
        with meter.measure(write_row):
            ad.write(h, data)
        del h
        h2 = timed_open(loc)
        with meter.measure(read_row):
            out = ad.read(h2)
        if verify:
            res["verified"][read_row] = _same(out, data)

    if unit in ("write", "shard-write"):
        data = np.load(spec["source"])
        if unit == "write":
            h = ad.create(ad.disk_location(big), shape, CHUNKS)
        else:
            h = ad.create(ad.disk_location(sharded), shape, SHARD_INNER, shards=spec["shard_shape"])
        with meter.measure(unit):
            ad.write(h, data)
        del data, h
    elif unit in ("read", "shard-read"):
        h = timed_open(ad.disk_location(big if unit == "read" else sharded))
        with meter.measure(unit):
            out = ad.read(h)
        if verify:
            res["verified"][unit] = _same(out, src_mmap())
        del out
    elif unit == "shard-random":
        h = timed_open(ad.disk_location(sharded))
        wins = random_windows(shape)
        w = RANDOM_WIN
        outs: list[Any] = [None] * len(wins)
        select = ad.select
        with meter.measure(unit):
            for k, (y, x) in enumerate(wins):
                outs[k] = select(h, "basic", (slice(y, y + w), slice(x, x + w)))
        if verify:
            src = src_mmap()
            res["verified"][unit] = all(
                _same(o, np.asarray(src[y : y + w, x : x + w])) for o, (y, x) in zip(outs, wins)
            )
    elif unit in SEL_UNITS:
        h = timed_open(ad.disk_location(big))
        kind, sel = selection(unit, shape)
        with meter.measure(unit):
            out = ad.select(h, kind, sel)
        if verify:
            res["verified"][unit] = _same(out, expected_selection(src_mmap(), kind, sel))
        del out
    elif unit == "one-shard":
        r, c = one_shard_shape(shape)
        data = np.ascontiguousarray(src_mmap()[:r, :c])
        one = Path(str(big) + "_one")
        set_aside(one, big.parent)
        h = ad.create(ad.disk_location(one), (r, c), SHARD_INNER, shards=(r, c))
        write_then_read(h, ad.disk_location(one), data, unit)
        del data
    elif unit == "tiny":
        tshape = tuple(spec["tiny_shape"])
        data = tiny_source(tshape)
        if spec.get("tiny_store") == "disk":
            tstore = Path(str(big) + "_tiny")
            set_aside(tstore, big.parent)
            loc = ad.disk_location(tstore)
        else:
            loc = ad.mem_location()
        write_then_read(ad.create(loc, tshape, TINY_CHUNKS), loc, data, unit)
        del loc
    else:
        raise ValueError(unit)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    contender = spec["contender"]
    units = spec["workloads"]
    res: dict[str, Any] = {
        "contender": contender,
        "workloads": units,
        "verified": {},
        "stored_bytes": {},
        "open_s": {},
        "errors": {},
        "tracebacks": {},
    }
    meter = Meter(res, prewarm_bytes=int(np.prod(spec["shape"])) * 2 * 5 // 4)
    if contender.startswith("limit:"):
        res["info"] = dict(_codec_factories(contender)[2])
        ad = None
    else:
        ad = make_adapter(contender, spec["impl_module"], spec.get("cuzarr_mem", "dict"))
        res["info"] = ad.info
    for unit in units:
        try:
            if ad is None:
                _limit_unit(contender, unit, spec, meter, res)
            else:
                _lib_unit(ad, unit, spec, meter, res)
        except Exception as e:  # this unit fails; the process goes on with the next one
            for wl in rows_of(unit):
                res["times"].pop(wl, None)
                res["errors"][wl] = f"{type(e).__name__}: {e}"[:300]
                res["tracebacks"][wl] = traceback.format_exc()[-3000:]
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
            "workloads": spec.get("workloads"),
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
    # The worker imports this module rather than running it as a script: as
    # __main__ it left ~3.6 MiB more in every measuring process (counted in each
    # contender's peak RSS).
    boot = f"import sys; sys.path.insert(0, {str(HERE)!r}); import bench_core; sys.exit(bench_core.main())"
    cmd = [sys.executable, "-c", boot, "--_worker", json.dumps(spec)]
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


def row_sizes(shape, tshape, size_mib: int) -> dict[str, dict[str, Any]]:
    """Per table row: bytes moved (written, or returned by the read), and the number
    of items (chunks touched; reads for shard-random) for the us/item column."""
    big_bytes = int(np.prod(shape)) * 2
    big_n = -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1])
    tiny_bytes = int(np.prod(tshape)) * 2
    tiny_n = (tshape[0] // TINY_CHUNKS[0]) * (tshape[1] // TINY_CHUNKS[1])
    inner_n = -(-shape[0] // SHARD_INNER[0]) * -(-shape[1] // SHARD_INNER[1])
    one = one_shard_shape(shape)
    one_bytes = int(np.prod(one)) * 2
    one_n = (one[0] // SHARD_INNER[0]) * (one[1] // SHARD_INNER[1])
    out: dict[str, dict[str, Any]] = {
        "write": {"bytes": big_bytes, "items": big_n, "item": "chunk"},
        "read": {"bytes": big_bytes, "items": big_n, "item": "chunk"},
        "tiny-write": {"bytes": tiny_bytes, "items": tiny_n, "item": "chunk"},
        "tiny-read": {"bytes": tiny_bytes, "items": tiny_n, "item": "chunk"},
        "shard-write": {"bytes": big_bytes, "items": inner_n, "item": "inner chunk"},
        "shard-read": {"bytes": big_bytes, "items": inner_n, "item": "inner chunk"},
        "one-shard-write": {"bytes": one_bytes, "items": one_n, "item": "inner chunk"},
        "one-shard-read": {"bytes": one_bytes, "items": one_n, "item": "inner chunk"},
        "shard-random": {
            "bytes": RANDOM_N * RANDOM_WIN * RANDOM_WIN * 2,
            "items": RANDOM_N,
            "item": "read",
            "inner_per_read": windows_chunks_touched(shape, SHARD_INNER),
        },
    }
    for u in SEL_UNITS:
        nbytes, touched = selection_stats(u, shape)
        out[u] = {"bytes": nbytes, "items": touched, "item": "chunk"}
    return out


def summarize(results: list[dict[str, Any]], args, sizes: dict[str, Any]) -> dict[str, Any]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        c = r["contender"]
        for unit in r.get("workloads") or []:
            for wl in rows_of(unit):
                row = rows.setdefault(
                    (wl, c),
                    {
                        "times": [],
                        "cpu": [],
                        "by_repeat": {},
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
                if wl in r.get("errors", {}):
                    row["errors"].append(r["errors"][wl])
                    continue
                if wl not in r.get("times", {}):
                    continue
                row["times"].append(r["times"][wl])
                if wl in r.get("cpu", {}):
                    row["cpu"].append(r["cpu"][wl])
                row["by_repeat"][r.get("repeat", len(row["times"]) - 1)] = r["times"][wl]
                if wl in r.get("rss", {}):
                    base, peak = r["rss"][wl]
                    row["rss_peak"].append(peak)
                    row["rss_delta"].append(peak - base)
                v = r.get("verified", {}).get(wl)
                if v is not None:
                    row["verified"] = bool(v) and row["verified"] is not False
                if r.get("stored_bytes", {}).get(wl):
                    row["stored"] = r["stored_bytes"][wl]
                if "info" in r:
                    row["info"] = r["info"]
                    if "first_touch_s" in r["info"]:
                        row.setdefault("first_touch", []).append(r["info"]["first_touch_s"])
                for w in r.get("warnings", []):
                    if w not in row["warnings"]:
                        row["warnings"].append(w)
    for row in rows.values():
        row["median"] = statistics.median(row["times"]) if row["times"] else None
        row["min"] = min(row["times"]) if row["times"] else None
    return rows


def rss_ratio(row: dict[str, Any], nbytes: int) -> float | None:
    return max(row["rss_peak"]) / nbytes if row.get("rss_peak") else None


def print_table(rows, args, sizes) -> None:
    contenders = args.contenders + args.limits
    rs = sizes["rows"]
    print()
    print(
        f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
        f"python={platform.python_version()} load avg (1/5/15 min) at start "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][0])}, at end "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][1])}"
    )
    print(
        f"big array: shape={tuple(sizes['shape'])} uint16 = {sizes['big_bytes'] / 2**20:.0f} MiB, "
        f"chunks={CHUNKS} (1 MiB), zstd level 1, Zarr v3, local disk ({args.data_dir})"
    )
    sh = sizes["shard_shape"]
    print(
        f"sharded array: same data, shards={tuple(sh)} ({sh[0] * sh[1] * 2 / 2**20:.0f} MiB), "
        f"inner chunks={SHARD_INNER} ({SHARD_INNER[0] * SHARD_INNER[1] * 2 // 1024} KiB), "
        f"index at end (bytes+crc32c); shard-random = {RANDOM_N} reads of "
        f"{RANDOM_WIN}x{RANDOM_WIN} at random positions, one call each "
        f"({rs['shard-random']['inner_per_read']:.2f} inner chunks per read on average)"
    )
    one = one_shard_shape(tuple(sizes["shape"]))
    print(
        f"one-shard array: the first {one[0]}x{one[1]} of the data ({one[0] * one[1] * 2 / 2**20:.0f} "
        f"MiB) as ONE shard of {SHARD_INNER} inner chunks: its write and full read "
        "(one-shard-write, one-shard-read) show whether the inner chunks of one shard are "
        "coded on all cores"
    )
    print(
        f"tiny array: shape={tuple(sizes['tiny_shape'])} uint16, chunks={TINY_CHUNKS} (2 KiB raw), "
        f"{sizes['tiny_n']} chunks, zstd level 1, "
        + ("in-memory store" if args.tiny_store == "memory" else "local disk (page cache)")
    )
    sel_desc = []
    for u in SEL_UNITS:
        kind, sel = selection(u, tuple(sizes["shape"]))
        if kind == "basic":
            d = ", ".join(
                f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
                + (f":{s.step}" if s.step not in (None, 1) else "")
                for s in sel
            )
            d = f"a[{d}]"
        elif kind == "oindex":
            d = f"a.oindex[{len(sel[0])} rows, {len(sel[1])} cols] (sorted random)"
        else:
            d = f"a.vindex[{len(sel[0])} random points]"
        sel_desc.append(f"{u} = {d}")
    print("selections (on the 1 MiB-chunk array): " + "; ".join(sel_desc))
    print(
        f"repeats={args.repeats}, order={args.order}, isolation={args.isolation} (one process "
        + ("per measurement" if args.isolation == "measurement" else "per contender and repeat")
        + "); median seconds shown (min in brackets)."
    )
    print(
        "write: timed is `arr[...] = data` only (array creation untimed), no fsync for anyone "
        "(os.sync() between contenders, untimed; tensorstore file_io_sync=False)."
    )
    print(
        "reads and selections: open is untimed. Reads come right after the writes, so every "
        "contender reads its own store from the OS page cache (warm, same for all)."
    )
    print(
        "GB/s = uncompressed bytes written, or returned by the read/selection, per second; "
        "us/item = microseconds per chunk touched (inner chunk for shard-*), per read for "
        "shard-random."
    )
    print(
        "xzarr / xts = speedup vs zarr-python default pipeline / vs tensorstore "
        "(>1 = faster). RSS MiB = peak RSS of the measuring process during the timed op "
        "(VmHWM, reset just before it; includes the interpreter, source/output arrays); dRSS = "
        "that peak minus the RSS just before the op (median over repeats); RSS/out = peak RSS "
        "(max over repeats) / output bytes, full reads only (goal: <= 1.2)."
    )
    print(
        "limit:* rows = raw codec on all cores (thread per slice), no Zarr machinery, no "
        "assembly into an output array (read: file read + decode of the chunk files; "
        "shard-read: shard file read + index parse + decode of the inner chunks); "
        "limit:assemble = limit:libzstd (else numcodecs) plus the copy of each chunk into one fresh "
        "output array, which every full read must do (read); plus the copy of each chunk out of "
        "the source and its write to a file of its own (temp file, rename), which every writer "
        "must do (write)."
    )
    hdr = (
        f"{'workload':<12} {'contender':<18} {'median s':>9} {'(min)':>8} {'GB/s':>7} "
        f"{'us/item':>9} {'xzarr':>7} {'xts':>7} {'RSS MiB':>8} {'dRSS':>7} {'RSS/out':>7}  notes"
    )
    print()
    print(hdr)
    print("-" * len(hdr))
    for wl in ROW_ORDER:
        nbytes = rs[wl]["bytes"]
        nitems = rs[wl]["items"]
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
            rr = rss_ratio(row, nbytes) if wl in FULL_READS and c not in LIMIT_CONTENDERS else None
            rro = f"{rr:.2f}" if rr is not None else "-"
            if m is None:
                print(
                    f"{wl:<12} {label(c, args.impl_module):<18} {'FAILED':>9} {'':>8} {'':>7} "
                    f"{'':>9} {'':>7} {'':>7} {'':>8} {'':>7} {'':>7}  {'; '.join(notes)}"
                )
                continue
            print(
                f"{wl:<12} {label(c, args.impl_module):<18} {m:9.3f} "
                f"{'(' + format(row['min'], '.3f') + ')':>8} "
                f"{nbytes / m / 1e9:7.2f} {m / nitems * 1e6:9.1f} "
                f"{fmt_ratio(ref_z, m):>7} {fmt_ratio(ref_t, m):>7} {rss:>8} {drss:>7} {rro:>7}  "
                f"{'; '.join(notes)}"
            )
        if any_row:
            print()


def paired_ratio(peer: dict[str, Any], cz: dict[str, Any]) -> float | None:
    """Median over repeats of peer time / cuzarr time, each pair measured in the
    same repeat (adjacent in time): a slow stretch of machine load hits both."""
    both = sorted(set(peer["by_repeat"]) & set(cz["by_repeat"]))
    if not both:
        return None
    return statistics.median(peer["by_repeat"][k] / cz["by_repeat"][k] for k in both)


def compute_summary(rows, args, sizes) -> list[dict[str, Any]]:
    """Per workload: the best peer (fastest verified median), cuzarr's ratio to it, and
    for full reads cuzarr's throughput as a fraction of the fastest limit row."""
    out = []
    for wl in ROW_ORDER:
        cz = rows.get((wl, "cuzarr"))
        peers = [
            (rows[(wl, p)]["median"], p)
            for p in PEERS
            if p in args.contenders
            and (wl, p) in rows
            and rows[(wl, p)]["median"] is not None
            and rows[(wl, p)]["verified"] is not False
        ]
        if cz is None and not peers:
            continue
        ent: dict[str, Any] = {"workload": wl}
        czm = cz["median"] if cz else None
        ent["cuzarr_s"] = czm
        ent["cuzarr_ok"] = bool(cz and czm is not None and cz["verified"] is not False)
        if peers:
            best_t, best = min(peers)
            ent["best_peer"] = best
            ent["best_peer_s"] = best_t
            ent["ratio_vs_best"] = best_t / czm if czm else None
            # the same on the fastest repeat of each (less sensitive to machine load)
            mins = [(rows[(wl, p)]["min"], p) for _, p in peers]
            bmin, bminp = min(mins)
            ent["best_peer_by_min"] = bminp
            ent["ratio_vs_best_by_min"] = bmin / cz["min"] if cz and cz["min"] else None
            paired = paired_ratio(rows[(wl, best)], cz) if cz else None
            if paired is not None:
                ent["ratio_vs_best_paired"] = paired
        lims = [
            (rows[(wl, lim)]["median"], lim)
            for lim in args.limits
            if lim in DECODE_LIMITS and (wl, lim) in rows and rows[(wl, lim)]["median"] is not None
        ]
        if lims and wl not in ("write", "tiny-write"):
            lt, lim = min(lims)
            ent["limit"] = lim
            ent["limit_s"] = lt
            ent["fraction_of_limit"] = lt / czm if czm else None
        asm = rows.get((wl, ASSEMBLE))
        if asm and asm["median"] is not None and czm and ASSEMBLE in args.limits:
            ent["assemble_s"] = asm["median"]
            ent["fraction_of_assemble"] = asm["median"] / czm
            if ent.get("limit_s"):
                ent["assemble_fraction_of_limit"] = ent["limit_s"] / asm["median"]
            if asm.get("first_touch"):
                ent["first_touch_s"] = statistics.median(asm["first_touch"])
            zr = rows.get((wl, "zarr"))
            if zr and zr["median"] is not None:
                # the most any writer (or reader) can be faster than zarr-python here
                ent["assemble_x_zarr"] = zr["median"] / asm["median"]
        if wl in FULL_READS and cz and cz.get("rss_peak"):
            nb = sizes["rows"][wl]["bytes"]
            ent["cuzarr_rss_per_out"] = rss_ratio(cz, nb)
            ent["cuzarr_drss_per_out"] = max(cz["rss_delta"]) / nb
            peer_rss = {
                p: rss_ratio(rows[(wl, p)], nb)
                for p in PEERS
                if (wl, p) in rows and rows[(wl, p)].get("rss_peak")
            }
            if peer_rss:
                ent["best_peer_rss_per_out"] = min(peer_rss.items(), key=lambda kv: kv[1])
        out.append(ent)
    return out


def print_summary(summary: list[dict[str, Any]], args) -> None:
    cz = label("cuzarr", args.impl_module)
    print(
        f"=== summary: {cz} vs the best peer per workload (ratio = best peer median / "
        f"{cz} median; >= 1.00 means {cz} is at least as fast) ==="
    )
    hdr = (
        f"{'workload':<12} {'best peer':<12} {'peer s':>9} {cz + ' s':>12} {'ratio':>7}  "
        f"{'verdict':<24} {'paired':>7}  {'ratio on min (best peer by min)'}"
    )
    print(hdr)
    print("-" * len(hdr))
    for e in summary:
        czs = f"{e['cuzarr_s']:.3f}" if e.get("cuzarr_s") is not None else "FAILED"
        if "best_peer" not in e:
            print(f"{e['workload']:<12} {'-':<12} {'-':>9} {czs:>12} {'-':>7}  no peer result")
            continue
        r = e.get("ratio_vs_best")
        if r is None:
            verdict = f"{cz} failed"
        elif not e["cuzarr_ok"]:
            verdict = f"{cz} result MISMATCH"
        else:
            verdict = "ok (at least as fast)" if r >= 1.0 else f"LOSS ({1 / r:.2f}x slower)"
        rs = f"{r:.2f}" if r is not None else "-"
        rm = e.get("ratio_vs_best_by_min")
        rms = f"{rm:.2f} ({e['best_peer_by_min']})" if rm is not None else "-"
        rp = e.get("ratio_vs_best_paired")
        rps = f"{rp:.2f}" if rp is not None else "-"
        print(
            f"{e['workload']:<12} {e['best_peer']:<12} {e['best_peer_s']:9.3f} {czs:>12} "
            f"{rs:>7}  {verdict:<24} {rps:>7}  {rms}"
        )
    for e in summary:
        if e.get("fraction_of_limit") is not None:
            print(
                f"{e['workload']}: {cz} reaches {e['fraction_of_limit']:.2f} of the decode limit "
                f"({e['limit']} {e['limit_s']:.3f}s vs {cz} {e['cuzarr_s']:.3f}s, same run)"
            )
        if e.get("fraction_of_assemble") is not None and e["workload"] == "write":
            x = e.get("assemble_x_zarr")
            print(
                f"write: {cz} reaches {e['fraction_of_assemble']:.2f} of the store limit "
                f"({ASSEMBLE} {e['assemble_s']:.3f}s: copy out, encode, write files, no Zarr)"
                + (f", which is itself {x:.2f}x zarr-python's write" if x else "")
            )
        elif e.get("fraction_of_assemble") is not None:
            print(
                f"{e['workload']}: {cz} reaches {e['fraction_of_assemble']:.2f} of the assemble "
                f"limit ({ASSEMBLE} {e['assemble_s']:.3f}s, itself "
                f"{e.get('assemble_fraction_of_limit', float('nan')):.2f} of the decode limit)"
            )
            if e.get("first_touch_s") and e.get("limit_s"):
                ft = e["first_touch_s"]
                print(
                    f"{e['workload']}: zeroing a fresh output array alone (first touch, all "
                    f"cores) took {ft:.3f}s = {ft / e['limit_s']:.2f} of the decode limit's time"
                )
    for e in summary:
        if e.get("cuzarr_rss_per_out") is not None:
            v = e["cuzarr_rss_per_out"]
            bp = e.get("best_peer_rss_per_out")
            # The goal is about the large reads; a 40 MiB tiny-chunk output is
            # smaller than the interpreter and its imports (~45 MiB) alone.
            goal = (
                f"goal <= 1.2: {'met' if v <= 1.2 else 'NOT met'}"
                if e["workload"] in RSS_GOAL_ROWS
                else "no goal: the interpreter's own RSS dominates at this size"
            )
            print(
                f"{e['workload']}: {cz} peak RSS = {v:.2f}x the output size "
                f"({goal}); growth during the read "
                f"(dRSS) = {e['cuzarr_drss_per_out']:.2f}x"
                + (f"; lowest peer: {bp[0]} {bp[1]:.2f}x" if bp else "")
            )


# Stores replaced during a run are renamed into this folder and deleted only when
# the run ends. ext4 without a journal (as on this machine's disk) will not reuse
# an inode freed in the last 60 s (360 s while its table block is dirty): every
# new file scans past all of them, so deleting the previous store right before a
# timed write billed that write ~100-450 us of kernel time per chunk file (~15 us
# with nothing freed recently), a cost that depended on what the harness had
# just deleted rather than on the library measured.
TRASH = ".trash"
TRASH_MIN_FREE = 4 << 30


def set_aside(path: Path, stores: Path) -> None:
    """Move ``path`` (if it exists) out of the way without freeing its inodes."""
    if not path.exists():
        return
    if shutil.disk_usage(path).free < TRASH_MIN_FREE:
        shutil.rmtree(path, ignore_errors=True)  # short of disk: free it now after all
        print(
            f"    [warning] less than {TRASH_MIN_FREE >> 30} GiB free: {path.name} deleted, not "
            "set aside; the next write pays for the freed inodes (see new_file_us)",
            flush=True,
        )
        return
    trash = stores / TRASH
    trash.mkdir(parents=True, exist_ok=True)
    path.rename(trash / f"{path.name}-{os.getpid()}-{time.monotonic_ns()}")


def creation_probe(data_dir: Path, stores: Path, n: int = 256) -> float:
    """Microseconds of one new empty file in the data directory (median of ``n``);
    the files are set aside, not deleted."""
    d = data_dir / f"probe-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=True)
    ts = []
    for k in range(n):
        t0 = time.perf_counter()
        fd = os.open(d / str(k), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        ts.append(time.perf_counter() - t0)
        os.close(fd)
    set_aside(d, stores)
    return float(np.median(ts)) * 1e6


def find_chunk_dir(stores: Path, order: list[str], suffix: str = "") -> Path | None:
    for c in order:
        d = stores / (c + suffix) / "c"
        if d.is_dir():
            return d
    return None


def in_process(args, source: Path, stores: Path, sizes: dict[str, Any]) -> int:
    """``--in-process``: every contender in this process (core_inprocess.py)."""
    sys.path.insert(0, str(HERE))
    import core_inprocess

    core_inprocess.CHUNKS, core_inprocess.SHARD_INNER = CHUNKS, SHARD_INNER
    res = core_inprocess.run_in_process(
        args.contenders,
        make_adapter,
        source,
        stores,
        tuple(sizes["shard_shape"]),
        args.repeats,
        args.impl_module,
        separate=args.separate,
    )
    if args.json_out:
        meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sizes": sizes}
        args.json_out.write_text(json.dumps({**meta, **res}, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=None, help="big array MiB (default 256)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3")
    ap.add_argument("--tiny-chunks", type=int, default=None, help="default 20,000")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="defaults become 32 MiB, 2,000 tiny chunks, 1 repeat, --isolation contender "
        "(smoke test)",
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
    ap.add_argument(
        "--workloads",
        default="all",
        help=f"comma list of {UNITS} or aliases {list(ALIASES)} (default all)",
    )
    ap.add_argument(
        "--order",
        choices=["fixed", "rotate"],
        default="fixed",
        help="contender order within a repeat: fixed, or rotated by one each repeat",
    )
    ap.add_argument(
        "--isolation",
        choices=["measurement", "contender"],
        default=None,
        help="one fresh process per measurement (default), or one per contender and repeat "
        "running all its workloads in turn (default with --quick: far fewer interpreter starts)",
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
        choices=[w for w in ROW_ORDER],
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
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="all contenders in ONE long-lived process, interleaved (write, read, "
        "shard-write, shard-read; --repeats default 5); see benchmarks/core_inprocess.py",
    )
    ap.add_argument(
        "--separate",
        action="store_true",
        help="with --in-process: each contender in a long-lived process of its own, "
        "driven in the same interleaved order (no library shares the others' process)",
    )
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._worker:
        return worker_main(args._worker)

    defaults = (32, 2000, 1, "contender") if args.quick else (256, 20_000, 3, "measurement")
    if args.in_process and args.repeats is None:
        args.repeats = 5
    if args.size_mib is None:
        args.size_mib = defaults[0]
    if args.tiny_chunks is None:
        args.tiny_chunks = defaults[1]
    if args.repeats is None:
        args.repeats = defaults[2]
    if args.isolation is None:
        args.isolation = defaults[3]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.limits = [c for c in args.limits.split(",") if c]
    try:
        args.workloads = expand_units(args.workloads)
    except ValueError as e:
        ap.error(str(e))
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
        "shard_shape": shard_shape(shape),
        "rows": row_sizes(shape, tshape, args.size_mib),
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
    if args.in_process:
        return in_process(args, source, data_dir / "inprocess", sizes)

    def make_spec(c: str, units: list[str], verify: bool) -> dict[str, Any] | str:
        spec: dict[str, Any] = {
            "contender": c,
            "workloads": units,
            "store": str(stores / c),
            "source": str(source),
            "shape": shape,
            "tiny_shape": tshape,
            "shard_shape": sizes["shard_shape"],
            "impl_module": args.impl_module,
            "cuzarr_mem": args.cuzarr_mem,
            "tiny_store": args.tiny_store,
            "verify": verify,
        }
        if c.startswith("limit:"):
            peers_first = ["zarr", "tensorstore", "zarrs", "zarr-fused", "cuzarr"]
            if "read" in units:
                cd = find_chunk_dir(stores, peers_first)
                if cd is None:
                    return "no chunk files to read (no write succeeded)"
                spec["chunk_dir"] = str(cd)
            if "shard-read" in units:
                sd = find_chunk_dir(stores, peers_first, "_shard")
                if sd is None:
                    return "no shard files to read (no shard-write succeeded)"
                spec["shard_dir"] = str(sd)
        return spec

    def run_one(c: str, units: list[str], verify: bool, tag: str) -> dict[str, Any]:
        spec = make_spec(c, units, verify)
        if isinstance(spec, str):
            return {"ok": False, "contender": c, "workloads": units, "error": spec}
        lib = not c.startswith("limit:")
        # limit:assemble's write also writes files: it gets the same fresh directory
        # and os.sync() as the libraries
        writes = lib or c == ASSEMBLE
        if writes:
            for u, suffix in WRITE_UNITS.items():
                if u in units:
                    set_aside(stores / (c + suffix), stores)
            if any(u in WRITE_UNITS for u in units):
                os.sync()
        t0 = time.perf_counter()
        r = run_worker(spec, args.timeout)
        wall = time.perf_counter() - t0
        r.setdefault("contender", c)
        r["workloads"] = units
        if writes and any(u in WRITE_UNITS for u in units):
            os.sync()  # flush dirty pages so they don't bill the next contender
            if r.get("ok"):
                r.setdefault("stored_bytes", {})
                for u, suffix in WRITE_UNITS.items():
                    st = stores / (c + suffix)
                    if u in units and st.exists() and u not in r.get("errors", {}):
                        r["stored_bytes"][u] = dir_bytes(st)
        if r.get("ok"):
            parts = [f"{k}={v:.3f}s" for k, v in r["times"].items()]
            parts += [f"{k} FAILED: {v[:120]}" for k, v in r.get("errors", {}).items()]
            status = "ok " + " ".join(parts) if not r.get("errors") else " ".join(parts)
        else:
            status = "FAILED " + r.get("error", "")
        print(
            f"[{tag}] {','.join(units)[:24]:<24} {label(c, args.impl_module):<16} "
            f"{status}  (process {wall:.1f}s)",
            flush=True,
        )
        tbs = list(r.get("tracebacks", {}).values()) or (
            [r["traceback"]] if r.get("traceback") else []
        )
        for tb in tbs[:1]:
            print("    " + tb.strip().splitlines()[-1][:200], flush=True)
        return r

    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    load_start = os.getloadavg()

    def cleanup() -> None:
        # set-aside stores never outlive the run, --keep or not (nor a Ctrl-C: atexit)
        shutil.rmtree(stores / TRASH, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(stores, ignore_errors=True)

    atexit.register(cleanup)
    create_us = creation_probe(data_dir, stores)
    print(
        f"new empty file in {data_dir}: {create_us:.0f} us (median of 256; every contender "
        "creates one per chunk; replaced stores are set aside, deleted after the run)"
        + (
            "; high: files deleted there in the last minutes make each new file scan "
            "past their inodes (ext4 without a journal), adding the same cost to every "
            "contender's write"
            if create_us > 40
            else ""
        ),
        flush=True,
    )

    # stores that selected workloads read but no selected workload writes: write them
    # once, untimed and unrecorded
    setup = [
        u
        for u in WRITE_UNITS
        if u not in args.workloads and any(NEEDS.get(w) == u for w in args.workloads)
    ]
    for u in setup:
        for c in args.contenders:
            r = run_one(c, [u], False, "setup")
            if not r.get("ok") or r.get("errors"):
                print(f"    set-up write of {c} failed: its dependent rows will fail too")

    for rep in range(args.repeats):
        verify = rep == 0
        order = list(args.contenders)
        if args.order == "rotate":
            k = rep % max(1, len(order))
            order = order[k:] + order[:k]
        tag = f"rep {rep + 1}/{args.repeats}"
        if args.isolation == "measurement":
            for unit in args.workloads:
                lims = [c for c in args.limits if unit in limit_units(c)]
                for c in order + lims:
                    r = run_one(c, [unit], verify, tag)
                    r["repeat"] = rep
                    results.append(r)
        else:
            for c in order + args.limits:
                units = [
                    u for u in args.workloads if not c.startswith("limit:") or u in limit_units(c)
                ]
                if not units:
                    continue
                r = run_one(c, units, verify, tag)
                r["repeat"] = rep
                results.append(r)

    rows = summarize(results, args, sizes)
    sizes["load"] = (load_start, os.getloadavg())
    print_table(rows, args, sizes)
    summary = compute_summary(rows, args, sizes)
    print_summary(summary, args)
    print(f"total wall time {time.perf_counter() - t_start:.0f}s")

    versions = {}
    for r in results:
        if r.get("ok") and "info" in r:
            versions[r["contender"]] = r["info"]
    rsz = sizes["rows"]
    out = {
        "machine": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": load_start,
            "loadavg_end": sizes["load"][1],
            "new_file_us": create_us,
        },
        "params": {
            "size_mib": args.size_mib,
            "shape": shape,
            "chunks": CHUNKS,
            "tiny_shape": tshape,
            "tiny_chunks": TINY_CHUNKS,
            "tiny_n": sizes["tiny_n"],
            "shard_shape": sizes["shard_shape"],
            "shard_inner_chunks": SHARD_INNER,
            "random_reads": RANDOM_N,
            "random_window": RANDOM_WIN,
            "vindex_points": VINDEX_POINTS,
            "workloads": args.workloads,
            "repeats": args.repeats,
            "impl_module": args.impl_module,
            "cuzarr_mem": args.cuzarr_mem,
            "tiny_store": args.tiny_store,
            "order": args.order,
            "isolation": args.isolation,
            "dtype": DTYPE,
            "codec": ZSTD_V3,
        },
        "versions": versions,
        "results": {
            f"{wl}/{c}": {
                "median_s": row["median"],
                "min_s": row["min"],
                "times_s": row["times"],
                "cpu_s": row["cpu"],
                "gbps": rsz[wl]["bytes"] / row["median"] / 1e9 if row["median"] else None,
                "us_per_item": row["median"] / rsz[wl]["items"] * 1e6 if row["median"] else None,
                "item": rsz[wl]["item"],
                # kept for older readers of the JSON (= us_per_item)
                "us_per_chunk": row["median"] / rsz[wl]["items"] * 1e6 if row["median"] else None,
                "rss_peak_mib": max(row["rss_peak"]) / 2**20 if row["rss_peak"] else None,
                "rss_per_out": rss_ratio(row, rsz[wl]["bytes"]) if wl in FULL_READS else None,
                "verified": row["verified"],
                "stored_bytes": row["stored"],
                "errors": row["errors"],
                "warnings": row["warnings"],
            }
            for (wl, c), row in rows.items()
        },
        "summary": summary,
    }
    line = json.dumps(out, default=str)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    print(JSON_TAG + line)
    cleanup()
    return 0


def _profile_setup(args, source: Path, store: Path, shape, tshape):
    """Prepare one workload of one contender; return (region, check, n_items)."""
    ad = make_adapter(args.profile_contender, args.impl_module, args.cuzarr_mem)
    wl = args.profile
    n = row_sizes(shape, tshape, args.size_mib)[wl]["items"]
    if wl.startswith("tiny-"):
        data = tiny_source(tshape)
        if args.tiny_store == "disk":
            store.parent.mkdir(parents=True, exist_ok=True)
            loc = ad.disk_location(Path(str(store) + "_tiny"))
        else:
            loc = ad.mem_location()
        h = ad.create(loc, data.shape, TINY_CHUNKS)
    else:
        data = np.load(source)
        store.parent.mkdir(parents=True, exist_ok=True)
        if wl.startswith("shard-"):
            loc = ad.disk_location(Path(str(store) + "_shard"))
            h = ad.create(loc, data.shape, SHARD_INNER, shards=shard_shape(shape))
        else:
            loc = ad.disk_location(store)
            h = ad.create(loc, data.shape, CHUNKS)
    if wl.endswith("write"):

        def region():
            ad.write(h, data)

        def check():
            return np.array_equal(to_numpy(ad.read(ad.open(loc))), data)

        return region, check, n

    ad.write(h, data)
    rh = ad.open(loc)
    box: list[Any] = []
    if wl == "shard-random":
        wins = random_windows(shape)
        w = RANDOM_WIN

        def region():
            box[:] = [ad.select(rh, "basic", (slice(y, y + w), slice(x, x + w))) for y, x in wins]

        def check():
            return all(
                np.array_equal(to_numpy(o), data[y : y + w, x : x + w])
                for o, (y, x) in zip(box, wins)
            )

    elif wl in SEL_UNITS:
        kind, sel = selection(wl, shape)

        def region():
            box[:] = [ad.select(rh, kind, sel)]

        def check():
            return _same(box[0], expected_selection(data, kind, sel))

    else:

        def region():
            box[:] = [ad.read(rh)]

        def check():
            return np.array_equal(to_numpy(box[0]), data)

    return region, check, n


def _timed_iters(region, iters: int, prewarm_bytes: int = 0) -> list[float]:
    times = []
    for _ in range(iters):
        if prewarm_bytes:  # as Meter.measure: no first-touch stall in the timing
            warm = np.ones(prewarm_bytes, dtype=np.uint8)
            del warm
        _flush_dirty_pages()
        t0 = time.perf_counter()
        region()
        times.append(time.perf_counter() - t0)
    return times


def _report(args, times: list[float], n: int, ok: bool, note: str) -> None:
    m = statistics.median(times)
    print(
        f"{label(args.profile_contender, args.impl_module)} {args.profile}: "
        f"{len(times)} iteration(s), median {m:.3f}s ({m / n * 1e6:.1f} us/item), "
        f"verified={ok} ({note})",
        flush=True,
    )


def summarize_collapsed(path: Path, top: int = 25) -> None:
    """Print the top frames of a py-spy raw (collapsed stacks) file."""
    own: dict[str, int] = {}
    own_line: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        total += c
        raw = stack.split(";")
        own_line[raw[-1]] = own_line.get(raw[-1], 0) + c
        frames = [f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in raw]
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
    print(f"--- top {top} by own samples, per line (file:line) ---")
    for f, c in sorted(own_line.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")


def profile(args, source: Path, store: Path, shape, tshape) -> int:
    """Profile one workload of one contender (cProfile in-process, or py-spy)."""
    if args.profiler == "py-spy":
        return profile_py_spy(args)
    region, check, n = _profile_setup(args, source, store, shape, tshape)
    warm = int(np.prod(shape)) * 2 * 5 // 4
    if args.profiler == "attach":  # child of profile_py_spy: wait for the sampler
        print("READY", flush=True)
        sys.stdin.readline()
        times = _timed_iters(region, args.profile_iters, warm)
        print("DONE", flush=True)
        sys.stdin.readline()  # py-spy has stopped: the check is not sampled
        _report(args, times, n, check(), "under py-spy")
    else:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        times = _timed_iters(region, args.profile_iters, warm)
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
        shutil.rmtree(Path(str(store) + "_shard"), ignore_errors=True)
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
