"""What an array's metadata and handle say about it: shape, chunks, codecs, ..."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.config import flag
from cuzarr.core.array_info import ArrayInfo
from cuzarr.core.node_props import NodeProperties
from cuzarr.core.shaped import Shaped
from cuzarr.metadata.chunk_grid import RegularChunkGrid, chunk_sizes

__all__ = ["ArrayProperties"]


class ArrayProperties(NodeProperties, Shaped):
    """The read-only properties of :class:`~cuzarr.core.async_array.AsyncArray`
    (and, through it, ``Array``), computed from ``metadata``, ``store_path`` and
    the handle's settings (those a group has too: :class:`NodeProperties`)."""

    _node_type = "array"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.metadata.shape

    @property
    def dtype(self) -> np.dtype:
        return self.metadata.dtype.dtype

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

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        # dask names graphs over this array by reference (store, path, metadata):
        # data is read when the graph runs, so the same node gives the same name
        sp = self.store_path
        meta = json.dumps(self.metadata.to_dict(), sort_keys=True, default=repr)
        return ("cuzarr.Array", sp.store.__dask_tokenize__(), sp.path, meta)
