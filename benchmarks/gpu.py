"""GPU read and write benchmark (needs a CUDA device, CuPy, nvCOMP; optionally zarr-python).

Writes ``--gib`` (default 4) of float32 in ~1 MiB chunks per codec (zstd,
numcodecs LZ4, blosc-lz4 with byte shuffle), plain and sharded (64 chunks per
shard), then reads it all into device memory with:

* ``cuzarr gpu``: ``cuzarr.config.enable_gpu()`` (nvCOMP decode + batched scatter);
* ``cuzarr gpu training``: a training load: every row (a 1 MiB sample) once,
  in random batches of ``--batch`` (64) samples, one planned read per batch
  (``cuzarr.torch.ArrayDataset(a, device="cuda").read_batch(indices, "gpu")``;
  no torch needed), reported as a fraction of the plain read (goal: >= 0.7);
* ``cuzarr cpu+copy``: cuzarr's CPU decode, then one ``cupy.asarray`` copy;
* ``zarr gpu``: zarr-python with ``zarr.config.enable_gpu()``;
* ``nvcomp ceiling`` and ``upload+decode ceiling`` (``gpu_ceilings.py``): nvCOMP's
  batched decode of the same raw streams already in device memory, and a raw
  pipelined loop of pinned upload plus decode of them.

The first contender also runs alone ``--repeats`` times after the interleaved
runs: its solo median against its interleaved one (goal: within 20%).

Then writes the same data back from device memory (``--writes``, default on)
into a fresh array of the same codec and layout:

* ``cuzarr gpu write``: ``a[...] = cupy_array`` (device gather, fill check and
  nvCOMP compression where the codec allows; sharded arrays: whole shards'
  inner chunks likewise, the shards assembled on the host);
* ``cuzarr cpu write``: one ``cupy.asnumpy`` copy, then cuzarr's host write;
* ``zarr gpu write``: zarr-python with ``zarr.config.enable_gpu()``;
* ``encode ceiling``: nvCOMP's batched encode of the same chunks already in
  device memory, in the units the device write compresses (blosc: its blocks;
  nvCOMP has no blosc encoder); the device write as a fraction of it (goal: >= 0.5).

Medians of ``--repeats`` runs, contenders interleaved. Prints one line per
(codec, layout, contender): GiB/s of decoded data, and the ratio to the first
contender; ``--json PATH`` writes every time, median, ratio and ceiling, with
the date, commit, host, CPUs, library versions and device (``gpu_report.py``),
after each (codec, layout), so a run cut short leaves what it measured.

    python benchmarks/gpu.py --gib 4 --dir /tmp/cuzarr-gpu-bench --json gpu_bench.json

``--emulate`` runs everything that needs no device (build, stream extraction,
cuzarr's device path on the host via ``gpu.emulate``, the host twin of the
encode ceiling) on a small array, to check the script on a machine without a GPU.

``--host-only`` measures the host's share of a device read on any machine: the
device read path with a null executor (no decode, no scatter) over ``--gib``
(default 1 there) of zstd, plain and sharded, against a plain loop of preads of
the same files (``gpu_host.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpu_ceilings import (
    encode_ceiling,
    encode_units,
    nvcomp_ceiling,
    pipelined_ceiling,
    raw_streams,
)
from gpu_report import environment, row, write_json

CODECS = {
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
    "blosc-lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4}},
}
SIDE = 1 << 18  # columns: one chunk = 1 x 262144 float32 = 1 MiB
TRAINING_GOAL = 0.7  # training throughput / plain read throughput, at least
SOLO_GOAL = 1.2  # interleaved median / solo median, at most
WRITE_GOAL = 0.5  # encode ceiling time / device write time, at least


def _sync(device: bool) -> None:
    if device:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def build(root: Path, gib: float, codec: str, sharded: bool):
    import cuzarr

    n = int(gib * (1 << 30)) // 4
    rows = max(1, n // SIDE)
    path = root / f"{codec}-{'sharded' if sharded else 'plain'}"
    if (path / "zarr.json").exists():
        a = cuzarr.open_array(str(path), mode="r")
        if a.shape == (rows, SIDE):
            return a
    a = cuzarr.create_array(str(path), shape=(rows, SIDE), dtype="f4", chunks=(1, SIDE),
                            shards=(64, SIDE) if sharded else None,
                            compressors=[CODECS[codec]], overwrite=True)
    rng = np.random.default_rng(0)
    step = 256
    for r in range(0, rows, step):
        blk = np.cumsum(rng.standard_normal((min(step, rows - r), SIDE), dtype="f4"), axis=1)
        a[r : r + step] = blk.round(2)
    return a


def _time(fn: Callable[[], Any], device: bool) -> float:
    _sync(device)
    t = time.perf_counter()
    res = fn()
    _sync(device)
    elapsed = time.perf_counter() - t
    del res
    return elapsed


def interleaved(contenders: dict[str, Callable[[], Any]], repeats: int,
                device: bool) -> dict[str, list[float]]:
    """Seconds of each contender per repeat, the contenders run in turn."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            times[name].append(_time(fn, device))
    return times


