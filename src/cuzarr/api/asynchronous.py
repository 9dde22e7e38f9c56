"""The async API: every function here is a coroutine (the sync API wraps them)."""

from __future__ import annotations

import asyncio
import copy as _copy
import itertools
import warnings
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, Codec
from cuzarr.codecs.lazy_numcodecs import is_numcodec
from cuzarr.codecs.numcodecs_bridge import as_v3_codec
from cuzarr.config import config as cuzarr_config
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.array_config import config_dict, parse_array_config
from cuzarr.core.async_array import _materialize
from cuzarr.core.build import (
    DEFAULT_FILL,
    build_array_metadata,
    check_object_dtype,
    element_type,
)
from cuzarr.core.consolidated import ZMETADATA
from cuzarr.core.group import AsyncGroup
from cuzarr.core.lazy import LazyArray
from cuzarr.core.lazy import read_many_async as read_many
from cuzarr.core.nodes import ensure_vacant, load_node_metadata, load_node_metadata_sync
from cuzarr.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    GroupFoundError,
    GroupNotFoundError,
    NodeNotFoundError,
    ReadOnlyError,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.group import GroupMetadata
from cuzarr.storage.base import Store
from cuzarr.storage.common import StorePath, make_store_path, only_zarr_format

__all__ = [
    "AsyncArray",
    "AsyncGroup",
    "LazyArray",
    "array",
    "consolidate_metadata",
    "copy",
    "copy_all",
    "copy_store",
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
    "read_many",
    "save",
    "save_array",
    "save_group",
    "tree",
    "zeros",
    "zeros_like",
]

_MODES = ("r", "r+", "a", "w", "w-")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


def _resolve_mode(mode: str | None, store: Any) -> str:
    """``mode``, checked; ``None`` (zarr-python's default) is ``"r"`` for a read-only
    store object and ``"a"`` otherwise, as in zarr-python."""
    if mode is None:
        st = store.store if isinstance(store, StorePath) else store
        return "r" if isinstance(st, Store) and st.read_only else "a"
    _check_mode(mode)
    return mode


class _DefaultFormat(int):
    """``create_array``'s default ``zarr_format`` (3, as in zarr-python) that
    knows it was not given: a store with one possible layout picks its own."""

    def __repr__(self) -> str:
        return "3"


FORMAT_DEFAULT: int = _DefaultFormat(3)


def _format(zarr_format: int | None, store: Any = None) -> int:
    """``zarr_format``, or config ``default_zarr_format`` (3) where it is None;
    where ``store`` can hold one format only (N5), that one unless given."""
    if zarr_format is None or isinstance(zarr_format, _DefaultFormat):
        only = only_zarr_format(store)
        if only is not None:
            return only
    if isinstance(zarr_format, _DefaultFormat):
        return 3
    if zarr_format is not None:
        return zarr_format
    fmt = cuzarr_config.get("default_zarr_format")
    if fmt not in (2, 3):
        raise ValueError(f"config default_zarr_format must be 2 or 3, not {fmt!r}")
    return int(fmt)


async def create_array(
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
    compressor: Any = "unset",
    data: Any = None,
    config: Any = None,
    write_data: bool = True,
) -> AsyncArray:
    """Create an array; see :func:`cuzarr.create_array`."""
    order, write_empty_chunks = _apply_config(config, order, write_empty_chunks)
    if data is not None:
        if shape is not None:
            raise ValueError(
                "The data parameter was used, but the shape parameter was also used. "
                "Either use the data parameter, or the shape parameter, but not both."
            )
        if dtype is not None:
            raise ValueError(
                "The data parameter was used, but the dtype parameter was also used. "
                "Either use the data parameter, or the dtype parameter, but not both."
            )
        return await from_array(
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
            write_empty_chunks=write_empty_chunks,
            dimension_separator=dimension_separator,
            meta_array=meta_array,
            config=config,
        )
    if dtype is None:
        raise ValueError(
            "The data parameter was set to None, but dtype was not specified. Either "
            "provide an array-like value for data, or specify dtype."
        )
    if shape is None:
        raise ValueError("create_array needs shape= (or data=)")
    check_object_dtype(dtype, _format(zarr_format, store), filters, serializer)
    meta = build_array_metadata(
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        shards=shards,
        fill_value=fill_value,
        order=order,
        zarr_format=_format(zarr_format, store),
        compressors=compressors,
        filters=filters,
        serializer=serializer,
        attributes=attributes,
        dimension_names=dimension_names,
        chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator,
        compressor=compressor,
    )
    sp = make_store_path(
        store, name, mode="w" if overwrite else "a", storage_options=storage_options
    )
    arr = await AsyncArray.create(
        sp, meta, overwrite=overwrite, write_empty_chunks=write_empty_chunks
    )
    arr.set_prototype(meta_array)
    return _with_read_missing(arr, config)


