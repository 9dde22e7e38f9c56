"""benchmarks/gpu.py runs end to end without a device (``--emulate``): the array
build, the raw-stream extraction the nvCOMP ceiling decodes, and the device read
and write paths on the host. Keeps the script that a GPU session runs from rotting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_benchmark_emulated(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--emulate", "--gib", "0.005",
         "--repeats", "1", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for codec in ("zstd", "lz4", "blosc-lz4"):
        for layout in ("plain", "sharded"):
            assert f"{codec} {layout}:" in r.stdout
            assert f"{codec} {layout} write:" in r.stdout
    assert "raw streams (zstd)" in r.stdout and "raw streams (lz4)" in r.stdout
    assert "read back equal" in r.stdout and "DIFFERENT" not in r.stdout


def test_gpu_benchmark_host_only(tmp_path):
    """``--host-only``: the device read path with a null executor against the pread
    loop, one line per layout in the format docs/gpu.md quotes."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--host-only", "--gib", "0.005",
         "--repeats", "1", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("gpu-host: ")]
    assert len(lines) == 2, r.stdout
    for line, layout in zip(lines, ("plain", "sharded"), strict=True):
        assert " us/chunk host overhead, staging " in line
        assert line.endswith(f" of the pread limit {layout}")
