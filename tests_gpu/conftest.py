"""Skip the whole directory (collect nothing) without CuPy or a CUDA device."""

import sys
from pathlib import Path

# Test data helpers are shared with the CPU suite (tests/_gpu_helpers.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _device_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "GPU tests need CuPy (pip install '.[gpu]')"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver
        return f"no usable CUDA device ({e})"
    return None if n else "no CUDA device"


_reason = _device_reason()
collect_ignore_glob = ["test_*.py"] if _reason else []


def pytest_report_header(config):
    return f"cuzarr GPU tests: {'skipped: ' + _reason if _reason else 'device found'}"
