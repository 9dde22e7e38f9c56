"""Array metadata for Zarr v3 (``zarr.json``) and v2 (``.zarray`` + ``.zattrs``)."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cuzarr.config import config
from cuzarr.errors import MetadataError, UnsupportedExtensionError
from cuzarr.metadata.chunk_grid import (
    RectilinearChunkGrid,
    RegularChunkGrid,
    parse_chunk_grid,
    parse_v2_chunks,
)
from cuzarr.metadata.chunk_key_encoding import ChunkKeyEncoding, parse_chunk_key_encoding
from cuzarr.metadata.dtypes import DataType, from_json_v2, from_json_v3
from cuzarr.metadata.jsontext import dumps_indented

__all__ = ["ArrayMetadata", "json_dumps", "parse_array_metadata_v2", "parse_array_metadata_v3"]

_V3_ARRAY_KEYS = {
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
}


def _runtime_order() -> str:
    order = config.get("array.order", "C") or "C"
    if order not in ("C", "F"):
        raise ValueError(f"config array.order must be 'C' or 'F', got {order!r}")
    return order


def json_dumps(obj: Any) -> bytes:
    """Serialize metadata as UTF-8 JSON (non-ASCII kept as text), NaN refused."""
    indent = config.get("json_indent")
    try:
        if isinstance(indent, int) and not isinstance(indent, bool):
            return dumps_indented(obj, indent).encode("utf-8")
        return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except RecursionError as e:
        # attributes read back from a document nested almost to the parser's limit
        raise MetadataError("metadata is nested too deeply to write as JSON") from e


def json_loads(data: bytes, key: str) -> Any:
    """Parse a metadata document, raising ``MetadataError`` naming ``key``."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataError(f"{key}: malformed JSON ({e})") from e
    except RecursionError as e:
        # the json module parses nested arrays and objects recursively
        raise MetadataError(f"{key}: JSON nested too deeply to parse") from e


