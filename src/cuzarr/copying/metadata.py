"""The metadata of a copy of an array (:func:`destination_metadata`): new chunks,
shards or compressors, and conversion between Zarr v2 and v3, keeping whatever
the options do not change."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec
from cuzarr.codecs.bytes_codec import BytesCodec
from cuzarr.codecs.lazy_numcodecs import numcodecs
from cuzarr.codecs.numcodecs_bridge import _NumcodecsMixin, as_numcodec, as_v3_codec
from cuzarr.codecs.pipeline import pipeline_for
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.codecs.transpose import TransposeCodec
from cuzarr.core.build import build_array_metadata
from cuzarr.metadata.array import check_sharded_edges
from cuzarr.metadata.chunk_grid import RegularChunkGrid
from cuzarr.metadata.dtypes import DataType
from cuzarr.metadata.xarray_fill import decode_fill_attr, encode_fill_attr

__all__ = ["destination_metadata"]


# Checksums are no compression: ``--compressor`` replaces the compressors and
# keeps these, so a copy stays as well guarded as its source.
_CHECKSUMS = frozenset(
    {
        "crc32c",
        "numcodecs.crc32",
        "numcodecs.crc32c",
        "numcodecs.adler32",
        "numcodecs.fletcher32",
        "numcodecs.jenkins_lookup3",
    }
)
# Configuration keys of numcodecs filters that hold a data type.
_DTYPE_KEYS = ("dtype", "astype", "encode_dtype", "decode_dtype")
# v2 filters that encode objects: in v3 the serializer does that, chosen by the data type.
_OBJECT_CODEC_IDS = frozenset(
    {"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle"}
)


class _SourceCodecs:
    """A v3 array's codecs, split around its array->bytes codec.

    ``aa``/``ab``/``bb`` encode one chunk (one inner chunk when sharded);
    ``wrap_aa``/``wrap_bb`` are the codecs outside a sharding codec (whole shards);
    ``sharding`` is that codec, or ``None``.
    """

    def __init__(self, codecs: Sequence[Any]) -> None:

        def split(cs: Sequence[Any]) -> tuple[tuple[Any, ...], Any, tuple[Any, ...]]:
            i = next(i for i, c in enumerate(cs) if isinstance(c, ArrayBytesCodec))
            return tuple(cs[:i]), cs[i], tuple(cs[i + 1 :])

        aa, ab, bb = split(codecs)
        self.sharding = ab if isinstance(ab, ShardingCodec) else None
        if self.sharding is not None:
            self.wrap_aa, self.wrap_bb = aa, bb
            self.aa, self.ab, self.bb = split(self.sharding.codecs)
        else:
            self.wrap_aa, self.wrap_bb = (), ()
            self.aa, self.ab, self.bb = aa, ab, bb


def _grid_spec(grid: Any) -> tuple[Any, ...]:
    """A chunk grid as ``create_array`` takes it: sizes, or per-dimension edges."""

    return tuple(grid.chunk_shape if isinstance(grid, RegularChunkGrid) else grid.chunk_shapes)


def _fmt_shape(spec: Sequence[Any]) -> str:
    return ",".join(str(list(s)) if isinstance(s, tuple) else str(s) for s in spec)


def _holds_whole_chunks(shards: Sequence[Any], chunks: Sequence[Any]) -> bool:
    """Whether every shard edge is a multiple of the (regular) chunk size."""
    for s, c in zip(shards, chunks, strict=True):
        if isinstance(c, tuple):
            return False  # variable inner chunks: sharding needs regular ones
        if any(e % c for e in (s if isinstance(s, tuple) else (s,))):
            return False
    return True


def _v2_filters_as_v3(meta: Any) -> tuple[list[Any], list[Any]]:
    """A v2 array's memory order and filters as v3 codecs: (array->array codecs,
    bytes->bytes codecs to run before the compressor)."""

    aa: list[Any] = []
    bb: list[Any] = []
    if meta.order == "F" and meta.ndim > 1:
        # v2 "F" stores each chunk in Fortran order: v3 says it with a transpose
        aa.append(TransposeCodec(tuple(range(meta.ndim - 1, -1, -1))))
    for f in meta.filters or ():
        if f.codec_id in _OBJECT_CODEC_IDS:
            continue
        conf = f.get_config()
        if any(isinstance(conf.get(k), str) and conf[k].startswith(">") for k in _DTYPE_KEYS):
            # A numcodecs filter on big-endian values reads back wrong in v3 (in
            # zarr-python as in cuzarr): the same filter on the values in little
            # endian; the serializer keeps the stored byte order.
            conf.update(
                {k: "<" + conf[k][1:] for k in _DTYPE_KEYS if str(conf.get(k, "")).startswith(">")}
            )
            f = numcodecs().get_codec(conf)
        c = as_v3_codec(f)
        if isinstance(c, ArrayArrayCodec):
            aa.append(c)
        elif isinstance(c, BytesBytesCodec):
            bb.append(c)
    return aa, bb


def _v3_codecs_as_v2(meta: Any, parts: _SourceCodecs) -> tuple[str, list[Any], list[Any]]:
    """A v3 array's chunk codecs as v2 (order, filters, compressors).

    A leading transpose that reverses the axes is v2's order "F"; numcodecs
    filters stay filters. Other array->array codecs (another transpose,
    scale_offset, cast_value) have no v2 form: the values are stored as they read.
    Checksums have no place after a v2 compressor and are left out, and so is a
    serializer other than ``bytes`` or vlen (v2 has the data type's own).
    """

    aa = list(parts.aa)
    order = "C"
    if (
        aa
        and meta.ndim > 1
        and isinstance(aa[0], TransposeCodec)
        and tuple(aa[0].order) == tuple(range(meta.ndim - 1, -1, -1))
    ):
        order, aa = "F", aa[1:]
    filters = [as_numcodec(c) for c in aa if isinstance(c, _NumcodecsMixin)]
    compressors = [as_numcodec(c) for c in parts.bb if c.name not in _CHECKSUMS]
    return order, filters, compressors


def destination_metadata(
    src: Any,
    *,
    zarr_format: int | None = None,
    chunks: Sequence[int] | None = None,
    shards: Sequence[int] | str | None = None,
    compressor: Any = "source",
) -> Any:
    """The metadata of a copy of ``src``, checked, without writing anything.

    Everything the options do not change is kept: filters, serializer, memory
    order (v2 ``order``; a reversing ``transpose`` across formats), byte order,
    chunk key encoding / dimension separator, fill value, attributes, dimension
    names, compressors and checksums, and the sharding layout with its index
    codecs and the codecs around it. A copy that changes nothing takes the
    source's metadata as it is. Across formats, what the other format cannot say
    is left out where the data reads the same without it (see
    ``_v3_codecs_as_v2``), and xarray's missing-data value is converted
    (``_convert_xarray_fill``).

    Parameters
    ----------
    src : Array
        The source array.
    zarr_format : {2, 3}, optional
        The destination's format (default: the source's).
    chunks : sequence of int, optional
        New (inner) chunk shape; ``-1`` spans a whole dimension. Default: the source's.
    shards : sequence of int or "none", optional
        New shard shape (``-1``: one shard along the dimension), or ``"none"`` for
        no sharding. Default: the source's sharding, which must then hold whole
        chunks of ``chunks``.
    compressor : codec, None or "source"
        Replaces the source's compressors (checksums stay); ``None``: no
        compression; ``"source"``: keep them.

    Returns
    -------
    ArrayMetadata

    Raises
    ------
    ValueError
        If the options do not fit the array (``--shards`` for v2, shards that do
        not hold whole chunks, more compressors than v2 takes, ...).
    """
    meta = src.metadata
    fmt = zarr_format or meta.zarr_format
    parts = _SourceCodecs(meta.codecs) if meta.zarr_format == 3 else None
    sharding = parts.sharding if parts is not None else None
    src_layout = _layout(meta, sharding)
    new_chunks = src_layout[0] if chunks is None else _new_chunks(chunks, meta.shape)
    new_shards = _new_shards(fmt, shards, src_layout[1], new_chunks)
    if (
        fmt == meta.zarr_format
        and compressor == "source"
        and (new_chunks, new_shards) == src_layout
    ):
        # The source's own metadata, verbatim: also extension fields cuzarr does
        # not know, which may describe the layout (so they go when it changes).
        return meta.evolve(attributes=copy.deepcopy(dict(meta.attributes)))
    _refuse_outer_array_codecs(parts)
    attrs = copy.deepcopy(dict(meta.attributes))
    fill = meta.fill_value
    if fmt != meta.zarr_format:
        fill, attrs = _convert_xarray_fill(src, fmt, fill, attrs)
    if fmt == 3:
        kw, dtype = _v3_codec_options(meta, parts, compressor, new_shards), meta.dtype
        if meta.dimension_names is not None:
            attrs.pop("_ARRAY_DIMENSIONS", None)  # v2's way of naming them: v3 has its own
    else:
        kw, dtype = _v2_codec_options(meta, parts, compressor)
    new = build_array_metadata(
        shape=meta.shape, dtype=dtype, chunks=new_chunks, shards=new_shards, fill_value=fill,
        zarr_format=fmt, attributes=attrs, dimension_names=meta.dimension_names, **kw,
    )  # fmt: skip
    if new_shards is not None and sharding is not None:
        new = _keep_index_codecs(new, sharding, parts)
    return new


def _new_chunks(chunks: Sequence[int], shape: tuple[int, ...]) -> tuple[int, ...]:
    """``--chunks``, with -1 as the whole dimension."""
    return tuple(max(1, n) if c == -1 else c for c, n in zip(chunks, shape, strict=True))


def _refuse_outer_array_codecs(parts: Any) -> None:
    if parts is not None and parts.wrap_aa:
        raise ValueError(
            "it has array->array codecs outside its sharding codec, which a copy "
            "keeps only as they are: copy it without --chunks, --shards, --compressor "
            "and --zarr-format"
        )


def _layout(meta: Any, sharding: Any) -> tuple[Any, Any]:
    """The source's (inner) chunk shape and shard shape (None: not sharded)."""
    if sharding:
        return tuple(sharding.chunk_shape), _grid_spec(meta.chunk_grid)
    return _grid_spec(meta.chunk_grid), None


