"""Codecs and codec pipelines (v3 codecs, v2 filters and compressors)."""

from __future__ import annotations

_loaded = False


def _load_builtin_codecs() -> None:
    """Import the modules whose import registers the built-in v3 codecs."""
    global _loaded
    if _loaded:
        return
    from cuzarr.codecs import (  # noqa: F401
        bitround,
        bytes_codec,
        checksum,
        compressors,
        numcodecs,
        sharding,
        transpose,
        value_codecs,
        vlen,
    )

    _loaded = True


_load_builtin_codecs()

from cuzarr.codecs.base import ChunkSpec, Codec, codec_from_json, register_codec  # noqa: E402
from cuzarr.codecs.bitround import BitRoundCodec  # noqa: E402
from cuzarr.codecs.bytes_codec import BytesCodec, Endian  # noqa: E402
from cuzarr.codecs.checksum import Crc32cCodec  # noqa: E402
from cuzarr.codecs.compressors import (  # noqa: E402
    BloscCname,
    BloscCodec,
    BloscShuffle,
    GzipCodec,
    ZstdCodec,
)
from cuzarr.codecs.sharding import ShardingCodec  # noqa: E402
from cuzarr.codecs.transpose import TransposeCodec  # noqa: E402
from cuzarr.codecs.value_codecs import CastValueCodec, ScaleOffsetCodec  # noqa: E402
from cuzarr.codecs.vlen import VLenBytesCodec, VLenUTF8Codec  # noqa: E402

# zarr-python's names of the zarr-extensions value codecs
CastValue = CastValueCodec
ScaleOffset = ScaleOffsetCodec

__all__ = [
    "BitRoundCodec",
    "BloscCname",
    "BloscCodec",
    "BloscShuffle",
    "BytesCodec",
    "CastValue",
    "CastValueCodec",
    "ChunkSpec",
    "Codec",
    "Crc32cCodec",
    "Endian",
    "GzipCodec",
    "ScaleOffset",
    "ScaleOffsetCodec",
    "ShardingCodec",
    "TransposeCodec",
    "VLenBytesCodec",
    "VLenUTF8Codec",
    "ZstdCodec",
    "codec_from_json",
    "register_codec",
]

from cuzarr.codecs.pipeline import check_array_codecs  # noqa: E402
from cuzarr.metadata.array import register_codec_support  # noqa: E402

register_codec_support(codec_from_json, check_array_codecs)
