"""Partial reads of sharded arrays: index first, then only the inner chunks needed.

Reads are planned on the inner-chunk grid. Items are grouped by shard; a shard
most of whose inner chunks are wanted is fetched whole (one request), otherwise
its index is fetched with one byte-range request and the wanted inner chunks with
further ranges, neighbours closer than ``sharding.coalesce_max_gap`` bytes merged
into one request (up to ``sharding.coalesce_max_size``).

:class:`ShardReader` is that plan for any list of shards and wanted inner
chunks: the engine's :class:`ShardReadJob` (items on the array's inner-chunk
grid) and the zarr-python pipeline's reads of shards
(:mod:`cuzarr.zarr_pipeline.shards`) both run their shards through it.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from cuzarr.buffer.placed import PlacedViews
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import EMPTY, ShardingCodec, sharding_codec
from cuzarr.config import config
from cuzarr.core.engine import SMALL_READ_CHUNKS, ChunkItem, read_batch_bytes
from cuzarr.core.plans import Compute, Get, GetRanges, Plan, execute, try_inline
from cuzarr.core.read_job import missing_chunks_refused, refuse_missing
from cuzarr.core.shard_staging import Placed, range_members
from cuzarr.core.together import decode_together, whole_block_start
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu.dispatch import device_reader_for
from cuzarr.gpu.plan import is_slice_only
from cuzarr.indexing.items import ChunkItems, subset
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.runtime import native
from cuzarr.runtime.sync import device_read_workers, max_workers
from cuzarr.runtime.workers import share
from cuzarr.storage.base import RangeByteRequest, SuffixByteRequest
from cuzarr.storage.common import StorePath

__all__ = [
    "ShardReadJob",
    "ShardReader",
    "ShardWant",
    "coalesce",
    "read_sharded",
    "reads_whole",
    "sharding_codec",
    "try_read_sharded_inline",
]

# Largest byte range read at once from a shard in a local file.
LOCAL_RANGE_MAX = 1 << 20


def coalesce(
    ranges: Sequence[tuple[int, int]], max_gap: int, max_size: int
) -> list[tuple[int, int, list[int]]]:
    """Merge (start, end) ranges closer than ``max_gap``; returns (start, end, members)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    groups: list[tuple[int, int, list[int]]] = []
    gs = ge = 0
    members: list[int] = []
    for i in order:
        s, e = ranges[i]
        if members and s - ge <= max_gap and max(e, ge) - gs <= max_size:
            ge = max(e, ge)
            members.append(i)  # in place: a group of k ranges costs O(k), not O(k^2)
            continue
        if members:
            groups.append((gs, ge, members))
        gs, ge, members = s, e, [i]
    if members:
        groups.append((gs, ge, members))
    return groups


class ShardWant(NamedTuple):
    """A shard to read and the inner chunks wanted of it."""

    key: str
    #: the reader's ids of the wanted inner chunks (answered as ``(id, bytes)``)
    members: list[int]
    #: their positions in the shard's inner-chunk grid, flattened (C order): an
    #: array, or a list for a few
    flat: np.ndarray | list[int]
    #: most of it is wanted: fetched in one piece (``reads_whole``)
    whole: bool


def reads_whole(wanted: int, inner: int) -> bool:
    """Whether a shard ``wanted`` of whose ``inner`` chunks (those inside the
    array) are read is fetched whole rather than index first."""
    return wanted * 2 >= inner


