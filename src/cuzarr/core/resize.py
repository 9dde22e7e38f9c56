"""Shape changes of an array (``resize``), crash-consistent when they shrink.

A shrink changes the stored data before the metadata, in this order:

1. the part of each stored chunk (shard) cut by the new end, inside the old
   shape, is written with the fill value (a partial write, one atomic replace
   per chunk; a chunk left all fill is deleted);
2. the chunks wholly outside the new shape are deleted;
3. the new metadata document is saved (one atomic replace).

A kill before step 3 leaves the old shape, every element inside the new shape
as it was, and each element being cut either as it was or the fill value (the
shrink was under way; running it again finishes it). Once the new metadata is
visible, nothing outside the new shape holds old data, so a later grow shows
the fill value there, as numpy's and HDF5's resize do. (zarr-python saves the
metadata first and leaves the cut part of edge chunks in place: a grow brings
those values back.) Growing writes only the metadata.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzarr.codecs.pipeline import check_array_codecs
from cuzarr.core import engine
from cuzarr.core.nodes import save_metadata
from cuzarr.indexing.selection import BasicPlan, normalize_numpy
from cuzarr.metadata.array import ArrayMetadata, normalize_shape
from cuzarr.storage.common import StorePath

if TYPE_CHECKING:
    from cuzarr.core.array import AsyncArray

__all__ = ["ENUMERATE_MAX", "resize", "stored_coords"]

# A shrink touching more grid positions than this (to delete, or to trim at the
# new end) lists the stored objects instead of naming every position (a huge,
# mostly empty array would otherwise take minutes or all memory).
ENUMERATE_MAX = 1 << 16


async def resize(
    array: AsyncArray, new_shape: Any, delete_outside_chunks: bool = True
) -> ArrayMetadata:
    """Change ``array``'s stored shape; returns the metadata saved (the caller
    installs it). With ``delete_outside_chunks`` False nothing but the metadata
    is written (zarr-python's option): a later grow shows the old values."""
    meta = array.metadata
    old_shape = meta.shape
    new_shape = normalize_shape(new_shape)
    if len(new_shape) != len(old_shape):
        raise ValueError(
            f"resize cannot change the number of dimensions ({len(old_shape)} -> {len(new_shape)})"
        )
    new_meta = meta.evolve(
        shape=new_shape, chunk_grid=meta.chunk_grid.resized(old_shape, new_shape)
    )
    if new_meta.chunk_grid is not meta.chunk_grid:
        # a grown rectilinear grid gets a new edge: refuse one that cannot hold
        # whole inner chunks before anything is saved (as zarr-python)
        check_array_codecs(new_meta)
    if delete_outside_chunks and any(n < o for n, o in zip(new_shape, old_shape, strict=True)):
        # the data first, the metadata last: see the module docstring
        await _trim_edges(array, new_shape)
        old_grid = meta.chunk_grid.grid_shape(old_shape)
        new_grid = new_meta.chunk_grid.grid_shape(new_shape)
        if any(n < o for n, o in zip(new_grid, old_grid, strict=True)):
            prefix = array.store_path.path + "/" if array.store_path.path else ""
            stale = [
                prefix + meta.chunk_key(c)
                for c in await _outside(array.store_path, meta, old_grid, new_grid)
            ]
            if stale:
                await array.store_path.store.delete_many(stale)
    await save_metadata(array.store_path, new_meta)
    return new_meta


def _kept_ends(meta: ArrayMetadata, new_shape: tuple[int, ...]) -> list[int]:
    """Per dimension, where the chunks kept by the shrink end (capped by the old
    shape): the cut part of the edge chunks is ``new_shape[d]:end``."""
    ends: list[int] = []
    for d, dim in enumerate(meta.chunk_grid.dims(new_shape)):
        old, new = meta.shape[d], new_shape[d]
        if new >= old:
            ends.append(old)
            continue
        n = dim.nchunks
        end = dim.offset(n - 1) + dim.chunk_len(n - 1) if n else 0
        ends.append(min(old, end))
    return ends


def _cut_regions(meta: ArrayMetadata, new_shape: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """Boxes (in the old shape) covering the elements of the kept chunks that lie
    past the new end: one per shrunk dimension whose new end cuts a chunk."""
    ends = _kept_ends(meta, new_shape)
    regions: list[tuple[slice, ...]] = []
    for d, (new, end) in enumerate(zip(new_shape, ends, strict=True)):
        if end <= new or any(e == 0 for e in ends):
            continue
        regions.append(
            tuple(slice(new, end) if e == d else slice(0, ends[e]) for e in range(len(ends)))
        )
    return regions


async def _trim_edges(array: AsyncArray, new_shape: tuple[int, ...]) -> None:
    """Write the fill value over the cut part of the chunks the shrink keeps."""
    meta = array.metadata
    regions = _cut_regions(meta, new_shape)
    if not regions:
        return
    dims = meta.chunk_grid.dims(meta.shape)
    spans = [
        [
            (_chunk_at(dims[d], s.start), _chunk_at(dims[d], s.stop - 1))
            for d, s in enumerate(region)
        ]
        for region in regions
    ]
    positions = sum(math.prod(b - a + 1 for a, b in span) for span in spans)
    if positions <= ENUMERATE_MAX:
        for region in regions:
            await _write_fill(array, region)
        return
    # Mostly empty and huge: only the stored chunks are rewritten, each its part.
    stored = await stored_coords(array.store_path, meta)
    for region, span in zip(regions, spans, strict=True):
        for c in sorted(stored):
            if not all(a <= i <= b for i, (a, b) in zip(c, span, strict=True)):
                continue
            part = tuple(
                slice(max(s.start, dims[d].offset(i)), min(s.stop, dims[d].offset(i + 1)))
                for d, (s, i) in enumerate(zip(region, c, strict=True))
            )
            await _write_fill(array, part)


def _chunk_at(dim: Any, position: int) -> int:
    """The index of the chunk holding ``position`` on one dimension's grid."""
    return int(dim.index_of(np.asarray([position]))[0])


async def _write_fill(array: AsyncArray, region: tuple[slice, ...]) -> None:
    """The fill value into ``region`` of the array as it is (old metadata). A
    chunk left all fill is deleted, whatever ``write_empty_chunks`` says: a
    chunk never written stays unwritten."""
    meta = array.metadata
    plan = normalize_numpy(region, meta.shape, array._write_dims())
    assert isinstance(plan, BasicPlan)  # slices only
    fill = meta.dtype.empty(())
    fill[()] = meta.read_fill
    value = np.broadcast_to(fill, plan.buffer_shape)
    await engine.write_plan(array.store_path, meta, array._pipeline, plan.projections, value, False)


async def _outside(
    store_path: StorePath,
    meta: ArrayMetadata,
    old_grid: tuple[int, ...],
    new_grid: tuple[int, ...],
) -> Iterable[tuple[int, ...]]:
    """Grid positions of ``old_grid`` outside ``new_grid`` that may be stored."""
    keep = [min(o, n) for o, n in zip(old_grid, new_grid, strict=True)]
    n_stale = math.prod(old_grid) - math.prod(keep)
    if n_stale > ENUMERATE_MAX:
        return sorted(
            c
            for c in await stored_coords(store_path, meta)
            if any(i >= n for i, n in zip(c, new_grid, strict=True))
        )
    # One slab per shrunk dimension d: positions past the new edge on d,
    # inside the kept range on the dimensions before d (no duplicates).
    out: list[tuple[int, ...]] = []
    for d in range(len(old_grid)):
        if new_grid[d] >= old_grid[d]:
            continue
        ranges = [
            range(keep[e])
            if e < d
            else range(new_grid[d], old_grid[d])
            if e == d
            else range(old_grid[e])
            for e in range(len(old_grid))
        ]
        out.extend(itertools.product(*ranges))
    return out


async def stored_coords(store_path: StorePath, meta: ArrayMetadata) -> set[tuple[int, ...]]:
    """Grid coordinates of the stored objects (chunks, or shards when sharded)."""
    prefix = store_path.path + "/" if store_path.path else ""
    cke = meta.chunk_key_encoding
    grid = meta.chunk_grid.grid_shape(meta.shape)
    ndim = len(meta.shape)
    seen: set[tuple[int, ...]] = set()
    async for key in store_path.store.list_prefix(prefix):
        coords = cke.decode(key[len(prefix) :])
        if (
            coords is not None
            and len(coords) == ndim
            and all(0 <= c < g for c, g in zip(coords, grid, strict=True))
        ):
            seen.add(coords)
    if ndim == 0 and await store_path.store.exists(prefix + cke.encode(())):
        seen.add(())
    return seen
