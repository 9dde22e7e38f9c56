"""Arrays: ``AsyncArray`` (the async core) and ``Array`` (its sync twin)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.buffer import (
    cpu_prototype,
    default_prototype,
    device_dtype,
    host_selection,
    is_device_array,
    prototype_for,
    shares_memory,
)
from cuzarr.codecs.lazy_numcodecs import numcodecs
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.config import flag
from cuzarr.core import engine
from cuzarr.core.attributes import Attributes
from cuzarr.core.blocking import on_blocking_io, run_blocking
from cuzarr.core.inline import Converted, get_selection_inline, getitem_inline, setitem_inline
from cuzarr.core.nodes import (
    load_node_metadata,
    publish_metadata,
    same_metadata,
    save_metadata,
    write_new_node,
)
from cuzarr.core.resize import resize as resize_shape
from cuzarr.core.resize import stored_coords
from cuzarr.core.shards import read_sharded, sharding_codec
from cuzarr.errors import ContainsGroupError, GroupFoundError, ReadOnlyError
from cuzarr.indexing.selection import (
    BasicPlan,
    _as_int,
    _slice_indices,
    normalize_coordinate,
    normalize_numpy,
    normalize_orthogonal,
)
from cuzarr.indexing.selection import has_fields as _has_fields
from cuzarr.indexing.selection import pop_fields as _pop_fields
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.chunk_grid import RegularChunkGrid, chunk_sizes
from cuzarr.metadata.group import GroupMetadata
from cuzarr.runtime.sync import sync
from cuzarr.storage.common import StorePath, make_store_path

__all__ = ["Array", "AsyncArray"]


# A host buffer standing for a read's output in engine.small_read's checks
# before the output is made (the read checks again with the real one).
_HOST_PROBE = np.empty(0)


def _refuse_read_only_out(out: Any) -> None:
    """Refuse a read-only ``out`` before any I/O: decoders write into it through
    raw pointers. (CuPy arrays have no ``writeable`` flag: they always are.)"""
    if not getattr(getattr(out, "flags", None), "writeable", True):
        raise ValueError("out is read-only")


def _chunk_labels(p: Any) -> np.ndarray:
    """For each position along one dimension of a plan's output, the index (in
    ``p.chunks``) of the chunk it falls in."""
    lab = np.empty(p.out_len, dtype=np.intp)
    for k, o in enumerate(p.out_sels):
        lab[o] = k
    return lab


def _any_per_chunk(mask: np.ndarray, labels: list[np.ndarray]) -> np.ndarray:
    """Whether any element of ``mask`` (shaped like a plan's output) is set in each
    chunk of the plan: a bool array shaped like the plan's chunk grid, in the order
    of ``chunk_items``. Vectorized: one ``logical_or.reduceat`` per dimension, the
    last (contiguous) one first. (Summing into ``intp`` along the first axis first
    took seconds for a 20000 x 20000 mask; this takes tens of milliseconds.)"""
    x: np.ndarray = mask
    for d in reversed(range(len(labels))):
        lab = labels[d]
        if lab.size > 1 and np.any(lab[1:] < lab[:-1]):
            order = np.argsort(lab, kind="stable")
            x = np.take(x, order, axis=d)
            lab = lab[order]
        starts = np.flatnonzero(np.concatenate(([True], lab[1:] != lab[:-1])))
        x = np.logical_or.reduceat(x, starts, axis=d)
    return x


def _drop_leading_ones(arr: Any, ndim: int, scalar: bool = False) -> Any:
    """numpy's setitem accepts a value with extra leading length-1 axes
    (``x[::2] = [[1, 2]]``, ``x[1, 2, ...] = [[5]]``): drop them before
    broadcasting. ``scalar``: the selection is one element by integers alone
    (``x[1, 2]``), where numpy refuses any value with dimensions."""
    extra = arr.ndim - ndim
    if (ndim or not scalar) and extra > 0 and all(n == 1 for n in arr.shape[:extra]):
        return arr.reshape(arr.shape[extra:])
    return arr


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


class AsyncArray:
    """An array in a store; every operation is a coroutine.

    Create one with :func:`cuzarr.api.asynchronous.create_array` or open one with
    :func:`cuzarr.api.asynchronous.open_array`.
    """

    def __repr__(self) -> str:
        return f"<AsyncArray {self.store_path} shape={self.shape} dtype={self.dtype}>"

    def __eq__(self, other: object) -> bool:
        # zarr-python's value equality: the same node of the same store, with the
        # same metadata (two handles opened separately are equal)
        if not isinstance(other, AsyncArray):
            return NotImplemented
        return self.store_path == other.store_path and same_metadata(self.metadata, other.metadata)

    def __hash__(self) -> int:
        return hash(("array", self.store_path.path))

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
        self._pipeline = metadata.make_pipeline()
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
        store_path = store if isinstance(store, StorePath) else make_store_path(store)
        meta = await load_node_metadata(store_path, zarr_format, want="array")
        if isinstance(meta, GroupMetadata):
            raise GroupFoundError(
                f"a group, not an array, exists at {store_path.store!r}, path {store_path.path!r}"
            )
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

    # -- properties --------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        return len(self.metadata.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.metadata.dtype.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def chunks(self) -> Any:
        """The chunk shape (for sharded arrays, the inner chunk shape).

        For a rectilinear grid (variable chunk sizes), per-dimension tuples of
        chunk extents inside the array, as dask writes them.
        """
        if self._inner_chunks:
            return self._inner_chunks
        if not isinstance(self.metadata.chunk_grid, RegularChunkGrid):
            return self.write_chunk_sizes
        return self.metadata.chunk_shape

    @property
    def shards(self) -> Any:
        """The shard shape, or ``None`` for an array without sharding (per-dimension
        tuples of shard extents for a rectilinear grid of shards)."""
        if self._inner_chunks is None:  # () is the inner chunk shape of a 0-d array
            return None
        if not isinstance(self.metadata.chunk_grid, RegularChunkGrid):
            return self.write_chunk_sizes
        return self.metadata.chunk_shape

    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per dimension, the extent inside the array of each chunk reads are cut
        into (inner chunks when sharded), as in zarr-python."""
        grid = (
            RegularChunkGrid(self._inner_chunks) if self._inner_chunks else self.metadata.chunk_grid
        )
        return chunk_sizes(grid.dims(self.shape))

    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per dimension, the extent inside the array of each stored chunk (shard)."""
        return chunk_sizes(self._write_dims())

    @property
    def dask_chunks(self) -> tuple[tuple[int, ...], ...]:
        """Dask-style chunks for any array: ``read_chunk_sizes``."""
        return self.read_chunk_sizes

    @property
    def fill_value(self) -> Any:
        return self.metadata.fill_value

    @property
    def order(self) -> str:
        return self.metadata.order

    @property
    def zarr_format(self) -> int:
        return self.metadata.zarr_format

    @property
    def store(self) -> Any:
        return self.store_path.store

    @property
    def path(self) -> str:
        return self.store_path.path

    @property
    def name(self) -> str:
        return "/" + self.store_path.path

    @property
    def basename(self) -> str:
        return self.store_path.path.rsplit("/", 1)[-1]

    @property
    def read_only(self) -> bool:
        return self.store_path.store.read_only

    @property
    def lazy(self) -> Any:
        """Lazy views: ``a.lazy[...]`` is a ``cuzarr.LazyArray`` and does no I/O."""
        from cuzarr.core.lazy import LazyArray

        return LazyArray(self)

    @property
    def nchunks(self) -> int:
        """Number of chunks (inner chunks when sharded, as in zarr-python)."""
        return math.prod(self.cdata_shape)

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Chunks per dimension (inner chunks when sharded, as in zarr-python)."""
        if self._inner_chunks:
            return RegularChunkGrid(self._inner_chunks).grid_shape(self.shape)
        return self.metadata.chunk_grid.grid_shape(self.shape)

    def _inner_codecs(self) -> tuple[Any, ...]:
        codecs = self.metadata.codecs
        if len(codecs) == 1 and isinstance(codecs[0], ShardingCodec):
            return codecs[0].codecs
        return codecs

    @property
    def filters(self) -> tuple[Any, ...]:
        """Array->array codecs (numcodecs filters for v2; inside the shards when sharded)."""
        if self.metadata.zarr_format == 2:
            return tuple(self.metadata.filters or ())
        from cuzarr.codecs.base import ArrayArrayCodec

        return tuple(c for c in self._inner_codecs() if isinstance(c, ArrayArrayCodec))

    @property
    def serializer(self) -> Any:
        """The array->bytes codec (None for v2; inside the shards when sharded)."""
        if self.metadata.zarr_format == 2:
            return None
        from cuzarr.codecs.base import ArrayBytesCodec

        return next(c for c in self._inner_codecs() if isinstance(c, ArrayBytesCodec))

    @property
    def compressors(self) -> tuple[Any, ...]:
        """Bytes->bytes codecs (the v2 compressor, if any; inside the shards when sharded)."""
        if self.metadata.zarr_format == 2:
            c = self.metadata.compressor
            return () if c is None else (c,)
        from cuzarr.codecs.base import BytesBytesCodec

        return tuple(c for c in self._inner_codecs() if isinstance(c, BytesBytesCodec))

    @property
    def compressor(self) -> Any:
        """The v2 compressor (v3 arrays have ``compressors``)."""
        if self.metadata.zarr_format != 2:
            raise TypeError(
                "`compressor` is not available for Zarr format 3 arrays; use `compressors`"
            )
        return self.metadata.compressor

    @property
    def nshards(self) -> int:
        """Number of stored objects in the grid: shards, or chunks when not sharded."""
        return self.metadata.chunk_grid.nchunks(self.shape)

    @property
    def write_empty_chunks(self) -> bool:
        if self._write_empty_chunks is not None:
            return self._write_empty_chunks
        return flag("array.write_empty_chunks")

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
            items = engine.coordinate_items(self._read_grid.dims(self.shape), coords)
            await self._read_items(items, buf)
        if out is not None:
            if not flat:
                out[...] = buf.reshape(out.shape)
            return out
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
        names = self.dtype.names
        if not names:
            raise IndexError(
                f"invalid 'fields' argument: the array's data type {self.dtype} has no fields"
            )
        if isinstance(fields, str):
            wanted = [fields]
        elif isinstance(fields, (list, tuple)):
            wanted = list(fields)
        else:
            raise IndexError(f"invalid 'fields' argument {fields!r}: a name or a list of names")
        bad = [f for f in wanted if not isinstance(f, str) or f not in names]
        if bad or len(set(wanted)) != len(wanted):
            raise IndexError(
                f"invalid 'fields' argument {fields!r}: the fields are {names}, each at most once"
            )
        return fields if isinstance(fields, str) else wanted

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

    def _records(self, value: Any, shape: tuple[int, ...], fields: str | list[str]) -> np.ndarray:
        """``value`` written into the ``fields`` of records of the array's dtype
        shaped ``shape`` (numpy's broadcasting and casting); the other fields are
        zero and never stored (the write merges only ``fields``)."""
        if is_device_array(value):  # structured records live on the host
            value = value.get()
        records = np.zeros(shape, dtype=self.dtype)
        try:
            records[fields] = value
        except ValueError as e:
            raise ValueError(
                f"cannot write {np.shape(value)} values into field(s) {fields!r} of the "
                f"selection's shape {shape}: {e}"
            ) from e
        return records

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

    @property
    def nbytes(self) -> int:
        """Size of the uncompressed data (item size x number of elements)."""
        return self.size * self.dtype.itemsize

    @property
    def info(self) -> ArrayInfo:
        """What is known without store requests (see :meth:`info_complete`)."""
        m = self.metadata
        if m.zarr_format == 3:
            codecs = json.dumps([c.to_json() for c in m.codecs])
        else:
            codecs = json.dumps(
                {
                    "filters": [f.get_config() for f in m.filters] if m.filters else None,
                    "compressor": m.compressor.get_config() if m.compressor is not None else None,
                }
            )
        # A rectilinear grid shows as "<variable>", as in zarr-python: its edges
        # listed one by one could be 2**24 per dimension.
        variable = not isinstance(m.chunk_grid, RegularChunkGrid)
        chunks = "<variable>" if variable and not self._inner_chunks else self.chunks
        shards = "<variable>" if variable and self._inner_chunks is not None else self.shards
        return ArrayInfo(
            "Array",
            m.zarr_format,
            str(self.dtype),
            self.shape,
            chunks,
            self.order,
            self.read_only,
            type(self.store).__name__,
            codecs,
            self.nbytes,
            self.nchunks,
            fill_value=self.fill_value,
            shard_shape=shards,
            nshards=self.nshards,
        )

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
        if not isinstance(selection, tuple):
            selection = (selection,)
        ellipses = [k for k, s in enumerate(selection) if s is Ellipsis]
        if len(ellipses) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if ellipses:
            i = ellipses[0]
            selection = (
                selection[:i]
                + (slice(None),) * (self.ndim - len(selection) + 1)
                + selection[i + 1 :]
            )
        if len(selection) > self.ndim:
            raise IndexError(f"too many block indices for {self.ndim}-dimensional array")
        selection = selection + (slice(None),) * (self.ndim - len(selection))
        out = []
        # Blocks are chunks (inner chunks when sharded, whatever the grid of shards).
        dims = (
            RegularChunkGrid(self._inner_chunks).dims(self.shape)
            if self._inner_chunks
            else self._dims()
        )
        for d, (s, dim) in enumerate(zip(selection, dims, strict=True)):
            n = dim.nchunks
            i = _as_int(s)
            if i is not None:
                if i < -n or i >= n:
                    raise IndexError(
                        f"block index {i} is out of bounds for dimension {d} with {n} blocks"
                    )
                i = i + n if i < 0 else i
                out.append(slice(dim.offset(i), dim.offset(i) + dim.data_len(i)))
            elif isinstance(s, slice):
                start, stop, _ = _slice_indices(s, n, d)
                if s.step not in (None, 1):  # checked as given: one-block slices drop steps
                    raise IndexError(f"dimension {d}: block slices must have step 1")
                if stop <= start:
                    out.append(slice(0, 0))
                else:
                    out.append(
                        slice(dim.offset(start), dim.offset(stop - 1) + dim.data_len(stop - 1))
                    )
            else:
                raise IndexError(f"dimension {d}: block selections take ints and slices, got {s!r}")
        return tuple(out)

    # -- writing -----------------------------------------------------------------
    def _as_value(
        self,
        value: Any,
        shape: tuple[int, ...],
        keep_device: bool = False,
        basic: bool = False,
        scalar: bool = False,
    ) -> Any:
        """``value`` as an array of the stored dtype broadcast to ``shape``.
        ``basic``: the selection is basic (ints and slices), where numpy packs
        a scalar value by its Python value rather than casting it. ``scalar``:
        it is one element by integers alone (see ``_drop_leading_ones``)."""
        if is_device_array(value):
            dt = device_dtype(self.dtype)
            if keep_device and dt is not None:
                # Chunks are built and compressed on the device (gpu/writer.py).
                xp = prototype_for(value).xp
                try:
                    return xp.broadcast_to(
                        _drop_leading_ones(xp.asarray(value, dtype=dt), len(shape), scalar),
                        shape,
                    )
                except ValueError as e:
                    raise ValueError(
                        f"could not broadcast value of shape {value.shape} to the "
                        f"selection's shape {shape}"
                    ) from e
            get = getattr(value, "get", None)
            value = get() if callable(get) else np.asarray(value)
        dt = self.metadata.dtype
        if dt.kind == "bytes":
            arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
            if arr.dtype != object:
                arr = arr.astype(object)
        elif dt.kind == "string":
            # Python str straight to the stored dtype: via numpy's fixed-width
            # unicode, trailing NULs ("a\x00") would be dropped.
            arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=dt.dtype)
            if arr.dtype != dt.dtype:
                arr = arr.astype(dt.dtype)
        else:
            try:
                if basic and isinstance(value, np.generic) and value.dtype != dt.dtype:
                    # numpy's rule for a scalar into a basic selection
                    # (``x[1:3] = np.float64("nan")``):
                    # packed as a Python value, so NaN into ints, out-of-range
                    # ints and datetimes into ints raise instead of casting to
                    # garbage as ``np.asarray(value, dtype)`` would.
                    arr = np.empty((), dtype=dt.dtype)
                    arr[()] = value
                else:
                    arr = (
                        np.asarray(value, dtype=dt.dtype)
                        if not (isinstance(value, np.ndarray) and value.dtype == dt.dtype)
                        else value
                    )
            except (TypeError, ValueError) as e:
                # Keep numpy's class (ValueError for "abc" into floats, NaN into ints).
                cls = ValueError if isinstance(e, ValueError) else TypeError
                raise cls(
                    f"cannot write {type(value).__name__} into an array of {dt.dtype}: {e}"
                ) from e
        arr = _drop_leading_ones(arr, len(shape), scalar)
        try:
            return np.broadcast_to(arr, shape)
        except ValueError as e:
            raise ValueError(
                f"could not broadcast value of shape {arr.shape} to the selection's shape {shape}"
            ) from e

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
            labels = [_chunk_labels(p) for p in plan.projections]
            touched = _any_per_chunk(selected, labels)
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


