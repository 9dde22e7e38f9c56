"""Chunk items: the chunks a selection touches, each with its in-chunk and
output selections. Eager selections (``indexing.selection``) and lazy views
(``indexing.view_plans``) are both planned into them; the engine reads and
writes them."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.indexing.projection import (
    EDGE,
    LOOSE,
    DimProjection,
    combine_complete,
    ortho_index,
)

__all__ = ["ChunkItem", "ChunkItems", "chunk_items", "coordinate_items", "subset", "window"]

# (coords, chunk selection, output selection, chunk wholly covered)
ChunkItem = tuple[tuple[int, ...], tuple[Any, ...], tuple[Any, ...], bool]


class ChunkItems(list):  # type: ignore[type-arg]
    """``chunk_items``' result. When the items are the product of per-dimension
    slice projections, ``dims`` keeps each dimension's list of (chunk selection,
    output selection) pairs, so batch work can be vectorized per dimension
    (item ``i`` is ``np.unravel_index(i, lens)`` of them)."""

    dims: list[DimProjection] | None = None
    #: the index of item 0 in the product of ``dims`` (a :meth:`window`'s first)
    start: int = 0

    @property
    def shared(self) -> dict[Any, Any]:
        """Work derived from ``dims`` once per read: one dict that every
        :meth:`window` of these items shares."""
        got = self.__dict__.get("_shared")
        if got is None:
            got = self.__dict__["_shared"] = {}
        return got

    #: explicit positions of the items in the product of ``dims`` (a
    #: :meth:`subset`); ``None``: ``start``, ``start + 1``, ...
    positions_: np.ndarray | None = None

    def window(self, lo: int, hi: int) -> ChunkItems:
        """Items ``lo:hi``, keeping ``dims`` (with ``start`` moved to ``lo``)."""
        if self.positions_ is not None:
            return self.subset(np.arange(lo, hi))
        part = ChunkItems(self[lo:hi])
        if self.dims is not None:
            part.dims = self.dims
            part.start = self.start + lo
            part.__dict__["_shared"] = self.shared
        return part

    def subset(self, ids: Sequence[int] | np.ndarray) -> ChunkItems:
        """Items ``ids`` (in that order), keeping ``dims``."""
        ids = np.asarray(ids, np.int64)
        part = ChunkItems(map(self.__getitem__, ids.tolist()))
        if self.dims is not None:
            part.dims = self.dims
            part.positions_ = self.positions()[ids]
            part.__dict__["_shared"] = self.shared
        return part

    def positions(self) -> np.ndarray:
        """Each item's position in the product of ``dims``."""
        if self.positions_ is not None:
            return self.positions_
        return np.arange(self.start, self.start + len(self), dtype=np.int64)

    def coords(self) -> np.ndarray | None:
        """The items' chunk coordinates as an (items x dimensions) array, from
        ``dims`` (``None``: no ``dims``)."""
        if self.dims is None:
            return None
        lens = [len(p.chunks) for p in self.dims]
        at = np.unravel_index(self.positions(), lens) if lens else ()
        out = np.empty((len(self), len(lens)), np.int64)
        for d, p in enumerate(self.dims):
            out[:, d] = np.asarray(p.chunks, np.int64)[at[d]]
        return out

    def slices_only(self) -> bool | None:
        """Whether every selection is a slice, from ``dims`` (``None``: no ``dims``)."""
        if self.dims is None:
            return None
        known = self.shared.get("slices-only")
        if known is None:
            kinds = set()
            for p in self.dims:
                kinds.update(map(type, p.chunk_sels), map(type, p.out_sels))
            known = self.shared["slices-only"] = kinds <= {slice}
        return known


def window(items: Sequence[ChunkItem], lo: int, hi: int) -> Sequence[ChunkItem]:
    """Items ``lo:hi`` of ``items``, keeping what :class:`ChunkItems` knows."""
    return items.window(lo, hi) if isinstance(items, ChunkItems) else items[lo:hi]


