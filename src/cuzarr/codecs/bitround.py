"""The v3 ``bitround`` codec (zarr-extensions ``codecs/bitround``, as zarrs writes it).

An array -> array codec that rounds floating-point mantissas to ``keepbits``
bits (as ``numcodecs.BitRound``; ``numcodecs.bitround`` is its deprecated alias)
and integers to ``keepbits`` bits from their most significant set bit. Decoding
is the identity: rounding cannot be undone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ChunkSpec, register_codec
from cuzarr.errors import MetadataError

__all__ = ["BitRoundCodec"]

# mantissa bits of the float types (ml_dtypes' bfloat16 by name)
_MANTISSA = {"e": 10, "f": 23, "d": 52, "bfloat16": 7}


def _mantissa_bits(dt: np.dtype) -> int | None:
    """The mantissa bits of a float (or complex) dtype; None for integers."""
    if dt.name == "bfloat16":
        return _MANTISSA["bfloat16"]
    if dt.kind == "c":
        dt = np.dtype(f"f{dt.itemsize // 2}")
    return _MANTISSA.get(dt.char) if dt.kind == "f" else None


def _round(bits: np.ndarray, keepbits: int, maxbits: np.ndarray | int) -> np.ndarray:
    """Round the unsigned ``bits`` to ``keepbits`` below bit ``maxbits``, half to
    even, saturating at the type's maximum (zarrs' arithmetic; numcodecs' for
    every finite float)."""
    ut = bits.dtype
    maskbits = np.asarray(maxbits, dtype=np.int64) - keepbits
    active = maskbits > 0
    shift = np.where(active, maskbits, 1).astype(ut)
    one = ut.type(1)
    mask = (ut.type(np.iinfo(ut).max) >> shift) << shift
    half_quantum1 = (one << (shift - one)) - one
    add = ((bits >> shift) & one) + half_quantum1
    total = bits + add
    total = np.where(total < bits, ut.type(np.iinfo(ut).max), total)  # saturate
    return np.where(active, total & mask, bits).astype(ut, copy=False)


def _msb_bits(bits: np.ndarray) -> np.ndarray:
    """The number of significant bits of each unsigned value (0 for 0)."""
    out = np.zeros(bits.shape, dtype=np.int64)
    v = bits.copy()
    while v.any():
        nz = v != 0
        out += nz
        v >>= bits.dtype.type(1)
    return out


class BitRoundCodec(ArrayArrayCodec):
    """Keep ``keepbits`` bits of each value (see the module docstring)."""

    name = "bitround"

    def __init__(self, keepbits: int) -> None:
        if isinstance(keepbits, bool) or not isinstance(keepbits, int) or keepbits < 1:
            raise MetadataError(f"bitround keepbits must be an integer >= 1, got {keepbits!r}")
        self.keepbits = keepbits

    def configuration(self) -> dict[str, Any]:
        return {"keepbits": self.keepbits}

    def validate(self, spec: ChunkSpec) -> None:
        dt = spec.dtype.dtype
        if _mantissa_bits(dt) is None and dt.kind not in "iumM":
            raise MetadataError(f"the bitround codec does not support the data type {dt}")

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        dt = arr.dtype
        mantissa = _mantissa_bits(dt)
        if dt.kind == "c":
            parts = np.ascontiguousarray(arr).view(f"f{dt.itemsize // 2}")
            return self.encode(parts, spec).view(dt).reshape(arr.shape)
        ut = np.dtype(f"u{dt.itemsize}")
        bits = np.ascontiguousarray(arr).view(ut)
        if mantissa is not None:
            if self.keepbits >= mantissa:
                return arr
            return _round(bits, self.keepbits, mantissa).view(dt)
        # integers (datetimes as int64): from the most significant set bit of
        # the value's bit pattern, as zarrs rounds them
        return _round(bits, self.keepbits, _msb_bits(bits)).view(dt)

    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return arr


def _factory(conf: dict[str, Any]) -> BitRoundCodec:
    if "keepbits" not in conf:
        raise MetadataError("the bitround codec needs a keepbits configuration")
    return BitRoundCodec(conf["keepbits"])


register_codec("bitround", _factory)
