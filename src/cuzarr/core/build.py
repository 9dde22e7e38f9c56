"""Turn ``create_array`` arguments into array metadata (both formats)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, Codec
from cuzarr.codecs.bytes_codec import BytesCodec
from cuzarr.codecs.compressors import ZstdCodec
from cuzarr.codecs.lazy_numcodecs import numcodecs
from cuzarr.codecs.numcodecs_bridge import as_numcodec, as_v3_codec
from cuzarr.codecs.pipeline import pipeline_for
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.codecs.vlen import VLenBytesCodec, VLenUTF8Codec
from cuzarr.config import config
from cuzarr.metadata.array import (
    ArrayMetadata,
    normalize_dimension_names,
    normalize_shape,
)
from cuzarr.metadata.chunk_grid import RectilinearChunkGrid, RegularChunkGrid, expand_rle
from cuzarr.metadata.chunk_key_encoding import ChunkKeyEncoding, parse_chunk_key_encoding
from cuzarr.metadata.dtypes import DataType, parse_data_type

__all__ = ["build_array_metadata", "guess_chunks"]


def guess_chunks(
    shape: tuple[int, ...],
    itemsize: int,
    *,
    min_bytes: int = 128 << 10,
    max_bytes: int = 64 << 20,
    increment_bytes: int = 256 << 10,
) -> tuple[int, ...]:
    """zarr-python's default chunk shape (h5py's rule), so that the same
    ``create_array`` call lays out the same chunks: a target size that grows
    with the array (``increment_bytes`` times 2 to the log10 of its MiB, within
    ``min_bytes`` and ``max_bytes``), reached by halving the dimensions in turn."""
    if not shape:
        return ()
    chunks = [max(1, s) for s in shape]
    if itemsize <= 0:
        return tuple(chunks)
    total = math.prod(chunks) * itemsize  # a Python int: math.log10 takes any size
    target = increment_bytes * 2 ** (math.log10(total) - math.log10(1 << 20))
    target = min(max(target, min_bytes), max_bytes)
    i = 0
    while True:
        size = math.prod(chunks) * itemsize
        if (size < target or abs(size - target) / target < 0.5) and size < max_bytes:
            break
        if math.prod(chunks) == 1:
            break  # one element is larger than max_bytes
        d = i % len(chunks)
        chunks[d] = -(-chunks[d] // 2)
        i += 1
    return tuple(chunks)


# zarr-python's bound on automatic inner chunks of a sharded array
_SHARDED_INNER_MAX_BYTES = 1 << 20


def _normalize_edges(edges: Any, size: int, dim: int, what: str = "chunk") -> tuple[int, ...]:
    """One dimension's edge lengths (ints and ``[value, count]`` pairs), covering ``size``."""
    out = expand_rle(list(edges), dim)
    if sum(out) < size:
        raise ValueError(
            f"{what} edges {list(edges)} of dimension {dim} sum to {sum(out)}, "
            f"less than the extent {size}"
        )
    return out


def _grid(spec: tuple[Any, ...]) -> RegularChunkGrid | RectilinearChunkGrid:
    if any(isinstance(c, tuple) for c in spec):
        return RectilinearChunkGrid(spec)
    return RegularChunkGrid(spec)


def _normalize_chunks(
    chunks: Any, shape: tuple[int, ...], itemsize: int, sharded: bool = False
) -> tuple[int | tuple[int, ...], ...]:
    """Regular chunks (ints), or per-dimension edge lists for a rectilinear grid."""
    if chunks is False:  # zarr-python: one chunk
        return tuple(max(1, s) for s in shape)
    if chunks is None or chunks == "auto" or chunks is True:
        if sharded:
            return guess_chunks(shape, itemsize, max_bytes=_SHARDED_INNER_MAX_BYTES)
        return guess_chunks(shape, itemsize)
    if isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool):
        chunks = (int(chunks),) * len(shape)
    chunks = tuple(chunks)
    if len(chunks) != len(shape):
        raise ValueError(
            f"chunks {chunks} do not match the {len(shape)} dimensions of shape {shape}"
        )
    out: list[int | tuple[int, ...]] = []
    for d, (c, s) in enumerate(zip(chunks, shape, strict=True)):
        if isinstance(c, (list, tuple, np.ndarray)):
            out.append(_normalize_edges(c, s, d))
            continue
        if c is None or c == -1:
            c = max(1, s)
        if not isinstance(c, (int, np.integer)) or isinstance(c, bool) or c < 1:
            raise ValueError(f"chunk sizes must be positive integers, got {chunks}")
        out.append(int(c))
    return tuple(out)


