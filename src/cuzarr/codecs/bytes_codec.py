"""The v3 ``bytes`` codec: fixed-size elements as raw bytes in C order."""

from __future__ import annotations

import sys
from enum import Enum, StrEnum
from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayBytesCodec, ChunkSpec, register_codec
from cuzarr.errors import CodecError, MetadataError

__all__ = ["BytesCodec", "Endian"]


class Endian(StrEnum):
    """Byte orders of the ``bytes`` codec (zarr-python's enum; strings work too)."""

    big = "big"
    little = "little"


class BytesCodec(ArrayBytesCodec):
    """Serialize elements with the given ``endian`` (``None`` for 1-byte types)."""

    name = "bytes"

    def __init__(self, endian: str | None = "little") -> None:
        if isinstance(endian, Enum):
            endian = endian.value
        if endian not in ("little", "big", None):
            raise MetadataError(f"bytes codec: endian must be 'little' or 'big', got {endian!r}")
        self.endian = endian

    def configuration(self) -> dict[str, Any] | None:
        return {"endian": self.endian} if self.endian is not None else None

    def evolve(self, spec: ChunkSpec) -> BytesCodec:
        if not spec.dtype.has_endianness and self.endian is not None:
            return BytesCodec(None)
        if spec.dtype.has_endianness and self.endian is None:
            return BytesCodec("little")
        return self

    def validate(self, spec: ChunkSpec) -> None:
        if spec.dtype.is_vlen:
            raise MetadataError(
                f"the bytes codec cannot encode variable-length {spec.dtype.kind} data; "
                "use vlen-utf8 or vlen-bytes"
            )
        if spec.dtype.has_endianness and self.endian is None:
            raise MetadataError("bytes codec: endian is required for multi-byte data types")

    def stored_dtype(self, spec: ChunkSpec) -> np.dtype:
        dt = spec.dtype.dtype
        if not spec.dtype.has_endianness or spec.dtype.kind == "ml":
            return dt
        order = "<" if (self.endian or sys.byteorder) == "little" else ">"
        return dt.newbyteorder(order)

    def swaps_by_hand(self, spec: ChunkSpec) -> bool:
        """Whether elements are byte-swapped outside numpy's dtype machinery:
        ml_dtypes types (bfloat16, float8...) have no byte-order variants, so a
        non-native ``endian`` is applied to their raw bytes."""
        return (
            spec.dtype.kind == "ml"
            and spec.dtype.item_size > 1
            and (self.endian or sys.byteorder) != sys.byteorder
        )

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> Any:
        if self.swaps_by_hand(spec):
            units = np.ascontiguousarray(arr, dtype=spec.dtype.dtype).view(
                f"u{spec.dtype.item_size}"
            )
            return memoryview(units.byteswap().reshape(-1).view(np.uint8))
        sdt = self.stored_dtype(spec)
        # np.asarray: a numpy scalar's astype to a non-native byte order is native
        arr = np.asarray(arr)
        if arr.dtype != sdt:
            arr = arr.astype(sdt)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return memoryview(arr.reshape(-1).view(np.uint8))

    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        sdt = self.stored_dtype(spec)
        expected = spec.nbytes
        if len(data) != expected:
            raise CodecError(
                f"chunk holds {len(data)} bytes, expected {expected} for shape {spec.shape} "
                f"of {spec.dtype.dtype}"
            )
        if self.swaps_by_hand(spec):
            units = np.frombuffer(data, dtype=f"u{spec.dtype.item_size}")
            return units.byteswap().view(spec.dtype.dtype).reshape(spec.shape)
        arr = np.frombuffer(data, dtype=sdt).reshape(spec.shape)
        if sdt != spec.dtype.dtype:
            arr = arr.astype(spec.dtype.dtype)
        return arr


register_codec("bytes", lambda c: BytesCodec(c.get("endian")))
# Name used by early v3 drafts; read-only alias.
register_codec("endian", lambda c: BytesCodec(c.get("endian", "little")))
