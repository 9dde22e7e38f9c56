"""N5 containers against tensorstore's n5 driver, both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest

ts = pytest.importorskip("tensorstore")

import numcodecs  # noqa: E402

import cuzarr  # noqa: E402
from cuzarr.errors import MetadataError  # noqa: E402
from cuzarr.storage import N5Store  # noqa: E402

COMPRESSIONS = [
    {"type": "raw"},
    {"type": "gzip"},
    {"type": "gzip", "useZlib": True},
    {"type": "zstd", "level": 3},
    {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
    {"type": "bzip2"},
    {"type": "xz"},
]


def _ts_open(path, **kw):
    return ts.open(
        {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}, **kw
    ).result()


@pytest.mark.parametrize("comp", COMPRESSIONS, ids=lambda c: json.dumps(c))
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_tensorstore_writes_cuzarr_reads(tmp_path, comp, dtype):
    path = tmp_path / "ts.n5"
    n5_shape = [11, 7, 3]  # N5 order: fastest dimension first
    t = ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(path / "vol")},
            "metadata": {
                "dimensions": n5_shape,
                "blockSize": [4, 3, 2],
                "dataType": dtype,
                "compression": comp,
            },
        },
        create=True,
    ).result()
    data = np.random.default_rng(0).integers(0, 60000, n5_shape).astype(dtype)
    t[...] = data
    a = cuzarr.open_array(str(path), path="vol", mode="r")
    assert a.shape == (3, 7, 11)
    assert a.chunks == (2, 3, 4)
    np.testing.assert_array_equal(a[:], data.T)
    np.testing.assert_array_equal(a[1, 2:5, 3:10], data.T[1, 2:5, 3:10])


@pytest.mark.parametrize(
    "compressor",
    [
        None,
        numcodecs.Zstd(level=1),
        numcodecs.GZip(level=5),
        numcodecs.Zlib(level=1),
        numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2),
        numcodecs.BZ2(level=9),
        numcodecs.LZMA(),
    ],
    ids=lambda c: "none" if c is None else c.codec_id,
)
@pytest.mark.parametrize("dtype", ["int32", "float64", "uint8"])
def test_cuzarr_writes_tensorstore_reads(tmp_path, compressor, dtype):
    path = str(tmp_path / "cz.n5")
    data = (np.arange(13 * 10).reshape(13, 10) % 200).astype(dtype)
    g = cuzarr.create_group(path, zarr_format=2, attributes={"about": "test"})
    a = g.create_array(
        "d/x", shape=data.shape, dtype=dtype, chunks=(4, 3), zarr_format=2, compressors=compressor
    )
    a[:] = data
    a[0:2, 0:2] = 3
    data[0:2, 0:2] = 3
    np.testing.assert_array_equal(a[:], data)
    t = _ts_open(tmp_path / "cz.n5" / "d" / "x")
    assert list(t.shape) == [10, 13]
    np.testing.assert_array_equal(t.read().result(), data.T)
    # a fresh open sees the N5 view (big-endian, no compressor) and the same values
    b = cuzarr.open_array(path, path="d/x", mode="r")
    np.testing.assert_array_equal(b[:], data)
    assert json.loads((tmp_path / "cz.n5" / "attributes.json").read_text())["about"] == "test"


def test_tensorstore_roundtrip_via_cuzarr_write(tmp_path):
    """tensorstore creates, cuzarr writes into it, tensorstore reads back."""
    path = tmp_path / "mix.n5"
    t = ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(path)},
            "metadata": {
                "dimensions": [9, 5],
                "blockSize": [4, 4],
                "dataType": "int16",
                "compression": {"type": "gzip"},
            },
        },
        create=True,
    ).result()
    a = cuzarr.open_array(str(path))
    a[1:4, 2:8] = -5
    expected = np.zeros((5, 9), "int16")
    expected[1:4, 2:8] = -5
    np.testing.assert_array_equal(a[:], expected)
    np.testing.assert_array_equal(t.read().result(), expected.T)
    np.testing.assert_array_equal(_ts_open(path).read().result(), expected.T)


def test_group_listing_and_attrs(tmp_path):
    path = str(tmp_path / "g.n5")
    g = cuzarr.create_group(path, zarr_format=2)
    g.create_group("sub")
    arr = g.create_array("arr", shape=(5,), dtype="uint8", chunks=(2,), zarr_format=2)
    arr[:] = [1, 2, 3, 4, 5]
    arr.attrs["name"] = "n"
    g2 = cuzarr.open_group(path, mode="r")
    assert sorted(g2.keys()) == ["arr", "sub"]
    assert dict(g2["arr"].attrs) == {"name": "n"}
    assert g2["arr"].nchunks_initialized == 3
    assert isinstance(g2.store_path.store, N5Store)


def test_unsupported(tmp_path):
    path = str(tmp_path / "u.n5")
    with pytest.raises(MetadataError, match="zarr_format=2"):
        cuzarr.create_array(path, shape=(4,), dtype="i4", zarr_format=3)
    with pytest.raises(MetadataError, match="fill_value"):
        cuzarr.create_array(path, shape=(4,), dtype="i4", zarr_format=2, fill_value=3)
    with pytest.raises(MetadataError, match="data type"):
        cuzarr.create_array(path, shape=(4,), dtype="c8", zarr_format=2)


def test_blosc_autoshuffle_is_stored_as_an_n5_shuffle(tmp_path):
    path = tmp_path / "auto.n5"
    for name, dtype, shuffle in [("b", "uint8", 2), ("w", "int32", 1)]:
        a = cuzarr.create_array(
            str(path),
            name=name,
            shape=(7,),
            chunks=(3,),
            dtype=dtype,
            zarr_format=2,
            compressors=numcodecs.Blosc(shuffle=numcodecs.Blosc.AUTOSHUFFLE),
        )
        a[:] = np.arange(7)
        assert (
            json.loads((path / name / "attributes.json").read_text())["compression"]["shuffle"]
            == shuffle
        )
        np.testing.assert_array_equal(_ts_open(path / name).read().result(), np.arange(7))


def test_one_dimensional_slash_separated_chunks(tmp_path):
    path = str(tmp_path / "s.n5")
    a = cuzarr.create_array(
        path,
        name="s",
        shape=(5,),
        chunks=(2,),
        dtype="i2",
        zarr_format=2,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    a[:] = np.arange(5)
    np.testing.assert_array_equal(a[:], np.arange(5))
    assert a.nchunks_initialized == 3
    np.testing.assert_array_equal(_ts_open(tmp_path / "s.n5" / "s").read().result(), np.arange(5))


def test_groups_without_attributes_json(tmp_path):
    """tensorstore writes no group attributes.json; N5 groups are plain directories."""
    path = tmp_path / "bare.n5"
    for name in ["a", "b/c"]:
        t = ts.open(
            {
                "driver": "n5",
                "kvstore": {"driver": "file", "path": str(path / name)},
                "metadata": {
                    "dimensions": [4],
                    "blockSize": [2],
                    "dataType": "int8",
                    "compression": {"type": "raw"},
                },
            },
            create=True,
        ).result()
        t[...] = 1
    g = cuzarr.open_group(str(path), mode="r")
    assert sorted(g.keys()) == ["a", "b"]
    np.testing.assert_array_equal(g["b"]["c"][:], np.ones(4, "i1"))
    with pytest.raises(KeyError):
        g["a/0"]  # a chunk directory of an array is not a group


def test_zero_dimensional_arrays_and_root_array_listing(tmp_path):
    s = cuzarr.create_array(str(tmp_path / "c.n5"), name="s", shape=(), dtype="f8", zarr_format=2)
    s[()] = 2.5
    assert s.nchunks_initialized == 1
    assert _ts_open(tmp_path / "c.n5" / "s").read().result() == 2.5
    t = ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(tmp_path / "t.n5")},
            "metadata": {
                "dimensions": [],
                "blockSize": [],
                "dataType": "int16",
                "compression": {"type": "gzip"},
            },
        },
        create=True,
    ).result()
    t[...] = -7
    z = cuzarr.open_array(str(tmp_path / "t.n5"), mode="r")  # an array at the container root
    assert z[()] == -7 and z.nchunks_initialized == 1
    r = cuzarr.create_array(
        str(tmp_path / "r.n5"), shape=(5,), chunks=(2,), dtype="u1", zarr_format=2
    )
    r[:] = 1
    assert cuzarr.open_array(str(tmp_path / "r.n5"), mode="r").nchunks_initialized == 3


def test_n5_path_defaults_to_its_only_format(tmp_path):
    # create_array/create_group on an N5 container without zarr_format make
    # v2-style nodes (the one layout N5 holds); tensorstore reads the result
    path = tmp_path / "d.n5"
    data = np.arange(5 * 7 * 3, dtype="float32").reshape(5, 7, 3)
    a = cuzarr.create_array(str(path), name="x", shape=data.shape, chunks=(2, 4, 3), dtype="f4")
    assert a.metadata.zarr_format == 2
    a[...] = data
    t = _ts_open(path / "x")
    assert t.shape == (3, 7, 5)  # tensorstore keeps N5's order
    np.testing.assert_array_equal(t.read().result(), data.T)
    g = cuzarr.create_group(str(tmp_path / "g.n5"))
    assert g.metadata.zarr_format == 2
    b = g.create_array("y", shape=(4,), dtype="i4")
    b[...] = [1, 2, 3, 4]
    np.testing.assert_array_equal(_ts_open(tmp_path / "g.n5" / "y").read().result(), [1, 2, 3, 4])
    c = cuzarr.zeros((3, 2), store=N5Store(tmp_path / "z.n5"), dtype="u2")
    assert c.metadata.zarr_format == 2
    with pytest.raises(MetadataError, match="zarr_format=2"):  # asked for v3 explicitly
        cuzarr.create_array(str(tmp_path / "e.n5"), shape=(2,), dtype="i4", zarr_format=3)


def test_dimension_order_n5_matches_tensorstore(tmp_path):
    path = tmp_path / "ts.n5"
    n5_shape = [11, 7, 3]
    t = ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(path / "vol")},
            "metadata": {
                "dimensions": n5_shape,
                "blockSize": [4, 3, 2],
                "dataType": "int16",
                "compression": {"type": "gzip"},
            },
        },
        create=True,
    ).result()
    data = np.random.default_rng(3).integers(-999, 999, n5_shape).astype("int16")
    t[...] = data
    store = N5Store(path, dimension_order="n5")
    a = cuzarr.open_array(store, path="vol")
    assert (a.shape, a.chunks, a.metadata.order) == ((11, 7, 3), (4, 3, 2), "F")
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[2:9, 1, ::2], data[2:9, 1, ::2])
    # writes through it land where tensorstore reads them
    a[3:10, 2:6, 1] = -1
    data[3:10, 2:6, 1] = -1
    np.testing.assert_array_equal(t.read().result(), data)
    # a new array in N5 order, C order on the writer's side, read by tensorstore
    b = cuzarr.create_array(store, name="new", shape=(9, 5), chunks=(4, 2), dtype="u1")
    values = np.arange(45, dtype="u1").reshape(9, 5)
    b[...] = values
    np.testing.assert_array_equal(_ts_open(path / "new").read().result(), values)
    np.testing.assert_array_equal(cuzarr.open_array(store, path="new")[...], values)
    # the default order shows the same dataset reversed
    np.testing.assert_array_equal(cuzarr.open_array(str(path), path="new")[...], values.T)


def test_byte_order_native(tmp_path):
    path = tmp_path / "n.n5"
    data = np.linspace(-1, 1, 24, dtype="float64").reshape(4, 6)
    big = cuzarr.create_array(str(path), name="v", shape=data.shape, chunks=(3, 4), dtype="f8")
    big[...] = data
    assert cuzarr.open_array(str(path), path="v")[...].dtype == np.dtype(">f8")  # N5's own
    store = N5Store(path, byte_order="native")
    a = cuzarr.open_array(store, path="v")
    assert a.dtype == np.dtype("=f8") and a.dtype.isnative
    out = a[...]
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, data)
    a[1:3, 2:5] = 7.5
    data[1:3, 2:5] = 7.5
    np.testing.assert_array_equal(_ts_open(path / "v").read().result(), data.T)
    w = cuzarr.create_array(store, name="w", shape=(5,), chunks=(2,), dtype="<i4")
    w[...] = np.arange(5)
    np.testing.assert_array_equal(_ts_open(path / "w").read().result(), np.arange(5))
    assert cuzarr.open_array(store, path="w")[...].dtype.isnative


def test_store_options_checked(tmp_path):
    with pytest.raises(ValueError, match="dimension_order"):
        N5Store(tmp_path / "a.n5", dimension_order="reversed")
    with pytest.raises(ValueError, match="byte_order"):
        N5Store(tmp_path / "a.n5", byte_order="little")
    s = N5Store(tmp_path / "a.n5", dimension_order="n5")
    assert s != N5Store(tmp_path / "a.n5") and "dimension_order='n5'" in repr(s)
    assert s.with_read_only(True).dimension_order == "n5"


def test_n5_path_takes_the_store_options(tmp_path):
    # a *.n5 path takes N5Store's options as storage_options
    path = str(tmp_path / "so.n5")
    opts = {"dimension_order": "n5", "byte_order": "native"}
    a = cuzarr.create_array(path, name="x", shape=(4, 6), chunks=(2, 3), dtype="f4",
                            storage_options=opts)  # fmt: skip
    values = np.arange(24, dtype="f4").reshape(4, 6)
    a[...] = values
    np.testing.assert_array_equal(_ts_open(tmp_path / "so.n5" / "x").read().result(), values)
    b = cuzarr.open_array(path, path="x", storage_options=opts)
    assert b.shape == (4, 6) and b.dtype.isnative
    np.testing.assert_array_equal(b[...], values)
    assert cuzarr.open_array(path, path="x").shape == (6, 4)
    with pytest.raises(TypeError, match="dimension_order and byte_order"):
        cuzarr.open_array(path, path="x", storage_options={"bogus": 1})


def test_cli_copy_into_n5_takes_its_format(tmp_path, monkeypatch, capsys):
    # a v3 source copied to a *.n5 path without --zarr-format: N5's only layout
    from cuzarr.cli import main

    monkeypatch.chdir(tmp_path)
    g = cuzarr.create_group("src.zarr")
    values = np.arange(60, dtype="f4").reshape(6, 10)
    g.create_array("t", shape=(6, 10), chunks=(4, 4), dtype="f4")[...] = values
    assert main(["copy", "src.zarr", "out.n5", "--quiet"]) == 0
    np.testing.assert_array_equal(_ts_open(tmp_path / "out.n5" / "t").read().result(), values.T)
    assert main(["copy", "src.zarr", "v3.n5", "--zarr-format", "3", "--quiet"]) == 1
    assert "zarr_format=2" in capsys.readouterr().err
