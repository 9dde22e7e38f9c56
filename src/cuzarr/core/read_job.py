"""The read of unsharded chunk items: fetch a batch, decode it, scatter it.

A :class:`ReadJob` is the engine's plain read as a plan (see
:mod:`cuzarr.core.plans`): each batch fetches its keys with one request and
decodes and scatters them in one compute step, on the host (with whole small
chunks batched, :mod:`cuzarr.core.blocks`) or through a device reader.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.config import flag
from cuzarr.core.blocks import BlockDecoder
from cuzarr.core.plans import Compute, Get, Plan
from cuzarr.core.readahead import ReadAhead
from cuzarr.core.together import decode_together, whole_block_start
from cuzarr.errors import ChunkNotFoundError, CodecError, keyed
from cuzarr.gpu.dispatch import device_reader_for
from cuzarr.gpu.plan import is_slice_only
from cuzarr.indexing.items import window
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.storage.common import StorePath

__all__ = [
    "LARGE_CHUNK_BYTES",
    "ReadJob",
    "decode_in_place",
    "large_chunk",
    "large_chunks",
    "missing_chunks_refused",
    "refuse_missing",
]


# decoded chunk bytes from which host reads take one chunk per batch
LARGE_CHUNK_BYTES = 512 << 10


def large_chunk(nbytes: int) -> bool:
    """Whether chunks of ``nbytes`` decoded bytes are read one per batch (in
    worker loops), each into a buffer the store reuses (``Get(reuse=True)``):
    one chunk's decode dwarfs the loop's per-batch cost, its compressed bytes
    are still in cache when it is decoded, and no fresh buffer is faulted in
    per chunk."""
    return nbytes >= LARGE_CHUNK_BYTES


def large_chunks(meta: ArrayMetadata) -> bool:
    """:func:`large_chunk` for the chunks of ``meta``."""
    return large_chunk(math.prod(meta.chunk_shape) * max(1, meta.dtype.item_size))


def decode_in_place(
    decode_into: Any, data: Any, shape: Any, target: np.ndarray, out: np.ndarray
) -> bool:
    """Decode a whole chunk straight into ``target``, a part of the output
    ``out``, where it is a contiguous block of it (no intermediate buffer);
    False (nothing done) where it is not, or the pipeline cannot."""
    return (
        target.flags.c_contiguous
        and target.shape == tuple(shape)
        and np.shares_memory(target, out)
        and bool(decode_into(data, shape, target))
    )


def missing_chunks_refused(meta: ArrayMetadata) -> bool:
    """Whether reading a chunk that is not stored is an error for this array (its
    ``read_missing_chunks`` setting, else the global ``array.read_missing_chunks``)."""
    allowed = meta.read_missing_chunks
    if allowed is None:
        allowed = flag("array.read_missing_chunks", True)
    return not allowed


def refuse_missing(store_path: StorePath, keys: Sequence[str]) -> None:
    """Raise ``ChunkNotFoundError`` for the store keys ``keys`` (none: nothing)."""
    if keys:
        listed = "\n".join(f"  chunk {k!r}" for k in keys[:20])
        more = f"\n  ... and {len(keys) - 20} more" if len(keys) > 20 else ""
        raise ChunkNotFoundError(
            f"{len(keys)} chunk(s) not found in store {store_path.store!r}.\n"
            "Set the 'array.read_missing_chunks' config (or the array's config "
            "read_missing_chunks) to True to fill missing chunks with the fill value.\n"
            f"Missing chunks:\n{listed}{more}"
        )


_UNKNOWN: Any = object()


class ReadJob:
    """Read chunk ``items`` (see ``engine.chunk_items``) of one array into ``out``.

    Parameters
    ----------
    keys
        The items' store keys (``engine.chunk_keys``).
    sio
        The store's ``sync_io()``, where the caller has it already.
    """

    locking = False  # reads take no key locks
    #: batches of one large chunk, read into the store's reused buffer (set by
    #: the engine for worker loops over blocking I/O; see :func:`large_chunks`)
    one_by_one = False

    def __init__(
        self,
        store_path: StorePath,
        meta: ArrayMetadata,
        pipeline: Any,
        items: list[Any],
        keys: list[str],
        out: Any,
        sio: Any = _UNKNOWN,
    ) -> None:
        self.store_path = store_path
        self.items = items
        self.keys = keys
        self.out = out
        self.meta = meta  # its read_missing_chunks: looked up when a chunk is missing
        self.n = len(items)
        self.pipeline = pipeline
        self.decode_into = getattr(pipeline, "decode_into", None)
        self.fill = meta.read_fill
        self.grid = meta.chunk_grid
        store = store_path.store
        self.sio = store.sync_io() if sio is _UNKNOWN else sio
        self.device = device_reader_for(
            pipeline, out, self.fill, self.grid.stored_chunk_shape, store
        )
        self.blocks = None
        self.ahead: ReadAhead | None = None  # see read_ahead
        # whole chunks of a batch decoded in place by one call (core.together):
        # regular grids, where every whole chunk has the grid's shape
        self.together = None
        self.chunk_shape: tuple[int, ...] = ()
        if self.device is None:
            self.blocks = BlockDecoder.make(items, out, self.grid, pipeline)
            if isinstance(self.grid, RegularChunkGrid) and type(out) is np.ndarray:
                self.together = getattr(pipeline, "decode_chunks_into", None)
                self.chunk_shape = tuple(self.grid.chunk_shape)
        else:
            self.device.plan_read(items)
        # a large chunk alone keeps decode_in_place (python-zstandard straight
        # into the output): 1 MiB chunks read 2-8% faster that way than
        # through the C call (2-CPU VM, 2026-12-03)
        self.large = large_chunks(meta)
        # decoded in batches on the host (blocks, together): its batches are
        # read into a buffer the thread reuses (plans.Get), in C where the
        # store can, without the GIL
        self.batched = self.together is not None or self.blocks is not None

    def plan(self, lo: int, hi: int) -> Plan:
        """Fetch items ``lo:hi`` (one request), then decode and scatter them."""
        datas = None
        part = None  # the device reader's items lo:hi, made once for both steps
        if self.ahead is not None:
            datas = self.ahead.take(lo, hi)
        elif self.device is not None and self.sio is not None:
            # file references or chunks read straight into a staging buffer
            part = window(self.items, lo, hi)
            datas = self.device.fetch(self.keys[lo:hi], part)
        if datas is None:
            # (values in a buffer the thread reuses: large chunks one by one,
            # and batches decoded together, consumed before the next request)
            datas = yield Get(self.keys[lo:hi], reuse=self.one_by_one or self.batched)
        yield Compute(self.decode_batch, lo, datas, part)

    def lock_keys(self, lo: int, hi: int) -> None:
        return None

    def read_ahead(self, size: int, depth: int) -> None:
        """Device reads of chunks read into staging (``DeviceReader.fetch_into``)
        in batches of ``size`` items: fetch up to ``depth`` batches ahead of the
        worker loops (:class:`~cuzarr.core.readahead.ReadAhead`), where there
        is more than one batch."""
        dev = self.device
        if dev is None or self.sio is None or dev.get_into is None or self.n <= size:
            return
        if dev.direct_store is not None or not is_slice_only(self.items):
            return  # nothing read on the host, or bytes decoded on the host

        def fetch(lo: int, hi: int) -> Any:
            return dev.fetch(self.keys[lo:hi], window(self.items, lo, hi))

        def release(value: Any) -> None:
            base = getattr(value, "base", None)
            if base is not None:
                dev.executor.release(base)

        self.ahead = ReadAhead(fetch, release, self.n, size, depth)

    def finish(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        if self.device is not None:
            self.device.executor.synchronize()

    def decode_batch(self, lo: int, datas: list[Any], part: Any = None) -> None:
        """Decode the chunks of items ``lo:lo + len(datas)`` into the output
        (``part``: those items, where the caller has them)."""
        # (a device fetch knows which are missing: no value looked at)
        holes = getattr(datas, "missing", None)
        missing = [self.keys[lo + j] for j in (
            holes() if holes is not None else (j for j, d in enumerate(datas) if d is None))]
        if missing and missing_chunks_refused(self.meta):
            refuse_missing(self.store_path, missing)
        if self.device is not None:
            hi = lo + len(datas)
            self.device(window(self.items, lo, hi) if part is None else part, datas,
                        self.keys[lo:hi])
            return
        done = self.blocks.run(lo, datas) if self.blocks is not None else None
        left = [(lo + j, data) for j, data in enumerate(datas) if done is None or not done[j]]
        if self.together is not None and (len(left) > 1 or (left and not self.large)):
            left = decode_together(self.together, self._start_of, left, self.chunk_shape,
                                   self.out)
        for i, data in left:
            self._decode_one(i, data)

    def _start_of(self, i: int) -> list[int] | None:
        """Where item ``i``'s chunk lands whole in the output (None: not so)."""
        return whole_block_start(self.items[i], self.chunk_shape)

    def _decode_one(self, i: int, data: Any) -> None:
        coords, csel, osel, complete = self.items[i]
        out = self.out
        if data is None:
            out[osel] = self.fill
            return
        shape = self.grid.stored_chunk_shape(coords)
        try:
            if (
                complete
                and self.decode_into is not None
                and out.ndim
                and self._decode_in_place(data, shape, out[osel])
            ):
                return
            chunk = self.pipeline.decode(data, shape, scratch=True)
        except CodecError as e:
            raise keyed(e, self.keys[i]) from e
        out[osel] = chunk[csel]

    def _decode_in_place(self, data: Any, shape: Any, target: np.ndarray) -> bool:
        return decode_in_place(self.decode_into, data, shape, target, self.out)