@dataclass(frozen=True)
class ArrayMetadata:
    """Everything stored about an array, for either format.

    ``codecs`` holds cuzarr codec objects (v3); ``filters``/``compressor`` hold
    numcodecs codecs (v2). ``fill_value`` is a decoded scalar, or ``None`` for a
    v2 array without one.
    """

    zarr_format: int
    shape: tuple[int, ...]
    dtype: DataType
    chunk_grid: RegularChunkGrid | RectilinearChunkGrid
    fill_value: Any
    chunk_key_encoding: ChunkKeyEncoding
    attributes: dict[str, Any] = field(default_factory=dict)
    codecs: tuple[Any, ...] = ()
    dimension_names: tuple[str | None, ...] | None = None
    order: str = "C"
    filters: tuple[Any, ...] | None = None
    compressor: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    # runtime setting, never stored (as ``order`` for v3): whether reading a chunk
    # that is not stored fills it (True), raises (False), or follows the global
    # ``array.read_missing_chunks`` (None)
    read_missing_chunks: bool | None = field(default=None, compare=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The chunk shape; for a rectilinear grid, the largest chunk per dimension."""
        return self.chunk_grid.chunk_shape

    # zarr-python's ArrayV3Metadata / ArrayV2Metadata names
    @property
    def node_type(self) -> str:
        return "array"

    @property
    def data_type(self) -> DataType:
        """The data type (zarr-python's name for :attr:`dtype`)."""
        return self.dtype

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape, the inner one of a sharded array (zarr-python's
        ``metadata.chunks``)."""
        for codec in self.codecs:
            if getattr(codec, "name", None) == "sharding_indexed":
                return tuple(codec.chunk_shape)
        return self.chunk_shape

    @property
    def read_fill(self) -> Any:
        """The value missing chunks read as."""
        return self.dtype.default_fill() if self.fill_value is None else self.fill_value

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        return self.chunk_key_encoding.encode(coords)

    def evolve(self, **changes: Any) -> ArrayMetadata:
        return replace(self, **changes)

    def __getstate__(self) -> dict[str, Any]:
        # pickles (dask tasks) carry the fields only: what other layers cached on
        # this object (the codec pipeline, codecs.pipeline.pipeline_for) is rebuilt
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    # -- serialization -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this array (v3 ``zarr.json`` / v2 ``.zarray``)."""
        if self.zarr_format == 3:
            d: dict[str, Any] = {
                "shape": list(self.shape),
                "data_type": self.dtype.to_json_v3(),
                "chunk_grid": self.chunk_grid.to_json(),
                "chunk_key_encoding": self.chunk_key_encoding.to_json(),
                "fill_value": self.dtype.fill_to_json(self.read_fill, 3),
                "codecs": [c.to_json() for c in self.codecs],
                "attributes": self.attributes,
                "zarr_format": 3,
                "node_type": "array",
                "storage_transformers": [],
            }
            if self.dimension_names is not None:
                d["dimension_names"] = list(self.dimension_names)
            d.update(self.extra)
            return d
        d = {
            "shape": list(self.shape),
            "chunks": self.chunk_grid.to_v2_json(),
            "dtype": self.dtype.to_json_v2(),
            "fill_value": self.dtype.fill_to_json(self.fill_value, 2),
            "order": self.order,
            "filters": [v2_codec_config(f) for f in self.filters] if self.filters else None,
            "compressor": v2_codec_config(self.compressor) if self.compressor is not None else None,
            "dimension_separator": self.chunk_key_encoding.separator,
            "zarr_format": 2,
        }
        d.update(self.extra)
        return d

    def to_documents(self) -> dict[str, bytes]:
        """Metadata documents to store, keyed by their name inside the node."""
        if self.zarr_format == 3:
            return {"zarr.json": json_dumps(self.to_dict())}
        docs = {".zarray": json_dumps(self.to_dict())}
        if self.attributes:
            docs[".zattrs"] = json_dumps(self.attributes)
        return docs


def v2_codec_config(codec: Any) -> dict[str, Any]:
    """A numcodecs codec's config as zarr-python writes it in ``.zarray``.

    numcodecs >= 0.16 adds ``checksum: false`` to zstd configs; zarr-python and
    tensorstore omit it (tensorstore rejects unknown members), so drop it.
    """
    conf = dict(codec.get_config())
    if conf.get("id") == "zstd" and not conf.get("checksum", False):
        conf.pop("checksum", None)
    return conf


def _parse_shape(value: Any, what: str = "shape") -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value
    ):
        raise MetadataError(f"{what} must be a list of non-negative integers, got {value!r}")
    return tuple(value)


def _check_extension(key: str, value: Any) -> None:
    if isinstance(value, dict) and value.get("must_understand") is False:
        return
    raise UnsupportedExtensionError(
        f"zarr.json has the extension field {key!r}, which cuzarr does not support "
        "(and it is not marked must_understand: false)"
    )


# How codec documents become codec objects, and how an array's codecs are
# checked against its data type: registered by the codecs layer (above this
# one) when it is imported, so that metadata imports no codec.
_codec_support: tuple[Any, Any] | None = None


def register_codec_support(parse: Any, check: Any) -> None:
    """Register ``parse(codec document) -> codec`` and ``check(ArrayMetadata)``
    (raising ``MetadataError``): done by :mod:`cuzarr.codecs` on import."""
    global _codec_support
    _codec_support = (parse, check)


def check_v3_document(d: Any, node_type: str) -> None:
    """Raise ``MetadataError`` unless ``d`` is a ``zarr.json`` object of zarr format 3
    for a node of ``node_type`` (``"array"`` or ``"group"``)."""
    if not isinstance(d, dict):
        raise MetadataError("zarr.json must hold a JSON object")
    if d.get("zarr_format") != 3:
        raise MetadataError(f"zarr.json: zarr_format must be 3, got {d.get('zarr_format')!r}")
    if d.get("node_type") != node_type:
        raise MetadataError(f"zarr.json: node_type is {d.get('node_type')!r}, not {node_type!r}")


def parse_array_metadata_v3(d: Any) -> ArrayMetadata:
    """Validate and parse an array ``zarr.json`` document."""
    if _codec_support is None:  # pragma: no cover - cuzarr's __init__ imports codecs
        raise RuntimeError("cuzarr.codecs is not imported: v3 codecs cannot be parsed")
    codec_from_json, check_codecs = _codec_support
    check_v3_document(d, "array")
    for key in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if key not in d:
            raise MetadataError(f"zarr.json: required field {key!r} is missing")
    extra: dict[str, Any] = {}
    for key, value in d.items():
        if key not in _V3_ARRAY_KEYS:
            _check_extension(key, value)
            extra[key] = value
    shape = _parse_shape(d["shape"])
    dtype = from_json_v3(d["data_type"])
    grid = parse_chunk_grid(d["chunk_grid"], len(shape), shape)
    cke = parse_chunk_key_encoding(d["chunk_key_encoding"], 3)
    fill = dtype.fill_from_json(d["fill_value"], 3)
    if fill is None:
        raise MetadataError("zarr.json: fill_value must not be null in Zarr v3")
    codecs_json = d["codecs"]
    if not isinstance(codecs_json, list) or not codecs_json:
        raise MetadataError("zarr.json: codecs must be a non-empty list")
    codecs = tuple(codec_from_json(c) for c in codecs_json)
    for t in d.get("storage_transformers") or []:
        if not (isinstance(t, dict) and t.get("must_understand") is False):
            raise UnsupportedExtensionError(f"unsupported storage transformer {t!r}")
    attrs = d.get("attributes", {})
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, dict):
        raise MetadataError("zarr.json: attributes must be an object")
    names = d.get("dimension_names")
    if names is not None:
        if (
            not isinstance(names, list)
            or len(names) != len(shape)
            or not all(n is None or isinstance(n, str) for n in names)
        ):
            raise MetadataError(f"zarr.json: dimension_names {names!r} does not match the shape")
        names = tuple(names)
    meta = ArrayMetadata(
        zarr_format=3,
        shape=shape,
        dtype=dtype,
        chunk_grid=grid,
        fill_value=fill,
        chunk_key_encoding=cke,
        attributes=attrs,
        codecs=codecs,
        dimension_names=names,
        # a v3 array's order is a runtime setting: the global one, as in zarr-python
        order=_runtime_order(),
        extra=extra,
    )
    check_codecs(meta)  # the codecs against the data type (and shard edges)
    return meta


