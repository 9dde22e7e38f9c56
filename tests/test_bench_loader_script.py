"""benchmarks/bench_loader.py on a store smaller than the batches asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_epoch_batches_start_a_new_epoch_when_one_runs_out():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_loader
    finally:
        sys.path.pop(0)
    batches = bench_loader._epoch_batches(10, 4, 7, seed=0)
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4, 2, 4]
    assert sorted(np.concatenate(batches[:3]).tolist()) == list(range(10))
    assert sorted(np.concatenate(batches[3:6]).tolist()) == list(range(10))
    first = np.random.default_rng(0).permutation(10)  # epoch 1 as before
    np.testing.assert_array_equal(np.concatenate(batches[:3]), first)


def test_bench_loader_tiny_store_more_batches_than_an_epoch(tmp_path):
    # 1 MiB of 64x64 uint8 images = 256 samples = 4 batches of 64 per epoch
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_loader.py"), "--size-mib", "1",
         "--chunk", "64", "--label-chunk", "64", "--batches", "6", "--zarr-batches", "6",
         "--warmup", "1", "--repeats", "1", "--contenders", "cuzarr,zarr-naive",
         "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    report = json.loads(r.stdout.split("BENCH_JSON ", 1)[1])
    (layout,) = report["layouts"]
    for name in ("cuzarr", "zarr-naive"):
        (res,) = layout["results"][name]
        assert res["ok"] and res["checked"] == 6, res
