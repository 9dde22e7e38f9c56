"""The scatter plan as a descriptor table: one row per chunk of a read.

A read request decodes its chunks into one *staging* buffer (each chunk in its own
16-byte aligned slot, laid out as the codec pipeline produces it, C or F order) and
then copies the selected region of every chunk into the output with one batched
kernel launch (``kernels/scatter.cu``). The kernel only sees this table, so the same
table run by :func:`execute_plan_numpy` on the host proves its logic on the CPU.

Row fields (``PLAN_DTYPE``; the C struct ``cuzarr_plan_row`` in
``kernels/cuzarr_plan.cuh`` has the same layout, 8-byte aligned, no padding):

* ``src_offset``  byte offset of the chunk's slot in the staging buffer
* ``dst_offset``  byte offset, from the output's data pointer, of the first
  selected element
* ``count``       number of selected elements (product of ``n``)
* ``chunk_count`` elements in the decoded chunk (product of ``chunk_shape``)
* ``ndim``, ``itemsize``
* ``flags``       ``FLAG_MISSING`` (write the fill value, no source),
  ``FLAG_PAD`` (gather: write fill outside the region)
* ``swap``        byte-swap unit (0: none; else reverse every ``swap`` bytes)
* ``chunk_shape[d]``, ``src_strides[d]`` (bytes) of the decoded chunk
* ``start[d]``, ``stop[d]``, ``step[d]``, ``n[d]``: the clipped region inside the
  chunk (``range(start, stop, step)`` holds ``n`` indices; ``step`` > 0)
* ``dst_strides[d]`` bytes between consecutive selected elements in the output
  (negative for a reversed output slice)

Only slice selections make a table (:func:`is_slice_only`); items with integer
arrays go through :func:`scatter_fancy` (per-chunk fancy assignment, numpy or
CuPy alike).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.indexing.items import ChunkItems
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.runtime import native

__all__ = [
    "FLAG_MISSING",
    "FLAG_PAD",
    "MAX_DIMS",
    "PLAN_DTYPE",
    "ScatterPlan",
    "build_plan",
    "check_plan_bounds",
    "execute_gather_numpy",
    "execute_plan_numpy",
    "fill_bytes",
    "is_slice_only",
    "plan_read",
    "scatter_fancy",
    "whole_block",
]

MAX_DIMS = 8
STAGING_ALIGN = 16
FLAG_MISSING = 1
FLAG_PAD = 2

PLAN_DTYPE = np.dtype(
    [
        ("src_offset", "<i8"),
        ("dst_offset", "<i8"),
        ("count", "<i8"),
        ("chunk_count", "<i8"),
        ("ndim", "<i4"),
        ("itemsize", "<i4"),
        ("flags", "<i4"),
        ("swap", "<i4"),
        ("chunk_shape", "<i8", (MAX_DIMS,)),
        ("src_strides", "<i8", (MAX_DIMS,)),
        ("start", "<i8", (MAX_DIMS,)),
        ("stop", "<i8", (MAX_DIMS,)),
        ("step", "<i8", (MAX_DIMS,)),
        ("n", "<i8", (MAX_DIMS,)),
        ("dst_strides", "<i8", (MAX_DIMS,)),
    ],
    align=True,
)
assert PLAN_DTYPE.itemsize == 8 * 4 + 4 * 4 + 7 * 8 * MAX_DIMS  # 496: matches the C struct


@dataclass
class ScatterPlan:
    """A descriptor table plus the staging layout it reads from.

    ``slots[i]`` is the staging byte offset of item ``i``'s decoded chunk (``-1``
    for a missing chunk) and ``slot_nbytes[i]`` its size; decoders write chunk
    ``i`` to ``staging[slots[i] : slots[i] + slot_nbytes[i]]``."""

    table: np.ndarray
    staging_nbytes: int
    slots: np.ndarray
    slot_nbytes: np.ndarray
    itemsize: int
    #: per row, whether it copies a whole chunk to one contiguous block of the
    #: output (:func:`whole_block`), where the read's table knew it already
    whole: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.table)

    @property
    def max_count(self) -> int:
        return int(self.table["count"].max()) if len(self.table) else 0


def is_slice_only(items: Sequence[Any]) -> bool:
    """True when every in-chunk and output selection is a tuple of slices (the
    case the table handles); false when any holds an integer array."""
    known = items.slices_only() if isinstance(items, ChunkItems) else None
    if known is not None:
        return known  # from the per-dimension lists, not per item
    for it in items:
        for s in it[1]:
            if not isinstance(s, slice):
                return False
        for s in it[2]:
            if not isinstance(s, slice):
                return False
    return True


def _c_strides(shape: Sequence[int], itemsize: int, order: str) -> list[int]:
    strides = [0] * len(shape)
    acc = itemsize
    dims = range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))
    for d in dims:
        strides[d] = acc
        acc *= max(1, int(shape[d]))
    return strides


def build_plan(
    items: Sequence[Any],
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]] | Sequence[Sequence[int]],
    out_shape: Sequence[int],
    out_strides: Sequence[int],
    itemsize: int,
    *,
    present: Sequence[bool] | np.ndarray | None = None,
    chunk_order: str = "C",
    swap: int = 0,
    pad: bool = False,
) -> ScatterPlan:
    """Build the descriptor table for slice-only chunk items.

    ``items``: ``(chunk_coords, chunk_sel, out_sel, complete)`` tuples as made by
    ``cuzarr.core.engine.chunk_items``; ``chunk_shape``: a function of the chunk
    coordinates giving the decoded (stored) chunk shape
    (``grid.stored_chunk_shape``), or a list with one shape per item;
    ``out_shape`` / ``out_strides`` (bytes) describe the output buffer;
    ``present[i]`` false marks chunk ``i`` missing (filled, no staging slot);
    ``chunk_order``: the decoded chunk's memory order; ``swap``: byte-swap unit
    (0 for native data); ``pad``: set ``FLAG_PAD`` (for gathers that build whole
    new chunks).
    """
    n_items = len(items)
    ndim = len(out_shape)
    if ndim > MAX_DIMS:
        raise ValueError(f"the GPU plan handles up to {MAX_DIMS} dimensions, not {ndim}")
    if len(out_strides) != ndim:
        raise ValueError("out_strides must have one entry per output dimension")
    if present is None:
        present = np.ones(n_items, dtype=bool)
    shapes_fn = chunk_shape if callable(chunk_shape) else None
    out_shape = [int(s) for s in out_shape]
    out_strides = [int(s) for s in out_strides]
    if shapes_fn is not None and isinstance(items, ChunkItems) and items.slices_only():
        read = _read_table(items, shapes_fn, out_shape, out_strides, itemsize, chunk_order,
                           swap, pad)
        if read is not None:  # the read's table, made once: this batch's rows of it
            present = np.asarray(present, bool)
            if items.positions_ is None:  # a window: consecutive items
                return read.run(items.start, items.start + n_items, present, itemsize)
            return read.rows(items.positions(), present, itemsize)
        dims = _product_rows(items, shapes_fn, out_shape, out_strides)
        return _fill_table(np.zeros(n_items, dtype=PLAN_DTYPE), dims, np.asarray(present, bool),
                           itemsize, chunk_order, swap, pad)
    table = np.zeros(n_items, dtype=PLAN_DTYPE)
    # Items share their per-dimension selections (a chunk row, a chunk column):
    # each (dimension, chunk extent, chunk selection, output selection) is
    # worked out once, and the table's columns are filled from arrays.
    cache: dict[Any, tuple[int, ...]] = {}
    rows: list[list[tuple[int, ...]]] = []
    for i, it in enumerate(items):
        coords, csel, osel = it[0], it[1], it[2]
        cshape = tuple(shapes_fn(tuple(coords)) if shapes_fn else chunk_shape[i])  # type: ignore[index]
        if len(cshape) != ndim or len(csel) != ndim or len(osel) != ndim:
            raise ValueError(
                f"item {i}: chunk shape, chunk selection and output selection must all "
                f"have {ndim} dimensions (slice-only plans keep every dimension)"
            )
        row = []
        for d in range(ndim):
            key = (d, cshape[d], csel[d], osel[d])
            got = cache.get(key)
            if got is None:
                got = cache[key] = _dim_row(i, d, cshape[d], csel[d], osel[d], out_shape[d],
                                            out_strides[d])
            row.append(got)
        rows.append(row)
    # per item and dimension: start stop step n dst_stride d_off extent
    dims = np.array(rows, np.int64).reshape(n_items, ndim, 7)
    return _fill_table(table, dims, np.asarray(present, bool), itemsize, chunk_order, swap, pad)


def _product_rows(items: ChunkItems, chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
                  out_shape: list[int], out_strides: list[int]) -> np.ndarray:
    """``build_plan``'s (items x dimensions x 7) rows for items that are a window
    of the product of their per-dimension projections: each dimension's rows
    worked out once per read (kept in ``items.shared``, which the windows of
    one read share), then gathered by each item's index in the product
    (``np.unravel_index``), no Python step per item. Stored chunk shapes are
    per dimension (regular and rectilinear grids)."""
    dims = items.dims
    assert dims is not None
    ndim = len(dims)
    if ndim != len(out_shape):
        raise ValueError(
            f"chunk selections have {ndim} dimensions, the output {len(out_shape)} "
            "(slice-only plans keep every dimension)"
        )
    per_dim = _per_dim_rows(items, chunk_shape, out_shape, out_strides)
    pos = items.positions()
    at = np.unravel_index(pos, [len(p.chunks) for p in dims]) if ndim else ()
    out = np.empty((len(pos), ndim, 7), np.int64)
    for d in range(ndim):
        out[:, d] = per_dim[d][at[d]]
    return out


def _per_dim_rows(items: ChunkItems,
                  chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
                  out_shape: list[int], out_strides: list[int]) -> list[np.ndarray]:
    """Each dimension's (chunks x 7) :func:`_dim_rows` of a read whose items are
    the product of ``items.dims``: worked out once per read (kept in
    ``items.shared``)."""
    dims = items.dims
    assert dims is not None
    key = ("plan-rows", chunk_shape, tuple(out_shape), tuple(out_strides))
    per_dim = items.shared.get(key)
    if per_dim is None:
        per_dim = items.shared[key] = [
            np.ascontiguousarray(_dim_rows(d, p, _extents(chunk_shape, dims, d), out_shape[d],
                                           out_strides[d]), np.int64)
            for d, p in enumerate(dims)
        ]
    return per_dim


@dataclass(frozen=True)
class ReadDims:
    """What a read's batches build their plan rows from in C
    (``native.window_rows``): each dimension's rows (:func:`_dim_rows`; the
    read is their product, in C order) and how its chunks are stored."""

    rows: tuple[np.ndarray, ...]
    itemsize: int
    fortran: bool
    swap: int


# rows of a read's whole table kept for its batches (496 bytes each: 8 MiB)
READ_TABLE_MAX = 16384
_NO_TABLE = object()  # (a read too large for one is kept as None)


@dataclass
class _ReadTable:
    """A whole read's descriptor table (staging columns left to
    :func:`_with_slots`) and what each batch would otherwise work out again
    from its rows: slot sizes, padded, and :func:`whole_block`."""

    table: np.ndarray
    nbytes: np.ndarray
    padded: np.ndarray
    whole: np.ndarray
    #: running sum of ``padded`` (each batch of consecutive items takes its
    #: slots from it: no cumulative sum per batch)
    ends: np.ndarray

    def rows(self, pos: np.ndarray, present: np.ndarray, itemsize: int) -> ScatterPlan:
        """The plan of the items at ``pos`` of the read (one gather per column)."""
        return _with_slots(self.table[pos], present, itemsize, self.nbytes[pos],
                           self.padded[pos], self.whole[pos])

    def run(self, lo: int, hi: int, present: np.ndarray, itemsize: int) -> ScatterPlan:
        """:meth:`rows` of the consecutive items ``lo:hi``: their rows copied as
        one block, sizes and slots from the read's arrays (read-only views)."""
        if not present.all():
            return self.rows(np.arange(lo, hi, dtype=np.int64), present, itemsize)
        table = self.table[lo:hi].copy()
        ends = self.ends[lo:hi] - (int(self.ends[lo - 1]) if lo else 0)
        starts = ends - self.padded[lo:hi]
        table["src_offset"] = starts
        return ScatterPlan(table, int(ends[-1]) if hi > lo else 0, starts, self.nbytes[lo:hi],
                           itemsize, self.whole[lo:hi])


