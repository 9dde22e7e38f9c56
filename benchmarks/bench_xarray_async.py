"""xarray's async loading over HTTP with latency: ``Dataset.load_async()`` against
``Dataset.load()``, for engine="cuzarr" and engine="zarr" (zarr-python).

A dataset of ``--vars`` (default 20) float32 variables, each (``--rows``, default 256,
x 256: 256 KiB) in
``--chunks-per-var`` chunks along its rows, is written once with ``to_zarr``
(Zarr v3, consolidated metadata) and served from 127.0.0.1 by the minimal HTTP
server of ``bench_http.py``, which delays every response by ``--latency`` seconds
(default 0.02) on a timer, as network latency would, costing no CPU.

Four contenders: ``cuzarr load``, ``cuzarr load_async``, ``zarr load``, ``zarr
load_async``. Each run opens the dataset (untimed; a fresh open every run, so no
data is cached between runs) and times the load of every variable; the async
loads of cuzarr run in ``asyncio.run``, zarr's on zarr-python's own event loop
(its HTTP store cannot be read from another); what is timed is the awaited
``load_async()``.
Runs are interleaved, one of each contender per round in a rotating order, and
the table shows medians over ``--repeat`` rounds. Every result is checked against
the data written.

The goal (issue 31): cuzarr's ``load_async`` at least as fast as zarr's, and at
least 5x faster than cuzarr's own ``load``, which reads variable after variable.

    python benchmarks/bench_xarray_async.py [--vars 20] [--latency 0.02] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

import numpy as np
import xarray as xr

import cuzarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the benchmarks' shared HTTP server (bench_http.py, beside this file)
from bench_http import _serve


def _dataset(n_vars: int, rows: int) -> xr.Dataset:
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {
            f"v{i:02d}": (("y", "x"), rng.standard_normal((rows, 256)).astype("f4"))
            for i in range(n_vars)
        }
    )


def _contenders(url: str, expected: xr.Dataset) -> dict[str, Callable[[], float]]:
    def opened(engine: str) -> xr.Dataset:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr-python: consolidated v3 metadata
            return xr.open_dataset(url, engine=engine, consolidated=True)

    def check(ds: xr.Dataset) -> None:
        for name, var in expected.data_vars.items():
            if not np.array_equal(ds[name].values, var.values):
                raise SystemExit(f"wrong values in {name}")

    def sync_load(engine: str) -> float:
        ds = opened(engine)
        t0 = time.perf_counter()
        ds.load()
        t = time.perf_counter() - t0
        check(ds)
        return t

    def async_load(engine: str) -> float:
        ds = opened(engine)

        async def go() -> float:
            t0 = time.perf_counter()
            await ds.load_async()
            return time.perf_counter() - t0

        if engine == "zarr":
            # zarr-python's HTTP store is bound to zarr's own event loop (its
            # aiohttp session): awaited on another loop, the reads fail ("Timeout
            # context manager should be used inside a task"), so zarr's load_async
            # is awaited on zarr's loop
            from zarr.core.sync import sync as zarr_sync

            t = zarr_sync(go())
        else:
            t = asyncio.run(go())  # any loop: cuzarr runs the reads on its own
        check(ds)
        return t

    return {
        "cuzarr load": lambda: sync_load("cuzarr"),
        "cuzarr load_async": lambda: async_load("cuzarr"),
        "zarr load": lambda: sync_load("zarr"),
        "zarr load_async": lambda: async_load("zarr"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vars", type=int, default=20)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--chunks-per-var", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    import zarr

    tmp = tempfile.mkdtemp()
    expected = _dataset(args.vars, args.rows)
    chunk_rows = -(-args.rows // args.chunks_per_var)
    enc = {k: {"chunks": (chunk_rows, 256)} for k in expected.data_vars}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected.to_zarr(f"{tmp}/ds.zarr", zarr_format=3, encoding=enc, consolidated=True)

    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(tmp, args.latency, port_q), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port_q.get(timeout=60)}/ds.zarr"

    contenders = _contenders(url, expected)
    names = list(contenders)
    for fn in contenders.values():  # untimed warm-up: imports, sessions, thread pools
        fn()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            times[name].append(contenders[name]())
    server.terminate()
    server.join()

    med = {name: statistics.median(ts) for name, ts in times.items()}
    n_chunks = args.vars * args.chunks_per_var
    print(
        f"{args.vars} variables x {args.chunks_per_var} chunks ({n_chunks} chunk requests), "
        f"latency {args.latency * 1000:g} ms, repeat {args.repeat}; cuzarr {cuzarr.__version__}, "
        f"zarr {zarr.__version__}, xarray {xr.__version__}, "
        f"async.concurrency {cuzarr.config.get('async.concurrency')}"
    )
    print(f"{'contender':<20} {'median s':>9} {'min s':>8} {'max s':>8}")
    for name in names:
        ts = times[name]
        print(f"{name:<20} {med[name]:>9.3f} {min(ts):>8.3f} {max(ts):>8.3f}")
    own = med["cuzarr load"] / med["cuzarr load_async"]
    vs_zarr = med["zarr load_async"] / med["cuzarr load_async"]
    print(f"cuzarr load / cuzarr load_async = {own:.1f}x (goal >= 5)")
    print(f"zarr load_async / cuzarr load_async = {vs_zarr:.2f}x (goal >= 1)")


if __name__ == "__main__":
    main()