async def open_array(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    **kwargs: Any,
) -> AsyncArray:
    """Open an array (creating it in modes ``w``/``w-``, or ``a`` with ``shape=``)."""
    mode = _resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" not in kwargs:
            raise ValueError(f"mode {mode!r} creates a new array and needs shape=")
        return await _create_like_zarr(
            kwargs.pop("shape"),
            sp,
            {"zarr_format": _format(zarr_format, sp), "overwrite": mode == "w",
             "meta_array": meta_array, **kwargs},
        )
    try:
        arr = await AsyncArray.open(sp, zarr_format)
    except ArrayNotFoundError as e:
        if isinstance(e, GroupFoundError):
            raise  # a group is there: nothing to create (zarr-python: the same error)
        if mode == "a" and "shape" in kwargs:
            return await _create_like_zarr(
                kwargs.pop("shape"),
                sp,
                {"zarr_format": _format(zarr_format, sp), "meta_array": meta_array, **kwargs},
            )
        raise
    config = kwargs.get("config")
    if config is not None:
        # as zarr-python: ``config`` applies to an array opened, not only created
        # (a v2 array's order lies in its metadata; zarr-python ignores one given)
        given = config_dict(config)
        parse_array_config(dict(given))  # validate keys and values
        if arr.metadata.zarr_format == 2:
            given.pop("order", None)
        arr = arr.with_config(given)
    arr.set_prototype(meta_array)
    return arr


def _open_array_inline(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    meta_array: Any,
    kwargs: dict[str, Any],
) -> tuple[AsyncArray | None, StorePath, str]:
    """:func:`open_array` of an existing array in the calling thread, for the sync
    API: on a store with cheap blocking I/O (memory, local files) the trip
    through the event loop cost more than the open. Returns (the array, or None
    when it takes the async way: another mode, extra arguments, another store,
    no array there; the store path and mode made, for that way to go on with)."""
    mode = _resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    sio = sp.store.sync_io() if mode in ("r", "r+", "a") and not kwargs else None
    if sio is None:
        return None, sp, mode
    meta = load_node_metadata_sync(sp, zarr_format, sio)
    if not isinstance(meta, ArrayMetadata):
        return None, sp, mode
    arr = AsyncArray(meta, sp)
    arr.set_prototype(meta_array)
    return arr, sp, mode


def _open_group_inline(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    use_consolidated: bool | None,
    meta_array: Any,
) -> tuple[AsyncGroup | None, StorePath, str]:
    """:func:`open_group` of an existing group in the calling thread, as
    :func:`_open_array_inline` (None: the async way)."""
    mode = _resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    sio = sp.store.sync_io() if mode in ("r", "r+", "a") else None
    if sio is None:
        return None, sp, mode
    meta = load_node_metadata_sync(sp, zarr_format, sio)
    if not isinstance(meta, GroupMetadata):
        return None, sp, mode
    raw = None
    if use_consolidated is not False and meta.zarr_format == 2:
        raw = sio.get_ranges([(sp.key(ZMETADATA), None)])[0]
    group = AsyncGroup._opened(sp, meta, use_consolidated, raw)
    group.set_prototype(meta_array)
    return group, sp, mode


