"""Partial reads of sharded arrays: index first, then only the inner chunks needed.

Reads are planned on the inner-chunk grid. Items are grouped by shard; a shard
most of whose inner chunks are wanted is fetched whole (one request), otherwise
its index is fetched with one byte-range request and the wanted inner chunks with
further ranges, neighbours closer than ``sharding.coalesce_max_gap`` bytes merged
into one request (up to ``sharding.coalesce_max_size``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import EMPTY, ShardingCodec, sharding_codec
from cuzarr.config import config
from cuzarr.core.engine import SMALL_READ_CHUNKS, ChunkItem
from cuzarr.core.plans import Compute, Get, GetRanges, Plan, execute, try_inline
from cuzarr.core.read_job import missing_chunks_refused, refuse_missing
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu.dispatch import device_reader_for
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.runtime.sync import device_read_workers, max_workers
from cuzarr.runtime.workers import share
from cuzarr.storage.base import RangeByteRequest, SuffixByteRequest
from cuzarr.storage.common import StorePath

__all__ = ["ShardReadJob", "coalesce", "read_sharded", "sharding_codec", "try_read_sharded_inline"]

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


class ShardReadJob:
    """Read inner-chunk ``items`` of a sharded array into ``out``, a batch of
    shards at a time (see the module notes). ``share_parts``: decode large
    inner chunks in parallel (see ``workers.share``)."""

    locking = False  # reads take no key locks

    def __init__(
        self,
        store_path: StorePath,
        meta: ArrayMetadata,
        pipeline: Any,
        codec: ShardingCodec,
        items: list[ChunkItem],
        out: Any,
        share_parts: bool = True,
    ) -> None:
        self.codec, self.items, self.out = codec, items, out
        self.store_path = store_path
        # read_missing_chunks=False: a shard that is not stored is an error (an inner
        # chunk missing from a stored shard reads as the fill value, as in zarr-python);
        # the setting is looked up when a shard is missing, not on every read
        self.meta = meta
        self.shard_shape = meta.chunk_shape
        self.cps = codec.chunks_per_shard(self.shard_shape)
        self.inner_shape = codec.chunk_shape
        self.fill = meta.read_fill
        self.inner = codec.inner_pipeline(ChunkSpec(self.shard_shape, meta.dtype, self.fill))
        self.encode_key = meta.chunk_key_encoding.make_encoder(
            store_path.path + "/" if store_path.path else ""
        )
        self.n_index = codec.index_nbytes(self.shard_shape)
        self.max_gap = int(config.get("sharding.coalesce_max_gap"))
        self.max_size = int(config.get("sharding.coalesce_max_size"))
        self.shards = self._group_by_shard()
        self.n = len(self.shards)
        # Inner chunks per shard that lie inside the array (edge shards overhang).
        self.inner_grid = tuple(
            -(-s // c) for s, c in zip(meta.shape, self.inner_shape, strict=True)
        )
        inner_shape = self.inner_shape
        self.device = device_reader_for(self.inner, out, self.fill, lambda _c: inner_shape)
        self.sio = sio = store_path.store.sync_io()
        # Shards in local files are read at most LOCAL_RANGE_MAX bytes at a time,
        # even when wholly wanted, and each part is decoded before the next is read:
        # a worker holds one part, not a whole compressed shard (which raised the
        # peak memory of a full read by ~9% of the output), for a few more read
        # calls per shard.
        self.in_parts = (
            self.device is None and sio is not None and sio.get_ranges_reused is not None
        )
        if self.in_parts:
            self.max_size = min(self.max_size, LOCAL_RANGE_MAX)
        # A store that pins descriptors: a shard's index and inner chunks are read
        # from one open file, so a writer replacing the shard cannot tear the read.
        self.pinned = getattr(sio, "pinned", None) if sio is not None else None
        # Idle worker loops decode a part's inner chunks too (workers.share): large
        # inner chunks only (see ShardingCodec.shares).
        self.share_inner = share_parts and codec.shares(meta.dtype.item_size)
        # Device reads of local shards: whole shards are read into one host
        # buffer of the device reader (pinned on a GPU) and their inner chunks
        # decoded where they lie, the index rows picked with numpy.
        self.into = getattr(sio, "get_into", None) if self.device is not None and sio else None
        self.cps_arr = np.asarray(self.cps, np.int64)

    def _group_by_shard(self) -> list[tuple[tuple[int, ...], list[int]]]:
        groups: dict[tuple[int, ...], list[int]] = {}
        cps = self.cps
        for i, it in enumerate(self.items):
            sc = tuple(c // n for c, n in zip(it[0], cps, strict=True))
            groups.setdefault(sc, []).append(i)
        return list(groups.items())

    def _inner_in_array(self, sc: tuple[int, ...]) -> int:
        n = 1
        for d, c in enumerate(sc):
            n *= max(0, min(self.cps[d], self.inner_grid[d] - c * self.cps[d]))
        return n

    def shard_key(self, i: int) -> str:
        """The key of the shard holding item ``i``."""
        return self.encode_key(
            tuple(c // n for c, n in zip(self.items[i][0], self.cps, strict=True))
        )

    def _local(self, i: int) -> tuple[int, ...]:
        return tuple(c % n for c, n in zip(self.items[i][0], self.cps, strict=True))

    def lock_keys(self, lo: int, hi: int) -> None:
        return None

    def finish(self) -> None:
        if self.device is not None:
            self.device.executor.synchronize()

    # -- the plan ----------------------------------------------------------------------
    def plan(self, lo: int, hi: int) -> Plan:
        """Shards ``lo:hi``: their I/O, then the scatter of their inner chunks
        (part by part when local shards are read in parts). With descriptors
        pinned, at most PINNED_SHARDS_MAX shards at a time."""
        if self.pinned is None:
            yield from self._shards_plan(lo, hi)
            return
        for s in range(lo, hi, PINNED_SHARDS_MAX):
            with self.pinned():
                yield from self._shards_plan(s, min(s + PINNED_SHARDS_MAX, hi))

    def _shards_plan(self, lo: int, hi: int) -> Plan:
        batch = self.shards[lo:hi]
        parts = self.in_parts
        whole = [(sc, m) for sc, m in batch if not parts and len(m) * 2 >= self._inner_in_array(sc)]
        partial = [(sc, m) for sc, m in batch if parts or len(m) * 2 < self._inner_in_array(sc)]
        pairs: list[tuple[int, Any]] = []
        if whole and self.into is not None:
            pairs = self._whole_into(whole)
        elif whole:
            datas = yield Get([self.encode_key(sc) for sc, _ in whole])
            for (_, m), data in zip(whole, datas, strict=True):
                pairs.extend(self._from_whole(m, data))
        if partial:
            reqs, plan = yield from self._range_requests(partial, pairs)
            pairs = yield from self._read_ranges(reqs, plan, pairs)
        if isinstance(pairs, _Placed):
            pairs.finish()
        if pairs:
            yield Compute(self.scatter, pairs)

    def _whole_into(self, whole: list[Any]) -> _Placed:
        """Whole shards read into one staging buffer of the device reader (here,
        in the plan's thread, inside its pinned descriptors, as ``ReadJob``'s
        device fetches), their inner chunks described where they lie."""
        blobs = self.device.fetch_into(self.into, [self.encode_key(sc) for sc, _ in whole], "none")
        pairs = _Placed(blobs.base)
        for (_, m), data, at in zip(whole, blobs, blobs.offsets, strict=True):
            got, where, ns = self._from_buffer(m, data, at)
            pairs.extend(got)
            pairs.place(where, ns)
        return pairs

    def _from_buffer(
        self, members: list[int], data: Any, at: int
    ) -> tuple[list[tuple[int, Any]], np.ndarray, np.ndarray]:
        """Like ``_from_whole`` for a shard read into a host buffer at ``at``:
        also where each inner chunk lies in that buffer and its size (index rows
        picked with numpy; -1: missing, or the shard lies elsewhere)."""
        if data is None:
            none = np.full(len(members), -1, np.int64)
            return self._from_whole(members, None), none, none
        try:
            index, mv = self.codec.split(data, self.shard_shape)
        except CodecError as e:
            raise keyed(e, self.shard_key(members[0])) from e
        coords = np.array([self.items[i][0] for i in members], np.int64).reshape(len(members), -1)
        flat = np.ravel_multi_index(tuple((coords % self.cps_arr).T), self.cps)
        rows = index.reshape(-1, 2)[flat]
        empty = rows[:, 0] == EMPTY
        # the index is checked against the shard's size: present rows fit int64
        offs = np.where(empty, np.uint64(0), rows[:, 0]).astype(np.int64)
        ns = np.where(empty, np.uint64(0), rows[:, 1]).astype(np.int64)
        ns[empty] = -1
        pairs = [
            (i, None if e else mv[o : o + n])
            for i, e, o, n in zip(members, empty.tolist(), offs.tolist(), ns.tolist(), strict=True)
        ]
        where = np.where(empty | (at < 0), -1, offs + at)
        return pairs, where, ns

    def _from_whole(self, members: list[int], data: Any) -> list[tuple[int, Any]]:
        if data is None:
            if missing_chunks_refused(self.meta):
                refuse_missing(self.store_path, [self.shard_key(members[0])])
            return [(i, None) for i in members]
        try:
            index, mv = self.codec.split(data, self.shard_shape)
        except CodecError as e:
            raise keyed(e, self.shard_key(members[0])) from e
        res: list[tuple[int, Any]] = []
        for i in members:
            off, n = index[self._local(i)]
            res.append((i, None if off == EMPTY else mv[int(off) : int(off) + int(n)]))
        return res

    def _range_requests(self, partial: list[Any], pairs: list[tuple[int, Any]]) -> Plan:
        """Read the indexes of ``partial`` shards; the coalesced ranges of their
        wanted inner chunks (missing ones go to ``pairs`` as None)."""
        codec = self.codec
        rng = (
            RangeByteRequest(0, self.n_index)
            if codec.index_location == "start"
            else SuffixByteRequest(self.n_index)
        )
        index_reqs = [(self.encode_key(sc), rng) for sc, _ in partial]
        if codec.index_location == "end":
            # with the shards' sizes, where the store tells them cheaply: an entry
            # pointing into an index at the end reads the index's own bytes, which
            # no short read shows
            raw_indexes, sizes = yield GetRanges(index_reqs, sizes=True)
        else:
            raw_indexes = yield GetRanges(index_reqs)
            sizes = [None] * len(partial)
        reqs: list[tuple[str, RangeByteRequest]] = []
        plan: list[tuple[list[int], list[tuple[int, int]], int, int]] = []
        for (sc, m), raw, size in zip(partial, raw_indexes, sizes, strict=True):
            if raw is None:
                if missing_chunks_refused(self.meta):
                    refuse_missing(self.store_path, [self.encode_key(sc)])
                pairs.extend((i, None) for i in m)
                continue
            try:
                index = codec.decode_index(raw, self.shard_shape, size)
            except CodecError as e:
                raise keyed(e, self.encode_key(sc)) from e
            wanted: list[int] = []
            ranges: list[tuple[int, int]] = []
            for i in m:
                off, n = index[self._local(i)]
                if off == EMPTY:
                    pairs.append((i, None))
                else:
                    wanted.append(i)
                    ranges.append((int(off), int(off) + int(n)))
            for gs, ge, members in coalesce(ranges, self.max_gap, self.max_size):
                plan.append(([wanted[j] for j in members], [ranges[j] for j in members], gs, ge))
                reqs.append((self.encode_key(sc), RangeByteRequest(gs, ge)))
        return reqs, plan

    def _read_ranges(self, reqs: list[Any], plan: list[Any], pairs: list[tuple[int, Any]]) -> Plan:
        """Read the coalesced ranges: all in one request, or (in parts) about
        ``max_size`` bytes a request into a reused buffer, each part scattered
        before the next is read (one part held at a time)."""
        parts = self.in_parts
        k = 0
        while k < len(reqs):
            j, size = k, 0
            while j < len(reqs) and (
                not parts or j == k or size + plan[j][3] - plan[j][2] <= self.max_size
            ):
                size += plan[j][3] - plan[j][2]
                j += 1
            blobs = yield GetRanges(reqs[k:j], reuse=parts)
            for (members, ranges, gs, ge), blob in zip(plan[k:j], blobs, strict=True):
                if blob is None or len(blob) != ge - gs:
                    raise keyed(
                        CodecError(
                            f"shard range {gs}-{ge} could not be read in full: the shard "
                            "is truncated or its index is corrupt"
                        ),
                        self.shard_key(members[0]),
                    )
                mv = memoryview(blob)
                for i, (s, e) in zip(members, ranges, strict=True):
                    pairs.append((i, mv[s - gs : e - gs]))
            if parts:
                yield Compute(self.scatter, pairs)
                # drop this part before the next is read: one part held at a time
                pairs = []
                blobs = blob = mv = None  # type: ignore[assignment]
            k = j
        return pairs

    # -- compute -----------------------------------------------------------------------
    def scatter(self, pairs: list[tuple[int, Any]]) -> None:
        """Decode (item, encoded inner chunk or None) pairs into the output."""
        if self.device is not None:
            datas: list[Any] = [data for _, data in pairs]
            if isinstance(pairs, _Placed):
                datas = self.device.buffered(datas, pairs.base, pairs.at, pairs.sizes)
            ids = [i for i, _ in pairs]
            # the shard keys name a chunk in an error only: made when one is raised
            self.device([self.items[i] for i in ids], datas, _ShardKeys(self, ids))
            return
        if self.share_inner:
            share(lambda k: self._decode_one(*pairs[k]), len(pairs))
        else:
            for i, data in pairs:
                self._decode_one(i, data)

    def _decode_one(self, i: int, data: Any) -> None:
        _coords, csel, osel, _ = self.items[i]
        if data is None:
            self.out[osel] = self.fill
            return
        try:
            chunk = self.inner.decode(data, self.inner_shape, scratch=True)
        except CodecError as e:
            raise keyed(e, self.shard_key(i)) from e
        self.out[osel] = chunk[csel]


class _Placed(list):  # type: ignore[type-arg]
    """(item, inner chunk bytes) pairs of which the first lie in the host buffer
    ``base``: at ``at[k]`` (-1: elsewhere, or missing), ``sizes[k]`` bytes."""

    def __init__(self, base: np.ndarray) -> None:
        super().__init__()
        self.base = base
        self._at: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self.at = np.zeros(0, np.int64)
        self.sizes = np.zeros(0, np.int64)

    def place(self, at: np.ndarray, sizes: np.ndarray) -> None:
        self._at.append(at)
        self._sizes.append(sizes)

    def finish(self) -> None:
        """Pairs added after the placed ones (byte ranges) lie elsewhere."""
        n = len(self)
        self.at = np.full(n, -1, np.int64)
        self.sizes = np.full(n, -1, np.int64)
        if self._at:
            at, sizes = np.concatenate(self._at), np.concatenate(self._sizes)
            self.at[: len(at)] = at
            self.sizes[: len(sizes)] = sizes


class _ShardKeys(Sequence[str]):
    """The keys of the shards holding items ``ids``, each made when asked for
    (the device reader names a chunk's shard only in an error)."""

    def __init__(self, job: ShardReadJob, ids: list[int]) -> None:
        self.job, self.ids = job, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self.job.shard_key(i) for i in self.ids[k]]
        return self.job.shard_key(self.ids[k])


