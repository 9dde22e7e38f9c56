"""The sync API: thin wrappers that run ``cuzarr.api.asynchronous`` on the loop thread."""

from __future__ import annotations

from typing import Any

from cuzarr.api import asynchronous as _async
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.group import Group
from cuzarr.core.sync import sync

__all__ = [
    "array",
    "consolidate_metadata",
    "create_array",
    "create_group",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "zeros",
    "zeros_like",
]


def create_array(
    store: Any = None,
    name: str | None = None,
    *,
    shape: Any,
    dtype: Any = "float64",
    chunks: Any = "auto",
    shards: Any = None,
    fill_value: Any = None,
    order: str | None = None,
    zarr_format: int | None = 3,
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    attributes: dict[str, Any] | None = None,
    dimension_names: Any = None,
    overwrite: bool = False,
    write_empty_chunks: bool | None = None,
    chunk_key_encoding: Any = None,
    dimension_separator: str | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
) -> Array:
    """Create a new array.

    Parameters
    ----------
    store : str, pathlib.Path, dict, Store or None
        A local directory path, a URL (``s3://``, ``https://``, ``memory://``),
        a ``*.zip`` or ``*.n5`` path, a ``dict``, a ``cuzarr.storage`` store, or
        ``None`` for a new in-memory store.
    name : str, optional
        Path of the array inside the store ('' for the root).
    shape : int or tuple of int
        Shape of the array.
    dtype : numpy dtype, str, type or v3 JSON
        Element type: numpy dtypes, ``str`` for variable-length UTF-8, ``bytes``
        for variable-length bytes, ml_dtypes types (bfloat16, float8), v3 names.
    chunks : int, tuple of int or "auto"
        Chunk shape (the inner chunk shape when ``shards`` is given); "auto"
        aims at about 1 MiB.
    shards : tuple of int, optional
        Shard shape (v3): a multiple of ``chunks``.
    fill_value : scalar, optional
        Value of unwritten elements (default: zero or empty).
    order : {"C", "F"}, optional
        Memory order of chunks (stored order for v2).
    zarr_format : {2, 3}
        Format version (default 3).
    compressors, filters, serializer
        numcodecs codecs, v3 codec dicts or cuzarr codecs. ``"auto"``
        compressors give zstd level 0, as zarr-python does; ``None`` none.
    attributes : dict, optional
        User attributes (JSON-serializable).
    dimension_names : sequence of str or None, optional
        Names of the dimensions (v3; stored as ``_ARRAY_DIMENSIONS`` in v2).
    overwrite : bool
        Replace whatever node exists at the path.
    write_empty_chunks : bool, optional
        Store chunks equal to the fill value (default False: they are deleted).
    chunk_key_encoding : dict or str, optional
        e.g. ``{"name": "default", "separator": "."}``.
    dimension_separator : {".", "/"}, optional
        Chunk key separator (v2 style).
    storage_options : dict, optional
        Options for URL stores (fsspec).
    meta_array : array, optional
        A numpy or CuPy array choosing where outputs live.

    Returns
    -------
    Array
    """
    return Array(
        sync(
            _async.create_array(
                store,
                name,
                shape=shape,
                dtype=dtype,
                chunks=chunks,
                shards=shards,
                fill_value=fill_value,
                order=order,
                zarr_format=zarr_format,
                compressors=compressors,
                filters=filters,
                serializer=serializer,
                attributes=attributes,
                dimension_names=dimension_names,
                overwrite=overwrite,
                write_empty_chunks=write_empty_chunks,
                chunk_key_encoding=chunk_key_encoding,
                dimension_separator=dimension_separator,
                storage_options=storage_options,
                meta_array=meta_array,
            )
        )
    )


def open_array(
    store: Any = None,
    *,
    mode: str = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    **kwargs: Any,
) -> Array:
    """Open an existing array (``mode`` r, r+, a) or create one (w, w-).

    Raises
    ------
    cuzarr.errors.ArrayNotFoundError
        If no array exists at the path and the mode does not create one.
    """
    return Array(
        sync(
            _async.open_array(
                store,
                mode=mode,
                path=path,
                zarr_format=zarr_format,
                storage_options=storage_options,
                meta_array=meta_array,
                **kwargs,
            )
        )
    )