def plan_read(items: Any, chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
              out_shape: Sequence[int], out_strides: Sequence[int], itemsize: int,
              chunk_order: str = "C", swap: int = 0) -> ReadDims | None:
    """Before a read's batches run, what they plan from, once, on the thread
    that plans the read rather than in the first batch of each worker (right
    after that batch's copies have left the CPU's caches cold, ~1 ms for 1,024
    chunks there). Where the C loops are built: the per-dimension rows
    (:class:`ReadDims`), from which ``gpu.batch.prepare_batch`` fills each
    batch's rows in C (no table of the whole read: ~0.7 ms less per 1,024
    chunks); else the descriptor table of the whole read (:func:`_read_table`),
    which :func:`build_plan` gathers from. ``None``: no ``ReadDims``."""
    if not (isinstance(items, ChunkItems) and items.dims is not None and items.slices_only()):
        return None
    shape, strides = [int(s) for s in out_shape], [int(s) for s in out_strides]
    if not native.available():
        _read_table(items, chunk_shape, shape, strides, itemsize, chunk_order, swap, False)
        return None
    if len(items.dims) != len(shape) or len(shape) > MAX_DIMS:
        return None  # (build_plan raises its error)
    rows = _per_dim_rows(items, chunk_shape, shape, strides)
    return ReadDims(tuple(rows), itemsize, chunk_order == "F", swap)