@dataclass
class ArrayInfo:
    """Summary of an array (``Array.info``)."""

    type: str
    zarr_format: int
    data_type: str
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    order: str
    read_only: bool
    store_type: str
    codecs: str
    count_bytes: int
    nchunks: int
    fill_value: Any = None
    shard_shape: Any = None
    nshards: int | None = None
    # Filled in by ``Array.info_complete()`` only (they need store requests).
    count_bytes_stored: int | None = None
    count_chunks_initialized: int | None = None
    count_shards_initialized: int | None = None

    def __repr__(self) -> str:
        rows: list[tuple[str, Any]] = [
            ("Type", self.type),
            ("Zarr format", self.zarr_format),
            ("Data type", self.data_type),
            ("Fill value", self.fill_value),
            ("Shape", self.shape),
        ]
        if self.shard_shape is not None:
            rows.append(("Shard shape", self.shard_shape))
        rows += [
            ("Chunk shape", self.chunk_shape),
            ("Order", self.order),
            ("Read-only", self.read_only),
            ("Store type", self.store_type),
            ("Codecs", self.codecs),
            ("No. bytes", f"{self.count_bytes} ({_human(self.count_bytes)})"),
            ("No. chunks", self.nchunks),
        ]
        if self.shard_shape is not None:
            rows.append(("No. shards", self.nshards))
        if self.count_bytes_stored is not None:
            stored = self.count_bytes_stored
            rows.append(("No. bytes stored", f"{stored} ({_human(stored)})"))
            if stored:
                rows.append(("Storage ratio", f"{self.count_bytes / stored:.2f}"))
        if self.count_chunks_initialized is not None:
            rows.append(("Chunks initialized", self.count_chunks_initialized))
        if self.count_shards_initialized is not None and self.shard_shape is not None:
            rows.append(("Shards initialized", self.count_shards_initialized))
        return "\n".join(f"{k:<19}: {v}" for k, v in rows)

    __str__ = __repr__