async def create_group(
    store: Any = None,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Create a group; see :func:`cuzarr.create_group`."""
    sp = make_store_path(store, path, mode="a", storage_options=storage_options)
    return await AsyncGroup.create(
        sp, zarr_format=_format(zarr_format, sp), attributes=attributes, overwrite=overwrite
    )


async def open_group(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
    meta_array: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    chunk_store: Any = None,
) -> AsyncGroup:
    """Open a group; modes ``a``/``w``/``w-`` create it when missing or asked to.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python). ``meta_array``: where the
    reads of the arrays got through the group land (numpy or CuPy). zarr-python's
    legacy ``cache_attrs``, ``synchronizer`` and ``chunk_store`` are accepted with
    the warning zarr-python gives: they have no effect."""
    _warn_unimplemented(
        cache_attrs=cache_attrs, synchronizer=synchronizer, chunk_store=chunk_store
    )
    group = await _open_group(
        store, mode, path, zarr_format, storage_options, attributes, use_consolidated
    )
    group.set_prototype(meta_array)
    return group


async def _open_group(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    attributes: dict[str, Any] | None,
    use_consolidated: bool | None,
) -> AsyncGroup:
    mode = _resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode == "w":
        return await AsyncGroup.create(
            sp, zarr_format=_format(zarr_format, sp), attributes=attributes, overwrite=True
        )
    if mode == "w-":
        return await AsyncGroup.create(sp, zarr_format=_format(zarr_format, sp), attributes=attributes)
    try:
        return await AsyncGroup.open(sp, zarr_format, use_consolidated=use_consolidated)
    except GroupNotFoundError:
        if mode == "a":
            try:
                await load_node_metadata(sp, zarr_format)
            except NodeNotFoundError:
                return await AsyncGroup.create(
                    sp, zarr_format=_format(zarr_format, sp), attributes=attributes
                )
            raise ContainsArrayError(f"an array, not a group, exists at path {sp.path!r}") from None
        raise


async def open(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open whatever node is at ``path``: an array or a group."""
    mode = _resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" in kwargs:
            return await open_array(sp, mode=mode, zarr_format=zarr_format, **kwargs)
        return await open_group(sp, mode=mode, zarr_format=zarr_format)
    try:
        meta = await load_node_metadata(sp, zarr_format)
    except NodeNotFoundError as e:
        if mode == "a":
            if "shape" in kwargs:
                kwargs.setdefault("dtype", "float64")  # zarr-python's default here
                return await create_array(sp, zarr_format=_format(zarr_format, sp), **kwargs)
            return await AsyncGroup.create(sp, zarr_format=_format(zarr_format, sp))
        # zarr-python raises GroupNotFoundError here (a NodeNotFoundError too)
        raise GroupNotFoundError(str(e)) from None
    if isinstance(meta, ArrayMetadata):
        if kwargs.get("config") is not None:
            # as open_array: the config (write_empty_chunks, order) applies to it
            return await open_array(sp, mode=mode, zarr_format=zarr_format, **kwargs)
        node: AsyncArray | AsyncGroup = AsyncArray(meta, sp)
    else:
        node = AsyncGroup(meta, sp)
    node.set_prototype(kwargs.get("meta_array"))  # where the reads land
    return node


