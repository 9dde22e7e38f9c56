"""Per-dimension projection of a selection onto a chunk grid.

A ``DimProjection`` lists, for one dimension, every chunk the selection touches,
with the part of that chunk it reads (``chunk_sel``) and where those elements
land in the output (``out_sel``). A selection over an N-d array is the product
of its dimensions' projections (orthogonal indexing).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from cuzarr.metadata.chunk_grid import DimGrid, RectilinearDimGrid

__all__ = [
    "EDGE",
    "LOOSE",
    "DimProjection",
    "RunProjection",
    "any_per_chunk",
    "chunk_labels",
    "combine_complete",
    "project_array",
    "project_slice",
]

Sel = slice | np.ndarray


@dataclass
class DimProjection:
    """One dimension's chunks, in-chunk selections and output selections."""

    chunks: list[int]
    chunk_sels: list[Sel]
    out_sels: list[Sel]
    # Whether the selection covers the chunk's elements inside the array (no
    # read-modify-write needed): falsy, or truthy as ``True``, ``EDGE`` or ``LOOSE``
    # (see ``combine_complete``).
    complete: list[Any]
    out_len: int
    #: where the selections are step-1 slices made with numpy (``_project_run``):
    #: their bounds, one row per chunk (chunk start, chunk stop, output start,
    #: output stop), so that per-chunk tables need not read the slices back
    runs: np.ndarray | None = field(default=None, compare=False, repr=False)

    def complete_kinds(self) -> set[Any]:
        """The distinct ``complete`` flags of the chunks."""
        return set(self.complete)


# A chunk cut by the array's end (stored elements past it, stale after a shrink),
# covered by a step-1 slice or an int: zarr-python writes it whole, dropping them.
EDGE = 3
# Covered by an index array or a stepped slice: zarr-python never counts that as
# covering, so reads the chunk first and keeps a cut chunk's stale elements.
LOOSE = 2


def combine_complete(flags: tuple[Any, ...]) -> bool:
    """Whether one chunk is covered, from its dimensions' ``complete`` flags: as
    zarr-python, a chunk cut on one dimension and covered only loosely on another
    is read-modify-written (observable: the stale elements survive)."""
    return all(flags) and not (LOOSE in flags and EDGE in flags)


def project_slice(start: int, stop: int, step: int, dim: DimGrid) -> DimProjection:
    """Project ``range(start, stop, step)`` (already normalized by ``slice.indices``)."""
    n = len(range(start, stop, step))
    if n == 0:
        return DimProjection([], [], [], [], 0)
    if step < 0:
        last = start + (n - 1) * step
        asc = project_slice(last, start + 1, -step, dim)
        # Output positions run backwards: ascending position p lands at n - 1 - p.
        outs: list[Sel] = []
        for s in asc.out_sels:
            a, b = s.start, s.stop  # type: ignore[union-attr]
            hi = n - 1 - a
            lo = n - 1 - (b - 1)
            outs.append(slice(hi, lo - 1 if lo > 0 else None, -1))
        return DimProjection(asc.chunks, asc.chunk_sels, outs, asc.complete, n)
    if type(dim) is not DimGrid:
        return _project_slice_edges(start, step, n, dim)  # type: ignore[arg-type]
    last = start + (n - 1) * step
    chunk = dim.chunk
    c0, c1 = start // chunk, last // chunk
    chunks: list[int] = []
    csels: list[Sel] = []
    osels: list[Sel] = []
    complete: list[bool] = []
    if step == 1 and c1 - c0 >= _VECTOR_MIN:
        return _project_run(start, last, c0, c1, dim)
    if step == 1:
        for ci in range(c0, c1 + 1):
            off = ci * chunk
            first = start if start > off else off
            end = min(last, off + chunk - 1)
            cnt = end - first + 1
            o = first - start
            chunks.append(ci)
            csels.append(slice(first - off, first - off + cnt))
            osels.append(slice(o, o + cnt))
            dl = dim.data_len(ci)
            complete.append((EDGE if dl < chunk else True) if first == off and cnt == dl else False)
        return DimProjection(chunks, csels, osels, complete, n)
    for ci in range(c0, c1 + 1):
        off = ci * chunk
        end = min(last, off + chunk - 1)
        if _add_strided(ci, off, end, start, step, chunks, csels, osels):
            complete.append(LOOSE if chunk == 1 else False)
    return DimProjection(chunks, csels, osels, complete, n)


# Step-1 slices over at least this many chunks are projected with numpy.
_VECTOR_MIN = 16
_COMPLETE = (False, True, None, EDGE)


