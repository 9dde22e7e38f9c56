"""The sync API: thin wrappers that run ``cuzarr.api.asynchronous`` on the loop thread."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from cuzarr.api import asynchronous as _async
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.blocking import run_blocking
from cuzarr.core.build import DEFAULT_FILL
from cuzarr.core.create import name_of
from cuzarr.core.create_args import like_kwargs
from cuzarr.core.group import Group
from cuzarr.core.modes import FORMAT_DEFAULT, zarr_format_for
from cuzarr.core.open_inline import open_array_inline
from cuzarr.core.opening import open_group_inline
from cuzarr.runtime.sync import sync

__all__ = [
    "array",
    "consolidate_metadata",
    "create",
    "create_array",
    "create_group",
    "create_hierarchy",
    "empty",
    "empty_like",
    "from_array",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_like",
    "save",
    "save_array",
    "save_group",
    "tree",
    "zeros",
    "zeros_like",
]


def create_array(
    store: Any = None,
    name: str | None = None,
    *,
    shape: Any = None,
    dtype: Any = None,
    chunks: Any = "auto",
    shards: Any = None,
    fill_value: Any = DEFAULT_FILL,
    order: str | None = None,
    zarr_format: int | None = FORMAT_DEFAULT,
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
    data: Any = None,
    config: Any = None,
    write_data: bool = True,
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
        Shape of the array (taken from ``data`` when that is given).
    dtype : numpy dtype, str, type or v3 JSON
        Element type: numpy dtypes, ``str`` for variable-length UTF-8, ``bytes``
        for variable-length bytes, ml_dtypes types (bfloat16, float8), v3 names.
        Required unless ``data`` is given (``ValueError`` otherwise, as in
        zarr-python).
    chunks : int, tuple of int or "auto"
        Chunk shape (the inner chunk shape when ``shards`` is given); "auto"
        picks what zarr-python picks (h5py's rule: 128 KiB to 64 MiB, growing
        with the array; at most 1 MiB inside shards).
    shards : tuple of int or "auto", optional
        Shard shape (v3): a multiple of ``chunks``; "auto" as zarr-python: two
        chunks along each axis that holds more than eight.
    fill_value : scalar or None, optional
        Value of unwritten elements (default: zero or empty). ``None`` in
        Zarr v2 is stored as ``null`` (unwritten elements still read as zero
        or empty, as in zarr-python); in v3 it means the default.
    order : {"C", "F"}, optional
        Memory order of chunks (stored order for v2).
    zarr_format : {2, 3}
        Format version (default 3; 2 in an N5 container, the one format it holds).
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
    data : array-like, optional
        Data for the new array: it gives the shape and dtype (do not pass ``shape``),
        and is written unless ``write_data`` is False. A cuzarr or zarr-python array
        also gives its fill value, as in :func:`from_array`.
    config : dict or ArrayConfig, optional
        Runtime settings ``{"order": "C" | "F", "write_empty_chunks": bool,
        "read_missing_chunks": bool}``
        (zarr-python's ``ArrayConfig``); explicit ``order`` / ``write_empty_chunks``
        arguments win.
    write_data : bool
        With ``data``: write it (default) or only take its shape and dtype.

    Returns
    -------
    Array
    """
    def make() -> Any:
        return _async.create_array(
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
            data=data,
            config=config,
            write_data=write_data,
        )

    # without data, only metadata is written: in this thread where the store allows
    return Array(run_blocking(make) if data is None else sync(make()))