def _read_table(items: ChunkItems, chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
                out_shape: list[int], out_strides: list[int], itemsize: int,
                chunk_order: str, swap: int, pad: bool) -> _ReadTable | None:
    """The descriptor table of every item of the product of ``items.dims`` (a
    whole read); made once per read (kept in ``items.shared``) so that each
    batch of it takes its rows with one gather. ``None`` for reads of more than
    ``READ_TABLE_MAX`` chunks (their batches build their own rows)."""
    dims = items.dims
    assert dims is not None
    key = ("plan-table", chunk_shape, tuple(out_shape), tuple(out_strides), itemsize,
           chunk_order, swap, pad)
    shared = items.shared
    got = shared.get(key, _NO_TABLE)
    if got is _NO_TABLE:
        total = math.prod(len(p.chunks) for p in dims)
        if total > READ_TABLE_MAX:
            shared[key] = None
            return None
        every = ChunkItems.product(dims, False, positions=np.arange(total, dtype=np.int64),
                                   shared=items.shared)
        rows = _product_rows(every, chunk_shape, out_shape, out_strides)
        table = np.zeros(total, dtype=PLAN_DTYPE)
        plan = _fill_table(table, rows, np.ones(total, bool), itemsize, chunk_order, swap, pad)
        nbytes = plan.table["chunk_count"].astype(np.int64) * itemsize
        padded = -(-nbytes // STAGING_ALIGN) * STAGING_ALIGN
        got = _ReadTable(plan.table, nbytes, padded, whole_block(plan.table), np.cumsum(padded))
        for arr in (got.nbytes, got.padded, got.whole, got.ends):
            arr.flags.writeable = False  # batches' plans hold views of them
        shared[key] = got
    return got


def _with_slots(table: np.ndarray, present: np.ndarray, itemsize: int,
                nbytes: np.ndarray | None = None, padded: np.ndarray | None = None,
                whole: np.ndarray | None = None) -> ScatterPlan:
    """A plan of ``table`` (filled but for its staging columns) with staging
    slots laid out in item order for the ``present`` chunks, missing ones
    flagged. ``nbytes`` / ``padded``: each row's slot size, and rounded up to
    ``STAGING_ALIGN``, where known."""
    present = np.asarray(present, bool)
    if nbytes is None:
        nbytes = table["chunk_count"].astype(np.int64) * itemsize
    if padded is None:
        padded = -(-nbytes // STAGING_ALIGN) * STAGING_ALIGN
    if present.all():
        ends = np.cumsum(padded)
        starts = ends - padded
        table["src_offset"] = starts
        return ScatterPlan(table, int(ends[-1]) if len(table) else 0, starts, nbytes, itemsize,
                           whole)
    padded = np.where(present, padded, 0)
    ends = np.cumsum(padded)
    starts = ends - padded
    table["src_offset"] = np.where(present, starts, 0)
    table["flags"][~present] |= FLAG_MISSING
    return ScatterPlan(table, int(ends[-1]) if len(table) else 0,
                       np.where(present, starts, -1), np.where(present, nbytes, 0), itemsize,
                       None if whole is None else whole & present)


def whole_block(t: np.ndarray) -> np.ndarray:
    """Which plan rows copy a whole chunk, unswapped, to one contiguous block of
    the output laid out as the chunk is (so its bytes can be decoded there)."""
    nd = int(t["ndim"][0]) if len(t) else 0
    n, shape = t["n"][:, :nd], t["chunk_shape"][:, :nd]
    ok = (t["swap"] == 0) & ((t["flags"] & FLAG_MISSING) == 0) & (t["count"] > 0)
    ok &= ((t["start"][:, :nd] == 0) & (t["step"][:, :nd] == 1) & (n == shape)).all(axis=1)
    same = (t["dst_strides"][:, :nd] == t["src_strides"][:, :nd]) | (n <= 1)
    return ok & same.all(axis=1)


def _extents(chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]], dims: list[Any],
             d: int) -> list[int]:
    """Stored extents along dimension ``d`` of the chunks of its projection."""
    grid = getattr(chunk_shape, "__self__", None)
    if type(grid) is RegularChunkGrid and chunk_shape == grid.stored_chunk_shape:
        return [int(grid.chunk_shape[d])] * len(dims[d].chunks)  # one shape for all
    first = [p.chunks[0] for p in dims]
    return [int(chunk_shape((*first[:d], c, *first[d + 1 :]))[d]) for c in dims[d].chunks]


