"""The sync API's array creation: ``create_array``, ``from_array``, ``array``,
``full`` & co., ``*_like`` and zarr-python's legacy ``create``; each runs its
``cuzarr.api.asynchronous`` twin (in the calling thread where only metadata is
written and the store allows it)."""

from __future__ import annotations

import functools
from typing import Any

from cuzarr.api import asynchronous as _async
from cuzarr.core.array import Array
from cuzarr.core.blocking import run_blocking
from cuzarr.core.build import DEFAULT_FILL
from cuzarr.core.create import name_of
from cuzarr.core.create_args import like_kwargs
from cuzarr.core.modes import FORMAT_DEFAULT, zarr_format_for
from cuzarr.runtime.sync import sync

__all__ = [
    "array",
    "create",
    "create_array",
    "empty",
    "empty_like",
    "from_array",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
]


# zarr-python's signature, a few related parameters per line (``fmt: skip``) so that the
# def, its full docstring included, keeps to the project's 80-line limit
def create_array(
    store: Any = None,
    name: str | None = None,
    *,
    shape: Any = None, dtype: Any = None,
    chunks: Any = "auto", shards: Any = None,
    fill_value: Any = DEFAULT_FILL, order: str | None = None,
    zarr_format: int | None = FORMAT_DEFAULT,
    compressors: Any = "auto", filters: Any = None, serializer: Any = "auto",
    attributes: dict[str, Any] | None = None, dimension_names: Any = None,
    overwrite: bool = False, write_empty_chunks: bool | None = None,
    chunk_key_encoding: Any = None, dimension_separator: str | None = None,
    storage_options: dict[str, Any] | None = None, meta_array: Any = None,
    data: Any = None, config: Any = None, write_data: bool = True,
) -> Array:  # fmt: skip
    """Create a new array (zarr-python 3's ``create_array``).

    Parameters
    ----------
    store : str, pathlib.Path, dict, Store or None
        A directory path, a URL (``s3://``, ``https://``, ``memory://``), a ``*.zip`` or
        ``*.n5`` path, a ``dict``, a ``cuzarr.storage`` store, or None: a new memory store.
    name : str, optional
        Path of the array inside the store ('' for the root).
    shape : int or tuple of int
        Shape of the array (taken from ``data`` when that is given).
    dtype : numpy dtype, str, type or v3 JSON
        Element type: numpy dtypes, ``str`` / ``bytes`` for variable-length UTF-8 / bytes,
        ml_dtypes types (bfloat16, float8), v3 names. Required unless ``data`` is given
        (``ValueError`` otherwise, as in zarr-python).
    chunks : int, tuple of int or "auto"
        Chunk shape (of the inner chunks when ``shards`` is given); "auto" as zarr-python: h5py's
        rule, 128 KiB to 64 MiB growing with the array, at most 1 MiB inside shards.
    shards : tuple of int or "auto", optional
        Shard shape (v3): a multiple of ``chunks``; "auto" as zarr-python: two chunks along
        each axis that holds more than eight.
    fill_value : scalar or None, optional
        Value of unwritten elements (default: zero or empty). ``None``: in v2 stored as ``null``
        (still read as zero or empty, as in zarr-python); in v3 the default.
    order : {"C", "F"}, optional
        Memory order of chunks (stored order for v2).
    zarr_format : {2, 3}
        Format version (default 3; 2 in an N5 container, the one format it holds).
    compressors, filters, serializer
        numcodecs codecs, v3 codec dicts or cuzarr codecs. ``"auto"`` compressors give zstd
        level 0, as zarr-python does; ``None`` none.
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
        Gives the shape and dtype (do not pass ``shape``), and is written unless ``write_data``
        is False. A cuzarr or zarr-python array gives its fill value too (as in ``from_array``).
    config : dict or ArrayConfig, optional
        zarr-python's ``ArrayConfig``: ``{"order": "C" | "F", "write_empty_chunks": bool,
        "read_missing_chunks": bool}``; explicit ``order`` / ``write_empty_chunks`` win.
    write_data : bool
        With ``data``: write it (default) or only take its shape and dtype.

    Returns
    -------
    Array
    """
    args = dict(locals())  # every argument, forwarded as given
    make = functools.partial(_async.create_array, **args)
    # without data, only metadata is written: in this thread where the store allows
    return Array(run_blocking(make) if data is None else sync(make()))


def array(data: Any, store: Any = None, **kwargs: Any) -> Array:
    """Create an array holding a copy of ``data``."""
    return Array(sync(_async.array(data, store, **kwargs)))


def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    """An array whose elements all read as ``fill_value`` (nothing is written)."""
    kwargs["zarr_format"] = zarr_format_for(kwargs.get("zarr_format"), store)
    if kwargs.get("dtype") is None:
        kwargs["dtype"] = "float64"  # zarr-python's default for the legacy functions
    return create_array(store, name_of(kwargs), shape=shape, fill_value=fill_value, **kwargs)


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


# zarr-python's signature in its order, a few parameters per line (as create_array)
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
    cache_metadata: bool | None = None, cache_attrs: bool | None = None,
    read_only: bool | None = None,
    object_codec: Any = None,
    dimension_separator: str | None = None,
    write_empty_chunks: bool | None = None,
    zarr_format: int | None = None,
    meta_array: Any = None,
    attributes: dict[str, Any] | None = None,
    chunk_shape: Any = None, chunk_key_encoding: Any = None, codecs: Any = None,
    dimension_names: Any = None,
    storage_options: dict[str, Any] | None = None,
    config: Any = None, mode: str | None = None, data: Any = None,
) -> Array:  # fmt: skip
    """Create an array: zarr-python's legacy ``zarr.create``.

    Prefer ``create_array``; this keeps the zarr-python 2 style arguments. Those the
    two share mean the same in both, and are documented there.

    Parameters
    ----------
    shape : int or tuple of int
        Array shape.
    chunks, chunk_shape : int, tuple of int, False or None
        Chunk shape (give one of the two): None guesses one, False makes one chunk of the
        whole array, an int is the size in every dimension. ``True`` raises ``ValueError``,
        as in zarr-python 3.
    dtype : dtype, optional
        Element type (default float64).
    compressor : numcodecs codec, dict, None or "auto"
        The compressor (Zarr v2 only; for v3 use ``codecs``). "auto" is zstd level 0,
        None none.
    store, fill_value, order, overwrite, write_empty_chunks, zarr_format
        As in ``create_array``; ``overwrite`` replaces whatever node is at ``path``.
    meta_array, attributes, storage_options, config
        As in ``create_array``.
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
    chunk_key_encoding : dict or tuple, optional
        e.g. ``{"name": "default", "separator": "."}`` or ``("default", ".")`` (v3 only).
    codecs : list of codecs or dicts, optional
        The v3 codec chain: filters, one serializer, then compressors (v3 only).
    dimension_names : sequence of str, optional
        Dimension names (v3 only).
    mode : {"r", "r+", "a", "w", "w-"}, optional
        Legacy: ``w`` replaces what is stored at ``path``, ``w-`` refuses to replace
        anything, ``r`` fails; default ``a``.
    data : array-like, optional
        Values written after the array is created (they do not set its shape or dtype).

    Returns
    -------
    Array
    """
    args = dict(locals())  # every argument, forwarded as given
    return Array(sync(_async.create(**args)))


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
        As in ``create_array``, or ``"keep"`` (the default): those of ``data``
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
    args = dict(locals())  # every argument, forwarded as given
    return Array(sync(_async.from_array(**args)))
