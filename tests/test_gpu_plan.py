"""The GPU scatter plan, run by its numpy executor: random slice selections over
random chunk grids must give exactly what numpy indexing of the full array gives.

This proves the descriptor table (and so the logic of kernels/scatter.cu, which
walks the same table) on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuzarr
from _gpu_helpers import draw_grid_selection, require_nvrtc, skip_or_fail
from cuzarr.core.engine import chunk_items, coordinate_items
from cuzarr.gpu.plan import (
    PLAN_DTYPE,
    build_plan,
    check_plan_bounds,
    execute_gather_numpy,
    execute_plan_numpy,
    is_slice_only,
    scatter_fancy,
)
from cuzarr.indexing.selection import BasicPlan, normalize_numpy
from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

FILL = -7


def _stage(full, chunks, plan, items, order="C", swap=False, garbage=99):
    """Decoded chunks (edge chunks padded at their stored shape) in their slots."""
    staging = np.zeros(plan.staging_nbytes, dtype=np.uint8)
    for i, it in enumerate(items):
        if plan.slots[i] < 0:
            continue
        coords = it[0]
        region = tuple(
            slice(c * ch, min((c + 1) * ch, s)) for c, ch, s in zip(coords, chunks, full.shape)
        )
        chunk = np.full(chunks, garbage, dtype=full.dtype)
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = full[region]
        if swap:
            chunk = chunk.astype(chunk.dtype.newbyteorder())
        raw = chunk.tobytes(order=order)
        staging[plan.slots[i] : plan.slots[i] + len(raw)] = np.frombuffer(raw, np.uint8)
    return staging


def _reference(full, chunks, missing):
    ref = full.copy()
    for coords in missing:
        ref[tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(coords, chunks))] = FILL
    return ref


@st.composite
def cases(draw):
    shape, chunks, sel = draw_grid_selection(draw, 1, 3)
    seed = draw(st.integers(0, 2**16))
    order = draw(st.sampled_from(["C", "F"]))
    dtype = draw(st.sampled_from(["i1", "<i2", "<i4", "<f8", "<c16", "V3"]))
    swap = draw(st.booleans())
    strided_out = draw(st.booleans())
    return shape, chunks, sel, seed, order, dtype, swap, strided_out


def _run(shape, chunks, sel, seed, order, dtype, swap, strided_out):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    full = rng.integers(0, 250, size=(*shape, dt.itemsize), dtype=np.uint8).view(dt)[..., 0]
    grid = RegularChunkGrid(chunks)
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks)]
    plan_sel = normalize_numpy(sel, shape, dims)
    assert isinstance(plan_sel, BasicPlan)
    items = chunk_items(plan_sel.projections)
    assert is_slice_only(items)
    missing = {it[0] for it in items if rng.random() < 0.25}
    present = [it[0] not in missing for it in items]
    bshape = plan_sel.buffer_shape
    if strided_out:
        big = np.zeros(tuple(2 * b + 1 for b in bshape), dtype=dt)
        out = big[tuple(slice(1, None, 2) for _ in bshape)]
    else:
        out = np.zeros(bshape, dtype=dt)
    swap_unit = 0
    if swap and dt.kind in "iufc" and dt.itemsize > 1:
        swap_unit = dt.itemsize // 2 if dt.kind == "c" else dt.itemsize
    plan = build_plan(
        items,
        grid.stored_chunk_shape,
        out.shape,
        out.strides,
        dt.itemsize,
        present=present,
        chunk_order=order,
        swap=swap_unit,
    )
    assert plan.table.dtype == PLAN_DTYPE
    staging = _stage(full, chunks, plan, items, order=order, swap=bool(swap_unit))
    fill = np.zeros((), dt) if dt.kind == "V" else FILL
    execute_plan_numpy(plan.table, staging, out, fill)
    ref = full.copy()
    for coords in missing:
        ref[tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(coords, chunks))] = fill
    expected = np.asarray(ref[sel]).reshape(bshape)
    np.testing.assert_array_equal(out, expected)
    return full, grid, items, plan, out, fill


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_plan_matches_numpy_indexing(case):
    _run(*case)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_gather_inverts_scatter(case):
    """Gathering the output back into chunk slots restores the selected elements;
    FLAG_PAD builds whole new chunks (fill outside the region)."""
    order = case[4]
    _full, grid, items, plan, out, fill = _run(*case)
    # every item gets a slot for the gather
    plan2 = build_plan(items, grid.stored_chunk_shape, out.shape, out.strides,
                       out.itemsize, chunk_order=order, swap=int(plan.table["swap"][0])
                       if len(plan.table) else 0, pad=True)
    staging = np.full(plan2.staging_nbytes, 0x5A, dtype=np.uint8)
    execute_gather_numpy(plan2.table, staging, out, fill)
    if out.base is not None:  # the strided view of a bigger array: same layout again
        back = np.zeros_like(out.base)[tuple(slice(1, None, 2) for _ in out.shape)]
    else:
        back = np.zeros_like(out)
    execute_plan_numpy(plan2.table, staging, back, fill)
    np.testing.assert_array_equal(back, out)
    # outside the region each padded chunk holds the fill value
    for i, row in enumerate(plan2.table):
        cshape = tuple(int(x) for x in row["chunk_shape"][: row["ndim"]])
        raw = staging[plan2.slots[i] : plan2.slots[i] + plan2.slot_nbytes[i]]
        dt = out.dtype.newbyteorder() if row["swap"] else out.dtype
        chunk = raw.view(dt).reshape(cshape, order=order)
        mask = np.ones(cshape, bool)
        region = tuple(
            slice(int(row["start"][d]), int(row["stop"][d]), int(row["step"][d]))
            for d in range(row["ndim"])
        )
        mask[region] = False
        if dt.kind != "V":
            assert np.all(chunk[mask] == fill)


def test_zero_dim_and_empty():
    full = np.array(5, dtype="<i4")
    items = chunk_items([])
    plan = build_plan(items, lambda c: (), (), (), 4)
    staging = np.frombuffer(full.tobytes(), np.uint8).copy()
    staging = np.concatenate([staging, np.zeros(plan.staging_nbytes - 4, np.uint8)])
    out = np.zeros((), "<i4")
    execute_plan_numpy(plan.table, staging, out, 0)
    assert out == 5
    empty = build_plan([], lambda c: (1,), (0,), (4,), 4)
    assert len(empty) == 0 and empty.staging_nbytes == 0


def test_bounds_check_refuses_bad_rows():
    items = [((0,), (slice(0, 4),), (slice(0, 4),), True)]
    plan = build_plan(items, lambda c: (4,), (4,), (4,), 4)
    check_plan_bounds(plan.table, plan.staging_nbytes, 0, 16)
    with pytest.raises(ValueError, match="outside"):
        check_plan_bounds(plan.table, plan.staging_nbytes, 0, 12)
    bad = plan.table.copy()
    bad["start"][0, 0] = 1  # reads past the chunk
    with pytest.raises(ValueError, match="outside"):
        check_plan_bounds(bad, plan.staging_nbytes, 0, 16)
    with pytest.raises(ValueError, match="elements"):
        build_plan([((0,), (slice(0, 3),), (slice(0, 4),), False)], lambda c: (4,), (4,), (4,), 4)


def test_fancy_items_fall_back():
    """Point selections (vindex) carry integer arrays: per-chunk fancy assignment."""
    shape, chunks = (10, 7), (3, 4)
    full = np.arange(70).reshape(shape)
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks)]
    coords = [np.array([1, 8, 4, 9, 0]), np.array([6, 0, 3, 3, 0])]
    items = coordinate_items(dims, coords)
    assert not is_slice_only(items)
    buf = np.zeros(5, full.dtype)
    chunks_data = []
    for k, it in enumerate(items):
        region = tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(it[0], chunks))
        chunk = np.zeros(chunks, full.dtype)
        part = full[region]
        chunk[: part.shape[0], : part.shape[1]] = part
        chunks_data.append(None if k == 0 else chunk)
    scatter_fancy(items, chunks_data, buf, -1)
    expected = full[tuple(coords)]
    expected[items[0][2]] = -1
    np.testing.assert_array_equal(buf, expected)


def test_plan_table_layout_matches_header():
    """The C struct in kernels/cuzarr_plan.cuh mirrors PLAN_DTYPE field by field."""
    from pathlib import Path

    header = (Path(__file__).parents[1] / "kernels" / "cuzarr_plan.cuh").read_text()
    for name in PLAN_DTYPE.names:
        assert f" {name}" in header, name
    assert f"CUZARR_PLAN_ROW_BYTES {PLAN_DTYPE.itemsize}" in header
    assert f"CUZARR_MAX_DIMS {PLAN_DTYPE['n'].shape[0]}" in header


def test_many_chunks_product():
    # a plan over a 3-d grid of many chunks, every chunk partly selected
    shape, chunks = (20, 17, 9), (3, 4, 2)
    case = (shape, chunks, (slice(1, 19, 2), slice(None, None, -3), 4), 3, "C", "<i4", False,
            True)
    _run(*case)


@pytest.mark.parametrize("arch", ["80", "90"])
def test_kernels_compile_with_nvrtc(arch):
    """Every kernel compiles with CuPy's NVRTC (no device needed); nvcc compiles
    them in CI too (scripts/compile_kernels.sh)."""
    require_nvrtc()
    from cuzarr.gpu import kernels

    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # pragma: no cover - depends on the environment
        skip_or_fail(f"NVRTC library not found ({e}); pip install nvidia-cuda-nvrtc")
    sizes = kernels.compile_check(arch)
    assert set(sizes) == set(kernels.SOURCES) and all(sizes.values())


def test_kernel_sources_found():
    from cuzarr.gpu import kernels

    src = kernels.source("scatter.cu")
    assert "struct cuzarr_plan_row" in src and "#include" not in src


def _draw_read(data, max_ndim):
    """(grid, plan, chunk items) of a drawn read: a basic selection of up to
    ``max_ndim`` dimensions over a regular or a rectilinear chunk grid."""
    from cuzarr.metadata.chunk_grid import RectilinearChunkGrid

    shape, chunks, sel = draw_grid_selection(data.draw, 1, max_ndim)
    if data.draw(st.booleans()):
        edges = [data.draw(st.lists(st.integers(1, 4), min_size=s, max_size=s)) for s in shape]
        grid = RectilinearChunkGrid(edges)
    else:
        grid = RegularChunkGrid(chunks)
    plan_sel = normalize_numpy(sel, shape, list(grid.dims(shape)))
    return grid, plan_sel, chunk_items(plan_sel.projections)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_product_rows_match_per_item_rows(data):
    """Items that are (a window of) a product of per-dimension projections get
    their table from the per-dimension rows (``ChunkItems.dims``), vectorised:
    the same table, row for row, as worked out item by item, on regular and
    rectilinear grids."""
    grid, plan_sel, items = _draw_read(data, 3)
    if not items:
        return
    lo = data.draw(st.integers(0, len(items) - 1))
    hi = data.draw(st.integers(lo + 1, len(items)))
    part = items.window(lo, hi) if hasattr(items, "window") else items[lo:hi]
    out = np.zeros(plan_sel.buffer_shape, "<i4")
    args = (grid.stored_chunk_shape, out.shape, out.strides, 4)
    fast = build_plan(part, *args)
    slow = build_plan(list(part), *args)
    np.testing.assert_array_equal(fast.table, slow.table)
    np.testing.assert_array_equal(fast.slots, slow.slots)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_product_rows_of_a_subset_match_per_item_rows(data):
    """A :meth:`ChunkItems.subset` (the inner chunks of some shards, in any
    order) keeps its positions in the product: the same table as item by item."""
    shape, chunks, sel = draw_grid_selection(data.draw, 1, 3)
    grid = RegularChunkGrid(chunks)
    plan_sel = normalize_numpy(sel, shape, list(grid.dims(shape)))
    items = chunk_items(plan_sel.projections)
    if not items:
        return
    ids = data.draw(st.lists(st.integers(0, len(items) - 1), min_size=1, max_size=len(items)))
    part = items.subset(ids)
    assert [tuple(c) for c in part.coords()] == [tuple(items[i][0]) for i in ids]
    out = np.zeros(plan_sel.buffer_shape, "<i4")
    args = (grid.stored_chunk_shape, out.shape, out.strides, 4)
    np.testing.assert_array_equal(build_plan(part, *args).table, build_plan(list(part), *args).table)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_window_rows_fill_the_plan_as_numpy_does(data):
    """``native.window_rows`` fills a batch's plan rows in C from the read's
    per-dimension rows (``plan_read``'s ``ReadDims``): the same rows, slots,
    slot sizes and whole-block flags as the numpy table, for windows and
    subsets of reads over regular and rectilinear grids, either chunk order,
    byte-swapped or not, some chunks missing or not."""
    import cuzarr
    from cuzarr.gpu.batch import STREAM_DTYPE
    from cuzarr.gpu.plan import plan_read, whole_block
    from cuzarr.runtime import native

    if not native.available():
        skip_or_fail("the C loops are not built")
    grid, plan_sel, items = _draw_read(data, 4)
    if not items:
        return
    dtype = data.draw(st.sampled_from(["<i4", "<f8", "|u1"]))
    order = data.draw(st.sampled_from(["C", "F"]))
    swap = data.draw(st.sampled_from([0, np.dtype(dtype).itemsize]))
    out = np.zeros(plan_sel.buffer_shape, dtype)
    fn = grid.stored_chunk_shape
    itemsize = out.dtype.itemsize
    dims = plan_read(items, fn, out.shape, out.strides, itemsize, order, swap)
    assert dims is not None
    if data.draw(st.booleans()):
        lo = data.draw(st.integers(0, len(items) - 1))
        part = items.window(lo, data.draw(st.integers(lo + 1, len(items))))
    else:
        part = items.subset(data.draw(st.lists(st.integers(0, len(items) - 1), min_size=1,
                                               max_size=len(items))))
    n = len(part)
    # some chunks missing (offset and size -1): the fill value, no slot
    missing = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    zero = np.where(missing, -1, 0).astype(np.int64)  # (empty chunks: none passes the check)
    table, slots, nbytes, whole, total, rows, _owners, done = native.window_rows(
        0, 0, 1, 1 << 20, np.zeros(1, np.uint8), zero, zero.copy(), None, part.start,
        part.positions_, dims, -1, 8, STREAM_DTYPE, PLAN_DTYPE)
    with cuzarr.config.set({"storage.native_io": False}):
        ref = build_plan(list(part), fn, out.shape, out.strides, itemsize, chunk_order=order,
                         swap=swap, present=~missing)
    np.testing.assert_array_equal(table, ref.table)
    assert slots.tolist() == ref.slots.tolist() and total == ref.staging_nbytes
    assert nbytes.tolist() == ref.slot_nbytes.tolist()
    assert whole.tolist() == (whole_block(ref.table) & ~missing).tolist()
    assert done.tolist() == missing.tolist() and len(rows) == 0
    # a chunk whose bytes lie elsewhere (offset -1, a size): nothing done
    zero[-1], sizes = -1, zero.copy()
    sizes[-1] = 5
    assert native.window_rows(0, 0, 1, 1 << 20, np.zeros(1, np.uint8), zero, sizes, None,
                              part.start, part.positions_, dims, -1, 8, STREAM_DTYPE,
                              PLAN_DTYPE) is None


def test_plan_read_makes_the_table_batches_gather_from():
    """Without the C loops, ``plan_read`` makes a read's descriptor table before
    its batches run; a batch's plan is then its rows of it, the same plan a
    batch of items that share no table builds for itself."""
    import cuzarr
    from cuzarr.gpu.plan import build_plan, plan_read
    from cuzarr.indexing.items import window

    shape, chunks = (37, 29), (8, 6)
    sel = (slice(3, 35, 2), slice(None, None, -1))
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks, strict=True)]
    out = np.zeros(normalize_numpy(sel, shape, dims).buffer_shape, "<f4")
    fn = RegularChunkGrid(chunks).stored_chunk_shape
    items = chunk_items(normalize_numpy(sel, shape, dims).projections)
    with cuzarr.config.set({"storage.native_io": False}):
        assert plan_read(items, fn, out.shape, out.strides, 4) is None
    tables = [k for k in items.shared if k[0] == "plan-table"]
    assert len(tables) == 1
    made = items.shared[tables[0]]
    lo, hi = 3, 11
    got = build_plan(window(items, lo, hi), fn, out.shape, out.strides, 4)
    assert [k for k in items.shared if k[0] == "plan-table"] == tables
    assert items.shared[tables[0]] is made  # gathered from, not made again
    alone = chunk_items(normalize_numpy(sel, shape, dims).projections)
    want = build_plan(window(alone, lo, hi), fn, out.shape, out.strides, 4)
    assert (got.table == want.table).all() and (got.slots == want.slots).all()
    # a window's rows taken as one block equal the rows gathered one by one,
    # with some chunks missing too; the read's arrays stay read-only
    for present in (np.ones(hi - lo, bool), np.arange(hi - lo) % 3 != 1):
        block = made.run(lo, hi, present, 4)
        each = made.rows(np.arange(lo, hi), present, 4)
        assert (block.table == each.table).all() and (block.slots == each.slots).all()
        assert (block.slot_nbytes == each.slot_nbytes).all()
        assert (block.whole == each.whole).all()
        assert block.staging_nbytes == each.staging_nbytes
    with pytest.raises(ValueError):
        made.run(lo, hi, np.ones(hi - lo, bool), 4).slot_nbytes[0] = 1


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_dim_rows_in_c_with_numpy_and_one_by_one_alike(data):
    """A dimension's plan rows are the same made in C (``native.slice_rows``),
    with numpy and one chunk at a time (as a projection of a few chunks gets
    them): for a slice, a stepped slice and integer positions (whose chunks
    that are no run keep arrays, which C leaves to Python)."""
    import cuzarr.gpu.plan as plan_mod
    from cuzarr.indexing.projection import DimProjection

    size = data.draw(st.integers(1, 200))
    chunk = data.draw(st.integers(1, 12))
    kind = data.draw(st.sampled_from(["slice", "stepped", "points"]))
    if kind == "points":
        n = data.draw(st.integers(1, 80))
        sel = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)))
    else:
        a = data.draw(st.integers(0, size - 1))
        b = data.draw(st.integers(a + 1, size))
        sel = slice(a, b, 1 if kind == "slice" else data.draw(st.integers(2, 5)))
    p = normalize_numpy((sel,), (size,), [DimGrid(size, chunk)]).projections[0]
    # (the slices themselves, without the numpy-made bounds a long run keeps)
    p = DimProjection(p.chunks, p.chunk_sels, p.out_sels, p.complete, p.out_len)
    extents = [chunk] * len(p.chunks)
    rows = {}
    for route, limit, c_loops in (("c", -1, True), ("numpy", -1, False),
                                  ("one by one", 10**9, False)):
        mp = pytest.MonkeyPatch()
        mp.setattr(plan_mod, "_ROWS_ONE_BY_ONE", limit)
        try:
            with cuzarr.config.set({"storage.native_io": c_loops}):
                rows[route] = plan_mod._dim_rows(0, p, extents, p.out_len, 4)
        except TypeError:  # (positions no slice stands for: no rows, whichever way)
            rows[route] = None
        finally:
            mp.undo()
    if rows["one by one"] is None:
        assert rows["c"] is None and rows["numpy"] is None
        return
    np.testing.assert_array_equal(rows["c"], rows["one by one"])
    np.testing.assert_array_equal(rows["numpy"], rows["one by one"])


def test_slice_rows_refuses_what_is_not_a_step_1_slice_inside_its_chunk():
    """``native.slice_rows`` answers None (the caller's Python rows then) for an
    array, a step, a missing bound or a bound past the chunk or the output."""
    from cuzarr.runtime import native

    if not native.available():
        pytest.skip("the C extension is not built here")
    good = native.slice_rows([slice(1, 3), slice(0, 2)], [slice(0, 2), slice(2, 4)], [4, 4], 4, 8)
    np.testing.assert_array_equal(good, [[1, 3, 1, 2, 8, 0, 4], [0, 2, 1, 2, 8, 16, 4]])
    assert native.slice_rows([np.int64(1) and slice(np.int64(1), np.int64(2))], [slice(0, 1)],
                             [2], 1, 1) is not None  # numpy integers as bounds
    for cs, os_, ext, out_len in (
        ([np.array([0, 1])], [slice(0, 2)], [4], 2),  # an array
        ([slice(0, 4, 2)], [slice(0, 2)], [4], 2),  # a step
        ([slice(None, 2)], [slice(0, 2)], [4], 2),  # no start
        ([slice(0, 5)], [slice(0, 5)], [4], 5),  # past its chunk
        ([slice(0, 2)], [slice(1, 3)], [4], 2),  # past the output
        ([slice(0, 2)], [slice(0, 3)], [4], 3),  # lengths differ
        ([slice(-1, 2)], [slice(0, 3)], [4], 3),  # negative start
    ):
        assert native.slice_rows(cs, os_, ext, out_len, 1) is None, (cs, os_)
    with pytest.raises(ValueError, match="differ in length"):
        native.slice_rows([slice(0, 1)], [], [1], 1, 1)
