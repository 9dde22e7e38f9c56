"""v3 ``vlen-utf8`` and ``vlen-bytes`` codecs (numcodecs' VLen wire format).

Layout: uint32 LE item count, then per item a uint32 LE length and the bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayBytesCodec, ChunkSpec, register_codec
from cuzarr.codecs.lazy_numcodecs import numcodecs
from cuzarr.errors import CodecError, MetadataError

__all__ = ["VLenBytesCodec", "VLenUTF8Codec", "decode_vlen", "encode_vlen"]

_VLEN: dict[str, Any] = {}


def _vlen(kind: str) -> Any:
    """numcodecs' VLenUTF8 (``kind`` 'string') or VLenBytes codec, made once."""
    c = _VLEN.get(kind)
    if c is None:
        nc = numcodecs()
        c = _VLEN[kind] = nc.VLenUTF8() if kind == "string" else nc.VLenBytes()
    return c


def _check_count(data: Any, n: int) -> None:
    mv = memoryview(data)
    if len(mv) < 4:
        raise CodecError("vlen chunk is shorter than its 4-byte header")
    count = int.from_bytes(mv[:4], "little")
    if count != n:
        raise CodecError(f"vlen chunk holds {count} items, expected {n}")


def encode_vlen(arr: np.ndarray, kind: str) -> bytes:
    """Encode a string or bytes array (any numpy layout) in C order."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype != object:
        flat = flat.astype(object)
    elif not flat.flags.writeable:
        # numcodecs' VLen encoders take a writable buffer (a broadcast or
        # read-only value, e.g. the one element of a 0-d array, is not)
        flat = flat.copy()
    try:
        return _vlen(kind).encode(flat)
    except TypeError as e:
        raise TypeError(f"cannot encode {kind} data: {e}") from e


def decode_vlen(data: Any, kind: str, shape: tuple[int, ...], out_dtype: np.dtype) -> np.ndarray:
    """Decode to an array of ``shape`` with ``out_dtype`` (StringDType or object)."""
    n = 1
    for s in shape:
        n *= s
    _check_count(data, n)
    try:
        objs = _vlen(kind).decode(data)
    except Exception as e:
        raise CodecError(f"corrupt vlen chunk: {e}") from e
    objs = objs.reshape(shape)
    if out_dtype.kind != "O":
        return objs.astype(out_dtype)
    return objs


class _VLenBase(ArrayBytesCodec):
    _kind = "string"

    def configuration(self) -> dict[str, Any]:
        return {}

    def validate(self, spec: ChunkSpec) -> None:
        if spec.dtype.kind != self._kind:
            raise MetadataError(f"{self.name} cannot encode {spec.dtype.kind} data")

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> bytes:
        return encode_vlen(arr, self._kind)

    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        return decode_vlen(data, self._kind, spec.shape, spec.dtype.dtype)


class VLenUTF8Codec(_VLenBase):
    name = "vlen-utf8"
    _kind = "string"


class VLenBytesCodec(_VLenBase):
    name = "vlen-bytes"
    _kind = "bytes"


register_codec("vlen-utf8", lambda c: VLenUTF8Codec())
register_codec("vlen-bytes", lambda c: VLenBytesCodec())
