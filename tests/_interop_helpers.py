"""Shared machinery for the interoperability tests (cuzarr <-> zarr-python, tensorstore).

Every library is wrapped in a small adapter with the same four operations:
``create(path, spec)``, ``write(path, spec, selection, values)``, ``read(path, spec)`` and
``check_metadata(path, spec)``.  A test picks a writer and a reader adapter, drives them
against the same local directory and compares what comes back with a numpy model.

Set ``CUZARR_TEST_IMPL=zarr`` to run the whole suite with zarr-python standing in for
cuzarr (the two share an API); that validates the harness itself.
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

try:  # bfloat16 / float8 only exist through ml_dtypes
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a test dependency
    ml_dtypes = None

IMPL_NAME = os.environ.get("CUZARR_TEST_IMPL", "cuzarr")


def impl():
    """The implementation under test (cuzarr, or zarr when validating the harness)."""
    return importlib.import_module(IMPL_NAME)


# --------------------------------------------------------------------------------------
# data types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DT:
    key: str
    # "bool" "int" "uint" "float" "complex" "datetime" "bytes_fixed" "str_fixed"
    # "vstr" "vbytes" "struct" "ml"
    kind: str
    np_dtype: Any  # numpy dtype of the in-memory model (object for the variable-length kinds)
    ts_v3: str | None = None  # tensorstore zarr3 data_type name, None when unsupported

    @property
    def fixed(self) -> bool:
        return self.kind not in ("vstr", "vbytes")

    @property
    def itemsize(self) -> int:
        return 8 if not self.fixed else self.np_dtype.itemsize


STRUCT_DTYPE = np.dtype([("a", "<i4"), ("b", "<f8")])


def _dt_table() -> dict[str, DT]:
    t: dict[str, DT] = {"bool": DT("bool", "bool", np.dtype(bool), "bool")}
    for n in ("int8", "int16", "int32", "int64"):
        t[n] = DT(n, "int", np.dtype(n), n)
    for n in ("uint8", "uint16", "uint32", "uint64"):
        t[n] = DT(n, "uint", np.dtype(n), n)
    for n in ("float16", "float32", "float64"):
        t[n] = DT(n, "float", np.dtype(n), n)
    for n in ("complex64", "complex128"):
        t[n] = DT(n, "complex", np.dtype(n), n)
    for n in ("M8[ns]", "M8[s]", "m8[ms]"):
        t[n] = DT(n, "datetime", np.dtype(n))
    t["S5"] = DT("S5", "bytes_fixed", np.dtype("S5"))
    t["U4"] = DT("U4", "str_fixed", np.dtype("<U4"))
    t["vstr"] = DT("vstr", "vstr", np.dtype(object))
    t["vbytes"] = DT("vbytes", "vbytes", np.dtype(object))
    t["struct"] = DT("struct", "struct", STRUCT_DTYPE)
    if ml_dtypes is not None:
        for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            t[n] = DT(n, "ml", np.dtype(getattr(ml_dtypes, n)), n)
    return t


DTYPES = _dt_table()

#: dtypes zarr-python 3.4 supports (it has no bfloat16 / float8)
ZARR_DTYPE_KEYS = [k for k, d in DTYPES.items() if d.kind != "ml"]
#: numcodecs.Delta is only lossless for integers (float deltas round, inf - inf is NaN)
DELTA_KINDS = ("int", "uint")


def dtype_formats(dt: DT) -> tuple[int, ...]:
    """Formats in which a dtype is tested: structured dtypes are a v2 feature."""
    return (2,) if dt.kind == "struct" else (2, 3)


# --------------------------------------------------------------------------------------
# random data and the fill value model
# --------------------------------------------------------------------------------------

_TEXT_POOL = list("abcXYZ09 é✓日本ßΩ\U0001f600-_")
_BYTES_POOL = [bytes([b]) for b in (0, 1, 7, 65, 97, 127, 128, 200, 255)]


def _put_specials(flat: np.ndarray, specials: list) -> None:
    for i, v in enumerate(specials[: flat.size]):
        flat[i] = v


def make_data(dt: DT, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    n = math.prod(shape)
    if dt.kind == "bool":
        out = rng.random(n) < 0.5
    elif dt.kind in ("int", "uint"):
        info = np.iinfo(dt.np_dtype)
        out = rng.integers(info.min, info.max, size=n, dtype=dt.np_dtype, endpoint=True)
        _put_specials(out, [info.max, info.min])
    elif dt.kind == "float":
        out = (rng.standard_normal(n) * 100).astype(dt.np_dtype)
        _put_specials(out, [np.nan, np.inf, -np.inf, -0.0])
        out = np.roll(out, 1)  # keep element 0 ordinary
    elif dt.kind == "complex":
        out = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt.np_dtype)
        _put_specials(out, [complex(np.nan, 1.0), complex(-np.inf, np.inf), complex(0.0, -0.0)])
        out = np.roll(out, 1)
    elif dt.kind == "datetime":
        out = rng.integers(-(2**40), 2**40, size=n, dtype=np.int64).view(dt.np_dtype)
        _put_specials(out, [np.array("NaT", dtype=dt.np_dtype)[()]])
        out = np.roll(out, 1)
    elif dt.kind == "bytes_fixed":
        # no NUL bytes: numpy strips trailing NULs of 'S' items, so they cannot round-trip
        alphabet = [bytes([b]) for b in (1, 65, 97, 122, 128, 200, 255)]
        out = np.array(
            [b"".join(rng.choice(alphabet, size=rng.integers(0, 6))) for _ in range(n)],
            dtype=dt.np_dtype,
        )
    elif dt.kind == "str_fixed":
        out = np.array(
            ["".join(rng.choice(_TEXT_POOL, size=rng.integers(0, 5))) for _ in range(n)],
            dtype=dt.np_dtype,
        )
    elif dt.kind == "vstr":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = "".join(rng.choice(_TEXT_POOL, size=rng.integers(0, 9)))
        _put_specials(out, ["", "héllo ✓ 日本"])
        out = np.roll(out, 1)
    elif dt.kind == "vbytes":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = b"".join(rng.choice(_BYTES_POOL, size=rng.integers(0, 9)))
        _put_specials(out, [b"", b"\x00\xff"])
        out = np.roll(out, 1)
    elif dt.kind == "struct":
        out = np.empty(n, dtype=dt.np_dtype)
        out["a"] = rng.integers(-(2**31), 2**31 - 1, size=n)
        out["b"] = rng.standard_normal(n)
    elif dt.kind == "ml":
        out = (rng.standard_normal(n) * 4).astype(np.float32).astype(dt.np_dtype)
        _put_specials(out, [np.nan])
        out = np.roll(out, 1)
    else:  # pragma: no cover
        raise AssertionError(dt)
    return np.asarray(out).reshape(shape)


def default_fill(dt: DT) -> Any:
    """An explicit, ordinary fill value for each dtype (tests pass it to every library)."""
    return {
        "bool": False,
        "int": 0,
        "uint": 0,
        "float": 0.0,
        "complex": 0j,
        "datetime": None,  # replaced by NaT below
        "bytes_fixed": b"",
        "str_fixed": "",
        "vstr": "",
        "vbytes": b"",
        "struct": (0, 0.0),
        "ml": 0.0,
    }[dt.kind]


def fill_scalar(dt: DT, fill: Any) -> Any:
    """The numpy model of a fill value (what every element of a missing chunk reads as)."""
    if dt.kind == "datetime":
        return np.array("NaT" if fill is None else fill, dtype=dt.np_dtype)[()]
    if dt.kind == "struct":
        return np.zeros((), dtype=dt.np_dtype) if fill is None else np.array(fill, dt.np_dtype)
    if dt.kind in ("vstr", "vbytes"):
        return fill
    return np.array(fill, dtype=dt.np_dtype)[()]


def fill_model(dt: DT, shape: tuple[int, ...], fill: Any) -> np.ndarray:
    out = np.empty(shape, dtype=dt.np_dtype)
    out[...] = fill_scalar(dt, fill)
    return out


# --------------------------------------------------------------------------------------
# array specs
# --------------------------------------------------------------------------------------

COMPRESSORS = ("none", "zstd", "gzip", "blosc")
#: more compressor set-ups, per format
EXTRA_COMPRESSORS = ("blosc-zstd-bitshuffle", "zlib", "lz4", "zstd-checksum", "zstd+crc32c")
EXTRA_V2 = ("blosc-zstd-bitshuffle", "zlib", "lz4")
EXTRA_V3 = ("blosc-zstd-bitshuffle", "zstd-checksum", "zstd+crc32c")


@dataclass
class Spec:
    fmt: int
    dt: DT
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    # none | zstd | gzip | blosc | delta (numcodecs filter, ints) | shuffle (numcodecs
    # filter, v2) | transpose (v3 array->array codec)
    codec: str = "zstd"
    order: str = "C"  # v2 only
    fill_value: Any = "default"
    attributes: dict | None = None
    dimension_names: tuple | None = None
    separator: str | None = None  # chunk key separator; None = the format's default
    use_dimension_separator: bool = False  # cuzarr side, v2: pass dimension_separator=
    v2_keys: bool = False  # v3 only: the "v2" chunk key encoding (keys without "c/")
    shards: tuple[int, ...] | None = None  # v3 sharding_indexed: shard shape
    big_endian: bool = False  # v2: '>' dtype; v3: bytes codec endian "big"
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.fill_value, str) and self.fill_value == "default":
            self.fill_value = default_fill(self.dt)

    @property
    def sep(self) -> str:
        if self.separator is not None:
            return self.separator
        return "/" if self.fmt == 3 and not self.v2_keys else "."

    def with_(self, **kw) -> Spec:
        return replace(self, **kw)


def expected_chunk_keys(spec: Spec) -> set[str]:
    """Keys of all chunks of a fully written array, independently of any library."""
    if 0 in spec.shape:
        return set()
    grid = [range(-(-s // c)) for s, c in zip(spec.shape, spec.shards or spec.chunks)]
    coords = (
        [()] if not grid else np.array(np.meshgrid(*grid, indexing="ij")).reshape(len(grid), -1).T
    )
    keys = set()
    for c in coords:
        parts = [str(int(i)) for i in c]
        if spec.fmt == 3 and not spec.v2_keys:
            keys.add(spec.sep.join(["c", *parts]))
        else:
            keys.add(spec.sep.join(parts) if parts else "0")
    return keys


def stored_chunk_keys(path: str) -> set[str]:
    meta = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}
    root = Path(path)
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name not in meta
    }


def read_metadata_json(path: str, fmt: int) -> dict:
    name = "zarr.json" if fmt == 3 else ".zarray"
    return json.loads(Path(path, name).read_text(encoding="utf-8"))


def read_attrs_json(path: str, fmt: int) -> dict:
    if fmt == 3:
        return read_metadata_json(path, 3).get("attributes", {})
    p = Path(path, ".zattrs")
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


# --------------------------------------------------------------------------------------
# comparisons
# --------------------------------------------------------------------------------------


def _as_object_list(a: np.ndarray) -> Any:
    return np.asarray(a).astype(object).tolist()


def assert_data_equal(actual: Any, expected: np.ndarray, dt: DT) -> None:
    """Exact, NaN-aware comparison of an array read back against the numpy model."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if dt.kind in ("vstr", "vbytes"):
        assert actual.dtype.kind in ("O", "T", "U" if dt.kind == "vstr" else "S"), actual.dtype
        got, want = _as_object_list(actual), _as_object_list(expected)
        typ = str if dt.kind == "vstr" else bytes
        flat = np.asarray(actual).astype(object).ravel()
        assert all(isinstance(x, typ) for x in flat), {type(x) for x in flat}
        assert got == want
        return
    if actual.dtype.kind in "iufcmM" and actual.dtype.byteorder != expected.dtype.byteorder:
        actual = actual.astype(actual.dtype.newbyteorder("="))  # compare values, not byte order
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if dt.kind == "struct":
        for name in expected.dtype.names:
            np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
        return
    if dt.kind == "ml":
        np.testing.assert_array_equal(actual.astype(np.float32), expected.astype(np.float32))
        return
    np.testing.assert_array_equal(actual, expected, strict=True)
    if dt.kind in ("float", "complex"):  # -0.0 vs 0.0 must survive too
        for part in (np.real, np.imag) if dt.kind == "complex" else (np.asarray,):
            a, e = part(actual), part(expected)
            mask = ~np.isnan(e)
            np.testing.assert_array_equal(np.signbit(a[mask]), np.signbit(e[mask]))


