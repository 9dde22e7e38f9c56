"""Per-dimension projections (``cuzarr.indexing.projection``): the numpy
projection of integer positions on a regular grid, and the Python one of a few
positions, give exactly the selections of the per-chunk one (types included: a
slice stays a slice, an array an array of the same dtype), so every reader
plans the same items."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuzarr.indexing.projection as projection
from cuzarr.indexing.projection import DimProjection, project_array
from cuzarr.metadata.chunk_grid import DimGrid


def _with_threshold(monkeypatch: pytest.MonkeyPatch, n: int, idx: np.ndarray,
                    dim: DimGrid, few: int = 0) -> DimProjection:
    """``project_array`` with numpy from ``n`` chunks on, in the Python loop of
    a few positions up to ``few`` of them."""
    with monkeypatch.context() as m:
        m.setattr(projection, "_VECTOR_MIN", n)
        m.setattr(projection, "_FEW_POINTS", few)
        return project_array(idx, dim)


def _same(a: DimProjection, b: DimProjection) -> None:
    assert a.chunks == b.chunks and a.complete == b.complete and a.out_len == b.out_len
    for x, y in zip(a.chunk_sels + a.out_sels, b.chunk_sels + b.out_sels, strict=True):
        assert type(x) is type(y), (x, y)
        if isinstance(x, slice):
            assert x == y
        else:
            assert x.dtype == y.dtype and np.array_equal(x, y)


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 300), st.integers(1, 9), st.data())
def test_points_projected_with_numpy_as_chunk_by_chunk(size: int, chunk: int,
                                                       data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 200))
    idx = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)),
                   data.draw(st.sampled_from([np.int64, np.int32, np.uint16])))
    shape = data.draw(st.sampled_from(["as drawn", "unique", "sorted", "shuffled unique"]))
    if shape == "unique":
        idx = np.unique(idx)
    elif shape == "sorted":
        idx = np.sort(idx)
    elif shape == "shuffled unique":
        idx = np.random.default_rng(n).permutation(np.unique(idx))
    dim = DimGrid(size, chunk)
    mp = pytest.MonkeyPatch()
    try:
        chunk_by_chunk = _with_threshold(mp, 10**9, idx, dim)
        _same(_with_threshold(mp, 1, idx, dim), chunk_by_chunk)
        _same(_with_threshold(mp, 1, idx, dim, few=10**9), chunk_by_chunk)
    finally:
        mp.undo()


def test_a_shuffled_batch_projects_to_slices() -> None:
    """Random samples, one per chunk (a training batch): slices on both sides,
    each chunk's sample landing at its place in the batch."""
    idx = np.random.default_rng(0).permutation(1000)[:64]
    p = project_array(idx, DimGrid(1000, 1))
    assert p.chunks == sorted(idx.tolist())
    assert all(isinstance(s, slice) for s in p.chunk_sels + p.out_sels)
    assert [idx[o.start] for o in p.out_sels] == p.chunks
