"""Creating arrays: ``create_array`` (from a shape and dtype, or from data),
``from_array`` (settings kept from a source array) and zarr-python's legacy
``create``; the API layer's functions of those names are these."""

from __future__ import annotations

import asyncio
import itertools
import warnings
from typing import Any

import numpy as np

from cuzarr.config import config as cuzarr_config
from cuzarr.core.async_array import AsyncArray, _materialize
from cuzarr.core.build import DEFAULT_FILL, build_array_metadata, check_object_dtype
from cuzarr.core.create_args import (
    apply_config,
    cke_of,
    codec_arg,
    codecs_arg,
    is_zarr_array,
    split_v3_codecs,
    src_attrs,
    warn_unimplemented,
    with_read_missing,
)
from cuzarr.core.modes import FORMAT_DEFAULT, check_mode, zarr_format_for
from cuzarr.core.nodes import ensure_vacant
from cuzarr.errors import ReadOnlyError
from cuzarr.storage.common import make_store_path

__all__ = ["copy_array", "create", "create_array", "create_like_zarr", "from_array", "name_of"]


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
    order, write_empty_chunks = apply_config(config, order, write_empty_chunks)
    args = dict(locals())  # the arguments, with ``config``'s order and write_empty_chunks
    if data is not None:
        _refuse_shape_or_dtype_with_data(shape, dtype)
        return await from_array(store, **{k: args[k] for k in _FROM_ARRAY_ARGS})
    if dtype is None:
        raise ValueError(
            "The data parameter was set to None, but dtype was not specified. Either "
            "provide an array-like value for data, or specify dtype."
        )
    if shape is None:
        raise ValueError("create_array needs shape= (or data=)")
    fmt = zarr_format_for(zarr_format, store)
    check_object_dtype(dtype, fmt, filters, serializer)
    meta = build_array_metadata(zarr_format=fmt, **{k: args[k] for k in _METADATA_ARGS})
    sp = make_store_path(
        store, name, mode="w" if overwrite else "a", storage_options=storage_options
    )
    arr = await AsyncArray.create(
        sp, meta, overwrite=overwrite, write_empty_chunks=write_empty_chunks
    )
    arr.set_prototype(meta_array)
    return with_read_missing(arr, config)


# ``create_array``'s arguments that go on to ``from_array`` (given ``data``) and
# to ``build_array_metadata`` (given a shape and dtype)
_FROM_ARRAY_ARGS = (
    "data", "write_data", "name", "chunks", "shards", "filters", "compressors",
    "serializer", "fill_value", "order", "zarr_format", "attributes",
    "chunk_key_encoding", "dimension_names", "storage_options", "overwrite",
    "write_empty_chunks", "dimension_separator", "meta_array", "config",
)  # fmt: skip
_METADATA_ARGS = (
    "shape", "dtype", "chunks", "shards", "fill_value", "order", "compressors",
    "filters", "serializer", "attributes", "dimension_names", "chunk_key_encoding",
    "dimension_separator", "compressor",
)  # fmt: skip


def _refuse_shape_or_dtype_with_data(shape: Any, dtype: Any) -> None:
    """``create_array(data=...)`` takes the shape and dtype from the data: zarr-python's
    errors for either given too."""
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
    fill_value: Any = DEFAULT_FILL,
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
    order, write_empty_chunks = apply_config(config, order, write_empty_chunks)
    s = dict(locals())  # the settings; "keep" and the defaults are resolved below
    src_is_array = is_zarr_array(data)
    if src_is_array:
        _keep_source_settings(data, s)
    else:
        _plain_data_settings(s, store)
        data = await _materialize(data)
        if not hasattr(data, "dtype") or not hasattr(data, "shape"):
            data = np.array(data)
    s["dtype"], s["shape"] = data.dtype, data.shape
    if s["filters"] == "auto":
        s["filters"] = None
    result = await create_array(store, name, **{k: s[k] for k in _CREATE_ARGS})
    result = with_read_missing(result, config)
    if write_data:
        if src_is_array:
            await copy_array(data, result)
        else:
            await result.setitem(Ellipsis, data)
    return result


