"""Zarr data types as objects, as zarr-python's ``zarr.dtype`` has them.

``parse_dtype(spec, zarr_format=3)`` turns anything ``dtype=`` takes (a numpy
dtype or its string, ``str``, ``bytes``, a v3 name or JSON object) into one of
the classes below; each class names one Zarr data type, and any of them can be
passed as ``dtype=``::

    import cuzarr
    from cuzarr.dtype import FixedLengthUTF32, Int16, parse_dtype

    cuzarr.create_array({}, shape=(4,), dtype=Int16(endianness="big"), zarr_format=2)
    parse_dtype("<U10", zarr_format=3)   # FixedLengthUTF32(length=10, endianness='little')

Names, constructor arguments, ``to_native_dtype()``, ``to_json(zarr_format=)``,
``from_native_dtype()``, ``from_json()``, ``default_scalar()`` and
``cast_scalar()`` are zarr-python's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from cuzarr.errors import DataTypeValidationError, MetadataError
from cuzarr.metadata.dtypes import DataType, from_json_v2, from_json_v3, parse_data_type

__all__ = [
    "Bool",
    "Complex64",
    "Complex128",
    "DateTime64",
    "FixedLengthUTF32",
    "Float16",
    "Float32",
    "Float64",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "MLDtype",
    "NullTerminatedBytes",
    "RawBytes",
    "Struct",
    "Structured",
    "TimeDelta64",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "VariableLengthBytes",
    "VariableLengthUTF8",
    "ZDType",
    "parse_dtype",
]

Endianness = Literal["little", "big"]


def _order(endianness: str) -> str:
    if endianness not in ("little", "big"):
        raise ValueError(f"endianness must be 'little' or 'big', got {endianness!r}")
    return "<" if endianness == "little" else ">"


def _endianness(dt: np.dtype) -> Endianness:
    if dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False):
        return "big"
    return "little"


class ZDType:
    """Base class of the data types: one Zarr data type each."""

    def to_native_dtype(self) -> Any:
        """The numpy dtype of this type's arrays."""
        raise NotImplementedError

    def _data_type(self, zarr_format: int = 2) -> DataType:
        return parse_data_type(self, zarr_format)

    def to_json(self, zarr_format: int) -> Any:
        """The metadata form: v3 ``data_type``, or v2 ``{"name": dtype, "object_codec_id": ...}``."""
        if zarr_format == 3:
            return self._data_type(3).to_json_v3()
        if zarr_format == 2:
            return {"name": self._data_type(2).to_json_v2(), "object_codec_id": None}
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")

    @classmethod
    def from_native_dtype(cls, dtype: Any) -> ZDType:
        """This class's data type for the numpy dtype ``dtype``."""
        out = parse_dtype(np.dtype(dtype), zarr_format=2)
        if not isinstance(out, cls):
            raise DataTypeValidationError(
                f"{dtype!r} is a {type(out).__name__}, not a {cls.__name__}"
            )
        return out

    @classmethod
    def from_json(cls, data: Any, *, zarr_format: int) -> ZDType:
        """This class's data type from its metadata form (see :meth:`to_json`)."""
        if zarr_format == 3:
            dt = from_json_v3(data)
        elif isinstance(data, dict) and "name" in data:
            dt = from_json_v2(data["name"], data.get("object_codec_id"))
        else:
            dt = from_json_v2(data)
        out = _from_data_type(dt, zarr_format)
        if not isinstance(out, cls):
            raise DataTypeValidationError(
                f"{data!r} is a {type(out).__name__}, not a {cls.__name__}"
            )
        return out

    def default_scalar(self) -> Any:
        """The fill value when none is given."""
        return self._data_type().default_fill()

    def cast_scalar(self, value: Any) -> Any:
        """``value`` as a scalar of this type."""
        return self._data_type().cast_fill(value)


@dataclass(frozen=True)
class _Fixed(ZDType):
    """A type of one numpy dtype, one byte wide (no byte order)."""

    _code: ClassVar[str] = ""

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(self._code)


@dataclass(frozen=True)
class _Ordered(ZDType):
    """A multi-byte numeric type with a byte order."""

    endianness: Endianness = "little"
    _code: ClassVar[str] = ""

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(_order(self.endianness) + self._code)


class Bool(_Fixed):
    _code = "bool"


class Int8(_Fixed):
    _code = "i1"


class UInt8(_Fixed):
    _code = "u1"


class Int16(_Ordered):
    _code = "i2"


class Int32(_Ordered):
    _code = "i4"


class Int64(_Ordered):
    _code = "i8"


class UInt16(_Ordered):
    _code = "u2"


class UInt32(_Ordered):
    _code = "u4"


class UInt64(_Ordered):
    _code = "u8"


class Float16(_Ordered):
    _code = "f2"


class Float32(_Ordered):
    _code = "f4"


class Float64(_Ordered):
    _code = "f8"


class Complex64(_Ordered):
    _code = "c8"


class Complex128(_Ordered):
    _code = "c16"


@dataclass(frozen=True)
class _Time(ZDType):
    endianness: Endianness = "little"
    scale_factor: int = 1
    unit: str = "generic"
    _code: ClassVar[str] = ""

    def to_native_dtype(self) -> np.dtype:
        if self.unit == "generic":
            return np.dtype(_order(self.endianness) + self._code)
        scale = "" if self.scale_factor == 1 else str(self.scale_factor)
        return np.dtype(f"{_order(self.endianness)}{self._code}[{scale}{self.unit}]")


