"""Data types: numpy dtypes <-> Zarr v2/v3 JSON, and fill-value encodings.

One ``DataType`` object describes an array's element type for both formats. It
knows its in-memory numpy dtype, its JSON forms and how to encode and decode a
fill value in each format (v3 core spec and zarr-extensions data types; v2 spec
fill-value rules, including base64 for fixed bytes and structured types).
"""

from __future__ import annotations

import base64
import math
import sys
from typing import Any

import numpy as np

from cuzarr.errors import MetadataError, UnsupportedExtensionError

__all__ = ["CORE_NUMERIC_NAMES", "DataType", "parse_data_type"]

_INT_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT_NAMES = ("float16", "float32", "float64")
_COMPLEX_NAMES = ("complex64", "complex128")
# The v3 core spec's numeric data type names (other formats, ASDF's among them,
# name their numeric types alike).
CORE_NUMERIC_NAMES = ("bool", *_INT_NAMES, *_FLOAT_NAMES, *_COMPLEX_NAMES)
# ml_dtypes types, named as in zarr-extensions (identical to ml_dtypes' names).
_ML_NAMES = (
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "int2",
    "int4",
    "uint2",
    "uint4",
)
_ML_INT_NAMES = ("int2", "int4", "uint2", "uint4")

try:  # numpy >= 2
    _STRING_DTYPE: np.dtype | None = np.dtypes.StringDType()
except AttributeError:  # pragma: no cover - numpy 1.x
    _STRING_DTYPE = None