def create_group(
    store: Any = None,
    path: str | None = None,
    zarr_format: int | None = 3,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Create a new group (and any missing parent groups)."""
    return Group(
        sync(
            _async.create_group(
                store,
                path=path,
                zarr_format=zarr_format,
                attributes=attributes,
                overwrite=overwrite,
                storage_options=storage_options,
            )
        )
    )


def open_group(
    store: Any = None,
    mode: str = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
) -> Group:
    """Open a group; in mode ``a`` a missing group is created.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python)."""
    return Group(
        sync(
            _async.open_group(
                store,
                mode=mode,
                path=path,
                zarr_format=zarr_format,
                storage_options=storage_options,
                attributes=attributes,
                use_consolidated=use_consolidated,
            )
        )
    )


def open(
    store: Any = None,
    mode: str = "a",
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_format: int | None = None,
    **kwargs: Any,
) -> Array | Group:
    """Open the node at ``path``: an ``Array`` or a ``Group``, whichever is there."""
    node = sync(
        _async.open(
            store,
            mode=mode,
            path=path,
            zarr_format=zarr_format,
            storage_options=storage_options,
            **kwargs,
        )
    )
    return Array(node) if isinstance(node, AsyncArray) else Group(node)


def consolidate_metadata(
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Store the metadata of every node below a group in one place.

    v2 writes ``.zmetadata``; v3 writes it inline in the group's ``zarr.json``.
    Groups opened later use it automatically (one request for the hierarchy).
    ``storage_options`` go to the filesystem when ``store`` is a URL.
    """
    return Group(
        sync(_async.consolidate_metadata(store, path, zarr_format, storage_options=storage_options))
    )


def open_consolidated(
    store: Any,
    path: str | None = None,
    mode: str = "r",
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Open a group from its consolidated metadata; an error if it has none."""
    return Group(
        sync(
            _async.open_consolidated(
                store, path, mode=mode, zarr_format=zarr_format, storage_options=storage_options
            )
        )
    )


def array(data: Any, store: Any = None, **kwargs: Any) -> Array:
    """Create an array holding a copy of ``data``."""
    return Array(sync(_async.array(data, store, **kwargs)))


def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    """An array whose elements all read as ``fill_value`` (nothing is written)."""
    return create_array(
        store, kwargs.pop("name", None), shape=shape, fill_value=fill_value, **kwargs
    )


def zeros(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return full(shape, 0, store, **kwargs)


def ones(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return full(shape, 1, store, **kwargs)


def empty(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return create_array(store, kwargs.pop("name", None), shape=shape, **kwargs)


def _like(a: Any, kwargs: dict[str, Any], keep_fill: bool = False) -> dict[str, Any]:
    """Arguments for an array like ``a``: as in zarr-python, a cuzarr array passes
    on its zarr format, chunks and shards, and (to a new array of the same format)
    its order and codecs; ``keep_fill`` passes on its fill value too."""
    kwargs.setdefault("shape", a.shape)
    kwargs.setdefault("dtype", a.dtype)
    if isinstance(a, Array):
        kwargs.setdefault("chunks", a.chunks)
        if kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = a.zarr_format
        if keep_fill:
            kwargs.setdefault("fill_value", a.fill_value)
        if kwargs["zarr_format"] == a.zarr_format:
            if a.shards is not None:
                kwargs.setdefault("shards", a.shards)
            kwargs.setdefault("order", a.order)
            kwargs.setdefault("compressors", a.compressors or None)
            if kwargs["dtype"] is a.dtype:  # filters and serializer depend on the dtype
                kwargs.setdefault("filters", a.filters or None)
                if a.zarr_format == 3:
                    kwargs.setdefault("serializer", a.serializer)
    return kwargs


def full_like(a: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    kw = _like(a, kwargs)
    return full(kw.pop("shape"), fill_value, store, **kw)


def zeros_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    return full_like(a, 0, store, **kwargs)


def ones_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    return full_like(a, 1, store, **kwargs)


def empty_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    kw = _like(a, kwargs, keep_fill=True)
    return empty(kw.pop("shape"), store, **kw)
