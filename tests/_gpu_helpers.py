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


def sample(shape, dtype, seed=0, offset=0):
    """Deterministic test data of any numeric dtype (smooth floats, cycling ints,
    random bools, complex ramps); ``offset`` shifts values away from a 0 fill."""
    import numpy as np

    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        return (rng.random(n) > 0.5).reshape(shape)
    if dt.kind == "c":
        return (np.arange(n) * 0.5 + 1j * np.arange(n)[::-1] + offset).astype(dt).reshape(shape)
    if dt.kind == "f":
        return (np.cumsum(rng.standard_normal(n)) * 3 + offset).astype(dt).reshape(shape)
    return (np.arange(n) % 251 * 7 + min(offset, 1)).astype(dt).reshape(shape)
