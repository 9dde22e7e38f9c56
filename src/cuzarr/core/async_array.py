"""``AsyncArray``: an array in a store, every operation a coroutine."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzarr.buffer import (
    default_prototype,
    device_dtype,
    host_selection,
    is_device_array,
    prototype_for,
    shares_memory,
)
from cuzarr.codecs.lazy_numcodecs import numcodecs
from cuzarr.codecs.pipeline import pipeline_for
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.core import engine
from cuzarr.core.array_info import ArrayInfo
from cuzarr.core.array_props import ArrayProperties
from cuzarr.core.blocking import on_blocking_io
from cuzarr.core.nodes import (
    open_node_metadata,
    publish_metadata,
    save_metadata,
    write_new_node,
)
from cuzarr.core.resize import resize as resize_shape
from cuzarr.core.resize import stored_coords
from cuzarr.core.shards import read_sharded, sharding_codec
from cuzarr.core.values import as_value, device_index, field_names, records_of
from cuzarr.errors import ContainsGroupError, ReadOnlyError
from cuzarr.indexing.projection import any_per_chunk, chunk_labels
from cuzarr.indexing.selection import (
    BasicPlan,
    block_slices,
    normalize_coordinate,
    normalize_numpy,
    normalize_orthogonal,
)
from cuzarr.indexing.selection import has_fields as _has_fields
from cuzarr.indexing.selection import pop_fields as _pop_fields
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.storage.common import StorePath

__all__ = ["AsyncArray"]


# A host buffer standing for a read's output in engine.small_read's checks
# before the output is made (the read checks again with the real one).
_HOST_PROBE = np.empty(0)


def _refuse_read_only_out(out: Any) -> None:
    """Refuse a read-only ``out`` before any I/O: decoders write into it through
    raw pointers. (CuPy arrays have no ``writeable`` flag: they always are.)"""
    if not getattr(getattr(out, "flags", None), "writeable", True):
        raise ValueError("out is read-only")


def _as_mask(mask: Any) -> np.ndarray:
    """A mask selection as a numpy bool array; anything else is refused (an
    integer array taken for a mask would select by truth value, silently)."""
    arr = np.asarray(host_selection(mask))
    if arr.dtype != bool:
        raise IndexError(f"mask selections take a boolean array, got one of dtype {arr.dtype}")
    return arr


async def _materialize(value: Any) -> Any:
    """Read cuzarr arrays (and views) given as values, without re-entering the sync API."""
    inner = getattr(value, "_async_array", None)
    if isinstance(inner, AsyncArray):
        return await inner.getitem(Ellipsis)
    if isinstance(value, AsyncArray):
        return await value.getitem(Ellipsis)
    read_async = getattr(value, "read_async", None)
    if callable(read_async):
        return await read_async()
    return value


def _array_metadata_of(data: Any) -> ArrayMetadata:
    from cuzarr.core.hierarchy import as_node_metadata

    meta = as_node_metadata(data)
    if not isinstance(meta, ArrayMetadata):
        raise ContainsGroupError("the metadata describes a group, not an array")
    return meta


class AsyncArray(ArrayProperties):
    """An array in a store; every operation is a coroutine.

    Create one with :func:`cuzarr.api.asynchronous.create_array` or open one with
    :func:`cuzarr.api.asynchronous.open_array`.
    """

    def __repr__(self) -> str:
        return f"<AsyncArray {self.store_path} shape={self.shape} dtype={self.dtype}>"

    def __init__(
        self,
        metadata: ArrayMetadata | dict[str, Any],
        store_path: StorePath,
        config: Any = None,
        *,
        write_empty_chunks: bool | None = None,
    ) -> None:
        if not isinstance(metadata, ArrayMetadata):  # a metadata document, as zarr-python
            metadata = _array_metadata_of(metadata)
        if config is not None:  # zarr-python's ArrayConfig (or its dict)
            from cuzarr.core.array_config import config_dict, parse_array_config

            given = config_dict(config)
            parse_array_config(given)  # unknown keys and bad values raise
            order = given.get("order")
            if order is not None and order != metadata.order and metadata.zarr_format == 3:
                metadata = metadata.evolve(order=order)
            missing = given.get("read_missing_chunks")
            if missing is not None:
                metadata = metadata.evolve(read_missing_chunks=missing)
            if write_empty_chunks is None:
                write_empty_chunks = given.get("write_empty_chunks")
        self.store_path = store_path
        self._write_empty_chunks = write_empty_chunks
        # Where reads land when a call names no prototype (``meta_array=``).
        self._prototype: Any = None
        self._set_metadata(metadata)

    @classmethod
    def from_dict(cls, store_path: StorePath, data: dict[str, Any]) -> AsyncArray:
        """The array at ``store_path`` described by the metadata document ``data``
        (nothing is read or written), as zarr-python's ``AsyncArray.from_dict``."""
        return cls(_array_metadata_of(data), store_path)

    # (dict, key) pairs: consolidated dicts of group handles this array came
    # from, which must see its metadata changes (see AsyncGroup._mirrors).
    _meta_sinks: Any = ()

    def __getstate__(self) -> dict[str, Any]:
        # A pickled copy (a dask task, a worker process) shares no dict with the
        # handles here: its sinks would only drag every consolidated entry of the
        # hierarchy along (hundreds of KB per array instead of about one).
        state = self.__dict__.copy()
        state.pop("_meta_sinks", None)
        return state

    def _set_metadata(self, metadata: ArrayMetadata) -> None:
        self.metadata = metadata
        publish_metadata(self._meta_sinks, metadata)
        self._pipeline = pipeline_for(metadata)
        if not getattr(self.store_path.store, "read_only", True):
            # Writers compress large zstd chunks (and blosc) through numcodecs:
            # imported here (~40 ms), not inside the first write. Read-only
            # handles go without it (see codecs/lazy_numcodecs.py).
            numcodecs()
        ab = getattr(self._pipeline, "array_bytes", None)
        self._inner_chunks = ab.chunk_shape if isinstance(ab, ShardingCodec) else None
        # Partial shard reads need sharding to be the only codec; otherwise whole
        # shards are decoded through the pipeline.
        # Partial reads plan on one regular grid of inner chunks inside regular
        # shards; a rectilinear grid of shards is read whole, through the pipeline.
        self._shard_codec = (
            sharding_codec(self._pipeline)
            if isinstance(metadata.chunk_grid, RegularChunkGrid)
            else None
        )
        self._read_grid = (
            RegularChunkGrid(self._shard_codec.chunk_shape)
            if self._shard_codec
            else metadata.chunk_grid
        )

    # -- construction ------------------------------------------------------------
    @classmethod
    async def open(
        cls, store: Any, zarr_format: int | None = None, *, config: Any = None
    ) -> AsyncArray:
        """Open the array at ``store`` (a ``StorePath`` or anything ``open_array``
        takes as a store), as zarr-python's ``AsyncArray.open``."""
        store_path, meta = await open_node_metadata(store, zarr_format, "array")
        arr = cls(meta, store_path)
        return arr.with_config(config) if config is not None else arr

    @classmethod
    async def create(
        cls,
        store_path: StorePath,
        metadata: ArrayMetadata,
        *,
        overwrite: bool = False,
        write_empty_chunks: bool | None = None,
    ) -> AsyncArray:
        """Write ``metadata`` at ``store_path`` (refusing to clobber unless told)."""
        if store_path.store.read_only:
            raise ReadOnlyError(
                f"cannot create an array in read-only {store_path.store!r} "
                "(open it with mode='r+' to write)"
            )
        await write_new_node(store_path, metadata, overwrite)
        return cls(metadata, store_path, write_empty_chunks=write_empty_chunks)

    def _check_writable(self) -> None:
        if self.store_path.store.read_only:
            raise ReadOnlyError(
                f"array {self.name!r} is read-only: its store {self.store_path.store!r} "
                "was opened read-only (open it with mode='r+' to write)"
            )

    def _dims(self) -> list[Any]:
        """Per-dimension grid that reads are planned on (inner chunks when sharded).
        Built once per metadata (the grids are immutable; do not change the list)."""
        key = (self.metadata, self._read_grid)
        cached = self.__dict__.get("_dims_cache")
        if cached is None or cached[0] is not key[0] or cached[1] is not key[1]:
            cached = self._dims_cache = (*key, self._read_grid.dims(self.shape))
        return cached[2]

    def _write_dims(self) -> list[Any]:
        """Per-dimension grid that writes are planned on (shards when sharded)."""
        meta = self.metadata
        cached = self.__dict__.get("_write_dims_cache")
        if cached is None or cached[0] is not meta:
            cached = self._write_dims_cache = (meta, meta.chunk_grid.dims(meta.shape))
        return cached[1]

    # -- reading -----------------------------------------------------------------
    def set_prototype(self, prototype: Any) -> None:
        """Make ``prototype`` (a buffer prototype, its name, or an array like the
        outputs wanted: ``meta_array``) where this array's reads land by default."""
        self._prototype = None if prototype is None else prototype_for(prototype)

    @property
    def config(self) -> Any:
        """The runtime configuration (``order``, ``write_empty_chunks``,
        ``read_missing_chunks``): an ``ArrayConfig``; change it with :meth:`with_config`."""
        from cuzarr.core.array_config import ArrayConfig

        return ArrayConfig(
            self.order, self.write_empty_chunks, not engine.missing_chunks_refused(self.metadata)
        )

    def with_config(self, config: Any) -> AsyncArray:
        """A copy of this array with another runtime configuration.

        Keys missing from a ``dict`` ``config`` keep this array's values. A Zarr v2
        array's ``order`` is stored in its metadata and cannot change here.
        """
        from cuzarr.core.array_config import ArrayConfig, config_dict

        cur = self.config.to_dict()
        new = (
            config
            if isinstance(config, ArrayConfig)
            else ArrayConfig(**{**cur, **config_dict(config)})
        )
        meta = self.metadata
        if new.order != meta.order:
            if meta.zarr_format == 2:
                raise ValueError(
                    "the order of a Zarr v2 array is stored in its metadata; "
                    "with_config cannot change it"
                )
            meta = meta.evolve(order=new.order)
        if new.read_missing_chunks != cur["read_missing_chunks"]:
            meta = meta.evolve(read_missing_chunks=new.read_missing_chunks)
        out = type(self)(meta, self.store_path, write_empty_chunks=new.write_empty_chunks)
        out._prototype = self._prototype
        return out

    def _resolve_prototype(self, prototype: Any) -> Any:
        if prototype is not None:
            return prototype_for(prototype)
        return self._prototype if self._prototype is not None else default_prototype()

    def _out_buffer(self, shape: tuple[int, ...], out: Any | None, prototype: Any = None) -> Any:
        if out is not None:
            if tuple(out.shape) != tuple(shape) and math.prod(out.shape) != math.prod(shape):
                raise ValueError(f"out has shape {out.shape}, the selection has shape {shape}")
            if out.dtype != self.dtype and not (
                is_device_array(out) and out.dtype == device_dtype(self.dtype)
            ):
                raise TypeError(f"out has dtype {out.dtype}, the array has {self.dtype}")
            _refuse_read_only_out(out)
            buf = out.reshape(shape)
            if buf.size and not shares_memory(buf, out):
                raise ValueError("out must be reshapeable to the selection without a copy")
            return buf
        proto = self._resolve_prototype(prototype)
        if proto.is_device:
            dt = device_dtype(self.dtype)
            if dt is not None:  # else a dtype CuPy cannot hold: the read stays on the host
                return proto.empty(shape, dt, order=self.order)
        return self.metadata.dtype.empty(shape, order=self.order)

    async def _read_projections(
        self,
        projections: list[Any],
        buffer_shape: tuple[int, ...],
        out: Any | None = None,
        prototype: Any = None,
    ) -> Any:
        buf = self._out_buffer(buffer_shape, out, prototype)
        await self._read_items(engine.chunk_items(projections), buf)
        return buf

    async def _read_items(self, items: list[Any], buf: np.ndarray) -> None:
        if self._shard_codec is not None:
            await read_sharded(
                self.store_path, self.metadata, self._pipeline, self._shard_codec, items, buf
            )
        else:
            await engine.read_items(self.store_path, self.metadata, self._pipeline, items, buf)

    async def getitem(
        self, selection: Any, *, out: np.ndarray | None = None, prototype: Any = None
    ) -> Any:
        """Read ``selection`` with numpy semantics (field names in it select fields of
        a structured data type, as in zarr-python)."""
        fields, selection = _pop_fields(selection)
        if fields is not None:
            return await self._get_fields(
                lambda: self.getitem(selection, prototype=prototype), fields, out
            )
        if out is not None:
            _refuse_read_only_out(out)
        plan = normalize_numpy(host_selection(selection), self.shape, self._dims())
        return await self.getitem_planned(plan, out=out, prototype=prototype)

    async def getitem_planned(
        self, plan: Any, *, out: np.ndarray | None = None, prototype: Any = None
    ) -> Any:
        """:meth:`getitem` of a selection already planned by ``normalize_numpy``
        against this array (the sync ``Array``, whose inline attempt planned it)."""
        if isinstance(plan, BasicPlan):
            buf = await self._read_projections(
                plan.projections,
                plan.buffer_shape,
                out if out is not None and out.shape == plan.result_shape else None,
                prototype,
            )
            result = buf.reshape(plan.result_shape)
            if out is not None and out.shape == plan.result_shape and not shares_memory(out, buf):
                out[...] = result
                return out
            if out is not None and out.shape != plan.result_shape:
                raise ValueError(
                    f"out has shape {out.shape}, the selection has shape {plan.result_shape}"
                )
            if plan.scalar:
                return result[()]  # as zarr-python: a scalar, also with ``out``
            return out if out is not None else result  # ``out`` itself, as zarr-python
        block = await self._read_projections(
            plan.projections, plan.buffer_shape, None, out if out is not None else prototype
        )
        result = block[device_index(block, plan.post_index)]
        if out is not None:
            out[...] = result
            return out
        return result[()] if isinstance(result, np.ndarray) and result.ndim == 0 else result

    async def get_orthogonal_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        """Read with orthogonal (outer) indexing semantics."""
        if _has_fields(fields):
            return await self._get_fields(
                lambda: self.get_orthogonal_selection(selection, prototype=prototype), fields, out
            )
        plan = normalize_orthogonal(host_selection(selection), self.shape, self._dims())
        return await self.get_orthogonal_planned(plan, out=out, prototype=prototype)

    async def get_orthogonal_planned(
        self, plan: Any, *, out: np.ndarray | None = None, prototype: Any = None
    ) -> Any:
        """:meth:`get_orthogonal_selection` of a selection already planned by
        ``normalize_orthogonal`` against this array (the sync ``Array``, whose
        inline attempt planned it)."""
        if out is not None and tuple(out.shape) != plan.result_shape:
            raise ValueError(
                f"out has shape {out.shape}, the selection has shape {plan.result_shape}"
            )
        buf = await self._read_projections(plan.projections, plan.buffer_shape, out, prototype)
        result = buf.reshape(plan.result_shape) if out is None else out
        return result[()] if result.ndim == 0 and out is None else result

    async def get_coordinate_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        """Read points (``vindex``): integer coordinate arrays or one boolean mask."""
        if _has_fields(fields):
            return await self._get_fields(
                lambda: self.get_coordinate_selection(selection, prototype=prototype), fields, out
            )
        coords, shape = normalize_coordinate(host_selection(selection), self.shape)
        n = math.prod(shape)
        if out is not None and math.prod(out.shape) != n:
            raise ValueError(f"out has shape {out.shape}, the selection has shape {shape}")
        # An ``out`` that cannot be viewed flat (Fortran order, strided) is
        # filled from a flat buffer afterwards.
        flat = out is None or n == 0 or shares_memory(out.reshape((n,)), out)
        buf = self._out_buffer((n,), out if flat else None, prototype if flat else out)
        if not flat and out.dtype != buf.dtype:
            raise TypeError(f"out has dtype {out.dtype}, the array has {self.dtype}")
        if not flat:
            _refuse_read_only_out(out)
        if n:
            items = engine.coordinate_items(self._dims(), coords)
            await self._read_items(items, buf)
        if out is not None:
            if not flat:
                out[...] = buf.reshape(out.shape)
            return out
        result = buf.reshape(shape)
        return result[()] if result.ndim == 0 else result

    async def get_coordinate_planned(self, shape: tuple[int, ...], items: Any) -> Any:
        """:meth:`get_coordinate_selection` (no ``out``, no ``prototype``) of
        points already planned against this array: the selection's ``shape``
        and its chunk items (``engine.coordinate_items``; the sync ``Array``'s
        inline attempt made them)."""
        n = math.prod(shape)
        buf = self._out_buffer((n,), None, None)
        if n:
            await self._read_items(items, buf)
        result = buf.reshape(shape)
        return result[()] if result.ndim == 0 else result

    async def get_mask_selection(
        self,
        mask: Any,
        *,
        out: np.ndarray | None = None,
        fields: Any = None,
        prototype: Any = None,
    ) -> Any:
        """Read the elements where the boolean ``mask`` (the array's shape) is True."""
        return await self.get_coordinate_selection(
            _as_mask(mask), out=out, prototype=prototype, fields=fields
        )

    async def set_mask_selection(self, mask: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` where the boolean ``mask`` (the array's shape) is True."""
        await self.set_coordinate_selection(_as_mask(mask), value, fields=fields)

    async def get_basic_selection(
        self,
        selection: Any = Ellipsis,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        """Read ``selection`` (ints, slices, Ellipsis, newaxis)."""
        if _has_fields(fields):
            return await self._get_fields(
                lambda: self.getitem(selection, prototype=prototype), fields, out
            )
        return await self.getitem(selection, out=out, prototype=prototype)

    async def set_basic_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write ``value`` into ``selection`` (ints, slices, Ellipsis, newaxis)."""
        await self._setitem(
            selection, value, self._field_names(fields) if _has_fields(fields) else None
        )

    # -- fields of structured data types ------------------------------------------
    def _field_names(self, fields: Any) -> str | list[str]:
        return field_names(self.dtype, fields)

    def _records(self, value: Any, shape: tuple[int, ...], fields: str | list[str]) -> np.ndarray:
        return records_of(self.dtype, value, shape, fields)

    async def _get_fields(self, read: Callable[[], Any], fields: Any, out: Any) -> Any:
        """The ``fields`` of what ``read()`` returns (one field: its values; a list:
        records of just those fields, packed), into ``out`` if given."""
        f = self._field_names(fields)
        if out is not None:
            _refuse_read_only_out(out)
        records = await read()
        sub = np.asarray(records)[f]
        if not isinstance(f, str):
            from numpy.lib import recfunctions

            sub = recfunctions.repack_fields(sub)
        if out is not None:
            if tuple(out.shape) != sub.shape:
                raise ValueError(f"out has shape {out.shape}, the selection has shape {sub.shape}")
            if out.dtype != sub.dtype:
                raise TypeError(f"out has dtype {out.dtype}, the fields have {sub.dtype}")
            out[...] = sub
            return out[()] if sub.ndim == 0 else out  # a scalar, as without fields
        return sub[()] if sub.ndim == 0 else sub

    @property
    def oindex(self) -> _AsyncIndexer:
        """Orthogonal indexing: ``await a.oindex.getitem(sel)`` (zarr-python's
        ``AsyncOIndex``), ``await a.oindex.setitem(sel, v)``."""
        return _AsyncIndexer(self, "get_orthogonal_selection", "set_orthogonal_selection")

    @property
    def vindex(self) -> _AsyncIndexer:
        """Coordinate (point) or mask indexing: ``await a.vindex.getitem(sel)``."""
        return _AsyncIndexer(self, "get_coordinate_selection", "set_coordinate_selection")

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes (a dict, as zarr-python's ``AsyncArray.attrs``; change
        them with :meth:`update_attributes`)."""
        return self.metadata.attributes

    async def info_complete(self) -> ArrayInfo:
        """``info`` plus what needs store requests: bytes stored (metadata
        included, as in zarr-python), chunks and shards initialized."""
        info = self.info
        info.count_bytes_stored = await self.nbytes_stored()
        info.count_chunks_initialized = await self.nchunks_initialized()
        info.count_shards_initialized = await self.nshards_initialized()
        return info

    async def get_block_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        """Read whole chunks by chunk-grid index (``blocks``)."""
        return await self.get_orthogonal_selection(
            self._block_to_slices(selection), out=out, prototype=prototype, fields=fields
        )

    def _block_to_slices(self, selection: Any) -> tuple[slice, ...]:
        # Blocks are chunks (inner chunks when sharded, whatever the grid of shards).
        inner = self._inner_chunks
        dims = RegularChunkGrid(inner).dims(self.shape) if inner else self._dims()
        return block_slices(selection, dims)

    # -- writing -----------------------------------------------------------------
    def _as_value(self, value: Any, shape: tuple[int, ...], **how: bool) -> Any:
        """``value`` as an array of the stored dtype broadcast to ``shape``
        (see :func:`cuzarr.core.values.as_value` for ``how``: keep_device, basic,
        scalar)."""
        return as_value(self.metadata.dtype, value, shape, **how)

    async def setitem(self, selection: Any, value: Any, prototype: Any = None) -> None:
        """Write ``value`` into ``selection`` with numpy semantics (broadcasting).

        ``prototype`` is accepted for zarr-python compatibility (the value's own
        kind, host or device, decides how it is written)."""
        fields, selection = _pop_fields(selection)
        await self._setitem(selection, value, None if fields is None else self._field_names(fields))

    async def _setitem(self, selection: Any, value: Any, fields: str | list[str] | None) -> None:
        """:meth:`setitem` of a selection without field names; ``fields``: write
        only these (validated) fields of the records."""
        self._check_writable()
        selection = host_selection(selection)
        plan = normalize_numpy(selection, self.shape, self._write_dims())
        value = await _materialize(value)
        if isinstance(plan, BasicPlan):
            v = self._as_value(
                value if fields is None else self._records(value, plan.result_shape, fields),
                plan.result_shape,
                keep_device=True,
                basic=True,
                scalar=plan.scalar,
            ).reshape(plan.buffer_shape)
            await engine.write_plan(
                self.store_path,
                self.metadata,
                self._pipeline,
                plan.projections,
                v,
                self.write_empty_chunks,
                fields=fields,
            )
            return
        # Advanced indices: numpy's assignment into the selection's bounding block,
        # written back to the chunks that hold a selected point only (as
        # zarr-python's vindex/oindex: no other chunk is rewritten, so none appears,
        # vanishes or loses stale elements past a cut edge). Only the selected
        # elements of the block are merged into the stored chunks, each read and
        # rewritten under the store's key locks (write_items' ``where``), so a
        # concurrent write of the elements between the selected ones survives.
        selected = np.zeros(plan.buffer_shape, dtype=bool)
        target = selected[plan.post_index].shape
        v = self._as_value(
            value if fields is None else self._records(value, target, fields), target
        )
        if selected.size == 0 or v.size == 0:
            return
        selected[plan.post_index] = True
        block = self._out_buffer(plan.buffer_shape, None)
        items = engine.chunk_items(plan.projections)
        everything = bool(selected.all())
        if plan.projections and not everything:
            labels = [chunk_labels(p) for p in plan.projections]
            touched = any_per_chunk(selected, labels)
            if not touched.all():
                items = [items[i] for i in np.flatnonzero(touched)]
        block[plan.post_index] = v
        await engine.write_items(
            self.store_path,
            self.metadata,
            self._pipeline,
            items,
            block,
            self.write_empty_chunks,
            fields=fields,
            where=None if everything else selected,
        )

    async def set_orthogonal_selection(
        self, selection: Any, value: Any, *, fields: Any = None, _basic: bool = False
    ) -> None:
        """Write with orthogonal (outer) indexing semantics."""
        f = self._field_names(fields) if _has_fields(fields) else None
        self._check_writable()
        plan = normalize_orthogonal(host_selection(selection), self.shape, self._write_dims())
        value = await _materialize(value)
        if f is not None:
            value = self._records(value, plan.result_shape, f)
        v = self._as_value(value, plan.result_shape, basic=_basic).reshape(plan.buffer_shape)
        await engine.write_plan(
            self.store_path,
            self.metadata,
            self._pipeline,
            plan.projections,
            v,
            self.write_empty_chunks,
            fields=f,
        )

    async def set_coordinate_selection(
        self, selection: Any, value: Any, *, fields: Any = None
    ) -> None:
        """Write points (``vindex``); repeated points: the last value wins."""
        f = self._field_names(fields) if _has_fields(fields) else None
        self._check_writable()
        coords, shape = normalize_coordinate(host_selection(selection), self.shape)
        # One point by integer coordinates is numpy's element assignment
        # (``x[np.array(1)] = v``): its scalar rules (no casting NaN into ints).
        point = shape == () and bool(coords)
        value = await _materialize(value)
        if f is not None:
            value = self._records(value, shape, f)
        v = self._as_value(value, shape, basic=point, scalar=point).reshape(-1)
        if not coords:
            # A 0-d array (``vindex[()]``, or a 0-d mask): its one element, or nothing.
            if v.size == 0:
                return
            v = v[-1:].reshape(())
        items = engine.coordinate_items(self._write_dims(), coords)
        await engine.write_items(
            self.store_path,
            self.metadata,
            self._pipeline,
            items,
            v,
            self.write_empty_chunks,
            fields=f,
        )

    async def set_block_selection(self, selection: Any, value: Any, *, fields: Any = None) -> None:
        """Write whole chunks by chunk-grid index."""
        await self.set_orthogonal_selection(
            self._block_to_slices(selection), value, fields=fields, _basic=True
        )

    # -- shape changes and attributes -----------------------------------------------
    async def resize(self, new_shape: Any, delete_outside_chunks: bool = True) -> None:
        """Change the shape. A shrink deletes the chunks wholly outside the new
        shape and sets the part of the chunks cut by the new end to the fill value
        before it saves the metadata (crash-consistent: see ``core/resize.py``), so
        a later grow shows the fill value there; ``delete_outside_chunks=False``
        (as in zarr-python) writes the metadata only."""
        self._check_writable()
        self._set_metadata(await resize_shape(self, new_shape, delete_outside_chunks))

    async def _stored_coords(self) -> set[tuple[int, ...]]:
        """Grid coordinates of the stored objects (chunks, or shards when sharded)."""
        return await stored_coords(self.store_path, self.metadata)

    async def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` and write ``data`` there; returns the new shape."""
        data = await _materialize(data)
        data = np.asanyarray(data) if not hasattr(data, "__cuda_array_interface__") else data
        if data.ndim != self.ndim:
            raise ValueError(f"appended data has {data.ndim} dimensions, the array has {self.ndim}")
        axis = axis + self.ndim if axis < 0 else axis
        for d in range(self.ndim):
            if d != axis and data.shape[d] != self.shape[d]:
                raise ValueError(
                    f"appended data has shape {data.shape}, incompatible with {self.shape} on axis {d}"
                )
        old = self.shape[axis]
        new_shape = tuple(
            s + (data.shape[axis] if d == axis else 0) for d, s in enumerate(self.shape)
        )
        await self.resize(new_shape)
        sel = tuple(slice(old, None) if d == axis else slice(None) for d in range(self.ndim))
        await self.setitem(sel, data)
        return new_shape

    async def update_attributes(self, new_attributes: dict[str, Any]) -> AsyncArray:
        """Merge ``new_attributes`` into the attributes (as zarr-python: keys not
        in it are kept) and save the metadata."""
        return await self._replace_attributes({**self.metadata.attributes, **new_attributes})

    async def _replace_attributes(self, attrs: dict[str, Any]) -> AsyncArray:
        self._check_writable()
        json.dumps(attrs, allow_nan=False)  # fail before writing anything
        new_meta = self.metadata.evolve(attributes=dict(attrs))
        await save_metadata(await on_blocking_io(self.store_path), new_meta)
        self._set_metadata(new_meta)
        return self

    async def nshards_initialized(self) -> int:
        """How many shards (chunks when not sharded) are stored."""
        return len(await self._stored_coords())

    async def nchunks_initialized(self) -> int:
        """How many chunks are stored (chunks equal to the fill value may be absent).

        When sharded, as in zarr-python, every stored shard counts all the inner
        chunks of its full (declared) shape.
        """
        coords = await self._stored_coords()
        if not self._inner_chunks:
            return len(coords)
        grid = self.metadata.chunk_grid
        inner = self._inner_chunks
        return sum(
            math.prod(s // c for s, c in zip(grid.stored_chunk_shape(k), inner, strict=True))
            for k in coords
        )

    async def nbytes_stored(self) -> int:
        """Bytes stored under the array's path: metadata and chunks, as in zarr-python."""
        prefix = self.store_path.path + "/" if self.store_path.path else ""
        # sizes asked of the store (a stat, a HEAD), not the values read
        return await self.store_path.store.getsize_prefix(prefix)


class _AsyncIndexer:
    """``AsyncArray.oindex`` / ``.vindex``: ``await ix.getitem(sel)``,
    ``await ix.setitem(sel, value)``."""

    def __init__(self, array: AsyncArray, get: str, set_: str) -> None:
        self.array = array
        self._get = get
        self._set = set_

    async def getitem(self, selection: Any) -> Any:
        fields, selection = _pop_fields(selection)
        return await getattr(self.array, self._get)(selection, fields=fields)

    async def setitem(self, selection: Any, value: Any) -> None:
        fields, selection = _pop_fields(selection)
        await getattr(self.array, self._set)(selection, value, fields=fields)
