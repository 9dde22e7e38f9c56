#!/usr/bin/env python
"""zarr-python's codec pipelines against cuzarr's (``cuzarr.zarr_pipeline``).

The same zarr-python program (``zarr.create_array``, ``a[:] = x``, ``a[...]``)
is timed with ``codec_pipeline.path`` set to each contender: zarr-python's
default ``BatchedCodecPipeline``, its ``FusedCodecPipeline``, cuzarr's
``CuzarrCodecPipeline`` and, where the ``zarrs`` package is installed,
zarrs-python's ``ZarrsCodecPipeline``. Workloads follow ``bench_core.py``
(uint16 smooth noise, zstd level 1, Zarr v3), at a smaller default size:

* ``write`` / ``read``: full write, then full read, of an array of ~1 MiB chunks
  on local disk (the read from the page cache);
* ``tiny-write`` / ``tiny-read``: the same of 2 KiB chunks in zarr's MemoryStore;
* ``shard-write`` / ``shard-read``: 128 KiB inner chunks in 8 MiB shards, local disk;
* ``sel-strided``: ``a[::7, ::13]`` of the ``write`` array.

Every repeat runs each contender once per workload, in turn (interleaved, so
a slow stretch of the machine hits all alike; the order turns from one repeat
to the next); the tables show medians of wall
time and of the process's CPU time (all threads: what a busy machine pays),
with each contender's ratio to the default pipeline. Every result is checked
against the source array, after its time is taken.

Usage::

    python benchmarks/bench_zarr_pipeline.py [--size-mib 64] [--repeats 5]
        [--workloads read,shard_read] [--contenders cuzarr,zarrs] [--json times.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

import cuzarr.zarr_pipeline  # noqa: F401  (registers the pipeline)

PIPELINES = {
    "default": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "cuzarr": "cuzarr.zarr_pipeline.CuzarrCodecPipeline",
}
if importlib.util.find_spec("zarrs") is not None:
    import zarrs  # noqa: F401

    PIPELINES["zarrs"] = "zarrs.ZarrsCodecPipeline"


def smooth_noise(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    """uint16 data that compresses like real measurements (bench_core's kind)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(-3, 4, size=shape, dtype=np.int32)
    return (np.cumsum(steps, axis=1) % 4096 + 20000).astype(np.uint16)


class Workloads:
    """The workloads of one contender, in its own directory."""

    def __init__(self, root: Path, data: np.ndarray, tiny: np.ndarray) -> None:
        self.root, self.data, self.tiny = root, data, tiny
        self.mem = zarr.storage.MemoryStore()

    def _create(self, where, data, **kw):
        return zarr.create_array(where, shape=data.shape, dtype=data.dtype,
                                 compressors=ZstdCodec(level=1), overwrite=True, **kw)  # fmt: skip

    def write(self) -> None:
        self._create(self.root / "big", self.data, chunks=(512, 1024))[:] = self.data

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        return zarr.open_array(self.root / "big", mode="r")[:], self.data

    def tiny_write(self) -> None:
        self._create(self.mem, self.tiny, chunks=(32, 32))[:] = self.tiny

    def tiny_read(self) -> tuple[np.ndarray, np.ndarray]:
        return zarr.open_array(self.mem, mode="r")[:], self.tiny

    def shard_write(self) -> None:
        kw = dict(chunks=(256, 256), shards=(2048, 2048))
        self._create(self.root / "shard", self.data, **kw)[:] = self.data

    def shard_read(self) -> tuple[np.ndarray, np.ndarray]:
        return zarr.open_array(self.root / "shard", mode="r")[:], self.data

    def sel_strided(self) -> tuple[np.ndarray, np.ndarray]:
        return zarr.open_array(self.root / "big", mode="r")[::7, ::13], self.data[::7, ::13]


ORDER = ["write", "read", "tiny_write", "tiny_read", "shard_write", "shard_read", "sel_strided"]


def _check(got: np.ndarray, want: np.ndarray) -> None:
    if not np.array_equal(got, want):
        raise AssertionError("a contender read back wrong data")


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and process CPU seconds of one call of ``fn``; a read's answer
    ``(got, want)`` is compared after the clock stops (the comparison of 64 MiB
    is no contender's work)."""
    t0, c0 = time.perf_counter(), time.process_time()
    answer = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if answer is not None:
        _check(*answer)
    return wall, cpu


def table(title: str, times: dict[tuple[str, str], list[float]], works, names) -> None:
    """One table of medians (ms), each with its ratio to the first contender."""
    print(title)
    print(f"{'workload':<12}" + "".join(f"{n:>20}" for n in names))
    for work in works:
        base = statistics.median(times[(work, names[0])])
        row = f"{work.replace('_', '-'):<12}"
        for n in names:
            m = statistics.median(times[(work, n)])
            row += f"{m * 1e3:>12.1f} ({base / max(m, 1e-9):4.1f}x)"
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--tiny-chunks", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--workloads", default=",".join(ORDER), help="comma list of " + ", ".join(ORDER)
    )
    parser.add_argument("--contenders", default=",".join(PIPELINES), help="comma list")
    parser.add_argument("--json", help="also write every time measured to this file")
    args = parser.parse_args()
    works = [w.replace("-", "_") for w in args.workloads.split(",")]
    names = args.contenders.split(",")
    # reads read what the same contender's write wrote: a read picks up its write
    needs = {"read": "write", "sel_strided": "write", "tiny_read": "tiny_write",
             "shard_read": "shard_write"}  # fmt: skip
    cols = 2048
    data = smooth_noise((max(2048, args.size_mib * (1 << 20) // (2 * cols)), cols))
    side = int(np.sqrt(args.tiny_chunks)) * 32
    tiny = smooth_noise((side, side), seed=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench_zarr_pipeline_"))
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    try:
        runs = {name: Workloads(tmp / name, data, tiny) for name in names}
        for name in names:  # stores the selected reads need, untimed
            with zarr.config.set({"codec_pipeline.path": PIPELINES[name]}):
                for w in sorted({needs[w] for w in works if w in needs} - set(works)):
                    getattr(runs[name], w)()
        for rep in range(args.repeats):
            # the contenders' order turns each repeat: none always runs right
            # after the same other one (which leaves the allocator and the
            # kernel's free memory in its own state: huge-page faults on a
            # fresh output buffer went to whoever came after a large write)
            turn = names[rep % len(names):] + names[: rep % len(names)]
            for work in [w for w in ORDER if w in works]:
                for name in turn:
                    with zarr.config.set({"codec_pipeline.path": PIPELINES[name]}):
                        wall, cpu = timed(getattr(runs[name], work))
                    if work.endswith("write"):
                        # its dirty pages written back now, untimed: the kernel's
                        # writeback took CPU from whichever contender ran next
                        os.sync()
                    walls.setdefault((work, name), []).append(wall)
                    cpus.setdefault((work, name), []).append(cpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    works = [w for w in ORDER if w in works]
    print(f"array {data.shape} uint16 ({data.nbytes >> 20} MiB), tiny {tiny.shape}, "
          f"{args.repeats} interleaved repeats, medians in ms (x: {names[0]} / contender)")  # fmt: skip
    table("wall time", walls, works, names)
    table("CPU time (process, all threads)", cpus, works, names)
    if args.json:
        raw = {
            f"{w}/{n}": {"wall": walls[(w, n)], "cpu": cpus[(w, n)]} for w in works for n in names
        }
        Path(args.json).write_text(json.dumps(raw))


if __name__ == "__main__":
    main()