# Projections of at most this many chunks get their rows one by one (_dim_rows):
# for one chunk, 2 against 40 us
_ROWS_ONE_BY_ONE = 8


def _dim_rows(d: int, p: Any, extents: list[int], out_len: int, out_stride: int) -> np.ndarray:
    """The rows of :func:`_dim_row` for every chunk of one dimension's projection:
    where every selection is a forward step-1 slice inside its chunk and its
    output (as ``project_slice`` makes them), in C (``native.slice_rows``: 64
    slices of a training batch 2 against ~55 us) or else with numpy; otherwise
    one by one."""
    runs = getattr(p, "runs", None)  # the same slices' bounds, where made with numpy
    if runs is None and native.available():  # the slices' bounds read in C
        rows = native.slice_rows(p.chunk_sels, p.out_sels, extents, out_len, out_stride)
        if rows is not None:
            return rows
        ok = False
    elif runs is not None:  # (its slices are not made: see RunProjection)
        ok, c, o = True, runs[:, :2], runs[:, 2:]
    elif len(p.chunks) <= _ROWS_ONE_BY_ONE:
        ok = False  # a few chunks (a small read): Python's loop costs less than numpy's calls
    else:
        cs, os_ = p.chunk_sels, p.out_sels
        ok = set(map(type, cs)) | set(map(type, os_)) <= {slice}
        ok = ok and {s.step for s in cs} | {s.step for s in os_} <= {None, 1}
        if ok:
            cols = [[s.start for s in cs], [s.stop for s in cs], [s.start for s in os_],
                    [s.stop for s in os_]]
            ok = not any(None in col for col in cols)
        if ok:
            c = np.array(cols[:2], np.int64).T
            o = np.array(cols[2:], np.int64).T
    if ok:
        ext = np.asarray(extents, np.int64)
        n = c[:, 1] - c[:, 0]
        ok = bool((c >= 0).all() and (c[:, 1] <= ext).all() and (n >= 0).all()
                   and (o >= 0).all() and (o[:, 1] <= out_len).all()
                   and (o[:, 1] - o[:, 0] == n).all())
    if not ok:
        rows = [_dim_row(j, d, e, a, b, out_len, out_stride)
                for j, (e, a, b) in enumerate(zip(extents, p.chunk_sels, p.out_sels, strict=True))]
        return np.array(rows, np.int64).reshape(len(rows), 7)
    stop = np.where(n > 0, c[:, 1], c[:, 0])
    return np.stack([c[:, 0], stop, np.ones_like(n), n, np.full_like(n, out_stride),
                     o[:, 0] * out_stride, ext], axis=1)


