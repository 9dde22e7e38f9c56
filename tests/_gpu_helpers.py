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


def draw_grid_selection(draw, min_ndim: int, max_ndim: int):
    """(shape, chunks, basic selection) for a hypothesis ``@composite``: small
    shapes and chunks, and per dimension an int, ``:`` or a slice with any step
    (bounds past either end included)."""
    from hypothesis import strategies as st

    ndim = draw(st.integers(min_ndim, max_ndim))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    sel = []
    for s in shape:
        kind = draw(st.sampled_from(["slice", "int", "all"]))
        if kind == "int":
            sel.append(draw(st.integers(-s, s - 1)))
        elif kind == "all":
            sel.append(slice(None))
        else:
            a = draw(st.one_of(st.none(), st.integers(-s - 2, s + 2)))
            b = draw(st.one_of(st.none(), st.integers(-s - 2, s + 2)))
            sel.append(slice(a, b, draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))))
    return shape, chunks, tuple(sel)

