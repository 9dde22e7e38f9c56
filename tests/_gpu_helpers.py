"""Skips for the device-free GPU checks, turned into failures where the
environment promises the tools (``CUZARR_REQUIRE_NVRTC=1``, set by the test
command: its environment installs CuPy and NVRTC, so a skip there would hide a
missing compile check)."""

from __future__ import annotations

import os

import pytest


def skip_or_fail(reason: str) -> None:
    if os.environ.get("CUZARR_REQUIRE_NVRTC") == "1":
        pytest.fail(f"{reason} (CUZARR_REQUIRE_NVRTC=1)")
    pytest.skip(reason)


def require_nvrtc() -> None:
    """CuPy importable (its NVRTC bindings compile without a device)."""
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        skip_or_fail(f"CuPy (the kernels/gpu extra) is not installed: {e}")
