"""The chunk engine: chunk items of a selection, and the read and write entry points.

A selection's plan is a list of per-dimension projections; its chunks are the
product of their chunk lists (:func:`chunk_items`). A read or write of those
items is a job (:class:`~cuzarr.core.read_job.ReadJob`,
:class:`~cuzarr.core.write_job.WriteJob`, the sharded reader's
:class:`~cuzarr.core.shards.ShardReadJob`) cut into batches; each batch is a
plan of store requests and compute steps, run by one of the two drivers of
:mod:`cuzarr.core.plans`: inline with the store's blocking I/O, or async. The
per-chunk cost is a few microseconds of Python plus the codec itself. Batches
run concurrently under a bound, which keeps peak memory near the output size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.buffer import is_device_array
from cuzarr.config import config, setting
from cuzarr.core.plans import execute, try_inline
from cuzarr.core.read_job import ReadJob, large_chunks, missing_chunks_refused
from cuzarr.core.write_job import WriteJob
from cuzarr.gpu.dispatch import emulating
from cuzarr.indexing.items import ChunkItem, chunk_items, coordinate_items
from cuzarr.indexing.projection import DimProjection
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.runtime.sync import device_read_workers, max_workers
from cuzarr.storage.common import StorePath

__all__ = [
    "ChunkItem",
    "chunk_items",
    "chunk_keys",
    "coordinate_items",
    "missing_chunks_refused",
    "read_items",
    "read_job",
    "try_read_inline",
    "try_write_inline",
    "write_items",
    "write_job",
    "write_plan",
]


def chunk_keys(store_path: StorePath, meta: ArrayMetadata, items: Sequence[ChunkItem]) -> list[str]:
    """Store keys of the items' chunks (one string join per chunk)."""
    prefix = store_path.path + "/" if store_path.path else ""
    cke = meta.chunk_key_encoding
    dims = getattr(items, "dims", None)
    if dims is not None and (items.positions_ is not None or items.start
                             or len(items) != math.prod(len(p.chunks) for p in dims)):
        dims = None  # a part of the product only
    # (an item's coordinates: from dims where known, no item made for them)
    if cke.name == "default" and items and (dims if dims is not None else items[0][0]):
        head = prefix + "c" + cke.separator
        sep = cke.separator
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


# decoded bytes of one batch of a device read: cuzarr.config key
# gpu.read_batch_bytes (see batch_size)
READ_BATCH_BYTES = 32 << 20


def read_batch_bytes() -> int:
    """``cuzarr.config`` key ``gpu.read_batch_bytes`` (default 32 MiB)."""
    value = config.get("gpu.read_batch_bytes", READ_BATCH_BYTES)
    return max(1, int(value or READ_BATCH_BYTES))


# The least decoded bytes of a device read's batch split off to give every
# worker two
DEVICE_BATCH_MIN_BYTES = 4 << 20


