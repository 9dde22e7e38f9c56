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
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from core_adapters import make_adapter
from core_common import (
    ALIASES,
    CHUNKS,
    DEFAULT_DATA_DIR,
    HERE,
    LIB_CONTENDERS,
    LIMIT_CONTENDERS,
    RANDOM_WIN,
    RESULT_TAG,
    ROW_ORDER,
    SEL_UNITS,
    SHARD_INNER,
    TINY_CHUNKS,
    UNITS,
    big_shape,
    expand_units,
    expected_selection,
    one_shard_shape,
    random_windows,
    rows_of,
    selection,
    shard_shape,
    smooth_noise,
    tiny_shape,
    tiny_source,
)
from core_limits import _codec_factories, _limit_unit
from core_measure import Meter, _same
from core_profile import profile
from core_report import (
    row_sizes,
)
from core_runner import Run, set_aside


def _random_reads(ad: Any, h: Any, shape: tuple[int, ...], meter: Meter, res: dict,
                  source: Any = None) -> None:
    """``shard-random``: RANDOM_N small windows read one call each through ``h``;
    checked against ``source()`` where given."""
    wins = random_windows(shape)
    w = RANDOM_WIN
    outs: list[Any] = [None] * len(wins)
    select = ad.select
    with meter.measure("shard-random"):
        for k, (y, x) in enumerate(wins):
            outs[k] = select(h, "basic", (slice(y, y + w), slice(x, x + w)))
    if source is not None:
        src = source()
        res["verified"]["shard-random"] = all(
            _same(o, np.asarray(src[y : y + w, x : x + w])) for o, (y, x) in zip(outs, wins)
        )


def _lib_unit(ad: Any, unit: str, spec: dict[str, Any], meter: Meter, res: dict) -> None:
    """One workload (``unit``) of a library contender, measured by ``meter``."""
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
        _random_reads(ad, timed_open(ad.disk_location(sharded)), shape, meter, res,
                      src_mmap if verify else None)
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


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _add_run_options(ap)
    _add_profile_options(ap)
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    return ap


def _add_run_options(ap: argparse.ArgumentParser) -> None:
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


def _add_profile_options(ap: argparse.ArgumentParser) -> None:
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


def _settle(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The defaults left open (``--quick``'s or the full run's), and the contender,
    limit and workload lists parsed and checked."""
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



def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    shape = big_shape(args.size_mib)
    tshape = tiny_shape(args.tiny_chunks)
    return {
        "shape": shape,
        "big_bytes": int(np.prod(shape)) * 2,
        "big_n": -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1]),
        "tiny_shape": tshape,
        "tiny_bytes": int(np.prod(tshape)) * 2,
        "tiny_n": (tshape[0] // TINY_CHUNKS[0]) * (tshape[1] // TINY_CHUNKS[1]),
        "shard_shape": shard_shape(shape),
        "rows": row_sizes(shape, tshape, args.size_mib),
    }



def _source(data_dir: Path, shape: tuple[int, int]) -> Path:
    """The source array of ``shape`` in ``data_dir`` (generated once, then reused)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir / f"source_{shape[0]}x{shape[1]}_u16.npy"
    if not source.exists():
        t0 = time.perf_counter()
        tmp = source.with_suffix(".tmp.npy")
        np.save(tmp, smooth_noise(shape, seed=0))
        tmp.rename(source)
        print(f"generated {source} in {time.perf_counter() - t0:.1f}s", flush=True)
    return source


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args._worker:
        return worker_main(args._worker)
    _settle(ap, args)
    sizes = _sizes(args)
    source = _source(args.data_dir, sizes["shape"])
    stores = args.data_dir / "stores"
    if args.profile:
        return profile(args, source, stores / args.profile_contender, sizes["shape"],
                       sizes["tiny_shape"])
    if args.in_process:
        return in_process(args, source, args.data_dir / "inprocess", sizes)
    return Run(args, source, stores, sizes).all()


if __name__ == "__main__":
    sys.exit(main())
