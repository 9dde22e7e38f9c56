#!/usr/bin/env python
"""``members()`` of a group with consolidated metadata: cuzarr vs zarr-python.

The store is a local directory holding one root ``zarr.json`` whose inline
consolidated metadata lists N members (``--sizes``, default 10,000 and 100,000)
of one kind (``--kinds``): ``groups`` (N empty member groups), ``arrays`` (N
small float32 arrays) or ``nested`` (N/2 groups with one array each, listed with
``max_depth=None``). Each library opens the group once (untimed, consolidated
metadata used); then, in each of ``--rounds`` rounds, each contender times one
``members()`` call, contenders interleaved and their order alternated, with the
garbage collector run before and off during the call. The table gives the
median seconds per call and ``xzarr``: zarr-python's median divided by cuzarr's
(above 1: cuzarr is faster). Both answers are checked to list the same names.

Usage::

    python benchmarks/bench_members.py                       # ~1-2 min
    python benchmarks/bench_members.py --sizes 8000 --kinds groups --rounds 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
import warnings

import zarr

import cuzarr

_ARRAY = {
    "shape": [4],
    "data_type": "float32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0.0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "attributes": {},
    "zarr_format": 3,
    "node_type": "array",
    "storage_transformers": [],
}
_GROUP = {"attributes": {}, "zarr_format": 3, "node_type": "group"}


def write_store(path: str, n: int, kind: str) -> None:
    """A root ``zarr.json`` with ``n`` consolidated members of ``kind``."""
    meta: dict[str, object] = {}
    if kind == "groups":
        meta = {f"m{i}": _GROUP for i in range(n)}
    elif kind == "arrays":
        meta = {f"m{i}": _ARRAY for i in range(n)}
    else:
        for i in range(n // 2):
            meta[f"m{i}"] = _GROUP
            meta[f"m{i}/a"] = _ARRAY
    doc = {
        "attributes": {},
        "zarr_format": 3,
        "node_type": "group",
        "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": meta},
    }
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(doc, f)


def timed(fn) -> tuple[float, object]:
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out
    finally:
        gc.enable()


def run_case(path: str, kind: str, rounds: int) -> dict[str, float]:
    depth = None if kind == "nested" else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        groups = {
            "cuzarr": cuzarr.open_group(path, mode="r", use_consolidated=True),
            "zarr": zarr.open_group(path, mode="r", use_consolidated=True),
        }
    times: dict[str, list[float]] = {k: [] for k in groups}
    names: dict[str, list[str]] = {}
    for r in range(rounds):
        order = list(groups) if r % 2 == 0 else list(reversed(groups))
        for name in order:
            g = groups[name]
            dt, members = timed(lambda g=g: g.members(max_depth=depth))
            times[name].append(dt)
            names[name] = sorted(k for k, _ in members)  # type: ignore[attr-defined]
    if names["cuzarr"] != names["zarr"]:
        raise SystemExit(f"!! the members differ ({kind})")
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--kinds", default="groups,arrays,nested")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    print(f"{'members':>9} {'kind':>7} {'cuzarr s':>10} {'zarr s':>10} {'xzarr':>7}")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            for kind in args.kinds.split(","):
                path = os.path.join(tmp, f"{kind}{n}.zarr")
                write_store(path, n, kind)
                med = run_case(path, kind, args.rounds)
                print(
                    f"{n:>9,} {kind:>7} {med['cuzarr']:>10.3f} {med['zarr']:>10.3f}"
                    f" {med['zarr'] / med['cuzarr']:>7.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