class ShardReader:
    """The engine's plan for reading shards: whole ones with one request, the
    others index first, then their wanted inner chunks' byte ranges, neighbours
    coalesced (see the module notes). Jobs give it :class:`ShardWant` lists and
    a ``consume`` step that decodes ``(member, bytes or None)`` pairs."""

    def __init__(self, codec: ShardingCodec, shard_shape: tuple[int, ...], sio: Any, device: bool):
        self.codec, self.shard_shape = codec, shard_shape
        self.n_index = codec.index_nbytes(shard_shape)
        self.max_gap = int(config.get("sharding.coalesce_max_gap"))
        self.max_size = int(config.get("sharding.coalesce_max_size"))
        # Shards in local files are read at most LOCAL_RANGE_MAX bytes at a time,
        # even when wholly wanted, and each part is decoded before the next is read:
        # a worker holds one part, not a whole compressed shard (which raised the
        # peak memory of a full read by ~9% of the output), for a few more read
        # calls per shard.
        self.in_parts = not device and sio is not None and sio.get_ranges_reused is not None
        if self.in_parts:
            self.max_size = min(self.max_size, LOCAL_RANGE_MAX)
        # A store that pins descriptors: a shard's index and inner chunks are read
        # from one open file, so a writer replacing the shard cannot tear the read.
        self.pinned = getattr(sio, "pinned", None) if sio is not None else None

    def plan(
        self,
        wants: Sequence[ShardWant],
        consume: Callable[[list[Any]], None],
        on_missing: Callable[[ShardWant], list[tuple[int, Any]]],
        whole_into: Callable[[list[ShardWant]], list[Any]] | None = None,
        ranges_into: Callable[[list[Any], list[Any], list[Any]], Any] | None = None,
    ) -> Plan:
        """Read ``wants`` and ``consume`` their pairs (part by part when local
        shards are read in parts). A shard not stored: ``on_missing`` raises or
        gives its pairs. ``whole_into``: reads whole shards itself (a device
        reader's staging buffer); ``ranges_into(whole, reqs, groups, pairs)``,
        where some shard is wanted in part: reads those wanted whole and the
        coalesced ranges of the others, after the others' indexes, into one
        such buffer. With descriptors pinned, at most PINNED_SHARDS_MAX
        shards at a time."""
        if self.pinned is None:
            yield from self._plan(wants, consume, on_missing, whole_into, ranges_into)
            return
        for s in range(0, len(wants), PINNED_SHARDS_MAX):
            with self.pinned():
                part = wants[s : s + PINNED_SHARDS_MAX]
                yield from self._plan(part, consume, on_missing, whole_into, ranges_into)

    def direct_plan(self, wants: Sequence[ShardWant], consume: Callable[[list[Any]], None],
                    on_missing: Callable[[ShardWant], list[tuple[int, Any]]],
                    file_ref: Callable[[str], Any]) -> Plan:
        """Read only the indexes of ``wants``; ``consume`` each wanted inner chunk
        as a reference to its byte range in the shard's file (``file_ref(key)``:
        a local store's ``LocalFile``), for a device reader that reads the files
        itself (GPUDirect Storage)."""
        pairs: list[tuple[int, Any]] = []
        for w, index in (yield from self._indexes(list(wants), pairs, on_missing)):
            file = file_ref(w.key)
            if file is None:  # removed since its index was read
                pairs.extend(on_missing(w))
                continue
            for i, e, o, n in zip(w.members, *self.row_lists(w, index), strict=True):
                pairs.append((i, None if e else file._replace(size=n, offset=file.offset + o)))
        if pairs:
            yield Compute(consume, pairs)

    def _plan(self, wants: Sequence[ShardWant], consume: Any, on_missing: Any, into: Any,
              ranges_into: Any = None) -> Plan:
        parts = self.in_parts
        whole = [w for w in wants if w.whole and not parts]
        partial = [w for w in wants if parts or not w.whole]
        pairs: list[tuple[int, Any]] = []
        if partial and ranges_into is not None:
            # (a device reader's staging: the whole shards and the others' ranges,
            # read after the others' indexes, into one buffer)
            reqs, groups = yield from self._range_requests(partial, pairs, on_missing)
            pairs = ranges_into(whole, reqs, groups, pairs)
        elif whole and into is not None:
            pairs = into(whole)
        elif whole:
            datas = yield Get([w.key for w in whole])
            for w, data in zip(whole, datas, strict=True):
                pairs.extend(self.from_whole(w, data, on_missing))
        if partial and ranges_into is None:
            reqs, groups = yield from self._range_requests(partial, pairs, on_missing)
            pairs = yield from self._read_ranges(reqs, groups, pairs, consume)
        if pairs:
            yield Compute(consume, pairs)

    def rows(self, w: ShardWant, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The index rows of ``w``'s inner chunks: whether each is empty (not
        stored), its offset and size (picked with numpy; 0 where empty)."""
        rows = index.reshape(-1, 2)[w.flat]
        empty = rows[:, 0] == EMPTY
        # the index is checked against the shard's size: present rows fit int64
        offs = np.where(empty, np.uint64(0), rows[:, 0]).astype(np.int64)
        ns = np.where(empty, np.uint64(0), rows[:, 1]).astype(np.int64)
        return empty, offs, ns

    def row_lists(self, w: ShardWant, index: np.ndarray) -> tuple[list[bool], list[int], list[int]]:
        """:meth:`rows` as Python lists (for loops over the members)."""
        if len(w.members) <= 8:  # a few: Python's lists without numpy's per-call costs
            pairs = index.reshape(-1, 2)
            got = [pairs[f].tolist() for f in w.flat]
            empty = [o == EMPTY for o, _ in got]
            return (empty, [0 if e else o for e, (o, _) in zip(empty, got, strict=True)],
                    [0 if e else n for e, (_, n) in zip(empty, got, strict=True)])
        return tuple(a.tolist() for a in self.rows(w, index))  # type: ignore[return-value]

    def from_whole(self, w: ShardWant, data: Any, on_missing: Any) -> list[tuple[int, Any]]:
        """``w``'s pairs from the whole shard ``data`` (None: not stored)."""
        if data is None:
            return on_missing(w)
        try:
            index, mv = self.codec.split(data, self.shard_shape)
        except CodecError as e:
            raise keyed(e, w.key) from e
        empty, offs, ns = self.row_lists(w, index)
        return [
            (i, None if e else mv[o : o + n])
            for i, e, o, n in zip(w.members, empty, offs, ns, strict=True)
        ]

    def _indexes(
        self, partial: list[ShardWant], pairs: list[tuple[int, Any]], on_missing: Any
    ) -> Plan:
        """Read the indexes of ``partial`` shards: (want, index) of the stored ones
        (shards not stored go to ``pairs`` through ``on_missing``)."""
        codec = self.codec
        rng = (
            RangeByteRequest(0, self.n_index)
            if codec.index_location == "start"
            else SuffixByteRequest(self.n_index)
        )
        index_reqs = [(w.key, rng) for w in partial]
        if codec.index_location == "end":
            # with the shards' sizes, where the store tells them cheaply: an entry
            # pointing into an index at the end reads the index's own bytes, which
            # no short read shows
            raw_indexes, sizes = yield GetRanges(index_reqs, sizes=True)
        else:
            raw_indexes = yield GetRanges(index_reqs)
            sizes = [None] * len(partial)
        found = []
        for w, raw, size in zip(partial, raw_indexes, sizes, strict=True):
            if raw is None:
                pairs.extend(on_missing(w))
                continue
            try:
                found.append((w, codec.decode_index(raw, self.shard_shape, size)))
            except CodecError as e:
                raise keyed(e, w.key) from e
        return found

    def _range_requests(
        self, partial: list[ShardWant], pairs: list[tuple[int, Any]], on_missing: Any
    ) -> Plan:
        """Read the indexes of ``partial`` shards; the coalesced ranges of their
        wanted inner chunks (empty ones go to ``pairs`` as None)."""
        reqs: list[tuple[str, RangeByteRequest]] = []
        groups: list[tuple[list[int], list[tuple[int, int]], int, int]] = []
        for w, index in (yield from self._indexes(partial, pairs, on_missing)):
            wanted: list[int] = []
            ranges: list[tuple[int, int]] = []
            for i, e, o, n in zip(w.members, *self.row_lists(w, index), strict=True):
                if e:
                    pairs.append((i, None))
                else:
                    wanted.append(i)
                    ranges.append((o, o + n))
            for gs, ge, members in coalesce(ranges, self.max_gap, self.max_size):
                groups.append(([wanted[j] for j in members], [ranges[j] for j in members], gs, ge))
                reqs.append((w.key, RangeByteRequest(gs, ge)))
        return reqs, groups

    def _read_ranges(
        self, reqs: list[Any], groups: list[Any], pairs: list[tuple[int, Any]], consume: Any
    ) -> Plan:
        """Read the coalesced ranges: all in one request, or (in parts) about
        ``max_size`` bytes a request into a reused buffer, each part consumed
        before the next is read (one part held at a time)."""
        parts = self.in_parts
        k = 0
        while k < len(reqs):
            j, size = k, 0
            while j < len(reqs) and (
                not parts or j == k or size + groups[j][3] - groups[j][2] <= self.max_size
            ):
                size += groups[j][3] - groups[j][2]
                j += 1
            blobs = yield GetRanges(reqs[k:j], reuse=parts)
            for (key, _), (members, ranges, gs, ge), blob in zip(
                reqs[k:j], groups[k:j], blobs, strict=True
            ):
                if blob is None or len(blob) != ge - gs:
                    raise keyed(
                        CodecError(
                            f"shard range {gs}-{ge} could not be read in full: the shard "
                            "is truncated or its index is corrupt"
                        ),
                        key,
                    )
                mv = memoryview(blob)
                for i, (s, e) in zip(members, ranges, strict=True):
                    pairs.append((i, mv[s - gs : e - gs]))
            if parts:
                yield Compute(consume, pairs)
                # drop this part before the next is read: one part held at a time
                pairs = []
                blobs = blob = mv = None  # type: ignore[assignment]
            k = j
        return pairs


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
        # numpy grouping pays off on many items only: a small read (one window of
        # a random-access loop) groups its few items in Python (~60 us less)
        many = len(items) > NUMPY_GROUP_MIN and isinstance(items, ChunkItems)
        self.coords = items.coords() if many else None
        self.shards = self._group_by_shard()
        self.n = len(self.shards)
        # Inner chunks per shard that lie inside the array (edge shards overhang).
        self.inner_grid = tuple(
            -(-s // c) for s, c in zip(meta.shape, self.inner_shape, strict=True)
        )
        # (a regular grid's method: device plans see every inner chunk alike)
        self.device = device_reader_for(self.inner, out, self.fill,
                                        RegularChunkGrid(self.inner_shape).stored_chunk_shape,
                                        store_path.store)
        if self.device is not None:
            self.device.plan_read(items)
        self.sio = sio = store_path.store.sync_io()
        self.reader = ShardReader(codec, self.shard_shape, sio, self.device is not None)
        # Idle worker loops decode a part's inner chunks too (workers.share): large
        # inner chunks only (see ShardingCodec.shares).
        self.share_inner = share_parts and codec.shares(meta.dtype.item_size)
        # Device reads of local shards: whole shards are read into one host
        # buffer of the device reader (pinned on a GPU) and their inner chunks
        # decoded where they lie, the index rows picked with numpy.
        self.into = getattr(sio, "get_into", None) if self.device is not None and sio else None
        # ... and the ranges of shards read in part likewise (random samples)
        self.ranges_into = (getattr(sio, "get_ranges_into", None)
                            if self.device is not None and sio else None)
        # Device reads of files read to the device by the executor (GPUDirect):
        # slice selections only (integer arrays decode on the host, from bytes)
        self.direct = None
        if self.device is not None and self.device.direct_store is not None and is_slice_only(
            items
        ):
            self.direct = self.device.direct_store
        self.cps_arr = np.asarray(self.cps, np.int64)
        # what the reader reads of each shard, worked out here, where the
        # caches are warm, rather than in each batch after its copies
        self._wants: list[ShardWant] = self._all_wants()

    def _group_by_shard(self) -> list[tuple[tuple[int, ...], list[int]]]:
        """(shard coordinates, the indices of its items) in order of first item."""
        if self.coords is not None and len(self.coords) and self.coords.shape[1]:
            return _group_rows(self.coords // np.asarray(self.cps, np.int64))
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

    def lock_keys(self, lo: int, hi: int) -> None:
        return None

    def finish(self) -> None:
        if self.device is not None:
            self.device.executor.synchronize()

    # -- the plan ----------------------------------------------------------------------
    def plan(self, lo: int, hi: int) -> Plan:
        """Shards ``lo:hi``: their I/O (the engine's ``ShardReader``), then the
        scatter of their inner chunks."""
        direct = self.direct
        if direct is not None:
            yield from self.reader.direct_plan(self.wants(lo, hi), self.scatter, self._missing,
                                               direct.file_ref)
            return
        into = self._whole_into if self.into is not None else None
        ranges = self._ranges_into if self.ranges_into is not None else None
        yield from self.reader.plan(self.wants(lo, hi), self.scatter, self._missing, into, ranges)

    def wants(self, lo: int, hi: int) -> list[ShardWant]:
        """What the reader reads of shards ``lo:hi``: each one's items, by their
        positions in it (worked out for every shard of the read when the job is
        made, the positions with one numpy call for all items)."""
        return self._wants[lo:hi]

    def _all_wants(self) -> list[ShardWant]:
        flat_all = None
        if self.coords is not None and self.coords.ndim == 2 and self.coords.shape[1]:
            flat_all = np.ravel_multi_index(tuple((self.coords % self.cps_arr).T), self.cps)
        wants = []
        for sc, m in self.shards:
            if flat_all is None:
                flat: Any = [self._flat(self.items[i][0]) for i in m]
            else:
                flat = flat_all[m]
            whole = reads_whole(len(m), self._inner_in_array(sc))
            wants.append(ShardWant(self.encode_key(sc), m, flat, whole))
        return wants

    def _flat(self, coords: tuple[int, ...]) -> int:
        """The position in its shard (C order) of the inner chunk at ``coords``."""
        flat = 0
        for c, n in zip(coords, self.cps, strict=True):
            flat = flat * n + c % n
        return flat

    def _missing(self, w: ShardWant) -> list[tuple[int, Any]]:
        """A shard not stored: an error with ``read_missing_chunks`` off, else
        its items read as the fill value."""
        if missing_chunks_refused(self.meta):
            refuse_missing(self.store_path, [w.key])
        return [(i, None) for i in w.members]

    def _whole_into(self, whole: list[ShardWant]) -> Placed:
        """Whole shards read into one staging buffer of the device reader (here,
        in the plan's thread, inside its pinned descriptors, as ``ReadJob``'s
        device fetches), their inner chunks described where they lie."""
        blobs = self.device.fetch_into(self.into, [w.key for w in whole], "none")
        pairs = Placed(blobs.base)
        for w, data, at in zip(whole, blobs, blobs.offsets, strict=True):
            values, where, ns = self._from_buffer(w, data, at, pairs.view)
            pairs.add(w.members, values, where, ns)
        return pairs

    def _ranges_into(self, whole: list[ShardWant], reqs: list[tuple[str, RangeByteRequest]],
                     groups: list[tuple[list[int], list[tuple[int, int]], int, int]],
                     pairs: list[tuple[int, Any]]) -> Placed:
        """Shards ``whole`` and the coalesced ranges ``reqs`` of those wanted in
        part read into one staging buffer of the device reader (here, in the
        plan's thread, inside its pinned descriptors), their inner chunks
        (``groups`` for the ranges) described where they lie; ``pairs`` (inner
        chunks found missing) after them."""
        nw = len(whole)
        keys = [w.key for w in whole] + [k for k, _ in reqs]
        starts = np.fromiter(itertools.chain(itertools.repeat(0, nw), (r.start for _, r in reqs)),
                             np.int64, len(keys))
        ends = np.fromiter((r.end for _, r in reqs), np.int64, len(reqs))
        sizes = np.concatenate([np.full(nw, -1, np.int64), ends - starts[nw:]])
        base, at, sizes, got = self.device.fetch_ranges(self.ranges_into, keys, starts, sizes)
        placed = Placed(base)
        try:
            # (a whole shard not stored: its size -1; a range: an error either way)
            bad = () if got.all() else np.flatnonzero(
                ~got & ((sizes >= 0) | (np.arange(len(keys)) >= nw)))
            if len(bad):
                j = int(bad[0])
                span = f" range {starts[j]}-{ends[j - nw]}" if j >= nw else ""
                raise keyed(CodecError(
                    f"shard{span} could not be read in full: the shard is truncated, or "
                    "changed while read, or its index is corrupt"), keys[j])
            for w, ok, where, n in zip(whole, got.tolist(), at.tolist(), sizes.tolist(),
                                       strict=False):
                data = placed.view[where : where + n] if ok else None  # (None: not stored)
                values, wheres, ns = self._from_buffer(w, data, where if ok else -1, placed.view)
                placed.add(w.members, values, wheres, ns)
        except BaseException:
            self.device.executor.release(base)
            raise
        if groups:
            ids, rel, lens, which = range_members(groups)
            where = at[nw:][which] + rel
            placed.add(ids, PlacedViews(placed.view, where, lens), where, lens)
        placed.extend(pairs)
        return placed

    def _from_buffer(
        self, w: ShardWant, data: Any, at: int, base: memoryview
    ) -> tuple[Sequence[Any], np.ndarray, np.ndarray]:
        """The inner chunks of ``w`` (in the order of its members; None where not
        stored) from a shard read into the host buffer ``base`` at ``at``, with
        where each lies in ``base`` and its size (-1: missing, or the shard lies
        elsewhere)."""
        if data is None:
            none = np.full(len(w.members), -1, np.int64)
            return list(map(_second, self._missing(w))), none, none
        try:
            index, mv = self.codec.split(data, self.shard_shape)
        except CodecError as e:
            raise keyed(e, w.key) from e
        if native.available() and index.dtype == np.uint64 and index.flags.c_contiguous:
            # the rows and places of the inner chunks in one C call (four numpy
            # operations otherwise, ~20 us each right after the shard's copy)
            o_arr, n_arr, where, empty = native.index_rows(index, w.flat, int(at))
        else:
            e_arr, o_arr, n_arr = self.reader.rows(w, index)
            empty = int(e_arr.any())
            n_arr[e_arr] = -1
            o_arr[e_arr] = -1
            where = np.where(e_arr | (at < 0), -1, o_arr + at)
        if empty or at < 0:
            return [None if n < 0 else mv[o : o + n]
                    for o, n in zip(o_arr.tolist(), n_arr.tolist(), strict=True)], where, n_arr
        # every inner chunk stored, in the buffer: their views made when asked for
        return PlacedViews(base, where, n_arr), where, n_arr

    # -- compute -----------------------------------------------------------------------
    def scatter(self, pairs: list[tuple[int, Any]]) -> None:
        """Decode (item, encoded inner chunk or None) pairs into the output."""
        if self.device is not None:
            if isinstance(pairs, Placed):
                datas: Sequence[Any] = self.device.buffered(pairs.datas(), pairs.base,
                                                            *pairs.places())
                ids = pairs.ids
            else:
                datas = list(map(_second, pairs))  # (in C: 64 pairs a shard)
                ids = list(map(_first, pairs))
            # the shard keys name a chunk in an error only: made when one is raised
            self.device(subset(self.items, ids), datas, _ShardKeys(self, ids))
            return
        if len(pairs) > 1:
            pairs = self._decode_together(pairs)
        if self.share_inner:
            share(lambda k: self._decode_one(*pairs[k]), len(pairs))
            return
        for i, data in pairs:
            self._decode_one(i, data)

    def _decode_together(self, pairs: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """The stored inner chunks that land whole in the output, decoded there by
        the inner pipeline's ``decode_chunks_into`` (``core.together``; large
        inner chunks in groups shared out to idle worker loops); returns the
        pairs left for ``_decode_one``."""
        together = getattr(self.inner, "decode_chunks_into", None)
        shape, items = tuple(self.inner_shape), self.items

        def start_of(i: int) -> list[int] | None:
            return whole_block_start(items[i], shape)

        if self.share_inner:
            return decode_together(together, start_of, pairs, shape, self.out,
                                   TOGETHER_GROUP, share)
        return decode_together(together, start_of, pairs, shape, self.out)

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


_first, _second = operator.itemgetter(0), operator.itemgetter(1)

# inner chunks per call of decode_chunks_into where they are shared out
TOGETHER_GROUP = 8


# items of a read above which shards are grouped with numpy (ShardReadJob)
NUMPY_GROUP_MIN = 64


def _group_rows(shard: np.ndarray) -> list[tuple[tuple[int, ...], list[int]]]:
    """Rows of ``shard`` (items x dimensions) grouped: (row, indices of the items
    with it), groups in order of their first item, items ascending."""
    # one integer per row (a mixed-radix number), not a sort of row records
    span = tuple((shard.max(axis=0) + 1).tolist())
    try:
        keys = np.ravel_multi_index(tuple(shard.T), span)
    except ValueError:  # a grid too large for one int64 per row
        keys = shard
    _uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    members = np.split(order, bounds)
    members.sort(key=lambda m: int(m[0]))
    return [(tuple(shard[int(m[0])].tolist()), m.tolist()) for m in members]


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
    if device:
        # as few shards as gpu.read_batch_bytes (decoded, of the inner chunks
        # wanted: whole shards, or a few samples of each) allows: the staging
        # of a batch is reused from batch to batch, and copies into one still
        # in the CPU's cache cost ~20% less than into a cold one
        inner_bytes = int(np.prod(codec.chunk_shape)) * max(1, meta.dtype.item_size)
        wanted = max(1, len(items) * inner_bytes // max(1, job.n))  # per shard, on average
        per_batch = min(per_batch, max(1, read_batch_bytes() // wanted))
    helpable = not device and codec.shares(meta.dtype.item_size)
    await execute(job, store_path.store, per_batch, loops=workers, helpable=helpable)