def _fill_table(table: np.ndarray, dims: np.ndarray, present: np.ndarray, itemsize: int,
                chunk_order: str, swap: int, pad: bool) -> ScatterPlan:
    """The descriptor table's columns from ``dims`` (items x dimensions x
    (start, stop, step, n, dst stride, dst offset, extent)), with staging slots
    laid out in item order for the present chunks."""
    n_items, ndim = dims.shape[:2]
    ext = dims[:, :, 6]
    n = dims[:, :, 3]
    for name, k in (("start", 0), ("stop", 1), ("step", 2), ("n", 3), ("dst_strides", 4),
                    ("chunk_shape", 6)):
        table[name][:, :ndim] = dims[:, :, k]
    table["src_strides"][:, :ndim] = _strides_cols(ext, itemsize, chunk_order)
    table["dst_offset"] = dims[:, :, 5].sum(axis=1) if ndim else 0
    table["count"] = n.prod(axis=1) if ndim else np.ones(n_items, np.int64)
    table["chunk_count"] = ext.prod(axis=1) if ndim else np.ones(n_items, np.int64)
    table["ndim"] = ndim
    table["itemsize"] = itemsize
    table["flags"] = FLAG_PAD if pad else 0
    table["swap"] = swap
    return _with_slots(table, present, itemsize)


