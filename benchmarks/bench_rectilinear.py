#!/usr/bin/env python
"""Rectilinear (variable-size) chunks cost no more to read than regular ones.

Two in-memory Zarr v3 arrays hold the same uint16 data (zstd level 1) with the
same number of chunks: one on a regular grid, one on a rectilinear grid whose
edges vary around the same mean (half to one and a half times the regular
size). Timed, median of ``--repeats`` runs, interleaved:

* ``full``     ``a[...]``
* ``strided``  ``a[::7, ::13]`` (touches every chunk, non-aligned steps)
* ``rows``     ``a[1000:3000:3, 100:-100]``
* ``oindex``   ``a.oindex[i, j]``, sorted random int arrays
* ``vindex``   ``a.vindex[i, j]``, 50,000 random points
* ``tiny``     full read of a 16,384-chunk array (per-chunk overhead)

Prints one row per workload and the ratio rectilinear / regular; the goal is
<= 1.10. Usage::

    python benchmarks/bench_rectilinear.py [--repeats 7] [--side 4096] [--chunks 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import cuzarr


def varied_edges(rng: np.random.Generator, size: int, n: int) -> list[int]:
    """``n`` edges summing to ``size``, each within [0.5, 1.5] x the mean."""
    mean = size / n
    w = rng.uniform(0.5, 1.5, n)
    exact = w / w.sum() * size
    edges = np.maximum(1, np.floor(exact)).astype(int)
    # Hand the rounding remainder to the edges that lost the most (largest remainder).
    short = size - int(edges.sum())
    for i in np.argsort(edges - exact)[: max(0, short)]:
        edges[i] += 1
    assert edges.sum() == size and len(edges) == n and edges.max() <= 2 * mean + 1
    return edges.tolist()


def make_pair(rng, side: int, nchunks: int):
    data = (np.cumsum(rng.integers(-3, 4, size=(side, side)), axis=1) // 2).astype("u2")
    c = side // nchunks
    reg = cuzarr.create_array(
        {}, shape=data.shape, dtype="u2", chunks=(c, c), compressors={"name": "zstd", "configuration": {"level": 1}}
    )
    rect = cuzarr.create_array(
        {},
        shape=data.shape,
        dtype="u2",
        chunks=[varied_edges(rng, side, nchunks), varied_edges(rng, side, nchunks)],
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    reg[...] = data
    rect[...] = data
    assert reg.nchunks == rect.nchunks
    return data, reg, rect


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--side", type=int, default=4096)
    ap.add_argument("--chunks", type=int, default=64, help="chunks per dimension")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    data, reg, rect = make_pair(rng, args.side, args.chunks)
    side = args.side
    ii = np.sort(rng.choice(side, size=side // 4, replace=False))
    jj = np.sort(rng.choice(side, size=side // 4, replace=False))
    pi = rng.integers(0, side, 50_000)
    pj = rng.integers(0, side, 50_000)
    tdata, treg, trect = make_pair(rng, 1024, 128)  # 16,384 chunks of ~8x8

    workloads = {
        "full": (lambda a: a[...], (reg, rect), data),
        "strided": (lambda a: a[::7, ::13], (reg, rect), data[::7, ::13]),
        "rows": (lambda a: a[1000:3000:3, 100:-100], (reg, rect), data[1000:3000:3, 100:-100]),
        "oindex": (lambda a: a.oindex[ii, jj], (reg, rect), data[np.ix_(ii, jj)]),
        "vindex": (lambda a: a.vindex[pi, pj], (reg, rect), data[pi, pj]),
        "tiny": (lambda a: a[...], (treg, trect), tdata),
    }
    print(
        f"rectilinear vs regular read, {side}x{side} uint16, {args.chunks}x{args.chunks} chunks "
        f"(tiny: 1024x1024, 128x128 chunks), median of {args.repeats}"
    )
    print(f"{'workload':10} {'regular ms':>11} {'rectilinear ms':>15} {'ratio':>7}")
    ratios = []
    for name, (fn, (a, b), want) in workloads.items():
        np.testing.assert_array_equal(fn(a), want)
        np.testing.assert_array_equal(fn(b), want)
        ta, tb = [], []
        for _ in range(args.repeats):
            for arr, ts in ((a, ta), (b, tb)):
                t0 = time.perf_counter()
                fn(arr)
                ts.append(time.perf_counter() - t0)
        ma, mb = statistics.median(ta), statistics.median(tb)
        ratios.append(mb / ma)
        print(f"{name:10} {ma * 1e3:11.2f} {mb * 1e3:15.2f} {mb / ma:7.3f}")
    print(f"{'geomean':10} {'':11} {'':15} {float(np.exp(np.mean(np.log(ratios)))):7.3f}")


if __name__ == "__main__":
    main()
