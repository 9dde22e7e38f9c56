"""Interoperability: arrays written by cuzarr are read by tensorstore and vice versa.

Only the cases tensorstore supports are parametrized (no skips):
- data types: tensorstore's zarr drivers have no datetime64/timedelta64, no fixed-length
  unicode ('<U'), no variable-length strings or bytes; its Python binding maps zarr v2's
  '|S<n>' to a 'char' dtype that converts to a zero-itemsize numpy array, so 'S5' is left
  out too. Structured dtypes are tested in v2 (tensorstore reads them one field at a time).
  bfloat16 / float8 are only here (zarr-python 3.4 lacks them), v3 only, as the spec's
  zarr-extensions names are v3 data types.
- codecs: tensorstore's v2 driver requires "filters": null and its v3 driver knows no
  numcodecs.* codecs, so numcodecs filters are covered by the zarr-python tests only.
- attributes: tensorstore has no attribute API; we check it opens such arrays and, for
  arrays it created, that cuzarr reads the attributes it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _interop_helpers import (
    DTYPES,
    LIBS,
    Spec,
    arr_path,
    assert_data_equal,
    direction_ids,
    directions,
    expected_chunk_keys,
    read_attrs_json,
    read_metadata_json,
    run_fill,
    run_partial,
    run_roundtrip,
    stored_chunk_keys,
)

PEER = "tensorstore"
DIRS = pytest.mark.parametrize(("writer", "reader"), directions(PEER), ids=direction_ids(PEER))
FORMATS = pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])

_NUMERIC = [k for k, d in DTYPES.items() if d.kind in ("bool", "int", "uint", "float", "complex")]
_ML = [k for k, d in DTYPES.items() if d.kind == "ml"]


def _dtype_params():
    for key in _NUMERIC:
        for fmt in (2, 3):
            yield pytest.param(key, fmt, id=f"{key}-v{fmt}")
    yield pytest.param("struct", 2, id="struct-v2")
    for key in _ML:
        yield pytest.param(key, 3, id=f"{key}-v3")


@DIRS
@pytest.mark.parametrize(("dtkey", "fmt"), list(_dtype_params()))
def test_dtype_roundtrip(tmp_path, rng, writer, reader, dtkey, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), codec="zstd")
    run_roundtrip(tmp_path, writer, reader, spec, rng)


def _codec_params():
    for dtkey in ("int16", "float64", "bfloat16"):
        for fmt in (2, 3) if dtkey != "bfloat16" else (3,):
            # tensorstore's zarr v2 driver has no lz4; its zstd has no checksum option
            extra = ["zlib", "blosc-zstd-bitshuffle"] if fmt == 2 else ["transpose", "zstd+crc32c"]
            codecs = ["none", "zstd", "gzip", "blosc", *extra]
            for codec in codecs:
                yield pytest.param(dtkey, fmt, codec, id=f"{dtkey}-v{fmt}-{codec}")


@DIRS
@pytest.mark.parametrize(("dtkey", "fmt", "codec"), list(_codec_params()))
def test_codec_roundtrip(tmp_path, rng, writer, reader, dtkey, fmt, codec):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), codec=codec)
    run_roundtrip(tmp_path, writer, reader, spec, rng)


SHAPES = [
    ((), ()),
    ((0,), (3,)),
    ((5, 0), (2, 2)),
    ((1,), (1,)),
    ((7,), (3,)),
    ((10,), (5,)),
    ((3, 4), (5, 5)),
    ((9, 7), (4, 3)),
    ((4, 5, 6), (3, 2, 4)),
]


@DIRS
@FORMATS
@pytest.mark.parametrize(
    ("shape", "chunks"), SHAPES, ids=[f"{s}-{c}".replace(" ", "") for s, c in SHAPES]
)
def test_shape_roundtrip(tmp_path, rng, writer, reader, fmt, shape, chunks):
    spec = Spec(fmt=fmt, dt=DTYPES["int32"], shape=shape, chunks=chunks)
    run_roundtrip(tmp_path, writer, reader, spec, rng)


@DIRS
@pytest.mark.parametrize("dtkey", ["int32", "float64", "complex128", "uint8", "struct"])
@pytest.mark.parametrize(("shape", "chunks"), [((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4))])
def test_order_f_v2(tmp_path, rng, writer, reader, dtkey, shape, chunks):
    spec = Spec(fmt=2, dt=DTYPES[dtkey], shape=shape, chunks=chunks, order="F", codec="blosc")
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    assert read_metadata_json(arr_path(tmp_path), 2)["order"] == "F"


def _partial_params():
    for fmt in (2, 3):
        for dtkey, fill in (("int32", -5), ("float32", np.nan), ("complex64", 1 - 2j)):
            for shape, chunks in (((7,), (3,)), ((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4))):
                yield pytest.param(
                    fmt, dtkey, fill, shape, chunks, "C", id=f"v{fmt}-{dtkey}-{shape}"
                )
    yield pytest.param(2, "int16", 3, (9, 7), (4, 3), "F", id="v2-int16-F")
    yield pytest.param(3, "bfloat16", np.nan, (9, 7), (4, 3), "C", id="v3-bfloat16")


@pytest.mark.parametrize(
    ("first", "second"), directions(PEER), ids=[f"{i}-first" for i, _ in directions(PEER)]
)
@pytest.mark.parametrize(
    ("fmt", "dtkey", "fill", "shape", "chunks", "order"), list(_partial_params())
)
def test_partial_writes(tmp_path, rng, first, second, fmt, dtkey, fill, shape, chunks, order):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=shape, chunks=chunks, order=order, fill_value=fill)
    run_partial(tmp_path, first, second, spec, rng)


FILL_CASES = [
    ("float64", np.nan, (2, 3)),
    ("float64", np.inf, (2, 3)),
    ("float64", -np.inf, (2, 3)),
    ("float64", -0.0, (2, 3)),
    ("float32", np.nan, (2, 3)),
    ("float16", -np.inf, (2, 3)),
    ("complex128", complex(np.nan, np.inf), (2, 3)),
    ("complex64", complex(1.5, -2.0), (2, 3)),
    ("int8", -128, (2, 3)),
    ("int64", -(2**63), (2, 3)),
    ("uint64", 2**64 - 1, (2, 3)),
    ("bool", True, (2, 3)),
    ("struct", (7, 2.5), (2,)),
    ("bfloat16", np.nan, (3,)),
    ("bfloat16", -1.5, (3,)),
    ("float8_e4m3fn", 2.0, (3,)),
    ("float8_e5m2", -np.inf, (3,)),
]


@DIRS
@pytest.mark.parametrize(
    ("dtkey", "fill", "fmt"),
    [pytest.param(k, f, fmt, id=f"{k}-{f!r}-v{fmt}") for k, f, fmts in FILL_CASES for fmt in fmts],
)
def test_fill_value(tmp_path, rng, writer, reader, dtkey, fill, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), fill_value=fill)
    run_fill(tmp_path, writer, reader, spec, rng)


ATTRS = {"text": "héllo ✓ 日本", "n": 3, "nested": {"l": [1.5, None, "ü"]}}


@DIRS
@FORMATS
def test_attributes(tmp_path, rng, writer, reader, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES["float32"], shape=(9, 7), chunks=(4, 3), attributes=ATTRS)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    path = arr_path(tmp_path)
    assert read_attrs_json(path, fmt) == ATTRS
    if reader == "cuzarr":
        assert LIBS["cuzarr"].attrs(path) == ATTRS


@DIRS
@pytest.mark.parametrize("names", [("time", "y"), ("x", None), ("日本", "ü")])
def test_dimension_names(tmp_path, rng, writer, reader, names):
    spec = Spec(fmt=3, dt=DTYPES["uint16"], shape=(9, 7), chunks=(4, 3), dimension_names=names)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    path = arr_path(tmp_path)
    assert tuple(read_metadata_json(path, 3)["dimension_names"]) == names
    assert LIBS[reader].dimension_names(path) == names


@DIRS
@pytest.mark.parametrize(
    ("fmt", "sep", "v2_keys"),
    [(3, "/", False), (3, ".", False), (3, ".", True), (2, ".", False), (2, "/", False)],
    ids=["v3-slash", "v3-dot", "v3-v2encoding-dot", "v2-dot", "v2-slash"],
)
@pytest.mark.parametrize(("shape", "chunks"), [((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4)), ((), ())])
def test_chunk_key_encoding(tmp_path, rng, writer, reader, fmt, sep, v2_keys, shape, chunks):
    spec = Spec(
        fmt=fmt, dt=DTYPES["int32"], shape=shape, chunks=chunks, separator=sep, v2_keys=v2_keys
    )
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    assert stored_chunk_keys(arr_path(tmp_path)) == expected_chunk_keys(spec)


@pytest.mark.parametrize("dtkey", _ML)
def test_ml_dtype_names_on_disk(tmp_path, rng, dtkey):
    """cuzarr writes bfloat16/float8 under their zarr-extensions data_type names."""
    spec = Spec(fmt=3, dt=DTYPES[dtkey], shape=(5,), chunks=(2,))
    path = arr_path(tmp_path)
    LIBS["cuzarr"].create(path, spec)
    assert read_metadata_json(path, 3)["data_type"] == dtkey
    data = LIBS["tensorstore"].read(path, spec)
    assert_data_equal(data, np.zeros(5, DTYPES[dtkey].np_dtype), DTYPES[dtkey])
    json.dumps(read_metadata_json(path, 3))
    assert Path(path, "zarr.json").is_file()


SHARD_CASES = [
    pytest.param((9, 7), (4, 3), (8, 6), "zstd", id="9x7-c4x3-s8x6"),
    pytest.param((9, 7), (2, 3), (4, 6), "none", id="9x7-c2x3-s4x6-raw"),
    pytest.param((4, 5, 6), (1, 2, 3), (2, 4, 6), "zstd+crc32c", id="4x5x6-crc32c"),
    pytest.param((10,), (5,), (10,), "blosc", id="10-exact"),
]


@DIRS
@pytest.mark.parametrize(("shape", "chunks", "shards", "codec"), SHARD_CASES)
@pytest.mark.parametrize("dtkey", ["int32", "float64", "bfloat16"])
def test_sharding_roundtrip(tmp_path, rng, writer, reader, shape, chunks, shards, codec, dtkey):
    spec = Spec(fmt=3, dt=DTYPES[dtkey], shape=shape, chunks=chunks, shards=shards, codec=codec)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    assert stored_chunk_keys(arr_path(tmp_path)) == expected_chunk_keys(spec)


@pytest.mark.parametrize(
    ("first", "second"), directions(PEER), ids=[f"{i}-first" for i, _ in directions(PEER)]
)
def test_sharding_partial_writes(tmp_path, rng, first, second):
    spec = Spec(fmt=3, dt=DTYPES["int32"], shape=(9, 7), chunks=(2, 3), shards=(4, 6), fill_value=7)
    run_partial(tmp_path, first, second, spec, rng)


@DIRS
@FORMATS
@pytest.mark.parametrize("dtkey", ["int16", "float64", "complex64"])
def test_big_endian(tmp_path, rng, writer, reader, fmt, dtkey):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), big_endian=True)
    run_roundtrip(tmp_path, writer, reader, spec, rng)


@DIRS
@pytest.mark.parametrize("dtkey", ["bfloat16", "float8_e4m3fn"])
def test_big_endian_ml_dtypes(tmp_path, rng, writer, reader, dtkey):
    """ml_dtypes types have no numpy byte-order variants: the bytes codec's endian
    "big" must still store big-endian elements (bfloat16 1.0 is 3f 80 on disk)."""
    spec = Spec(fmt=3, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), big_endian=True)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    path = str(tmp_path / "be")
    spec = Spec(fmt=3, dt=DTYPES[dtkey], shape=(2,), chunks=(2,), codec="none", big_endian=True)
    LIBS[writer].create(path, spec)
    values = np.array([1.0, -2.0], dtype=DTYPES[dtkey].np_dtype)
    LIBS[writer].write(path, spec, Ellipsis, values)
    want = values.view(f"u{values.itemsize}").astype(f">u{values.itemsize}").tobytes()
    assert Path(path, "c", "0").read_bytes() == want


@pytest.mark.parametrize("dtkey", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("compressor", ["blosc", "zstd", "lz4"])
def test_v2_ml_dtypes_with_numcodecs_compressors(tmp_path, dtkey, compressor):
    """v2 numcodecs compressors get ml_dtypes chunks as unsigned views (bfloat16 and
    float8 export no buffer); tensorstore's v2 driver reads what is written."""
    import numcodecs
    import tensorstore as ts

    import cuzarr

    codec = {"blosc": numcodecs.Blosc(), "zstd": numcodecs.Zstd(), "lz4": numcodecs.LZ4()}
    dt = DTYPES[dtkey].np_dtype
    data = (np.arange(35, dtype="f4").reshape(7, 5) / 4 - 3).astype(dt)
    path = str(tmp_path / "a")
    a = cuzarr.create_array(
        path, shape=(7, 5), chunks=(3, 2), dtype=dt, zarr_format=2, compressors=codec[compressor]
    )
    a[...] = data
    np.testing.assert_array_equal(cuzarr.open_array(path)[...].view("u1"), data.view("u1"))
    if compressor != "lz4":  # tensorstore's v2 driver has no lz4
        t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": path}}).result()
        np.testing.assert_array_equal(np.asarray(t.read().result()).view("u1"), data.view("u1"))