def open_array(
    store: Any = None,
    *,
    mode: str | None = "a",
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
    arr, sp, mode = open_array_inline(
        store, mode, path, zarr_format, storage_options, meta_array, kwargs
    )
    if arr is not None:
        return Array(arr)
    return Array(
        sync(
            _async.open_array(
                sp,
                mode=mode,
                zarr_format=zarr_format,
                meta_array=meta_array,
                **kwargs,
            )
        )
    )


def create_group(
    store: Any = None,
    path: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Create a new group (and any missing parent groups); ``zarr_format`` None
    means the config's ``default_zarr_format`` (3), as in zarr-python."""
    return Group(
        run_blocking(
            lambda: _async.create_group(
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
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
    *,
    meta_array: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    chunk_store: Any = None,
) -> Group:
    """Open a group; in mode ``a`` a missing group is created.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python). ``meta_array`` (a numpy or
    CuPy array): where the reads of the arrays got through the group land.
    zarr-python's legacy ``cache_attrs``, ``synchronizer`` and ``chunk_store`` are
    accepted with zarr-python's warning; they have no effect."""
    if cache_attrs is None and synchronizer is None and chunk_store is None:
        group, sp, mode = open_group_inline(
            store, mode, path, zarr_format, storage_options, use_consolidated, meta_array
        )
        if group is not None:
            return Group(group)
        store, path, storage_options = sp, None, None
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
                meta_array=meta_array,
                cache_attrs=cache_attrs,
                synchronizer=synchronizer,
                chunk_store=chunk_store,
            )
        )
    )


def open(
    store: Any = None,
    mode: str | None = "a",
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
    use_consolidated: bool | None = True,
    **kwargs: Any,
) -> Group:
    """Open a group from its consolidated metadata; an error if it has none
    (``use_consolidated`` is accepted for zarr-python's signature: it must not be
    ``False`` here). Other keyword arguments go to :func:`open_group`."""
    return Group(
        sync(
            _async.open_consolidated(
                store,
                path,
                mode=mode,
                zarr_format=zarr_format,
                storage_options=storage_options,
                use_consolidated=use_consolidated,
                **kwargs,
            )
        )
    )


def array(data: Any, store: Any = None, **kwargs: Any) -> Array:
    """Create an array holding a copy of ``data``."""
    return Array(sync(_async.array(data, store, **kwargs)))


def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    """An array whose elements all read as ``fill_value`` (nothing is written)."""
    kwargs["zarr_format"] = zarr_format_for(kwargs.get("zarr_format"), store)
    if kwargs.get("dtype") is None:
        kwargs["dtype"] = "float64"  # zarr-python's default for the legacy functions
    return create_array(
        store, name_of(kwargs), shape=shape, fill_value=fill_value, **kwargs
    )


def zeros(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return full(shape, 0, store, **kwargs)


def ones(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return full(shape, 1, store, **kwargs)


def empty(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    kwargs["zarr_format"] = zarr_format_for(kwargs.get("zarr_format"), store)
    if kwargs.get("dtype") is None:
        kwargs["dtype"] = "float64"
    return create_array(store, name_of(kwargs), shape=shape, **kwargs)


def _like(a: Any, kwargs: dict[str, Any], keep_fill: bool = False) -> dict[str, Any]:
    """Arguments for an array like ``a`` (see the async ``_like_kwargs``)."""
    return like_kwargs(a, kwargs, keep_fill)


def full_like(a: Any, fill_value: Any = None, store: Any = None, **kwargs: Any) -> Array:
    """An array like ``a`` reading as ``fill_value`` (default: ``a``'s fill value)."""
    kw = _like(a, kwargs)
    if fill_value is None:
        fill_value = getattr(a, "fill_value", None)
    return full(kw.pop("shape"), fill_value, store, **kw)


def zeros_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    return full_like(a, 0, store, **kwargs)


def ones_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    return full_like(a, 1, store, **kwargs)


def empty_like(a: Any, store: Any = None, **kwargs: Any) -> Array:
    kw = _like(a, kwargs, keep_fill=True)
    return empty(kw.pop("shape"), store, **kw)


# ----------------------------------------------------------------------------------
# zarr-python compatibility: group, create, from_array, save*, load, tree, open_like
# ----------------------------------------------------------------------------------


def group(
    store: Any = None,
    *,
    overwrite: bool = False,
    chunk_store: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    path: str | None = None,
    zarr_format: int | None = None,
    meta_array: Any = None,
    attributes: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Open a group, creating it when missing (zarr-python's ``zarr.group``).

    Parameters
    ----------
    store : str, pathlib.Path, dict, Store or None
        Where the group lives (``None``: a new in-memory store).
    overwrite : bool
        Replace whatever is stored at ``path`` with a new, empty group (mode ``w``);
        otherwise an existing group is opened as it is (mode ``a``).
    chunk_store, cache_attrs, synchronizer, meta_array
        Accepted for compatibility; a value other than None warns and has no effect.
    path : str, optional
        Path of the group inside the store.
    zarr_format : {2, 3}, optional
        Format of a new group (default 3); an existing group of either format opens.
    attributes : dict, optional
        Attributes of a new group (ignored when the group exists).
    storage_options : dict, optional
        Options for URL stores (fsspec).

    Returns
    -------
    Group
    """
    return Group(
        sync(
            _async.group(
                store,
                overwrite=overwrite,
                chunk_store=chunk_store,
                cache_attrs=cache_attrs,
                synchronizer=synchronizer,
                path=path,
                zarr_format=zarr_format,
                meta_array=meta_array,
                attributes=attributes,
                storage_options=storage_options,
            )
        )
    )


def create(
    shape: Any,
    *,
    chunks: Any = None,
    dtype: Any = None,
    compressor: Any = "auto",
    fill_value: Any = DEFAULT_FILL,
    order: str | None = None,
    store: Any = None,
    synchronizer: Any = None,
    overwrite: bool = False,
    path: str | None = None,
    chunk_store: Any = None,
    filters: Any = None,
    cache_metadata: bool | None = None,
    cache_attrs: bool | None = None,
    read_only: bool | None = None,
    object_codec: Any = None,
    dimension_separator: str | None = None,
    write_empty_chunks: bool | None = None,
    zarr_format: int | None = None,
    meta_array: Any = None,
    attributes: dict[str, Any] | None = None,
    chunk_shape: Any = None,
    chunk_key_encoding: Any = None,
    codecs: Any = None,
    dimension_names: Any = None,
    storage_options: dict[str, Any] | None = None,
    config: Any = None,
    mode: str | None = None,
    data: Any = None,
) -> Array:
    """Create an array: zarr-python's legacy ``zarr.create``.

    Prefer :func:`create_array`; this keeps the zarr-python 2 style arguments.

    Parameters
    ----------
    shape : int or tuple of int
        Array shape.
    chunks : int, tuple of int, False or None
        Chunk shape: None guesses one, False makes one chunk of the whole array, an
        int is the size in every dimension. ``True`` raises ``ValueError``, as in
        zarr-python 3.
    dtype : dtype, optional
        Element type (default float64).
    compressor : numcodecs codec, dict, None or "auto"
        The compressor (Zarr v2 only; for v3 use ``codecs``). "auto" is zstd level 0,
        None none.
    fill_value : scalar, optional
        Value of unwritten elements (default: zero or empty).
    order : {"C", "F"}, optional
        Memory order (stored for v2, runtime for v3).
    store : str, pathlib.Path, dict, Store or None
        Where the array lives (``None``: a new in-memory store).
    overwrite : bool
        Replace whatever node is at ``path``.
    path : str, optional
        Path of the array inside the store.
    filters : list of numcodecs codecs, optional
        Filters (Zarr v2 only; for v3 use ``codecs``).
    object_codec : numcodecs codec, optional
        Zarr v2: the codec of an object array (``VLenUTF8``, ``VLenBytes``), put
        first in ``filters`` as zarr-python 2 did. Zarr v3: warns, no effect.
    synchronizer, chunk_store, cache_metadata, cache_attrs, read_only
        Accepted for compatibility; a value other than None warns and has no effect.
    dimension_separator : {".", "/"}, optional
        Chunk key separator (Zarr v2 only; for v3 use ``chunk_key_encoding``).
    write_empty_chunks : bool, optional
        Store chunks equal to the fill value.
    zarr_format : {2, 3}, optional
        Format (default 3).
    meta_array : array, optional
        A numpy or CuPy array choosing where outputs live.
    attributes : dict, optional
        User attributes.
    chunk_shape : tuple of int, optional
        Same as ``chunks`` (give one of the two).
    chunk_key_encoding : dict or tuple, optional
        e.g. ``{"name": "default", "separator": "."}`` or ``("default", ".")`` (v3 only).
    codecs : list of codecs or dicts, optional
        The v3 codec chain: filters, one serializer, then compressors (v3 only).
    dimension_names : sequence of str, optional
        Dimension names (v3 only).
    storage_options : dict, optional
        Options for URL stores (fsspec).
    config : dict or ArrayConfig, optional
        Runtime settings ``{"order", "write_empty_chunks"}``.
    mode : {"r", "r+", "a", "w", "w-"}, optional
        Legacy: ``w`` replaces what is stored at ``path``, ``w-`` refuses to replace
        anything, ``r`` fails; default ``a``.
    data : array-like, optional
        Values written after the array is created (they do not set its shape or dtype).

    Returns
    -------
    Array
    """
    return Array(
        sync(
            _async.create(
                shape,
                chunks=chunks,
                dtype=dtype,
                compressor=compressor,
                fill_value=fill_value,
                order=order,
                store=store,
                synchronizer=synchronizer,
                overwrite=overwrite,
                path=path,
                chunk_store=chunk_store,
                filters=filters,
                cache_metadata=cache_metadata,
                cache_attrs=cache_attrs,
                read_only=read_only,
                object_codec=object_codec,
                dimension_separator=dimension_separator,
                write_empty_chunks=write_empty_chunks,
                zarr_format=zarr_format,
                meta_array=meta_array,
                attributes=attributes,
                chunk_shape=chunk_shape,
                chunk_key_encoding=chunk_key_encoding,
                codecs=codecs,
                dimension_names=dimension_names,
                storage_options=storage_options,
                config=config,
                mode=mode,
                data=data,
            )
        )
    )


def from_array(
    store: Any,
    *,
    data: Any,
    write_data: bool = True,
    name: str | None = None,
    chunks: Any = "keep",
    shards: Any = "keep",
    filters: Any = "keep",
    compressors: Any = "keep",
    serializer: Any = "keep",
    fill_value: Any = DEFAULT_FILL,
    order: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    config: Any = None,
) -> Array:
    """Create an array from an existing array or array-like (zarr-python's ``from_array``).

    Parameters
    ----------
    store : str, pathlib.Path, dict, Store or None
        Where the new array lives.
    data : cuzarr.Array, zarr.Array or array-like
        The array to copy.
    write_data : bool
        Copy the data (default), or only create the array.
    name : str, optional
        Path of the new array in the store.
    chunks, shards, filters, compressors, serializer
        As in :func:`create_array`, or ``"keep"`` (the default): those of ``data``
        when it is a cuzarr or zarr-python array (codecs only when ``zarr_format`` is
        the source's), otherwise the ``create_array`` defaults.
    fill_value : scalar, optional
        Default: the source array's fill value. ``None``: the dtype's default.
    order : {"C", "F"}, optional
        Memory order; for a v2 target the source's order by default.
    zarr_format : {2, 3}, optional
        Default: the source's format (3 for array-likes).
    attributes : dict, optional
        Default: a deep copy of the source's attributes.
    chunk_key_encoding : dict, optional
        Default: the source's, when the format is the source's.
    dimension_names : sequence of str, optional
        Default: the source's (v3 sources).
    storage_options : dict, optional
        Options for URL stores (fsspec).
    overwrite : bool
        Replace whatever node is at ``name``.
    config : dict or ArrayConfig, optional
        Runtime settings ``{"order", "write_empty_chunks"}``.

    Returns
    -------
    Array
    """
    return Array(
        sync(
            _async.from_array(
                store,
                data=data,
                write_data=write_data,
                name=name,
                chunks=chunks,
                shards=shards,
                filters=filters,
                compressors=compressors,
                serializer=serializer,
                fill_value=fill_value,
                order=order,
                zarr_format=zarr_format,
                attributes=attributes,
                chunk_key_encoding=chunk_key_encoding,
                dimension_names=dimension_names,
                storage_options=storage_options,
                overwrite=overwrite,
                config=config,
            )
        )
    )


def save(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array, or several in a group (like ``numpy.save`` / ``numpy.savez``).

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    *args : ndarray
        Arrays to save; one array alone is saved with :func:`save_array`.
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs : ndarray
        Arrays saved under these names (with :func:`save_group`).
    """
    sync(
        _async.save(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def save_array(
    store: Any,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save a NumPy array to a store (like ``numpy.save``).

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    arr : ndarray
        The data.
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path of the array inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs
        Passed to :func:`create` (``compressor``, ``fill_value``, ``mode``,
        ``overwrite``...); an existing node at ``path`` is an error unless ``mode="w"``
        or ``overwrite=True``.
    """
    sync(
        _async.save_array(
            store,
            arr,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def save_group(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save several NumPy arrays in a new group (like ``numpy.savez``).

    Whatever is stored at ``path`` is replaced by the group.

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    *args : ndarray
        Arrays saved as ``arr_0``, ``arr_1``...
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path of the group inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs : ndarray
        Arrays saved under these names.
    """
    sync(
        _async.save_group(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def load(store: Any, path: str | None = None, zarr_format: int | None = None) -> Any:
    """Read the array at ``path`` into memory.

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to read.
    path : str, optional
        Path of the node inside the store.
    zarr_format : {2, 3}, optional
        Only look for this format.

    Returns
    -------
    ndarray or dict
        The array's data; for a group, a ``dict`` of its child arrays' data
        (zarr-python 3.4 raises ``NotImplementedError`` for groups).

    Raises
    ------
    cuzarr.errors.NodeNotFoundError
        If nothing is stored at ``path`` (nothing is created).
    """
    return sync(_async.load(store=store, path=path, zarr_format=zarr_format))


def create_hierarchy(
    *, store: Any, nodes: dict[str, Any], overwrite: bool = False
) -> Iterator[tuple[str, Array | Group]]:
    """Create a hierarchy from metadata alone (zarr-python's ``create_hierarchy``):
    every node of ``nodes`` (path to metadata) and every missing ancestor group,
    written concurrently; yields ``(path, Array | Group)`` for each. As in
    zarr-python this is a generator: the nodes are made when it is iterated.
    See :func:`cuzarr.api.asynchronous.create_hierarchy`."""

    async def collect() -> list[tuple[str, Any]]:
        return [
            x async for x in _async.create_hierarchy(store=store, nodes=nodes, overwrite=overwrite)
        ]

    for path, node in sync(collect()):
        yield path, Array(node) if isinstance(node, AsyncArray) else Group(node)


def tree(grp: Group, expand: bool | None = None, level: int | None = None) -> Any:
    """The hierarchy below ``grp`` as text (deprecated in zarr-python: use ``Group.tree``).

    Parameters
    ----------
    grp : Group
        The group.
    expand : bool, optional
        Ignored (zarr-python uses it for the HTML rendering).
    level : int, optional
        Depth to descend to.

    Returns
    -------
    str
    """
    warnings.warn("Use Group.tree instead.", DeprecationWarning, stacklevel=2)
    return grp.tree(expand=expand, level=level)


def open_like(a: Any, path: str, *, zarr_format: int | None = None, **kwargs: Any) -> Array:
    """Open the array at ``path``, creating it with the shape, dtype and chunks of ``a``.

    Parameters
    ----------
    a : array-like
        Gives shape, dtype and chunks (and, for a cuzarr or zarr-python array of the
        same format, fill value, order and codecs).
    path : str
        Path of the array; the store is ``store=`` (default: a new in-memory store).
    zarr_format : {2, 3}, optional
        Format of a new array (default 3; the format of ``a`` is not inherited).
    **kwargs
        Passed to :func:`open_array` (``store``, ``mode``...).

    Returns
    -------
    Array
    """
    return Array(sync(_async.open_like(a, path, zarr_format=zarr_format, **kwargs)))