class DateTime64(_Time):
    """numpy ``datetime64`` (``unit``, ``scale_factor``: ``datetime64[5s]``)."""

    _code = "M8"


class TimeDelta64(_Time):
    """numpy ``timedelta64``."""

    _code = "m8"


@dataclass(frozen=True)
class FixedLengthUTF32(ZDType):
    """numpy ``U<length>``: ``length`` code points, UTF-32."""

    length: int
    endianness: Endianness = "little"

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(f"{_order(self.endianness)}U{self.length}")


@dataclass(frozen=True)
class NullTerminatedBytes(ZDType):
    """numpy ``S<length>``."""

    length: int

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(f"S{self.length}")


@dataclass(frozen=True)
class RawBytes(ZDType):
    """numpy ``V<length>``: opaque bytes."""

    length: int

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(f"V{self.length}")


@dataclass(frozen=True)
class VariableLengthUTF8(ZDType):
    """Strings of any length (numpy's ``StringDType``, else ``object``)."""

    def to_native_dtype(self) -> np.dtype:
        return self._data_type().dtype

    def to_json(self, zarr_format: int) -> Any:
        if zarr_format == 2:
            return {"name": "|O", "object_codec_id": "vlen-utf8"}
        return super().to_json(zarr_format)


@dataclass(frozen=True)
class VariableLengthBytes(ZDType):
    """Byte strings of any length (``object`` arrays of ``bytes``)."""

    def to_native_dtype(self) -> np.dtype:
        return np.dtype(object)

    def to_json(self, zarr_format: int) -> Any:
        if zarr_format == 2:
            return {"name": "|O", "object_codec_id": "vlen-bytes"}
        return super().to_json(zarr_format)


@dataclass(frozen=True)
class Structured(ZDType):
    """A structured type: ``fields`` holds (name, data type) pairs."""

    fields: tuple[tuple[str, ZDType], ...]

    def to_native_dtype(self) -> np.dtype:
        return np.dtype([(name, t.to_native_dtype()) for name, t in self.fields])


@dataclass(frozen=True)
class Struct(Structured):
    """:class:`Structured` under the v3 name ``struct`` (what ``parse_dtype`` gives,
    as in zarr-python)."""


@dataclass(frozen=True)
class MLDtype(ZDType):
    """An ml_dtypes type (``bfloat16``, ``float8_e4m3fn``, ``int4``...) by its name
    (no zarr-python counterpart)."""

    name: str

    def to_native_dtype(self) -> np.dtype:
        return from_json_v3(self.name).dtype


_BY_CODE: dict[str, type[ZDType]] = {
    c._code: c
    for c in (
        Bool,
        Int8,
        UInt8,
        Int16,
        Int32,
        Int64,
        UInt16,
        UInt32,
        UInt64,
        Float16,
        Float32,
        Float64,
        Complex64,
        Complex128,
    )
}


def _from_data_type(dt: DataType, zarr_format: int) -> ZDType:
    k, nd = dt.kind, dt.dtype
    if k == "string":
        return VariableLengthUTF8()
    if k == "bytes":
        return VariableLengthBytes()
    if k == "ml":
        return MLDtype(dt.v3_name)
    if k in ("bool", "int", "uint", "float", "complex"):
        cls = _BY_CODE["bool" if k == "bool" else f"{nd.kind}{nd.itemsize}"]
        return cls() if issubclass(cls, _Fixed) else cls(endianness=_endianness(nd))
    if k in ("datetime", "timedelta"):
        unit, scale = np.datetime_data(nd)
        cls = DateTime64 if k == "datetime" else TimeDelta64
        return cls(endianness=_endianness(nd), scale_factor=int(scale), unit=unit)
    if k == "fixed_unicode":
        return FixedLengthUTF32(length=nd.itemsize // 4, endianness=_endianness(nd))
    if k == "fixed_bytes":
        return NullTerminatedBytes(length=nd.itemsize)
    if k == "raw":
        return RawBytes(length=nd.itemsize)
    if k == "struct":
        fields = tuple(
            (name, _from_data_type(parse_data_type(nd.fields[name][0], 2), zarr_format))
            for name in nd.names or ()
        )
        return Struct(fields=fields)
    raise MetadataError(f"no data type class for {dt!r}")  # pragma: no cover


def _is_object(spec: Any) -> bool:
    if spec is object or (isinstance(spec, np.dtype) and spec.kind == "O"):
        return True
    return isinstance(spec, str) and spec.lstrip("<>|=") in ("O", "object")


def parse_dtype(dtype_spec: Any, *, zarr_format: int = 3) -> ZDType:
    """The data type object for ``dtype_spec``.

    Parameters
    ----------
    dtype_spec : Any
        A data type object (returned as it is), a zarr-python ``ZDType``, a
        numpy dtype or what ``np.dtype`` takes, ``str`` or ``bytes``
        (variable-length), a v3 ``data_type`` name or JSON object. numpy's
        ``object`` dtype is refused, as in zarr-python: it does not say whether
        the elements are strings or bytes.
    zarr_format : {2, 3}
        The format the type is for.

    Returns
    -------
    ZDType
    """
    if isinstance(dtype_spec, ZDType):
        return dtype_spec
    if _is_object(dtype_spec):
        raise ValueError(
            f"{dtype_spec!r} (numpy's object dtype) is ambiguous: use VariableLengthUTF8() "
            "or str for strings, VariableLengthBytes() or bytes for byte strings"
        )
    # the byte order a caller gave is kept (parse_data_type's v2 form keeps it)
    return _from_data_type(parse_data_type(dtype_spec, 2), zarr_format)