def assert_fill_equal(actual: Any, dt: DT, fill: Any) -> None:
    """Compare a library's reported fill value with the one requested."""
    want = fill_scalar(dt, fill)
    if dt.kind in ("vstr", "vbytes"):
        assert actual == want, f"fill {actual!r} != {want!r}"
        return
    got = np.asarray(actual)
    if dt.kind == "struct":
        got = got.astype(dt.np_dtype) if got.dtype != dt.np_dtype else got
        for name in dt.np_dtype.names:
            assert got[name] == want[name], (got, want)
        return
    if got.dtype != dt.np_dtype:
        got = got.astype(dt.np_dtype) if got.dtype.kind != "V" else got.view(dt.np_dtype)
    got, want = got.reshape(()), np.asarray(want)
    if dt.kind == "ml":  # numpy's NaN-awareness does not extend to ml_dtypes
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want)
    if (
        dt.kind in ("float", "complex", "ml")
        and not np.isnan(np.asarray(want, np.complex128)).any()
    ):
        assert np.signbit(np.real(got)) == np.signbit(np.real(want)), (got, want)


# --------------------------------------------------------------------------------------
# adapters: zarr-python-like libraries (cuzarr and zarr)
# --------------------------------------------------------------------------------------


def _v3_compressor(name: str, dt: DT) -> dict:
    if name == "zstd":
        return {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
    if name == "gzip":
        return {"name": "gzip", "configuration": {"level": 1}}
    if name == "blosc":
        return {
            "name": "blosc",
            "configuration": {
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "typesize": dt.itemsize if dt.fixed else 1,
                "blocksize": 0,
            },
        }
    if name == "blosc-zstd-bitshuffle":
        return {
            "name": "blosc",
            "configuration": {
                "cname": "zstd",
                "clevel": 3,
                "shuffle": "bitshuffle",
                "typesize": dt.itemsize if dt.fixed else 1,
                "blocksize": 0,
            },
        }
    if name == "zstd-checksum":
        return {"name": "zstd", "configuration": {"level": 3, "checksum": True}}
    if name == "crc32c":
        return {"name": "crc32c"}
    raise AssertionError(name)


def _v3_compressors(codec: str, dt: DT) -> list[dict]:
    if codec == "zstd+crc32c":
        return [_v3_compressor("zstd", dt), _v3_compressor("crc32c", dt)]
    return [_v3_compressor(codec, dt)]


def _v2_compressor(name: str):
    if name == "zstd":
        return numcodecs.Zstd(level=1)
    if name == "gzip":
        return numcodecs.GZip(level=1)
    if name == "blosc":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    if name == "blosc-zstd-bitshuffle":
        return numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE)
    if name == "zlib":
        return numcodecs.Zlib(level=1)
    if name == "lz4":
        return numcodecs.LZ4(acceleration=1)
    raise AssertionError(name)


