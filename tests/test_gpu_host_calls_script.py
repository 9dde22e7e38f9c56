"""benchmarks/gpu_host_calls.py: the per-call measurement runs, through the
null executor, on a small array, and its floors measure what they say."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import cuzarr

ROOT = Path(__file__).resolve().parents[1]


def _module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_host
        import gpu_host_calls
    finally:
        sys.path.pop(0)
    return gpu_host, gpu_host_calls


def test_per_call_figures_of_a_small_array(tmp_path):
    gpu_host, calls = _module()
    a = cuzarr.create_array(str(tmp_path / "a"), shape=(64, 32), chunks=(1, 32), dtype="f4")
    a[...] = np.arange(64 * 32, dtype="f4").reshape(64, 32)
    null = gpu_host.NullExecutor()
    with gpu_host.null_device(null):
        r = calls.per_call(a, 8, calls=4, rounds=2)
    assert null.batches > 0  # the device read path ran, with the null executor
    assert r["batch"] == 8 and len(r["cpu_rounds_us"]) == 2
    assert r["cpu_us"] > 0 and r["wall_us"] > 0 and r["caller_us"] > 0


def test_floors_are_cpu_per_call():
    _, calls = _module()
    fl = calls.floors(n=20)
    assert set(fl) == {"cuzarr_sync_noop_us", "asyncio_roundtrip_us", "queue_handoff_us"}
    assert all(v > 0 for v in fl.values())
