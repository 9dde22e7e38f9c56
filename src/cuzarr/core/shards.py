"""Partial reads of sharded arrays: index first, then only the inner chunks needed.

Reads are planned on the inner-chunk grid. Items are grouped by shard; a shard
most of whose inner chunks are wanted is fetched whole (one request), otherwise
its index is fetched with one byte-range request and the wanted inner chunks with
further ranges, neighbours closer than ``sharding.coalesce_max_gap`` bytes merged
into one request (up to ``sharding.coalesce_max_size``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import EMPTY, ShardingCodec, sharding_codec
from cuzarr.config import config
from cuzarr.core.engine import (
    SMALL_READ_CHUNKS,
    ChunkItem,
    _run_batches,
    keyed,
    missing_chunks_refused,
    refuse_missing,
)
from cuzarr.core.sync import device_read_workers, get_executor, max_workers
from cuzarr.core.workers import pull_batches, share
from cuzarr.errors import CodecError
from cuzarr.gpu.dispatch import device_reader_for
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.storage.base import RangeByteRequest, Store, SuffixByteRequest
from cuzarr.storage.common import StorePath

__all__ = ["coalesce", "read_sharded", "sharding_codec"]

# Largest byte range read at once from a shard in a local file.
LOCAL_RANGE_MAX = 1 << 20


def coalesce(
    ranges: Sequence[tuple[int, int]], max_gap: int, max_size: int
) -> list[tuple[int, int, list[int]]]:
    """Merge (start, end) ranges closer than ``max_gap``; returns (start, end, members)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    groups: list[tuple[int, int, list[int]]] = []
    for i in order:
        s, e = ranges[i]
        if groups:
            gs, ge, members = groups[-1]
            if s - ge <= max_gap and max(e, ge) - gs <= max_size:
                groups[-1] = (gs, max(e, ge), [*members, i])
                continue
        groups.append((s, e, [i]))
    return groups