def _compression_kwargs(spec: Spec) -> dict:
    """compressors= / filters= for zarr-like create_array."""
    codec = spec.codec
    if codec == "none":
        return {"compressors": None}
    if codec in COMPRESSORS or codec in EXTRA_COMPRESSORS:
        if spec.fmt == 2:
            return {"compressors": [_v2_compressor(codec)]}
        return {"compressors": _v3_compressors(codec, spec.dt)}
    if codec == "delta":
        assert spec.dt.kind in DELTA_KINDS
        dstr = spec.dt.np_dtype.str
        if spec.fmt == 2:
            filt = numcodecs.Delta(dtype=dstr)
        else:
            filt = {"name": "numcodecs.delta", "configuration": {"dtype": dstr}}
        comp = [_v2_compressor("zstd")] if spec.fmt == 2 else [_v3_compressor("zstd", spec.dt)]
        return {"filters": [filt], "compressors": comp}
    if codec == "shuffle":
        assert spec.fmt == 2 and spec.dt.fixed
        filt = numcodecs.Shuffle(elementsize=spec.dt.itemsize)
        return {"filters": [filt], "compressors": [_v2_compressor("zstd")]}
    if codec == "transpose":
        assert spec.fmt == 3
        order = list(range(len(spec.shape)))[::-1]
        return {
            "filters": [{"name": "transpose", "configuration": {"order": order}}],
            "compressors": [_v3_compressor("zstd", spec.dt)],
        }
    raise AssertionError(codec)


