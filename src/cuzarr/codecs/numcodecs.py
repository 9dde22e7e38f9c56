"""numcodecs codecs in Zarr v3 arrays, as ``zarr.codecs.numcodecs`` has them.

Each class is named as in zarr-python (``Delta``, ``BitRound``, ``Zlib``, ...),
takes the numcodecs codec's parameters as keywords, and writes the same v3
metadata zarr-python writes: ``{"name": "numcodecs.<id>", "configuration":
{...}}`` with the parameters as given, plus those zarr-python fills in from the
array (``Shuffle``'s ``elementsize``, ``FixedScaleOffset``'s and ``Quantize``'s
``dtype``, ``AsType``'s ``decode_dtype``)::

    import cuzarr
    from cuzarr.codecs import numcodecs as nc

    a = cuzarr.create_array(
        {}, shape=(1024,), dtype="uint32", chunks=(64,),
        filters=[nc.Delta(dtype="uint32")], compressors=[nc.BZ2(level=5)],
    )

These codecs are not part of the Zarr v3 specification: zarr-python reads them,
other implementations may not. The numcodecs package does the work.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from cuzarr.codecs.base import ChunkSpec, Codec, register_codec
from cuzarr.codecs.numcodecs_bridge import (
    NumcodecsArrayArray,
    NumcodecsArrayBytes,
    NumcodecsBytesBytes,
    get_numcodec,
)
from cuzarr.errors import MetadataError

__all__ = [
    "BZ2",
    "CRC32",
    "CRC32C",
    "LZ4",
    "LZMA",
    "ZFPY",
    "Adler32",
    "AsType",
    "BitRound",
    "Blosc",
    "Delta",
    "FixedScaleOffset",
    "Fletcher32",
    "GZip",
    "JenkinsLookup3",
    "PCodec",
    "PackBits",
    "Quantize",
    "Shuffle",
    "Zlib",
    "Zstd",
]

PREFIX = "numcodecs."


class _NumcodecsCodec(Codec):
    """A numcodecs codec held by its configuration; numcodecs builds it on first use
    (a ``Quantize`` without ``dtype`` cannot be built until the array gives one)."""

    name: ClassVar[str] = ""

    def __init_subclass__(cls, *, codec_id: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if codec_id is not None:
            cls.name = PREFIX + codec_id
            register_codec(cls.name, cls.from_config)

    def __init__(self, **codec_config: Any) -> None:
        cid = self.name.removeprefix(PREFIX)
        given = codec_config.get("id", cid)
        if given != cid:
            raise ValueError(f"{type(self).__name__} takes codec id {cid!r}, not {given!r}")
        self.codec_config: dict[str, Any] = {"id": cid, **codec_config}
        self._numcodec: Any = None

    @classmethod
    def from_config(cls, conf: dict[str, Any]) -> _NumcodecsCodec:
        """The codec of a ``configuration`` object in v3 metadata."""
        return cls(**conf)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _NumcodecsCodec:
        """The codec of a v3 codec entry (``{"name": ..., "configuration": ...}``)."""
        if data.get("name") != cls.name:
            raise MetadataError(f"{cls.__name__} reads {cls.name!r} entries, not {data!r}")
        return cls(**(data.get("configuration") or {}))

    @property
    def numcodec(self) -> Any:
        """The numcodecs codec doing the work."""
        if self._numcodec is None:
            self._numcodec = get_numcodec(self.name.removeprefix(PREFIX), self.configuration())
        return self._numcodec

    def validate(self, spec: ChunkSpec) -> None:
        # build the numcodecs codec now: a bad configuration is a metadata error
        # when the array is created or opened, not when a chunk is first read
        self.numcodec  # noqa: B018

    def configuration(self) -> dict[str, Any]:
        conf = dict(self.codec_config)
        conf.pop("id", None)
        return conf

    def _filled(self, key: str, value: Any) -> Codec:
        """This codec with ``key`` set to ``value`` where it was not given."""
        if self.codec_config.get(key) is not None:
            return self
        return type(self)(**{**self.configuration(), key: value})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(codec_name={self.name!r}, codec_config={self.configuration()!r})"


class _BytesBytes(_NumcodecsCodec, NumcodecsBytesBytes):
    pass


class _ArrayArray(_NumcodecsCodec, NumcodecsArrayArray):
    pass


class _ArrayBytes(_NumcodecsCodec, NumcodecsArrayBytes):
    pass


def _dtype_name(spec: ChunkSpec) -> str:
    return str(spec.dtype.dtype)


# -- bytes -> bytes: compressors -------------------------------------------------
class Blosc(_BytesBytes, codec_id="blosc"):
    """numcodecs' ``Blosc`` (zarr-python writes the v3 ``blosc`` codec for it only
    through ``cuzarr.codecs.BloscCodec``)."""


class LZ4(_BytesBytes, codec_id="lz4"):
    """numcodecs' ``LZ4`` (a 4-byte size, then an LZ4 block)."""


