"""``Array``: the synchronous, numpy-like twin of ``AsyncArray``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from cuzarr.buffer import (
    cpu_prototype,
)
from cuzarr.core.array_info import ArrayInfo
from cuzarr.core.async_array import (
    AsyncArray,
)
from cuzarr.core.inline import Converted, get_selection_inline, getitem_inline, setitem_inline
from cuzarr.core.lazy import LazyArray
from cuzarr.core.open_inline import open_array_inline
from cuzarr.core.shaped import Shaped
from cuzarr.core.sync_node import SyncNode
from cuzarr.core.values import as_requested, device_index
from cuzarr.indexing.selection import has_fields as _has_fields
from cuzarr.indexing.selection import pop_fields as _pop_fields
from cuzarr.runtime.sync import sync
from cuzarr.storage.common import StorePath

__all__ = ["Array", "ArrayInfo", "AsyncArray", "as_requested", "device_index"]


def _open_existing(
    store: Any, mode: str, path: str | None = None, zarr_format: int | None = None
) -> Array:
    """The existing array at ``path`` of ``store`` (any store-like), opened with
    ``mode`` ``"r"`` or ``"r+"``: in this thread where the store's blocking I/O
    is cheap, else on the event loop (as ``cuzarr.open_array`` in those modes)."""
    arr, sp, _ = open_array_inline(store, mode, path, zarr_format, None, None, {})
    return Array(arr if arr is not None else sync(AsyncArray.open(sp, zarr_format)))


def _reopen(store: Any, path: str, zarr_format: int) -> Array:
    return _open_existing(store, "r" if store.read_only else "r+", path, zarr_format)


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


class Array(SyncNode, Shaped):
    """A Zarr array with a synchronous, numpy-like interface.

    ``a[...]`` reads and ``a[...] = v`` writes with numpy semantics;
    ``a.oindex``, ``a.vindex`` and ``a.blocks`` give orthogonal, coordinate and
    chunk-block indexing. Every call runs on cuzarr's background event loop.
    """

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return self._async_array.__dask_tokenize__()

    def __init__(self, async_array: AsyncArray) -> None:
        self._async_array = async_array

    _node = property(lambda self: self._async_array)  # for SyncNode

    @property
    def async_array(self) -> AsyncArray:
        return self._async_array

    def __repr__(self) -> str:
        a = self._async_array
        return f"<Array {a.store_path} shape={a.shape} dtype={a.dtype}>"

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
    def nchunks_initialized(self) -> int:
        return sync(self._async_array.nchunks_initialized())

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
        arr = _open_existing(store, "r+" if not getattr(store, "read_only", False) else "r")
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
        planned: list[Any] = []
        result = getitem_inline(self._async_array, selection, planned=planned)
        if result is NotImplemented:
            aa = self._async_array
            result = sync(aa.getitem_planned(planned[0]) if planned else aa.getitem(selection))
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
        planned: list[Any] = []
        if out is None and prototype is None and not _has_fields(fields):
            result = get_selection_inline(self._async_array, "orthogonal", selection, planned)
            if result is not NotImplemented:
                return result
        if planned:  # (the inline attempt's plan: not made twice)
            return sync(self._async_array.get_orthogonal_planned(planned[0]))
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
        planned: list[Any] = []
        if out is None and prototype is None and not _has_fields(fields):
            result = get_selection_inline(self._async_array, "coordinate", selection, planned)
            if result is not NotImplemented:
                return result
        if planned:  # (the inline attempt's points and items: not made twice)
            return sync(self._async_array.get_coordinate_planned(*planned[0]))
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