def zarrlike_dtype(mod, dt: DT):
    if dt.kind == "vstr":
        return str
    if dt.kind == "vbytes":
        for dotted in ("core.dtype.VariableLengthBytes", "dtype.VariableLengthBytes"):
            obj = mod
            try:
                for part in dotted.split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            return obj()
        return "variable_length_bytes"
    return dt.np_dtype


def _zarrlike_fill(spec: Spec) -> Any:
    fill = spec.fill_value
    if spec.dt.kind == "datetime" and fill is None:
        return fill_scalar(spec.dt, None)
    if spec.dt.kind == "struct" and fill is None:
        return None
    return fill


class ZarrLike:
    """Adapter for a library with zarr-python 3's API (zarr itself, or cuzarr)."""

    def __init__(self, name: str, module_name: str):
        self.name = name
        self.module_name = module_name

    @property
    def mod(self):
        return importlib.import_module(self.module_name)

    def create(self, path: str, spec: Spec):
        kw: dict[str, Any] = {
            "shape": spec.shape,
            "dtype": zarrlike_dtype(self.mod, spec.dt),
            "chunks": spec.chunks,
            "fill_value": _zarrlike_fill(spec),
            "zarr_format": spec.fmt,
            "overwrite": True,
            **_compression_kwargs(spec),
        }
        if spec.attributes is not None:
            kw["attributes"] = spec.attributes
        if spec.dimension_names is not None:
            kw["dimension_names"] = spec.dimension_names
        if spec.shards is not None:
            kw["shards"] = spec.shards
        if spec.big_endian:
            if spec.fmt == 2:
                kw["dtype"] = spec.dt.np_dtype.newbyteorder(">")
            else:
                kw["serializer"] = {"name": "bytes", "configuration": {"endian": "big"}}
        if spec.fmt == 2:
            kw["order"] = spec.order
            if spec.use_dimension_separator and self.module_name != "zarr":
                kw["dimension_separator"] = spec.sep
            else:
                kw["chunk_key_encoding"] = {"name": "v2", "separator": spec.sep}
        else:
            name = "v2" if spec.v2_keys else "default"
            kw["chunk_key_encoding"] = {"name": name, "separator": spec.sep}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.mod.create_array(path, **kw)

    def open(self, path: str, mode: str = "r"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.mod.open_array(path, mode=mode)

    def write(self, path: str, spec: Spec, selection, values: np.ndarray) -> None:
        a = self.open(path, mode="r+")
        a[selection] = values

    def read(self, path: str, spec: Spec, selection=Ellipsis) -> np.ndarray:
        return np.asarray(self.open(path)[selection])

    def check_metadata(self, path: str, spec: Spec) -> None:
        a = self.open(path)
        assert tuple(a.shape) == spec.shape
        assert tuple(a.chunks) == spec.chunks
        if spec.dt.fixed:
            want = (
                spec.dt.np_dtype.newbyteorder(">")
                if spec.big_endian and spec.fmt == 2
                else spec.dt.np_dtype
            )
            assert np.dtype(a.dtype) in (want, spec.dt.np_dtype), (a.dtype, want)
        else:  # numpy StringDType or object for strings, object for bytes
            assert np.dtype(a.dtype).kind in ("OT" if spec.dt.kind == "vstr" else "O"), a.dtype
        if spec.fmt == 2:
            assert a.order == spec.order
        assert_fill_equal(a.fill_value, spec.dt, spec.fill_value)

    def attrs(self, path: str) -> dict:
        return dict(self.open(path).attrs)

    def update_attrs(self, path: str, new: dict) -> None:
        self.open(path, mode="r+").attrs.update(new)

    def dimension_names(self, path: str):
        names = self.open(path).metadata.dimension_names
        return None if names is None else tuple(names)


# --------------------------------------------------------------------------------------
# adapter: tensorstore
# --------------------------------------------------------------------------------------


def _json_float(x: float) -> Any:
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _ts_fill_json(spec: Spec) -> Any:
    dt, fill = spec.dt, spec.fill_value
    if dt.kind == "bool":
        return bool(fill)
    if dt.kind in ("int", "uint"):
        return int(fill)
    if dt.kind in ("float", "ml"):
        return _json_float(fill)
    if dt.kind == "complex":
        c = complex(fill)
        return [_json_float(c.real), _json_float(c.imag)]
    if dt.kind == "struct":
        return base64.b64encode(fill_model(dt, (), fill).tobytes()).decode()
    raise AssertionError(f"tensorstore does not support {dt.key}")


def _ts_metadata(spec: Spec) -> dict:
    dt = spec.dt
    if spec.fmt == 3:
        codecs: list[dict] = []
        if spec.codec == "transpose":
            codecs.append(
                {
                    "name": "transpose",
                    "configuration": {"order": list(range(len(spec.shape)))[::-1]},
                }
            )
        codecs.append(
            {"name": "bytes", "configuration": {"endian": "big" if spec.big_endian else "little"}}
            if dt.itemsize > 1
            else {"name": "bytes"}
        )
        comp = "zstd" if spec.codec == "transpose" else spec.codec
        if comp != "none":
            codecs.extend(_v3_compressors(comp, dt))
        if spec.shards is not None:
            codecs = [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": list(spec.chunks),
                        "codecs": codecs,
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                        "index_location": "end",
                    },
                }
            ]
        grid_shape = list(spec.shards or spec.chunks)
        md = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(spec.shape),
            "data_type": dt.ts_v3,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid_shape}},
            "chunk_key_encoding": {
                "name": "v2" if spec.v2_keys else "default",
                "configuration": {"separator": spec.sep},
            },
            "fill_value": _ts_fill_json(spec),
            "codecs": codecs,
        }
        if spec.attributes is not None:
            md["attributes"] = spec.attributes
        if spec.dimension_names is not None:
            md["dimension_names"] = list(spec.dimension_names)
        return md
    assert spec.codec in COMPRESSORS + ("zlib", "blosc-zstd-bitshuffle"), spec.codec
    comp = {
        "zlib": {"id": "zlib", "level": 1},
        "blosc-zstd-bitshuffle": {
            "id": "blosc",
            "cname": "zstd",
            "clevel": 3,
            "shuffle": 2,
            "blocksize": 0,
        },
        "none": None,
        "zstd": {"id": "zstd", "level": 1},
        "gzip": {"id": "gzip", "level": 1},
        "blosc": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    }[spec.codec]
    dtype_json = (
        [list(f) for f in json.loads(json.dumps(dt.np_dtype.descr))]
        if dt.kind == "struct"
        else dt.np_dtype.newbyteorder(">" if spec.big_endian else "<").str
    )
    return {
        "zarr_format": 2,
        "shape": list(spec.shape),
        "chunks": list(spec.chunks),
        "dtype": dtype_json,
        "fill_value": _ts_fill_json(spec),
        "order": spec.order,
        "filters": None,
        "compressor": comp,
        "dimension_separator": spec.sep,
    }