def _ml_dtype(name: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as e:
        raise MetadataError(
            f"data type {name!r} needs the ml_dtypes package (pip install ml_dtypes)"
        ) from e
    try:
        return np.dtype(getattr(ml_dtypes, name))
    except AttributeError as e:
        raise MetadataError(f"this ml_dtypes version lacks {name!r}") from e


def _b64(raw: bytes) -> str:
    return base64.standard_b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.standard_b64decode(text.encode("ascii"))
    except Exception as e:
        raise MetadataError(f"fill_value {text!r} is not valid base64") from e


class DataType:
    """An array's element type.

    Attributes
    ----------
    kind
        One of ``bool int uint float complex ml datetime timedelta fixed_bytes
        fixed_unicode raw struct string bytes``.
    dtype
        The numpy dtype arrays come back with.
    """

    __slots__ = ("_hash", "dtype", "kind", "v3_name")

    def __init__(self, kind: str, dtype: np.dtype, v3_name: str) -> None:
        self.kind = kind
        self.dtype = dtype
        self.v3_name = v3_name
        self._hash = hash((kind, str(dtype)))

    def __repr__(self) -> str:
        return f"DataType({self.kind}, {self.dtype!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataType) and (self.kind, self.dtype) == (other.kind, other.dtype)

    def __hash__(self) -> int:
        return self._hash

    # -- properties ----------------------------------------------------------
    @property
    def is_vlen(self) -> bool:
        """Variable-length elements (strings or bytes): no fixed item size."""
        return self.kind in ("string", "bytes")

    @property
    def item_size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_ml_int(self) -> bool:
        """ml_dtypes' small integers (``int2``, ``int4``, ``uint2``, ``uint4``): their
        numpy dtype has kind ``"V"``, not ``"i"``/``"u"``."""
        return self.kind == "ml" and self.v3_name in _ML_INT_NAMES

    @property
    def is_float_like(self) -> bool:
        return self.kind in ("float", "ml") and not self.is_ml_int

    @property
    def has_endianness(self) -> bool:
        """Whether the ``bytes`` codec's ``endian`` matters for this type."""
        if self.kind in ("int", "uint", "float", "complex", "datetime", "timedelta"):
            return self.dtype.itemsize > 1
        if self.kind == "fixed_unicode":
            return True
        if self.kind == "ml":
            return self.dtype.itemsize > 1
        if self.kind == "struct":
            return any(
                parse_data_type(self.dtype.fields[n][0], 3).has_endianness
                for n in self.dtype.names or ()
            )
        return False

    def native(self) -> DataType:
        """The same type with native byte order (the v3 in-memory form)."""
        if self.is_vlen or self.dtype.isnative:
            return self
        return DataType(self.kind, self.dtype.newbyteorder("="), self.v3_name)

    # -- JSON ----------------------------------------------------------------
    def to_json_v3(self) -> Any:
        """The ``data_type`` value of a v3 ``zarr.json``."""
        k = self.kind
        if k in ("bool", "int", "uint", "float", "complex", "ml", "string"):
            return self.v3_name
        if k == "bytes":
            return "variable_length_bytes"
        if k in ("datetime", "timedelta"):
            unit, count = np.datetime_data(self.dtype)
            name = "numpy.datetime64" if k == "datetime" else "numpy.timedelta64"
            return {"name": name, "configuration": {"unit": unit, "scale_factor": count}}
        if k == "fixed_bytes":
            return {
                "name": "null_terminated_bytes",
                "configuration": {"length_bytes": self.dtype.itemsize},
            }
        if k == "fixed_unicode":
            return {
                "name": "fixed_length_utf32",
                "configuration": {"length_bytes": self.dtype.itemsize},
            }
        if k == "raw":
            return {"name": "raw_bytes", "configuration": {"length_bytes": self.dtype.itemsize}}
        if k == "struct":
            fields = []
            for name in self.dtype.names or ():
                fdt = self.dtype.fields[name][0]
                fields.append({"name": name, "data_type": parse_data_type(fdt, 3).to_json_v3()})
            return {"name": "struct", "configuration": {"fields": fields}}
        raise MetadataError(f"no v3 form for {self!r}")  # pragma: no cover

    def to_json_v2(self) -> Any:
        """The ``dtype`` value of a v2 ``.zarray``."""
        if self.is_vlen:
            return "|O"
        if self.kind == "struct":
            return _struct_to_v2(self.dtype)
        if self.kind == "ml":
            return self.v3_name
        return self.dtype.str

    # -- fill values -----------------------------------------------------------
    def default_fill(self) -> Any:
        """The fill value used when none is given (zero, empty, False)."""
        k = self.kind
        if k == "string":
            return ""
        if k == "bytes":
            return b""
        if k in ("datetime", "timedelta"):
            # zarr-python uses NaT-free zero for unset v3 fills of these? It writes
            # the int64 minimum (NaT); follow it for interop.
            return _int_to_time(np.iinfo(np.int64).min, self.dtype)
        return np.zeros((), dtype=self.dtype)[()]

    def cast_fill(self, value: Any) -> Any:
        """Coerce a caller's fill value to this type, refusing lossy casts."""
        if value is None:
            return self.default_fill()
        k = self.kind
        try:
            if k == "string":
                if isinstance(value, bytes):
                    return value.decode("utf-8")
                return str(value)
            if k == "bytes":
                if isinstance(value, str):
                    return value.encode("utf-8")
                return bytes(value)
            if k == "struct" and isinstance(value, dict):
                value = tuple(value[n] for n in self.dtype.names or ())
            arr = np.array(value, dtype=self.dtype)
        except (TypeError, ValueError, OverflowError, KeyError) as e:
            raise ValueError(f"fill_value {value!r} is not valid for data type {self.dtype}") from e
        if arr.shape != ():
            raise ValueError(f"fill_value {value!r} is not a scalar")
        if (
            k in ("int", "uint")
            and isinstance(value, float | np.floating)
            and float(value) != float(arr)
        ):
            raise ValueError(f"fill_value {value!r} does not fit data type {self.dtype}")
        if (
            self.is_float_like
            and k == "ml"
            and isinstance(value, float | int | np.floating | np.integer)
            and not isinstance(value, bool)
        ):
            # Small float types lack NaN and/or infinities: ml_dtypes turns NaN into
            # -0.0 (float4/6), inf into the largest finite value or NaN. Refuse those.
            f, g = float(value), float(arr)
            if (
                math.isnan(f) != math.isnan(g)
                or (not math.isnan(f) and math.isfinite(f) != math.isfinite(g))
                or (math.isinf(f) and f != g)
            ):
                raise ValueError(
                    f"fill_value {value!r} is not representable in data type {self.dtype} "
                    f"(it would become {g!r})"
                )
        return arr[()]

    def fill_to_json(self, value: Any, zarr_format: int) -> Any:
        """Encode a fill value for ``zarr.json`` (v3) or ``.zarray`` (v2)."""
        if value is None:
            return None
        k = self.kind
        if k == "bool":
            return bool(value)
        if k in ("int", "uint"):
            return int(value)
        if k in ("float", "ml"):
            if self.is_ml_int:
                return int(value)
            return _float_to_json(value)
        if k == "complex":
            return [_float_to_json(value.real), _float_to_json(value.imag)]
        if k in ("datetime", "timedelta"):
            return int(
                np.array(value, dtype=self.dtype)
                .astype(self.dtype.newbyteorder("="))
                .view(np.int64)
            )
        if k == "string":
            return str(value)
        if k == "bytes":
            return _b64(bytes(value))
        if k == "fixed_bytes":
            return _b64(bytes(value))
        if k == "fixed_unicode":
            return str(value)
        if k == "raw":
            return _b64(np.array(value, dtype=self.dtype).tobytes())
        if k == "struct":
            arr = np.array(value, dtype=self.dtype)
            if zarr_format == 2:
                return _b64(arr.tobytes())
            return {
                name: parse_data_type(self.dtype.fields[name][0], 3).fill_to_json(arr[name][()], 3)
                for name in self.dtype.names or ()
            }
        raise MetadataError(f"cannot encode fill value for {self!r}")  # pragma: no cover

    def fill_from_json(self, obj: Any, zarr_format: int) -> Any:
        """Decode a JSON fill value; ``None`` stays ``None`` (v2 'no fill')."""
        if obj is None:
            return None
        k = self.kind
        decode = (
            _numeric_fill
            if k in ("bool", "int", "uint", "float", "ml", "complex", "datetime", "timedelta")
            else _bytes_fill
            if k in ("string", "bytes", "fixed_bytes", "fixed_unicode", "raw")
            else _struct_fill
            if k == "struct"
            else None
        )
        try:
            if decode is not None:
                value = decode(self, obj, zarr_format)
                if value is not _NO_FILL:
                    return value
        except MetadataError:
            raise
        except (TypeError, ValueError, OverflowError, KeyError) as e:
            raise MetadataError(
                f"invalid fill_value {obj!r} for data type {self.dtype}: {e}"
            ) from e
        raise MetadataError(f"invalid fill_value {obj!r} for data type {self.dtype}")

    # -- array helpers ---------------------------------------------------------
    def empty(self, shape: tuple[int, ...], order: str = "C") -> np.ndarray:
        """An uninitialized in-memory array of this type (vlen: filled with empties)."""
        if self.kind == "string":
            return np.full(shape, "", dtype=self.dtype, order=order)
        if self.kind == "bytes":
            return np.full(shape, b"", dtype=object, order=order)
        return np.empty(shape, dtype=self.dtype, order=order)

    def full(self, shape: tuple[int, ...], fill: Any, order: str = "C") -> np.ndarray:
        """An array of this type filled with ``fill``."""
        if fill is None:
            fill = self.default_fill()
        if self.kind == "bytes":
            out = np.empty(shape, dtype=object, order=order)
            out.fill(fill)
            return out
        return np.full(shape, fill, dtype=self.dtype, order=order)


def _int_to_time(value: int, dtype: np.dtype) -> Any:
    """An int64 count as a datetime64/timedelta64 scalar of ``dtype`` (any byte order)."""
    return np.array(value, dtype=np.int64).view(dtype.newbyteorder("=")).astype(dtype)[()]


def _float_to_json(value: Any) -> Any:
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def _float_from_json(obj: Any, dtype: np.dtype) -> Any:
    if isinstance(obj, str):
        if obj == "NaN":
            return np.array(np.nan, dtype=dtype)[()]
        if obj == "Infinity":
            return np.array(np.inf, dtype=dtype)[()]
        if obj == "-Infinity":
            return np.array(-np.inf, dtype=dtype)[()]
        if obj.lower().startswith("0x"):
            raw = int(obj, 16).to_bytes(dtype.itemsize, "big")
            if sys.byteorder == "little":
                raw = raw[::-1]
            return np.frombuffer(
                raw, dtype=dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype
            )[0]
        raise MetadataError(f"invalid floating-point fill_value {obj!r}")
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise MetadataError(f"invalid floating-point fill_value {obj!r}")
    return np.array(obj, dtype=dtype)[()]


def _struct_to_v2(dtype: np.dtype) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name in dtype.names or ():
        fdt = dtype.fields[name][0]
        if fdt.subdtype is not None:
            base, shape = fdt.subdtype
            out.append([name, base.str, list(shape)])
        elif fdt.names:
            out.append([name, _struct_to_v2(fdt)])
        else:
            out.append([name, fdt.str])
    return out


# Structured data types nest (a field may be a struct): a data type's JSON deeper
# than this is refused before it is walked. Each struct level adds 3 (v2) or 4
# (v3) levels of JSON, so about 30 levels of structs; numpy cannot even print
# a dtype some 300 levels deep (RecursionError), and no real one comes close.
_MAX_DTYPE_JSON_DEPTH = 128


def _check_depth(obj: Any, what: str) -> None:
    """Refuse JSON nested more than ``_MAX_DTYPE_JSON_DEPTH`` levels (walked
    without recursion: a hostile document may be thousands of levels deep)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DTYPE_JSON_DEPTH:
            raise MetadataError(f"{what} is nested more than {_MAX_DTYPE_JSON_DEPTH} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _struct_from_v2(obj: list[Any]) -> np.dtype:
    fields = []
    for item in obj:
        if not isinstance(item, list) or len(item) not in (2, 3):
            raise MetadataError(f"invalid structured dtype field {item!r}")
        name, typ = item[0], item[1]
        typ = _struct_from_v2(typ) if isinstance(typ, list) else np.dtype(typ)
        fields.append((name, typ, tuple(item[2])) if len(item) == 3 else (name, typ))
    return np.dtype(fields)


def _from_numpy(dt: np.dtype, zarr_format: int) -> DataType:
    k = dt.kind
    if dt.name in _ML_NAMES and getattr(dt.type, "__module__", "").startswith("ml_dtypes"):
        return DataType("ml", dt, dt.name)
    if k == "b":
        return DataType("bool", np.dtype(bool), "bool")
    if k in "iu":
        d = dt if zarr_format == 2 else dt.newbyteorder("=")
        return DataType("int" if k == "i" else "uint", d, d.name)
    if k == "f":
        d = dt if zarr_format == 2 else dt.newbyteorder("=")
        if d.name not in _FLOAT_NAMES:
            raise MetadataError(f"unsupported float type {dt}")
        return DataType("float", d, d.name)
    if k == "c":
        d = dt if zarr_format == 2 else dt.newbyteorder("=")
        return DataType("complex", d, d.name)
    if k in "Mm":
        d = dt if zarr_format == 2 else dt.newbyteorder("=")
        # generic units (``M8``, ``m8``) as zarr-python writes them: v2 '<M8', v3 unit
        # "generic"; every value but NaT is a bare count
        return DataType("datetime" if k == "M" else "timedelta", d, "")
    if k == "S":
        if dt.itemsize == 0:
            return DataType("bytes", np.dtype(object), "variable_length_bytes")
        return DataType("fixed_bytes", dt, "")
    if k == "U":
        if dt.itemsize == 0:
            return _string_type()
        d = dt if zarr_format == 2 else dt.newbyteorder("=")
        return DataType("fixed_unicode", d, "")
    if k == "V":
        if dt.names:
            return DataType("struct", dt, "")
        if dt.subdtype is not None:
            raise MetadataError(f"sub-array dtypes are not supported: {dt}")
        return DataType("raw", dt, "")
    if k == "T":
        return _string_type()
    if k == "O":
        return _string_type()
    raise MetadataError(f"unsupported data type {dt}")


def _string_type() -> DataType:
    return DataType(
        "string", _STRING_DTYPE if _STRING_DTYPE is not None else np.dtype(object), "string"
    )


def _bytes_type() -> DataType:
    return DataType("bytes", np.dtype(object), "variable_length_bytes")


# Parsed numeric data type names: DataType objects are immutable, and parsing
# one (numpy dtype, hash of its str) was ~2.5 us of a ~15 us zarr.json parse,
# paid once per array of a consolidated hierarchy.
_NUMERIC_V3: dict[str, DataType] = {}


def from_json_v3(obj: Any) -> DataType:
    """Parse a v3 ``data_type`` value."""
    if type(obj) is str:
        hit = _NUMERIC_V3.get(obj)
        if hit is not None:
            return hit
    if isinstance(obj, str):
        if obj == "bool":
            dt = _NUMERIC_V3[obj] = DataType("bool", np.dtype(bool), "bool")
            return dt
        if obj in _INT_NAMES:
            dt = _NUMERIC_V3[obj] = DataType("int" if obj[0] == "i" else "uint", np.dtype(obj), obj)
            return dt
        if obj in _FLOAT_NAMES:
            dt = _NUMERIC_V3[obj] = DataType("float", np.dtype(obj), obj)
            return dt
        if obj in _COMPLEX_NAMES:
            dt = _NUMERIC_V3[obj] = DataType("complex", np.dtype(obj), obj)
            return dt
        if obj in _ML_NAMES:
            return DataType("ml", _ml_dtype(obj), obj)
        if obj == "string":
            return _string_type()
        if obj in ("variable_length_bytes", "bytes"):
            return _bytes_type()
        if obj.startswith("r") and obj[1:].isdigit() and int(obj[1:]) % 8 == 0 and int(obj[1:]) > 0:
            return DataType("raw", np.dtype(f"V{int(obj[1:]) // 8}"), "")
        raise MetadataError(f"unknown data_type {obj!r}")
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        name, conf = obj["name"], obj.get("configuration") or {}
        if not isinstance(conf, dict):
            raise MetadataError(f"data_type configuration must be an object: {obj!r}")
        try:
            if name in ("numpy.datetime64", "numpy.timedelta64"):
                code = "M8" if name.endswith("datetime64") else "m8"
                scale = int(conf.get("scale_factor", 1))
                unit = conf["unit"]
                dt = np.dtype(f"{code}[{scale}{unit}]" if scale != 1 else f"{code}[{unit}]")
                return DataType("datetime" if code == "M8" else "timedelta", dt, "")
            if name == "null_terminated_bytes":
                return DataType("fixed_bytes", np.dtype(f"S{int(conf['length_bytes'])}"), "")
            if name == "fixed_length_utf32":
                n = int(conf["length_bytes"])
                if n % 4:
                    raise MetadataError("fixed_length_utf32 length_bytes must be a multiple of 4")
                return DataType("fixed_unicode", np.dtype(f"U{n // 4}"), "")
            if name == "raw_bytes":
                return DataType("raw", np.dtype(f"V{int(conf['length_bytes'])}"), "")
            if name in ("struct", "structured"):
                _check_depth(obj, "struct data_type")
                fields = []
                for f in conf["fields"]:
                    if isinstance(f, dict):
                        fname, ftype = f["name"], f["data_type"]
                    else:
                        fname, ftype = f[0], f[1]
                    sub = from_json_v3(ftype) if not _looks_v2(ftype) else parse_data_type(ftype, 2)
                    if sub.is_vlen:
                        raise MetadataError("variable-length fields are not allowed in structs")
                    fields.append((fname, sub.dtype))
                return DataType("struct", np.dtype(fields), "")
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, MetadataError):
                raise
            raise MetadataError(f"invalid data_type {obj!r}: {e}") from e
        known = _UNSUPPORTED_EXTENSIONS.get(name)
        if known is not None:
            raise UnsupportedExtensionError(f"data_type {name!r}: {known}")
        if obj.get("must_understand", True) is False:
            raise MetadataError(f"unknown data_type {name!r}")
        raise MetadataError(f"unknown data_type {name!r}")
    raise MetadataError(f"invalid data_type {obj!r}")


# Registered zarr-extensions data types cuzarr knows of and does not read, with why
_UNSUPPORTED_EXTENSIONS = {
    "optional": (
        "the zarr-extensions 'optional' data type (nullable values, as zarrs writes "
        "them; https://github.com/zarr-developers/zarr-extensions/tree/main/data-types/optional) "
        "is not supported: its specification is not stable yet, and it has one "
        "implementation (zarrs)"
    ),
}


def _looks_v2(s: Any) -> bool:
    return isinstance(s, str) and len(s) > 1 and s[0] in "<>|="


def from_json_v2(obj: Any, object_codec_id: str | None = None) -> DataType:
    """Parse a v2 ``dtype``; object dtypes resolve through their vlen filter."""
    try:
        if isinstance(obj, list):
            _check_depth(obj, "v2 dtype")
            return DataType("struct", _struct_from_v2(obj), "")
        if not isinstance(obj, str):
            raise MetadataError(f"invalid v2 dtype {obj!r}")
        if obj in _ML_NAMES:
            return DataType("ml", _ml_dtype(obj), obj)
        dt = np.dtype(obj)
    except TypeError as e:
        raise MetadataError(f"invalid v2 dtype {obj!r}: {e}") from e
    if dt.kind == "O":
        if object_codec_id in ("vlen-utf8", "json2", "json", "msgpack2", "pickle"):
            if object_codec_id not in ("vlen-utf8",):
                raise MetadataError(f"object arrays with {object_codec_id!r} are not supported")
            return _string_type()
        if object_codec_id == "vlen-bytes":
            return _bytes_type()
        if object_codec_id is None:
            raise MetadataError(
                "object dtype without an object codec (vlen-utf8/vlen-bytes) in filters"
            )
        raise MetadataError(f"object arrays with {object_codec_id!r} are not supported")
    return _from_numpy(dt, 2)


def parse_data_type(value: Any, zarr_format: int) -> DataType:
    """Turn what a caller passes as ``dtype`` into a ``DataType``.

    Accepts numpy dtypes and anything ``np.dtype`` takes, ``str`` (variable-length
    strings), ``bytes`` (variable-length bytes), v3 names and JSON objects, and
    zarr-python ``ZDType`` instances.
    """
    if isinstance(value, DataType):
        return value.native() if zarr_format == 3 else value
    if type(value) is str or (isinstance(value, np.dtype) and value.metadata is None):
        try:
            return _PARSED[(value, zarr_format)]
        except (KeyError, TypeError):  # TypeError: a dtype numpy cannot hash
            pass
        parsed = _parse_data_type(value, zarr_format)
        if parsed.kind in _CACHED_KINDS and len(_PARSED) < 1024:
            _PARSED[(value, zarr_format)] = parsed
        return parsed
    return _parse_data_type(value, zarr_format)


# ``dtype=`` arguments parsed before (a str or numpy dtype of a numeric kind):
# parsing one cost ~10 us (numpy's dtype name lookups) of a ~80 us create_array.
_PARSED: dict[tuple[Any, int], DataType] = {}
_CACHED_KINDS = frozenset(("bool", "int", "uint", "float", "complex", "datetime", "timedelta"))


def _parse_data_type(value: Any, zarr_format: int) -> DataType:
    if value is str:
        return _string_type()
    if value is bytes:
        return _bytes_type()
    if isinstance(value, dict):
        return from_json_v3(value)
    cls = type(value).__name__
    if cls == "VariableLengthBytes":
        return _bytes_type()
    if cls in ("VariableLengthUTF8",):
        return _string_type()
    to_native = getattr(value, "to_native_dtype", None)
    if callable(to_native) and not isinstance(value, np.dtype):
        value = to_native()
    if isinstance(value, str):
        if value in ("string",):
            return _string_type()
        if value == "variable_length_bytes":
            return _bytes_type()
        if value in _ML_NAMES:
            return DataType("ml", _ml_dtype(value), value)
    try:
        dt = np.dtype(value)
    except TypeError as e:
        raise TypeError(f"cannot interpret {value!r} as a data type") from e
    return _from_numpy(dt, zarr_format)


# What a fill decoder returns for a value its kind has no reading of.
_NO_FILL: Any = object()


def _int_fill(obj: Any) -> int:
    if isinstance(obj, bool) or not isinstance(obj, int):
        if isinstance(obj, float) and obj.is_integer():
            return int(obj)  # (as cuzarr wrote ml integer fills before)
        raise MetadataError(f"integer fill_value expected, got {obj!r}")
    return obj


def _numeric_fill(dt: DataType, obj: Any, zarr_format: int) -> Any:
    """Fill values of booleans, numbers and times."""
    k = dt.kind
    if k == "bool":
        if zarr_format == 2 and type(obj) is int and obj in (0, 1):
            obj = bool(obj)  # v2 writers (zarr-python 2 among them) wrote 0 / 1
        if not isinstance(obj, bool):
            raise MetadataError(f"bool fill_value must be true/false, got {obj!r}")
        return np.bool_(obj)
    if k in ("int", "uint") or (k == "ml" and dt.is_ml_int):
        return np.array(_int_fill(obj), dtype=dt.dtype)[()]
    if k in ("float", "ml"):
        return _float_from_json(obj, dt.dtype)
    if k == "complex":
        if not (isinstance(obj, list) and len(obj) == 2):
            raise MetadataError(f"complex fill_value must be [re, im], got {obj!r}")
        part = np.dtype(f"f{dt.dtype.itemsize // 2}")
        re = _float_from_json(obj[0], part)
        im = _float_from_json(obj[1], part)
        return np.array(complex(re, im), dtype=dt.dtype)[()]
    if isinstance(obj, str):  # datetime, timedelta: ISO strings and "NaT" tolerated
        return np.array(obj, dtype=dt.dtype)[()]
    return _int_to_time(int(obj), dt.dtype)


def _bytes_fill(dt: DataType, obj: Any, zarr_format: int) -> Any:
    """Fill values of strings and bytes (zarr-python 2 wrote 0 for empty ones)."""
    k = dt.kind
    zero = isinstance(obj, (int, float)) and obj == 0
    if k == "string":
        return "" if zero and zarr_format == 2 else str(obj)
    if k == "fixed_unicode":
        return np.str_("" if zero else obj)
    raw = bytes(obj) if isinstance(obj, list) else b"" if zero else _unb64(obj)
    if k == "bytes":
        return raw
    if k == "fixed_bytes":
        return np.bytes_(raw)
    return np.frombuffer(raw.ljust(dt.dtype.itemsize, b"\0"), dtype=dt.dtype)[0]  # raw


def _struct_fill(dt: DataType, obj: Any, zarr_format: int) -> Any:
    """Fill values of structured types: base64 bytes, 0, per-field objects, lists."""
    if isinstance(obj, str):
        raw = _unb64(obj)
        if len(raw) != dt.dtype.itemsize:
            raise MetadataError("structured fill_value has the wrong length")
        return np.frombuffer(raw, dtype=dt.dtype)[0]
    if isinstance(obj, (int, float)) and obj == 0:
        return np.zeros((), dtype=dt.dtype)[()]
    if isinstance(obj, dict):
        arr = np.zeros((), dtype=dt.dtype)
        for name in dt.dtype.names or ():
            fdt = parse_data_type(dt.dtype.fields[name][0], 3)
            arr[name] = fdt.fill_from_json(obj[name], zarr_format)
        return arr[()]
    if isinstance(obj, list):
        return np.array(tuple(obj), dtype=dt.dtype)[()]
    return _NO_FILL
