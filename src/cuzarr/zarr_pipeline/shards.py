"""Partial reads of zarr-python's shards with cuzarr's sharding planner.

zarr-python asks for a shard and a selection inside it. Where the selection
touches under half of the shard's inner chunks, the read is planned as
cuzarr's sharded reader plans it (:mod:`cuzarr.core.shards`): the index first
(one byte range), then only the touched inner chunks, neighbours merged into
one range (:func:`cuzarr.core.shards.coalesce`); they are decoded into the
box of the shard they span, and the selection is taken from that box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import EMPTY, ShardingCodec
from cuzarr.config import config
from cuzarr.core.plans import GetRanges, Plan
from cuzarr.core.shards import coalesce
from cuzarr.errors import CodecError, keyed
from cuzarr.storage.base import RangeByteRequest, SuffixByteRequest

__all__ = ["PartialShard", "partial_shard", "read_partial_shards"]


@dataclass(slots=True)
class PartialShard:
    """A shard read in part: its touched inner chunks, and the box they span."""

    touched: list[tuple[int, ...]]
    lo: tuple[int, ...]
    hi: tuple[int, ...]


def partial_shard(
    codec: ShardingCodec, selection: tuple[Any, ...], shard_shape: tuple[int, ...]
) -> PartialShard | None:
    """The partial read of ``selection`` of a shard; None where the selection
    touches at least half its inner chunks (the whole shard is read)."""
    sel = tuple(s if isinstance(s, slice) else np.asarray(s) for s in selection)
    touched = sorted(codec.touched_chunks(sel, shard_shape))
    if len(touched) * 2 >= codec.nchunks_per_shard(shard_shape):
        return None
    inner = codec.chunk_shape
    if not touched:
        return PartialShard([], (0,) * len(inner), (0,) * len(inner))
    first = np.min(np.asarray(touched), axis=0).tolist()
    last = np.max(np.asarray(touched), axis=0).tolist()
    lo = tuple(c * s for c, s in zip(first, inner, strict=True))
    hi = tuple(min((c + 1) * s, n) for c, s, n in zip(last, inner, shard_shape, strict=True))
    return PartialShard(touched, lo, hi)


def _shifted(selection: tuple[Any, ...], lo: tuple[int, ...], shape: tuple[int, ...]) -> tuple:
    """``selection`` of a shard as a selection of its box starting at ``lo``."""
    out: list[Any] = []
    for s, o, n in zip(selection, lo, shape, strict=True):
        if isinstance(s, slice):
            start, stop, step = s.indices(n)
            end = stop - o
            out.append(slice(start - o, end if end >= 0 else None, step))
        elif isinstance(s, (int, np.integer)):
            out.append(int(s) - o)
        else:
            out.append(np.asarray(s) - o)
    return tuple(out)


def read_partial_shards(
    codec: ShardingCodec, spec: ChunkSpec, keys: list[str], parts: list[PartialShard]
) -> Plan:
    """Read the touched inner chunks of shards ``keys``: a plan answered with,
    per shard, None (not stored) or a list of (inner coords, encoded bytes or
    None where empty)."""
    shape = spec.shape
    n_index = codec.index_nbytes(shape)
    at_end = codec.index_location == "end"
    rng = SuffixByteRequest(n_index) if at_end else RangeByteRequest(0, n_index)
    if at_end:
        raws, sizes = yield GetRanges([(k, rng) for k in keys], sizes=True)
    else:
        raws, sizes = (yield GetRanges([(k, rng) for k in keys])), [None] * len(keys)
    max_gap = int(config.get("sharding.coalesce_max_gap"))
    max_size = int(config.get("sharding.coalesce_max_size"))
    found: list[Any] = []
    reqs: list[tuple[str, RangeByteRequest]] = []
    groups: list[tuple[int, list[int], list[tuple[int, int]], int]] = []
    for s, (key, raw, size, part) in enumerate(zip(keys, raws, sizes, parts, strict=True)):
        if raw is None:
            found.append(None)
            continue
        try:
            index = codec.decode_index(raw, shape, size)
        except CodecError as e:
            raise keyed(e, key) from e
        entries: list[Any] = []
        ranges: list[tuple[int, int]] = []
        wanted: list[int] = []
        for c in part.touched:
            off, n = index[c]
            if off == EMPTY:
                entries.append((c, None))
            else:
                wanted.append(len(entries))
                entries.append([c, None])
                ranges.append((int(off), int(off) + int(n)))
        found.append(entries)
        for gs, ge, members in coalesce(ranges, max_gap, max_size):
            groups.append((s, [wanted[j] for j in members], [ranges[j] for j in members], gs))
            reqs.append((key, RangeByteRequest(gs, ge)))
    blobs = (yield GetRanges(reqs)) if reqs else []
    for (s, members, ranges, gs), blob, (key, req) in zip(groups, blobs, reqs, strict=True):
        if blob is None or len(blob) != req.end - gs:
            raise keyed(
                CodecError(f"shard range {gs}-{req.end} could not be read in full: the "
                           "shard is truncated or its index is corrupt"), key)  # fmt: skip
        mv = memoryview(blob)
        for e, (a, b) in zip(members, ranges, strict=True):
            found[s][e][1] = mv[a - gs : b - gs]
    return found


def decode_box(
    codec: ShardingCodec, spec: ChunkSpec, part: PartialShard, entries: list[Any], key: str
) -> tuple[np.ndarray, tuple[int, ...]]:
    """The box ``part.lo:part.hi`` of a shard with its stored touched inner
    chunks decoded into it (the fill value elsewhere), and the box's origin."""
    box_shape = tuple(h - lo for lo, h in zip(part.lo, part.hi, strict=True))
    box = spec.dtype.full(box_shape, spec.fill_value)
    inner_pipe = codec.inner_pipeline(spec)
    inner = codec.chunk_shape
    for c, data in entries:
        if data is None:
            continue
        start = [ci * s - o for ci, s, o in zip(c, inner, part.lo, strict=True)]
        sel = tuple(
            slice(a, min(a + s, n)) for a, s, n in zip(start, inner, box_shape, strict=True)
        )
        try:
            chunk = inner_pipe.decode(data, inner, scratch=True)
        except CodecError as e:
            raise keyed(e, key) from e
        box[sel] = chunk[tuple(slice(0, x.stop - x.start) for x in sel)]
    return box, part.lo