class TensorStoreLib:
    name = "tensorstore"

    @staticmethod
    def _driver(spec: Spec) -> str:
        return "zarr3" if spec.fmt == 3 else "zarr"

    def _open(self, path: str, spec: Spec, **kw):
        import tensorstore as ts

        js = {"driver": self._driver(spec), "kvstore": {"driver": "file", "path": path}, **kw}
        return ts.open(js).result()

    def create(self, path: str, spec: Spec):
        import tensorstore as ts

        js = {
            "driver": self._driver(spec),
            "kvstore": {"driver": "file", "path": path},
            "metadata": _ts_metadata(spec),
        }
        if spec.dt.kind == "struct":  # a structured array opens one field at a time
            js["field"] = spec.dt.np_dtype.names[0]
        t = ts.open(js, create=True, delete_existing=True).result()
        if spec.fmt == 2 and spec.attributes is not None:
            # tensorstore's zarr v2 driver does not manage .zattrs; write it per the v2 spec
            Path(path, ".zattrs").write_text(json.dumps(spec.attributes), encoding="utf-8")
        return t

    def write(self, path: str, spec: Spec, selection, values: np.ndarray) -> None:
        sel = () if selection is Ellipsis else selection
        if spec.dt.kind == "struct":
            for name in spec.dt.np_dtype.names:
                t = self._open(path, spec, field=name)
                t[sel].write(np.ascontiguousarray(values[name])).result()
            return
        t = self._open(path, spec)
        t[sel].write(values).result()

    def read(self, path: str, spec: Spec, selection=Ellipsis) -> np.ndarray:
        sel = () if selection is Ellipsis else selection
        if spec.dt.kind == "struct":
            parts = {
                n: self._open(path, spec, field=n)[sel].read().result()
                for n in spec.dt.np_dtype.names
            }
            first = next(iter(parts.values()))
            out = np.empty(first.shape, dtype=spec.dt.np_dtype)
            for n, v in parts.items():
                out[n] = v
            return out
        return np.asarray(self._open(path, spec)[sel].read().result())

    def check_metadata(self, path: str, spec: Spec) -> None:
        field_kw = {"field": spec.dt.np_dtype.names[1]} if spec.dt.kind == "struct" else {}
        t = self._open(path, spec, **field_kw)
        assert tuple(t.shape) == spec.shape
        if spec.dt.kind != "struct":
            assert t.dtype.numpy_dtype == spec.dt.np_dtype, (t.dtype, spec.dt.np_dtype)
            assert_fill_equal(t.fill_value, spec.dt, spec.fill_value)
        if spec.shape:
            assert tuple(t.chunk_layout.read_chunk.shape) in (spec.chunks, spec.shards)

    def attrs(self, path: str) -> dict:
        raise NotImplementedError("tensorstore has no attribute API; tests read the JSON")

    def dimension_names(self, path: str):
        import tensorstore as ts

        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()
        return tuple(lbl or None for lbl in t.domain.labels)


