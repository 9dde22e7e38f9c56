"""cuzarr's engine inside zarr-python: a codec pipeline for zarr-python 3.

One line makes every zarr-python read and write (and so xarray's and dask's)
go through cuzarr's batched engine::

    zarr.config.set({"codec_pipeline.path": "cuzarr.zarr_pipeline.CuzarrCodecPipeline"})

What goes where:

- Codecs are translated to cuzarr's (:mod:`cuzarr.zarr_pipeline.translate`); a
  codec cuzarr does not know makes the array use zarr-python's own
  ``BatchedCodecPipeline``, with a debug log, or an error with
  ``codec_pipeline.strict`` set in zarr's config.
- A batch of chunk requests becomes one engine job
  (:mod:`cuzarr.zarr_pipeline.jobs`) whose plans are run by cuzarr's drivers:
  zarr-python's ``LocalStore`` through cuzarr's own local store (blocking batch
  I/O in worker loops), any other store through its async API.
- Sharded arrays (the sharding codec alone): shards are read by the engine's
  shard reader (:mod:`cuzarr.zarr_pipeline.shards`), those whose selection
  touches few inner chunks index first; partial shard writes re-encode only the
  inner chunks they touch (the engine's write rule).
- GPU (``zarr.config.enable_gpu()``): reads into a CuPy output decode through
  cuzarr's device reader (nvCOMP, the scatter kernel) where it takes them
  (unsharded arrays, no dropped axes); under cuzarr's ``gpu.emulate`` config its
  host twin serves numpy outputs. Other device reads, writes of device values
  and the inner chunks of zarr-python's own sharding codec go to zarr-python's
  pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
from zarr.abc.codec import Codec, CodecPipeline, GetResult
from zarr.abc.store import Store as ZarrStore
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.registry import register_pipeline
from zarr.storage import StorePath

from cuzarr.buffer import is_device_array
from cuzarr.codecs.base import ChunkSpec
from cuzarr.core.plans import execute, try_inline
from cuzarr.gpu.dispatch import emulating
from cuzarr.runtime.workers import raise_mmap_threshold
from cuzarr.zarr_pipeline.jobs import (
    ReadItem,
    WriteItem,
    ZarrReadJob,
    ZarrWriteJob,
    batch_size,
    chunk_nbytes,
)
from cuzarr.zarr_pipeline.translate import Translated, store_for, translate

__all__ = ["CuzarrCodecPipeline"]

log = logging.getLogger(__name__)

# Batches of at most this many chunks on a store with blocking I/O run in the
# calling thread (the engine's SMALL_READ_CHUNKS): the hops cost more than the work.
SMALL_BATCH = 4

_PRESENT = GetResult(status="present")
_MISSING = GetResult(status="missing")


@dataclass(frozen=True)
class CuzarrCodecPipeline(CodecPipeline):
    """zarr-python's ``CodecPipeline`` run by cuzarr's engine.

    ``fallback`` is zarr-python's ``BatchedCodecPipeline`` of the same codecs:
    it answers the metadata questions (``validate``, ``compute_encoded_size``),
    and does the work where cuzarr cannot (``translated`` is None).
    """

    fallback: BatchedCodecPipeline
    translated: Translated | None = field(default=None, compare=False)

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        """The pipeline of ``codecs`` (bound to an array by ``evolve_from_array_spec``)."""
        return cls(fallback=BatchedCodecPipeline.from_codecs(codecs, batch_size=batch_size))

    def evolve_from_array_spec(self, array_spec: Any) -> Self:
        """Bind to an array's chunk spec: translate its codecs to cuzarr's."""
        fallback = self.fallback.evolve_from_array_spec(array_spec)
        return type(self)(fallback=fallback, translated=translate(list(fallback), array_spec))

    def __iter__(self) -> Iterator[Codec]:
        return iter(self.fallback)

    @property
    def supports_partial_decode(self) -> bool:
        return self.fallback.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.fallback.supports_partial_encode

    def validate(self, *, shape: tuple[int, ...], dtype: Any, chunk_grid: Any) -> None:
        self.fallback.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: Any) -> int:
        return self.fallback.compute_encoded_size(byte_length, array_spec)

    async def decode(self, chunk_bytes_and_specs: Iterable[tuple[Any, Any]]) -> Iterable[Any]:
        return await self.fallback.decode(chunk_bytes_and_specs)

    async def encode(self, chunk_arrays_and_specs: Iterable[tuple[Any, Any]]) -> Iterable[Any]:
        return await self.fallback.encode(chunk_arrays_and_specs)

    # -- reads and writes ------------------------------------------------------------
    async def read(
        self,
        batch_info: Iterable[tuple[Any, Any, Any, Any, bool]],
        out: Any,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[GetResult, ...]:
        """Read zarr-python's batch of chunks into ``out`` with one engine job."""
        batch = list(batch_info)
        target = out.as_ndarray_like()
        store = self._engine_store(batch, target, read=True)
        if store is None:
            return await self.fallback.read(batch, out, drop_axes)
        tr = self.translated
        assert tr is not None
        items = [
            ReadItem(bg.path, spec.shape, csel, osel, _fill(spec), complete)
            for bg, spec, csel, osel, complete in batch
        ]
        shards = None
        if tr.shard_codec is not None:
            spec = batch[0][1]
            shards = (tr.shard_codec, ChunkSpec(spec.shape, tr.pipeline.dtype, _fill(spec)))
        sio = store.sync_io()
        job = ZarrReadJob(tr.pipeline, items, target, drop_axes, shards, sio)
        if type(target) is not np.ndarray and not job.on_device(store):
            return await self.fallback.read(batch, out, drop_axes)  # not for the device path
        if type(target) is np.ndarray and emulating():
            job.on_device(store)
        nbytes = chunk_nbytes(batch[0][1].shape, tr.itemsize)
        await _run(job, store, nbytes, one_by_one=job.take_one_by_one(sio, nbytes))
        return tuple(_PRESENT if s else _MISSING for s in job.status)

    async def write(
        self,
        batch_info: Iterable[tuple[Any, Any, Any, Any, bool]],
        value: Any,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        """Write ``value`` into zarr-python's batch of chunks with one engine job."""
        batch = list(batch_info)
        source = value.as_ndarray_like()
        store = self._engine_store(batch, source)
        if store is None:
            await self.fallback.write(batch, value, drop_axes)
            return
        tr = self.translated
        assert tr is not None
        items = [
            WriteItem(
                bs.path, spec.shape, csel, osel, complete, _fill(spec),
                spec.config.write_empty_chunks, spec.order,
            )
            for bs, spec, csel, osel, complete in batch
        ]  # fmt: skip
        joins = not getattr(store, "takes_parts", False)
        shards = None if tr.shard_codec is None else (tr.shard_codec, tr.pipeline.dtype)
        job = ZarrWriteJob(tr.pipeline, tr.np_dtype, items, source, drop_axes, joins, shards)
        nbytes = chunk_nbytes(batch[0][1].shape, tr.itemsize)
        if nbytes >= (64 << 10):
            # large chunk buffers off mmap, as the engine's writes (WriteJob.prime_allocator)
            raise_mmap_threshold(max(4 << 20, 2 * nbytes))
        await _run(job, store, nbytes)

    def _engine_store(self, batch: list[Any], array: Any, read: bool = False) -> Any:
        """cuzarr's store for the batch's one zarr-python store; None where the
        batch goes to zarr-python's pipeline (see the module notes)."""
        if self.translated is None or not batch:
            return None
        if type(array) is not np.ndarray and not (read and is_device_array(array)):
            return None
        first = batch[0][0]
        if type(first) is not StorePath:
            return None  # a byte getter of zarr's sharding codec, or a user's
        zstore = first.store
        if not issubclass(type(zstore), ZarrStore) or any(b[0].store is not zstore for b in batch):
            # type(), not isinstance: a test double (AsyncMock with a store's
            # spec) stands in for zarr's own paths, not for a store we can drive
            return None
        return store_for(zstore)


async def _run(job: Any, store: Any, nbytes: int, one_by_one: bool = False) -> None:
    """Run ``job`` with the engine's drivers: small ones in this thread;
    ``one_by_one``: a chunk per batch."""
    if not job.n:
        return
    if job.n <= SMALL_BATCH and try_inline(job, store):
        return
    await execute(job, store, 1 if one_by_one else batch_size(job.n, nbytes))


def _fill(spec: Any) -> Any:
    """zarr-python's ``fill_value_or_default``."""
    fill = spec.fill_value
    if fill is None:
        return spec.dtype.default_scalar()
    return fill


# config.set({"codec_pipeline.path": ...}) finds the class by its name: the
# package's entry point registers it, and so does importing this module.
register_pipeline(CuzarrCodecPipeline)
