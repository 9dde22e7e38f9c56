"""The chunk engine: run an orthogonal plan against a store, read or write.

A plan is a list of per-dimension projections; its chunks are the product of
their chunk lists. Work is cut into batches; each batch fetches its keys with
one ``get_many`` and is decoded and scattered in the codec thread pool, so the
per-chunk cost is a few microseconds of Python plus the codec itself. Batches
run concurrently under a bound, which keeps peak memory near the output size.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.buffer import cpu_prototype, is_device_array
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.pipeline import BATCH_DECODE_MAX
from cuzarr.codecs.sharding import sharding_codec
from cuzarr.config import flag
from cuzarr.core.sync import device_read_workers, get_executor, max_workers
from cuzarr.core.workers import pull_batches, raise_mmap_threshold
from cuzarr.errors import ChunkNotFoundError, CodecError
from cuzarr.gpu.dispatch import device_reader_for, device_writer_for, emulating
from cuzarr.indexing.projection import (
    EDGE,
    LOOSE,
    DimProjection,
    combine_complete,
    ortho_index,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.storage.base import gather_or_cancel, joined, run_job
from cuzarr.storage.common import StorePath

__all__ = [
    "ChunkItem",
    "chunk_items",
    "coordinate_items",
    "read_items",
    "read_plan",
    "write_items",
    "write_plan",
]

_MISSING: Any = object()

# (coords, chunk selection, output selection, chunk wholly covered)
ChunkItem = tuple[tuple[int, ...], tuple[Any, ...], tuple[Any, ...], bool]


class ChunkItems(list):  # type: ignore[type-arg]
    """``chunk_items``' result. When the items are the product of per-dimension
    slice projections, ``dims`` keeps each dimension's list of (chunk selection,
    output selection) pairs, so batch work can be vectorized per dimension
    (item ``i`` is ``np.unravel_index(i, lens)`` of them)."""

    dims: list[DimProjection] | None = None


def chunk_items(projections: Sequence[DimProjection]) -> list[ChunkItem]:
    """All chunks a plan touches, with their in-chunk and output selections."""
    if not projections:
        return [((), (), (), True)]
    if all(len(p.chunks) == 1 for p in projections):
        # One chunk (a small read or write): its item directly, with what the
        # general path below gives it.
        csel = tuple(p.chunk_sels[0] for p in projections)
        osel = tuple(p.out_sels[0] for p in projections)
        if not any(isinstance(x, np.ndarray) for x in (*csel, *osel)):
            one = ChunkItems(
                [
                    (
                        tuple(p.chunks[0] for p in projections),
                        csel,
                        osel,
                        combine_complete(tuple(p.complete[0] for p in projections)),
                    )
                ]
            )
            one.dims = list(projections)
            return one
    if any(not p.chunks for p in projections):
        return []
    n_arrays = sum(any(isinstance(s, np.ndarray) for s in p.chunk_sels) for p in projections)
    # Index arrays on two or more dimensions, on either side (a contiguous run of
    # a chunk can land on scattered output positions, and the reverse), broadcast
    # together unless made orthogonal.
    array_dims = sum(
        any(isinstance(s, np.ndarray) for s in (*p.chunk_sels, *p.out_sels))
        for p in projections
    )
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


def chunk_keys(store_path: StorePath, meta: ArrayMetadata, items: Sequence[ChunkItem]) -> list[str]:
    """Store keys of the items' chunks (one string join per chunk)."""
    prefix = store_path.path + "/" if store_path.path else ""
    cke = meta.chunk_key_encoding
    if cke.name == "default" and items and items[0][0]:
        head = prefix + "c" + cke.separator
        sep = cke.separator
        dims = getattr(items, "dims", None)
        if dims is not None:
            # A product of per-dimension chunk lists (in the items' order): render
            # each dimension's coordinates once and join in C (20,000 keys: 2.3 vs 5.7 ms).
            per_dim = [[str(c) for c in p.chunks] for p in dims]
            return [head + k for k in map(sep.join, itertools.product(*per_dim))]
        # Render each coordinate once, not once per chunk.
        cache: dict[int, str] = {}
        out = []
        for it in items:
            parts = []
            for c in it[0]:
                s = cache.get(c)
                if s is None:
                    s = cache[c] = str(c)
                parts.append(s)
            out.append(head + sep.join(parts))
        return out
    encode_key = cke.make_encoder(prefix)
    return [encode_key(it[0]) for it in items]