def _new_shards(
    fmt: int, shards: Any, src_shards: tuple[int, ...] | None, new_chunks: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The copy's shard shape: as asked, else the source's (which must hold whole
    new chunks), else none."""
    if shards not in (None, "none") and fmt != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    if fmt == 2 or shards == "none":
        return None
    if shards is not None:
        return tuple(shards)
    if src_shards is None:
        return None
    if not _holds_whole_chunks(src_shards, new_chunks):
        raise ValueError(
            f"its shards ({_fmt_shape(src_shards)}) do not hold whole chunks of "
            f"{_fmt_shape(new_chunks)}: give --shards a multiple of the chunks, or "
            "--shards none for no sharding"
        )
    return src_shards


def _v3_codec_options(meta: Any, parts: Any, compressor: Any, new_shards: Any) -> dict[str, Any]:
    """``build_array_metadata`` codec options of a v3 copy of ``meta``."""
    dtype = meta.dtype
    if parts is not None:
        aa, ab, bb = list(parts.aa), parts.ab, list(parts.bb)
        cke: Any = meta.chunk_key_encoding
    else:
        aa, bb = _v2_filters_as_v3(meta)
        ab = "auto"
        if meta.compressor is not None:
            bb.append(as_v3_codec(meta.compressor))
        if dtype.dtype.byteorder == ">" and dtype.has_endianness and dtype.dtype.fields is None:
            ab = BytesCodec("big")  # the byte order the v2 data type kept
        cke = {"name": "default", "separator": meta.chunk_key_encoding.separator}
    if compressor != "source":
        checksums = [c for c in bb if c.name in _CHECKSUMS]
        bb = [*([] if compressor is None else [compressor]), *checksums]
    if new_shards is None and parts is not None:
        bb.extend(parts.wrap_bb)  # whole-shard codecs now see whole chunks
    return {
        "filters": aa or None,
        "serializer": ab,
        "compressors": bb or None,
        "chunk_key_encoding": cke,
    }


def _v2_codec_options(meta: Any, parts: Any, compressor: Any) -> tuple[dict[str, Any], Any]:
    """``build_array_metadata`` codec options of a v2 copy of ``meta``, and its
    data type (big-endian where the v3 source stored big-endian bytes)."""
    dtype = meta.dtype
    if parts is None:
        order, filters = meta.order, list(meta.filters or ())
        comps = [meta.compressor] if meta.compressor is not None else []
    else:
        order, filters, comps = _v3_codecs_as_v2(meta, parts)
        if (
            isinstance(parts.ab, BytesCodec)
            and parts.ab.endian == "big"
            and dtype.has_endianness
            and dtype.dtype.fields is None
        ):
            dtype = DataType(dtype.kind, dtype.dtype.newbyteorder(">"), dtype.v3_name)
    if compressor != "source":
        comps = [] if compressor is None else [compressor]
    if len(comps) > 1:
        raise ValueError(
            f"a Zarr v2 array takes one compressor, and it has {len(comps)} "
            f"({', '.join(c.codec_id for c in comps)}): choose one with --compressor"
        )
    kw = {
        "filters": filters or None,
        "compressors": comps or None,
        "order": order,
        "dimension_separator": meta.chunk_key_encoding.separator,
    }
    return kw, dtype


def _keep_index_codecs(new: Any, sharding: Any, parts: Any) -> Any:
    """``new`` with the source's shard index codecs and place, and its
    whole-shard codecs (create_array makes the default index: bytes + crc32c,
    at the end)."""
    made = new.codecs[0]
    resharded = ShardingCodec(
        made.chunk_shape, made.codecs, sharding.index_codecs, sharding.index_location
    )
    new = new.evolve(codecs=(resharded, *parts.wrap_bb))
    pipeline = pipeline_for(new)
    check_sharded_edges(new, pipeline)
    return new.evolve(codecs=tuple(pipeline.codecs))


def _is_nan(value: Any) -> bool:
    try:
        return bool(np.isnan(value))
    except (TypeError, ValueError):
        return False


def _convert_xarray_fill(src: Any, fmt: int, fill: Any, attrs: dict[str, Any]) -> tuple[Any, dict]:
    """Keep what xarray masks across a format conversion: it takes a v2 array's
    ``fill_value`` as the missing-data value, and in v3 a ``_FillValue``
    attribute instead (:mod:`cuzarr.metadata.xarray_fill`). Only arrays xarray
    wrote (named dimensions) are converted; others keep fill value and attributes."""
    if src.metadata.dimension_names is None:
        return fill, attrs
    dtype = np.dtype(src.dtype)
    if fmt == 2:
        if "_FillValue" not in attrs:
            # no missing-data value: a v2 fill value would become one (xarray
            # writes null there itself). NaN stays: masking NaN changes no value,
            # and with null the chunks never written (NaN) would have to be
            # written out as NaN to read the same.
            if _is_nan(fill):
                return fill, attrs
            return None, attrs
        value = decode_fill_attr(attrs["_FillValue"], dtype)
        try:
            np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            return None, attrs  # not xarray's encoding: the attribute stays as it was
        if isinstance(value, str) and dtype.kind not in "US":
            return None, attrs
        del attrs["_FillValue"]
        return value, attrs
    if fmt == 3 and fill is not None and "_FillValue" not in attrs:
        coded = encode_fill_attr(fill, dtype)
        if coded is not None:
            attrs["_FillValue"] = coded
    return fill, attrs