def _dim_row(i: int, d: int, extent: int, cs: Any, os_: Any, out_len: int,
             out_stride: int) -> tuple[int, ...]:
    """(start, stop, step, n, dst stride, dst offset, extent) of one dimension of
    an item: the in-chunk slice walked forwards (a reversed one reverses the
    output side instead)."""
    if not isinstance(cs, slice) or not isinstance(os_, slice):
        raise TypeError("build_plan takes slice selections only (see is_slice_only)")
    start, stop, step = cs.indices(extent)
    if step <= 0:
        # A reversed in-chunk slice: walk it forwards and reverse the output.
        k = len(range(start, stop, step))
        if k:
            start, stop, step = start + (k - 1) * step, start + 1, -step
            o0, o1, ostep = os_.indices(out_len)
            olen = len(range(o0, o1, ostep))
            os_ = slice(o0 + (olen - 1) * ostep, None, -ostep)
        else:
            start, stop, step = 0, 0, 1
    nd = len(range(start, stop, step))
    o0, o1, ostep = os_.indices(out_len)
    if len(range(o0, o1, ostep)) != nd:
        raise ValueError(
            f"item {i}, dimension {d}: the chunk selection has {nd} elements, "
            f"the output selection {len(range(o0, o1, ostep))}"
        )
    stop = start + (nd - 1) * step + 1 if nd else start
    return (start, stop, step, nd, ostep * out_stride, o0 * out_stride, extent)