def as_requested(arr: np.ndarray, dtype: Any, copy: Any) -> np.ndarray:
    """A freshly read host array as ``__array__(dtype, copy)`` asks for it."""
    if dtype is None or arr.dtype == dtype:
        return arr  # freshly read: never shared, so copy=False holds too
    if copy is False:  # numpy 2: a cast is a copy
        raise ValueError(
            f"Unable to avoid copy while creating an array as requested "
            f"(casting {arr.dtype} to {np.dtype(dtype)})"
        )
    return arr.astype(dtype)


def device_index(block: Any, index: Any) -> Any:
    """``index`` (a tuple of host index arrays and slices) ready to index ``block``:
    the arrays moved to the device when ``block`` lives there."""
    if not is_device_array(block) or not isinstance(index, tuple):
        return index
    xp = prototype_for(block).xp
    return tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1024
    return str(n)  # pragma: no cover


def _reopen(store: Any, path: str, zarr_format: int) -> Array:
    from cuzarr.api.synchronous import open_array

    return open_array(
        store, mode="r" if store.read_only else "r+", path=path, zarr_format=zarr_format
    )


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


class _Indexer:
    def __init__(self, array: Array, get: str, set_: str) -> None:
        self._array = array
        self._get = get
        self._set = set_

    def __getitem__(self, selection: Any) -> Any:
        fields, selection = _pop_fields(selection)  # field names, as zarr-python
        return getattr(self._array, self._get)(selection, fields=fields)

    def __setitem__(self, selection: Any, value: Any) -> None:
        fields, selection = _pop_fields(selection)
        getattr(self._array, self._set)(selection, value, fields=fields)