def _batch_size(meta: ArrayMetadata, n: int, device: bool = False, read: bool = True) -> int:
    chunk_bytes = max(1, math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size))
    if device:
        # A device batch is one upload, one nvCOMP call per codec and one kernel
        # launch: make it large (up to 256 MiB decoded), two per worker (a read
        # runs gpu.read_workers of them, a write the whole pool).
        by_bytes = max(1, (256 << 20) // chunk_bytes)
        workers = device_read_workers() if read else max_workers()
        by_count = max(1, -(-n // (workers * 2)))
        return max(1, min(8192, by_bytes, by_count))
    by_bytes = max(1, (4 << 20) // chunk_bytes)
    by_count = max(1, -(-n // (max_workers() * 4)))
    return max(1, min(256, by_bytes, by_count))


def _large_chunks(meta: ArrayMetadata) -> bool:
    """Chunks large enough to be read one per batch (in worker loops): one
    chunk's decode dwarfs the loop's per-batch cost, and its compressed bytes
    are still in cache when it is decoded."""
    return math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size) >= (512 << 10)


async def _run_batches(n: int, size: int, work: Callable[[int, int], Any]) -> None:
    await _run_ranges([(lo, min(n, lo + size)) for lo in range(0, n, size)], work)


async def _run_ranges(ranges: Sequence[tuple[int, int]], work: Callable[[int, int], Any]) -> None:
    """``work(lo, hi)`` for every range, a bounded number at a time (each may
    hold buffers, descriptors and locks while it waits)."""
    limit = asyncio.Semaphore(max_workers() * 2 + 2)

    async def one(lo: int, hi: int) -> None:
        async with limit:
            await work(lo, hi)

    # one failing range stops the others, and is reported once they have unwound
    await gather_or_cancel(*(one(lo, hi) for lo, hi in ranges))


def keyed(e: CodecError, key: str) -> CodecError:
    """The same error, its message prefixed with the store key it concerns."""
    if str(e).startswith(f"{key}: "):
        return e
    return type(e)(f"{key}: {e}")


def missing_chunks_refused(meta: ArrayMetadata) -> bool:
    """Whether reading a chunk that is not stored is an error for this array (its
    ``read_missing_chunks`` setting, else the global ``array.read_missing_chunks``)."""
    allowed = meta.read_missing_chunks
    if allowed is None:
        allowed = flag("array.read_missing_chunks", True)
    return not allowed


def refuse_missing(store_path: StorePath, keys: Sequence[str]) -> None:
    """Raise ``ChunkNotFoundError`` for the store keys ``keys`` (none: nothing)."""
    if keys:
        listed = "\n".join(f"  chunk {k!r}" for k in keys[:20])
        more = f"\n  ... and {len(keys) - 20} more" if len(keys) > 20 else ""
        raise ChunkNotFoundError(
            f"{len(keys)} chunk(s) not found in store {store_path.store!r}.\n"
            "Set the 'array.read_missing_chunks' config (or the array's config "
            "read_missing_chunks) to True to fill missing chunks with the fill value.\n"
            f"Missing chunks:\n{listed}{more}"
        )


def _is_fill(chunk: np.ndarray, fill: Any, dtype: Any) -> bool:
    # Most chunks differ from the fill in their first element: answer that cheaply
    # before comparing the whole chunk.
    if chunk.size and chunk.dtype.kind in "biufcmM" and not chunk.dtype.fields:
        first = chunk.reshape(-1)[0] if chunk.flags.c_contiguous else chunk[(0,) * chunk.ndim]
        if first == first and first != fill:  # NaN first element: fall through
            return False
        if chunk.ndim and chunk.size > _FILL_PROBE and chunk.shape[0] > 1:
            # ... and the rest in its first few rows (data that starts at the fill
            # value, as a sum from zero does): a whole 64 MiB shard compared with
            # the fill took ~10 ms before its encoding started.
            rows = max(1, _FILL_PROBE * chunk.shape[0] // chunk.size)
            if not _is_fill(chunk[:rows], fill, dtype):
                return False
    if chunk.dtype.kind == "V" or chunk.dtype.fields:
        fb = np.array(fill, dtype=chunk.dtype).tobytes()
        return np.ascontiguousarray(chunk).tobytes() == fb * chunk.size
    if chunk.dtype.kind in "fc":
        try:
            f = np.asarray(fill, dtype=chunk.dtype)
        except (TypeError, ValueError):
            return False
        if chunk.dtype.kind == "c":
            return _floats_are(chunk.real, f.real) and _floats_are(chunk.imag, f.imag)
        return _floats_are(chunk, f)
    if chunk.dtype.kind in "mM":
        # Compare the int64 values: NaT != NaT, so a NaT fill never matched.
        try:
            f = np.asarray(fill, dtype=chunk.dtype)
        except (TypeError, ValueError):
            return False
        return bool((chunk.view("i8") == f.view("i8")).all())
    if chunk.dtype.kind == "O":
        # Element by element with Python's ==: numpy would turn a bytes or str
        # fill into a numpy scalar first, which drops trailing NULs (b"a" would
        # then equal a b"a\x00" fill, and be lost).
        f = np.empty((), dtype=object)
        f[()] = fill
        try:
            return bool(np.all(chunk == f))
        except (TypeError, ValueError):
            return False
    try:
        return bool(np.all(chunk == fill))
    except (TypeError, ValueError):
        return False


# Elements of a chunk's leading rows compared with the fill value first.
_FILL_PROBE = 1 << 14


def _floats_are(x: np.ndarray, f: np.ndarray) -> bool:
    """Whether every element of the float array ``x`` is the 0-d ``f``: the same
    bits (-0.0 is not a 0.0 fill), any NaN for a NaN fill."""
    if np.isnan(f):
        return bool(np.isnan(x).all())
    bits = np.dtype(f"u{x.dtype.itemsize}")
    return bool((x.view(bits) == f.view(bits)).all())


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


async def read_plan(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    projections: Sequence[DimProjection],
    out: np.ndarray,
) -> None:
    """Fill ``out`` (shaped like the plan's output) with the selected elements."""
    if out.size == 0:
        return
    await read_items(store_path, meta, pipeline, chunk_items(projections), out)


# Requests of at most this many chunks on a store with cheap blocking I/O run
# inline (no thread hop): for them the hops cost more than the work.
SMALL_READ_CHUNKS = 4
# ... and host reads of up to SMALL_READ_MAX chunks holding SMALL_READ_BYTES in
# all (ten random points of an array of small chunks: a thread hop costs tens of
# microseconds, decoding a 16 KiB chunk a few).
SMALL_READ_MAX = 32
SMALL_READ_BYTES = 256 << 10


def small_read(meta: ArrayMetadata, n: int, out: Any) -> bool:
    """Whether a read of ``n`` chunks of ``meta`` into ``out`` is small enough to
    run inline (see SMALL_READ_CHUNKS); beyond SMALL_READ_CHUNKS, host reads only."""
    if n <= SMALL_READ_CHUNKS:
        return True
    if n > SMALL_READ_MAX or type(out) is not np.ndarray:
        return False
    if n * math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size) > SMALL_READ_BYTES:
        return False
    return not emulating()  # the device path's host twins: batched as on the device


def _read_job(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: Any,
) -> tuple[list[str], Callable[[int, list[bytes | None]], None], Any]:
    """The keys of ``items``, a function decoding a batch of them into ``out``,
    and the device reader doing so (``None`` for host reads; its executor's
    ``synchronize`` must run before the read returns)."""
    keys = chunk_keys(store_path, meta, items)
    fill = meta.read_fill
    grid = meta.chunk_grid
    device = device_reader_for(pipeline, out, fill, grid.stored_chunk_shape, store_path.store)
    strict = missing_chunks_refused(meta)
    if device is not None:

        def device_batch(lo: int, datas: list[bytes | None]) -> None:
            hi = lo + len(datas)
            if strict:
                refuse_missing(store_path, [keys[lo + j] for j, d in enumerate(datas) if d is None])
            device(items[lo:hi], datas, keys[lo:hi])

        return keys, device_batch, device
    decode_into = getattr(pipeline, "decode_into", None)
    blocks = _BlockDecoder.make(items, out, grid, pipeline)

    def decode_batch(lo: int, datas: list[bytes | None]) -> None:
        if strict:
            refuse_missing(store_path, [keys[lo + j] for j, d in enumerate(datas) if d is None])
        decode = pipeline.decode
        done = blocks.run(lo, datas) if blocks is not None else None
        for j, data in enumerate(datas):
            if done is not None and done[j]:
                continue
            coords, csel, osel, complete = items[lo + j]
            if data is None:
                out[osel] = fill
                continue
            shape = grid.stored_chunk_shape(coords)
            try:
                if complete and decode_into is not None and out.ndim:
                    # A whole chunk landing in a contiguous part of the output is
                    # decompressed straight into it: no intermediate buffer.
                    target = out[osel]
                    if (
                        target.flags.c_contiguous
                        and target.shape == tuple(shape)
                        and np.shares_memory(target, out)
                        and decode_into(data, shape, target)
                    ):
                        continue
                chunk = decode(data, shape, scratch=True)
            except CodecError as e:
                raise keyed(e, keys[lo + j]) from e
            out[osel] = chunk[csel]

    return keys, decode_batch, None


@dataclass
class _BlockLayout:
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
    def make(cls, items: Any, arr: Any, grid: Any) -> _BlockLayout | None:
        dims = getattr(items, "dims", None)
        if (
            not dims
            or not isinstance(arr, np.ndarray)
            or arr.ndim != len(dims)
            or not isinstance(grid, RegularChunkGrid)
            or arr.dtype.hasobject
            or len(items) < 8
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


class _BlockDecoder:
    """Whole small chunks that land in chunk-aligned blocks of the output, decoded
    a batch at a time (``pipeline.decode_many``) and stored with one numpy
    assignment into a blocked view of the output: for chunks of a few KiB the
    per-chunk Python work otherwise costs more than the decompression."""

    def __init__(self, layout: _BlockLayout, out: np.ndarray, pipeline: Any) -> None:
        self.layout = layout
        self.pipeline = pipeline
        self.blocks = layout.blocks(out, writeable=True)

    @classmethod
    def make(cls, items: Any, out: Any, grid: Any, pipeline: Any) -> _BlockDecoder | None:
        if getattr(pipeline, "decode_many", None) is None:
            return None
        layout = _BlockLayout.make(items, out, grid)
        return None if layout is None else cls(layout, out, pipeline)

    def run(self, lo: int, datas: list[Any]) -> np.ndarray | None:
        """Decode and store the batch's eligible chunks; a mask of those done."""
        n = len(datas)
        present = np.fromiter((d is not None for d in datas), dtype=bool, count=n)
        idx, where = self.layout.select(lo, n, present)
        if len(idx) < 2:
            return None
        decoded = self.pipeline.decode_many([datas[i] for i in idx.tolist()], self.layout.chunk)
        if decoded is None:
            return None  # the one-chunk path decodes (and reports errors)
        self.blocks[where] = decoded
        done = np.zeros(n, dtype=bool)
        done[idx] = True
        return done


class _BlockEncoder:
    """The write side: whole small chunks of the value gathered with one numpy
    indexing operation, checked against the fill value together, and encoded in
    a tight loop (``pipeline.encode_many``)."""

    def __init__(
        self,
        layout: _BlockLayout,
        value: np.ndarray,
        pipeline: Any,
        fill: Any,
        dtype: Any,
        write_empty: bool,
    ) -> None:
        self.layout = layout
        self.pipeline = pipeline
        self.fill = fill
        self.dtype = dtype
        self.write_empty = write_empty
        self.blocks = layout.blocks(value, writeable=False)

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
    ) -> _BlockEncoder | None:
        if getattr(pipeline, "encode_many", None) is None:
            return None
        layout = _BlockLayout.make(items, value, grid)
        return None if layout is None else cls(layout, value, pipeline, fill, dtype, write_empty)

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
                if _is_fill(chunks[m], self.fill, self.dtype):
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


def read_items_small_sync(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: np.ndarray,
    sio: Any = None,
    on_loop: bool = False,
) -> bool:
    """Read a small request in the calling thread if the store allows blocking
    I/O; False (nothing done) otherwise. ``sio``: the store's ``sync_io()``, if
    the caller has it already. ``on_loop``: the calling thread runs an event
    loop (the async API), which only the smallest reads may hold up."""
    if on_loop and len(items) > SMALL_READ_CHUNKS:
        return False  # other tasks of that loop would wait on the decoding
    if not small_read(meta, len(items), out):
        return False
    if sio is None:
        sio = store_path.store.sync_io()
    if sio is None:
        return False
    if items and out.size:
        keys, decode_batch, device = _read_job(store_path, meta, pipeline, items, out)
        direct = device.fetch(keys, items) if device is not None else None
        decode_batch(0, direct if direct is not None else sio.get_many(keys))
        if device is not None:
            device.executor.synchronize()
    return True


async def read_items(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: np.ndarray,
) -> None:
    """Read every chunk item and scatter it into ``out``."""
    if not items or out.size == 0:
        return
    if read_items_small_sync(store_path, meta, pipeline, items, out, on_loop=True):
        return
    keys, decode_batch, device = _read_job(store_path, meta, pipeline, items, out)
    store = store_path.store
    loop = asyncio.get_running_loop()
    pool = get_executor()
    sio = store.sync_io()
    try:
        if sio is not None:
            # Local, cheap I/O: worker loops fetch, decode and scatter batch after
            # batch, with no trip through the event loop in between.
            size = _batch_size(meta, len(items), device is not None)
            reused = None
            if device is None and _large_chunks(meta):
                size = 1
                # decoded (and copied out) before this thread reads the next chunk
                reused = sio.get_reused

            def fetch_decode(lo: int, hi: int) -> None:
                if reused is not None:
                    decode_batch(lo, [reused(keys[lo])])
                    return
                direct = device.fetch(keys[lo:hi], items[lo:hi]) if device is not None else None
                decode_batch(lo, direct if direct is not None else sio.get_many(keys[lo:hi]))

            await pull_batches(len(items), size, fetch_decode,
                               loops=device_read_workers() if device is not None else None)
            return

        async def work(lo: int, hi: int) -> None:
            datas = await store.get_many(keys[lo:hi])
            await loop.run_in_executor(pool, decode_batch, lo, datas)

        await _run_batches(len(items), _batch_size(meta, len(items), device is not None), work)
    finally:
        if device is not None:
            device.executor.synchronize()


async def write_plan(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    projections: Sequence[DimProjection],
    value: np.ndarray,
    write_empty_chunks: bool,
    fields: str | list[str] | None = None,
) -> None:
    """Write ``value`` (shaped like the plan's output) into the selected elements
    (only their ``fields``, when given: see :func:`write_items`)."""
    if value.size == 0:
        return
    await write_items(
        store_path,
        meta,
        pipeline,
        chunk_items(projections),
        value,
        write_empty_chunks,
        fields=fields,
    )


def merge_into(
    chunk: np.ndarray,
    sel: Any,
    part: np.ndarray,
    fields: str | list[str] | None = None,
    where: np.ndarray | None = None,
) -> None:
    """``chunk[sel] = part``, limited to the record ``fields`` of a structured
    dtype and to the elements where ``where`` (shaped like ``part``) is True."""
    if isinstance(fields, list):
        # One name at a time: a view of several fields keeps the whole record's
        # item size, and a fancy-indexed assignment through it writes the other
        # fields' bytes too.
        for name in fields:
            merge_into(chunk, sel, part, name, where)
        return
    if fields is not None:
        chunk = chunk[fields]
        part = part[fields]
    if where is None:
        chunk[sel] = part
        return
    target = chunk[sel]
    if target.ndim > where.ndim:  # a sub-array field: its own axes trail the mask's
        where = where.reshape(where.shape + (1,) * (target.ndim - where.ndim))
    if np.shares_memory(target, chunk):
        np.copyto(target, part, where=where)
    else:  # index arrays gave a copy: merged, then put back
        np.copyto(target, part, where=where)
        chunk[sel] = target


async def write_items(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    value: np.ndarray,
    write_empty_chunks: bool,
    fields: str | list[str] | None = None,
    where: np.ndarray | None = None,
) -> None:
    """Write ``value[osel]`` into each chunk item (read-modify-write where partial).

    ``fields`` (record field names of a structured dtype) writes only those
    fields of ``value``'s records, and ``where`` (a boolean array shaped like
    ``value``) only the elements where it is True. Either makes every chunk a
    read-modify-write (except, for ``where``, the chunks it covers whole), done
    under the store's key locks like any partial write, so a concurrent writer
    of the other fields or elements keeps its update."""
    if not items or value.size == 0:
        return
    job = _WriteJob(
        store_path, meta, pipeline, items, value, write_empty_chunks, fields, where
    )
    keys, items, device, sio = job.keys, job.items, job.device, job.sio
    encode_batch, rmw_sync, need_old = job.encode_batch, job.rmw_sync, job.need_old
    for_store, shard_codec = job.for_store, job.shard_codec
    store = store_path.store
    loop = asyncio.get_running_loop()
    pool = get_executor()
    lock_keys = getattr(store, "lock_keys", None)

    async def work(lo: int, hi: int) -> None:
        if lock_keys is not None:
            # Per-key locks (LocalStore: fcntl locks) around the read-modify-write of
            # partly covered chunks, and around whole-chunk writes so they serialize
            # with it: concurrent writers never lose each other's updates. Waited
            # for on the loop; the batch's read, encode and write then run in one hop.
            async with lock_keys(keys[lo:hi]):
                if sio is not None:
                    # waited for even when cancelled: the locks must outlast the write
                    await run_job(pool, rmw_sync, lo, hi, need_old(lo, hi))
                else:
                    await rmw(lo, hi, need_old(lo, hi))
        else:
            await rmw(lo, hi, need_old(lo, hi))

    async def rmw(lo: int, hi: int, need_old: list[int]) -> None:
        olds: list[bytes | None] = [None] * (hi - lo)
        if need_old:
            fetched = await store.get_many([keys[i] for i in need_old])
            for i, data in zip(need_old, fetched, strict=True):
                olds[i - lo] = data
        to_set, to_delete = await loop.run_in_executor(pool, encode_batch, lo, olds)
        if to_set:
            await store.set_many(for_store(to_set))
        if to_delete:
            await store.delete_many(to_delete)

    size = _batch_size(meta, len(items), device is not None, read=False)
    job.prime_allocator()
    if sio is not None:
        # Local, cheap I/O: worker loops read, encode and store batch after batch;
        # a batch whose locks are busy is handed back and waited for on the loop.
        # A shard's inner chunks are encoded in parallel by loops with no batch
        # left (ShardingCodec via workers.share).
        helpable = (
            device is None
            and shard_codec is not None
            and shard_codec.shares(meta.dtype.item_size)
        )
        declined = await pull_batches(len(items), size, job.try_rmw, helpable=helpable)
        if declined:
            await _run_ranges(declined, work)
        return
    await _run_batches(len(items), size, work)


# Writes of at most this many chunks (and SMALL_WRITE_BYTES of chunk data) on a
# store with cheap blocking I/O may run in the calling thread (see
# write_items_small_sync).
SMALL_WRITE_CHUNKS = 4
SMALL_WRITE_BYTES = 4 << 20


def small_write(meta: ArrayMetadata, n: int) -> bool:
    """Whether a host write of ``n`` chunk items of ``meta`` is small enough for
    :func:`write_items_small_sync` (decided before the value is converted, so a
    write that goes the slow way converts it once)."""
    if n > SMALL_WRITE_CHUNKS or emulating():
        return False
    chunk_nbytes = math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size)
    return n <= 1 or n * chunk_nbytes <= SMALL_WRITE_BYTES


def write_items_small_sync(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    value: np.ndarray,
    write_empty_chunks: bool,
) -> bool:
    """:func:`write_items` of a small host write, done in the calling thread when
    the store allows blocking I/O and the chunks' locks are free at once; False
    (nothing done) otherwise, for the caller to go through the event loop. The
    same job as the pool's worker loops run (``_WriteJob.rmw_sync``), under the
    same key locks, taken all at once or not at all."""
    if not items or value.size == 0:
        return True
    # big enough that encoding the chunks in parallel pays, or a device path
    if not small_write(meta, len(items)) or is_device_array(value):
        return False
    store = store_path.store
    sio = store.sync_io()
    if sio is None:
        return False
    job = _WriteJob(store_path, meta, pipeline, items, value, write_empty_chunks, sio=sio)
    if job.device is not None:
        return False
    job.prime_allocator()
    return job.try_rmw(0, len(items))


class _WriteJob:
    """What a write of chunk items does to each batch, whoever runs it: the keys,
    the encoder of a batch, and the blocking read-modify-write of a batch for
    stores with ``sync_io``."""

    def __init__(
        self,
        store_path: StorePath,
        meta: ArrayMetadata,
        pipeline: Any,
        items: list[ChunkItem],
        value: np.ndarray,
        write_empty_chunks: bool,
        fields: str | list[str] | None = None,
        where: np.ndarray | None = None,
        sio: Any = _MISSING,
    ) -> None:
        self.meta = meta
        self.store_path = store_path
        merging = fields is not None or where is not None
        keys = self.keys = chunk_keys(store_path, meta, items)
        store = store_path.store
        fill = meta.read_fill
        dtype = meta.dtype
        grid = meta.chunk_grid
        order = meta.order
        shard_codec = self.shard_codec = sharding_codec(pipeline)
        # shards, also under other codecs (sharding_codec: only when it is alone)
        sharded = getattr(getattr(pipeline, "array_bytes", None), "name", None) == "sharding_indexed"
        device = (
            None
            if merging
            else device_writer_for(
                pipeline,
                value,
                fill,
                grid.stored_chunk_shape,
                items,
                write_empty_chunks,
                shard_codec is not None,
            )
        )
        if device is None and is_device_array(value):
            value = cpu_prototype.to_host(value)  # a write the device path does not take
        if where is not None and is_device_array(where):
            where = cpu_prototype.to_host(where)
        blocks = (
            _BlockEncoder.make(items, value, grid, pipeline, fill, dtype, write_empty_chunks)
            if device is None and shard_codec is None and not merging
            else None
        )
        # Chunks whose old contents survive the write in part: those the selection
        # covers in part, all of them for a write of some fields, and those where
        # ``where`` leaves an element out.
        partial: set[int] = set()
        if fields is not None:
            partial = set(range(len(items)))
        elif where is not None:
            partial = {
                i for i, it in enumerate(items) if it[3] and not where[it[2] if it[2] else ...].all()
            }
        # As zarr-python (whose sharding codec encodes partially): a shard cut by the
        # array's end is updated in place even when the write covers what is inside
        # the array, so its stale inner chunks past the end survive.
        cut_shards: set[int] = set()
        if shard_codec is not None:
            last = [
                d.nchunks - 1 if d.nchunks and d.data_len(d.nchunks - 1) < d.chunk_len(d.nchunks - 1)
                else -1
                for d in grid.dims(meta.shape)
            ]
            if any(e >= 0 for e in last):
                cut_shards = {
                    i
                    for i, it in enumerate(items)
                    if it[3] and any(c == e for c, e in zip(it[0], last, strict=True))
                }

        def encode_batch(
            lo: int, olds: list[bytes | None] | None
        ) -> tuple[list[tuple[str, bytes]], list[str]]:
            if device is not None and olds is not None:
                hi = lo + len(olds)
                return device(items[lo:hi], olds, keys[lo:hi])
            to_set: list[tuple[str, bytes]] = []
            to_delete: list[str] = []
            n = len(olds) if olds is not None else 0
            done = blocks.run(lo, n, keys, to_set, to_delete) if blocks is not None and n else None
            for j in range(n):
                if done is not None and done[j]:
                    continue
                coords, csel, osel, complete = items[lo + j]
                if (cut_shards and lo + j in cut_shards) or (partial and lo + j in partial):
                    complete = False
                shape = grid.stored_chunk_shape(coords)
                old = olds[j] if olds is not None else None
                part = value[osel] if osel else value
                mask = None if where is None else (where[osel] if osel else where)
                if shard_codec is not None and not complete and (old is not None or write_empty_chunks):
                    # only the inner chunks the write touches (zarr-python too): with
                    # write_empty_chunks, a new or cut shard gets no fill-valued inner
                    # chunks the write does not reach (such as those past the array end).
                    # A new shard without it: the whole-shard encode below leaves the
                    # untouched (fill) inner chunks out too, and batches the others.
                    try:
                        encoded = shard_codec.update(
                            old,
                            csel,
                            part,
                            ChunkSpec(shape, dtype, fill),
                            write_empty_chunks,
                            fields=fields,
                            where=mask,
                        )
                    except CodecError as e:
                        raise keyed(e, keys[lo + j]) from e
                    if len(encoded) == 0:
                        to_delete.append(keys[lo + j])
                    else:
                        to_set.append((keys[lo + j], encoded))
                    continue
                if complete and not merging and part.shape == tuple(shape):
                    chunk = part
                else:
                    if old is not None and not complete:
                        try:
                            chunk = pipeline.decode(old, shape)
                        except CodecError as e:
                            raise keyed(e, keys[lo + j]) from e
                        if not chunk.flags.writeable:
                            chunk = chunk.copy(order=order)
                    else:
                        chunk = dtype.full(shape, fill, order=order)
                    if merging:
                        merge_into(chunk, csel, part, fields, mask)
                    else:
                        chunk[csel] = part
                if not write_empty_chunks and _is_fill(chunk, fill, dtype):
                    to_delete.append(keys[lo + j])
                    continue
                encoded = (
                    pipeline.encode(chunk, shape, write_empty_chunks=True)
                    if write_empty_chunks and sharded
                    else pipeline.encode(chunk, shape)
                )
                if len(encoded) == 0:  # a shard whose inner chunks are all empty
                    to_delete.append(keys[lo + j])
                else:
                    to_set.append((keys[lo + j], encoded))
            return to_set, to_delete

        self.sio = sio = store.sync_io() if sio is _MISSING else sio
        # shards come from the pipeline unjoined (storage.base.Concat): the stores
        # that write parts get them so, the others bytes
        joins = sharded and not getattr(store, "takes_parts", False)

        def for_store(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
            return [(k, joined(v)) for k, v in pairs] if joins else pairs

        def rmw_sync(lo: int, hi: int, need_old: list[int]) -> None:
            olds: list[bytes | None] = [None] * (hi - lo)
            if need_old:
                for i, data in zip(need_old, sio.get_many([keys[i] for i in need_old]), strict=True):
                    olds[i - lo] = data
            to_set, to_delete = encode_batch(lo, olds)
            if to_set:
                sio.set_many(for_store(to_set))
            if to_delete:
                sio.delete_many(to_delete)

        def need_old(lo: int, hi: int) -> list[int]:
            return [
                i for i in range(lo, hi) if not items[i][3] or i in cut_shards or i in partial
            ]

        self.items = items
        self.device = device
        self.encode_batch = encode_batch
        self.for_store = for_store
        self.rmw_sync = rmw_sync
        self.need_old = need_old

    def try_rmw(self, lo: int, hi: int) -> bool:
        """The blocking read-modify-write of items ``lo:hi`` under their key
        locks, if those are free at once; False (nothing done) when they are
        busy, or are a store's locks that can only be awaited."""
        lock_keys = getattr(self.store_path.store, "lock_keys", None)
        if lock_keys is None:
            self.rmw_sync(lo, hi, self.need_old(lo, hi))
            return True
        locks = lock_keys(self.keys[lo:hi])
        if not hasattr(locks, "try_acquire") or not locks.try_acquire():
            return False
        try:
            self.rmw_sync(lo, hi, self.need_old(lo, hi))
        finally:
            locks.release()
        return True

    def prime_allocator(self) -> None:
        meta = self.meta
        chunk_nbytes = math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size)
        if self.device is None and chunk_nbytes >= (64 << 10):
            raise_mmap_threshold(max(4 << 20, 2 * chunk_nbytes))
