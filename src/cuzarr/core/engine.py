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
from typing import Any

import numpy as np

from cuzarr.buffer import cpu_prototype, is_device_array
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import sharding_codec
from cuzarr.core.sync import get_executor, max_workers
from cuzarr.errors import CodecError
from cuzarr.gpu.reader import device_reader_for
from cuzarr.gpu.writer import device_writer_for
from cuzarr.indexing.projection import DimProjection, ortho_index
from cuzarr.metadata.array import ArrayMetadata
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

# (coords, chunk selection, output selection, chunk wholly covered)
ChunkItem = tuple[tuple[int, ...], tuple[Any, ...], tuple[Any, ...], bool]


def chunk_items(projections: Sequence[DimProjection]) -> list[ChunkItem]:
    """All chunks a plan touches, with their in-chunk and output selections."""
    if not projections:
        return [((), (), (), True)]
    if any(not p.chunks for p in projections):
        return []
    n_arrays = sum(any(isinstance(s, np.ndarray) for s in p.chunk_sels) for p in projections)
    needs_ortho = n_arrays >= 2 or (
        n_arrays == 1
        and any(any(isinstance(s, np.ndarray) for s in p.out_sels) for p in projections)
        and len(projections) > 1
    )
    # itertools.product builds each tuple in C: a few hundred ns per chunk.
    prod = itertools.product
    coords = prod(*(p.chunks for p in projections))
    csels = prod(*(p.chunk_sels for p in projections))
    osels = prod(*(p.out_sels for p in projections))
    completes = map(all, prod(*(p.complete for p in projections)))
    if needs_ortho:
        csels = map(ortho_index, csels)
        osels = map(ortho_index, osels)
    items: list[ChunkItem] = list(zip(coords, csels, osels, completes))
    return items


def chunk_keys(store_path: StorePath, meta: ArrayMetadata, items: Sequence[ChunkItem]) -> list[str]:
    """Store keys of the items' chunks (one string join per chunk)."""
    prefix = store_path.path + "/" if store_path.path else ""
    cke = meta.chunk_key_encoding
    if cke.name == "default" and items and items[0][0]:
        # Render each coordinate once, not once per chunk.
        head = prefix + "c" + cke.separator
        sep = cke.separator
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


