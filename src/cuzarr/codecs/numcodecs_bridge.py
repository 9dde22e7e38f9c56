"""numcodecs codecs inside v3 pipelines, and caller codecs of every form.

zarr-python stores numcodecs codecs in v3 metadata as ``numcodecs.<id>`` with
the codec's config (minus ``id``) as configuration; this module reads and
writes that form and converts what callers pass (numcodecs instances, v3
dicts, cuzarr codecs) into cuzarr codec objects.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from cuzarr.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    codec_from_json,
)
from cuzarr.codecs.bounded import BOUNDED_NUMCODECS, decode_numcodec
from cuzarr.codecs.lazy_numcodecs import is_numcodec, numcodecs
from cuzarr.errors import CodecError, MetadataError, UnknownCodecError
from cuzarr.metadata.dtypes import parse_data_type

__all__ = ["as_v3_codec", "get_numcodec", "numcodecs_v3_codec", "zarr_python_codec_json"]

# numcodecs ids that transform arrays (the rest transform bytes).
_ARRAY_TO_ARRAY = {"delta", "bitround", "fixedscaleoffset", "quantize", "astype", "packbits"}
_ARRAY_TO_BYTES = {"pcodec", "zfpy"}


def get_numcodec(codec_id: str, conf: dict[str, Any]) -> Any:
    """The numcodecs codec ``codec_id`` with ``conf``: ``UnknownCodecError`` when
    numcodecs has no such codec, ``MetadataError`` when it refuses ``conf``."""
    nc = numcodecs()
    unknown = getattr(getattr(nc, "errors", None), "UnknownCodecError", None)
    try:
        return nc.get_codec({"id": codec_id, **conf})
    except (ValueError, KeyError, TypeError) as e:
        if (unknown is not None and isinstance(e, unknown)) or "not available" in str(e):
            raise UnknownCodecError(f"numcodecs has no codec {codec_id!r}") from e
        raise MetadataError(
            f"invalid configuration for numcodecs.{codec_id}: {conf!r} ({e})"
        ) from e


_get_numcodec = get_numcodec


class _NumcodecsMixin:
    numcodec: Any

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"numcodecs.{self.numcodec.codec_id}"

    def configuration(self) -> dict[str, Any]:
        conf = dict(self.numcodec.get_config())
        conf.pop("id", None)
        return conf

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.numcodec!r})"


class NumcodecsBytesBytes(_NumcodecsMixin, BytesBytesCodec):
    """A numcodecs compressor or checksum as a v3 bytes->bytes codec."""

    def __init__(self, numcodec: Any) -> None:
        self.numcodec = numcodec

    def encode(self, data: Any, spec: ChunkSpec) -> Any:
        return self.numcodec.encode(np.frombuffer(data, dtype=np.uint8))

    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        bound = size_hint if size_hint is not None else limit
        if self.numcodec.codec_id in ("zstd", "blosc"):
            # through cuzarr's own codecs, which check the declared size first
            checked = self.__dict__.get("_checked")
            if checked is None:
                checked = self.__dict__["_checked"] = as_v3_codec(self.numcodec)
            return checked.decode(data, spec, size_hint, limit)
        if self.numcodec.codec_id in BOUNDED_NUMCODECS:
            # streaming decoders that stop at the bound: no decompression bombs
            return decode_numcodec(self.numcodec, data, size_hint, bound)
        try:
            out = self.numcodec.decode(data)
        except Exception as e:
            raise CodecError(f"{self.name} decode failed: {e}") from e
        if bound is not None and memoryview(out).nbytes > bound:
            raise CodecError(f"{self.name} output is larger than the {bound} bytes allowed")
        return out


def _cast_fill(fill: Any, dt: np.dtype) -> Any:
    """The fill value seen by codecs after a filter that changes the data type
    (astype, delta/fixedscaleoffset with ``astype``): the array's fill value cast
    to the new type, as zarr-python does. A sharding codec further in skips inner
    chunks equal to it and fills missing ones with it; without it (zero instead) a
    shard zarr-python wrote would read back zeros where the fill value belongs."""
    if fill is None:
        return None
    try:
        with np.errstate(all="ignore"):
            src = np.asarray(fill)
            if dt.kind in "iu" and src.dtype.kind in "fc" and not np.isfinite(src).all():
                return None
            return np.asarray(src).astype(dt)[()]
    except (TypeError, ValueError, OverflowError):
        return None


class NumcodecsArrayArray(_NumcodecsMixin, ArrayArrayCodec):
    """A numcodecs filter (delta, bitround, ...) as a v3 array->array codec."""

    def __init__(self, numcodec: Any) -> None:
        self.numcodec = numcodec

    def _out_dtype(self, spec: ChunkSpec) -> np.dtype:
        for attr in ("astype", "encode_dtype"):
            dt = getattr(self.numcodec, attr, None)
            if dt is not None:
                return np.dtype(dt)
        return spec.dtype.dtype

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        if self.numcodec.codec_id == "packbits":
            # bools packed 8 to a byte after a one-byte header (the count of
            # padding bits): a 1-d uint8 array, as zarr-python declares it
            n = 1
            for s in spec.shape:
                n *= s
            return ChunkSpec((1 + -(-n // 8),), parse_data_type(np.uint8, 3), None)
        dt = self._out_dtype(spec)
        if dt == spec.dtype.dtype:
            return spec
        return ChunkSpec(spec.shape, parse_data_type(dt, 3), _cast_fill(spec.fill_value, dt))

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        out = np.asarray(self.numcodec.encode(np.ascontiguousarray(arr)))
        res = self.resolve(spec)
        want = res.dtype.dtype
        # Some filters return another type of the declared width (BitRound: the
        # rounded floats' bits as ints). zarr-python serializes what the filter
        # returns, bit for bit: reinterpret, never convert values (a numeric cast
        # would store 4.6e18 for 2.125).
        if (
            out.dtype.kind != want.kind
            and out.dtype.itemsize == want.itemsize
            and not out.dtype.fields
        ):
            out = out.astype(out.dtype.newbyteorder("="), copy=False).view(want.newbyteorder("="))
        n = 1
        for d in res.shape:
            n *= d
        if out.size != n:
            # a filter whose configured data type is not the one it is given
            # reads the chunk's bytes as other values (zarr-python stores them)
            declared = getattr(self.numcodec, "dtype", None) or getattr(
                self.numcodec, "decode_dtype", None
            )
            raise CodecError(
                f"{self.name} made {out.size} values where the chunk takes {n}: it is "
                f"configured for {np.dtype(declared) if declared else 'another'} data "
                f"and gets {arr.dtype}"
            )
        return out.reshape(res.shape)

    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        try:
            out = np.asarray(self.numcodec.decode(np.ascontiguousarray(arr)))
        except Exception as e:
            raise CodecError(f"{self.name} decode failed: {e}") from e
        return out.reshape(spec.shape).astype(spec.dtype.dtype, copy=False)


class NumcodecsArrayBytes(_NumcodecsMixin, ArrayBytesCodec):
    """A numcodecs serializer (pcodec, zfpy) as a v3 array->bytes codec."""

    def __init__(self, numcodec: Any) -> None:
        self.numcodec = numcodec

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> Any:
        return self.numcodec.encode(np.ascontiguousarray(arr))

    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        try:
            out = np.asarray(self.numcodec.decode(data))
        except Exception as e:
            raise CodecError(f"{self.name} decode failed: {e}") from e
        return out.view(spec.dtype.dtype).reshape(spec.shape)


def _wrap(nc: Any) -> Codec:
    cid = nc.codec_id
    if cid in _ARRAY_TO_ARRAY:
        return NumcodecsArrayArray(nc)
    if cid in _ARRAY_TO_BYTES:
        return NumcodecsArrayBytes(nc)
    return NumcodecsBytesBytes(nc)


def numcodecs_v3_codec(name: str, conf: dict[str, Any]) -> Codec:
    """The codec for a ``numcodecs.<id>`` v3 entry."""
    return _wrap(_get_numcodec(name.split(".", 1)[1], conf))


def zarr_python_codec_json(value: Any) -> dict[str, Any] | None:
    """The v3 JSON of a zarr-python codec object (``zarr.codecs.*``,
    ``zarr.codecs.numcodecs.*``, ``numcodecs.zarr3.*``), else ``None``. Nothing is
    one unless zarr was imported, so this imports nothing."""
    abc = sys.modules.get("zarr.abc.codec")
    if abc is None or not isinstance(value, abc.BaseCodec):
        return None
    return dict(value.to_dict())


def as_v3_codec(value: Any) -> Codec:
    """Convert a caller's codec (cuzarr, numcodecs, dict or name) to a cuzarr codec.

    numcodecs ``Zstd``, ``GZip`` and ``Blosc`` become the native v3 ``zstd``,
    ``gzip`` and ``blosc`` codecs (as zarr-python does); other numcodecs codecs
    are wrapped under their ``numcodecs.<id>`` names.
    """
    if isinstance(value, Codec):
        return value
    zjson = zarr_python_codec_json(value)
    if zjson is not None:
        return codec_from_json(zjson)
    if is_numcodec(value):
        conf = value.get_config()
        cid = conf.pop("id")
        if cid == "zstd":
            return codec_from_json(
                {
                    "name": "zstd",
                    "configuration": {
                        "level": conf.get("level", 0),
                        "checksum": conf.get("checksum", False),
                    },
                }
            )
        if cid == "gzip":
            return codec_from_json(
                {"name": "gzip", "configuration": {"level": conf.get("level", 1)}}
            )
        if cid == "blosc":
            from cuzarr.codecs.compressors import BloscCodec

            return BloscCodec(
                conf.get("cname", "lz4"),
                conf.get("clevel", 5),
                int(conf.get("shuffle", 1)) if conf.get("shuffle", 1) != -1 else 1,
                conf.get("typesize"),
                conf.get("blocksize", 0),
            )
        return _wrap(value)
    if isinstance(value, dict):
        if "id" in value and "name" not in value:
            return as_v3_codec(numcodecs().get_codec(dict(value)))
        return codec_from_json(value)
    if isinstance(value, str):
        return codec_from_json({"name": value})
    raise TypeError(f"cannot interpret {value!r} as a codec")


def as_numcodec(value: Any) -> Any:
    """Convert a caller's codec to a numcodecs codec (for v2 metadata)."""
    if is_numcodec(value):
        return value
    zjson = zarr_python_codec_json(value)
    if zjson is not None:
        return as_numcodec(zjson)
    if isinstance(value, dict):
        if "id" in value:
            return numcodecs().get_codec(dict(value))
        name = value.get("name")
        conf = dict(value.get("configuration") or {})
        if isinstance(name, str):
            if name.startswith("numcodecs."):
                return _get_numcodec(name.split(".", 1)[1], conf)
            if name == "blosc" and isinstance(conf.get("shuffle"), str):
                conf["shuffle"] = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[conf["shuffle"]]
            conf.pop("typesize", None) if name != "blosc" else None
            return _get_numcodec(name, conf)
    if isinstance(value, _NumcodecsMixin):
        return value.numcodec
    if isinstance(value, Codec):
        return as_numcodec(value.to_json())
    if isinstance(value, str):
        return numcodecs().get_codec({"id": value})
    raise TypeError(f"cannot interpret {value!r} as a numcodecs codec")