def subset(items: Sequence[ChunkItem], ids: Sequence[int]) -> Sequence[ChunkItem]:
    """Items ``ids`` of ``items``, keeping what :class:`ChunkItems` knows."""
    if isinstance(items, ChunkItems):
        return items.subset(ids)
    return [items[i] for i in ids]


def chunk_items(projections: Sequence[DimProjection]) -> list[ChunkItem]:
    """All chunks a plan touches, with their in-chunk and output selections."""
    if not projections:
        return [((), (), (), True)]
    one = _one_chunk(projections)
    if one is not None:
        return one
    if any(not p.chunks for p in projections):
        return []
    # (the types of each side's selections, found in C: a few ns per chunk)
    # (a projection with numpy-made runs holds slices only)
    csel_arrays = [getattr(p, "runs", None) is None and np.ndarray in set(
        map(type, p.chunk_sels)) for p in projections]
    osel_arrays = [getattr(p, "runs", None) is None and np.ndarray in set(
        map(type, p.out_sels)) for p in projections]
    n_arrays = sum(csel_arrays)
    # Index arrays on two or more dimensions, on either side (a contiguous run of
    # a chunk can land on scattered output positions, and the reverse), broadcast
    # together unless made orthogonal.
    array_dims = sum(c or o for c, o in zip(csel_arrays, osel_arrays, strict=True))
    needs_ortho = array_dims >= 2
    # itertools.product builds each tuple in C: a few hundred ns per chunk.
    prod = itertools.product
    coords = prod(*(p.chunks for p in projections))
    csels = prod(*(p.chunk_sels for p in projections))
    osels = prod(*(p.out_sels for p in projections))
    flags = [set(p.complete) for p in projections]
    mixed = any(LOOSE in f for f in flags) and any(EDGE in f for f in flags)
    completes = map(combine_complete if mixed else all, prod(*(p.complete for p in projections)))
    if needs_ortho:
        csels = map(ortho_index, csels)
        osels = map(ortho_index, osels)
    items = ChunkItems(zip(coords, csels, osels, completes))
    if not needs_ortho and n_arrays == 0:
        items.dims = list(projections)
    return items


def _one_chunk(projections: Sequence[DimProjection]) -> ChunkItems | None:
    """The item of a plan that touches one chunk (a small read or write), with
    what ``chunk_items``' general path gives it; None otherwise. One plain loop:
    this runs on every small read."""
    coords, csel, osel, complete = [], [], [], []
    for p in projections:
        if len(p.chunks) != 1:
            return None
        c, o = p.chunk_sels[0], p.out_sels[0]
        if isinstance(c, np.ndarray) or isinstance(o, np.ndarray):
            return None
        coords.append(p.chunks[0])
        csel.append(c)
        osel.append(o)
        complete.append(p.complete[0])
    one = ChunkItems([(tuple(coords), tuple(csel), tuple(osel), combine_complete(tuple(complete)))])
    one.dims = list(projections)
    return one


def coordinate_items(dims: Sequence[Any], coords: Sequence[np.ndarray]) -> list[ChunkItem]:
    """Group flat point coordinates by chunk; output selections index a flat buffer."""
    n = coords[0].shape[0] if coords else 1
    if not coords:
        return [((), (), (), True)]
    if n == 0:
        return []
    cids = [d.index_of(c) for d, c in zip(dims, coords, strict=True)]
    grid_shape = tuple(max(1, d.nchunks) for d in dims)
    linear = np.ravel_multi_index(cids, grid_shape)
    order = np.argsort(linear, kind="stable")
    lin_sorted = linear[order]
    _uniq, starts = np.unique(lin_sorted, return_index=True)
    ends = np.append(starts[1:], n)
    items: list[ChunkItem] = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        sub = order[s:e]
        ccoords = tuple(int(c[sub[0]]) for c in cids)
        csel = tuple(c[sub] - d.offset(cc) for c, d, cc in zip(coords, dims, ccoords, strict=True))
        items.append((ccoords, csel, (sub,), False))
    return items