LIBS: dict[str, Any] = {
    "cuzarr": ZarrLike("cuzarr", IMPL_NAME),
    "zarr": ZarrLike("zarr", "zarr"),
    "tensorstore": TensorStoreLib(),
}


def directions(peer: str) -> list[tuple[str, str]]:
    return [("cuzarr", peer), (peer, "cuzarr")]


def direction_ids(peer: str) -> list[str]:
    return [f"{w}->{r}" for w, r in directions(peer)]


# --------------------------------------------------------------------------------------
# scenarios, shared by the zarr and tensorstore test files
# --------------------------------------------------------------------------------------


def arr_path(tmp_path) -> str:
    return str(Path(tmp_path) / "arr")


def run_roundtrip(tmp_path, writer: str, reader: str, spec: Spec, rng) -> None:
    """writer creates the array and writes random data; reader reads it back exactly."""
    w, r = LIBS[writer], LIBS[reader]
    path = arr_path(tmp_path)
    data = make_data(spec.dt, spec.shape, rng)
    w.create(path, spec)
    w.write(path, spec, Ellipsis, data)
    r.check_metadata(path, spec)
    assert_data_equal(r.read(path, spec), data, spec.dt)
    # a sub-region read through the reader too (chunk-crossing, not chunk-aligned)
    if spec.shape and all(s > 1 for s in spec.shape):
        sel = tuple(slice(1, s - 1 if s > 2 else s) for s in spec.shape)
        assert_data_equal(r.read(path, spec, sel), data[sel], spec.dt)


