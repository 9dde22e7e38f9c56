"""Whole small chunks handled a batch at a time.

Where the items of a read or write are whole chunks landing on a chunk-aligned
grid of blocks of the output (or value), a batch of them is decoded (encoded)
with one ``pipeline.decode_many`` (``encode_many``) call and moved with one
numpy assignment through a strided blocked view: for chunks of a few KiB the
per-chunk Python work otherwise costs more than the codec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.buffer.chunks import is_fill
from cuzarr.codecs.pipeline import BATCH_DECODE_MAX
from cuzarr.metadata.chunk_grid import RegularChunkGrid

__all__ = ["BlockDecoder", "BlockEncoder", "BlockLayout"]


#: fewer items than this are coded one by one (a small read's plan skips the
#: layout's checks altogether)
MIN_ITEMS = 8


@dataclass
class BlockLayout:
    """Items that are whole chunks landing on a chunk-aligned grid of blocks of an
    array (the output of a read, the value of a write): per dimension, which of
    the projection's chunks qualify and their block index; item ``i`` is
    ``np.unravel_index(i, lens)`` of them."""

    chunk: tuple[int, ...]
    lens: tuple[int, ...]
    elig: list[np.ndarray]
    bidx: list[np.ndarray]
    base: list[int]

    @classmethod
    def make(cls, items: Any, arr: Any, grid: Any) -> BlockLayout | None:
        dims = getattr(items, "dims", None)
        if (
            not dims
            or not isinstance(arr, np.ndarray)
            or arr.ndim != len(dims)
            or not isinstance(grid, RegularChunkGrid)
            or arr.dtype.hasobject
            or len(items) < MIN_ITEMS
        ):
            return None
        chunk = tuple(grid.chunk_shape)
        if math.prod(chunk) * arr.dtype.itemsize > BATCH_DECODE_MAX:
            return None
        elig, bidx, base = [], [], []
        for p, c in zip(dims, chunk, strict=True):
            e = np.zeros(len(p.chunks), dtype=bool)
            b = np.zeros(len(p.chunks), dtype=np.intp)
            residue = None
            for k, (cs, os_) in enumerate(zip(p.chunk_sels, p.out_sels, strict=True)):
                if (
                    type(cs) is slice
                    and type(os_) is slice
                    and cs.start == 0
                    and cs.stop == c
                    and cs.step in (None, 1)
                    and os_.step in (None, 1)
                    and os_.stop - os_.start == c
                ):
                    r = os_.start % c
                    if residue is None:
                        residue = r
                    if r == residue:
                        e[k] = True
                        b[k] = os_.start // c
            if residue is None:
                return None
            elig.append(e)
            bidx.append(b)
            base.append(residue)
        return cls(chunk, tuple(len(p.chunks) for p in dims), elig, bidx, base)

    def blocks(self, arr: np.ndarray, writeable: bool) -> np.ndarray:
        """``arr`` as a (blocks..., chunk...) strided view."""
        chunk = self.chunk
        nb = [(arr.shape[d] - self.base[d]) // c for d, c in enumerate(chunk)]
        view = arr[tuple(slice(b, b + n * c) for b, n, c in zip(self.base, nb, chunk, strict=True))]
        dt = view.dtype
        # as_strided goes through __array_interface__, which cannot describe
        # extension dtypes (bfloat16, float8): stride an unsigned view instead.
        plain = not dt.fields and dt.itemsize in (1, 2, 4, 8)
        src = view.view(f"u{dt.itemsize}") if plain else view
        out = np.lib.stride_tricks.as_strided(
            src,
            shape=(*nb, *chunk),
            strides=(*(c * s for c, s in zip(chunk, view.strides, strict=True)), *view.strides),
            writeable=writeable,
        )
        return out.view(dt) if plain else out

    def select(self, lo: int, n: int, present: np.ndarray | None) -> tuple[np.ndarray, tuple]:
        """Positions (in ``lo .. lo + n``) of qualifying items, and their block index."""
        ks = np.unravel_index(np.arange(lo, lo + n), self.lens)
        ok = self.elig[0][ks[0]]
        for e, k in zip(self.elig[1:], ks[1:], strict=True):
            ok = ok & e[k]
        if present is not None:
            ok = ok & present
        idx = np.flatnonzero(ok)
        return idx, tuple(b[k[idx]] for b, k in zip(self.bidx, ks, strict=True))


@dataclass(eq=False)
class BlockDecoder:
    """Whole small chunks that land in chunk-aligned blocks of the output, decoded
    a batch at a time: straight into their blocks by one C call without the GIL
    (the pipeline's ``decode_chunks_into``, plain zstd), or else into one
    buffer (``pipeline.decode_many``) stored with one numpy assignment into a
    blocked view of the output (``blocks``): for chunks of a few KiB the
    per-chunk Python work otherwise costs more than the decompression."""

    layout: BlockLayout
    blocks: np.ndarray
    pipeline: Any
    out: np.ndarray

    @classmethod
    def make(cls, items: Any, out: Any, grid: Any, pipeline: Any) -> BlockDecoder | None:
        if len(items) < MIN_ITEMS or getattr(pipeline, "decode_many", None) is None:
            return None
        layout = BlockLayout.make(items, out, grid)
        if layout is None:
            return None
        return cls(layout, layout.blocks(out, writeable=True), pipeline, out)

    def run(self, lo: int, datas: list[Any]) -> np.ndarray | None:
        """Decode and store the batch's eligible chunks; a mask of those done."""
        n = len(datas)
        present = np.fromiter((d is not None for d in datas), dtype=bool, count=n)
        idx, where = self.layout.select(lo, n, present)
        if len(idx) < 2:
            return None
        chosen = [datas[i] for i in idx.tolist()]
        placed = self._into(chosen, where)
        done = np.zeros(n, dtype=bool)
        if placed is not None:
            done[idx] = placed  # the others: the one-chunk path decodes or explains
            return done
        decoded = self.pipeline.decode_many(chosen, self.layout.chunk)
        if decoded is None:
            return None  # the one-chunk path decodes (and reports errors)
        self.blocks[where] = decoded
        done[idx] = True
        return done

    def _into(self, chosen: list[Any], where: tuple) -> np.ndarray | None:
        """The chunks decoded straight into their blocks of the output in one C
        call, where the pipeline can (which were placed); None where not."""
        into = getattr(self.pipeline, "decode_chunks_into", None)
        if into is None:
            return None
        starts = np.empty((len(chosen), len(where)), np.int64)
        for d, (b, c, base) in enumerate(zip(where, self.layout.chunk, self.layout.base,
                                             strict=True)):
            starts[:, d] = b * c + base
        return into(chosen, starts, self.layout.chunk, self.out)


@dataclass(eq=False)
class BlockEncoder:
    """The write side: whole small chunks of the value (its blocked view
    ``blocks``) gathered with one numpy indexing operation, checked against the
    fill value together, and encoded in a tight loop (``pipeline.encode_many``)."""

    layout: BlockLayout
    blocks: np.ndarray
    pipeline: Any
    fill: Any
    dtype: Any
    write_empty: bool

    @classmethod
    def make(
        cls,
        items: Any,
        value: Any,
        grid: Any,
        pipeline: Any,
        fill: Any,
        dtype: Any,
        write_empty: bool,
    ) -> BlockEncoder | None:
        if len(items) < MIN_ITEMS or getattr(pipeline, "encode_many", None) is None:
            return None
        layout = BlockLayout.make(items, value, grid)
        if layout is None:
            return None
        blocks = layout.blocks(value, writeable=False)
        return cls(layout, blocks, pipeline, fill, dtype, write_empty)

    def run(
        self,
        lo: int,
        n: int,
        keys: list[str],
        to_set: list[tuple[str, bytes]],
        to_delete: list[str],
    ) -> np.ndarray | None:
        idx, where = self.layout.select(lo, n, None)
        if len(idx) < 2:
            return None
        chunks = self.blocks[where]  # (m, *chunk), one gather
        if chunks.size == 0:
            return None
        keep = np.ones(len(idx), dtype=bool)
        if not self.write_empty:
            flat = chunks.reshape(len(idx), -1)
            first = flat[:, 0]
            try:
                maybe = np.flatnonzero((first == self.fill) | (first != first))
            except (TypeError, ValueError):
                maybe = np.arange(len(idx))
            for m in maybe.tolist():
                if is_fill(chunks[m], self.fill, self.dtype):
                    keep[m] = False
        encoded = self.pipeline.encode_many(chunks[keep], self.layout.chunk)
        if encoded is None:
            return None
        positions = (idx + lo).tolist()
        if len(encoded) == len(positions):  # nothing was fill: the common case
            to_set.extend(zip(map(keys.__getitem__, positions), encoded))
        else:
            it = iter(encoded)
            for pos, k in zip(positions, keep.tolist(), strict=True):
                if k:
                    to_set.append((keys[pos], next(it)))
                else:
                    to_delete.append(keys[pos])
        done = np.zeros(n, dtype=bool)
        done[idx] = True
        return done
