"""benchmarks/bench_core.py runs end to end on a small array: cuzarr against the
reference rows, including limit:assemble, with every result verified."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_core_quick_read_with_assemble_limit(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_core.py"), "--quick",
         "--size-mib", "8", "--contenders", "cuzarr",
         "--limits", "limit:numcodecs,limit:assemble", "--workloads", "read",
         "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.split("BENCH_JSON ", 1)[1])
    res = report["results"]
    for row in ("read/cuzarr", "read/limit:numcodecs", "read/limit:assemble"):
        assert res[row]["verified"] is True, row
        assert res[row]["median_s"] > 0
    (summary,) = report["summary"]
    assert summary["limit"] == "limit:numcodecs"  # assemble is not a decode limit
    assert summary["fraction_of_assemble"] > 0
    assert "of the assemble limit" in r.stdout
    assert 0 < summary["first_touch_s"] < res["read/limit:assemble"]["median_s"]
    assert "zeroing a fresh output array alone" in r.stdout


def test_bench_core_quick_write_with_store_limit(tmp_path):
    """limit:assemble's write row copies, encodes and writes every chunk to a file."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_core.py"), "--quick",
         "--size-mib", "8", "--contenders", "cuzarr,zarr",
         "--limits", "limit:assemble", "--workloads", "write",
         "--data-dir", str(tmp_path), "--keep"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.split("BENCH_JSON ", 1)[1])
    res = report["results"]
    lim = res["write/limit:assemble"]
    assert lim["median_s"] > 0 and not lim["errors"]
    # the same chunks, the same codec and level: about the bytes cuzarr stored
    assert abs(lim["stored_bytes"] / res["write/cuzarr"]["stored_bytes"] - 1) < 0.01
    files = [p for p in (tmp_path / "stores" / "limit:assemble" / "c").rglob("*") if p.is_file()]
    rows, cols = report["params"]["shape"]
    assert len(files) == -(-rows // 512) * -(-cols // 1024)  # one file per chunk
    assert not [p for p in files if p.name.endswith(".tmp")]
    (summary,) = report["summary"]
    assert summary["fraction_of_assemble"] > 0 and summary["assemble_x_zarr"] > 0
    assert "of the store limit" in r.stdout


def test_paired_ratio_pairs_times_of_the_same_repeat():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_core
    finally:
        sys.path.pop(0)
    # repeat 1 was slowed by load for both; repeat 3 has no cuzarr time
    peer = {"by_repeat": {0: 1.0, 1: 3.0, 2: 1.2, 3: 0.5}}
    cz = {"by_repeat": {0: 0.5, 1: 2.0, 2: 1.0}}
    assert bench_core.paired_ratio(peer, cz) == 1.5  # median of 2.0, 1.5, 1.2
    assert bench_core.paired_ratio(peer, {"by_repeat": {}}) is None