def _strides_cols(ext: np.ndarray, itemsize: int, order: str) -> np.ndarray:
    """Byte strides of decoded chunks of extents ``ext`` (items x dims), in
    ``order`` (an extent of 0 counts as 1, as in ``_c_strides``)."""
    ndim = ext.shape[1]
    strides = np.zeros_like(ext)
    acc = np.full(len(ext), itemsize, np.int64)
    for d in (range(ndim - 1, -1, -1) if order == "C" else range(ndim)):
        strides[:, d] = acc
        acc = acc * np.maximum(1, ext[:, d])
    return strides


def check_plan_bounds(table: np.ndarray, staging_nbytes: int, out_lo: int, out_hi: int) -> None:
    """Refuse a table whose rows would read outside the staging buffer or write
    outside ``[out_lo, out_hi)`` bytes of the output (relative to its data
    pointer). Vectorized; run before every kernel launch."""
    if len(table) == 0:
        return
    n = table["n"].astype(np.int64)
    last = np.where(n > 0, n - 1, 0)
    item = table["itemsize"].astype(np.int64)
    empty = table["count"] == 0
    # destination extent
    span = last * table["dst_strides"]
    lo = table["dst_offset"] + np.where(span < 0, span, 0).sum(axis=1)
    hi = table["dst_offset"] + np.where(span > 0, span, 0).sum(axis=1) + item
    bad = ~empty & ((lo < out_lo) | (hi > out_hi))
    # source extent (present rows only)
    present = (table["flags"] & FLAG_MISSING) == 0
    src_last = table["start"] + last * table["step"]
    shape_bad = ((table["start"] < 0) | (src_last >= np.maximum(table["chunk_shape"], 1)))
    shape_bad &= (np.arange(MAX_DIMS)[None, :] < table["ndim"][:, None]) & (n > 0)
    src_hi = table["src_offset"] + (
        (table["chunk_shape"] - 1).clip(0) * table["src_strides"]
    ).sum(axis=1) + item
    bad |= present & ~empty & (shape_bad.any(axis=1) | (table["src_offset"] < 0)
                               | (src_hi > staging_nbytes))
    bad |= present & (table["src_offset"] + table["chunk_count"] * item > staging_nbytes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"scatter plan row {i} reaches outside its buffers: {table[i]}")


class _View:
    """A strided uint8 view at an absolute address (mirrors the kernel's pointer
    arithmetic); ``owner`` keeps the memory alive."""

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], owner: Any):
        self.__array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "strides": strides,
            "typestr": "|u1",
            "version": 3,
        }
        self._owner = owner


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _out_extent(out: np.ndarray) -> tuple[int, int]:
    lo = hi = 0
    for s, st in zip(out.shape, out.strides):
        if s == 0:
            return 0, 0
        if st < 0:
            lo += (s - 1) * st
        else:
            hi += (s - 1) * st
    return lo, hi + out.itemsize


def fill_bytes(fill: Any, dtype: np.dtype) -> np.ndarray:
    """The fill value as ``itemsize`` native-order bytes."""
    return np.frombuffer(np.array(fill, dtype=dtype).tobytes(), dtype=np.uint8).copy()