def batch_size(meta: ArrayMetadata, n: int, device: bool = False, read: bool = True) -> int:
    chunk_bytes = max(1, math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size))
    if device:
        # A device batch is one upload, nvCOMP calls per sub-batch and one kernel
        # launch. Reads: gpu.read_batch_bytes (32 MiB decoded): on the host twin
        # 1 GiB reads with ~8% less CPU than at 256 MiB (the staging is still in
        # cache when reused), and gpu.read_workers threads of such batches keep
        # their pinned staging within gpu.staging_keep_bytes, so it is reused
        # from read to read instead of pinned anew. A batch is then about one
        # sub-batch, and such batches alternate over an executor's side streams
        # (GpuExecutor._run_alone; docs/gpu.md "Batch size"). Writes: 256 MiB.
        # Two batches per worker (a read runs gpu.read_workers of them, a write
        # the whole pool).
        by_bytes = max(1, (read_batch_bytes() if read else 256 << 20) // chunk_bytes)
        workers = device_read_workers() if read else max_workers()
        # ... but no read batch below DEVICE_BATCH_MIN_BYTES for that: each
        # costs ~0.3 ms of host work whatever its size (64 random 1 KiB samples
        # were 4 batches of 16 KiB)
        least = DEVICE_BATCH_MIN_BYTES // chunk_bytes if read else 1
        by_count = max(1, -(-n // (workers * 2)), least)
        return max(1, min(8192, by_bytes, by_count))
    by_bytes = max(1, (4 << 20) // chunk_bytes)
    by_count = max(1, -(-n // (max_workers() * 4)))
    return max(1, min(256, by_bytes, by_count))


# Requests of at most this many chunks on a store with cheap blocking I/O run
# inline (no thread hop): for them the hops cost more than the work.
SMALL_READ_CHUNKS = 4
# ... and host reads of up to SMALL_READ_MAX chunks holding SMALL_READ_BYTES in
# all. The worker loops pay off once there is decoding to share out; below,
# their thread hops and the GIL passed between the loops cost more than they
# save. Wall ms of rows of chunks in a local store, 2-CPU VM, pool against
# inline: 64 x 1 KiB 4.6-6.1 / 1.5-1.7; 256 x 1 KiB 8.2-8.5 / 5.8-5.9; 64 x
# 16 KiB 5.6-7.1 / 3.6; 16 x 64 KiB 4.7-5.8 / 2.2-2.3; 64 x 64 KiB (4 MiB)
# 10-11.5 / 8.7; 64 x 256 KiB 25-28 / 30-36 (tensorstore: 64 x 1 KiB in 1.0).
SMALL_READ_MAX = 256
SMALL_READ_BYTES = 1 << 20


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


def read_job(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: Any,
    sio: Any = None,
) -> ReadJob:
    """The job reading chunk ``items`` into ``out`` (run it with ``plans``);
    ``sio``: the store's ``sync_io()``, where the caller has it already."""
    keys = chunk_keys(store_path, meta, items)
    if sio is None:
        return ReadJob(store_path, meta, pipeline, items, keys, out)
    return ReadJob(store_path, meta, pipeline, items, keys, out, sio)


def try_read_inline(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    out: Any,
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
    if not items or out.size == 0:
        return True
    job = read_job(store_path, meta, pipeline, items, out, sio)
    return try_inline(job, store_path.store, sio)


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
    if try_read_inline(store_path, meta, pipeline, items, out, on_loop=True):
        return
    job = read_job(store_path, meta, pipeline, items, out)
    device = job.device is not None
    # large chunks one per batch in worker loops (see read_job.large_chunks)
    job.one_by_one = not device and job.sio is not None and large_chunks(meta)
    size = 1 if job.one_by_one else batch_size(meta, len(items), device)
    ahead = int(setting("gpu.read_ahead", 0) or 0) if device else 0
    if ahead > 0:
        job.read_ahead(size, ahead)
    await execute(job, store_path.store, size, loops=device_read_workers() if device else None)


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


def write_job(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    items: list[ChunkItem],
    value: Any,
    write_empty_chunks: bool,
    fields: str | list[str] | None = None,
    where: np.ndarray | None = None,
) -> WriteJob:
    """The job writing ``value`` into chunk ``items`` (see :class:`WriteJob`)."""
    keys = chunk_keys(store_path, meta, items)
    return WriteJob(
        store_path, meta, pipeline, items, keys, value, write_empty_chunks, fields, where
    )


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
    job = write_job(store_path, meta, pipeline, items, value, write_empty_chunks, fields, where)
    job.prime_allocator()
    # A shard's inner chunks are encoded in parallel by worker loops with no
    # batch left (ShardingCodec via workers.share).
    codec = job.shard_codec
    helpable = job.device is None and codec is not None and codec.shares(meta.dtype.item_size)
    size = batch_size(meta, len(items), job.device is not None, read=False)
    await execute(job, store_path.store, size, helpable=helpable)


# Writes of at most this many chunks (and SMALL_WRITE_BYTES of chunk data) on a
# store with cheap blocking I/O may run in the calling thread (see
# try_write_inline).
SMALL_WRITE_CHUNKS = 4
SMALL_WRITE_BYTES = 4 << 20


def small_write(meta: ArrayMetadata, n: int) -> bool:
    """Whether a host write of ``n`` chunk items of ``meta`` is small enough for
    :func:`try_write_inline` (decided before the value is converted, so a
    write that goes the slow way converts it once)."""
    if n > SMALL_WRITE_CHUNKS or emulating():
        return False
    chunk_nbytes = math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size)
    return n <= 1 or n * chunk_nbytes <= SMALL_WRITE_BYTES


def try_write_inline(
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
    same plan as the pool's worker loops run, under the same key locks, taken
    all at once or not at all. The caller has checked :func:`small_write`
    (before converting the value)."""
    if not items or value.size == 0:
        return True
    if is_device_array(value):
        return False  # the device path
    store = store_path.store
    sio = store.sync_io()
    if sio is None:
        return False
    job = write_job(store_path, meta, pipeline, items, value, write_empty_chunks)
    if job.device is not None:
        return False
    job.prime_allocator()
    return try_inline(job, store, sio)