# ``from_array``'s settings that go on to ``create_array``
_CREATE_ARGS = (
    "shape", "dtype", "chunks", "shards", "fill_value", "order", "zarr_format",
    "compressors", "filters", "serializer", "attributes", "dimension_names",
    "overwrite", "write_empty_chunks", "chunk_key_encoding", "dimension_separator",
    "storage_options", "meta_array",
)  # fmt: skip


def _keep_source_settings(src: Any, s: dict[str, Any]) -> None:
    """Resolve ``from_array``'s settings ``s`` (in place) for the cuzarr or
    zarr-python array ``src``: "keep" takes its own, its zarr format by default,
    its codecs and key encoding only into an array of the same format."""
    src_fmt = src.metadata.zarr_format
    if s["chunks"] == "keep":
        s["chunks"] = src.chunks
    if s["shards"] == "keep":
        s["shards"] = src.shards
    if s["zarr_format"] is None:
        s["zarr_format"] = src_fmt
    fmt = s["zarr_format"]
    same = fmt == src_fmt
    if s["filters"] == "keep":
        s["filters"] = codecs_arg(src.filters) if same else "auto"
    if s["compressors"] == "keep":
        s["compressors"] = codecs_arg(src.compressors) if same else "auto"
    if s["serializer"] == "keep":
        s["serializer"] = codec_arg(src.serializer) if fmt == 3 and src_fmt == 3 else "auto"
    if s["fill_value"] is DEFAULT_FILL:
        s["fill_value"] = src.fill_value
    if src_fmt == 2 and fmt == 3 and src.order == "F":
        warnings.warn(
            "The 'order' attribute of a Zarr format 2 array does not have a direct "
            "analogue in Zarr format 3. The existing order='F' of the source Zarr "
            "format 2 array will be ignored.",
            UserWarning,
            stacklevel=3,
        )
    elif s["order"] is None and fmt == 2:
        s["order"] = src.order
    if s["chunk_key_encoding"] is None and s["dimension_separator"] is None and same:
        s["chunk_key_encoding"] = cke_of(src)
    if s["dimension_names"] is None and src_fmt == 3:
        s["dimension_names"] = src.metadata.dimension_names
    if s["attributes"] is None:
        s["attributes"] = src_attrs(src)
        if fmt == 3:
            s["attributes"].pop("_ARRAY_DIMENSIONS", None)


def _plain_data_settings(s: dict[str, Any], store: Any) -> None:
    """Resolve ``from_array``'s settings ``s`` (in place) for data that is not a
    Zarr array: nothing to keep, so "keep" means the defaults."""
    s["chunks"] = "auto" if s["chunks"] == "keep" else s["chunks"]
    s["shards"] = None if s["shards"] == "keep" else s["shards"]
    s["zarr_format"] = zarr_format_for(s["zarr_format"], store)
    s["filters"] = None if s["filters"] in ("keep", "auto") else s["filters"]
    s["compressors"] = "auto" if s["compressors"] == "keep" else s["compressors"]
    s["serializer"] = "auto" if s["serializer"] == "keep" else s["serializer"]


async def copy_array(src: Any, dst: AsyncArray) -> None:
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
) -> AsyncArray:
    """Create an array (zarr-python's legacy creation function); see :func:`cuzarr.create`."""
    zarr_format = zarr_format_for(zarr_format, store)
    filters, object_codec = _object_codec_as_filter(object_codec, filters, zarr_format)
    warn_unimplemented(
        synchronizer=synchronizer,
        chunk_store=chunk_store,
        cache_metadata=cache_metadata,
        cache_attrs=cache_attrs,
        object_codec=object_codec,
        read_only=read_only,
    )
    mode = _legacy_mode(mode, store)
    order, write_empty_chunks = apply_config(config, order, write_empty_chunks)
    raw = _legacy_chunks(chunks, chunk_shape)
    shape_t = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if raw is False:
        raw = shape_t  # one chunk
    if zarr_format == 3:
        kw = _v3_codec_args(compressor, filters, codecs, dimension_separator)
        chunk_key_encoding = _cke_from_tuple(chunk_key_encoding)
    elif zarr_format == 2:
        kw = _v2_codec_args(compressor, filters, codecs, chunk_key_encoding, dimension_names)
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