def _project_run(start: int, last: int, c0: int, c1: int, dim: DimGrid) -> DimProjection:
    """``project_slice`` of ``start:last + 1`` over chunks ``c0..c1`` of a regular
    grid, with numpy: the same selections, no Python arithmetic per chunk."""
    chunk = dim.chunk
    ci = np.arange(c0, c1 + 1, dtype=np.int64)
    off = ci * chunk
    first = np.maximum(start, off)
    cnt = np.minimum(last, off + chunk - 1) - first + 1
    lo = first - off
    o = first - start
    dl = np.minimum(chunk, dim.size - off)
    code = np.where((first == off) & (cnt == dl), np.where(dl < chunk, 3, 1), 0)
    runs = np.stack([lo, lo + cnt, o, o + cnt], axis=1)
    return RunProjection(ci.tolist(), code, runs, last - start + 1)


class RunProjection(DimProjection):
    """A ``DimProjection`` of step-1 slices made with numpy (``_project_run``):
    its slices and ``complete`` flags are made from ``runs`` when first asked
    for. A device read plans from ``runs`` alone, and 1,024 chunks' slice
    objects cost about 0.3 ms a read."""

    def __init__(self, chunks: list[int], code: np.ndarray, runs: np.ndarray,
                 out_len: int) -> None:
        self.chunks = chunks
        self.out_len = out_len
        self.runs = runs
        self._code = code  # per chunk: an index into _COMPLETE

    @functools.cached_property
    def chunk_sels(self) -> list[Sel]:  # type: ignore[override]
        cols = self.runs[:, :2].T.tolist()
        return list(map(slice, cols[0], cols[1]))

    @functools.cached_property
    def out_sels(self) -> list[Sel]:  # type: ignore[override]
        cols = self.runs[:, 2:].T.tolist()
        return list(map(slice, cols[0], cols[1]))

    @functools.cached_property
    def complete(self) -> list[Any]:  # type: ignore[override]
        return [_COMPLETE[k] for k in self._code.tolist()]

    def complete_kinds(self) -> set[Any]:
        return {_COMPLETE[k] for k in np.unique(self._code).tolist()}

    def __eq__(self, other: object) -> bool:
        # (the dataclass's own equality holds to one class: an eager projection
        # of the same slices is equal to this one)
        if not isinstance(other, DimProjection):
            return NotImplemented
        return (self.chunks, self.chunk_sels, self.out_sels, self.complete, self.out_len) == (
            other.chunks, other.chunk_sels, other.out_sels, other.complete, other.out_len)

    __hash__ = None  # type: ignore[assignment]


