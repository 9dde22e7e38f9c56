"""cuzarr.dtype against zarr-python 3.4's zarr.dtype (the oracle)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarr.dtype as zd

import cuzarr
import cuzarr.dtype as cd
from cuzarr.errors import DataTypeValidationError

SPECS = [
    "bool",
    "int8",
    "uint8",
    "int16",
    ">i2",
    "uint32",
    "<u8",
    "float16",
    "float32",
    ">f8",
    "complex64",
    ">c16",
    "M8[ms]",
    "datetime64[5s]",
    "m8",
    "timedelta64[ns]",
    "<U10",
    ">U3",
    "S4",
    "V3",
    str,
    "string",
    np.dtypes.StringDType(),
    [("a", "<i4"), ("b", ">f8")],
    {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 2}},
    {"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}},
]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's unstable-specification warnings
        yield


# zarr-python takes v3 JSON data types for zarr_format=3 only
CASES = [(s, f) for s in SPECS for f in (2, 3) if f == 3 or not isinstance(s, dict)]


@pytest.mark.parametrize(("spec", "fmt"), CASES, ids=repr)
def test_parse_dtype_as_zarr_python(spec, fmt: int) -> None:
    z = zd.parse_dtype(spec, zarr_format=fmt)
    c = cd.parse_dtype(spec, zarr_format=fmt)
    assert repr(c) == repr(z)
    assert c.to_native_dtype() == z.to_native_dtype()
    for f in (2, 3):
        assert c.to_json(zarr_format=f) == z.to_json(zarr_format=f)
    j = c.to_json(zarr_format=fmt)
    assert repr(type(c).from_json(j, zarr_format=fmt)) == repr(
        type(z).from_json(j, zarr_format=fmt)
    )


def test_classes_mirror_zarr_python() -> None:
    pairs = [
        (cd.Int16(endianness="big"), zd.Int16(endianness="big")),
        (cd.UInt64(), zd.UInt64()),
        (cd.Bool(), zd.Bool()),
        (cd.DateTime64(unit="s", scale_factor=10), zd.DateTime64(unit="s", scale_factor=10)),
        (cd.TimeDelta64(unit="generic", scale_factor=1), zd.TimeDelta64()),
        (cd.FixedLengthUTF32(length=5), zd.FixedLengthUTF32(length=5)),
        (cd.NullTerminatedBytes(length=3), zd.NullTerminatedBytes(length=3)),
        (cd.RawBytes(length=2), zd.RawBytes(length=2)),
        (cd.VariableLengthUTF8(), zd.VariableLengthUTF8()),
        (cd.VariableLengthBytes(), zd.VariableLengthBytes()),
    ]
    for c, z in pairs:
        assert repr(c) == repr(z)
        assert c.to_native_dtype() == z.to_native_dtype()
        assert c.to_json(zarr_format=3) == z.to_json(zarr_format=3)
        assert c.to_json(zarr_format=2) == z.to_json(zarr_format=2)
        d, zdef = c.default_scalar(), z.default_scalar()
        assert repr(d) == repr(zdef) or (d != d and zdef != zdef)
    assert cd.Int8.from_native_dtype(np.dtype("i1")) == cd.Int8()
    assert cd.Float32().cast_scalar(1.5) == np.float32(1.5)
    assert cd.Int16() != cd.UInt16() and cd.Int16() == cd.Int16(endianness="little")
    with pytest.raises(DataTypeValidationError):
        cd.Int8.from_native_dtype(np.dtype("f4"))
    assert cuzarr.dtype.parse_dtype is cd.parse_dtype


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.Int16(endianness="big"),
        lambda m: m.Float64(),
        lambda m: m.DateTime64(unit="ms", scale_factor=1),
        lambda m: m.FixedLengthUTF32(length=4),
        lambda m: m.VariableLengthUTF8(),
        lambda m: m.NullTerminatedBytes(length=3),
    ],
)
def test_dtype_argument_writes_what_zarr_python_writes(tmp_path: Path, fmt: int, make) -> None:
    for lib, mod in ((cuzarr, cd), (zarr, zd)):
        lib.create_array(
            str(tmp_path / lib.__name__), shape=(4,), chunks=(2,), dtype=make(mod), zarr_format=fmt
        )
    doc = "zarr.json" if fmt == 3 else ".zarray"
    cz = json.loads((tmp_path / "cuzarr" / doc).read_text())
    zp = json.loads((tmp_path / "zarr" / doc).read_text())
    key = "data_type" if fmt == 3 else "dtype"
    assert cz[key] == zp[key]
    assert cz["fill_value"] == zp["fill_value"]
    # each reads the other's array with the same type
    a = cuzarr.open_array(str(tmp_path / "zarr"))
    z = zarr.open_array(str(tmp_path / "cuzarr"))
    assert a.dtype == z.dtype


def test_zarr_python_dtype_objects_accepted() -> None:
    a = cuzarr.create_array({}, shape=(3,), dtype=zd.FixedLengthUTF32(length=2))
    assert a.dtype == np.dtype("<U2")
    assert cd.parse_dtype(zd.Int32(), zarr_format=3) == cd.Int32()


def test_object_dtype_is_ambiguous() -> None:
    for spec in (object, "O", np.dtype(object)):
        with pytest.raises(ValueError, match="ambiguous"):
            cd.parse_dtype(spec, zarr_format=3)
        with pytest.raises(ValueError):
            zd.parse_dtype(spec, zarr_format=3)
