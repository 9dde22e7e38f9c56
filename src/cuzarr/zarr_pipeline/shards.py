"""zarr-python's reads of shards, run by the engine's shard reader.

zarr-python asks for a shard and a selection inside it. The inner chunks the
selection touches are read by :class:`cuzarr.core.shards.ShardReader`, the
plan of cuzarr's own sharded reads: a shard most of whose inner chunks are
wanted in one request, the others index first and then only the touched inner
chunks, neighbours merged into one byte range; shards in local files a part at
a time. Each inner chunk read is decoded into its shard's *box*: the block of
zarr's output the shard fills where the whole shard lands there as one (its
inner chunks decoded in place, no shard-sized buffer), else a buffer spanning
the touched inner chunks, from which the selection is taken once all are in.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.core.plans import Compute, Plan
from cuzarr.core.shards import ShardReader, ShardWant, reads_whole
from cuzarr.errors import CodecError, keyed

__all__ = ["ShardBox", "ShardedReads", "covers"]


@dataclass(slots=True)
class ShardBox:
    """A shard read for zarr-python: its touched inner chunks, the box
    ``lo:hi`` they span, and the box once made (the output's block itself
    where ``view``)."""

    flat: np.ndarray
    #: where each touched inner chunk starts in the box
    starts: list[list[int]]
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    #: some inner chunk overhangs the box (the shard is cut by the array's end)
    cut: bool = False
    box: np.ndarray | None = None
    view: bool = False
    missing: bool = False


def covers(selection: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``selection`` (of a chunk of ``shape``) is all of it: zarr-python
    calls the selection of a shard cut by the array's end complete too."""
    if not isinstance(selection, tuple) or len(selection) != len(shape):
        return False
    return all(
        isinstance(s, slice) and s.indices(n) == (0, n, 1)
        for s, n in zip(selection, shape, strict=True)
    )


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


def _span(a: int, s: int, n: int) -> slice:
    return slice(a, min(a + s, n))


def _span_all(a: int, s: int) -> slice:
    return slice(a, a + s)