async def consolidate_metadata(
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Store the metadata of every node below the group at ``path`` in one place."""
    sp = make_store_path(store, path, mode="a", storage_options=storage_options)
    group = await AsyncGroup.open(sp, zarr_format, use_consolidated=False)
    return await group.consolidate()


async def open_consolidated(
    store: Any,
    path: str | None = None,
    *,
    mode: str = "r",
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    use_consolidated: bool | None = True,
    **kwargs: Any,
) -> AsyncGroup:
    """Open a group from its consolidated metadata (an error if there is none).

    As in zarr-python, this is :func:`open_group` with ``use_consolidated=True``: modes
    ``w``/``w-`` create a new group and ``a`` creates a missing one; other keyword
    arguments (``attributes``...) go to :func:`open_group`."""
    if use_consolidated is False:
        raise TypeError("open_consolidated needs use_consolidated=True (or None)")
    return await open_group(
        store,
        mode=mode,
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        use_consolidated=True,
        **kwargs,
    )


def name_of(kwargs: dict[str, Any]) -> str | None:
    """Pop the new array's ``name`` from ``kwargs``; ``path`` is accepted for it,
    as zarr-python's ``zeros``/``full``/``array`` (through ``create``) take it."""
    name, path = kwargs.pop("name", None), kwargs.pop("path", None)
    if name is not None and path is not None and name != path:
        raise ValueError(f"give name or path, not both ({name!r}, {path!r})")
    return name if name is not None else path


async def array(data: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data``."""
    data = await _materialize(data)
    data = np.asanyarray(data) if not hasattr(data, "__cuda_array_interface__") else data
    kwargs.setdefault("dtype", element_type(data.dtype, data))
    kwargs.setdefault("shape", data.shape)
    kwargs["zarr_format"] = _format(kwargs.get("zarr_format"), store)
    a = await create_array(store, name_of(kwargs), **kwargs)
    await a.setitem(Ellipsis, data)
    return a


# Arguments only ``create_array`` takes: with one of them, ``full`` & co. go through
# ``create_array`` (as the sync ``cuzarr.full`` does); otherwise through the legacy
# ``create``, as zarr-python's async ``full`` does (``compressor=``, ``codecs=``...).
_CREATE_ARRAY_ONLY = frozenset(
    {"name", "compressors", "serializer", "shards", "write_data"}
)


async def _create_like_zarr(shape: Any, store: Any, kwargs: dict[str, Any]) -> AsyncArray:
    # v3 filters (array-to-array codecs, as DESIGN.md accepts them for both
    # formats): the legacy ``create`` refuses them, as zarr-python's does.
    v3_filters = (
        kwargs.get("filters") is not None and _format(kwargs.get("zarr_format"), store) == 3
    )
    if v3_filters or _CREATE_ARRAY_ONLY.intersection(kwargs):
        kwargs["zarr_format"] = _format(kwargs.get("zarr_format"), store)
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = "float64"  # the legacy functions' default
        return await create_array(store, name_of(kwargs), shape=shape, **kwargs)
    return await create(shape, store=store, **kwargs)


async def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array whose elements all read as ``fill_value`` (nothing is written);
    the async twin of :func:`cuzarr.full`."""
    return await _create_like_zarr(shape, store, {**kwargs, "fill_value": fill_value})


async def zeros(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array reading as zeros; the async twin of :func:`cuzarr.zeros`."""
    return await full(shape, 0, store, **kwargs)


async def ones(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array reading as ones; the async twin of :func:`cuzarr.ones`."""
    return await full(shape, 1, store, **kwargs)


async def empty(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array with nothing written; the async twin of :func:`cuzarr.empty`."""
    return await _create_like_zarr(shape, store, kwargs)


def _like_kwargs(a: Any, kwargs: dict[str, Any], keep_fill: bool = False) -> dict[str, Any]:
    """Arguments for an array like ``a`` (as ``cuzarr.full_like`` & co.): a cuzarr
    or zarr-python array passes on its zarr format, chunks and shards, and (to a new
    array of the same format) its order and codecs; ``keep_fill`` its fill value."""
    kwargs.setdefault("shape", a.shape)
    same_dtype = "dtype" not in kwargs
    kwargs.setdefault(
        "dtype",
        # a cuzarr array's own data type (vlen bytes and strings both hold objects)
        a.metadata.dtype if isinstance(a, Array | AsyncArray) else element_type(a.dtype, a),
    )
    if _is_zarr_array(a):
        fmt = a.metadata.zarr_format
        kwargs.setdefault("chunks", a.chunks)
        if kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = fmt
        if keep_fill:
            kwargs.setdefault("fill_value", a.fill_value)
        if kwargs["zarr_format"] == fmt:
            if a.shards is not None:
                kwargs.setdefault("shards", a.shards)
            if fmt == 2 or isinstance(a, (Array, AsyncArray)):  # zarr ignores a v3 order
                kwargs.setdefault("order", a.order)
            kwargs.setdefault("compressors", _codecs_arg(a.compressors))
            if same_dtype:  # filters and serializer depend on the dtype
                kwargs.setdefault("filters", _codecs_arg(a.filters))
                if fmt == 3:
                    kwargs.setdefault("serializer", _codec_arg(a.serializer))
    return kwargs


async def full_like(a: Any, fill_value: Any = None, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array like ``a`` reading as ``fill_value``; see :func:`cuzarr.full_like`."""
    kw = _like_kwargs(a, kwargs, keep_fill=fill_value is None)
    if fill_value is None:
        fill_value = kw.pop("fill_value", None)
    return await full(kw.pop("shape"), fill_value, store, **kw)


async def zeros_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array of zeros like ``a``."""
    return await full_like(a, 0, store, **kwargs)


async def ones_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array of ones like ``a``."""
    return await full_like(a, 1, store, **kwargs)


async def empty_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array like ``a`` with nothing written (``a``'s fill value)."""
    kw = _like_kwargs(a, kwargs, keep_fill=True)
    return await empty(kw.pop("shape"), store, **kw)


# ----------------------------------------------------------------------------------
# zarr-python compatibility: group, create, from_array, save*, load, tree, open_like
# ----------------------------------------------------------------------------------


# "no fill value given": the type's default (``from_array``: the source's)
_DEFAULT_FILL: Any = DEFAULT_FILL


def _warn_unimplemented(**kwargs: Any) -> None:
    """Warn, as zarr-python does, for each legacy argument given that has no effect."""
    for name, value in kwargs.items():
        if value is not None:
            warnings.warn(f"{name} is not yet implemented", RuntimeWarning, stacklevel=3)


def _apply_config(
    config: Any, order: str | None, write_empty_chunks: bool | None
) -> tuple[str | None, bool | None]:
    """``order`` and ``write_empty_chunks`` with the keys of ``config`` filled in.

    Explicit arguments win over ``config``; keys absent from a ``dict`` config stay unset.
    """
    if config is None:
        return order, write_empty_chunks
    given = config_dict(config)
    parse_array_config(dict(given))  # validate keys and values
    if order is None:
        order = given.get("order")
    if write_empty_chunks is None:
        write_empty_chunks = given.get("write_empty_chunks")
    return order, write_empty_chunks


def _with_read_missing(arr: AsyncArray, config: Any) -> AsyncArray:
    """``arr`` with the ``read_missing_chunks`` key of ``config``, where it has one."""
    if config is None:
        return arr
    given = config_dict(config)
    missing = given.get("read_missing_chunks")
    if missing is None or missing == arr.config.read_missing_chunks:
        return arr
    return arr.with_config({"read_missing_chunks": missing})


def _is_zarr_array(x: Any) -> bool:
    """True for a cuzarr or zarr-python array (whose settings ``"keep"`` copies)."""
    if isinstance(x, (Array, AsyncArray)):
        return True
    mod = type(x).__module__
    return mod.startswith("zarr.") and hasattr(x, "metadata") and hasattr(x, "chunks")


def _codec_arg(c: Any) -> Any:
    """A codec of a cuzarr or zarr-python array, in a form ``create_array`` accepts."""
    if isinstance(c, Codec) or is_numcodec(c) or not hasattr(c, "to_dict"):
        return c
    return c.to_dict()


def _codecs_arg(cs: Any) -> Any:
    if not cs:
        return None
    return [_codec_arg(c) for c in cs]


def _cke_of(src: Any) -> dict[str, Any]:
    """The chunk key encoding of a cuzarr or zarr-python array, as a dict."""
    meta = src.metadata
    if src.metadata.zarr_format == 2 and hasattr(meta, "dimension_separator"):
        return {"name": "v2", "separator": meta.dimension_separator}
    cke = meta.chunk_key_encoding
    if isinstance(cke, dict):
        return cke
    if hasattr(cke, "to_dict"):
        d = cke.to_dict()
        return {"name": d["name"], "separator": d.get("configuration", {}).get("separator", "/")}
    return {"name": cke.name, "separator": cke.separator}


def _src_attrs(src: Any) -> dict[str, Any]:
    attrs = src.attrs
    d = attrs.asdict() if hasattr(attrs, "asdict") else dict(attrs)
    return _copy.deepcopy(d)


async def from_array(
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
    fill_value: Any = _DEFAULT_FILL,
    order: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    config: Any = None,
    write_empty_chunks: bool | None = None,
    dimension_separator: str | None = None,
    meta_array: Any = None,
) -> AsyncArray:
    """Create an array from an existing array (cuzarr, zarr-python) or array-like.

    See :func:`cuzarr.from_array`.
    """
    order, write_empty_chunks = _apply_config(config, order, write_empty_chunks)
    src_is_array = _is_zarr_array(data)
    if src_is_array:
        src_fmt = data.metadata.zarr_format
        if chunks == "keep":
            chunks = data.chunks
        if shards == "keep":
            shards = data.shards
        if zarr_format is None:
            zarr_format = src_fmt
        same = zarr_format == src_fmt
        if filters == "keep":
            filters = _codecs_arg(data.filters) if same else "auto"
        if compressors == "keep":
            compressors = _codecs_arg(data.compressors) if same else "auto"
        if serializer == "keep":
            serializer = (
                _codec_arg(data.serializer) if zarr_format == 3 and src_fmt == 3 else "auto"
            )
        if fill_value is _DEFAULT_FILL:
            fill_value = data.fill_value
        if src_fmt == 2 and zarr_format == 3 and data.order == "F":
            warnings.warn(
                "The 'order' attribute of a Zarr format 2 array does not have a direct "
                "analogue in Zarr format 3. The existing order='F' of the source Zarr "
                "format 2 array will be ignored.",
                UserWarning,
                stacklevel=2,
            )
        elif order is None and zarr_format == 2:
            order = data.order
        if chunk_key_encoding is None and dimension_separator is None and same:
            chunk_key_encoding = _cke_of(data)
        if dimension_names is None and src_fmt == 3:
            dimension_names = data.metadata.dimension_names
        if attributes is None:
            attributes = _src_attrs(data)
            if zarr_format == 3:
                attributes.pop("_ARRAY_DIMENSIONS", None)
        dtype = data.dtype
        shape = data.shape
    else:
        chunks = "auto" if chunks == "keep" else chunks
        shards = None if shards == "keep" else shards
        zarr_format = _format(zarr_format, store)
        filters = None if filters in ("keep", "auto") else filters
        compressors = "auto" if compressors == "keep" else compressors
        serializer = "auto" if serializer == "keep" else serializer
        data = await _materialize(data)
        if not hasattr(data, "dtype") or not hasattr(data, "shape"):
            data = np.array(data)
        dtype = data.dtype
        shape = data.shape
    if filters == "auto":
        filters = None
    result = await create_array(
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
    result = _with_read_missing(result, config)
    if write_data:
        if src_is_array:
            await _copy_array(data, result)
        else:
            await result.setitem(Ellipsis, data)
    return result


async def _copy_array(src: Any, dst: AsyncArray) -> None:
    """Copy ``src`` (a cuzarr or zarr-python array) into ``dst``, one write chunk
    (shard, or chunk) of ``dst`` at a time, a few at once."""
    step = dst.shards or dst.chunks
    if dst.ndim == 0 or not all(isinstance(c, int) for c in step):
        regions: list[Any] = [Ellipsis]
    else:
        ranges = [range(0, max(n, 1), c) for n, c in zip(dst.shape, step, strict=True)]
        regions = [
            tuple(slice(o, o + c) for o, c in zip(origin, step, strict=True))
            for origin in itertools.product(*ranges)
        ]
    inner = src if isinstance(src, AsyncArray) else getattr(src, "_async_array", None)
    sem = asyncio.Semaphore(max(1, int(cuzarr_config.get("async.concurrency") or 8)))

    async def one(region: Any) -> None:
        async with sem:
            if isinstance(inner, AsyncArray):
                block = await inner.getitem(region)
            else:  # a zarr-python array: its own event loop, off ours
                block = await asyncio.to_thread(src.__getitem__, region)
            await dst.setitem(region, block)

    await asyncio.gather(*(one(r) for r in regions))


async def create(
    shape: Any,
    *,
    chunks: Any = None,
    dtype: Any = None,
    compressor: Any = "auto",
    fill_value: Any = _DEFAULT_FILL,
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
) -> AsyncArray:
    """Create an array (zarr-python's legacy creation function); see :func:`cuzarr.create`."""
    zarr_format = _format(zarr_format, store)
    if object_codec is not None and zarr_format == 2:
        # zarr-python 2's meaning: the object codec is the first filter (zarr 3.4
        # ignores it with a warning, and the array silently becomes a string one)
        filters = [object_codec, *(filters or [])]
        object_codec = None
    _warn_unimplemented(
        synchronizer=synchronizer,
        chunk_store=chunk_store,
        cache_metadata=cache_metadata,
        cache_attrs=cache_attrs,
        object_codec=object_codec,
        read_only=read_only,
    )
    mode = "a" if mode is None else mode
    _check_mode(mode)
    if mode == "r":
        raise ReadOnlyError(
            f"cannot create an array in {store!r} with mode='r' (use mode='a' or 'w')"
        )
    order, write_empty_chunks = _apply_config(config, order, write_empty_chunks)
    if chunks is not None and chunk_shape is not None:
        raise ValueError("Only one of chunk_shape or chunks can be provided.")
    raw = chunks if chunks is not None else chunk_shape
    if raw is True:
        raise ValueError(
            "True is not a valid chunk input. Use chunks=None or chunks=\"auto\" from the "
            "top-level API for auto-chunking, or pass an int / tuple of ints."
        )
    shape_t = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if raw is None:
        raw = "auto"
    elif raw is False:
        raw = shape_t
    kw: dict[str, Any] = {}
    if zarr_format == 3:
        if dimension_separator is not None:
            raise ValueError(
                "dimension_separator cannot be used for arrays with zarr_format 3. "
                "Use chunk_key_encoding instead."
            )
        if filters is not None:
            raise ValueError(
                "filters cannot be used for arrays with zarr_format 3. "
                "Use array-to-array codecs instead."
            )
        if compressor != "auto":
            raise ValueError(
                "compressor cannot be used for arrays with zarr_format 3. "
                "Use bytes-to-bytes codecs instead."
            )
        if codecs is not None:
            kw.update(_split_v3_codecs(codecs))
        if isinstance(chunk_key_encoding, tuple):
            chunk_key_encoding = {"name": chunk_key_encoding[0], "separator": chunk_key_encoding[1]}
    elif zarr_format == 2:
        if codecs is not None:
            raise ValueError(
                "codecs cannot be used for arrays with zarr_format 2. "
                "Use filters and compressor instead."
            )
        if chunk_key_encoding is not None:
            raise ValueError(
                "chunk_key_encoding cannot be used for arrays with zarr_format 2. "
                "Use dimension_separator instead."
            )
        if dimension_names is not None:
            raise ValueError("dimension_names cannot be used for arrays with zarr_format 2.")
        kw["compressors"] = compressor
        kw["filters"] = filters
    else:
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode == "w-":
        await ensure_vacant(sp, False)
    arr = await create_array(
        sp,
        shape=shape_t,
        dtype="float64" if dtype is None else dtype,
        chunks=raw,
        fill_value=fill_value,
        order=order,
        zarr_format=zarr_format,
        attributes=attributes,
        dimension_names=dimension_names,
        overwrite=(overwrite or mode == "w") and mode != "w-",
        write_empty_chunks=write_empty_chunks,
        chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator,
        meta_array=meta_array,
        config=config,
        **kw,
    )
    if data is not None:
        await arr.setitem(Ellipsis, await _materialize(data))
    return arr


def _split_v3_codecs(codecs: Any) -> dict[str, Any]:
    """``filters``, ``serializer`` and ``compressors`` from a v3 ``codecs`` list."""
    parsed = [as_v3_codec(_codec_arg(c)) for c in codecs]
    aa = [c for c in parsed if isinstance(c, ArrayArrayCodec)]
    ab = [c for c in parsed if isinstance(c, ArrayBytesCodec)]
    bb = [c for c in parsed if isinstance(c, BytesBytesCodec)]
    if len(ab) != 1 or parsed != [*aa, *ab, *bb]:
        raise ValueError(
            "codecs must be array->array codecs, then one array->bytes codec, then "
            f"bytes->bytes codecs; got {[c.name for c in parsed]}"
        )
    return {"filters": aa or None, "serializer": ab[0], "compressors": bb or None}


async def group(
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
) -> AsyncGroup:
    """Open a group, creating it if missing (replacing any node if ``overwrite``);
    ``meta_array`` as in :func:`open_group`."""
    return await open_group(
        store,
        mode="w" if overwrite else "a",
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        attributes=attributes,
        meta_array=meta_array,
        cache_attrs=cache_attrs,
        synchronizer=synchronizer,
        chunk_store=chunk_store,
    )


def _check_ndarray(x: Any, what: str) -> None:
    if not (hasattr(x, "shape") and hasattr(x, "dtype")) or _is_zarr_array(x):
        raise TypeError(f"{what} must be numpy or other NDArrayLike array")


async def save_array(
    store: Any,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save a NumPy array to a store; see :func:`cuzarr.save_array`."""
    if np.isscalar(arr):
        arr = np.array(arr)
    if not (hasattr(arr, "shape") and hasattr(arr, "dtype")):
        raise TypeError("arr argument must be numpy or other NDArrayLike array")
    mode = kwargs.pop("mode", "a")
    overwrite = bool(kwargs.pop("overwrite", None)) or mode == "w"
    await create(
        arr.shape,
        dtype=element_type(arr.dtype, arr),
        chunks=getattr(arr, "chunks", None),
        store=store,
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        overwrite=overwrite,
        data=arr,
        **kwargs,
    )


async def save_group(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save several NumPy arrays in a new group; see :func:`cuzarr.save_group`."""
    for a in args:
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(
                "All arguments must be numpy or other NDArrayLike arrays (except store, "
                "path, storage_options, and zarr_format)"
            )
    for k, v in kwargs.items():
        if not (hasattr(v, "shape") and hasattr(v, "dtype")):
            raise TypeError(f"Keyword argument '{k}' must be a numpy or other NDArrayLike array")
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    fmt = _format(zarr_format, store)
    sp = make_store_path(store, path, mode="w", storage_options=storage_options)
    await AsyncGroup.create(sp, zarr_format=fmt, overwrite=True)
    items = [(f"arr_{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    await asyncio.gather(
        *(save_array(sp, a, zarr_format=fmt, path=name) for name, a in items)
    )


async def save(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array (``save_array``) or several in a group (``save_group``)."""
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    if len(args) == 1 and not kwargs:
        await save_array(
            store, args[0], zarr_format=zarr_format, path=path, storage_options=storage_options
        )
    else:
        await save_group(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )


async def load(
    *,
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
) -> Any:
    """Read an array (or every array of a group) into memory; see :func:`cuzarr.load`."""
    node = await open(store, mode="r", path=path, zarr_format=zarr_format)
    if isinstance(node, AsyncArray):
        return await node.getitem(Ellipsis)
    out: dict[str, Any] = {}
    for name, child in await node.members():
        if isinstance(child, AsyncArray):
            out[name] = await child.getitem(Ellipsis)
    return out


async def create_hierarchy(
    *, store: Any, nodes: dict[str, Any], overwrite: bool = False
) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
    """Create a hierarchy from metadata alone, as zarr-python's ``create_hierarchy``.

    Parameters
    ----------
    store : store-like
        Where (a path, URL, dict or store).
    nodes : dict
        Path (relative to the store's root; ``''`` is the root) to metadata:
        cuzarr's or zarr-python's ``GroupMetadata`` / array metadata objects, or
        metadata documents as dicts. One Zarr format for all.
    overwrite : bool
        Replace existing nodes named in ``nodes``, each with everything below it
        (else ``ContainsArrayError`` / ``ContainsGroupError`` before anything is
        written). Existing groups where ``nodes`` only implies one are kept as
        they are.

    Yields
    ------
    (str, AsyncArray or AsyncGroup)
        Every node of the hierarchy, explicit or implied (missing ancestors are
        created as groups, up to the root).
    """
    from cuzarr.core.hierarchy import create_hierarchy as make

    sp = make_store_path(store, None, mode="a")
    async for path, meta, node_sp in make(sp, nodes, overwrite):
        if isinstance(meta, ArrayMetadata):
            yield path, AsyncArray(meta, node_sp)
        else:
            yield path, AsyncGroup(meta, node_sp)


def _sync_nodes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
    """The async handles among a copy's arguments as the sync ones the copy
    functions walk (their thread cannot await)."""
    from cuzarr.core.group import Group

    def wrap(x: Any) -> Any:
        if isinstance(x, AsyncArray):
            return Array(x)
        return Group(x) if isinstance(x, AsyncGroup) else x

    return tuple(wrap(a) for a in args), {k: wrap(v) for k, v in kwargs.items()}


async def copy(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy`, awaitable (it runs in a worker thread); sources and
    destinations may be async or sync handles."""
    from cuzarr.copying import copy as copy_nodes

    args, kwargs = _sync_nodes(args, kwargs)
    return await asyncio.to_thread(copy_nodes, *args, **kwargs)


async def copy_all(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy_all`, awaitable (it runs in a worker thread); sources
    and destinations may be async or sync handles."""
    from cuzarr.copying import copy_all as copy_children

    args, kwargs = _sync_nodes(args, kwargs)
    return await asyncio.to_thread(copy_children, *args, **kwargs)


async def copy_store(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy_store`, awaitable (it runs in a worker thread)."""
    from cuzarr.copying import copy_store as copy_keys

    return await asyncio.to_thread(copy_keys, *args, **kwargs)


async def tree(grp: AsyncGroup, expand: bool | None = None, level: int | None = None) -> Any:
    """The hierarchy below ``grp`` as text (zarr-python deprecates this for ``Group.tree``)."""
    warnings.warn("Use Group.tree instead.", DeprecationWarning, stacklevel=2)
    return await grp.tree(expand=expand, level=level)


async def open_like(
    a: Any, path: str, *, zarr_format: int | None = None, **kwargs: Any
) -> AsyncArray:
    """Open the array at ``path`` (the store is ``store=``), creating it like ``a``."""
    like = _like_args(a, _format(zarr_format, kwargs.get("store")))
    like.pop("zarr_format", None)
    kw = {**like, **kwargs}
    if kw.get("mode") is None:
        kw["mode"] = "a"
    store = kw.pop("store", None)
    return await open_array(store, path=path, zarr_format=zarr_format, **kw)


def _like_args(a: Any, zarr_format: int | None) -> dict[str, Any]:
    """``create_array`` arguments for an array like ``a`` (zarr-python's ``_like_args``):
    shape, chunks and dtype; for a cuzarr or zarr-python array its fill value, and its
    order and codecs when ``zarr_format`` is its own."""
    new: dict[str, Any] = {}
    shape = getattr(a, "shape", None)
    if isinstance(shape, tuple):
        new["shape"] = shape
        chunks = getattr(a, "chunks", None)
        if isinstance(chunks, tuple) and len(chunks) == len(shape):
            new["chunks"] = chunks
    if hasattr(a, "dtype"):
        new["dtype"] = a.dtype
    if _is_zarr_array(a):
        new["fill_value"] = a.fill_value
        if zarr_format is None:
            zarr_format = a.metadata.zarr_format
        if a.metadata.zarr_format == zarr_format:
            new["compressors"] = _codecs_arg(a.compressors)
            new["filters"] = _codecs_arg(a.filters)
            if zarr_format == 2:
                new["order"] = a.order
            else:
                new["serializer"] = _codec_arg(a.serializer)
                if a.shards is not None:  # as zeros_like & co.: the shard layout too
                    new["shards"] = a.shards
    if zarr_format is not None:
        new["zarr_format"] = zarr_format
    return new


def _like_create_args(a: Any, zarr_format: int | None) -> dict[str, Any]:
    """:func:`create` arguments for an array like ``a`` (zarr-python's ``_like_args``):
    shape, chunks and dtype; for a cuzarr or zarr-python array also its fill value and,
    when ``zarr_format`` is its own, its order and compressor/filters (v2) or codecs (v3)."""
    new = _like_args(a, zarr_format)
    for k in ("compressors", "filters", "serializer", "order"):
        new.pop(k, None)
    if _is_zarr_array(a) and a.metadata.zarr_format == new.get("zarr_format"):
        if a.metadata.zarr_format == 2:
            new["order"] = a.order
            comps = a.compressors
            new["compressor"] = comps[0] if comps else None
            new["filters"] = list(a.filters) or None
        else:
            new["codecs"] = [_codec_arg(c) for c in a.metadata.codecs]
    return new