def _legacy_mode(mode: str | None, store: Any) -> str:
    """``create``'s ``mode`` (default ``"a"``), checked: one that creates."""
    mode = "a" if mode is None else mode
    check_mode(mode)
    if mode == "r":
        raise ReadOnlyError(
            f"cannot create an array in {store!r} with mode='r' (use mode='a' or 'w')"
        )
    return mode


def _object_codec_as_filter(object_codec: Any, filters: Any, zarr_format: int) -> tuple[Any, Any]:
    """``create``'s ``filters`` and ``object_codec`` (None where used): in v2, zarr-python
    2's meaning, the object codec is the first filter (zarr 3.4 ignores it with a
    warning, and the array silently becomes a string one)."""
    if object_codec is not None and zarr_format == 2:
        return [object_codec, *(filters or [])], None
    return filters, object_codec


def _cke_from_tuple(cke: Any) -> Any:
    """A v3 chunk key encoding given as zarr-python 2's ``(name, separator)``, as a dict."""
    if isinstance(cke, tuple):
        return {"name": cke[0], "separator": cke[1]}
    return cke


def _legacy_chunks(chunks: Any, chunk_shape: Any) -> Any:
    """``create``'s chunk shape from ``chunks`` or ``chunk_shape``: None is "auto";
    False (one chunk) is left to the caller."""
    if chunks is not None and chunk_shape is not None:
        raise ValueError("Only one of chunk_shape or chunks can be provided.")
    raw = chunks if chunks is not None else chunk_shape
    if raw is True:
        raise ValueError(
            'True is not a valid chunk input. Use chunks=None or chunks="auto" from the '
            "top-level API for auto-chunking, or pass an int / tuple of ints."
        )
    return "auto" if raw is None else raw


def _v3_codec_args(
    compressor: Any, filters: Any, codecs: Any, dimension_separator: str | None
) -> dict[str, Any]:
    """``create_array``'s codec arguments from a v3 ``create``'s ``codecs``,
    refusing the v2 arguments (as zarr-python)."""
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
    return split_v3_codecs(codecs) if codecs is not None else {}


def _v2_codec_args(
    compressor: Any, filters: Any, codecs: Any, chunk_key_encoding: Any, dimension_names: Any
) -> dict[str, Any]:
    """``create_array``'s codec arguments from a v2 ``create``'s ``compressor`` and
    ``filters``, refusing the v3 arguments (as zarr-python)."""
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
    return {"compressors": compressor, "filters": filters}


def name_of(kwargs: dict[str, Any]) -> str | None:
    """Pop the new array's ``name`` from ``kwargs``; ``path`` is accepted for it,
    as zarr-python's ``zeros``/``full``/``array`` (through ``create``) take it."""
    name, path = kwargs.pop("name", None), kwargs.pop("path", None)
    if name is not None and path is not None and name != path:
        raise ValueError(f"give name or path, not both ({name!r}, {path!r})")
    return name if name is not None else path


# Arguments only ``create_array`` takes: with one of them, ``full`` & co. go through
# ``create_array`` (as the sync ``cuzarr.full`` does); otherwise through the legacy
# ``create``, as zarr-python's async ``full`` does (``compressor=``, ``codecs=``...).
_CREATE_ARRAY_ONLY = frozenset({"name", "compressors", "serializer", "shards", "write_data"})


async def create_like_zarr(shape: Any, store: Any, kwargs: dict[str, Any]) -> AsyncArray:
    # v3 filters (array-to-array codecs, as DESIGN.md accepts them for both
    # formats): the legacy ``create`` refuses them, as zarr-python's does.
    v3_filters = (
        kwargs.get("filters") is not None and zarr_format_for(kwargs.get("zarr_format"), store) == 3
    )
    if v3_filters or _CREATE_ARRAY_ONLY.intersection(kwargs):
        kwargs["zarr_format"] = zarr_format_for(kwargs.get("zarr_format"), store)
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = "float64"  # the legacy functions' default
        return await create_array(store, name_of(kwargs), shape=shape, **kwargs)
    return await create(shape, store=store, **kwargs)
