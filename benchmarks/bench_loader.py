#!/usr/bin/env python
"""Training-style loading: random batches through cuzarr's loader vs zarr-python.

One store (Zarr v3, written once by cuzarr, untimed) holds

* ``images``  uint8 (N, 64, 64), N = 262,144 (1 GiB), chunks (256, 64, 64) = 1 MiB, zstd 1
* ``labels``  int64 (N,), chunks (256,), zstd 1

Image ``i`` is smooth noise whose first 8 bytes hold ``i`` (little-endian int64),
and ``labels[i] = (i * 7919) % 1000``, so every batch can be checked cheaply:
the ids in the images must be the requested indices (numpy contenders) and the
labels must match the ids (all contenders).

A measurement reads ``--batches`` random batches of 64 samples (shuffled
epoch order, fixed seed) after ``--warmup`` untimed ones, in a fresh child
process (store open and imports untimed). Contenders:

* ``cuzarr``        ``cuzarr.torch.ArrayDataset(images, labels).read_batch(idx)``
                    (numpy, no torch), in ``.venv`` (Python 3.12)
* ``zarr-naive``    zarr-python: the typical per-sample Dataset,
                    ``__getitem__(i) = (z_images[i], z_labels[i])``, the batch
                    assembled with ``np.stack``, in ``.venv`` (Python 3.12)
* ``cuzarr-torch``  ``torch.utils.data.DataLoader(ArrayDataset(...),
                    batch_size=64, shuffle=True)`` (``num_workers`` from
                    ``--num-workers``, default 0), in ``.venv311`` (Python 3.11,
                    torch CPU; zarr 3.4 needs 3.12, so zarr-python cannot run there)

Optional (``--contenders``): ``zarr-oindex`` (zarr-python the smart way: one
``z.oindex[sorted idx]`` per array per batch, then unsorted) and
``cuzarr-prefetch`` (``cuzarr.torch.PrefetchingLoader``, .venv311).

The fair comparison is ``cuzarr`` vs ``zarr-naive``: same interpreter, no torch,
numpy batches. Goal: cuzarr >= 3x zarr-naive in samples/s. Contenders are
interleaved within each repeat; the table shows medians over ``--repeats``.

Usage::

    .venv/bin/python benchmarks/bench_loader.py                 # 1 GiB, 3 repeats (~3 min)
    .venv/bin/python benchmarks/bench_loader.py --quick         # smoke run (~30 s)
    .venv/bin/python benchmarks/bench_loader.py --contenders cuzarr,zarr-naive,zarr-oindex

The store lives under ``.bench_data/loader`` (git-ignored) and is deleted at
the end unless ``--keep``. The last line is ``BENCH_JSON {...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA_DIR = REPO / ".bench_data" / "loader"
PY312 = REPO / ".venv" / "bin" / "python"
PY311 = REPO / ".venv311" / "bin" / "python"
SIDE = 64
MIB = 1 << 20
LABEL_MUL, N_CLASSES = 7919, 1000

CONTENDERS = {
    # name: (interpreter, description)
    "cuzarr": (PY312, "cuzarr ArrayDataset.read_batch (numpy)"),
    "zarr-naive": (PY312, "zarr-python per-sample Dataset + np.stack"),
    "cuzarr-torch": (PY311, "cuzarr ArrayDataset + torch DataLoader"),
    "zarr-oindex": (PY312, "zarr-python oindex per batch (sorted)"),
    "cuzarr-prefetch": (PY311, "cuzarr PrefetchingLoader (torch)"),
}
DEFAULT_CONTENDERS = "cuzarr,zarr-naive,cuzarr-torch"


# --------------------------------------------------------------------------- data


def make_images(rng: np.random.Generator, start: int, n: int) -> np.ndarray:
    """Smooth uint8 images (random walk along rows); bytes 0..7 hold the sample id."""
    steps = rng.integers(-2, 3, size=(n, SIDE, SIDE), dtype=np.int8)
    img = np.cumsum(steps, axis=2, dtype=np.int16)
    img //= 2
    img += 128
    out = img.astype(np.uint8)
    ids = np.arange(start, start + n, dtype="<i8")
    out.reshape(n, -1)[:, :8] = ids.view(np.uint8).reshape(n, 8)
    return out


def write_store(path: Path, n: int, chunk: int, label_chunk: int) -> float:
    import cuzarr

    t0 = time.perf_counter()
    zstd = {"name": "zstd", "configuration": {"level": 1}}
    g = cuzarr.create_group(str(path), overwrite=True)
    images = g.create_array(
        "images", shape=(n, SIDE, SIDE), chunks=(chunk, SIDE, SIDE), dtype="uint8", compressors=zstd
    )
    labels = g.create_array(
        "labels", shape=(n,), chunks=(label_chunk,), dtype="int64", compressors=zstd
    )
    rng = np.random.default_rng(0)
    slab = max(chunk, (64 * MIB // (SIDE * SIDE)) // chunk * chunk)
    for s0 in range(0, n, slab):
        s1 = min(n, s0 + slab)
        images[s0:s1] = make_images(rng, s0, s1 - s0)
    labels[:] = (np.arange(n, dtype=np.int64) * LABEL_MUL) % N_CLASSES
    return time.perf_counter() - t0


def check_batch(x: np.ndarray, y: np.ndarray, idx: np.ndarray | None) -> None:
    """Raise if a batch is not what the indices (or its own ids) say it must be."""
    ids = np.ascontiguousarray(x.reshape(len(x), -1)[:, :8]).view("<i8").ravel()
    if idx is not None and not np.array_equal(ids, idx):
        raise AssertionError(f"wrong samples: got ids {ids[:4]}..., wanted {idx[:4]}...")
    want = (ids * LABEL_MUL) % N_CLASSES
    if not np.array_equal(np.asarray(y).ravel(), want):
        raise AssertionError("labels do not match the images")
    if x.shape[1:] != (SIDE, SIDE) or x.dtype != np.uint8:
        raise AssertionError(f"bad image batch {x.shape} {x.dtype}")


# --------------------------------------------------------------------------- workers


def vm_hwm_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _epoch_batches(n: int, batch: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` batches in shuffled epoch order; a new epoch (a new permutation)
    starts when one runs out, as with a DataLoader (small stores, many batches)."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    while len(out) < count:
        order = rng.permutation(n)
        out += [order[k : k + batch] for k in range(0, n, batch)]
    return out[:count]


def _epochs(loader: Any) -> Any:
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def run_numpy_batches(get_batch: Any, batches: list[np.ndarray], warmup: int) -> dict[str, Any]:
    for idx in batches[:warmup]:
        x, y = get_batch(idx)
        check_batch(x, y, idx)
    timed = batches[warmup:]
    # Timed without checks; every batch is checked afterwards.
    c0, t0 = _cpu(), time.perf_counter()
    results = [get_batch(idx) for idx in timed]
    elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
    for idx, (x, y) in zip(timed, results, strict=True):
        check_batch(x, y, idx)
    return {
        "seconds": elapsed,
        "cpu_s": cpu,
        "samples": sum(len(i) for i in timed),
        "checked": len(timed),
    }


def worker_cuzarr(
    store: str, n_batches: int, warmup: int, batch: int, seed: int, **_: Any
) -> dict[str, Any]:
    import cuzarr
    from cuzarr.torch import ArrayDataset

    g = cuzarr.open_group(store, mode="r")
    ds = ArrayDataset(g["images"], g["labels"])
    batches = _epoch_batches(len(ds), batch, warmup + n_batches, seed)

    def get_batch(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = ds.read_batch(idx)
        return x, y

    return run_numpy_batches(get_batch, batches, warmup) | {"version": cuzarr.__version__}


def worker_zarr_naive(
    store: str, n_batches: int, warmup: int, batch: int, seed: int, **_: Any
) -> dict[str, Any]:
    import zarr

    z_images = zarr.open_array(store, path="images", mode="r")
    z_labels = zarr.open_array(store, path="labels", mode="r")

    class NaiveDataset:
        def __len__(self) -> int:
            return z_images.shape[0]

        def __getitem__(self, i: int) -> tuple[Any, Any]:
            return z_images[i], z_labels[i]

    ds = NaiveDataset()
    batches = _epoch_batches(len(ds), batch, warmup + n_batches, seed)

    def get_batch(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        samples = [ds[int(i)] for i in idx]
        return np.stack([s[0] for s in samples]), np.stack([s[1] for s in samples])

    return run_numpy_batches(get_batch, batches, warmup) | {"version": zarr.__version__}


def worker_zarr_oindex(
    store: str, n_batches: int, warmup: int, batch: int, seed: int, **_: Any
) -> dict[str, Any]:
    import zarr

    z_images = zarr.open_array(store, path="images", mode="r")
    z_labels = zarr.open_array(store, path="labels", mode="r")
    batches = _epoch_batches(z_images.shape[0], batch, warmup + n_batches, seed)

    def get_batch(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(idx)
        inv = np.empty_like(order)
        inv[order] = np.arange(len(idx))
        s = idx[order]
        return z_images.oindex[s][inv], z_labels.oindex[s][inv]

    return run_numpy_batches(get_batch, batches, warmup) | {"version": zarr.__version__}


def _run_torch_loader(loader: Any, n_batches: int, warmup: int) -> dict[str, Any]:
    it = _epochs(loader)
    for _ in range(warmup):
        x, y = next(it)
        check_batch(x.numpy(), y.numpy(), None)
    c0, t0 = _cpu(), time.perf_counter()
    got = [next(it) for _ in range(n_batches)]
    elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
    for x, y in got:
        check_batch(x.numpy(), y.numpy(), None)
    return {
        "seconds": elapsed,
        "cpu_s": cpu,
        "samples": sum(len(x) for x, _ in got),
        "checked": len(got),
    }


def worker_cuzarr_torch(
    store: str, n_batches: int, warmup: int, batch: int, seed: int, num_workers: int = 0, **_: Any
) -> dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader

    import cuzarr
    from cuzarr.torch import ArrayDataset

    g = cuzarr.open_group(store, mode="r")
    ds = ArrayDataset(g["images"], g["labels"])
    loader = DataLoader(
        ds,
        batch_size=batch,
        shuffle=True,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed),
    )
    return _run_torch_loader(loader, n_batches, warmup) | {
        "version": cuzarr.__version__,
        "torch": torch.__version__,
        "cpu_note": "main process only" if num_workers else "",
    }


def worker_cuzarr_prefetch(
    store: str, n_batches: int, warmup: int, batch: int, seed: int, **_: Any
) -> dict[str, Any]:
    import torch

    import cuzarr
    from cuzarr.torch import ArrayDataset, PrefetchingLoader

    g = cuzarr.open_group(store, mode="r")
    ds = ArrayDataset(g["images"], g["labels"])
    loader = PrefetchingLoader(ds, batch_size=batch, shuffle=True, seed=seed)
    return _run_torch_loader(loader, n_batches, warmup) | {
        "version": cuzarr.__version__,
        "torch": torch.__version__,
    }


WORKERS = {
    "cuzarr": worker_cuzarr,
    "zarr-naive": worker_zarr_naive,
    "zarr-oindex": worker_zarr_oindex,
    "cuzarr-torch": worker_cuzarr_torch,
    "cuzarr-prefetch": worker_cuzarr_prefetch,
}


def worker_main(args: argparse.Namespace) -> int:
    try:
        res = WORKERS[args.worker](
            store=str(args.store),
            n_batches=args.batches,
            warmup=args.warmup,
            batch=args.batch_size,
            seed=args.seed,
            num_workers=args.num_workers,
        )
        res["ok"] = True
    except Exception as e:  # reported in the table
        import traceback

        traceback.print_exc()
        res = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    res["python"] = platform.python_version()
    # VmHWM, not ru_maxrss: at exec() Linux carries the parent's peak RSS over
    # into the child's ru_maxrss, VmHWM belongs to this address space only.
    res["maxrss_mib"] = vm_hwm_mib()
    print("WORKER_JSON " + json.dumps(res))
    return 0 if res["ok"] else 1


# --------------------------------------------------------------------------- driver


def run_worker(
    name: str, args: argparse.Namespace, store: Path, seed: int, n_batches: int
) -> dict[str, Any]:
    python = CONTENDERS[name][0]
    if not Path(python).exists():
        return {"ok": False, "error": f"no interpreter {python}"}
    cmd = [
        str(python),
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--store",
        str(store),
        "--batches",
        str(n_batches),
        "--warmup",
        str(args.warmup),
        "--batch-size",
        str(args.batch_size),
        "--seed",
        str(seed),
        "--num-workers",
        str(args.num_workers),
    ]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {args.timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("WORKER_JSON "):
            return json.loads(line[len("WORKER_JSON ") :])
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"ok": False, "error": f"rc={p.returncode}: {tail}"}


def _layout_store(args: argparse.Namespace, chunk: int, n: int) -> Path:
    """The store of one chunk layout: written, or reused where ``--keep`` kept it."""
    store = args.data_dir / f"train_c{chunk}.zarr"
    print(
        f"\n## layout: images chunks ({chunk}, {SIDE}, {SIDE}) = {chunk * SIDE * SIDE / 1024:.0f} KiB"
    )
    meta = store / "images" / "zarr.json"
    reuse = False
    if args.keep and meta.exists():
        m = json.loads(meta.read_text())
        reuse = m["shape"][0] == n and m["chunk_grid"]["configuration"]["chunk_shape"][0] == chunk
    if reuse:
        print(f"[setup] reusing the kept store {store}")
        return store
    if store.exists():
        shutil.rmtree(store)
    tw = write_store(store, n, chunk, args.label_chunk)
    os.sync()
    stored = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    nfiles = sum(1 for f in store.rglob("*") if f.is_file())
    print(f"[setup] wrote the store in {tw:.1f} s: {stored / MIB:.0f} MiB in {nfiles} files")
    return store


def _measure(args: argparse.Namespace, names: list[str], store: Path) -> dict[str, list[dict[str, Any]]]:
    """Every contender ``args.repeats`` times, interleaved (order rotated per repeat)."""
    zarr_batches = args.zarr_batches or args.batches
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in names}
    for rep in range(args.repeats):
        order = names[rep % len(names) :] + names[: rep % len(names)]  # rotate
        for name in order:
            nb = zarr_batches if name.startswith("zarr") else args.batches
            r = run_worker(name, args, store, args.seed + rep, nb)
            results[name].append(r)
            if r.get("ok"):
                sps = r["samples"] / r["seconds"]
                print(
                    f"[#{rep + 1} {name:<15}] {r['samples']:6d} samples in {r['seconds']:6.2f} s = "
                    f"{sps:8.0f} samples/s (CPU {r['cpu_s']:.2f} s, peak RSS {r['maxrss_mib']:.0f} MiB), "
                    f"{r['checked']} batches checked",
                    flush=True,
                )
            else:
                print(f"[#{rep + 1} {name:<15}] FAILED: {r.get('error')}", flush=True)
    return results


def _summarize(args: argparse.Namespace, names: list[str],
               results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per contender, and each against zarr-python's naive Dataset."""
    summary: dict[str, Any] = {}
    for name in names:
        ok = [r for r in results[name] if r.get("ok")]
        if len(ok) < len(results[name]) or not ok:
            summary[name] = {
                "ok": False,
                "errors": [r.get("error") for r in results[name] if not r.get("ok")],
            }
            if not ok:
                continue
        rates = [r["samples"] / r["seconds"] for r in ok]
        summary[name] = {
            "ok": len(ok) == len(results[name]),
            "samples_per_s": statistics.median(rates),
            "rates": rates,
            "ms_per_batch": args.batch_size / statistics.median(rates) * 1e3,
            "cpu_ms_per_batch": statistics.median(
                r["cpu_s"] / r["samples"] * args.batch_size * 1e3 for r in ok
            ),
            "python": ok[0].get("python"),
        }
    base = summary.get("zarr-naive", {})
    for s in summary.values():
        if "samples_per_s" in s and "samples_per_s" in base:
            s["x_naive"] = s["samples_per_s"] / base["samples_per_s"]
            s["x_naive_cpu"] = base["cpu_ms_per_batch"] / s["cpu_ms_per_batch"]
    return summary


