"""Skip the whole directory (collect nothing) without CuPy or a CUDA device;
files named on the command line are collected and every test in them skipped."""

import sys
from pathlib import Path

import pytest

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


def pytest_collection_modifyitems(config, items):
    # collect_ignore_glob does not apply to paths given on the command line
    # (this hook sees the whole session's items: only this directory's skip)
    if _reason:
        skip = pytest.mark.skip(reason=_reason)
        here = Path(__file__).resolve().parent
        for item in items:
            if here in Path(str(item.path)).resolve().parents:
                item.add_marker(skip)
