"""The arguments of array creation: the zarr format and mode asked for, the
runtime config, and the settings an array "like" another takes from it."""

from __future__ import annotations

import copy as _copy
import warnings
from typing import Any

from cuzarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, Codec
from cuzarr.codecs.lazy_numcodecs import is_numcodec
from cuzarr.codecs.numcodecs_bridge import as_v3_codec
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.array_config import config_dict, parse_array_config
from cuzarr.core.build import element_type


def warn_unimplemented(**kwargs: Any) -> None:
    """Warn, as zarr-python does, for each legacy argument given that has no effect."""
    for name, value in kwargs.items():
        if value is not None:
            warnings.warn(f"{name} is not yet implemented", RuntimeWarning, stacklevel=3)


def apply_config(
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


def with_read_missing(arr: AsyncArray, config: Any) -> AsyncArray:
    """``arr`` with the ``read_missing_chunks`` key of ``config``, where it has one."""
    if config is None:
        return arr
    given = config_dict(config)
    missing = given.get("read_missing_chunks")
    if missing is None or missing == arr.config.read_missing_chunks:
        return arr
    return arr.with_config({"read_missing_chunks": missing})


def is_zarr_array(x: Any) -> bool:
    """True for a cuzarr or zarr-python array (whose settings ``"keep"`` copies)."""
    if isinstance(x, (Array, AsyncArray)):
        return True
    mod = type(x).__module__
    return mod.startswith("zarr.") and hasattr(x, "metadata") and hasattr(x, "chunks")


def codec_arg(c: Any) -> Any:
    """A codec of a cuzarr or zarr-python array, in a form ``create_array`` accepts."""
    if isinstance(c, Codec) or is_numcodec(c) or not hasattr(c, "to_dict"):
        return c
    return c.to_dict()


def codecs_arg(cs: Any) -> Any:
    if not cs:
        return None
    return [codec_arg(c) for c in cs]


def cke_of(src: Any) -> dict[str, Any]:
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


def src_attrs(src: Any) -> dict[str, Any]:
    attrs = src.attrs
    d = attrs.asdict() if hasattr(attrs, "asdict") else dict(attrs)
    return _copy.deepcopy(d)


def split_v3_codecs(codecs: Any) -> dict[str, Any]:
    """``filters``, ``serializer`` and ``compressors`` from a v3 ``codecs`` list."""
    parsed = [as_v3_codec(codec_arg(c)) for c in codecs]
    aa = [c for c in parsed if isinstance(c, ArrayArrayCodec)]
    ab = [c for c in parsed if isinstance(c, ArrayBytesCodec)]
    bb = [c for c in parsed if isinstance(c, BytesBytesCodec)]
    if len(ab) != 1 or parsed != [*aa, *ab, *bb]:
        raise ValueError(
            "codecs must be array->array codecs, then one array->bytes codec, then "
            f"bytes->bytes codecs; got {[c.name for c in parsed]}"
        )
    return {"filters": aa or None, "serializer": ab[0], "compressors": bb or None}


def like_kwargs(a: Any, kwargs: dict[str, Any], keep_fill: bool = False) -> dict[str, Any]:
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
    if is_zarr_array(a):
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
            kwargs.setdefault("compressors", codecs_arg(a.compressors))
            if same_dtype:  # filters and serializer depend on the dtype
                kwargs.setdefault("filters", codecs_arg(a.filters))
                if fmt == 3:
                    kwargs.setdefault("serializer", codec_arg(a.serializer))
    return kwargs


def like_args(a: Any, zarr_format: int | None) -> dict[str, Any]:
    """``create_array`` arguments for an array like ``a`` (zarr-python's ``like_args``):
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
    if is_zarr_array(a):
        new["fill_value"] = a.fill_value
        if zarr_format is None:
            zarr_format = a.metadata.zarr_format
        if a.metadata.zarr_format == zarr_format:
            new["compressors"] = codecs_arg(a.compressors)
            new["filters"] = codecs_arg(a.filters)
            if zarr_format == 2:
                new["order"] = a.order
            else:
                new["serializer"] = codec_arg(a.serializer)
                if a.shards is not None:  # as zeros_like & co.: the shard layout too
                    new["shards"] = a.shards
    if zarr_format is not None:
        new["zarr_format"] = zarr_format
    return new


def like_create_args(a: Any, zarr_format: int | None) -> dict[str, Any]:
    """:func:`create` arguments for an array like ``a`` (zarr-python's ``like_args``):
    shape, chunks and dtype; for a cuzarr or zarr-python array also its fill value and,
    when ``zarr_format`` is its own, its order and compressor/filters (v2) or codecs (v3)."""
    new = like_args(a, zarr_format)
    for k in ("compressors", "filters", "serializer", "order"):
        new.pop(k, None)
    if is_zarr_array(a) and a.metadata.zarr_format == new.get("zarr_format"):
        if a.metadata.zarr_format == 2:
            new["order"] = a.order
            comps = a.compressors
            new["compressor"] = comps[0] if comps else None
            new["filters"] = list(a.filters) or None
        else:
            new["codecs"] = [codec_arg(c) for c in a.metadata.codecs]
    return new
