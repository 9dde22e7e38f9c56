"""benchmarks/bench_core.py runs end to end on a small array: cuzarr against the
reference rows, including limit:assemble, with every result verified."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _harness(name="bench_core"):
    """A module of the bench_core harness (benchmarks/bench_core.py, core_*.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


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
    report = _harness("core_report")
    # repeat 1 was slowed by load for both; repeat 3 has no cuzarr time
    peer = {"by_repeat": {0: 1.0, 1: 3.0, 2: 1.2, 3: 0.5}}
    cz = {"by_repeat": {0: 0.5, 1: 2.0, 2: 1.0}}
    assert report.paired_ratio(peer, cz) == 1.5  # median of 2.0, 1.5, 1.2
    assert report.paired_ratio(peer, {"by_repeat": {}}) is None


def test_zarr_adapters_in_one_process_keep_their_own_pipelines(tmp_path):
    """zarr-python binds a codec pipeline when an array is created or opened, from
    the global setting: each adapter sets its own around those calls, so that in
    one process (``--in-process``) the zarr and zarr-fused rows do not all run the
    last adapter's pipeline."""
    adapters_module = _harness("core_adapters")
    common = _harness("core_common")
    adapters = {c: adapters_module.make_adapter(c, "cuzarr") for c in ("zarr", "zarr-fused")}
    data = np.arange(64 * 64, dtype="uint16").reshape(64, 64)
    for name, ad in adapters.items():
        loc = ad.disk_location(tmp_path / name)
        h = ad.create(loc, data.shape, (32, 32))
        ad.write(h, data)
        opened = ad.open(loc)
        np.testing.assert_array_equal(ad.read(opened), data)
        for arr in (h, opened):
            pipe = type(arr._async_array.codec_pipeline)
            assert f"{pipe.__module__}.{pipe.__name__}" == common.PIPELINES[name], name


def test_bench_core_in_process_runs_every_unit_verified(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_core.py"), "--in-process",
         "--size-mib", "8", "--repeats", "2", "--contenders", "cuzarr,zarr-fused",
         "--data-dir", str(tmp_path), "--json-out", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((tmp_path / "out.json").read_text())
    for unit in ("write", "read", "shard-write", "shard-read"):
        for c in ("cuzarr", "zarr-fused"):
            runs = report["raw"][c][unit]
            assert len(runs) == 2
            assert all(m["cpu"] >= m["sys"] >= 0 for m in runs)
            assert all(m.get("ok", True) for m in runs), (unit, c)
        assert "_ratio" in report["summary"][unit]
    assert "order:" in r.stdout


def test_bench_core_in_process_separate_runs_each_contender_in_its_own_process(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_core.py"), "--in-process",
         "--separate", "--size-mib", "8", "--repeats", "2", "--contenders",
         "cuzarr,zarr-fused", "--data-dir", str(tmp_path),
         "--json-out", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["separate"] is True
    for unit in ("write", "read", "shard-write", "shard-read"):
        for c in ("cuzarr", "zarr-fused"):
            runs = report["raw"][c][unit]
            assert len(runs) == 2 and all(m.get("ok", True) for m in runs), (unit, c)
    assert not (tmp_path / "inprocess").exists()  # the stores are removed
