"""Chunk items (``cuzarr.indexing.items``): items made from per-dimension
projections when first asked for are the same items, in the same order, as
the eager product, and a device read plans without making them."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cuzarr
from cuzarr.core.engine import chunk_keys
from cuzarr.indexing.items import ChunkItems, chunk_items
from cuzarr.indexing.projection import (
    EDGE,
    DimProjection,
    RunProjection,
    combine_complete,
    project_slice,
)
from cuzarr.indexing.selection import normalize_numpy
from cuzarr.metadata.chunk_grid import DimGrid
from cuzarr.storage.memory import MemoryStore


def _eager(projections: list[DimProjection]) -> list:
    """The items as ``chunk_items`` made them before they were lazy."""
    flags = [set(p.complete) for p in projections]
    mixed = any(2 in f for f in flags) and any(EDGE in f for f in flags)
    prod = itertools.product
    return list(zip(prod(*(p.chunks for p in projections)),
                    prod(*(p.chunk_sels for p in projections)),
                    prod(*(p.out_sels for p in projections)),
                    map(combine_complete if mixed else all,
                        prod(*(p.complete for p in projections)))))


@st.composite
def _selections(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 40)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 7)) for _ in range(ndim))
    sel = []
    for n in shape:
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, n))
        step = draw(st.sampled_from([1, 1, 1, 2, -1]))
        sel.append(slice(a, b, step) if step > 0 else slice(b - 1, a - 1 if a else None, -1))
    return shape, chunks, tuple(sel)


@settings(max_examples=150, deadline=None)
@given(_selections(), st.data())
def test_lazy_items_are_the_eager_product(case: tuple, data: st.DataObject) -> None:
    shape, chunks, sel = case
    dims = [DimGrid(n, c) for n, c in zip(shape, chunks, strict=True)]
    plan = normalize_numpy(sel, shape, dims)
    items = chunk_items(plan.projections)
    want = _eager(plan.projections)
    n = len(want)
    assert len(items) == n
    # one by one (negative indices too), before and after the whole list is made
    j = data.draw(st.integers(-n, n - 1))
    assert items[j] == want[j]
    lo = data.draw(st.integers(0, n - 1))
    hi = data.draw(st.integers(lo, n))
    assert list(items.window(lo, hi)) == want[lo:hi]
    assert items[lo:hi] == want[lo:hi] and items[::-1] == want[::-1]
    ids = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    part = items.subset(ids)
    assert list(part) == [want[i] for i in ids]
    if ids:  # a window of a subset: the subset's positions
        assert list(part.window(0, 1)) == [want[ids[0]]]
    assert items == want and want == items and list(items) == want
    assert items[j] == want[j]
    assert list(items.window(lo, hi)) == want[lo:hi]  # (from the made list)


def test_a_run_projection_equals_the_loop_made_one() -> None:
    dim = DimGrid(1000, 7)
    run = project_slice(3, 990, 1, dim)  # >= 16 chunks: made with numpy
    assert isinstance(run, RunProjection)
    loop = DimProjection(
        run.chunks,
        [slice(max(3, c * 7) - c * 7, min(990, c * 7 + 7) - c * 7) for c in run.chunks],
        [slice(max(3, c * 7) - 3, min(990, c * 7 + 7) - 3) for c in run.chunks],
        [c * 7 >= 3 and c * 7 + 7 <= 990 for c in run.chunks],
        987,
    )
    assert run == loop and loop == run
    assert run.complete_kinds() == set(loop.complete)
    assert run != DimProjection(run.chunks, loop.chunk_sels, loop.out_sels, loop.complete, 986)


def test_a_read_plans_without_making_items_or_slices() -> None:
    """What a device read asks of its items (length, windows, subsets, slices
    only, positions, coordinates, keys) makes neither items nor slices."""

    shape, chunks = (64, 640), (1, 10)
    dims = [DimGrid(n, c) for n, c in zip(shape, chunks, strict=True)]
    plan = normalize_numpy((slice(None), slice(None)), shape, dims)
    items = chunk_items(plan.projections)
    assert isinstance(items, ChunkItems) and len(items) == 64 * 64
    part = items.window(100, 164)
    sub = items.subset(np.arange(0, 4096, 64))
    assert items.slices_only() and part.slices_only()
    assert part.positions().tolist() == list(range(100, 164))
    assert sub.coords()[:3].tolist() == [[0, 0], [1, 0], [2, 0]]
    arr = cuzarr.create_array(MemoryStore(), name="a", shape=shape, chunks=chunks,
                              dtype="uint8")
    keys = chunk_keys(arr.store_path, arr.metadata, items)
    assert keys[:2] == ["a/c/0/0", "a/c/0/1"] and len(keys) == 4096
    for p in plan.projections:
        if isinstance(p, RunProjection):
            assert not {"chunk_sels", "out_sels", "complete"} & set(vars(p))
    assert items._list is None and part._list is None and sub._list is None
    assert part[0] == ((1, 36), (slice(0, 1), slice(0, 10)), (slice(1, 2), slice(360, 370)),
                       True)


def test_keys_of_a_part_of_the_product_are_its_own() -> None:
    """``chunk_keys`` renders keys from the projections only for the whole
    product; a window or subset of it gets its own items' keys."""
    arr = cuzarr.create_array(MemoryStore(), name="a", shape=(6, 8), chunks=(2, 2),
                              dtype="uint8")
    dims = arr._async_array._dims()
    items = chunk_items(normalize_numpy((slice(None), slice(None)), arr.shape, dims).projections)
    full = chunk_keys(arr.store_path, arr.metadata, items)
    assert len(full) == 12 and full[4] == "a/c/1/0"
    assert chunk_keys(arr.store_path, arr.metadata, items.window(3, 7)) == full[3:7]
    assert chunk_keys(arr.store_path, arr.metadata, items.subset([5, 1])) == [full[5], full[1]]
