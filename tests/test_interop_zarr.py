"""Interoperability: arrays written by cuzarr are read by zarr-python 3 and vice versa.

The matrix is crossed sensibly rather than fully: every dtype x format x direction with
one compressor; every codec x format x direction with a few dtypes; every shape x
format x direction; F order (v2) with several dtypes; partial writes by one library on
top of an array created by the other; and the metadata facts (fill values, attributes,
dimension names, chunk key encodings).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import cuzarr
from _interop_helpers import (
    DELTA_KINDS,
    DTYPES,
    EXTRA_V2,
    EXTRA_V3,
    LIBS,
    ZARR_DTYPE_KEYS,
    Spec,
    arr_path,
    assert_data_equal,
    direction_ids,
    directions,
    dtype_formats,
    expected_chunk_keys,
    impl,
    make_data,
    read_attrs_json,
    read_metadata_json,
    run_fill,
    run_partial,
    run_roundtrip,
    stored_chunk_keys,
    zarrlike_dtype,
)

PEER = "zarr"
DIRS = pytest.mark.parametrize(("writer", "reader"), directions(PEER), ids=direction_ids(PEER))
FORMATS = pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])


# ------------------------------------------------------------------ every dtype


def _dtype_params():
    # bfloat16 / float8 are excluded: zarr-python 3.4 does not support them (see the
    # tensorstore tests). Structured dtypes are a v2 feature (dtype_formats).
    for key in ZARR_DTYPE_KEYS:
        for fmt in dtype_formats(DTYPES[key]):
            yield pytest.param(key, fmt, id=f"{key}-v{fmt}")


@DIRS
@pytest.mark.parametrize(("dtkey", "fmt"), list(_dtype_params()))
def test_dtype_roundtrip(tmp_path, rng, writer, reader, dtkey, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), codec="zstd")
    run_roundtrip(tmp_path, writer, reader, spec, rng)


@pytest.mark.parametrize(("dtkey", "fmt"), list(_dtype_params()))
@DIRS
def test_library_defaults(tmp_path, rng, writer, reader, dtkey, fmt):
    """Each library's own defaults (compressors="auto", no fill_value, default chunk key
    encoding) produce arrays the other reads; read through the generic ``open``."""
    dt = DTYPES[dtkey]
    path = arr_path(tmp_path)
    data = make_data(dt, (9, 7), rng)
    w = LIBS[writer]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = w.mod.create_array(
            path, shape=(9, 7), chunks=(4, 3), dtype=zarrlike_dtype(w.mod, dt), zarr_format=fmt
        )
        a[...] = data
        got = LIBS[reader].mod.open(path, mode="r")
    assert tuple(got.shape) == (9, 7)
    assert_data_equal(np.asarray(got[...]), data, dt)


# ------------------------------------------------------------------ every codec


def _codec_params():
    for dtkey in ("int16", "float64", "vstr"):
        dt = DTYPES[dtkey]
        for fmt in (2, 3):
            codecs = ["none", "zstd", "gzip", "blosc"]
            if dt.kind in DELTA_KINDS:  # numcodecs.Delta is lossless for integers only
                codecs.append("delta")
            if fmt == 2 and dt.fixed:  # a lossless numcodecs filter for any fixed-size dtype
                codecs.append("shuffle")
            if fmt == 3:  # the v3 core array->array codec; v2 has no equivalent
                codecs.append("transpose")
            codecs.extend(EXTRA_V2 if fmt == 2 else EXTRA_V3)
            for codec in codecs:
                yield pytest.param(dtkey, fmt, codec, id=f"{dtkey}-v{fmt}-{codec}")


def _declared_codec_names(path: str, fmt: int) -> list[str]:
    md = read_metadata_json(path, fmt)
    if fmt == 2:
        names = [f["id"] for f in md.get("filters") or []]
        if md.get("compressor"):
            names.append(md["compressor"]["id"])
        return names
    return [c["name"] for c in md["codecs"]]


@DIRS
@pytest.mark.parametrize(("dtkey", "fmt", "codec"), list(_codec_params()))
def test_codec_roundtrip(tmp_path, rng, writer, reader, dtkey, fmt, codec):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), codec=codec)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    names = _declared_codec_names(arr_path(tmp_path), fmt)
    wanted = {"none": None, "zstd": "zstd", "gzip": "gzip", "blosc": "blosc"}.get(codec)
    if codec == "delta":
        assert names[0] in ("delta", "numcodecs.delta"), names
        assert "zstd" in names
    elif codec == "transpose":
        assert names[0] == "transpose", names
    elif codec == "shuffle":
        assert names == ["shuffle", "zstd"], names
    elif codec == "zstd+crc32c":
        assert names[-2:] == ["zstd", "crc32c"], names
    elif codec in ("blosc-zstd-bitshuffle", "zstd-checksum", "zlib", "lz4"):
        assert codec.split("-")[0] in names, names
    elif wanted is None:
        assert not {"zstd", "gzip", "blosc"} & set(names), names
    else:
        assert wanted in names, names


# ------------------------------------------------------------------ every shape

SHAPES = [
    ((), ()),  # 0-d
    ((0,), (3,)),  # zero-length
    ((5, 0), (2, 2)),  # zero-length trailing dim
    ((0, 4), (3, 3)),
    ((1,), (1,)),
    ((7,), (3,)),  # chunks do not divide the shape
    ((10,), (5,)),  # chunks divide the shape
    ((3, 4), (5, 5)),  # a chunk larger than the array
    ((9, 7), (4, 3)),
    ((4, 5, 6), (3, 2, 4)),
]


@DIRS
@FORMATS
@pytest.mark.parametrize("dtkey", ["int32", "vstr"])
@pytest.mark.parametrize(
    ("shape", "chunks"), SHAPES, ids=[f"{s}-{c}".replace(" ", "") for s, c in SHAPES]
)
def test_shape_roundtrip(tmp_path, rng, writer, reader, fmt, dtkey, shape, chunks):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=shape, chunks=chunks)
    run_roundtrip(tmp_path, writer, reader, spec, rng)


# ------------------------------------------------------------------ F order (v2 only)

F_DTYPES = ["int32", "float64", "complex128", "U4", "S5", "struct", "vstr", "M8[s]"]


@DIRS
@pytest.mark.parametrize("dtkey", F_DTYPES)
@pytest.mark.parametrize(("shape", "chunks"), [((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4))])
def test_order_f_v2(tmp_path, rng, writer, reader, dtkey, shape, chunks):
    spec = Spec(fmt=2, dt=DTYPES[dtkey], shape=shape, chunks=chunks, order="F", codec="blosc")
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    assert read_metadata_json(arr_path(tmp_path), 2)["order"] == "F"


# ------------------------------------------------------------------ partial writes


def _partial_params():
    for fmt in (2, 3):
        for dtkey in ("int32", "float32", "vstr", "M8[ns]"):
            for shape, chunks in (((7,), (3,)), ((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4))):
                yield pytest.param(fmt, dtkey, shape, chunks, "C", id=f"v{fmt}-{dtkey}-{shape}")
    for fmt in (2, 3):  # the other dtypes, on one shape
        for dtkey in ("bool", "complex128", "U4", "S5", "vbytes", "m8[ms]", "struct"):
            if fmt in dtype_formats(DTYPES[dtkey]):
                yield pytest.param(fmt, dtkey, (9, 7), (4, 3), "C", id=f"v{fmt}-{dtkey}")
    for dtkey in ("int32", "vstr"):  # F order on top
        yield pytest.param(2, dtkey, (9, 7), (4, 3), "F", id=f"v2-{dtkey}-F")


@pytest.mark.parametrize(
    ("first", "second"), directions(PEER), ids=[f"{i}-first" for i, _ in directions(PEER)]
)
@pytest.mark.parametrize(("fmt", "dtkey", "shape", "chunks", "order"), list(_partial_params()))
def test_partial_writes(tmp_path, rng, first, second, fmt, dtkey, shape, chunks, order):
    dt = DTYPES[dtkey]
    fill = {
        "int32": -5,
        "float32": np.nan,
        "vstr": "fill✓",
        "M8[ns]": None,
        "bool": True,
        "complex128": complex(np.nan, -1.0),
        "U4": "ü✓",
        "S5": b"zz",
        "vbytes": b"\x00f",
        "m8[ms]": -3,
        "struct": (-1, np.nan),
    }[dtkey]
    spec = Spec(fmt=fmt, dt=dt, shape=shape, chunks=chunks, order=order, fill_value=fill)
    run_partial(tmp_path, first, second, spec, rng)


# ------------------------------------------------------------------ fill values

FILL_CASES = [
    ("float64", np.nan),
    ("float64", np.inf),
    ("float64", -np.inf),
    ("float64", -0.0),
    ("float64", 1.5e300),
    ("float32", np.nan),
    ("float32", -np.inf),
    ("float16", np.inf),
    ("float16", 0.5),
    ("complex128", complex(np.nan, np.inf)),
    ("complex128", complex(-np.inf, 2.5)),
    ("complex64", complex(1.5, -2.0)),
    ("int8", -128),
    ("int64", -(2**63)),
    ("uint64", 2**64 - 1),
    ("uint16", 65535),
    ("bool", True),
    ("M8[ns]", None),  # NaT
    ("M8[s]", "2001-02-03T04:05:06"),
    ("m8[ms]", 12345),
    ("U4", "é✓日"),
    ("S5", b"ab"),
    ("vstr", "héllo ✓ 日本"),
    ("vstr", ""),
    ("struct", (7, 2.5)),
]


def _fill_params():
    for key, fill in FILL_CASES:
        for fmt in dtype_formats(DTYPES[key]):
            yield pytest.param(key, fill, fmt, id=f"{key}-{fill!r}-v{fmt}")


@DIRS
@pytest.mark.parametrize(("dtkey", "fill", "fmt"), list(_fill_params()))
def test_fill_value(tmp_path, rng, writer, reader, dtkey, fill, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), fill_value=fill)
    run_fill(tmp_path, writer, reader, spec, rng)


@DIRS
@FORMATS
@pytest.mark.parametrize("dtkey", ["int32", "float64", "bool"])
def test_default_fill_value(tmp_path, writer, reader, fmt, dtkey):
    """fill_value=None (the default) means zero for numbers (zarr-python semantics)."""
    path = arr_path(tmp_path)
    dt = DTYPES[dtkey]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LIBS[writer].mod.create_array(
            path, shape=(5,), chunks=(2,), dtype=dt.np_dtype, zarr_format=fmt
        )
    got = LIBS[reader].read(path, Spec(fmt=fmt, dt=dt, shape=(5,), chunks=(2,)))
    assert_data_equal(got, np.zeros(5, dt.np_dtype), dt)


# ------------------------------------------------------------------ attributes

ATTRS = {
    "text": "héllo ✓ 日本",
    "int": 42,
    "float": 1.5,
    "neg": -7,
    "list": [1, "two", 3.0, None],
    "nested": {"k": None, "flag": True, "ünï": ["😀"]},
    "empty": {},
}


@DIRS
@FORMATS
def test_array_attributes(tmp_path, rng, writer, reader, fmt):
    spec = Spec(fmt=fmt, dt=DTYPES["int16"], shape=(5,), chunks=(2,), attributes=ATTRS)
    path = arr_path(tmp_path)
    LIBS[writer].create(path, spec)
    assert read_attrs_json(path, fmt) == ATTRS  # plain JSON on disk, per the spec
    assert LIBS[reader].attrs(path) == ATTRS
    # the reader adds/updates attributes; the writer sees them
    LIBS[reader].update_attrs(path, {"added": "日本 ✓", "int": -1})
    want = {**ATTRS, "added": "日本 ✓", "int": -1}
    assert LIBS[writer].attrs(path) == want
    assert read_attrs_json(path, fmt) == want


@DIRS
@FORMATS
def test_group_attributes_and_members(tmp_path, rng, writer, reader, fmt):
    w, r = LIBS[writer].mod, LIBS[reader].mod
    path = str(tmp_path / "grp")
    data = make_data(DTYPES["float32"], (6, 5), rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = w.create_group(path, zarr_format=fmt, attributes={"title": "héllo ✓ 日本"})
        a = g.create_array("child", shape=(6, 5), chunks=(4, 4), dtype="float32")
        a[...] = data
        g.create_group("sub")
        g2 = r.open_group(path, mode="r")
        assert dict(g2.attrs) == {"title": "héllo ✓ 日本"}
        assert sorted(g2.keys()) == ["child", "sub"]
        assert_data_equal(np.asarray(g2["child"][...]), data, DTYPES["float32"])
        r.open_group(path, mode="r+").attrs.update({"x": [1, 2]})
        assert dict(w.open_group(path, mode="r").attrs) == {"title": "héllo ✓ 日本", "x": [1, 2]}


# ------------------------------------------------------------------ dimension names (v3)


@DIRS
@pytest.mark.parametrize("names", [("time", "y"), ("x", None), ("日本", "ü")])
def test_dimension_names(tmp_path, rng, writer, reader, names):
    spec = Spec(fmt=3, dt=DTYPES["uint8"], shape=(9, 7), chunks=(4, 3), dimension_names=names)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    path = arr_path(tmp_path)
    assert tuple(read_metadata_json(path, 3)["dimension_names"]) == names
    assert LIBS[reader].dimension_names(path) == names


# ------------------------------------------------------------------ chunk key encodings

KEY_CASES = [
    pytest.param(3, "/", False, False, id="v3-default-slash"),
    pytest.param(3, ".", False, False, id="v3-default-dot"),
    pytest.param(3, ".", False, True, id="v3-v2encoding-dot"),
    pytest.param(3, "/", False, True, id="v3-v2encoding-slash"),
    pytest.param(2, ".", False, False, id="v2-dot"),
    pytest.param(2, "/", False, False, id="v2-slash"),
    # cuzarr also takes v2's dimension_separator= keyword (zarr-python 3 does not)
    pytest.param(2, "/", True, False, id="v2-slash-dimension_separator"),
    pytest.param(2, ".", True, False, id="v2-dot-dimension_separator"),
]


@DIRS
@pytest.mark.parametrize(("fmt", "sep", "use_dimsep", "v2_keys"), KEY_CASES)
@pytest.mark.parametrize(("shape", "chunks"), [((9, 7), (4, 3)), ((4, 5, 6), (3, 2, 4)), ((), ())])
def test_chunk_key_encoding(
    tmp_path, rng, writer, reader, fmt, sep, use_dimsep, v2_keys, shape, chunks
):
    spec = Spec(
        fmt=fmt,
        dt=DTYPES["int32"],
        shape=shape,
        chunks=chunks,
        separator=sep,
        use_dimension_separator=use_dimsep,
        v2_keys=v2_keys,
    )
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    path = arr_path(tmp_path)
    assert stored_chunk_keys(path) == expected_chunk_keys(spec)
    md = read_metadata_json(path, fmt)
    if fmt == 3:
        cke = md["chunk_key_encoding"]
        assert cke["name"] == ("v2" if v2_keys else "default")
        assert cke.get("configuration", {}).get("separator", "/") == sep
    else:
        assert md.get("dimension_separator", ".") == sep


# ------------------------------------------------------------------ on-disk sanity


@FORMATS
def test_cuzarr_metadata_is_plain_json(tmp_path, rng, fmt):
    """What cuzarr writes is plain UTF-8 JSON with the required keys of the spec."""
    spec = Spec(fmt=fmt, dt=DTYPES["float32"], shape=(9, 7), chunks=(4, 3), fill_value=np.nan)
    path = arr_path(tmp_path)
    LIBS["cuzarr"].create(path, spec)
    md = read_metadata_json(path, fmt)
    if fmt == 3:
        required = {
            "zarr_format",
            "node_type",
            "shape",
            "data_type",
            "chunk_grid",
            "chunk_key_encoding",
            "fill_value",
            "codecs",
        }
        assert required <= md.keys()
        assert md["data_type"] == "float32" and md["fill_value"] == "NaN"
        assert md["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [4, 3]}}
    else:
        required = {
            "zarr_format",
            "shape",
            "chunks",
            "dtype",
            "compressor",
            "fill_value",
            "order",
            "filters",
        }
        assert required <= md.keys()
        assert md["dtype"] == "<f4" and md["fill_value"] == "NaN"
    json.dumps(md)  # round-trips through the json module
    assert Path(path).is_dir()


def test_impl_is_importable():
    assert hasattr(impl(), "create_array")


# ------------------------------------------------------------------ sharding (v3)

SHARD_CASES = [
    pytest.param((9, 7), (4, 3), (8, 6), "zstd", id="9x7-c4x3-s8x6"),
    pytest.param((9, 7), (2, 3), (4, 6), "none", id="9x7-c2x3-s4x6-raw"),
    pytest.param((4, 5, 6), (1, 2, 3), (2, 4, 6), "zstd+crc32c", id="4x5x6-crc32c"),
    pytest.param((10,), (5,), (10,), "blosc", id="10-exact"),
]


@DIRS
@pytest.mark.parametrize(("shape", "chunks", "shards", "codec"), SHARD_CASES)
@pytest.mark.parametrize("dtkey", ["int32", "float64", "vstr"])
def test_sharding_roundtrip(tmp_path, rng, writer, reader, shape, chunks, shards, codec, dtkey):
    spec = Spec(fmt=3, dt=DTYPES[dtkey], shape=shape, chunks=chunks, shards=shards, codec=codec)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    assert stored_chunk_keys(arr_path(tmp_path)) == expected_chunk_keys(spec)
    (codec_md,) = read_metadata_json(arr_path(tmp_path), 3)["codecs"]
    assert codec_md["name"] == "sharding_indexed"


@pytest.mark.parametrize(
    ("first", "second"), directions(PEER), ids=[f"{i}-first" for i, _ in directions(PEER)]
)
@pytest.mark.parametrize("dtkey", ["int32", "vstr"])
def test_sharding_partial_writes(tmp_path, rng, first, second, dtkey):
    fill = {"int32": 7, "vstr": "-"}[dtkey]
    spec = Spec(
        fmt=3, dt=DTYPES[dtkey], shape=(9, 7), chunks=(2, 3), shards=(4, 6), fill_value=fill
    )
    run_partial(tmp_path, first, second, spec, rng)


# ------------------------------------------------------------------ big-endian


@DIRS
@FORMATS
@pytest.mark.parametrize("dtkey", ["int16", "uint32", "float64", "complex64", "M8[s]"])
def test_big_endian(tmp_path, rng, writer, reader, fmt, dtkey):
    """v2: a '>' dtype; v3: the bytes codec with endian "big"."""
    spec = Spec(fmt=fmt, dt=DTYPES[dtkey], shape=(9, 7), chunks=(4, 3), big_endian=True)
    run_roundtrip(tmp_path, writer, reader, spec, rng)
    md = read_metadata_json(arr_path(tmp_path), fmt)
    if fmt == 2:
        assert md["dtype"].startswith(">")
    else:
        assert {"name": "bytes", "configuration": {"endian": "big"}} in md["codecs"]


# ------------------------------------------------------------------ resize, consolidated


@DIRS
@FORMATS
def test_resize_across_libraries(tmp_path, rng, writer, reader, fmt):
    """Shrink (to a chunk boundary) through one library, grow back through the other:
    the chunks beyond the shrunk shape are gone, and read as the fill value."""
    dt = DTYPES["int32"]
    spec = Spec(fmt=fmt, dt=dt, shape=(9, 7), chunks=(4, 3), fill_value=-1)
    path = arr_path(tmp_path)
    data = make_data(dt, spec.shape, rng)
    LIBS[writer].create(path, spec)
    LIBS[writer].write(path, spec, Ellipsis, data)
    LIBS[reader].open(path, mode="r+").resize((8, 6))
    assert_data_equal(LIBS[writer].read(path, spec), data[:8, :6], dt)
    LIBS[writer].open(path, mode="r+").resize((9, 7))
    model = np.full((9, 7), -1, dtype=dt.np_dtype)
    model[:8, :6] = data[:8, :6]
    assert_data_equal(LIBS[reader].read(path, spec), model, dt)


@DIRS
@FORMATS
def test_consolidated_metadata(tmp_path, rng, writer, reader, fmt):
    w, r = LIBS[writer].mod, LIBS[reader].mod
    path = str(tmp_path / "grp")
    data = make_data(DTYPES["uint16"], (5, 4), rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = w.create_group(path, zarr_format=fmt, attributes={"t": "日本"})
        g.create_group("sub").create_array("x", shape=(5, 4), chunks=(2, 2), dtype="uint16")[
            ...
        ] = data
        w.consolidate_metadata(path)
        g2 = r.open_consolidated(path)
        assert dict(g2.attrs) == {"t": "日本"}
        assert_data_equal(np.asarray(g2["sub/x"][...]), data, DTYPES["uint16"])


# ------------------------------------------------------------------ numcodecs packbits (v3)


@pytest.mark.parametrize("shape", [(9, 7), (5,), ()], ids=["9x7", "5", "0d"])
def test_packbits_v3(tmp_path, rng, shape):
    """numcodecs.packbits changes the chunk's shape and dtype (1-d uint8: a header
    byte, then the bits): zarr-python's chunks read in cuzarr and vice versa."""
    from zarr.codecs import numcodecs as zn

    chunks = tuple(min(s, 4) for s in shape)
    data = rng.random(shape) < 0.5
    path = arr_path(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = LIBS["zarr"].mod.create_array(
            path, shape=shape, chunks=chunks, dtype=bool, filters=[zn.PackBits()], compressors=None
        )
        z[...] = data
        np.testing.assert_array_equal(impl().open_array(path, mode="r")[...], data)
        path2 = str(tmp_path / "c")
        filters = read_metadata_json(path, 3)["codecs"][:1]
        c = impl().create_array(
            path2, shape=shape, chunks=chunks, dtype=bool, filters=filters, compressors=None
        )
        c[...] = ~data
        np.testing.assert_array_equal(LIBS["zarr"].mod.open_array(path2, mode="r")[...], ~data)
        assert read_metadata_json(path2, 3)["codecs"][0]["name"] == "numcodecs.packbits"


@FORMATS
def test_zero_d_variable_length_bytes_write(tmp_path, fmt):
    """Writing the one element of a 0-d vlen-bytes array (a read-only value)."""
    path = arr_path(tmp_path)
    a = impl().create_array(path, shape=(), dtype=bytes, zarr_format=fmt)
    a[()] = b"\x00ab"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert LIBS["zarr"].mod.open_array(path, mode="r")[()] == b"\x00ab"


def test_v2_object_dtype_takes_its_object_codec(tmp_path):
    """dtype=object with a VLenBytes filter is a vlen-bytes array (no vlen-utf8 put in
    front of it); object codecs cuzarr lacks (JSON, ...) are refused, not stringified."""
    import numcodecs

    path = arr_path(tmp_path)
    a = impl().create_array(
        path, shape=(3,), dtype=object, zarr_format=2, filters=[numcodecs.VLenBytes()]
    )
    a[...] = np.array([b"\x00a", b"", b"xyz"], dtype=object)
    assert [f["id"] for f in read_metadata_json(path, 2)["filters"]] == ["vlen-bytes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = LIBS["zarr"].mod.open_array(path, mode="r")[...]
    assert list(got) == [b"\x00a", b"", b"xyz"]
    with pytest.raises(ValueError, match="json2"):
        impl().create_array(
            str(tmp_path / "j"),
            shape=(3,),
            dtype=object,
            zarr_format=2,
            filters=[numcodecs.JSON()],
        )


@pytest.mark.parametrize("code", ["<M8", ">M8", ">m8"])
def test_v2_generic_datetime(tmp_path, code):
    """Generic-unit datetime64/timedelta64 (no unit): zarr-python's v2 arrays open, and
    big-endian ones store big-endian even though numpy drops the byte order of '>M8'
    arrays (full chunks and read-modify-write ones alike)."""
    native = np.dtype(code[1:])
    path = arr_path(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = LIBS["zarr"].mod.create_array(
            path,
            shape=(4,),
            chunks=(2,),
            dtype=code,
            zarr_format=2,
            compressors=None,
            fill_value=np.array("NaT", native)[()],
        )
        z[:2] = np.array([1, 2], code[0] + "i8").view(code)
    a = impl().open_array(path, mode="a")
    nat = np.iinfo(np.int64).min
    assert a[...].view(np.int64).tolist() == [1, 2, nat, nat]
    a[1:] = np.array([5, 6, 7], "<i8").view(native)
    for key, want in (("0", [1, 5]), ("1", [6, 7])):
        assert np.frombuffer((Path(path) / key).read_bytes(), code[0] + "i8").tolist() == want
    assert impl().open_array(path, mode="r")[...].view(np.int64).tolist() == [1, 5, 6, 7]


@pytest.mark.parametrize("fill", [0, 1])
def test_v2_bool_integer_fill_value(tmp_path, fill):
    """A v2 bool array whose .zarray says ``"fill_value": 0`` (older writers) opens,
    as in zarr-python, and reads its fill as False/True."""
    path = Path(arr_path(tmp_path))
    path.mkdir(parents=True, exist_ok=True)
    meta = {
        "zarr_format": 2,
        "shape": [3],
        "chunks": [2],
        "dtype": "|b1",
        "fill_value": fill,
        "order": "C",
        "filters": None,
        "compressor": None,
    }
    (path / ".zarray").write_text(json.dumps(meta))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(LIBS["zarr"].mod.open_array(str(path), mode="r")[...])
    np.testing.assert_array_equal(impl().open_array(str(path), mode="r")[...], want)
    assert want.tolist() == [bool(fill)] * 3


def test_v2_fixed_width_strings_under_a_vlen_filter(tmp_path):
    # Some writers (xarray writing a string coordinate back with its encoding)
    # store a fixed-width '<U2' array through a vlen-utf8 filter. zarr-python
    # refuses the metadata; cuzarr read it as a bare numpy TypeError.
    import zarr

    import cuzarr
    from cuzarr.errors import CodecError

    z = zarr.create_array(str(tmp_path), shape=(3,), dtype=str, chunks=(3,), zarr_format=2)
    z[...] = np.array(["ab", "c", "de"])
    meta = json.loads((tmp_path / ".zarray").read_text())
    assert meta["filters"] == [{"id": "vlen-utf8"}]
    meta["dtype"] = "<U2"
    (tmp_path / ".zarray").write_text(json.dumps(meta))
    a = cuzarr.open_array(tmp_path, mode="r")
    out = a[...]
    assert out.dtype == np.dtype("<U2")
    np.testing.assert_array_equal(out, ["ab", "c", "de"])
    meta["dtype"] = "<U1"  # too narrow for the stored values: refused, not cut
    (tmp_path / ".zarray").write_text(json.dumps(meta))
    with pytest.raises(CodecError, match="do not fit"):
        cuzarr.open_array(tmp_path, mode="r")[...]


def test_v2_fixed_width_bytes_under_a_vlen_filter_keep_trailing_nuls_fitting(tmp_path):
    # b"a\x00" fits "S2" (numpy reads it back as b"a"); comparing values instead
    # of lengths refused it as not fitting.
    import json

    import numcodecs

    import cuzarr
    from cuzarr.errors import CodecError

    z = cuzarr.create_array(
        str(tmp_path), shape=(2,), dtype=object, chunks=(2,), zarr_format=2,
        filters=[numcodecs.VLenBytes()],
    )
    z[...] = np.array([b"a\x00", b"bc"], dtype=object)
    meta = json.loads((tmp_path / ".zarray").read_text())
    meta["dtype"] = "|S2"
    (tmp_path / ".zarray").write_text(json.dumps(meta))
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path, mode="r")[...], [b"a", b"bc"])
    meta["dtype"] = "|S1"
    (tmp_path / ".zarray").write_text(json.dumps(meta))
    with pytest.raises(CodecError, match="do not fit"):
        cuzarr.open_array(tmp_path, mode="r")[...]


@pytest.mark.parametrize("dtype", ["int32", "float64", "bool", "S5"])
def test_v2_fill_value_none_is_stored_as_null_like_zarr(tmp_path, dtype):
    """An explicit fill_value=None in v2 is "fill_value": null, as zarr-python
    writes it (readers such as xarray take a v2 fill value for missing data);
    unwritten elements read as the type's default in both libraries."""
    data = np.zeros(6, dtype=dtype)
    data[3:] = np.ones(3, dtype=dtype) if dtype != "S5" else b"ab"
    for writer in (cuzarr, zarr):
        path = str(tmp_path / f"{writer.__name__}-{dtype}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = writer.create_array(
                path, shape=(8,), chunks=(3,), dtype=dtype, fill_value=None, zarr_format=2
            )
            a[:6] = data
        with open(path + "/.zarray") as f:
            assert json.load(f)["fill_value"] is None
        want = np.concatenate([data, np.zeros(2, dtype=dtype)])
        for reader in (cuzarr, zarr):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                b = reader.open_array(path, mode="r")
                np.testing.assert_array_equal(b[...], want)
                assert b.fill_value is None


def test_v2_null_fill_keeps_real_zeros_for_xarray(tmp_path):
    import xarray as xr

    g = cuzarr.create_group(str(tmp_path / "ds"), zarr_format=2)
    a = g.create_array(
        "v",
        shape=(4,),
        chunks=(2,),
        dtype="i4",
        fill_value=None,
        attributes={"_ARRAY_DIMENSIONS": ["x"]},
    )
    a[:] = np.arange(4)
    ds = xr.open_dataset(str(tmp_path / "ds"), engine="zarr", consolidated=False)
    np.testing.assert_array_equal(ds["v"].values, np.arange(4))


@pytest.mark.parametrize("dtype", ["int16", "uint8", "float64"])
def test_v3_blosc_without_shuffle_takes_zarr_pythons_default(tmp_path, dtype):
    """A blosc codec given without ``shuffle`` gets it from the data type, as in
    zarr-python (byte shuffle, bit shuffle for 1-byte items): the same metadata
    and the same chunk bytes."""
    blosc = [{"name": "blosc", "configuration": {"cname": "zstd"}}]
    data = (np.arange(64) % 7).astype(dtype)
    metas = {}
    for lib in (cuzarr, zarr):
        path = tmp_path / lib.__name__
        a = lib.create_array(str(path), shape=(64,), chunks=(64,), dtype=dtype, compressors=blosc)
        a[...] = data
        conf = json.loads((path / "zarr.json").read_text())["codecs"][-1]["configuration"]
        metas[lib.__name__] = (conf, (path / "c" / "0").read_bytes())
    assert metas["cuzarr"] == metas["zarr"]
    assert metas["cuzarr"][0]["shuffle"] == ("bitshuffle" if dtype == "uint8" else "shuffle")