def _normalize_shards(
    shards: Any, chunks: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int | tuple[int, ...], ...]:
    if isinstance(shards, dict):
        shards = shards.get("shape")
    if shards == "auto":
        # zarr-python's rule: 2 inner chunks along every axis that holds more than 8
        shards = tuple(
            c * 2 if max(0, s) // c > 8 else c for c, s in zip(chunks, shape, strict=True)
        )
    if isinstance(shards, (int, np.integer)):
        shards = (int(shards),) * len(shape)
    shards = tuple(shards)
    if len(shards) != len(shape):
        raise ValueError(
            f"shards {shards} do not match the {len(shape)} dimensions of shape {shape}"
        )
    if any(isinstance(s, (list, tuple, np.ndarray)) for s in shards):
        # A rectilinear grid of shards; every edge holds whole inner chunks.
        out: list[int | tuple[int, ...]] = []
        for d, (s, c, n) in enumerate(zip(shards, chunks, shape, strict=True)):
            edges = (
                _normalize_edges(s, n, d, "shard")
                if isinstance(s, (list, tuple, np.ndarray))
                else (int(s),)
            )
            if any(e % c for e in edges):
                raise ValueError(
                    f"shard edges {list(edges)} of dimension {d} must be multiples of the "
                    f"chunk size {c}"
                )
            out.append(int(s) if not isinstance(s, (list, tuple, np.ndarray)) else edges)
        return tuple(out)
    # -1: one shard spanning the axis (in whole chunks), as in zarr-python
    shards = tuple(
        c * max(1, -(-n // c)) if int(s) == -1 else int(s)
        for s, c, n in zip(shards, chunks, shape, strict=True)
    )
    for s, c in zip(shards, chunks, strict=True):
        if s < 1 or s % c:
            raise ValueError(
                f"shard shape {shards} must be a positive multiple of the chunk shape {chunks}"
            )
    return shards


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _v3_codecs(
    dtype: DataType, filters: Any, serializer: Any, compressors: Any
) -> tuple[Codec, ...]:
    aa: list[Codec] = []
    if filters not in (None, "auto"):
        for f in _as_list(filters):
            c = as_v3_codec(f)
            if not isinstance(c, ArrayArrayCodec):
                raise ValueError(f"{c.name!r} is not an array->array codec and cannot be a filter")
            aa.append(c)
    if serializer in (None, "auto"):
        if dtype.kind == "string":
            ab: Codec = VLenUTF8Codec()
        elif dtype.kind == "bytes":
            ab = VLenBytesCodec()
        else:
            ab = BytesCodec("little" if dtype.has_endianness else None)
    else:
        ab = as_v3_codec(serializer)
        if not isinstance(ab, ArrayBytesCodec):
            raise ValueError(
                f"{ab.name!r} is not an array->bytes codec and cannot be the serializer"
            )
    if compressors == "auto":
        bb: list[Codec] = [ZstdCodec(level=0, checksum=False)]
    else:
        bb = []
        for c in _as_list(compressors):
            codec = as_v3_codec(c)
            if not isinstance(codec, BytesBytesCodec):
                raise ValueError(
                    f"{codec.name!r} is not a bytes->bytes codec and cannot be a compressor"
                )
            bb.append(codec)
    return (*aa, ab, *bb)


_OBJECT_CODEC_IDS = ("vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle")


def _v2_object_type(requested: Any, dt: DataType, filters: Any) -> DataType:
    """Check the object codec among v2 ``filters`` against the data type.

    As in zarr-python 2, ``dtype=object`` takes its element type from its object codec
    (``VLenBytes`` makes variable-length bytes). Object codecs cuzarr does not implement
    (JSON, MsgPack, Pickle, VLenArray) are refused rather than chained after a vlen-utf8
    filter that would store every object as its ``str``.
    """
    if filters in (None, "auto"):
        return dt
    ids = [as_numcodec(f).codec_id for f in _as_list(filters)]
    obj = [i for i in ids if i in _OBJECT_CODEC_IDS]
    if not obj:
        return dt
    if len(obj) > 1:
        raise ValueError(f"filters hold more than one object codec: {obj}")
    if obj[0] not in ("vlen-utf8", "vlen-bytes"):
        raise ValueError(
            f"object arrays with the {obj[0]!r} codec are not supported; "
            "use VLenUTF8 (str) or VLenBytes (bytes)"
        )
    if not dt.is_vlen:
        raise ValueError(f"the {obj[0]!r} filter encodes object arrays, not {dt.dtype}")
    want = "vlen-utf8" if dt.kind == "string" else "vlen-bytes"
    if obj[0] == want:
        return dt
    try:
        plain_object = np.dtype(requested).kind == "O"
    except TypeError:
        plain_object = False
    if plain_object:
        return parse_data_type(str if obj[0] == "vlen-utf8" else bytes, 2)
    raise ValueError(f"the {obj[0]!r} filter does not match the data type {requested!r}")


def _plain_object(dtype: Any) -> bool:
    """Whether ``dtype`` is numpy's object dtype as such (``object``, ``"O"``)."""
    if dtype is object:
        return True
    if isinstance(dtype, str | np.dtype):
        try:
            return np.dtype(dtype) == np.dtype(object)
        except TypeError:
            return False
    return False


def element_type(dtype: Any, values: Any = None) -> Any:
    """The data type of an array made from data of ``dtype``: numpy's object dtype
    becomes ``bytes`` where the (numpy) ``values`` are all bytes, ``str``
    otherwise (strings; lazy data). An object dtype a caller *asks for* stays
    refused (:func:`check_object_dtype`); data that holds its values says which."""
    if not _plain_object(dtype):
        return dtype
    if isinstance(values, np.ndarray) and values.size:
        flat = [v for v in values.reshape(-1).tolist() if v is not None]
        if flat and all(isinstance(v, bytes | bytearray) for v in flat):
            return bytes
    return str


def check_object_dtype(dtype: Any, zarr_format: int, filters: Any, serializer: Any) -> None:
    """Refuse ``dtype=object`` without an object codec, as zarr-python does: numpy's
    object dtype names no Zarr data type (strings? bytes?) by itself.

    Raises
    ------
    ValueError
        If ``dtype`` is numpy's object dtype and neither a v2 object filter
        (``VLenUTF8``, ``VLenBytes``) nor a v3 ``vlen-utf8``/``vlen-bytes``
        serializer says which data type it is.
    """
    if not _plain_object(dtype):
        return
    if zarr_format == 2 and filters not in (None, "auto"):
        ids = [as_numcodec(f).codec_id for f in _as_list(filters)]
        if any(i in _OBJECT_CODEC_IDS for i in ids):
            return
    if (
        zarr_format == 3
        and serializer not in (None, "auto")
        and getattr(as_v3_codec(serializer), "name", None) in ("vlen-utf8", "vlen-bytes")
    ):
        return
    raise ValueError(
        "dtype=object is ambiguous: numpy's object dtype can hold the values of several "
        "Zarr data types. Give dtype=str (variable-length strings) or dtype=bytes "
        "(variable-length bytes), or an object codec that says which: "
        + (
            "filters=[numcodecs.VLenUTF8()] or [numcodecs.VLenBytes()]"
            if zarr_format == 2
            else "serializer='vlen-utf8' or 'vlen-bytes'"
        )
    )


def _v2_codecs(
    dtype: DataType, filters: Any, compressors: Any
) -> tuple[tuple[Any, ...] | None, Any]:
    if compressors == "auto":
        compressor = numcodecs().Zstd(level=0)
    else:
        cl = _as_list(compressors)
        if len(cl) > 1:
            raise ValueError("Zarr v2 arrays take at most one compressor")
        compressor = as_numcodec(cl[0]) if cl else None
    flist = [] if filters in (None, "auto") else [as_numcodec(f) for f in _as_list(filters)]
    if dtype.is_vlen:
        want = "vlen-utf8" if dtype.kind == "string" else "vlen-bytes"
        if want not in [f.codec_id for f in flist]:
            flist.insert(0, numcodecs().get_codec({"id": want}))
    return (tuple(flist) if flist else None), compressor


class _DefaultFill:
    """Sentinel: no fill value given. The data type's default then, where an
    explicit ``None`` in Zarr v2 is stored as ``null`` (as zarr-python does;
    readers such as xarray take a v2 fill value for missing data)."""

    def __repr__(self) -> str:
        return "<default fill value>"


DEFAULT_FILL: Any = _DefaultFill()


def build_array_metadata(
    *,
    shape: Any,
    dtype: Any,
    chunks: Any = "auto",
    shards: Any = None,
    fill_value: Any = DEFAULT_FILL,
    order: str | None = None,
    zarr_format: int = 3,
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    attributes: dict[str, Any] | None = None,
    dimension_names: Any = None,
    chunk_key_encoding: Any = None,
    dimension_separator: str | None = None,
    compressor: Any = "unset",
) -> ArrayMetadata:
    """Validate ``create_array`` arguments and build the metadata they describe."""
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if compressor != "unset":
        compressors = compressor
    shape = normalize_shape(shape)
    dt = parse_data_type(dtype, zarr_format)
    if zarr_format == 2:
        dt = _v2_object_type(dtype, dt, filters)
    if zarr_format == 2 and not dt.is_vlen and dt.dtype.byteorder == "=":
        dt = DataType(dt.kind, dt.dtype.newbyteorder("<"), dt.v3_name)
    chunk_shape = _normalize_chunks(
        chunks, shape, dt.item_size if not dt.is_vlen else 1, sharded=shards is not None
    )
    # as zarr-python: no order given is the global ``array.order``
    order = order or config.get("array.order") or "C"
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    fill = _fill(dt, fill_value, zarr_format)
    attrs = dict(attributes or {})
    names = normalize_dimension_names(dimension_names, len(shape))
    common = {"shape": shape, "dtype": dt, "fill_value": fill, "attributes": attrs,
              "dimension_names": names, "order": order}  # fmt: skip
    if zarr_format == 3:
        if chunk_key_encoding is None and dimension_separator is not None:
            cke = ChunkKeyEncoding("default", dimension_separator)
        else:
            cke = parse_chunk_key_encoding(chunk_key_encoding, 3)
        codecs = _v3_codecs(dt, filters, serializer, compressors)
        return _v3_metadata(common, chunk_shape, shards, codecs, cke)
    if shards is not None:
        raise ValueError("sharding needs Zarr v3 (zarr_format=3)")
    if serializer not in (None, "auto"):
        raise ValueError("Zarr v2 arrays have no serializer; use filters and compressors")
    if chunk_key_encoding is not None:
        cke = parse_chunk_key_encoding(chunk_key_encoding, 2)
        if cke.name != "v2":
            raise ValueError("Zarr v2 arrays use the 'v2' chunk key encoding")
    else:
        cke = ChunkKeyEncoding("v2", dimension_separator or ".")
    flt, comp = _v2_codecs(dt, filters, compressors)
    if names is not None:
        attrs.setdefault("_ARRAY_DIMENSIONS", list(names))
    return ArrayMetadata(
        zarr_format=2,
        chunk_grid=_grid(chunk_shape),
        chunk_key_encoding=cke,
        filters=flt,
        compressor=comp,
        **common,
    )


def _fill(dt: DataType, fill_value: Any, zarr_format: int) -> Any:
    """The fill value ``create_array`` stores for ``fill_value``."""
    if fill_value is DEFAULT_FILL or (fill_value is None and zarr_format == 3):
        return dt.default_fill()
    if fill_value is None:
        return None  # v2 "fill_value": null (reads as the type's default)
    return dt.cast_fill(fill_value)


def _v3_metadata(
    common: dict[str, Any], chunk_shape: Any, shards: Any, codecs: tuple[Any, ...], cke: Any
) -> ArrayMetadata:
    """v3 metadata: sharded when ``shards`` is given, codecs evolved against the
    data type (e.g. blosc's typesize) as they are stored."""
    grid_shape = chunk_shape
    if shards is not None:
        if any(isinstance(c, tuple) for c in chunk_shape):
            raise ValueError(
                "the inner chunks of a sharded array must be regular; give variable "
                "edges as shards=[[...], ...] instead"
            )
        grid_shape = _normalize_shards(shards, chunk_shape, common["shape"])
        # shards={"shape": ..., "index_location": "start"}: as zarr-python
        loc = (shards.get("index_location") if isinstance(shards, dict) else None) or "end"
        codecs = (ShardingCodec(chunk_shape, codecs, index_location=loc),)
    meta = ArrayMetadata(
        zarr_format=3, chunk_grid=_grid(grid_shape), chunk_key_encoding=cke, codecs=codecs, **common
    )
    pipe = pipeline_for(meta)
    evolved = tuple(pipe.codecs)
    if len(evolved) == len(codecs) and all(a is b for a, b in zip(evolved, codecs)):
        return meta  # nothing evolved: keep the pipeline already built with it
    return meta.evolve(codecs=evolved)
