"""Small reads from local files: cuzarr against tensorstore and zarr-python.

Arrays of float32 rows, one chunk per row (1 KiB and 64 KiB chunks, zstd),
written once by cuzarr under ``--dir``; each read is ``a[i:i + k]`` (``k``
consecutive chunks) or ``a.oindex[idx]`` (64 random rows), repeated, the
contenders interleaved round by round. Prints the median wall and CPU time
per read (all threads) and each peer's ratio to cuzarr (>1: cuzarr faster).
Such reads are a data loader's or a notebook's: too small for the worker
pool's parallel decoding to pay for its thread hops (``engine.small_read``).

    python benchmarks/bench_small_reads.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROWS = 1024


def _array(root: Path, kib: int) -> str:
    import cuzarr

    path = root / f"rows-{kib}k"
    if not (path / "zarr.json").exists():
        cols = kib * 256
        a = cuzarr.create_array(str(path), shape=(ROWS, cols), chunks=(1, cols),
                                dtype="float32", overwrite=True)
        rng = np.random.default_rng(0)
        a[...] = np.cumsum(rng.standard_normal((ROWS, cols), dtype=np.float32), axis=1)
    return str(path)


def _contenders(path: str) -> dict[str, Any]:
    import cuzarr

    out: dict[str, Any] = {"cuzarr": cuzarr.open_array(path, mode="r")}
    try:
        import tensorstore as ts

        out["tensorstore"] = ts.open({"driver": "zarr3",
                                      "kvstore": {"driver": "file", "path": path}}).result()
    except ImportError:
        pass
    try:
        import zarr

        out["zarr"] = zarr.open_array(path, mode="r")
    except ImportError:
        pass
    return out


def _reader(name: str, a: Any, kind: str, k: int, rng: np.random.Generator) -> Callable[[], Any]:
    if kind == "rows":
        start = int(rng.integers(0, ROWS - k))
        if name == "tensorstore":
            return lambda: a[start : start + k].read().result()
        return lambda: a[start : start + k]
    idx = np.sort(rng.permutation(ROWS)[:k])  # (sorted: zarr-python's oindex wants no order)
    if name == "tensorstore":
        return lambda: a[idx].read().result()
    return lambda: a.oindex[idx]


def _time(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    fn()
    w, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - w) / n * 1e3, (time.process_time() - c) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/cuzarr-small-reads")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    cases = [(1, "rows", 16), (1, "rows", 64), (1, "rows", 256), (1, "oindex", 64),
             (64, "rows", 16), (64, "rows", 64), (64, "oindex", 64)]
    rows = []
    for kib, kind, k in cases:
        arrays = _contenders(_array(root, kib))
        n = max(3, 2000 // (k * max(1, kib // 8)))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in arrays}
        rng = np.random.default_rng(1)
        for r in range(args.rounds):
            names = list(arrays) if r % 2 == 0 else list(reversed(arrays))
            for name in names:
                times[name].append(_time(_reader(name, arrays[name], kind, k, rng), n))
        med = {name: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v))
               for name, v in times.items()}
        base = med["cuzarr"][0]
        row = {"chunk_kib": kib, "read": kind, "chunks": k,
               **{f"{name}_wall_ms": m[0] for name, m in med.items()},
               **{f"{name}_cpu_ms": m[1] for name, m in med.items()}}
        rows.append(row)
        print(f"{kib:3d} KiB chunks, {kind:6s} x{k:4d}: " + "  ".join(
            f"{name} {m[0]:7.2f} ms wall {m[1]:7.2f} CPU" + ("" if name == "cuzarr" else
                                                               f" (x{m[0] / base:.2f})")
            for name, m in med.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
