"""Test data shared by the GPU tests."""

from __future__ import annotations

import numpy as np


def sample(shape, dtype, seed=0, offset=0):
    """Deterministic data of any numeric dtype (see tests/_gpu_helpers.py)."""
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