def _print_summary(names: list[str], summary: dict[str, Any]) -> None:
    print()
    print(
        f"{'contender':<16} {'samples/s':>10} {'min..max':>17} {'ms/batch':>9} {'CPU ms/b':>9} "
        f"{'x naive':>8} {'xCPU':>6}  what"
    )
    for name in names:
        s = summary[name]
        if "samples_per_s" not in s:
            print(f"{name:<16} FAILED: {s['errors'][:1]}")
            continue
        ratio = cratio = "-"
        if "x_naive" in s:
            ratio, cratio = f"{s['x_naive']:.2f}x", f"{s['x_naive_cpu']:.2f}x"
        print(
            f"{name:<16} {s['samples_per_s']:10.0f} {min(s['rates']):8.0f}..{max(s['rates']):<7.0f} "
            f"{s['ms_per_batch']:9.1f} {s['cpu_ms_per_batch']:9.1f} {ratio:>8} {cratio:>6}  "
            f"{CONTENDERS[name][1]} (py {s['python']})"
        )


def _verdict(args: argparse.Namespace, chunk: int, summary: dict[str, Any]) -> bool | None:
    """cuzarr against the goal (None: a contender failed, no ratio)."""
    if "x_naive" not in summary.get("cuzarr", {}):
        print(f"FAIL [chunks of {chunk}]: no cuzarr / zarr-naive ratio (a contender failed)")
        return None
    x = summary["cuzarr"]["x_naive"]
    verdict = x >= args.goal
    print(
        f"{'PASS' if verdict else 'FAIL'} [chunks of {chunk}]: cuzarr ArrayDataset.read_batch is {x:.2f}x "
        f"zarr-python's naive per-sample Dataset in samples/s (goal >= {args.goal:g}x; same "
        f"interpreter, no torch; by CPU time {summary['cuzarr']['x_naive_cpu']:.2f}x)"
    )
    if "x_naive" in summary.get("cuzarr-torch", {}):
        xt = summary["cuzarr-torch"]["x_naive"]
        print(
            f"{'PASS' if xt >= args.goal else 'FAIL'} [chunks of {chunk}]: cuzarr through torch "
            f"DataLoader (py 3.11) is {xt:.2f}x the naive zarr-python Dataset (py 3.12, numpy batches)"
        )
    return verdict