class Zstd(_BytesBytes, codec_id="zstd"):
    """numcodecs' ``Zstd``, under the name ``numcodecs.zstd``."""


class Zlib(_BytesBytes, codec_id="zlib"):
    """numcodecs' ``Zlib``."""


class GZip(_BytesBytes, codec_id="gzip"):
    """numcodecs' ``GZip``, under the name ``numcodecs.gzip``."""


class BZ2(_BytesBytes, codec_id="bz2"):
    """numcodecs' ``BZ2``."""


class LZMA(_BytesBytes, codec_id="lzma"):
    """numcodecs' ``LZMA``."""


class Shuffle(_BytesBytes, codec_id="shuffle"):
    """numcodecs' byte ``Shuffle``; ``elementsize`` defaults to the item size of
    the data it is given, as in zarr-python."""

    def evolve(self, spec: ChunkSpec) -> Codec:
        return self._filled("elementsize", spec.dtype.dtype.itemsize)


# -- bytes -> bytes: checksums ----------------------------------------------------
class CRC32(_BytesBytes, codec_id="crc32"):
    """numcodecs' ``CRC32`` checksum."""


class CRC32C(_BytesBytes, codec_id="crc32c"):
    """numcodecs' ``CRC32C`` checksum (the v3 ``crc32c`` codec is
    ``cuzarr.codecs.Crc32cCodec``)."""


class Adler32(_BytesBytes, codec_id="adler32"):
    """numcodecs' ``Adler32`` checksum."""


class Fletcher32(_BytesBytes, codec_id="fletcher32"):
    """numcodecs' ``Fletcher32`` checksum."""


class JenkinsLookup3(_BytesBytes, codec_id="jenkins_lookup3"):
    """numcodecs' ``JenkinsLookup3`` checksum."""


# -- array -> array: filters -------------------------------------------------------
class Delta(_ArrayArray, codec_id="delta"):
    """numcodecs' ``Delta``. ``dtype`` defaults to the array's (zarr-python needs it
    given)."""

    def evolve(self, spec: ChunkSpec) -> Codec:
        return self._filled("dtype", _dtype_name(spec))


class BitRound(_ArrayArray, codec_id="bitround"):
    """numcodecs' ``BitRound`` (keeps ``keepbits`` mantissa bits of floats)."""


class FixedScaleOffset(_ArrayArray, codec_id="fixedscaleoffset"):
    """numcodecs' ``FixedScaleOffset``; ``dtype`` defaults to the array's."""

    def evolve(self, spec: ChunkSpec) -> Codec:
        return self._filled("dtype", _dtype_name(spec))


class Quantize(_ArrayArray, codec_id="quantize"):
    """numcodecs' ``Quantize``; ``dtype`` defaults to the array's."""

    def evolve(self, spec: ChunkSpec) -> Codec:
        return self._filled("dtype", _dtype_name(spec))


class PackBits(_ArrayArray, codec_id="packbits"):
    """numcodecs' ``PackBits`` (bool arrays, 8 values a byte)."""

    def validate(self, spec: ChunkSpec) -> None:
        super().validate(spec)
        if spec.dtype.dtype != np.dtype(bool):
            raise MetadataError(f"PackBits needs a bool array, not {spec.dtype.dtype}")


class AsType(_ArrayArray, codec_id="astype"):
    """numcodecs' ``AsType``; ``decode_dtype`` defaults to the array's."""

    def evolve(self, spec: ChunkSpec) -> Codec:
        return self._filled("decode_dtype", _dtype_name(spec))


# -- array -> bytes: serializers ---------------------------------------------------
class PCodec(_ArrayBytes, codec_id="pcodec"):
    """numcodecs' ``PCodec`` serializer (needs the ``pcodec`` package)."""


class ZFPY(_ArrayBytes, codec_id="zfpy"):
    """numcodecs' ``ZFPY`` serializer (needs the ``zfpy`` package)."""
