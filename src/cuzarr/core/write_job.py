"""The write of chunk items: read what survives, merge, encode, store.

A :class:`WriteJob` is the engine's write as a plan (see :mod:`cuzarr.core.plans`):
each batch fetches the old chunks its partial writes need (one request), encodes
the batch in one compute step, then stores and deletes with one request each.
Whole chunks are encoded from the value directly (small ones a batch at a time,
:mod:`cuzarr.core.blocks`); partial ones are read, merged and re-encoded; a
sharded array's partial shards are updated inner chunk by inner chunk by the
sharding codec. A device value (or ``gpu.emulate``) goes to the device writer
(:mod:`cuzarr.gpu.writer`); for a sharded array, only its whole shards do
(:mod:`cuzarr.gpu.shardwriter`), the others are encoded here. The drivers
hold the store's key locks around each batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzarr.buffer import cpu_prototype, is_device_array
from cuzarr.buffer.chunks import is_fill, merge_into
from cuzarr.buffer.concat import joined
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import sharding_codec
from cuzarr.core.blocks import BlockEncoder
from cuzarr.core.plans import Compute, Delete, Get, Plan, Put
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu.dispatch import device_writer_for
from cuzarr.indexing.items import window
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.runtime.workers import raise_mmap_threshold
from cuzarr.storage.common import StorePath

__all__ = ["WriteJob", "encode_chunk", "write_plan"]


def write_plan(job: Any, lo: int, hi: int) -> Plan:
    """The write of items ``lo:hi`` of ``job``: read what they keep of their old
    chunks (one request), encode the batch (one compute step), store and delete
    (one request each). ``job`` has ``keys``, ``need_old(lo, hi)``,
    ``encode_batch(lo, olds)`` and ``joins`` (shards' parts joined for the store).
    The engine's :class:`WriteJob` and the zarr-python pipeline's write job
    (``cuzarr.zarr_pipeline.jobs``) both run this plan."""
    need = job.need_old(lo, hi)
    olds: list[Any] = [None] * (hi - lo)
    if need:
        fetched = yield Get([job.keys[i] for i in need])
        for i, data in zip(need, fetched, strict=True):
            olds[i - lo] = data
    to_set, to_delete = yield Compute(job.encode_batch, lo, olds)
    if to_set:
        yield Put([(k, joined(v)) for k, v in to_set] if job.joins else to_set)
    if to_delete:
        yield Delete(to_delete)


def encode_chunk(
    pipeline: Any,
    shard_codec: Any,
    sharded: bool,
    old: Any,
    complete: bool,
    csel: Any,
    part: Any,
    spec: ChunkSpec,
    write_empty: bool,
    merged: Callable[[], np.ndarray],
    **update: Any,
) -> Any:
    """One chunk's new stored value; None where it is to be deleted (all fill).

    A shard written in part (``shard_codec``: the sharding codec, alone) is
    updated inner chunk by inner chunk: only those the write touches are
    re-encoded (zarr-python too; ``update``: the codec's ``fields``/``where``).
    Other chunks are ``merged()`` (the job's merge of the value into the old
    chunk or the fill) and encoded, unless all fill and ``write_empty`` is off."""
    if shard_codec is not None and not complete and (old is not None or write_empty):
        # with write_empty_chunks, a new or cut shard gets no fill-valued inner
        # chunks the write does not reach (such as those past the array end). A
        # new shard without it: the whole-shard encode below leaves the untouched
        # (fill) inner chunks out too, and batches the others.
        return shard_codec.update(old, csel, part, spec, write_empty, **update)
    chunk = merged()
    if not write_empty and is_fill(chunk, spec.fill_value, spec.dtype):
        return None
    if write_empty and sharded:
        return pipeline.encode(chunk, spec.shape, write_empty_chunks=True)
    return pipeline.encode(chunk, spec.shape)


class WriteJob:
    """Write ``value[osel]`` into each chunk item (read-modify-write where partial).

    ``fields`` (record field names of a structured dtype) writes only those
    fields of the value's records, and ``where`` (a boolean array shaped like
    ``value``) only the elements where it is True: either makes the chunks it
    leaves a part of read-modify-writes."""

    # partial writes are read-modify-writes; whole-chunk writes lock too, so
    # that they serialize with those of other writers
    locking = True

    def __init__(
        self,
        store_path: StorePath,
        meta: ArrayMetadata,
        pipeline: Any,
        items: list[Any],
        keys: list[str],
        value: Any,
        write_empty_chunks: bool,
        fields: str | list[str] | None = None,
        where: Any = None,
    ) -> None:
        self.meta, self.pipeline, self.items, self.keys = meta, pipeline, items, keys
        self.n = len(items)
        self.write_empty = write_empty_chunks
        self.fields = fields
        self.merging = fields is not None or where is not None
        self.fill, self.dtype, self.grid = meta.read_fill, meta.dtype, meta.chunk_grid
        self.shard_codec = sharding_codec(pipeline)
        # shards, also under other codecs (sharding_codec: only when it is alone)
        self.sharded = (
            getattr(getattr(pipeline, "array_bytes", None), "name", None) == "sharding_indexed"
        )
        self.device = None
        if not self.merging:
            inner = None
            if self.shard_codec is not None:
                spec = ChunkSpec(tuple(meta.chunk_shape), self.dtype, self.fill)
                inner = self.shard_codec.inner_pipeline(spec)
            # sharded: whole shards on the device, the others here (encode_batch)
            self.device = device_writer_for(
                pipeline, value, self.fill, self.grid.stored_chunk_shape, items,
                write_empty_chunks, self.sharded, self.shard_codec, inner,
            )  # fmt: skip
        if self.device is None and is_device_array(value):
            value = cpu_prototype.to_host(value)  # a write the device path does not take
        if where is not None and is_device_array(where):
            where = cpu_prototype.to_host(where)
        self.value, self.where = value, where
        self.blocks = None
        if self.device is None and self.shard_codec is None and not self.merging:
            self.blocks = BlockEncoder.make(
                items, value, self.grid, pipeline, self.fill, self.dtype, write_empty_chunks
            )
        self.partial = self._partial_items()
        self.cut_shards = self._cut_shards()
        # shards come from the pipeline unjoined (storage.base.Concat): the stores
        # that write parts get them so, the others bytes
        store = store_path.store
        self.joins = self.sharded and not getattr(store, "takes_parts", False)

    def _partial_items(self) -> set[int]:
        """Items whose old contents survive the write in part though the
        selection covers them: all of them for a write of some fields, and
        those where ``where`` leaves an element out."""
        items, where = self.items, self.where
        if self.fields is not None:
            return set(range(len(items)))
        if where is not None:
            return {
                i
                for i, it in enumerate(items)
                if it[3] and not where[it[2] if it[2] else ...].all()
            }
        return set()

    def _cut_shards(self) -> set[int]:
        """Items of shards cut by the array's end. As zarr-python (whose sharding
        codec encodes partially), such a shard is updated in place even when the
        write covers what is inside the array, so its stale inner chunks past
        the end survive."""
        if self.shard_codec is None:
            return set()
        last = [
            d.nchunks - 1 if d.nchunks and d.data_len(d.nchunks - 1) < d.chunk_len(d.nchunks - 1)
            else -1
            for d in self.grid.dims(self.meta.shape)
        ]  # fmt: skip
        if all(e < 0 for e in last):
            return set()
        return {
            i
            for i, it in enumerate(self.items)
            if it[3] and any(c == e for c, e in zip(it[0], last, strict=True))
        }

    # -- the plan ----------------------------------------------------------------------
    def plan(self, lo: int, hi: int) -> Plan:
        """Read what items ``lo:hi`` keep of their old chunks, encode, store."""
        return write_plan(self, lo, hi)

    def need_old(self, lo: int, hi: int) -> list[int]:
        """Items of ``lo:hi`` whose old chunk must be read first."""
        items, cut, partial = self.items, self.cut_shards, self.partial
        return [i for i in range(lo, hi) if not items[i][3] or i in cut or i in partial]

    def lock_keys(self, lo: int, hi: int) -> list[str]:
        return self.keys[lo:hi]

    def finish(self) -> None:
        pass

    def prime_allocator(self) -> None:
        """Keep large chunk buffers off mmap (see ``workers.raise_mmap_threshold``)."""
        chunk_nbytes = math.prod(self.meta.chunk_shape) * max(1, self.dtype.item_size)
        if self.device is None and chunk_nbytes >= (64 << 10):
            raise_mmap_threshold(max(4 << 20, 2 * chunk_nbytes))

    # -- compute -----------------------------------------------------------------------
    def encode_batch(self, lo: int, olds: list[Any]) -> tuple[list[tuple[str, Any]], list[str]]:
        """Encoded chunks to store, and keys to delete, for items ``lo:lo + len(olds)``."""
        n = len(olds)
        if self.device is not None and self.shard_codec is None:
            return self.device(window(self.items, lo, lo + n), olds, self.keys[lo : lo + n])
        to_set: list[tuple[str, Any]] = []
        to_delete: list[str] = []
        done = None
        if self.device is not None and n:
            done = self._device_shards(lo, n, to_set, to_delete)
        elif self.blocks and n:
            done = self.blocks.run(lo, n, self.keys, to_set, to_delete)
        for j in range(n):
            if done is None or not done[j]:
                encoded = self._encode_one(lo + j, olds[j])
                if encoded is None or len(encoded) == 0:  # fill, or a shard of empty chunks
                    to_delete.append(self.keys[lo + j])
                else:
                    to_set.append((self.keys[lo + j], encoded))
        return to_set, to_delete

    def _device_shards(
        self, lo: int, n: int, to_set: list[tuple[str, Any]], to_delete: list[str]
    ) -> list[bool]:
        """Encode the whole shards of items ``lo:lo + n`` with the device writer
        (one batch); which items it did. Shards written in part or cut by the
        array's end are left to ``_encode_one``."""
        items = self.items
        whole = [i for i in range(lo, lo + n) if items[i][3] and i not in self.cut_shards]
        if whole:
            keys = [self.keys[i] for i in whole]
            s, d = self.device([items[i] for i in whole], [None] * len(whole), keys)
            to_set.extend(s)
            to_delete.extend(d)
        done = [False] * n
        for i in whole:
            done[i - lo] = True
        return done

    def _encode_one(self, i: int, old: Any) -> Any:
        """Item ``i``'s new encoded chunk; None when it is all fill (and left out)."""
        coords, csel, osel, complete = self.items[i]
        if i in self.cut_shards or i in self.partial:
            complete = False
        shape = self.grid.stored_chunk_shape(coords)
        part = self.value[osel] if osel else self.value
        if self.device is not None and is_device_array(part):
            part = self.device.to_host(part)  # a shard in part: the host encodes it
        mask = None if self.where is None else (self.where[osel] if osel else self.where)
        spec = ChunkSpec(shape, self.dtype, self.fill)
        try:
            return encode_chunk(
                self.pipeline, self.shard_codec, self.sharded, old, complete, csel, part, spec,
                self.write_empty, lambda: self._merged(old, complete, csel, part, mask, shape),
                fields=self.fields, where=mask,
            )  # fmt: skip
        except CodecError as e:
            raise keyed(e, self.keys[i]) from e

    def _merged(
        self, old: Any, complete: bool, csel: Any, part: Any, mask: Any, shape: Any
    ) -> np.ndarray:
        """The chunk's new contents: the value itself where it is the whole chunk,
        else the old chunk (or the fill) with the value merged in."""
        if complete and not self.merging and part.shape == tuple(shape):
            return part
        order = self.meta.order
        if old is not None and not complete:
            chunk = self.pipeline.decode(old, shape)
            if not chunk.flags.writeable:
                chunk = chunk.copy(order=order)
        else:
            chunk = self.dtype.full(shape, self.fill, order=order)
        if self.merging:
            merge_into(chunk, csel, part, self.fields, mask)
        else:
            chunk[csel] = part
        return chunk