def _batch_size(meta: ArrayMetadata, n: int, device: bool = False) -> int:
    chunk_bytes = max(1, math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size))
    if device:
        # A device batch is one upload, one nvCOMP call per codec and one kernel
        # launch: make it large (up to 256 MiB decoded), two per worker.
        by_bytes = max(1, (256 << 20) // chunk_bytes)
        by_count = max(1, -(-n // (max_workers() * 2)))
        return max(1, min(8192, by_bytes, by_count))
    by_bytes = max(1, (4 << 20) // chunk_bytes)
    by_count = max(1, -(-n // (max_workers() * 4)))
    return max(1, min(256, by_bytes, by_count))


async def _run_batches(n: int, size: int, work: Callable[[int, int], Any]) -> None:
    limit = asyncio.Semaphore(max_workers() * 2 + 2)

    async def one(lo: int, hi: int) -> None:
        async with limit:
            await work(lo, hi)

    await asyncio.gather(*(one(lo, min(n, lo + size)) for lo in range(0, n, size)))


def keyed(e: CodecError, key: str) -> CodecError:
    """The same error, its message prefixed with the store key it concerns."""
    if str(e).startswith(f"{key}: "):
        return e
    return type(e)(f"{key}: {e}")


def _is_fill(chunk: np.ndarray, fill: Any, dtype: Any) -> bool:
    # Most chunks differ from the fill in their first element: answer that cheaply
    # before comparing the whole chunk.
    if chunk.size and chunk.dtype.kind in "biufcmM" and not chunk.dtype.fields:
        first = chunk.reshape(-1)[0] if chunk.flags.c_contiguous else chunk[(0,) * chunk.ndim]
        if first == first and first != fill:  # NaN first element: fall through
            return False
    if chunk.dtype.kind == "V" or chunk.dtype.fields:
        fb = np.array(fill, dtype=chunk.dtype).tobytes()
        return np.ascontiguousarray(chunk).tobytes() == fb * chunk.size
    if chunk.dtype.kind in "fc" and isinstance(
        fill, (float, complex, np.floating, np.complexfloating)
    ):
        f = np.asarray(fill)
        if np.isnan(f).any():
            if chunk.dtype.kind == "c":
                return bool(
                    np.all((chunk.real == f.real) | (np.isnan(chunk.real) & np.isnan(f.real)))
                    and np.all((chunk.imag == f.imag) | (np.isnan(chunk.imag) & np.isnan(f.imag)))
                )
            return bool(np.isnan(chunk).all())
    try:
        return bool(np.all(chunk == fill))
    except (TypeError, ValueError):
        return False


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
    if device is not None:

        def device_batch(lo: int, datas: list[bytes | None]) -> None:
            hi = lo + len(datas)
            device(items[lo:hi], datas, keys[lo:hi])

        return keys, device_batch, device
    decode_into = getattr(pipeline, "decode_into", None)

    def decode_batch(lo: int, datas: list[bytes | None]) -> None:
        decode = pipeline.decode
        for j, data in enumerate(datas):
            coords, csel, osel, complete = items[lo + j]
            if data is None:
                out[osel] = fill
                continue
            shape = grid.stored_chunk_shape(coords)
            try:
                if complete and decode_into is not None:
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


def read_items_small_sync(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: np.ndarray,
) -> bool:
    """Read a small request in the calling thread if the store allows blocking
    I/O; False (nothing done) otherwise."""
    if len(items) > SMALL_READ_CHUNKS:
        return False
    sio = store_path.store.sync_io()
    if sio is None:
        return False
    if items and out.size:
        keys, decode_batch, device = _read_job(store_path, meta, pipeline, items, out)
        direct = device.fetch(keys) if device is not None else None
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
    if read_items_small_sync(store_path, meta, pipeline, items, out):
        return
    keys, decode_batch, device = _read_job(store_path, meta, pipeline, items, out)
    store = store_path.store
    loop = asyncio.get_running_loop()
    pool = get_executor()
    sio = store.sync_io()
    if sio is not None:
        # Local, cheap I/O: one worker hop fetches, decodes and scatters a batch.
        def fetch_decode(lo: int, hi: int) -> None:
            direct = device.fetch(keys[lo:hi]) if device is not None else None
            decode_batch(lo, direct if direct is not None else sio.get_many(keys[lo:hi]))

        async def work(lo: int, hi: int) -> None:
            await loop.run_in_executor(pool, fetch_decode, lo, hi)
    else:

        async def work(lo: int, hi: int) -> None:
            datas = await store.get_many(keys[lo:hi])
            await loop.run_in_executor(pool, decode_batch, lo, datas)

    try:
        await _run_batches(
            len(items), _batch_size(meta, len(items), device is not None), work
        )
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
) -> None:
    """Write ``value`` (shaped like the plan's output) into the selected elements."""
    if value.size == 0:
        return
    await write_items(
        store_path, meta, pipeline, chunk_items(projections), value, write_empty_chunks
    )


async def write_items(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    value: np.ndarray,
    write_empty_chunks: bool,
) -> None:
    """Write ``value[osel]`` into each chunk item (read-modify-write where partial)."""
    if not items or value.size == 0:
        return
    keys = chunk_keys(store_path, meta, items)
    store = store_path.store
    fill = meta.read_fill
    dtype = meta.dtype
    grid = meta.chunk_grid
    order = meta.order
    loop = asyncio.get_running_loop()
    pool = get_executor()
    shard_codec = sharding_codec(pipeline)
    device = device_writer_for(
        pipeline, value, fill, grid.stored_chunk_shape, items, write_empty_chunks,
        shard_codec is not None,
    )
    if device is None and is_device_array(value):
        value = cpu_prototype.to_host(value)  # a write the device path does not take

    def encode_batch(
        lo: int, olds: list[bytes | None] | None
    ) -> tuple[list[tuple[str, bytes]], list[str]]:
        if device is not None and olds is not None:
            hi = lo + len(olds)
            return device(items[lo:hi], olds, keys[lo:hi])
        to_set: list[tuple[str, bytes]] = []
        to_delete: list[str] = []
        for j in range(len(olds) if olds is not None else 0):
            coords, csel, osel, complete = items[lo + j]
            shape = grid.stored_chunk_shape(coords)
            old = olds[j] if olds is not None else None
            part = value[osel] if osel else value
            if shard_codec is not None and old is not None and not complete:
                try:
                    encoded = shard_codec.update(
                        old, csel, part, ChunkSpec(shape, dtype, fill), write_empty_chunks
                    )
                except CodecError as e:
                    raise keyed(e, keys[lo + j]) from e
                if len(encoded) == 0:
                    to_delete.append(keys[lo + j])
                else:
                    to_set.append((keys[lo + j], encoded))
                continue
            if complete and part.shape == tuple(shape):
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
                chunk[csel] = part
            if not write_empty_chunks and _is_fill(chunk, fill, dtype):
                to_delete.append(keys[lo + j])
                continue
            encoded = pipeline.encode(chunk, shape)
            if len(encoded) == 0:  # a shard whose inner chunks are all empty
                to_delete.append(keys[lo + j])
            else:
                to_set.append((keys[lo + j], encoded))
        return to_set, to_delete

    sio = store.sync_io()

    def rmw_sync(lo: int, hi: int, need_old: list[int]) -> None:
        olds: list[bytes | None] = [None] * (hi - lo)
        if need_old:
            for i, data in zip(need_old, sio.get_many([keys[i] for i in need_old]), strict=True):
                olds[i - lo] = data
        to_set, to_delete = encode_batch(lo, olds)
        if to_set:
            sio.set_many(to_set)
        if to_delete:
            sio.delete_many(to_delete)

    async def work(lo: int, hi: int) -> None:
        need_old = [i for i in range(lo, hi) if not items[i][3]]
        lock_keys = getattr(store, "lock_keys", None)
        if sio is not None and lock_keys is None:
            # Local, cheap I/O: one worker hop reads, encodes and stores a batch.
            await loop.run_in_executor(pool, rmw_sync, lo, hi, need_old)
        elif lock_keys is not None:
            # Per-key locks (LocalStore: fcntl locks) around the read-modify-write of
            # partly covered chunks, and around whole-chunk writes so they serialize
            # with it: concurrent writers never lose each other's updates.
            async with lock_keys(keys[lo:hi]):
                await rmw(lo, hi, need_old)
        else:
            await rmw(lo, hi, need_old)

    async def rmw(lo: int, hi: int, need_old: list[int]) -> None:
        olds: list[bytes | None] = [None] * (hi - lo)
        if need_old:
            fetched = await store.get_many([keys[i] for i in need_old])
            for i, data in zip(need_old, fetched, strict=True):
                olds[i - lo] = data
        to_set, to_delete = await loop.run_in_executor(pool, encode_batch, lo, olds)
        if to_set:
            await store.set_many(to_set)
        if to_delete:
            await store.delete_many(to_delete)

    await _run_batches(len(items), _batch_size(meta, len(items), device is not None), work)