def _shard_job(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    codec: ShardingCodec,
    items: list[ChunkItem],
    out: np.ndarray,
    share_parts: bool = True,
) -> tuple[int, Any, Any]:
    """The number of shards, the I/O plan of a batch of them (a generator) and
    the scatter of decoded inner chunks into ``out``. ``share_parts``: decode
    large inner chunks in parallel (see ``workers.share``)."""
    shard_shape = meta.chunk_shape
    cps = codec.chunks_per_shard(shard_shape)
    inner_shape = codec.chunk_shape
    spec = ChunkSpec(shard_shape, meta.dtype, meta.read_fill)
    inner = codec.inner_pipeline(spec)
    fill = meta.read_fill
    encode_key = meta.chunk_key_encoding.make_encoder(
        store_path.path + "/" if store_path.path else ""
    )
    n_index = codec.index_nbytes(shard_shape)
    max_gap = int(config.get("sharding.coalesce_max_gap"))
    max_size = int(config.get("sharding.coalesce_max_size"))
    sio = store_path.store.sync_io()
    # Group items by shard, preserving order.
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, it in enumerate(items):
        sc = tuple(c // n for c, n in zip(it[0], cps, strict=True))
        groups.setdefault(sc, []).append(i)
    shards = list(groups.items())
    # Inner chunks per shard that lie inside the array (edge shards overhang).
    inner_grid = tuple(-(-s // c) for s, c in zip(meta.shape, inner_shape, strict=True))

    def inner_in_array(sc: tuple[int, ...]) -> int:
        n = 1
        for d, c in enumerate(sc):
            n *= max(0, min(cps[d], inner_grid[d] - c * cps[d]))
        return n

    def shard_key(i: int) -> str:
        return encode_key(tuple(c // n for c, n in zip(items[i][0], cps, strict=True)))

    device = device_reader_for(inner, out, fill, lambda _coords: inner_shape)
    # Shards in local files are read at most LOCAL_RANGE_MAX bytes at a time,
    # even when wholly wanted, and each part is decoded before the next is read:
    # a worker holds one part, not a whole compressed shard (which raised the
    # peak memory of a full read by ~9% of the output), for a few more read
    # calls per shard.
    in_parts = device is None and sio is not None and sio.get_ranges_reused is not None
    # Idle worker loops decode a part's inner chunks too (workers.share): large
    # inner chunks only (see ShardingCodec.shares).
    share_inner = share_parts and codec.shares(meta.dtype.item_size)
    if in_parts:
        max_size = min(max_size, LOCAL_RANGE_MAX)

    def scatter(pairs: list[tuple[int, Any]]) -> None:
        if device is not None:
            device(
                [items[i] for i, _ in pairs],
                [data for _, data in pairs],
                [shard_key(i) for i, _ in pairs],
            )
            return

        def one(k: int) -> None:
            i, data = pairs[k]
            _coords, csel, osel, _ = items[i]
            if data is None:
                out[osel] = fill
                return
            try:
                chunk = inner.decode(data, inner_shape, scratch=True)
            except CodecError as e:
                raise keyed(e, shard_key(i)) from e
            out[osel] = chunk[csel]

        if share_inner:
            share(one, len(pairs))
        else:
            for k in range(len(pairs)):
                one(k)

    def local(i: int) -> tuple[int, ...]:
        return tuple(c % n for c, n in zip(items[i][0], cps, strict=True))

    # read_missing_chunks=False: a shard that is not stored is an error (an inner
    # chunk missing from a stored shard reads as the fill value, as in zarr-python)
    strict = missing_chunks_refused(meta)

    def from_whole(members: list[int], data: Any) -> list[tuple[int, Any]]:
        if data is None:
            if strict:
                refuse_missing(store_path, [shard_key(members[0])])
            return [(i, None) for i in members]
        try:
            index, mv = codec.split(data, shard_shape)
        except CodecError as e:
            raise keyed(e, shard_key(members[0])) from e
        res: list[tuple[int, Any]] = []
        for i in members:
            off, n = index[local(i)]
            res.append((i, None if off == EMPTY else mv[int(off) : int(off) + int(n)]))
        return res

    def fetch_plan(
        lo: int, hi: int, emit: Callable[[list[tuple[int, Any]]], None] | None = None
    ) -> Generator[tuple[str, Any], Any, list[tuple[int, Any]]]:
        """The I/O of one batch of shards, as requests yielded to a driver:
        ("many", keys) and ("ranges", [(key, range)]) are answered with the
        values; returns (item, encoded inner chunk or None) pairs. With ``emit``
        (a driver running in a worker thread), pairs go to ``emit`` as each part
        of the I/O is answered instead, and local shards are read in parts."""
        batch = shards[lo:hi]
        parts = in_parts and emit is not None
        whole = [(sc, m) for sc, m in batch if not parts and len(m) * 2 >= inner_in_array(sc)]
        partial = [(sc, m) for sc, m in batch if parts or len(m) * 2 < inner_in_array(sc)]
        pairs: list[tuple[int, Any]] = []
        if whole:
            datas = yield ("many", [encode_key(sc) for sc, _ in whole])
            for (_, m), data in zip(whole, datas, strict=True):
                pairs.extend(from_whole(m, data))
        if partial:
            rng = (
                RangeByteRequest(0, n_index)
                if codec.index_location == "start"
                else SuffixByteRequest(n_index)
            )
            index_reqs = [(encode_key(sc), rng) for sc, _ in partial]
            if codec.index_location == "end":
                # with the shards' sizes, where the store tells them cheaply: an
                # entry pointing into an index at the end reads the index's own
                # bytes, which no short read shows
                raw_indexes, sizes = yield ("index", index_reqs)
            else:
                raw_indexes = yield ("ranges", index_reqs)
                sizes = [None] * len(partial)
            reqs: list[tuple[str, RangeByteRequest]] = []
            plan: list[tuple[list[int], list[tuple[int, int]], int, int]] = []
            for (sc, m), raw, size in zip(partial, raw_indexes, sizes, strict=True):
                if raw is None:
                    if strict:
                        refuse_missing(store_path, [encode_key(sc)])
                    pairs.extend((i, None) for i in m)
                    continue
                try:
                    index = codec.decode_index(raw, shard_shape, size)
                except CodecError as e:
                    raise keyed(e, encode_key(sc)) from e
                wanted: list[int] = []
                ranges: list[tuple[int, int]] = []
                for i in m:
                    off, n = index[local(i)]
                    if off == EMPTY:
                        pairs.append((i, None))
                    else:
                        wanted.append(i)
                        ranges.append((int(off), int(off) + int(n)))
                for gs, ge, members in coalesce(ranges, max_gap, max_size):
                    plan.append(
                        ([wanted[j] for j in members], [ranges[j] for j in members], gs, ge)
                    )
                    reqs.append((encode_key(sc), RangeByteRequest(gs, ge)))
            k = 0
            while k < len(reqs):
                # one request for all ranges; in parts: ~max_size bytes a request
                j, size = k, 0
                while j < len(reqs) and (
                    not parts or j == k or size + plan[j][3] - plan[j][2] <= max_size
                ):
                    size += plan[j][3] - plan[j][2]
                    j += 1
                # "parts": answered into a reused buffer where the store can
                blobs = yield ("parts" if parts else "ranges", reqs[k:j])
                for (members, ranges, gs, ge), blob in zip(plan[k:j], blobs, strict=True):
                    if blob is None or len(blob) != ge - gs:
                        raise keyed(
                            CodecError(
                                f"shard range {gs}-{ge} could not be read in full: the shard "
                                "is truncated or its index is corrupt"
                            ),
                            shard_key(members[0]),
                        )
                    mv = memoryview(blob)
                    for i, (s, e) in zip(members, ranges, strict=True):
                        pairs.append((i, mv[s - gs : e - gs]))
                if parts:
                    emit(pairs)  # type: ignore[misc]
                    # drop this part before the next is read: one part held at a time
                    pairs = []
                    blobs = blob = mv = None  # type: ignore[assignment]
                k = j
        if emit is not None and pairs:
            emit(pairs)
            pairs = []
        return pairs

    return len(shards), fetch_plan, scatter, device


# A store that pins descriptors (local files) keeps one open per shard of a plan
# until the plan ends: plans of at most this many shards bound what a worker
# holds (batches of 64 shards, one worker per CPU, ran into the open-file limit:
# EMFILE on a full read of 8,192 shards with 8 workers under `ulimit -n 256`).
PINNED_SHARDS_MAX = 8


def _run_shards_sync(fetch_plan: Any, lo: int, hi: int, scatter: Any, sio: Any) -> None:
    """Run the plans of shards ``lo:hi`` with blocking I/O, in groups of at most
    ``PINNED_SHARDS_MAX`` shards when the store pins descriptors."""
    step = PINNED_SHARDS_MAX if getattr(sio, "pinned", None) is not None else hi - lo
    for s in range(lo, hi, max(1, step)):
        _run_plan_sync(fetch_plan(s, min(s + step, hi), scatter), sio)


def _run_plan_sync(gen: Any, sio: Any) -> Any:
    """Drive an I/O plan generator with a store's blocking batch I/O."""
    pinned = getattr(sio, "pinned", None)
    if pinned is not None:
        # A shard's index and its inner chunks are read separately: from one file,
        # so that a writer replacing the shard meanwhile cannot tear the read.
        with pinned():
            return _drive(gen, sio)
    return _drive(gen, sio)


def _drive(gen: Any, sio: Any) -> Any:
    answer: Any = None
    try:
        while True:
            kind, req = gen.send(answer)
            if kind == "many":
                answer = sio.get_many(req)
            elif kind == "index":
                # the sizes after the reads: in a pinned block, of the same files
                raws = sio.get_ranges(req)
                get_sizes = getattr(sio, "get_sizes", None)
                sizes = [None] * len(req) if get_sizes is None else get_sizes([k for k, _ in req])
                answer = (raws, sizes)
            elif kind == "parts" and sio.get_ranges_reused is not None:
                # valid until the next request: the plan emits a part before that
                answer = sio.get_ranges_reused(req)
            else:
                answer = sio.get_ranges(req)
    except StopIteration as stop:
        return stop.value


def read_sharded_small_sync(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    codec: ShardingCodec,
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
        # at most SMALL_READ_CHUNKS inner chunks: a thread hop would cost more
        n, fetch_plan, scatter, device = _shard_job(
            store_path, meta, pipeline, codec, items, out, share_parts=False
        )
        _run_shards_sync(fetch_plan, 0, n, scatter, sio)
        if device is not None:
            device.executor.synchronize()
    return True


async def _sizes(store: Store, reqs: list[tuple[str, Any]]) -> list[int | None]:
    """The sizes of the values at ``reqs``' keys, where the store asks for them
    without reading the value (``Store.getsize`` overridden); None otherwise,
    and for a missing value."""
    if type(store).getsize is Store.getsize:
        return [None] * len(reqs)

    async def one(key: str) -> int | None:
        try:
            return await store.getsize(key)
        except FileNotFoundError:
            return None

    return list(await asyncio.gather(*(one(k) for k, _ in reqs)))


async def read_sharded(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    codec: ShardingCodec,
    items: list[ChunkItem],
    out: np.ndarray,
) -> None:
    """Read inner-chunk items of a sharded array into ``out``."""
    if not items or out.size == 0:
        return
    if read_sharded_small_sync(store_path, meta, pipeline, codec, items, out):
        return
    n_shards, fetch_plan, scatter, device = _shard_job(
        store_path, meta, pipeline, codec, items, out
    )
    store = store_path.store
    loop = asyncio.get_running_loop()
    pool = get_executor()
    sio = store.sync_io()
    workers = device_read_workers() if device is not None else max_workers()
    per_batch = max(1, min(64, -(-n_shards // (workers * (2 if device else 4)))))
    if sio is not None:
        # Cheap local I/O: worker loops run batch after batch of reads, decodes
        # and scatters, with no trip through the event loop in between.
        def run_sync(lo: int, hi: int) -> None:
            _run_shards_sync(fetch_plan, lo, hi, scatter, sio)

        try:
            helpable = device is None and codec.shares(meta.dtype.item_size)
            await pull_batches(n_shards, per_batch, run_sync, loops=workers, helpable=helpable)
        finally:
            if device is not None:
                device.executor.synchronize()
        return

    async def work(lo: int, hi: int) -> None:
        gen = fetch_plan(lo, hi)
        answer: Any = None
        try:
            while True:
                kind, req = gen.send(answer)
                if kind == "many":
                    answer = await store.get_many(req)
                elif kind == "index":
                    # the sizes asked alongside the indexes: no extra round trip
                    answer = tuple(
                        await asyncio.gather(
                            store.get_partial_values(None, req), _sizes(store, req)
                        )
                    )
                else:
                    answer = await store.get_partial_values(None, req)
        except StopIteration as stop:
            pairs = stop.value
        await loop.run_in_executor(pool, scatter, pairs)

    try:
        await _run_batches(n_shards, per_batch, work)
    finally:
        if device is not None:
            device.executor.synchronize()
