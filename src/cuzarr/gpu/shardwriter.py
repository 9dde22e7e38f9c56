"""Whole shards written from device memory.

A write that covers whole shards of a sharded array (``a[...] = value``, an
append of whole shards) builds them the way the device writes plain chunks
(:mod:`cuzarr.gpu.writer`), with the inner chunks of a batch's shards as the
batch: one ``cuzarr_gather`` launch copies the value's regions into inner-chunk
slots of one staging buffer, inner chunks equal to the fill value are found by
one comparison per batch (and left out of their shard, unless
``write_empty_chunks``), and the rest are compressed by one batched nvCOMP
call. On the host each shard is laid out by the sharding codec's own
:meth:`~cuzarr.codecs.sharding.ShardingCodec.assemble` (inner chunks in Morton
order, then the index with its index codecs, at the start or the end): the
bytes are those the host path writes. A shard whose inner chunks are all left
out is deleted, as on the host.

Shards written in part (read-modify-write) and shards cut by the array's end
(updated in place, see ``WriteJob._cut_shards``) take the host route, as do
inner pipelines the device does not encode (:func:`~cuzarr.gpu.writer.encode_kind`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.gpu.writer import DeviceWriter

__all__ = ["ShardWriter", "inner_items"]


class ShardWriter:
    """Builds and encodes batches of whole-shard items from one value (see the
    module docstring); ``inner`` is the :class:`~cuzarr.gpu.writer.DeviceWriter`
    of the inner pipeline, ``chunk_shape(coords)`` a shard's shape."""

    def __init__(
        self,
        codec: ShardingCodec,
        inner: DeviceWriter,
        chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    ) -> None:
        self.codec = codec
        self.inner = inner
        self.chunk_shape = chunk_shape

    @classmethod
    def make(
        cls,
        codec: ShardingCodec,
        inner_pipeline: Any,
        value: Any,
        fill: Any,
        chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
        write_empty_chunks: bool,
        device: bool,
    ) -> ShardWriter | None:
        """The writer, or ``None`` where the inner chunks would be encoded on
        the host anyway (the ordinary host write then encodes the shards)."""
        shape = tuple(codec.chunk_shape)
        inner = DeviceWriter(
            inner_pipeline, value, fill, lambda _c: shape, write_empty_chunks, device
        )
        if inner.kind is None:
            return None
        return cls(codec, inner, chunk_shape)

    def to_host(self, part: Any) -> Any:
        """A part of the value on the host, for a shard the host encodes (see
        :meth:`DeviceWriter.to_host <cuzarr.gpu.writer.DeviceWriter.to_host>`)."""
        return self.inner.to_host(part)

    def __call__(
        self, items: Sequence[Any], olds: Sequence[bytes | None], keys: Sequence[str]
    ) -> tuple[list[tuple[str, Any]], list[str]]:
        """``(to_set, to_delete)`` for a batch of whole-shard items (each
        ``complete``; ``olds`` are not read: nothing of the old shards survives).
        The shards to set are unjoined parts (``Concat``), as the host encode's."""
        value_shape = tuple(self.inner.value.shape)
        sub: list[Any] = []
        sub_keys: list[str] = []
        layout = []  # per shard: (shape, inner coordinates in stored order)
        for it, key in zip(items, keys, strict=True):
            shape = tuple(self.chunk_shape(tuple(it[0])))
            order = self.codec.inner_order(shape)
            sub.extend(inner_items(it, shape, self.codec.chunk_shape, order, value_shape))
            sub_keys.extend([key] * len(order))
            layout.append((shape, order))
        encoded = self.inner.encode_items(sub, [None] * len(sub), sub_keys) if sub else []
        to_set: list[tuple[str, Any]] = []
        to_delete: list[str] = []
        pos = 0
        for key, (shape, order) in zip(keys, layout, strict=True):
            parts = encoded[pos : pos + len(order)]
            pos += len(order)
            kept = {c: p for c, p in zip(order, parts, strict=True) if p is not None}
            shard = self.codec.assemble(kept, shape)
            if len(shard) == 0:
                to_delete.append(key)  # every inner chunk is fill
            else:
                to_set.append((key, shard))
        return to_set, to_delete


def inner_items(
    item: Any,
    shard_shape: tuple[int, ...],
    inner_shape: tuple[int, ...],
    order: Sequence[tuple[int, ...]],
    value_shape: tuple[int, ...],
) -> list[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...], bool]]:
    """The chunk items, in ``order``, of the inner chunks of a shard that
    ``item`` (``(coords, chunk_sel, value_sel, complete)``, slices only) covers
    whole: each inner chunk whole, from its region of the value. A shard's
    selection covering it whole walks each dimension forwards or backwards
    (a reversed value selection); an inner chunk's value region is the
    matching part of the shard's."""
    coords, csel, osel = item[0], item[1], item[2]
    per_dim: list[list[slice]] = []
    for d, (extent, ic) in enumerate(zip(shard_shape, inner_shape, strict=True)):
        cr = range(*csel[d].indices(extent))
        orr = range(*osel[d].indices(value_shape[d]))
        if len(cr) == 1:
            cr = range(cr.start, cr.start + 1)  # one element: any step covers it
        if len(cr) != extent or len(orr) != extent or abs(cr.step) != 1:
            raise ValueError(
                f"dimension {d}: the selection does not cover the shard whole "
                f"({len(cr)} of {extent} elements)"
            )
        # value index of shard position p: orr[p] walking forwards, else
        # orr[extent - 1 - p]
        fwd = cr.step == 1
        per_dim.append([
            _as_slice(orr[k * ic : (k + 1) * ic] if fwd
                      else orr[extent - (k + 1) * ic : extent - k * ic][::-1])
            for k in range(extent // ic)
        ])
    full = tuple(slice(0, ic) for ic in inner_shape)
    base = [c * (s // ic) for c, s, ic in zip(coords, shard_shape, inner_shape, strict=True)]
    return [
        (tuple(b + k for b, k in zip(base, c, strict=True)), full,
         tuple(per_dim[d][k] for d, k in enumerate(c)), True)
        for c in order
    ]


def _as_slice(r: range) -> slice:
    """The slice selecting ``r`` (a non-empty range of indices >= 0)."""
    stop = r.start + len(r) * r.step
    return slice(r.start, stop if stop >= 0 else None, r.step)