def select_box(
    box: np.ndarray, lo: tuple[int, ...], selection: tuple[Any, ...], shard_shape: tuple[int, ...]
) -> np.ndarray:
    """``selection`` of the shard, taken from its decoded box at ``lo``."""
    return box[_shifted(selection, lo, shard_shape)]


def decode_whole_into(
    codec: ShardingCodec, spec: ChunkSpec, data: Any, target: np.ndarray, key: str
) -> None:
    """A whole shard decoded straight into ``target`` (the shard-shaped part of
    zarr's output it fills): its inner chunks land in place, with no shard-sized
    intermediate buffer."""
    try:
        index, mv = codec.split(data, spec.shape)
    except CodecError as e:
        raise keyed(e, key) from e
    cps = index.shape[:-1]
    flat = index.reshape(-1, 2)
    present = np.flatnonzero(flat[:, 0] != EMPTY)
    if len(present) < len(flat):
        target[...] = spec.fill_value  # inner chunks not stored read as the fill value
    coords = (
        np.stack(np.unravel_index(present, cps), axis=-1).tolist() if cps else [[]] * len(present)
    )
    inner_pipe = codec.inner_pipeline(spec)
    inner = codec.chunk_shape
    for c, (off, n) in zip(coords, flat[present].tolist(), strict=True):
        sel = tuple(slice(ci * s, (ci + 1) * s) for ci, s in zip(c, inner, strict=True))
        try:
            target[sel] = inner_pipe.decode(mv[off : off + n], inner, scratch=True)
        except CodecError as e:
            raise keyed(e, key) from e