class Array:
    """A Zarr array with a synchronous, numpy-like interface.

    ``a[...]`` reads and ``a[...] = v`` writes with numpy semantics;
    ``a.oindex``, ``a.vindex`` and ``a.blocks`` give orthogonal, coordinate and
    chunk-block indexing. Every call runs on cuzarr's background event loop.
    """

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    @property
    def async_array(self) -> AsyncArray:
        return self._async_array

    def __repr__(self) -> str:
        a = self._async_array
        return f"<Array {a.store_path} shape={a.shape} dtype={a.dtype}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Array):
            return NotImplemented
        return self._async_array == other._async_array

    def __hash__(self) -> int:
        return hash(self._async_array)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle by reference (store + path), never the data: dask workers and
        # DataLoader processes reopen the array from its store.
        return (_reopen, (self.store, self.path, self.zarr_format))

    # properties mirror AsyncArray
    shape = property(lambda self: self._async_array.shape)
    ndim = property(lambda self: self._async_array.ndim)
    dtype = property(lambda self: self._async_array.dtype)
    size = property(lambda self: self._async_array.size)
    chunks = property(lambda self: self._async_array.chunks)
    shards = property(lambda self: self._async_array.shards)
    read_chunk_sizes = property(lambda self: self._async_array.read_chunk_sizes)
    write_chunk_sizes = property(lambda self: self._async_array.write_chunk_sizes)
    dask_chunks = property(lambda self: self._async_array.dask_chunks)
    fill_value = property(lambda self: self._async_array.fill_value)
    order = property(lambda self: self._async_array.order)
    zarr_format = property(lambda self: self._async_array.zarr_format)
    metadata = property(lambda self: self._async_array.metadata)
    store = property(lambda self: self._async_array.store)
    store_path = property(lambda self: self._async_array.store_path)
    path = property(lambda self: self._async_array.path)
    name = property(lambda self: self._async_array.name)
    basename = property(lambda self: self._async_array.basename)
    read_only = property(lambda self: self._async_array.read_only)
    nchunks = property(lambda self: self._async_array.nchunks)
    nshards = property(lambda self: self._async_array.nshards)
    filters = property(lambda self: self._async_array.filters)
    serializer = property(lambda self: self._async_array.serializer)
    compressors = property(lambda self: self._async_array.compressors)
    compressor = property(lambda self: self._async_array.compressor)
    cdata_shape = property(lambda self: self._async_array.cdata_shape)

    @property
    def nbytes(self) -> int:
        """Size of the uncompressed data (item size x number of elements)."""
        return self.size * self.dtype.itemsize

    @property
    def nchunks_initialized(self) -> int:
        return sync(self._async_array.nchunks_initialized())

    @property
    def attrs(self) -> Attributes:
        return Attributes(
            lambda: self._async_array.metadata.attributes,
            lambda attrs: run_blocking(lambda: self._async_array._replace_attributes(attrs)),
        )

    def update_attributes(self, new_attributes: dict[str, Any]) -> Array:
        """Merge ``new_attributes`` into the attributes (keys not in it are kept)."""
        run_blocking(lambda: self._async_array.update_attributes(new_attributes))
        return self

    @classmethod
    def from_dict(cls, store_path: StorePath, data: dict[str, Any]) -> Array:
        """The array at ``store_path`` described by the metadata document ``data``
        (nothing is read or written), as zarr-python's ``Array.from_dict``."""
        return cls(AsyncArray.from_dict(store_path, data))

    @classmethod
    def open(cls, store: Any, *, config: Any = None) -> Array:
        """Open the array at the root of ``store`` (zarr-python's ``Array.open``).

        Parameters
        ----------
        store : str, pathlib.Path, dict, Store or StorePath
            Where the array is.
        config : dict or ArrayConfig, optional
            Runtime settings ``{"order", "write_empty_chunks", "read_missing_chunks"}``.

        Returns
        -------
        Array
        """
        from cuzarr.api.synchronous import open_array

        arr = open_array(store, mode="r+" if not getattr(store, "read_only", False) else "r")
        return arr if config is None else arr.with_config(config)

    @property
    def config(self) -> Any:
        """The runtime configuration: an ``ArrayConfig`` (``order``,
        ``write_empty_chunks``, ``read_missing_chunks``); change it with
        :meth:`with_config`."""
        return self._async_array.config

    def with_config(self, config: Any) -> Array:
        """A copy of this array with another runtime configuration.

        Parameters
        ----------
        config : dict or ArrayConfig
            ``{"order": "C" | "F", "write_empty_chunks": bool, "read_missing_chunks":
            bool}``; missing keys keep this array's values.

        Returns
        -------
        Array
        """
        return type(self)(self._async_array.with_config(config))

    @property
    def info(self) -> ArrayInfo:
        """What is known without store requests (see :meth:`info_complete`)."""
        return self._async_array.info

    def info_complete(self) -> ArrayInfo:
        """``info`` plus what needs store requests: bytes stored (metadata
        included, as in zarr-python), storage ratio, chunks and shards initialized."""
        return sync(self._async_array.info_complete())

    @property
    def nshards_initialized(self) -> int:
        """How many shards (chunks when not sharded) are stored.

        Returns
        -------
        int
        """
        return sync(self._async_array.nshards_initialized())

    def nbytes_stored(self) -> int:
        """Bytes stored under the array's path (metadata and chunks)."""
        return sync(self._async_array.nbytes_stored())

    # -- indexing ------------------------------------------------------------------
    def __getitem__(self, selection: Any) -> Any:
        result = getitem_inline(self._async_array, selection)
        if result is NotImplemented:
            result = sync(self._async_array.getitem(selection))
        return result

    def __setitem__(self, selection: Any, value: Any) -> None:
        done = setitem_inline(self._async_array, selection, value)
        if done is NotImplemented:
            sync(self._async_array.setitem(selection, value))
        elif isinstance(done, Converted):  # locks busy: the slow way, converted once
            sync(self._async_array.setitem(selection, done.value))

    def get_basic_selection(
        self,
        selection: Any = Ellipsis,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        if out is None and not _has_fields(fields):
            result = getitem_inline(self._async_array, selection, prototype)
            if result is not NotImplemented:
                return result
        return sync(
            self._async_array.get_basic_selection(
                selection, out=out, prototype=prototype, fields=fields
            )
        )

    def set_basic_selection(
        self, selection: Any, value: Any, *, fields: Any = None, prototype: Any = None
    ) -> None:
        sync(self._async_array.set_basic_selection(selection, value, fields=fields))

    def get_orthogonal_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        if out is None and prototype is None and not _has_fields(fields):
            result = get_selection_inline(self._async_array, "orthogonal", selection)
            if result is not NotImplemented:
                return result
        return sync(
            self._async_array.get_orthogonal_selection(
                selection, out=out, prototype=prototype, fields=fields
            )
        )

    def set_orthogonal_selection(
        self, selection: Any, value: Any, *, fields: Any = None, prototype: Any = None
    ) -> None:
        sync(self._async_array.set_orthogonal_selection(selection, value, fields=fields))

    def get_coordinate_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        if out is None and prototype is None and not _has_fields(fields):
            result = get_selection_inline(self._async_array, "coordinate", selection)
            if result is not NotImplemented:
                return result
        return sync(
            self._async_array.get_coordinate_selection(
                selection, out=out, prototype=prototype, fields=fields
            )
        )

    def set_coordinate_selection(
        self, selection: Any, value: Any, *, fields: Any = None, prototype: Any = None
    ) -> None:
        sync(self._async_array.set_coordinate_selection(selection, value, fields=fields))

    def get_mask_selection(
        self, mask: Any, *, out: np.ndarray | None = None, prototype: Any = None, fields: Any = None
    ) -> Any:
        return sync(
            self._async_array.get_mask_selection(mask, out=out, prototype=prototype, fields=fields)
        )

    def set_mask_selection(
        self, mask: Any, value: Any, *, fields: Any = None, prototype: Any = None
    ) -> None:
        sync(self._async_array.set_mask_selection(mask, value, fields=fields))

    def get_block_selection(
        self,
        selection: Any,
        *,
        out: np.ndarray | None = None,
        prototype: Any = None,
        fields: Any = None,
    ) -> Any:
        return sync(
            self._async_array.get_block_selection(
                selection, out=out, prototype=prototype, fields=fields
            )
        )

    def set_block_selection(
        self, selection: Any, value: Any, *, fields: Any = None, prototype: Any = None
    ) -> None:
        sync(self._async_array.set_block_selection(selection, value, fields=fields))

    @property
    def oindex(self) -> _Indexer:
        """Orthogonal indexing: each dimension selected independently."""
        return _Indexer(self, "get_orthogonal_selection", "set_orthogonal_selection")

    @property
    def vindex(self) -> _Indexer:
        """Coordinate (point) indexing with integer arrays or a boolean mask."""
        return _Indexer(self, "get_coordinate_selection", "set_coordinate_selection")

    @property
    def blocks(self) -> _Indexer:
        """Chunk-block indexing: ``a.blocks[i, j]`` is chunk (i, j)'s data."""
        return _Indexer(self, "get_block_selection", "set_block_selection")

    @property
    def lazy(self) -> Any:
        """Lazy views: ``a.lazy[...]`` is a ``cuzarr.LazyArray`` and does no I/O."""
        from cuzarr.core.lazy import LazyArray

        return LazyArray(self)

    # -- other numpy-isms -----------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = cpu_prototype.to_host(self.get_basic_selection(..., prototype="cpu"))
        return as_requested(arr, dtype, copy)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        dim = self._async_array._dims()[0]
        for i in range(dim.nchunks):
            start = dim.offset(i)
            block = self[start : start + dim.data_len(i)]
            yield from block

    def resize(self, *shape: Any, new_shape: Any = None) -> None:
        """Change the shape (``a.resize(10, 20)``, ``a.resize((10, 20))`` or, as in
        zarr-python, ``a.resize(new_shape=(10, 20))``)."""
        if new_shape is not None:
            if shape:
                raise TypeError("resize() takes the shape positionally or as new_shape, not both")
            shape = (new_shape,)
        new = shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape
        sync(self._async_array.resize(new))

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` and write ``data`` at the end."""
        return sync(self._async_array.append(data, axis))