# A store that pins descriptors (local files) keeps one open per shard of a plan
# until the plan ends: plans of at most this many shards bound what a worker
# holds (batches of 64 shards, one worker per CPU, ran into the open-file limit:
# EMFILE on a full read of 8,192 shards with 8 workers under `ulimit -n 256`).
PINNED_SHARDS_MAX = 8


def try_read_sharded_inline(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    codec: ShardingCodec,
    items: list[ChunkItem],
    out: Any,
) -> bool:
    """Read a small request in the calling thread if the store allows blocking
    I/O; False (nothing done) otherwise."""
    if len(items) > SMALL_READ_CHUNKS:
        return False
    sio = store_path.store.sync_io()
    if sio is None:
        return False
    if not items or out.size == 0:
        return True
    # at most SMALL_READ_CHUNKS inner chunks: a thread hop would cost more
    job = ShardReadJob(store_path, meta, pipeline, codec, items, out, share_parts=False)
    return try_inline(job, store_path.store, sio)


async def read_sharded(
    store_path: StorePath,
    meta: ArrayMetadata,
    pipeline: Any,
    codec: ShardingCodec,
    items: list[ChunkItem],
    out: Any,
) -> None:
    """Read inner-chunk items of a sharded array into ``out``."""
    if not items or out.size == 0:
        return
    if try_read_sharded_inline(store_path, meta, pipeline, codec, items, out):
        return
    job = ShardReadJob(store_path, meta, pipeline, codec, items, out)
    device = job.device is not None
    workers = device_read_workers() if device else max_workers()
    per_batch = max(1, min(64, -(-job.n // (workers * (2 if device else 4)))))
    helpable = not device and codec.shares(meta.dtype.item_size)
    await execute(job, store_path.store, per_batch, loops=workers, helpable=helpable)