def _add_strided(
    ci: int,
    off: int,
    end: int,
    start: int,
    step: int,
    chunks: list[int],
    csels: list[Sel],
    osels: list[Sel],
) -> bool:
    """Add chunk ``ci`` (its first position ``off``, its last in the slice ``end``)
    to the projection of the slice ``start::step`` (step > 1), regular grid or
    explicit edges alike; False, with nothing added, where the step skips it."""
    first = start if start >= off else start + -(-(off - start) // step) * step
    if first > end:
        return False
    cnt = (end - first) // step + 1
    o = (first - start) // step
    chunks.append(ci)
    csels.append(slice(first - off, first - off + (cnt - 1) * step + 1, step))
    osels.append(slice(o, o + cnt))
    return True


def _project_slice_edges(start: int, step: int, n: int, dim: RectilinearDimGrid) -> DimProjection:
    """``project_slice`` (ascending) over explicit edges: chunk ``ci`` spans
    ``offs[ci]:offs[ci + 1]``; the first and last chunks come from a binary search."""
    last = start + (n - 1) * step
    c0, c1 = dim.locate(start), dim.locate(last)
    # chunk starts c0..c1 + 1, from the grid's runs (edges are not kept one by one)
    offs = {ci: dim.offset(ci) for ci in range(c0, c1 + 2)}
    chunks: list[int] = []
    csels: list[Sel] = []
    osels: list[Sel] = []
    complete: list[bool] = []
    size = dim.size
    if step == 1:
        for ci in range(c0, c1 + 1):
            off = offs[ci]
            nxt = offs[ci + 1]
            first = start if start > off else off
            end = last if last < nxt - 1 else nxt - 1
            cnt = end - first + 1
            o = first - start
            chunks.append(ci)
            csels.append(slice(first - off, first - off + cnt))
            osels.append(slice(o, o + cnt))
            complete.append(
                (EDGE if nxt > size else True)
                if first == off and end + 1 == min(nxt, size)
                else False
            )
        return DimProjection(chunks, csels, osels, complete, n)
    for ci in range(c0, c1 + 1):
        off = offs[ci]
        nxt = offs[ci + 1]
        end = last if last < nxt - 1 else nxt - 1
        if _add_strided(ci, off, end, start, step, chunks, csels, osels):
            complete.append(LOOSE if nxt - off == 1 else False)
    return DimProjection(chunks, csels, osels, complete, n)


def project_array(idx: np.ndarray, dim: DimGrid) -> DimProjection:
    """Project a 1-d array of in-bounds, non-negative integer positions."""
    n = idx.shape[0]
    if n == 0:
        return DimProjection([], [], [], [], 0)
    if n <= _FEW_POINTS and type(dim) is DimGrid:
        return _project_few(idx, dim)
    cids = dim.index_of(idx)
    if n > 1 and np.any(cids[1:] < cids[:-1]):
        order = np.argsort(cids, kind="stable")
        cids_sorted = cids[order]
    else:
        order = None
        cids_sorted = cids
    uniq, starts = np.unique(cids_sorted, return_index=True)
    ends = np.append(starts[1:], n)
    if type(dim) is DimGrid and len(uniq) >= _VECTOR_MIN:
        return _project_points(idx, dim, order, uniq, starts, ends)
    chunks: list[int] = []
    csels: list[Sel] = []
    osels: list[Sel] = []
    complete: list[bool] = []
    for ci, s, e in zip(uniq.tolist(), starts.tolist(), ends.tolist()):
        off = dim.offset(ci)
        if order is None:
            pos = idx[s:e]
            out: Sel = slice(s, e)
        else:
            sub = order[s:e]
            pos = idx[sub]
            out = sub
        local = pos - off
        # A run of consecutive increasing positions reads as a slice (cheaper).
        if (
            local.shape[0] > 0
            and local[-1] - local[0] == local.shape[0] - 1
            and (local.shape[0] == 1 or np.all(np.diff(local) == 1))
        ):
            csel: Sel = slice(int(local[0]), int(local[-1]) + 1)
            # A chunk cut by the array's end is never covered by an index array
            # (as in zarr-python): its stored elements past the end survive.
            full = (
                local[0] == 0
                and local.shape[0] == dim.data_len(ci) == dim.chunk_len(ci)
                and isinstance(out, slice)
            )
            # Output positions in a forward run of one step (one sample of a
            # shuffled batch) read as a slice too: the item stays slices only,
            # which batched and device reads take as a whole.
            out = _as_slice(out)
        else:
            csel = local
            full = False
        chunks.append(ci)
        csels.append(csel)
        osels.append(out)
        complete.append(LOOSE if full else False)
    return DimProjection(chunks, csels, osels, complete, n)


def _project_points(idx: np.ndarray, dim: DimGrid, order: np.ndarray | None,
                    uniq: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> DimProjection:
    """``project_array`` over chunks ``uniq`` of a regular grid (the positions
    of chunk ``k``: ``starts[k]:ends[k]`` of ``idx``, taken in ``order``), with
    numpy: the same selections, Python only for a chunk whose positions are no
    run or land on no evenly stepping output (a random training batch: none)."""
    n = len(idx)
    pos = idx if order is None else idx[order]
    off = uniq * dim.chunk
    counts = ends - starts
    first = pos[starts] - off
    # a run: each position one after the previous, within its chunk
    gap = np.zeros(n, np.int64)
    gap[1:] = np.diff(pos) != 1
    gap[starts] = 0
    run = np.add.reduceat(gap, starts) == 0
    dl = np.minimum(dim.chunk, dim.size - off)
    full = run & (first == 0) & (counts == dl) & (dl == dim.chunk) & (order is None)
    if order is None:
        outs: list[Sel] = list(map(slice, starts.tolist(), ends.tolist()))
    else:  # each chunk's output positions (one each: a slice of one)
        o0 = order[starts]
        outs = list(map(slice, o0.tolist(), (o0 + 1).tolist()))
    csels: list[Sel] = list(map(slice, first.tolist(), (first + counts).tolist()))
    for k in np.flatnonzero(~run | (counts > 1) & (order is not None)).tolist():
        s, e = int(starts[k]), int(ends[k])
        if not run[k]:  # (its positions as they are, on both sides)
            csels[k] = pos[s:e] - int(off[k])
            if order is not None:
                outs[k] = order[s:e]
        elif order is not None:
            outs[k] = _as_slice(order[s:e])
    complete = [LOOSE if f else False for f in full.tolist()]
    return DimProjection(uniq.tolist(), csels, outs, complete, n)


# At most this many positions on a regular grid are projected in a Python loop:
# numpy's ~20 calls of project_array cost more (64 random positions: 127 us
# with them, ~25 us in the loop, on the 2-CPU VM)
_FEW_POINTS = 64


def _project_few(idx: np.ndarray, dim: DimGrid) -> DimProjection:
    """``project_array`` of a few positions on a regular grid, in Python: the
    same selections (a chunk's positions in the order given; a run of them as a
    slice; output positions as a slice when the chunks come in order, else as
    they are, or a slice when they step forward evenly and the chunk's are a run)."""
    vals = idx.tolist()
    c = dim.chunk
    cids = [v // c for v in vals]
    n = len(vals)
    if len(set(cids)) == n:  # one position per chunk (a random training batch)
        at = sorted(range(n), key=cids.__getitem__)
        # (a chunk of one element, in order: covered whole)
        whole = LOOSE if c == 1 and at == list(range(n)) else False
        firsts = [vals[i] - cids[i] * c for i in at]
        return DimProjection([cids[i] for i in at], [slice(f, f + 1) for f in firsts],
                             [slice(i, i + 1) for i in at], [whole] * n, n)
    members: dict[int, list[int]] = {}
    ordered = True
    prev = -1
    for i, ci in enumerate(cids):
        if ci < prev:
            ordered = False
        prev = ci
        m = members.get(ci)
        if m is None:
            members[ci] = [i]
        else:
            m.append(i)
    chunks = sorted(members)
    csels: list[Sel] = []
    osels: list[Sel] = []
    complete: list[Any] = []
    for ci in chunks:
        mine = members[ci]
        off = ci * c
        local = [vals[i] - off for i in mine]
        first = local[0]
        run = all(b - a == 1 for a, b in pairwise(local))
        out: Sel
        if ordered:
            out = slice(mine[0], mine[-1] + 1)
        elif run:
            out = _as_slice(np.array(mine, np.intp))
        else:
            out = np.array(mine, np.intp)
        if run:
            csels.append(slice(first, local[-1] + 1))
            full = ordered and first == 0 and len(local) == c and off + c <= dim.size
        else:
            csels.append(np.array(local, idx.dtype))
            full = False
        osels.append(out)
        complete.append(LOOSE if full else False)
    return DimProjection(chunks, csels, osels, complete, n)


def _as_slice(out: Sel) -> Sel:
    """``out`` (positions) as a slice when they step forward evenly, else as is."""
    if isinstance(out, slice):
        return out
    first = int(out[0])
    if len(out) == 1:
        return slice(first, first + 1)
    step = int(out[1]) - first
    if step > 0 and bool(np.all(np.diff(out) == step)):
        return slice(first, int(out[-1]) + 1, step)
    return out


def ortho_index(sel: tuple[Sel, ...]) -> tuple[Sel, ...]:
    """Make a tuple of slices/int arrays index orthogonally (np.ix_ semantics)."""
    n_arr = sum(isinstance(s, np.ndarray) for s in sel)
    if n_arr <= 1:
        return sel
    nd = len(sel)
    out: list[Sel] = []
    for i, s in enumerate(sel):
        if isinstance(s, np.ndarray):
            shape = [1] * nd
            shape[i] = -1
            out.append(s.reshape(shape))
        else:
            out.append(s)
    # Mixed slices + >=2 arrays: numpy would move the broadcast dims; convert all.
    if any(isinstance(s, slice) for s in out):
        res: list[Sel] = []
        for i, s in enumerate(out):
            if isinstance(s, slice):
                shape = [1] * nd
                shape[i] = -1
                res.append(
                    np.arange(s.start or 0, s.stop, s.step or 1).reshape(shape)
                    if s.stop is not None or (s.step or 1) > 0
                    else np.arange(s.start, -1, s.step).reshape(shape)
                )
            else:
                res.append(s)
        return tuple(res)
    return tuple(out)


def chunk_labels(p: Any) -> np.ndarray:
    """For each position along one dimension of a plan's output, the index (in
    ``p.chunks``) of the chunk it falls in."""
    lab = np.empty(p.out_len, dtype=np.intp)
    for k, o in enumerate(p.out_sels):
        lab[o] = k
    return lab


def any_per_chunk(mask: np.ndarray, labels: list[np.ndarray]) -> np.ndarray:
    """Whether any element of ``mask`` (shaped like a plan's output) is set in each
    chunk of the plan: a bool array shaped like the plan's chunk grid, in the order
    of ``chunk_items``. Vectorized: one ``logical_or.reduceat`` per dimension, the
    last (contiguous) one first. (Summing into ``intp`` along the first axis first
    took seconds for a 20000 x 20000 mask; this takes tens of milliseconds.)"""
    x: np.ndarray = mask
    for d in reversed(range(len(labels))):
        lab = labels[d]
        if lab.size > 1 and np.any(lab[1:] < lab[:-1]):
            order = np.argsort(lab, kind="stable")
            x = np.take(x, order, axis=d)
            lab = lab[order]
        starts = np.flatnonzero(np.concatenate(([True], lab[1:] != lab[:-1])))
        x = np.logical_or.reduceat(x, starts, axis=d)
    return x