def partial_selections(shape: tuple[int, ...]):
    """Two overlapping, chunk-unaligned regions (the second with a step where possible)."""
    if shape == (7,):
        return (slice(2, 5),), (slice(4, 7),)
    if shape == (9, 7):
        return (slice(1, 6), slice(2, 5)), (slice(0, 9, 2), slice(3, 7))
    if shape == (4, 5, 6):
        return (slice(0, 2), slice(1, 4), slice(2, 6)), (slice(1, 4), slice(3, 5), slice(0, 6, 2))
    raise AssertionError(shape)


def run_partial(tmp_path, first: str, second: str, spec: Spec, rng) -> None:
    """first creates + writes a region (other chunks stay missing), second reads all,
    writes another overlapping region, first and second both read the whole."""
    a, b = LIBS[first], LIBS[second]
    path = arr_path(tmp_path)
    model = fill_model(spec.dt, spec.shape, spec.fill_value)
    sel1, sel2 = partial_selections(spec.shape)
    a.create(path, spec)
    v1 = make_data(spec.dt, model[sel1].shape, rng)
    a.write(path, spec, sel1, v1)
    model[sel1] = v1
    assert_data_equal(b.read(path, spec), model, spec.dt)
    v2 = make_data(spec.dt, model[sel2].shape, rng)
    b.write(path, spec, sel2, v2)
    model[sel2] = v2
    assert_data_equal(a.read(path, spec), model, spec.dt)
    assert_data_equal(b.read(path, spec), model, spec.dt)
    # writing the fill value over a region that holds data (whole chunks included): the
    # stale chunks must not show through, whether they were deleted or rewritten
    sel3 = tuple(slice(0, s) for s in spec.shape[:-1]) + (slice(0, spec.shape[-1] - 1),)
    b.write(path, spec, sel3, fill_model(spec.dt, model[sel3].shape, spec.fill_value))
    model[sel3] = fill_scalar(spec.dt, spec.fill_value)
    assert_data_equal(a.read(path, spec), model, spec.dt)


