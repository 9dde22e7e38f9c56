"""Copying one array's data into a new array, block by block, with bounded memory."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.copying.metadata import destination_metadata
from cuzarr.copying.progress import Progress

__all__ = ["copy_array", "copy_data", "create_copy"]


def copy_array(
    src: Any,
    dst_store: Any,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    chunks: Sequence[int] | None = None,
    shards: Sequence[int] | str | None = None,
    compressor: Any = "source",
    overwrite: bool = False,
    max_block_bytes: int = 64 << 20,
    progress: Any = False,
    metadata: Any = None,
) -> Any:
    """Copy (and rechunk/convert) ``src`` into a new array, block by block.

    Parameters
    ----------
    src : Array
        The source array.
    dst_store : store-like
        Where the copy goes (a path, URL or ``Store``).
    path : str, optional
        The copy's path inside ``dst_store``.
    zarr_format, chunks, shards, compressor
        As :func:`destination_metadata`, which decides the copy's metadata
        (everything they do not change is kept).
    overwrite : bool
        Replace what is at the destination.
    max_block_bytes : int
        Memory per copy step (at least one destination shard or chunk).
    progress : bool or callable
        True: a progress bar counting bytes on a terminal; a callable: called
        with the (uncompressed) bytes of each block once it is copied.
    metadata : ArrayMetadata, optional
        The copy's metadata, made (and checked) beforehand by
        :func:`destination_metadata`; the options above are then not used.

    Returns
    -------
    Array
        The copy.

    Notes
    -----
    Memory stays bounded: each step reads one block of whole destination
    shards/chunks (about ``max_block_bytes``) and writes it. Metadata is written
    first, and each chunk atomically, so an interrupted copy leaves a readable
    destination whose finished chunks are valid. The copy stores chunks equal to
    the fill value as the source's handle does (``write_empty_chunks``, which
    follows ``cuzarr.config`` unless set on it).
    """
    if metadata is None:
        metadata = destination_metadata(
            src, zarr_format=zarr_format, chunks=chunks, shards=shards, compressor=compressor
        )
    dst = create_copy(src, dst_store, path, metadata, overwrite)
    copy_data(src, dst, max_block_bytes, progress)
    return dst


def _copy_blocks(dst: Any, max_block_bytes: int) -> list[tuple[slice, ...]]:
    """Blocks of whole destination shards/chunks (regular or rectilinear), grown
    along leading axes while a block stays under the memory budget."""
    unit = dst.shards or dst.chunks
    # per dimension: where its shards/chunks start (their edges, for rectilinear)
    starts: list[list[int]] = []
    for n, u in zip(dst.shape, unit, strict=True):
        if isinstance(u, tuple):
            cuts = [0, *itertools.accumulate(u)]
            starts.append([c for c in cuts if c < n] or [0])
        else:
            starts.append(list(range(0, max(n, 1), u)))
    widest = [
        max(max(u) if isinstance(u, tuple) else u, 1) for u in unit
    ]  # bytes of a block are bounded with each dimension's widest unit
    group = [1] * len(starts)
    itemsize = max(1, dst.dtype.itemsize)
    for d in range(len(group)):
        while (
            group[d] < len(starts[d])
            and math.prod(w * g for w, g in zip(widest, group, strict=True)) * 2 * itemsize
            <= max_block_bytes
        ):
            group[d] = min(group[d] * 2, len(starts[d]))
    if not dst.shape:
        return [()]
    axes = []
    for d, n in enumerate(dst.shape):
        st = starts[d]
        edges = [*st[:: group[d]], n]
        axes.append([slice(a, b) for a, b in itertools.pairwise(edges) if a < b] or [slice(0, 0)])
    return list(itertools.product(*axes))


def create_copy(src: Any, store: Any, path: str | None, metadata: Any, overwrite: bool) -> Any:
    """Write the copy's metadata, and nothing else.

    Parameters
    ----------
    src : Array
        The source array; its handle's ``write_empty_chunks`` carries over.
    store : store-like
        Where the copy goes.
    path : str or None
        The copy's path inside ``store``.
    metadata : ArrayMetadata
        The copy's metadata (see :func:`destination_metadata`).
    overwrite : bool
        Replace what is at the destination.

    Returns
    -------
    Array
        The empty copy, which stores chunks equal to the fill value as the
        source's handle does (``write_empty_chunks``).
    """
    from cuzarr.core.array import Array, AsyncArray
    from cuzarr.runtime.sync import sync
    from cuzarr.storage.common import make_store_path

    sp = make_store_path(store, path, mode="a")
    wec = getattr(src.async_array, "_write_empty_chunks", None)
    return Array(sync(AsyncArray.create(sp, metadata, overwrite=overwrite, write_empty_chunks=wec)))


def _block_bytes(sel: tuple[slice, ...], shape: Sequence[int], itemsize: int) -> int:
    """The bytes of the block ``sel`` of an array of ``shape``."""
    return itemsize * math.prod(len(range(*s.indices(n))) for s, n in zip(sel, shape))


def copy_data(src: Any, dst: Any, max_block_bytes: int, progress: Any) -> None:
    """Copy ``src``'s values into ``dst`` (same shape), one block of whole
    destination shards or chunks at a time.

    Parameters
    ----------
    src, dst : Array
        The source, and the copy made by :func:`create_copy`.
    max_block_bytes : int
        Memory per step (at least one destination shard or chunk).
    progress : bool or callable
        True: a progress bar counting bytes on a terminal; a callable: called
        with the (uncompressed) bytes of each block once it is copied.
    """
    # A copy that stores chunks equal to the fill value (write_empty_chunks)
    # would store regions the source never wrote too: it goes one destination
    # shard or chunk at a time, and skips those that meet no chunk of the source.
    holds = _source_chunks_test(src) if dst.async_array.write_empty_chunks else None
    if holds is None:
        blocks = _copy_blocks(dst, max_block_bytes)
    else:
        blocks = [b for b in _copy_blocks(dst, 0) if holds(b)]
    itemsize = np.dtype(dst.dtype).itemsize
    step = progress if callable(progress) else None
    if progress is True:
        total = sum(_block_bytes(b, dst.shape, itemsize) for b in blocks)
        step = Progress(total, "copy", unit="B").update
    for sel in blocks:
        dst[sel] = src[sel]
        if step is not None:
            step(_block_bytes(sel, dst.shape, itemsize))


def _source_chunks_test(src: Any) -> Any:
    """A test of whether a block (slices) meets a chunk (shard) that ``src``
    stores, or ``None`` where its store cannot be listed (then nothing is skipped)."""
    from cuzarr.runtime.sync import sync

    prefix = f"{src.path}/" if src.path else ""

    async def listed() -> set[str]:
        return {k[len(prefix) :] async for k in src.store.list_prefix(prefix)}

    stored = sync(listed())
    if ("zarr.json" if src.zarr_format == 3 else ".zarray") not in stored:
        return None
    edges = [np.cumsum([0, *sizes]) for sizes in src.write_chunk_sizes]
    key = src.metadata.chunk_key

    def holds(sel: tuple[slice, ...]) -> bool:
        spans = [
            range(
                int(np.searchsorted(e, s.start, side="right")) - 1,
                int(np.searchsorted(e, s.stop, side="left")),
            )
            for e, s in zip(edges, sel, strict=True)
        ]
        return any(key(c) in stored for c in itertools.product(*spans))

    return holds
