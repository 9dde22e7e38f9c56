"""Engine jobs for zarr-python's chunk batches (see :mod:`cuzarr.core.plans`).

zarr-python hands a codec pipeline a batch of ``(byte getter, chunk spec, chunk
selection, out selection, is complete)``. These adapter jobs take that batch,
already reduced to store keys and numpy selections, and run it as the engine
runs its own reads and writes: each batch of chunks is a plan that fetches its
keys with one request and decodes and scatters them (or merges, encodes and
stores them) in one compute step, driven inline or async by
:func:`cuzarr.core.plans.execute`. Shards are read by the engine's shard reader
(:mod:`cuzarr.zarr_pipeline.shards`); writes run the engine's write plan and
chunk rule (:func:`cuzarr.core.write_job.write_plan`, ``encode_chunk``). Their semantics are zarr-python's own
(``zarr.core.chunk_utils``: ``scatter_chunk``, ``_merge_chunk_array``,
``chunk_is_empty``), so results match its default pipeline exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.core.plans import Compute, Get, Plan
from cuzarr.core.read_job import decode_in_place, large_chunk
from cuzarr.core.together import decode_together, whole_block_start
from cuzarr.core.write_job import encode_chunk, write_plan
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu.dispatch import device_reader_for
from cuzarr.runtime.sync import max_workers
from cuzarr.zarr_pipeline.shards import ShardBox, ShardedReads, covers

__all__ = ["ReadItem", "WriteItem", "ZarrReadJob", "ZarrWriteJob", "batch_size"]


@dataclass(slots=True)
class ReadItem:
    """One chunk of a zarr-python read: its key, stored shape, selections, fill."""

    key: str
    shape: tuple[int, ...]
    chunk_selection: Any
    out_selection: Any
    fill: Any
    #: the selection is the whole chunk (zarr-python's ``is_complete``)
    complete: bool = False
    #: a shard's touched inner chunks and their box (``shards.ShardedReads``)
    part: ShardBox | None = None


@dataclass(slots=True)
class WriteItem:
    """One chunk of a zarr-python write (see :class:`ReadItem`)."""

    key: str
    shape: tuple[int, ...]
    chunk_selection: Any
    out_selection: Any
    complete: bool
    fill: Any
    write_empty: bool
    order: str


def batch_size(n: int, chunk_nbytes: int) -> int:
    """Chunks per batch: about 4 MiB of decoded chunks, four batches per worker
    at least (the engine's own rule, ``engine.batch_size``)."""
    by_bytes = max(1, (4 << 20) // max(1, chunk_nbytes))
    by_count = max(1, -(-n // (max_workers() * 4)))
    return max(1, min(256, by_bytes, by_count))


def chunk_nbytes(shape: tuple[int, ...], itemsize: int) -> int:
    return math.prod(shape) * max(1, itemsize)


class ZarrReadJob:
    """Read ``items`` into ``out`` (a numpy array) with the cuzarr ``pipeline``.

    ``status[i]`` is True where item ``i``'s chunk was stored (zarr-python's
    ``GetResult``; whether a missing chunk is an error is zarr-python's call)."""

    locking = False  # reads take no key locks
    #: large chunks read one per batch, each into a buffer the store reuses
    #: (set by :meth:`take_one_by_one`, as the engine's ``ReadJob``)
    one_by_one = False

    def __init__(
        self,
        pipeline: Any,
        items: list[ReadItem],
        out: np.ndarray,
        drop_axes: tuple[int, ...],
        shards: tuple[ShardingCodec, ChunkSpec] | None = None,
        sio: Any = None,
    ) -> None:
        self.pipeline, self.items, self.out, self.drop_axes = pipeline, items, out, drop_axes
        self.n = len(items)
        self.status = [False] * self.n
        self.decode_into = getattr(pipeline, "decode_into", None)
        #: a sharded array's codec and shard spec: its shards are read by the
        #: engine's shard reader (``sio``: the store's blocking I/O, or None)
        self.shards = shards
        self.sharded = None
        if shards is not None:
            self.sharded = ShardedReads(*shards, items, out, drop_axes, sio, self.status)
        self.device = None
        self.device_items: list[Any] = []

    def take_one_by_one(self, sio: Any, chunk_nbytes: int) -> bool:
        """Read chunks of ``chunk_nbytes`` one per batch into the store's reused
        buffer (``read_job.large_chunk``) where this is a host read of
        plain chunks from a store with blocking I/O; whether it does."""
        self.one_by_one = (
            self.sharded is None and self.device is None and sio is not None
            and large_chunk(chunk_nbytes)
        )
        return self.one_by_one

    def on_device(self, store: Any) -> bool:
        """Decode through cuzarr's device reader (nvCOMP and the scatter kernel
        into a CuPy output; its host twin under ``gpu.emulate``) where it takes
        this read: unsharded, no dropped axes. False: the host path."""
        if self.shards is not None or self.drop_axes or not self.items:
            return False
        first = self.items[0]
        shape = first.shape
        self.device = device_reader_for(
            self.pipeline, self.out, first.fill, lambda _coords: shape, store
        )
        if self.device is None:
            return False
        ndim = len(shape)
        # the reader's items: (coords, chunk selection, out selection, complete);
        # its coordinates only name the chunk shape, the same for every chunk
        self.device_items = [
            ((i,) + (0,) * (ndim - 1), it.chunk_selection, it.out_selection, False)
            for i, it in enumerate(self.items)
        ]
        return True

    def plan(self, lo: int, hi: int) -> Plan:
        """Fetch items ``lo:hi`` (one request), then decode and scatter them;
        shards: the engine's shard reader's plan (``shards.ShardedReads``)."""
        if self.sharded is not None:
            yield from self.sharded.plan(lo, hi)
            return
        # (values in a buffer the thread reuses: large chunks one by one, and
        # batches decoded together, consumed before the next request)
        reuse = self.one_by_one or (self.device is None and self._together() is not None)
        datas = yield Get([it.key for it in self.items[lo:hi]], reuse=reuse)
        if self.device is not None:
            yield Compute(self.device_batch, lo, datas)
        else:
            yield Compute(self.decode_batch, lo, datas)

    def lock_keys(self, lo: int, hi: int) -> None:
        return None

    def finish(self) -> None:
        if self.device is not None:
            self.device.executor.synchronize()

    def device_batch(self, lo: int, datas: list[Any]) -> None:
        """Items ``lo:lo + len(datas)`` through the device reader."""
        hi = lo + len(datas)
        keys = [it.key for it in self.items[lo:hi]]
        self.device(self.device_items[lo:hi], datas, keys)  # type: ignore[misc]
        for j, data in enumerate(datas):
            self.status[lo + j] = data is not None

    def _together(self) -> Any:
        """The pipeline's ``decode_chunks_into`` where whole chunks of a batch
        may be decoded together into the output (``core.together``), else None."""
        if self.drop_axes or type(self.out) is not np.ndarray or not self.out.ndim:
            return None
        return getattr(self.pipeline, "decode_chunks_into", None)

    def _start_of(self, i: int) -> list[int] | None:
        """Where item ``i``'s chunk lands whole in the output (None: not so)."""
        it = self.items[i]
        return whole_block_start((None, None, it.out_selection, it.complete), it.shape)

    def decode_batch(self, lo: int, datas: list[Any]) -> None:
        """Decode the chunks of items ``lo:lo + len(datas)`` into the output:
        whole chunks of one shape together where the pipeline can, the rest
        one by one."""
        pairs: Any = enumerate(datas, lo)
        together = self._together()
        if together is not None and (len(datas) > 1 or (datas and not self.one_by_one)):
            shape = self.items[lo].shape
            start_of = self._start_of
            left = decode_together(
                together,
                lambda i: start_of(i) if self.items[i].shape == shape else None,
                list(pairs), shape, self.out)
            placed = set(range(lo, lo + len(datas))) - {i for i, _ in left}
            for i in placed:
                self.status[i] = True
            pairs = left
        for i, data in pairs:
            it = self.items[i]
            if data is None:
                self.out[it.out_selection] = it.fill
                continue
            try:
                if it.complete and self._decode_in_place(i, data):
                    continue
                chunk = self.pipeline.decode(data, it.shape, scratch=True)
            except CodecError as e:
                raise keyed(e, it.key) from e
            self._scatter(i, chunk[it.chunk_selection])

    def _decode_in_place(self, i: int, data: Any) -> bool:
        """A whole chunk landing in a contiguous part of the output is
        decompressed straight into it, with no intermediate buffer (as the
        engine's ``ReadJob``)."""
        decode_into = self.decode_into
        it = self.items[i]
        if decode_into is None or self.drop_axes or not self.out.ndim:
            return False
        if not decode_in_place(decode_into, data, it.shape, self.out[it.out_selection], self.out):
            return False
        self.status[i] = True
        return True

    def _scatter(self, i: int, selected: np.ndarray) -> None:
        if self.drop_axes:
            selected = selected.squeeze(axis=self.drop_axes)
        self.out[self.items[i].out_selection] = selected
        self.status[i] = True


class ZarrWriteJob:
    """Write ``value`` into ``items`` with the cuzarr ``pipeline``: whole chunks
    encoded from the value, partial ones read, merged and re-encoded, chunks
    left all fill deleted unless ``write_empty_chunks`` (zarr-python's rules).

    As zarr-python's own pipelines, it takes no key locks: concurrent writers
    of one chunk are the caller's to order."""

    locking = False
    device = None

    def __init__(
        self,
        pipeline: Any,
        dtype: np.dtype,
        items: list[WriteItem],
        value: np.ndarray,
        drop_axes: tuple[int, ...],
        joins: bool,
        shards: tuple[ShardingCodec, Any] | None = None,
    ) -> None:
        self.pipeline, self.dtype, self.items = pipeline, dtype, items
        self.value, self.drop_axes, self.joins = value, drop_axes, joins
        self.n = len(items)
        self.keys = [it.key for it in items]
        self._spec: ChunkSpec | None = None
        #: a sharded array's codec and cuzarr data type: partial shard writes
        #: re-encode only the inner chunks they touch (zarr-python's rule)
        self.shards = shards
        if shards is not None:
            # As zarr-python's sharding codec: a shard is rewritten from the value
            # alone only where the write covers all of it; a shard cut by the
            # array's end keeps the inner chunks past it (a shrunk array's cells
            # come back when it grows again).
            for it in items:
                it.complete = it.complete and covers(it.chunk_selection, it.shape)

    def plan(self, lo: int, hi: int) -> Plan:
        """Read what items ``lo:hi`` keep of their old chunks, encode, store
        (the engine's write plan, ``write_job.write_plan``)."""
        return write_plan(self, lo, hi)

    def need_old(self, lo: int, hi: int) -> list[int]:
        """Items of ``lo:hi`` whose old chunk must be read first."""
        return [i for i in range(lo, hi) if not self.items[i].complete]

    def lock_keys(self, lo: int, hi: int) -> None:
        return None

    def finish(self) -> None:
        pass

    def encode_batch(self, lo: int, olds: list[Any]) -> tuple[list[tuple[str, Any]], list[str]]:
        """Encoded chunks to store, and keys to delete, for items ``lo:lo + len(olds)``."""
        to_set: list[tuple[str, Any]] = []
        to_delete: list[str] = []
        for j, old in enumerate(olds):
            it = self.items[lo + j]
            try:
                encoded = self._encoded(it, old)
            except CodecError as e:
                raise keyed(e, it.key) from e
            if encoded is None or len(encoded) == 0:  # a shard of empty inner chunks
                to_delete.append(it.key)
            else:
                to_set.append((it.key, encoded))
        return to_set, to_delete

    def _encoded(self, it: WriteItem, old: Any) -> Any:
        """Item ``it``'s new stored value; None where it is to be deleted (the
        engine's rule, ``write_job.encode_chunk``)."""
        codec, dtype = self.shards if self.shards is not None else (None, self.dtype)
        spec = self._spec
        if spec is None or spec.shape != it.shape or spec.fill_value is not it.fill:
            # one for the batch: zarr-python's regular grids give every chunk one spec
            spec = self._spec = ChunkSpec(it.shape, dtype, it.fill)
        part = self._part(it) if codec is not None and not it.complete else None
        return encode_chunk(
            self.pipeline, codec, codec is not None, old, it.complete, it.chunk_selection,
            part, spec, it.write_empty, lambda: self._merged(it, old),
        )  # fmt: skip

    def _part(self, it: WriteItem) -> Any:
        """The part of the value written into item ``it``'s chunk selection."""
        value = self.value
        if it.chunk_selection == () or value.ndim == 0:
            return value
        part = value[it.out_selection]
        if self.drop_axes:
            part = part[
                tuple(None if d in self.drop_axes else slice(None) for d in range(len(it.shape)))
            ]
        return part

    def _merged(self, it: WriteItem, old: Any) -> np.ndarray:
        """zarr-python's ``_merge_chunk_array``: the value's view where it is the
        whole chunk, else the old chunk (or the fill) with the value merged in."""
        value = self.value
        if it.complete and value.shape != ():
            selected = value[it.out_selection]
            if selected.shape == it.shape:
                return selected
        if old is None:
            chunk = np.full(it.shape, it.fill, dtype=self.dtype, order=it.order)
        else:
            chunk = np.array(self.pipeline.decode(old, it.shape), order=it.order, copy=True)
        chunk[it.chunk_selection] = self._part(it)
        return chunk