def _swap(view: np.ndarray, itemsize: int, unit: int) -> np.ndarray:
    if unit <= 1:
        return view
    shp = view.shape[:-1] + (itemsize // unit, unit)
    return view.reshape(shp)[..., ::-1].reshape(view.shape)


def _host_bases(
    table: np.ndarray, staging: np.ndarray, arr: np.ndarray, fill: Any
) -> tuple[Any, int, int]:
    """For a host run of ``table``: check it against ``staging`` (bytes) and the
    array ``arr`` it was built for, then the fill value's bytes and the base
    addresses of ``arr`` and ``staging`` (0 for an empty staging buffer)."""
    lo, hi = _out_extent(arr)
    check_plan_bounds(table, staging.nbytes, lo, hi)
    return fill_bytes(fill, arr.dtype), _ptr(arr), _ptr(staging) if staging.size else 0


def execute_plan_numpy(
    table: np.ndarray, staging: np.ndarray, out: np.ndarray, fill: Any
) -> None:
    """Run a scatter table on the host: the CPU twin of ``cuzarr_scatter``.

    ``staging``: the decoded chunks (any array; read as bytes); ``out``: the
    output array the table was built for (same strides); ``fill``: the fill
    value for missing chunks."""
    staging = np.ascontiguousarray(staging).reshape(-1).view(np.uint8)
    fb, base_out, base_src = _host_bases(table, staging, out, fill)
    for row in table:
        nd = int(row["ndim"])
        if row["count"] == 0:
            continue
        isz = int(row["itemsize"])
        n = tuple(int(x) for x in row["n"][:nd])
        dst = np.asarray(
            _View(
                base_out + int(row["dst_offset"]),
                n + (isz,),
                tuple(int(x) for x in row["dst_strides"][:nd]) + (1,),
                out,
            )
        )
        if row["flags"] & FLAG_MISSING:
            dst[...] = fb
            continue
        src_ptr = base_src + int(row["src_offset"]) + sum(
            int(row["start"][d]) * int(row["src_strides"][d]) for d in range(nd)
        )
        src = np.asarray(
            _View(
                src_ptr,
                n + (isz,),
                tuple(int(row["step"][d]) * int(row["src_strides"][d]) for d in range(nd)) + (1,),
                staging,
            )
        )
        dst[...] = _swap(src, isz, int(row["swap"]))


def execute_gather_numpy(
    table: np.ndarray, staging: np.ndarray, value: np.ndarray, fill: Any
) -> None:
    """The reverse of :func:`execute_plan_numpy` (the CPU twin of
    ``cuzarr_gather``): copy each row's region of ``value`` into its chunk slot in
    ``staging``; rows with ``FLAG_PAD`` first set the rest of the chunk to the fill
    value (a new chunk), others keep what the slot holds (read-modify-write)."""
    staging = staging.reshape(-1).view(np.uint8)
    fb, base_val, base_st = _host_bases(table, staging, value, fill)
    for row in table:
        if row["flags"] & FLAG_MISSING:
            continue
        nd = int(row["ndim"])
        isz = int(row["itemsize"])
        if row["flags"] & FLAG_PAD:
            whole = np.asarray(
                _View(base_st + int(row["src_offset"]), (int(row["chunk_count"]), isz),
                      (isz, 1), staging)
            )
            whole[...] = _swap(np.broadcast_to(fb, whole.shape), isz, int(row["swap"]))
        if row["count"] == 0:
            continue
        n = tuple(int(x) for x in row["n"][:nd])
        src = np.asarray(
            _View(base_val + int(row["dst_offset"]), n + (isz,),
                  tuple(int(x) for x in row["dst_strides"][:nd]) + (1,), value)
        )
        dst_ptr = base_st + int(row["src_offset"]) + sum(
            int(row["start"][d]) * int(row["src_strides"][d]) for d in range(nd)
        )
        dst = np.asarray(
            _View(dst_ptr, n + (isz,),
                  tuple(int(row["step"][d]) * int(row["src_strides"][d]) for d in range(nd))
                  + (1,), staging)
        )
        dst[...] = _swap(src, isz, int(row["swap"]))


def scatter_fancy(
    items: Sequence[Any],
    chunks: Sequence[Any],
    out: Any,
    fill: Any,
) -> None:
    """Fallback for selections with integer arrays: ``out[osel] = chunk[csel]``
    per item (``chunks[i]`` is the decoded chunk or ``None`` when missing). Works
    unchanged for numpy and CuPy arrays (CuPy index arrays too)."""
    for it, chunk in zip(items, chunks, strict=True):
        osel = it[2]
        if chunk is None:
            out[osel] = fill
        else:
            out[osel] = chunk[it[1]]
