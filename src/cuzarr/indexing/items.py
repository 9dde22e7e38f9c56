"""Chunk items: the chunks a selection touches, each with its in-chunk and
output selections. Eager selections (``indexing.selection``) and lazy views
(``indexing.view_plans``) are both planned into them; the engine reads and
writes them."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Iterator, Sequence
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


class ChunkItems(Sequence):  # type: ignore[type-arg]
    """``chunk_items``' result: a read-only sequence of :data:`ChunkItem`.

    When the items are the product of per-dimension slice projections,
    ``dims`` keeps each dimension's projection, so batch work can be vectorized
    per dimension (item ``i`` is ``np.unravel_index(i, lens)`` of them), and
    the items themselves are made only when asked for: a device read plans
    from ``dims`` alone, and 1,024 items' tuples cost about 0.5 ms a read.
    ``ChunkItems(iterable)`` holds the given items as they are."""

    #: the per-dimension projections the items are the product of (``None``:
    #: items given one by one)
    dims: list[DimProjection] | None = None
    #: the index of item 0 in the product of ``dims`` (a :meth:`window`'s first)
    start: int = 0
    #: explicit positions of the items in the product of ``dims`` (a
    #: :meth:`subset`); ``None``: ``start``, ``start + 1``, ...
    positions_: np.ndarray | None = None

    def __init__(self, items: Iterable[ChunkItem] = ()) -> None:
        self._list: list[ChunkItem] | None = list(items)
        self._n = len(self._list)
        self._mixed = False  # see combine_complete: used where items are made lazily

    @classmethod
    def product(cls, dims: list[DimProjection], mixed: bool, start: int = 0,
                count: int | None = None, positions: np.ndarray | None = None,
                shared: dict[Any, Any] | None = None) -> ChunkItems:
        """The items at ``positions`` (else ``start:start + count``, else all) of
        the product of ``dims``, made when first asked for. ``mixed``: whether
        ``complete`` flags combine as :func:`combine_complete` (else ``all``)."""
        items = cls.__new__(cls)
        items._list = None
        items.dims, items.start, items.positions_, items._mixed = dims, start, positions, mixed
        if positions is not None:
            items._n = len(positions)
        elif count is not None:
            items._n = count
        else:
            items._n = math.prod(len(p.chunks) for p in dims)
        if shared is not None:
            items.__dict__["_shared"] = shared
        return items

    @property
    def shared(self) -> dict[Any, Any]:
        """Work derived from ``dims`` once per read: one dict that every
        :meth:`window` of these items shares."""
        got = self.__dict__.get("_shared")
        if got is None:
            got = self.__dict__["_shared"] = {}
        return got

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if self._list is not None:
            return self._list[i]
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._n)
            if step == 1:
                return list(self.window(lo, max(lo, hi)))
            return self._made()[i]
        j = operator.index(i)
        if j < 0:
            j += self._n
        if not 0 <= j < self._n:
            raise IndexError("chunk item index out of range")
        pos = self.start + j if self.positions_ is None else int(self.positions_[j])
        return _item_at(self.dims, pos, self._mixed)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[ChunkItem]:
        return iter(self._made())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ChunkItems)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChunkItems({self._made()!r})"

    def _made(self) -> list[ChunkItem]:
        """The items as a list, made from ``dims`` once."""
        if self._list is None:
            self._list = _product_items(self.dims, self._mixed, self.positions_,  # type: ignore[arg-type]
                                        self.start, self._n)
        return self._list

    def window(self, lo: int, hi: int) -> ChunkItems:
        """Items ``lo:hi``, keeping ``dims`` (with ``start`` moved to ``lo``)."""
        if self.positions_ is not None:
            return self.subset(np.arange(lo, hi))
        if self.dims is None:
            return ChunkItems(self._list[lo:hi])  # type: ignore[index]
        hi = min(max(lo, hi), self._n)
        part = ChunkItems.product(self.dims, self._mixed, self.start + lo, hi - lo,
                                  shared=self.shared)
        if self._list is not None:  # made already: the window's part of them
            part._list = self._list[lo:hi]
        return part

    def subset(self, ids: Sequence[int] | np.ndarray) -> ChunkItems:
        """Items ``ids`` (each in ``0..len - 1``; in that order), keeping ``dims``."""
        ids = np.asarray(ids, np.int64)
        if self.dims is None:
            return ChunkItems(map(self.__getitem__, ids.tolist()))
        # (a window's item k lies at start + k: no positions array made for all)
        at = self.positions_[ids] if self.positions_ is not None else ids + self.start
        part = ChunkItems.product(self.dims, self._mixed, positions=at, shared=self.shared)
        if self._list is not None:
            part._list = list(map(self._list.__getitem__, ids.tolist()))
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
                if getattr(p, "runs", None) is None:  # (runs: slices, not made yet)
                    kinds.update(map(type, p.chunk_sels), map(type, p.out_sels))
            known = self.shared["slices-only"] = kinds <= {slice}
        return known


def _item_at(dims: list[DimProjection], pos: int, mixed: bool) -> ChunkItem:
    """Item ``pos`` of the product of ``dims`` (C order)."""
    at = []
    for p in reversed(dims):
        pos, k = divmod(pos, len(p.chunks))
        at.append(k)
    at.reverse()
    flags = tuple(p.complete[k] for p, k in zip(dims, at, strict=True))
    return (tuple(p.chunks[k] for p, k in zip(dims, at, strict=True)),
            tuple(p.chunk_sels[k] for p, k in zip(dims, at, strict=True)),
            tuple(p.out_sels[k] for p, k in zip(dims, at, strict=True)),
            combine_complete(flags) if mixed else all(flags))


def _product_items(dims: list[DimProjection], mixed: bool, positions: np.ndarray | None,
                   start: int, n: int) -> list[ChunkItem]:
    """Items ``positions`` (else ``start:start + n``) of the product of ``dims``,
    each tuple made in C (``itertools.product``, ``zip``, ``map``)."""
    combine = combine_complete if mixed else all
    prod = itertools.product
    total = math.prod(len(p.chunks) for p in dims)
    if positions is None and start == 0 and n == total:
        return list(zip(prod(*(p.chunks for p in dims)), prod(*(p.chunk_sels for p in dims)),
                        prod(*(p.out_sels for p in dims)),
                        map(combine, prod(*(p.complete for p in dims)))))
    if positions is None:
        positions = np.arange(start, start + n, dtype=np.int64)
    at = np.unravel_index(positions, [len(p.chunks) for p in dims])
    cols: list[list[list[Any]]] = [[], [], [], []]
    for p, ids in zip(dims, at, strict=True):
        ids = ids.tolist()
        for col, values in zip(cols, (p.chunks, p.chunk_sels, p.out_sels, p.complete),
                               strict=True):
            col.append(list(map(values.__getitem__, ids)))
    return list(zip(zip(*cols[0]), zip(*cols[1]), zip(*cols[2]), map(combine, zip(*cols[3]))))


def window(items: Sequence[ChunkItem], lo: int, hi: int) -> Sequence[ChunkItem]:
    """Items ``lo:hi`` of ``items``, keeping what :class:`ChunkItems` knows."""
    return items.window(lo, hi) if isinstance(items, ChunkItems) else items[lo:hi]


def subset(items: Sequence[ChunkItem], ids: Sequence[int]) -> Sequence[ChunkItem]:
    """Items ``ids`` of ``items``, keeping what :class:`ChunkItems` knows."""
    if isinstance(items, ChunkItems):
        return items.subset(ids)
    return [items[i] for i in ids]


def chunk_items(projections: Sequence[DimProjection]) -> Sequence[ChunkItem]:
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
    flags = [p.complete_kinds() for p in projections]
    mixed = any(LOOSE in f for f in flags) and any(EDGE in f for f in flags)
    if array_dims < 2 and n_arrays == 0:
        # made when asked for (a device read plans from the projections alone)
        return ChunkItems.product(list(projections), mixed)
    # itertools.product builds each tuple in C: a few hundred ns per chunk.
    prod = itertools.product
    coords = prod(*(p.chunks for p in projections))
    csels = prod(*(p.chunk_sels for p in projections))
    osels = prod(*(p.out_sels for p in projections))
    completes = map(combine_complete if mixed else all, prod(*(p.complete for p in projections)))
    if array_dims >= 2:
        csels = map(ortho_index, csels)
        osels = map(ortho_index, osels)
    return ChunkItems(zip(coords, csels, osels, completes))


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
    flags = tuple(complete)
    one = ChunkItems.product(list(projections), LOOSE in flags and EDGE in flags)
    one._list = [(tuple(coords), tuple(csel), tuple(osel), combine_complete(flags))]
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