def _print_rows(rows: dict[str, dict[str, Any]]) -> None:
    for name, r in rows.items():
        print(f"  {name:32s} {r['median_s']:8.4f} s {r['gibs']:8.2f} GiB/s  "
              f"x{r.get('x_vs_first', 1.0):5.2f}")


def training_epoch(a, device: bool, batch: int, seed: int = 0) -> Callable[[], None]:
    """One pass over every row of ``a`` in random batches of ``batch`` samples,
    one planned read per batch, as a data loader would run it (a new order each
    call). On the device: ``ArrayDataset(a, device="cuda").read_batch(idx,
    "gpu")``; emulated: the same call with numpy outputs under ``gpu.emulate``."""
    import cuzarr
    from cuzarr.torch import ArrayDataset

    ds = ArrayDataset(a, device="cuda" if device else None)
    proto = "gpu" if device else None
    rng = np.random.default_rng(seed)

    def epoch() -> None:
        order = rng.permutation(len(ds))
        with cuzarr.config.set({"gpu.emulate": not device}):
            for start in range(0, len(order), batch):
                ds.read_batch(order[start : start + batch], proto)

    return epoch


def check_training(a, device: bool, batch: int, epoch: Callable[[], None]) -> dict[str, Any]:
    """One untimed epoch (and, emulated, what the host twin ran for it), then
    one batch compared with the host read of the same rows."""
    import cuzarr
    from cuzarr.gpu.executor import HostExecutor
    from cuzarr.torch import ArrayDataset

    before = dict(HostExecutor.stats)
    epoch()
    twin = {k: v - before.get(k, 0) for k, v in HostExecutor.stats.items()
            if v != before.get(k, 0)}
    idx = np.random.default_rng(1).permutation(len(a))[:batch]
    with cuzarr.config.set({"gpu.emulate": not device}):
        got = ArrayDataset(a, device="cuda" if device else None).read_batch(
            idx, "gpu" if device else None)[0]
    if device:
        import cupy

        got = cupy.asnumpy(got)
    ref = cuzarr.read_many([a.lazy[idx]])[0]
    out: dict[str, Any] = {"batch": batch, "sample_bytes": int(a.nbytes // len(a)),
                           "batches_per_run": -(-len(a) // batch),
                           "equal": bool(np.array_equal(got, ref))}
    if not device:
        out["twin_stats"] = twin  # batches of the device path, "fancy": per-chunk fallbacks
    return out


def read_contenders(root: Path, a, codec: str, layout: str,
                    device: bool) -> dict[str, Callable[[], Any]]:
    """The full-read contenders of one array, the reference first."""
    import cuzarr

    contenders: dict[str, Callable[[], Any]] = {}
    if not device:

        def emulated():
            with cuzarr.config.set({"gpu.emulate": True}):
                return a[...]

        contenders["cuzarr gpu (emulated)"] = emulated
        contenders["cuzarr cpu"] = lambda: a[...]
        return contenders
    import cupy

    def gpu_read():
        with cuzarr.config.enable_gpu():
            return a[...]

    contenders["cuzarr gpu"] = gpu_read
    contenders["cuzarr cpu+copy"] = lambda: cupy.asarray(a[...])
    try:
        import zarr

        z = zarr.open_array(str(root / f"{codec}-{layout}"), mode="r")

        def zarr_gpu():
            with zarr.config.enable_gpu():
                return z[...]

        zarr_gpu()  # fails here, not in the timed loop, without zarr's GPU extras
        contenders["zarr gpu"] = zarr_gpu
    except Exception as e:
        print(f"  zarr gpu: skipped ({type(e).__name__}: {e})")
    return contenders


def _ceilings(streams: dict[str, Any], device: bool, repeats: int, base: float,
              gib: float) -> dict[str, Any]:
    """The decode ceilings (device only) as rows, each with ``fraction``: the
    ceiling's time over the reference read's."""
    out: dict[str, Any] = {}
    if not device:
        return out
    for name, fn in (("nvcomp ceiling", nvcomp_ceiling),
                     ("upload+decode ceiling", pipelined_ceiling)):
        try:
            r = row(fn(streams, repeats), gib, base)
        except Exception as e:  # a benchmark row, not a reason to stop the run
            print(f"  {name}: failed ({type(e).__name__}: {e})")
            out[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        r["fraction"] = r["median_s"] / base
        out[name] = r
    return out


def bench_reads(args: argparse.Namespace, root: Path, a, codec: str, layout: str,
                device: bool) -> dict[str, Any]:
    """Every read row of one array: the contenders interleaved (the training
    load among them), the reference alone, the ceilings. Prints them."""
    gib = a.nbytes / (1 << 30)
    contenders = read_contenders(root, a, codec, layout, device)
    first = next(iter(contenders))
    train_name = "cuzarr gpu training" + ("" if device else " (emulated)")
    train: dict[str, Any] = {"name": train_name}
    try:
        epoch = training_epoch(a, device, args.batch)
        train.update(check_training(a, device, args.batch, epoch))
        contenders[train_name] = epoch
    except Exception as e:  # the other rows still count
        traceback.print_exc()
        train["error"] = f"{type(e).__name__}: {e}"
    times = interleaved(contenders, args.repeats, device)
    base = statistics.median(times[first])
    rows = {k: row(v, gib, base) for k, v in times.items()}
    solo = [_time(contenders[first], device) for _ in range(args.repeats)]
    streams = raw_streams(a)
    ceilings = _ceilings(streams, device, args.repeats, base, gib)
    nstreams = sum(len(s) for s, _ in streams.values())
    print(f"{codec} {layout}: {a.nchunks} chunks, {nstreams} raw streams "
          f"({', '.join(sorted(streams))}), {gib:.3f} GiB")
    _print_rows(rows)
    _print_rows({k: v for k, v in ceilings.items() if "median_s" in v})
    for name, c in ceilings.items():
        if "fraction" in c:
            print(f"  {first} at {c['fraction']:.0%} of the {name}")
    if train_name in rows:
        train.update(rows[train_name])
        train["fraction_of_plain"] = base / train["median_s"]
        train["goal"] = f">= {TRAINING_GOAL} of the plain read's throughput"
        print(f"  training ({args.batch} x {train['sample_bytes'] >> 10} KiB random batches, "
              f"{train['batches_per_run']} per run) at {train['fraction_of_plain']:.2f} of the "
              f"plain read (goal >= {TRAINING_GOAL}), batches "
              f"{'equal' if train['equal'] else 'DIFFERENT'}")
    solo_row = row(solo, gib)
    ratio = base / solo_row["median_s"]
    print(f"  {first}: solo median {solo_row['median_s']:.4f} s, interleaved {base:.4f} s "
          f"= x{ratio:.2f} of solo (goal <= {SOLO_GOAL})")
    return {"codec": codec, "layout": layout, "chunks": int(a.nchunks), "bytes": int(a.nbytes),
            "gib": gib, "raw_streams": nstreams, "stream_codecs": sorted(streams),
            "first": first, "reads": rows, "ceilings": ceilings, "training": train,
            "solo_vs_interleaved": {"name": first, "solo": solo_row, "interleaved_median_s": base,
                                    "interleaved_over_solo": ratio,
                                    "goal": f"<= {SOLO_GOAL} (interleaved within 20% of solo)"}}


def host_only(args: argparse.Namespace) -> dict:
    """``--host-only``: gpu_host.py's measurement (``--gib`` 1 unless given)."""
    from gpu_host import run

    gib = 1.0 if "--gib" not in sys.argv else args.gib
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    return run(root, gib, args.repeats, args.workers, args.layouts.split(","))


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    ap.add_argument("--codecs", default="zstd,lz4,blosc-lz4")
    ap.add_argument("--layouts", default="plain,sharded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="samples per training batch")
    ap.add_argument("--writes", action=argparse.BooleanOptionalAction, default=True,
                    help="also time writes from device memory")
    ap.add_argument("--emulate", action="store_true",
                    help="no device: host twin of the GPU path, small array, no nvCOMP")
    ap.add_argument("--host-only", action="store_true",
                    help="no device: host overhead of the device read path (gpu_host.py)")
    ap.add_argument("--workers", type=int, default=1, help="read threads for --host-only")
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="write every figure, with where and how it was measured, to PATH")
    return ap.parse_args()


def main() -> int:
    args = _args()
    mode = "host-only" if args.host_only else "emulate" if args.emulate else "device"
    record: dict[str, Any] = {"env": environment(mode), "args": vars(args)}
    if args.host_only:
        record["host_only"] = host_only(args)
        write_json(args.json, record)
        return 0
    device = not args.emulate
    if args.emulate:
        args.gib = min(args.gib, 0.02)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    record["results"] = results = []
    rc = 0
    for codec in args.codecs.split(","):
        for layout in args.layouts.split(","):
            res: dict[str, Any] = {"codec": codec, "layout": layout}
            try:
                a = build(root, args.gib, codec, layout == "sharded")
                res = bench_reads(args, root, a, codec, layout, device)
                if args.writes:
                    res["writes"] = write_contenders(root, a, codec, layout, device, args.repeats)
            except Exception as e:  # record it, go on with the next array
                traceback.print_exc()
                res["error"] = f"{type(e).__name__}: {e}"
                rc = 1
            results.append(res)
            write_json(args.json, record, quiet=True)  # what is measured so far
    write_json(args.json, record)
    return rc


def write_sources(a, device: bool) -> Any:
    """``a``'s data where the write contenders take it from: device memory, or
    host memory when emulated."""
    import cuzarr

    if not device:
        return a[...]
    with cuzarr.config.enable_gpu():
        return a[...]


def write_contenders(root: Path, a, codec: str, layout: str, device: bool,
                     repeats: int) -> dict[str, Any]:
    """Time writes of ``a``'s data, held in device memory (host memory with
    ``--emulate``), into a fresh array of the same codec and layout, and the
    encode ceiling of the same chunks. Prints the rows; returns them."""
    import cuzarr

    path = root / f"{codec}-{layout}-write"
    dst = cuzarr.create_array(str(path), shape=a.shape, dtype=a.dtype, chunks=(1, SIDE),
                              shards=(64, SIDE) if layout == "sharded" else None,
                              compressors=[CODECS[codec]], overwrite=True)
    src = write_sources(a, device)
    contenders: dict[str, Callable[[], Any]] = {}
    if device:
        import cupy

        def gpu_write():
            with cuzarr.config.enable_gpu():
                dst[...] = src

        contenders["cuzarr gpu write"] = gpu_write
        contenders["cuzarr cpu write"] = lambda: dst.__setitem__(Ellipsis, cupy.asnumpy(src))
        zarr_write = _zarr_gpu_write(path, src)
        if zarr_write is not None:
            contenders["zarr gpu write"] = zarr_write
    else:

        def emulated_write():
            with cuzarr.config.set({"gpu.emulate": True}):
                dst[...] = src

        contenders["cuzarr gpu write (emulated)"] = emulated_write
        contenders["cuzarr cpu write"] = lambda: dst.__setitem__(Ellipsis, src)
    times = interleaved(contenders, repeats, device)
    got = dst[...]
    if device:
        same = bool((cupy.asnumpy(got) == cupy.asnumpy(src)).all())
    else:
        same = bool((got == src).all())
    gib = a.nbytes / (1 << 30)
    first = next(iter(contenders))
    base = statistics.median(times[first])
    rows = {k: row(v, gib, base) for k, v in times.items()}
    ceiling = write_ceiling(a, src, device, repeats, base, layout)
    print(f"{codec} {layout} write: {gib:.3f} GiB from {'device' if device else 'host'} "
          f"memory, read back {'equal' if same else 'DIFFERENT'}")
    _print_rows(rows)
    if "median_s" in ceiling:
        _print_rows({ceiling["name"]: row(ceiling["times_s"], gib, base)})
        print(f"  {first} at {ceiling['write_fraction']:.0%} of the encode ceiling "
              f"(goal >= {WRITE_GOAL:.0%}); {ceiling['note']}")
    else:
        print(f"  encode ceiling: {ceiling.get('error') or ceiling['note']}")
    return {"first": first, "rows": rows, "equal": same, "encode_ceiling": ceiling}


def _zarr_gpu_write(path: Path, src: Any) -> Callable[[], None] | None:
    """zarr-python's GPU-mode write of ``src`` into ``path``, or ``None`` (printed)
    when it cannot run here."""
    try:
        import zarr

        z = zarr.open_array(str(path), mode="r+")

        def zarr_gpu_write():
            with zarr.config.enable_gpu():
                z[...] = src

        zarr_gpu_write()  # fails here, not in the timed loop, without zarr's GPU extras
        return zarr_gpu_write
    except Exception as e:
        print(f"  zarr gpu write: skipped ({type(e).__name__}: {e})")
        return None


def write_ceiling(a, src: Any, device: bool, repeats: int, base: float,
                  layout: str) -> dict[str, Any]:
    """The encode ceiling of ``a``'s chunks (``src``: its data where the writes
    take it from) as a row, with ``write_fraction``: ceiling time over the
    first write contender's (``base``)."""
    units = encode_units(a)
    name = f"encode ceiling ({'nvCOMP' if device else 'host twin'} {units['stream']})"
    note = units["note"]
    if layout == "sharded":
        note += ("; sharded arrays: the device write encodes the inner chunks of whole "
                 "shards there and assembles the shards on the host")
    out: dict[str, Any] = {"name": name, "stream": units["stream"], "units": len(units["sizes"]),
                           "note": note}
    if units["stream"] is None:
        return out
    try:
        figs = encode_ceiling(src, units, repeats, device)
    except Exception as e:  # a benchmark row, not a reason to stop the run
        traceback.print_exc()
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    gib = a.nbytes / (1 << 30)
    out.update(figs)
    out["gibs"] = gib / figs["median_s"] if figs["median_s"] > 0 else None
    out["ratio"] = figs["input_bytes"] / max(1, figs["compressed_bytes"])
    out["write_fraction"] = figs["median_s"] / base
    out["goal"] = f"device write >= {WRITE_GOAL} of the encode ceiling's throughput"
    return out


if __name__ == "__main__":
    sys.exit(main())