class ShardedReads:
    """The shards of a zarr-python read (``items`` of a ``ZarrReadJob``, each a
    shard) read into ``out``; ``status[i]``: whether item ``i``'s shard is stored."""

    def __init__(
        self,
        codec: ShardingCodec,
        spec: ChunkSpec,
        items: Sequence[Any],
        out: np.ndarray,
        drop_axes: tuple[int, ...],
        sio: Any,
        status: list[bool],
    ) -> None:
        self.codec, self.spec, self.items, self.out = codec, spec, items, out
        self.drop_axes, self.status = drop_axes, status
        self.reader = ShardReader(codec, spec.shape, sio, device=False)
        self.inner_pipe = codec.inner_pipeline(spec)
        self.cps = codec.chunks_per_shard(spec.shape)
        self.n_inner = codec.nchunks_per_shard(spec.shape)
        for it in items:
            it.part = self._box_of(it)

    def _box_of(self, it: Any) -> ShardBox:
        """The inner chunks item ``it``'s selection touches, and their box."""
        shape, inner = tuple(it.shape), self.codec.chunk_shape
        if not shape:  # a 0-d shard: one inner chunk
            flat, coords = np.zeros(1, np.int64), np.zeros((1, 0), np.int64)
        elif it.complete and covers(it.chunk_selection, shape):
            flat = np.arange(self.n_inner, dtype=np.int64)
            coords = np.stack(np.unravel_index(flat, self.cps), axis=-1)
        else:
            sel = tuple(s if isinstance(s, slice) else np.asarray(s) for s in it.chunk_selection)
            touched = sorted(self.codec.touched_chunks(sel, shape))
            coords = np.asarray(touched, np.int64).reshape(len(touched), len(shape))
            flat = np.ravel_multi_index(tuple(coords.T), self.cps)
        if not len(flat):
            zero = (0,) * len(shape)
            return ShardBox(flat, [], zero, zero)
        first, last = coords.min(axis=0).tolist(), coords.max(axis=0).tolist()
        lo = tuple(c * s for c, s in zip(first, inner, strict=True))
        hi = tuple(min((c + 1) * s, n) for c, s, n in zip(last, inner, shape, strict=True))
        starts = coords * np.asarray(inner, np.int64) - np.asarray(lo, np.int64)
        cut = any((h - lo_) % s for lo_, h, s in zip(lo, hi, inner, strict=True))
        part = ShardBox(flat, starts.tolist(), lo, hi, cut=cut)
        target = self._target(it)
        if target is not None:
            part.box, part.view = target, True
        return part

    def _target(self, it: Any) -> np.ndarray | None:
        """The block of the output a whole shard fills as one (None: none):
        every inner chunk of it is then read (``_box_of``)."""
        osel = it.out_selection
        if self.drop_axes or not self.out.ndim or not isinstance(osel, tuple):
            return None
        if not (it.complete and covers(it.chunk_selection, tuple(it.shape))):
            return None
        if not all(isinstance(s, slice) for s in osel):
            return None  # a copy, not a view of the output
        target = self.out[osel]
        return target if target.shape == tuple(it.shape) else None

    # -- the plan ----------------------------------------------------------------------
    def plan(self, lo: int, hi: int) -> Plan:
        """Read shards ``lo:hi`` with the engine's shard reader, then take each
        one's selection from its box."""
        entries: list[tuple[int, list[int]]] = []  # reader id -> (item, start in box)
        wants: list[ShardWant] = []
        by_key: dict[str, int] = {}
        for i in range(lo, hi):
            it = self.items[i]
            part = it.part
            members = list(range(len(entries), len(entries) + len(part.starts)))
            entries.extend((i, c) for c in part.starts)
            by_key[it.key] = i
            whole = reads_whole(len(members), self.n_inner)
            wants.append(ShardWant(it.key, members, part.flat, whole))
        decode = functools.partial(self.decode, entries)
        yield from self.reader.plan(wants, decode, functools.partial(self._missing, by_key))
        yield Compute(self.finish, lo, hi)

    def _missing(self, by_key: dict[str, int], w: ShardWant) -> list[tuple[int, Any]]:
        self.items[by_key[w.key]].part.missing = True
        return []  # zarr-python decides whether a missing shard is an error

    # -- compute -----------------------------------------------------------------------
    def decode(self, entries: list[tuple[int, list[int]]], pairs: list[tuple[int, Any]]) -> None:
        """Decode (reader id, inner chunk bytes or None) pairs into their boxes:
        a shard's whole inner chunks in one C call where the inner pipeline
        allows it (:meth:`_decode_together`), the rest one by one."""
        if len(pairs) > 1:
            pairs = self._decode_together(entries, pairs)
        inner, fill, items = self.codec.chunk_shape, self.spec.fill_value, self.items
        decode = self.inner_pipe.decode
        for m, data in pairs:
            i, start = entries[m]
            it = items[i]
            part = it.part
            box = self._box(part)
            if part.cut:  # inner chunks past the box's end are cut to it
                sel = tuple(map(_span, start, inner, box.shape))
            else:
                sel = tuple(map(_span_all, start, inner))
            if data is None:
                if part.view:
                    box[sel] = fill  # not stored: the fill value
                continue
            try:
                chunk = decode(data, inner, scratch=True)
            except CodecError as e:
                raise keyed(e, it.key) from e
            if part.cut:
                chunk = chunk[tuple(slice(0, x.stop - x.start) for x in sel)]
            box[sel] = chunk

    def _box(self, part: ShardBox) -> np.ndarray:
        """``part``'s box, made (filled with the fill value) on first use."""
        box = part.box
        if box is None:
            shape = tuple(h - lo for lo, h in zip(part.lo, part.hi, strict=True))
            box = part.box = self.spec.dtype.full(shape, self.spec.fill_value)
        return box

    def _decode_together(self, entries: list[tuple[int, list[int]]],
                         pairs: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """Each shard's stored inner chunks decoded into its box by one call of
        the inner pipeline's ``decode_chunks_into`` (in C, without the GIL: a
        Python call per inner chunk traded the GIL between the read threads);
        returns the pairs left for the one-by-one path (missing chunks, cut
        boxes, chunks that call did not place, pipelines it does not take)."""
        together = getattr(self.inner_pipe, "decode_chunks_into", None)
        if together is None:
            return pairs
        groups: dict[int, list[tuple[int, Any]]] = {}
        for pair in pairs:
            groups.setdefault(entries[pair[0]][0], []).append(pair)
        rest: list[tuple[int, Any]] = []
        for i, group in groups.items():
            part = self.items[i].part
            stored = [p for p in group if p[1] is not None]
            if part.cut or len(stored) < 2:
                rest.extend(group)
                continue
            starts = np.array([entries[m][1] for m, _ in stored], np.int64)
            done = together([d for _, d in stored], starts, self.codec.chunk_shape,
                            self._box(part))
            if done is None:  # not a pipeline (or box) that call takes
                rest.extend(group)
                continue
            rest.extend(p for p in group if p[1] is None)
            rest.extend(p for p, ok in zip(stored, done.tolist(), strict=True) if not ok)
        return rest

    def finish(self, lo: int, hi: int) -> None:
        """Each shard's selection into the output (a missing one: the fill)."""
        for i in range(lo, hi):
            it = self.items[i]
            part = it.part
            if part.missing:
                self.out[it.out_selection] = it.fill
                continue
            self.status[i] = True
            if part.view:
                continue
            if part.box is None:  # the selection touches no inner chunk
                shape = tuple(h - lo_ for lo_, h in zip(part.lo, part.hi, strict=True))
                part.box = self.spec.dtype.full(shape, self.spec.fill_value)
            selected = part.box[_shifted(it.chunk_selection, part.lo, tuple(it.shape))]
            if self.drop_axes:
                selected = selected.squeeze(axis=self.drop_axes)
            self.out[it.out_selection] = selected
            part.box = None  # the buffer goes now, not with the job