def run_layout(args: argparse.Namespace, names: list[str], chunk: int, n: int) -> dict[str, Any]:
    """Write (or reuse) the store of one chunk layout and measure every contender."""
    store = _layout_store(args, chunk, n)
    results = _measure(args, names, store)
    summary = _summarize(args, names, results)
    _print_summary(names, summary)
    verdict = _verdict(args, chunk, summary)
    return {"chunk": chunk, "results": results, "summary": summary, "pass": verdict}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size-mib", type=int, default=1024, help="size of the images array")
    p.add_argument(
        "--chunk",
        default="256,16",
        help="samples per images chunk; a comma list (e.g. 256,16) measures each layout",
    )
    p.add_argument("--label-chunk", type=int, default=256, help="samples per labels chunk")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=100, help="timed batches per cuzarr measurement")
    p.add_argument(
        "--zarr-batches",
        type=int,
        default=50,
        help="timed batches per zarr-* measurement (0: --batches); zarr-naive's rate is steady",
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--contenders", default=DEFAULT_CONTENDERS, help=f"comma list of {', '.join(CONTENDERS)}"
    )
    p.add_argument(
        "--num-workers", type=int, default=0, help="DataLoader num_workers (cuzarr-torch)"
    )
    p.add_argument("--goal", type=float, default=3.0, help="cuzarr / zarr-naive samples/s goal")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0, help="per measurement, seconds")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--keep", action="store_true", help="keep the stores (and reuse kept ones)")
    p.add_argument("--quick", action="store_true", help="128 MiB, 30 (zarr: 20) batches, 1 repeat")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.quick:
        args.size_mib = min(args.size_mib, 128)
        args.batches = min(args.batches, 30)
        args.zarr_batches = min(args.zarr_batches or args.batches, 20)
        args.repeats = 1
    names = [c.strip() for c in args.contenders.split(",") if c.strip()]
    for c in names:
        if c not in CONTENDERS:
            p.error(f"unknown contender {c!r}")
    chunks = [int(c) for c in str(args.chunk).split(",") if c.strip()]

    import cuzarr

    n = args.size_mib * MIB // (SIDE * SIDE)
    step = max(chunks + [args.label_chunk])
    n -= n % step if n >= step else 0
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(
        f"# cuzarr {cuzarr.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print(f"# uptime: {uptime}")
    print(
        f"# images uint8 ({n}, {SIDE}, {SIDE}) = {n * SIDE * SIDE / MIB:.0f} MiB; labels int64 "
        f"({n},), chunks ({args.label_chunk},); zstd 1, Zarr v3 written by cuzarr"
    )
    print(
        f"# {args.batches} timed batches of {args.batch_size} per cuzarr measurement, "
        f"{args.zarr_batches or args.batches} per zarr one, {args.warmup} warm-up, {args.repeats} "
        f"repeats; goal cuzarr / zarr-naive >= {args.goal:g}x"
    )
    layouts: list[dict[str, Any]] = []
    if not args.keep and args.data_dir.exists():
        shutil.rmtree(args.data_dir)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        for chunk in chunks:
            layouts.append(run_layout(args, names, chunk, n))
        uptime_end = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"\n# uptime at the end: {uptime_end}")
        verdict = bool(layouts) and all(lay["pass"] for lay in layouts)
        out = {
            "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "n": n,
            "uptime": [uptime, uptime_end],
            "layouts": layouts,
            "pass": verdict,
        }
        if args.json_out:
            args.json_out.write_text(json.dumps(out, indent=1))
        print("BENCH_JSON " + json.dumps(out))
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
