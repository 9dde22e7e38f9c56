#!/usr/bin/env python
"""Rectilinear (variable-size) chunks cost no more to read than regular ones.

Two in-memory Zarr v3 arrays hold the same uint16 data (zstd level 1) with the
same number of chunks: one on a regular grid, one on a rectilinear grid whose
edges vary around the same mean (half to one and a half times the regular
size). Timed: the best of ``--repeats`` runs, the two arrays interleaved (the
best run, not the median, because on a shared machine other processes only
ever add time):

* ``full``     ``a[...]``
* ``strided``  ``a[::7, ::13]`` (touches every chunk, non-aligned steps)
* ``rows``     ``a[1000:3000:3, 100:-100]``
* ``oindex``   ``a.oindex[i, j]``, sorted random int arrays
* ``vindex``   ``a.vindex[i, j]``, 50,000 random points
* ``tiny``     full read of a 16,384-chunk array (per-chunk overhead)

Prints wall and process CPU times per workload and the ratio rectilinear /
regular (of CPU time by default: on a shared machine, wall time mostly measures
the neighbours); the goal is <= 1.10. By default the codec pool has one worker
(``--workers``), which measures the work itself rather than thread contention. Usage::

    python benchmarks/bench_rectilinear.py [--repeats 9] [--side 4096] [--chunks 64]
"""

from __future__ import annotations

import argparse
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
        {},
        shape=data.shape,
        dtype="u2",
        chunks=(c, c),
        compressors={"name": "zstd", "configuration": {"level": 1}},
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
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--side", type=int, default=4096)
    ap.add_argument("--chunks", type=int, default=64, help="chunks per dimension")
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="which time the ratio uses: process CPU time (default; robust on a busy "
        "machine) or wall time",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="threading.max_workers (default 1: the CPU-time ratio is then free of "
        "thread contention; 0 keeps the configured default)",
    )
    args = ap.parse_args()
    if args.workers:
        cuzarr.config.set({"threading.max_workers": args.workers})
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
        f"(tiny: 1024x1024, 128x128 chunks), best of {args.repeats}, "
        f"threading.max_workers={cuzarr.config.get('threading.max_workers')}"
    )
    print(
        f"{'workload':10} {'regular ms':>11} {'rectilinear ms':>15} {'reg cpu ms':>11} "
        f"{'rect cpu ms':>15} {'ratio':>7}"
    )
    ratios = []
    for name, (fn, (a, b), want) in workloads.items():
        np.testing.assert_array_equal(fn(a), want)
        np.testing.assert_array_equal(fn(b), want)
        ta, tb, ca, cb = [], [], [], []
        for r in range(args.repeats):
            pairs = ((a, ta, ca), (b, tb, cb))
            for arr, ts, cs in pairs if r % 2 else pairs[::-1]:  # alternate who goes first
                t0, c0 = time.perf_counter(), time.process_time()
                fn(arr)
                ts.append(time.perf_counter() - t0)
                cs.append(time.process_time() - c0)
        ma, mb = min(ta), min(tb)
        ratio = min(cb) / min(ca) if args.clock == "cpu" else mb / ma
        ratios.append(ratio)
        print(
            f"{name:10} {ma * 1e3:11.2f} {mb * 1e3:15.2f} {min(ca) * 1e3:11.2f} "
            f"{min(cb) * 1e3:15.2f} {ratio:7.3f}"
        )
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"{'geomean':10} {'':11} {'':15} {'':11} {'':15} {geo:7.3f}")
    print(f"worst ratio {max(ratios):.3f} ({args.clock} time; goal <= 1.10)")


if __name__ == "__main__":
    main()