def run_fill(tmp_path, writer: str, reader: str, spec: Spec, rng) -> None:
    """Fill value metadata round-trips; missing chunks (all but one) read as the fill."""
    w, r = LIBS[writer], LIBS[reader]
    path = arr_path(tmp_path)
    w.create(path, spec)
    model = fill_model(spec.dt, spec.shape, spec.fill_value)
    r.check_metadata(path, spec)
    assert_data_equal(r.read(path, spec), model, spec.dt)  # nothing written at all
    sel = tuple(slice(0, 1) for _ in spec.shape)
    v = make_data(spec.dt, model[sel].shape, rng)
    w.write(path, spec, sel, v)
    model[sel] = v
    assert_data_equal(r.read(path, spec), model, spec.dt)


def _cut_regions(z: Any, new_shape: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """The boxes cuzarr's shrink of zarr-python array ``z`` fills (core/resize.py)."""
    old = tuple(z.shape)
    g = z.metadata.chunk_grid
    dims = g.chunk_shape if hasattr(g, "chunk_shape") else g.chunk_shapes
    ends = []
    for o, n, spec in zip(old, new_shape, dims, strict=True):
        if n >= o or n == 0:
            ends.append(o if n >= o else 0)
            continue
        if isinstance(spec, int):
            end = -(-n // spec) * spec
        else:  # rectilinear: where the chunk holding n - 1 ends
            end = 0
            for edge in spec:
                end += edge
                if end >= n:
                    break
            end = max(end, n)
        ends.append(min(o, end))
    if any(e == 0 for e in ends):
        return []
    return [
        tuple(slice(n, e) if k == d else slice(0, ends[k]) for k in range(len(old)))
        for d, (n, e) in enumerate(zip(new_shape, ends, strict=True))
        if e > n
    ]


def _zarr_fill(z: Any) -> Any:
    fill = z.metadata.fill_value  # an AsyncArray has no fill_value of its own
    return fill if fill is not None else np.zeros((), z.dtype)[()]


def resize_as_cuzarr(z: Any, new_shape: tuple[int, ...]) -> None:
    """``z.resize(new_shape)`` on a zarr-python array, with what cuzarr's shrink
    does first (core/resize.py): the part of the kept edge chunks (shards) past
    the new end set to the fill value, a chunk left all fill deleted. zarr-python
    leaves those elements in place, and a later grow shows them again."""
    regions = _cut_regions(z, new_shape)
    if regions:
        w = z.with_config({"write_empty_chunks": False})
        for region in regions:
            w[region] = _zarr_fill(z)
    z.resize(new_shape)


async def resize_as_cuzarr_async(z: Any, new_shape: tuple[int, ...]) -> None:
    """:func:`resize_as_cuzarr` for a zarr-python ``AsyncArray``."""
    regions = _cut_regions(z, new_shape)
    if regions:
        w = z.with_config({"write_empty_chunks": False})
        for region in regions:
            await w.setitem(region, _zarr_fill(z))
    await z.resize(new_shape)
