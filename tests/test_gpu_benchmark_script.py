"""benchmarks/gpu.py runs end to end without a device (``--emulate``): the array
build, the raw-stream extraction the nvCOMP ceiling decodes, the device read
and write paths on the host, the training load, the host twin of the encode
ceiling, and the JSON record. Keeps the script that a GPU session runs from rotting."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODECS = ("zstd", "lz4", "blosc-lz4")
LAYOUTS = ("plain", "sharded")


def _positive_row(r: dict, repeats: int) -> None:
    assert len(r["times_s"]) == repeats
    assert all(t > 0 for t in r["times_s"])
    assert min(r["times_s"]) <= r["median_s"] <= max(r["times_s"])
    assert r["gibs"] > 0


def _check_layout(res: dict, repeats: int) -> None:
    assert "error" not in res, res.get("error")
    first = res["first"]
    assert first == "cuzarr gpu (emulated)"
    assert set(res["reads"]) == {first, "cuzarr cpu", "cuzarr gpu training (emulated)"}
    for r in res["reads"].values():
        _positive_row(r, repeats)
    train = res["training"]
    assert train["equal"] is True
    assert train["batch"] == 64 and train["sample_bytes"] == 1 << 20
    assert train["batches_per_run"] == math.ceil(res["chunks"] / 64)
    assert math.isclose(train["fraction_of_plain"],
                        res["reads"][first]["median_s"] / train["median_s"])
    # the batches took the device path (the host twin ran them), never per-chunk fancy
    assert train["twin_stats"]["batches"] >= 1 and "fancy" not in train["twin_stats"]
    solo = res["solo_vs_interleaved"]
    _positive_row(solo["solo"], repeats)
    assert solo["interleaved_median_s"] == res["reads"][first]["median_s"]
    writes = res["writes"]
    assert writes["equal"] is True
    assert set(writes["rows"]) == {"cuzarr gpu write (emulated)", "cuzarr cpu write"}
    for r in writes["rows"].values():
        _positive_row(r, repeats)
    ceil = writes["encode_ceiling"]
    assert "error" not in ceil, ceil.get("error")
    assert ceil["stream"] == ("zstd" if res["codec"] == "zstd" else "lz4")
    assert ceil["input_bytes"] == res["bytes"]
    assert 0 < ceil["compressed_bytes"] < 2 * ceil["input_bytes"]
    assert ceil["units"] == res["chunks"] * (4 if res["codec"] == "blosc-lz4" else 1)
    assert ceil["write_fraction"] > 0
    assert ("blosc" in ceil["note"]) == (res["codec"] == "blosc-lz4")


def test_gpu_benchmark_emulated(tmp_path):
    out = tmp_path / "results" / "gpu_bench.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--emulate", "--gib", "0.005",
         "--repeats", "2", "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for codec in CODECS:
        for layout in LAYOUTS:
            assert f"{codec} {layout}:" in r.stdout
            assert f"{codec} {layout} write:" in r.stdout
    assert "raw streams (zstd)" in r.stdout and "raw streams (lz4)" in r.stdout
    assert "read back equal" in r.stdout and "DIFFERENT" not in r.stdout
    assert "of the plain read (goal >= 0.7), batches equal" in r.stdout
    record = json.loads(out.read_text())
    env = record["env"]
    assert env["mode"] == "emulate" and env["device"] is None
    assert env["cpu_count"] >= 1 and env["hostname"]
    assert env["versions"]["numpy"] and env["versions"]["cuzarr"]
    assert len(env["src_digest"]) == 64
    assert record["args"]["repeats"] == 2
    got = [(res["codec"], res["layout"]) for res in record["results"]]
    assert got == [(c, lay) for c in CODECS for lay in LAYOUTS]
    for res in record["results"]:
        _check_layout(res, 2)


def test_gpu_benchmark_host_only(tmp_path):
    """``--host-only``: the device read path with a null executor against the pread
    loop, one line per layout in the format docs/gpu.md quotes, and the JSON."""
    out = tmp_path / "gpu_host.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--host-only", "--gib", "0.005",
         "--repeats", "1", "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("gpu-host: ")]
    assert len(lines) == 2, r.stdout
    for line, layout in zip(lines, ("plain", "sharded"), strict=True):
        assert " us/chunk host overhead, staging " in line
        assert line.endswith(f" of the pread limit {layout}")
    record = json.loads(out.read_text())
    assert record["env"]["mode"] == "host-only"
    assert set(record["host_only"]) == {"plain", "sharded"}
    for figs in record["host_only"].values():
        assert figs["chunks"] == 5 and figs["bytes"] > 0
        assert figs["cpu"]["read_s"] > 0 and figs["wall"]["pread_s"] > 0


def test_gpu_host_python(tmp_path):
    """``gpu_host_python.py``: a device read's Python work by thread CPU, one line
    per layout in the format docs/gpu.md quotes, its parts adding up."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_host_python.py"), "--gib", "0.005",
         "--reads", "2", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("python: ")]
    assert len(lines) == 2, r.stdout
    for line, layout in zip(lines, ("plain", "sharded"), strict=True):
        m = re.match(r"python: ([\d.]+) ms in batches \+ ([\d.-]+) ms outside them = "
                     r"([\d.-]+) us/chunk  \((\w+); read ([\d.]+) ms of CPU, 5 chunks\)", line)
        assert m, line
        inside, outside, per, got, total = m.groups()
        assert got == layout and float(inside) > 0 and float(total) > 0
        # (the printed ms are rounded to 0.01: 2 us/chunk over 5 chunks)
        assert math.isclose((float(inside) + float(outside)) * 1e3 / 5, float(per),
                            rel_tol=0.01, abs_tol=2.1)
