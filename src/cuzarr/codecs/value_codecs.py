"""The v3 ``scale_offset`` and ``cast_value`` array->array codecs (zarr-extensions).

``scale_offset`` maps ``x`` to ``(x - offset) * scale`` in the array's own data
type, and back with ``x / scale + offset``; ``cast_value`` converts values to
another numeric data type and back, with a rounding mode, an out-of-range mode
(error, clamp or wrap) and optional explicit value maps. Together they replace
``numcodecs.fixedscaleoffset``. zarr-python 3.4 writes both.

Nothing here wraps or rounds silently: an integer result outside its data type,
an inexact integer division, a NaN for a type without NaN, or a value out of
range under ``out_of_range: "error"`` (the default) raise ``CodecError``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ChunkSpec, register_codec
from cuzarr.errors import CodecError, MetadataError
from cuzarr.metadata.dtypes import DataType, parse_data_type

__all__ = ["CastValueCodec", "ScaleOffsetCodec"]

_INT64 = (-(2**63), 2**63 - 1)
_ROUNDINGS = (
    "nearest-even",
    "towards-zero",
    "towards-positive",
    "towards-negative",
    "nearest-away",
)
_OUT_OF_RANGE = ("error", "clamp", "wrap")


def _is_int(dt: DataType) -> bool:
    return dt.kind in ("int", "uint") or dt.is_ml_int


def _is_float(dt: DataType) -> bool:
    return dt.kind == "float" or (dt.kind == "ml" and not dt.is_ml_int)


def _int_range(dt: DataType) -> tuple[int, int]:
    if dt.kind == "ml":
        import ml_dtypes

        info = ml_dtypes.iinfo(dt.dtype)
    else:
        info = np.iinfo(dt.dtype)
    return int(info.min), int(info.max)


def _float_format(dt: DataType) -> tuple[int, int, float, float]:
    """(significand bits with the implicit one, frexp exponent of the smallest
    normal value, smallest and largest finite value) of a float type. The
    smallest is ``-largest``, except for types without negative values
    (``float8_e8m0fnu``: powers of two only, no zero)."""
    if dt.kind == "ml":
        import ml_dtypes

        info = ml_dtypes.finfo(dt.dtype)
    else:
        info = np.finfo(dt.dtype)
    nbits = int(info.nmant) + 1
    return nbits, int(np.frexp(float(info.smallest_normal))[1]), float(info.min), float(info.max)


def _holds(dt: DataType, value: float) -> bool:
    """Whether the float type ``dt`` represents ``value`` (NaN or an infinity)."""
    back = float(np.asarray(value, dtype=np.float64).astype(dt.dtype).astype(np.float64))
    return math.isnan(back) if math.isnan(value) else back == value


def _scalar(dt: DataType, obj: Any, what: str) -> Any:
    """A JSON scalar (the type's fill value encoding) as a numpy scalar of ``dt``."""
    try:
        value = dt.fill_from_json(obj, 3)
    except (MetadataError, TypeError, ValueError, OverflowError) as e:
        raise MetadataError(f"{what} {obj!r} is not a value of data type {dt.v3_name}") from e
    if value is None:
        raise MetadataError(f"{what} must not be null")
    return np.asarray(value, dtype=dt.dtype)[()]


def _native(x: np.ndarray) -> np.ndarray:
    """``x`` in the machine's byte order (ufuncs take no byte-swapped ``dtype=``)."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def _bounds(values: list[int]) -> tuple[int, int]:
    return min(values), max(values)


def _fits(lo: int, hi: int, rng: tuple[int, int]) -> bool:
    return rng[0] <= lo and hi <= rng[1]


class ScaleOffsetCodec(ArrayArrayCodec):
    """``(x - offset) * scale`` on encode, ``x / scale + offset`` on decode, in the
    array's data type (integers or floats)."""

    name = "scale_offset"

    def __init__(self, offset: Any = 0, scale: Any = 1) -> None:
        for what, v in (("offset", offset), ("scale", scale)):
            if isinstance(v, bool) or not isinstance(v, int | float | str):
                raise MetadataError(f"scale_offset {what} must be a number or a string, got {v!r}")
        self.offset = offset
        self.scale = scale

    def configuration(self) -> dict[str, Any]:
        return {"offset": self.offset, "scale": self.scale}

    def _params(self, dt: DataType) -> tuple[Any, Any]:
        if not (_is_int(dt) or dt.kind == "float"):
            raise MetadataError(
                f"scale_offset takes integer and floating-point data, not {dt.v3_name}"
            )
        off = _scalar(dt, self.offset, "scale_offset offset")
        scale = _scalar(dt, self.scale, "scale_offset scale")
        if scale == 0:
            raise MetadataError("scale_offset scale must not be zero")
        return off, scale

    def validate(self, spec: ChunkSpec) -> None:
        self._params(spec.dtype)

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        fill = spec.fill_value
        if fill is not None:
            enc = self.encode(np.asarray(fill, dtype=spec.dtype.dtype), spec)
            fill = enc.reshape(())[()]
        return ChunkSpec(spec.shape, spec.dtype, fill)

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        dt = spec.dtype
        off, scale = self._params(dt)
        x = _native(np.asarray(arr))
        if dt.kind == "float":
            with np.errstate(all="ignore"):  # inf and NaN are values of the type
                out = np.multiply(np.subtract(x, off, dtype=x.dtype), scale, dtype=x.dtype)
        else:
            out = _int_op(x, dt, int(off), int(scale), encode=True)
        return np.asarray(out).reshape(x.shape)  # an array, never a numpy scalar

    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        dt = spec.dtype
        off, scale = self._params(dt)
        x = _native(np.asarray(arr))
        if dt.kind == "float":
            with np.errstate(all="ignore"):
                out = np.add(np.divide(x, scale, dtype=x.dtype), off, dtype=x.dtype)
        else:
            out = _int_op(x, dt, int(off), int(scale), encode=False)
        return np.asarray(out).reshape(x.shape)


def _int_op(x: np.ndarray, dt: DataType, off: int, scale: int, encode: bool) -> np.ndarray:
    """``(x - off) * scale`` or ``x / scale + off`` exactly, in ``dt``'s range.

    The range of the result (and of the intermediate step) follows from the
    data's minimum and maximum, in Python integers; int64 arithmetic is used
    where all of it fits (so nothing can wrap), Python integers otherwise.
    """
    rng = _int_range(dt)
    if x.size == 0:
        return x.astype(dt.dtype, copy=True)
    lo, hi = int(x.min()), int(x.max())
    if encode:
        mid = (lo - off, hi - off)
        res = _bounds([mid[0] * scale, mid[1] * scale])
    else:
        mid = (lo // scale, hi // scale)
        res = _bounds([mid[0] + off, mid[1] + off])
    wide = (
        _fits(lo, hi, _INT64)
        and _fits(*_bounds(list(mid)), _INT64)
        and _fits(*res, _INT64)
        and _fits(min(off, scale), max(off, scale), _INT64)
    )
    w = x.astype(np.int64) if wide else x.astype(object)  # object: exact Python ints
    if not encode and np.any(w % scale != 0):
        raise CodecError(
            f"scale_offset: a value is not a multiple of scale={scale} (a non-zero "
            f"remainder): its quotient is not a value of {dt.v3_name}"
        )
    if not _fits(*res, rng):
        raise CodecError(
            f"scale_offset: a result lies outside the range of dtype {dt.v3_name} {list(rng)}"
        )
    out = (w - off) * scale if encode else w // scale + off
    return np.asarray(out).astype(dt.dtype)


class CastValueCodec(ArrayArrayCodec):
    """Values converted to ``data_type`` on encode, back on decode."""

    name = "cast_value"

    def __init__(
        self,
        data_type: Any,
        rounding: str = "nearest-even",
        out_of_range: str | None = None,
        scalar_map: Any = None,
    ) -> None:
        self.target = parse_data_type(data_type, 3).native()
        if not (_is_int(self.target) or _is_float(self.target)):
            raise MetadataError(
                f"cast_value converts to integer and floating-point types, not {data_type!r}"
            )
        if rounding not in _ROUNDINGS:
            raise MetadataError(f"cast_value rounding must be one of {list(_ROUNDINGS)}")
        if out_of_range is not None and out_of_range not in _OUT_OF_RANGE:
            raise MetadataError(f"cast_value out_of_range must be one of {list(_OUT_OF_RANGE)}")
        if out_of_range == "wrap" and not _is_int(self.target):
            raise MetadataError("cast_value out_of_range 'wrap' needs an integer data_type")
        self.rounding = rounding
        self.out_of_range = out_of_range
        self.scalar_map = _parse_scalar_map(scalar_map)

    def configuration(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"data_type": self.target.v3_name}
        if self.rounding != "nearest-even":
            conf["rounding"] = self.rounding
        if self.out_of_range is not None:
            conf["out_of_range"] = self.out_of_range
        if self.scalar_map is not None:
            conf["scalar_map"] = {k: [list(p) for p in v] for k, v in self.scalar_map.items()}
        return conf

    def validate(self, spec: ChunkSpec) -> None:
        if not (_is_int(spec.dtype) or _is_float(spec.dtype)):
            raise MetadataError(
                f"cast_value converts integer and floating-point data, not {spec.dtype.v3_name}"
            )
        self._map("encode", spec.dtype, self.target)
        self._map("decode", self.target, spec.dtype)

    def _map(self, direction: str, src: DataType, dst: DataType) -> list[tuple[Any, Any]]:
        pairs = (self.scalar_map or {}).get(direction, [])
        return [
            (
                _scalar(src, k, f"cast_value scalar_map {direction} key"),
                _scalar(dst, v, f"cast_value scalar_map {direction} value"),
            )
            for k, v in pairs
        ]

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        fill = spec.fill_value
        if fill is not None:
            fill = self.encode(np.asarray(fill, dtype=spec.dtype.dtype), spec).reshape(())[()]
        return ChunkSpec(spec.shape, self.target, fill)

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        x = np.asarray(arr)
        # arrays, never numpy scalars (which 0-d arithmetic returns): a scalar
        # loses the byte order the next codec casts it to
        return np.asarray(self._cast(x, spec.dtype, self.target, "encode")).reshape(x.shape)

    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        x = np.asarray(arr)
        return np.asarray(self._cast(x, self.target, spec.dtype, "decode")).reshape(x.shape)

    def _cast(self, x: np.ndarray, src: DataType, dst: DataType, direction: str) -> np.ndarray:
        pairs = self._map(direction, src, dst)
        if not pairs:
            return self._convert(x, src, dst)
        out = np.empty(x.shape, dtype=dst.dtype)
        done = np.zeros(x.shape, dtype=bool)
        for k, v in pairs:
            is_nan = _is_float(src) and math.isnan(float(k))
            hit = np.isnan(x.astype(np.float64)) if is_nan else x == k
            hit &= ~done  # the first entry for a value wins
            out[hit] = v
            done |= hit
        rest = ~done
        if rest.any():
            out[rest] = self._convert(x[rest], src, dst)
        return out

    def _convert(self, x: np.ndarray, src: DataType, dst: DataType) -> np.ndarray:
        mode = self.out_of_range or "error"
        if _is_int(dst):
            if _is_float(src):
                return self._float_to_int(x, dst, mode)
            return _int_to_int(x, dst, mode)
        return _to_float(x, src, dst, mode, self.rounding)

    def _float_to_int(self, x: np.ndarray, dst: DataType, mode: str) -> np.ndarray:
        f = x.astype(np.float64)  # every value of the float types here, exactly
        if np.isnan(f).any():
            raise CodecError(f"cast_value: NaN has no value in {dst.v3_name}")
        with np.errstate(invalid="ignore"):
            r = _round(f, self.rounding)
        lo, hi = _int_range(dst)
        # lo and hi + 1 are powers of two (or 0): exact as floats, unlike hi
        low, high = r < float(lo), r >= float(hi + 1)
        out = np.empty(x.shape, dtype=dst.dtype)
        fine = ~(low | high)
        out[fine] = r[fine].astype(np.uint64 if lo == 0 else np.int64)
        if not (low.any() or high.any()):
            return out
        if mode == "error":
            bad = r[low | high][0]
            raise CodecError(
                f"cast_value: {bad} lies outside the range of {dst.v3_name} [{lo}, {hi}]"
            )
        if mode == "clamp":
            out[low] = lo
            out[high] = hi
            return out
        bad = low | high
        if np.isinf(r[bad]).any():
            raise CodecError(f"cast_value: infinity cannot wrap into {dst.v3_name}")
        span = hi - lo + 1
        if span <= 2**32:  # fmod of floats is exact, and so is the shift after it
            w = np.fmod(r[bad], float(span))
            w = np.where(w < lo, w + span, np.where(w > hi, w - span, w))
            out[bad] = w.astype(np.int64)
        else:
            out[bad] = [(int(v) - lo) % span + lo for v in r[bad].tolist()]
        return out


def _round(f: np.ndarray, mode: str) -> np.ndarray:
    if mode == "nearest-even":
        return np.rint(f)
    if mode == "towards-zero":
        return np.trunc(f)
    if mode == "towards-positive":
        return np.ceil(f)
    if mode == "towards-negative":
        return np.floor(f)
    # nearest-away: the fraction is exact (Sterbenz), so no x + 0.5 rounding errors
    t = np.trunc(f)
    with np.errstate(invalid="ignore"):
        frac = f - t
    return np.where(np.abs(frac) >= 0.5, t + np.sign(f), t)


def _int_to_int(x: np.ndarray, dst: DataType, mode: str) -> np.ndarray:
    lo, hi = _int_range(dst)
    if x.size == 0:
        return x.astype(dst.dtype)
    xmin, xmax = int(x.min()), int(x.max())
    if lo <= xmin and xmax <= hi:
        return x.astype(dst.dtype)
    if mode == "error":
        bad = xmin if xmin < lo else xmax
        raise CodecError(f"cast_value: {bad} lies outside the range of {dst.v3_name} [{lo}, {hi}]")
    if not _fits(xmin, xmax, _INT64):  # uint64 data past int64: exact Python ints
        span = hi - lo + 1
        vals = [
            min(max(v, lo), hi) if mode == "clamp" else (v - lo) % span + lo
            for v in x.reshape(-1).tolist()
        ]
        return np.array(vals, dtype=dst.dtype).reshape(x.shape)
    w = x.astype(np.int64)
    if mode == "clamp":
        return np.clip(w, max(lo, _INT64[0]), min(hi, _INT64[1])).astype(dst.dtype)
    span = hi - lo + 1
    if span > 2**32:  # a 64-bit target: numpy's integer casts are modulo 2**64
        return w.astype(dst.dtype)
    return ((w - lo) % span + lo).astype(dst.dtype)


def _to_float(x: np.ndarray, src: DataType, dst: DataType, mode: str, rounding: str) -> np.ndarray:
    """Values to the float type ``dst``: rounded to its precision by ``rounding``
    as if its exponent were unbounded; out of range where that exceeds its
    largest finite value (clamped to an infinity, or to the largest finite
    value where the type has none)."""
    nbits, e_tiny, bottom, top = _float_format(dst)
    big = _is_int(src) and x.size and (int(x.min()) < -(2**53) or int(x.max()) > 2**53)
    f = x.astype(np.float64)  # exact for every float type and for |ints| <= 2**53
    finite = np.isfinite(f)
    if np.isnan(f).any() and not _holds(dst, math.nan):
        raise CodecError(f"cast_value: NaN has no value in {dst.v3_name}")
    if big:
        r = np.array(
            [_round_int_to_bits(v, nbits, rounding) for v in x.reshape(-1).tolist()],
            dtype=np.float64,
        ).reshape(x.shape)
    else:
        with np.errstate(invalid="ignore"):
            _, e = np.frexp(np.where(finite, f, 0.0))
            q = np.maximum(e - nbits, e_tiny - nbits)  # exponent of the spacing at x
            r = np.where(finite, np.ldexp(_round(np.ldexp(f, -q), rounding), q), f)
    inf_ok = _holds(dst, math.inf)
    with np.errstate(invalid="ignore"):
        high = (r > top) & (finite | (not inf_ok))
        low = (r < bottom) & (finite | (not inf_ok))
    bad = high | low
    if bad.any():
        if mode != "clamp":
            first = x[bad][0]
            raise CodecError(
                f"cast_value: {first} lies outside the range of {dst.v3_name} [{bottom}, {top}]"
            )
        # clamped to the type's extremes: its infinities where it has them
        hi_edge = math.inf if inf_ok else top
        lo_edge = -math.inf if inf_ok and bottom < 0 else bottom
        r = np.where(high, hi_edge, np.where(low, lo_edge, r))
    with np.errstate(over="ignore", invalid="ignore"):
        return r.astype(dst.dtype)


def _round_int_to_bits(v: int, nbits: int, rounding: str) -> float:
    """The integer ``v`` rounded to ``nbits`` significant bits (exact Python ints:
    float64 itself would round 64-bit integers first)."""
    a = abs(v)
    shift = max(a.bit_length() - nbits, 0)
    t, rem = divmod(a, 1 << shift)
    half = (1 << shift) // 2 if shift else 0
    neg = v < 0
    if rem:
        if rounding == "towards-zero":
            up = False
        elif rounding == "towards-positive":
            up = not neg
        elif rounding == "towards-negative":
            up = neg
        elif rem != half:
            up = rem > half
        else:  # a tie
            up = rounding == "nearest-away" or t % 2 == 1
        t += up
    r = t << shift
    return float(-r if neg else r)


def _parse_scalar_map(obj: Any) -> dict[str, list[tuple[Any, Any]]] | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or set(obj) - {"encode", "decode"}:
        raise MetadataError("cast_value scalar_map must be an object with encode/decode lists")
    out: dict[str, list[tuple[Any, Any]]] = {}
    for direction, pairs in obj.items():
        if isinstance(pairs, dict):
            pairs = list(pairs.items())
        if not isinstance(pairs, list | tuple) or not all(
            isinstance(p, list | tuple) and len(p) == 2 for p in pairs
        ):
            raise MetadataError(f"cast_value scalar_map {direction!r} must be a list of pairs")
        out[direction] = [(p[0], p[1]) for p in pairs]
    return out


def _scale_offset(c: dict[str, Any]) -> ScaleOffsetCodec:
    if set(c) - {"offset", "scale"}:
        raise MetadataError(f"scale_offset: unknown configuration keys {sorted(set(c))}")
    return ScaleOffsetCodec(c.get("offset", 0), c.get("scale", 1))


def _cast_value(c: dict[str, Any]) -> CastValueCodec:
    if set(c) - {"data_type", "rounding", "out_of_range", "scalar_map"}:
        raise MetadataError(f"cast_value: unknown configuration keys {sorted(set(c))}")
    if "data_type" not in c:
        raise MetadataError("cast_value needs a data_type")
    return CastValueCodec(
        c["data_type"],
        c.get("rounding", "nearest-even"),
        c.get("out_of_range"),
        c.get("scalar_map"),
    )


register_codec("scale_offset", _scale_offset)
register_codec("cast_value", _cast_value)