def parse_array_metadata_v2(d: Any, attrs: Any = None) -> ArrayMetadata:
    """Validate and parse a ``.zarray`` document (plus its ``.zattrs``)."""
    import numcodecs

    if not isinstance(d, dict):
        raise MetadataError(".zarray must hold a JSON object")
    if d.get("zarr_format") != 2:
        raise MetadataError(f".zarray: zarr_format must be 2, got {d.get('zarr_format')!r}")
    for key in ("shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters"):
        if key not in d:
            raise MetadataError(f".zarray: required field {key!r} is missing")
    shape = _parse_shape(d["shape"])
    grid = parse_v2_chunks(d["chunks"], shape)  # ints, or ZEP0003 edge lists
    try:
        filters = (
            tuple(numcodecs.get_codec(dict(f)) for f in d["filters"]) if d["filters"] else None
        )
        compressor = numcodecs.get_codec(dict(d["compressor"])) if d["compressor"] else None
    except (ValueError, KeyError, TypeError) as e:
        raise MetadataError(f".zarray: unknown or invalid codec ({e})") from e
    object_codec = None
    for f in filters or ():
        if f.codec_id in ("vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle"):
            object_codec = f.codec_id
            break
    dtype = from_json_v2(d["dtype"], object_codec)
    order = d["order"]
    if order not in ("C", "F"):
        raise MetadataError(f".zarray: order must be 'C' or 'F', got {order!r}")
    sep = d.get("dimension_separator", ".")
    if sep not in (".", "/"):
        raise MetadataError(f".zarray: dimension_separator must be '.' or '/', got {sep!r}")
    fill = dtype.fill_from_json(d["fill_value"], 2)
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, dict):
        raise MetadataError(".zattrs must hold a JSON object")
    names = (
        attrs.get("_ARRAY_DIMENSIONS") if isinstance(attrs.get("_ARRAY_DIMENSIONS"), list) else None
    )
    return ArrayMetadata(
        zarr_format=2,
        shape=shape,
        dtype=dtype,
        chunk_grid=grid,
        fill_value=fill,
        chunk_key_encoding=ChunkKeyEncoding("v2", sep),
        attributes=attrs,
        dimension_names=tuple(names) if names and len(names) == len(shape) else None,
        order=order,
        filters=filters,
        compressor=compressor,
    )


def check_sharded_edges(meta: ArrayMetadata, pipeline: Any) -> None:
    """A rectilinear grid of shards: every shard edge must hold whole inner chunks
    (the pipeline only validated the largest shard)."""
    if not isinstance(meta.chunk_grid, RectilinearChunkGrid):
        return
    inner = getattr(getattr(pipeline, "array_bytes", None), "chunk_shape", None)
    if inner is None or type(pipeline.array_bytes).__name__ != "ShardingCodec":
        return
    for d, c in enumerate(inner):
        for edge in meta.chunk_grid.edge_lengths(d):
            if edge % c:
                raise MetadataError(
                    f"shard edge length {edge} in dimension {d} is not divisible by the "
                    f"inner chunk size {c}"
                )


def nchunks(meta: ArrayMetadata) -> int:
    return math.prod(meta.chunk_grid.grid_shape(meta.shape))


def normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(operator.index(s) for s in shape)
    except TypeError as e:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from e
    if any(s < 0 for s in out):
        raise ValueError(f"shape must be non-negative, got {out}")
    return out


def normalize_dimension_names(
    names: Sequence[str | None] | None, ndim: int
) -> tuple[str | None, ...] | None:
    if names is None:
        return None
    names = tuple(names)
    if len(names) != ndim:
        raise ValueError(f"dimension_names has {len(names)} entries for {ndim} dimensions")
    # A 0-d array's empty list is left out of zarr.json, as zarr-python does.
    return names or None
