"""N5 containers audited against the N5 spec, with tensorstore's n5 driver as the
independent reader and writer: every N5 data type and compression both ways,
1-d to 4-d, block shapes that do not divide the shape, missing blocks, block
headers (modes, sizes), attribute updates on containers cuzarr did not write,
and decompression that never outgrows the block."""

from __future__ import annotations

import bz2
import json
import lzma
import struct
import tracemalloc
import zlib

import numpy as np
import pytest

ts = pytest.importorskip("tensorstore")

import numcodecs  # noqa: E402
import zstandard  # noqa: E402

import cuzarr  # noqa: E402
from cuzarr.errors import CodecError, MetadataError  # noqa: E402

DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
DTYPES += ["float32", "float64"]
TS_COMPRESSIONS = [
    {"type": "raw"},
    {"type": "gzip"},
    {"type": "gzip", "useZlib": True, "level": 9},
    {"type": "bzip2", "blockSize": 3},
    {"type": "xz", "preset": 2},
    {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
    {"type": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2},
    {"type": "zstd", "level": 3},
]
CZ_COMPRESSORS = [
    None,
    numcodecs.Zstd(level=1),
    numcodecs.GZip(level=5),
    numcodecs.Zlib(level=1),
    numcodecs.BZ2(level=1),
    numcodecs.LZMA(preset=1),
    numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
]
# (numpy shape, numpy chunks): the N5 attributes list both reversed
SHAPES = [((7,), (3,)), ((5, 9), (2, 4)), ((3, 5, 7), (2, 2, 3)), ((2, 3, 4, 5), (1, 2, 3, 2))]


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 1e6).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def _ts_create(path, shape, chunks, dtype, comp, **extra):
    return ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(path)},
            "metadata": {
                "dimensions": list(reversed(shape)),
                "blockSize": list(reversed(chunks)),
                "dataType": dtype,
                "compression": comp,
                **extra,
            },
        },
        create=True,
    ).result()


def _ts_open(path):
    return ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}).result()


def _cases():
    for dtype in DTYPES:
        for i in range(len(TS_COMPRESSIONS)):
            yield dtype, i, SHAPES[(DTYPES.index(dtype) + i) % len(SHAPES)]


@pytest.mark.parametrize(("dtype", "comp_index", "shapes"), list(_cases()))
def test_tensorstore_writes_cuzarr_reads_every_type(tmp_path, dtype, comp_index, shapes):
    shape, chunks = shapes
    comp = TS_COMPRESSIONS[comp_index]
    t = _ts_create(tmp_path / "c.n5" / "g" / "x", shape, chunks, dtype, comp)
    data = _data(dtype, shape)
    t[...] = data.T  # tensorstore's axes are N5's: numpy's reversed
    # one block missing: reads as 0
    (tmp_path / "c.n5" / "g" / "x").joinpath(*["0"] * len(shape)).unlink()
    data[tuple(slice(0, c) for c in chunks)] = 0
    a = cuzarr.open_array(str(tmp_path / "c.n5"), path="g/x", mode="r")
    assert (a.shape, a.chunks, a.fill_value) == (shape, chunks, 0)
    assert a.dtype.newbyteorder("=") == np.dtype(dtype)
    np.testing.assert_array_equal(a[...], data)


@pytest.mark.parametrize("compressor", CZ_COMPRESSORS, ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuzarr_writes_tensorstore_reads_every_type(tmp_path, dtype, compressor):
    shape, chunks = SHAPES[DTYPES.index(dtype) % len(SHAPES)]
    path = tmp_path / "c.n5"
    g = cuzarr.create_group(str(path), zarr_format=2, attributes={"u": [1, 2]})
    a = g.create_array(
        "g/x", shape=shape, dtype=dtype, chunks=chunks, zarr_format=2, compressors=compressor
    )
    a.attrs["extra"] = {"nested": True}
    data = _data(dtype, shape, seed=1)
    a[...] = data
    a[tuple(slice(0, c) for c in chunks)] = 0  # a block of zeros is not stored
    data[tuple(slice(0, c) for c in chunks)] = 0
    assert not (path / "g" / "x").joinpath(*["0"] * len(shape)).exists()
    t = _ts_open(path / "g" / "x")
    assert list(t.shape) == list(reversed(shape))
    np.testing.assert_array_equal(t.read().result().T, data)
    # an edge block is stored with its actual size, as N5 writes it
    last = [(s - 1) // c for s, c in zip(shape, chunks)]
    raw = (path / "g" / "x").joinpath(*map(str, reversed(last))).read_bytes()
    edge = [s - i * c for s, c, i in zip(shape, chunks, last)]
    assert struct.unpack_from(f">HH{len(shape)}I", raw) == (0, len(shape), *reversed(edge))
    # tensorstore writes back (full-size edge blocks); cuzarr reads it fresh
    data2 = _data(dtype, shape, seed=2)
    t[...] = data2.T
    np.testing.assert_array_equal(cuzarr.open_array(str(path), path="g/x", mode="r")[...], data2)
    attrs = json.loads((path / "g" / "x" / "attributes.json").read_text())
    assert attrs["extra"] == {"nested": True}
    assert json.loads((path / "attributes.json").read_text())["u"] == [1, 2]


@pytest.mark.parametrize(
    "comp",
    [
        {"type": "gzip"},
        {"type": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 1},
        {"type": "zstd", "level": 5},
    ],
    ids=lambda c: c["type"],
)
def test_attribute_update_and_resize_keep_the_compression(tmp_path, comp):
    """A handle opened on a container sees ``compressor: null`` (the store hands
    out decompressed blocks); writing that ``.zarray`` back (attribute updates,
    resize) used to store ``compression: raw`` and leave the blocks unreadable."""
    path = tmp_path / "t.n5" / "ds"
    t = _ts_create(path, (4, 6), (3, 4), "int32", comp, axes=["x", "y"])
    data = np.arange(24, dtype="i4").reshape(4, 6)
    t[...] = data.T
    a = cuzarr.open_array(str(tmp_path / "t.n5"), path="ds", mode="a")
    a.attrs["note"] = "hi"
    attrs = json.loads((path / "attributes.json").read_text())
    assert attrs["compression"]["type"] == comp["type"]
    assert attrs["axes"] == ["x", "y"] and attrs["note"] == "hi"
    np.testing.assert_array_equal(a[...], data)
    a[0, :] = 99
    data[0, :] = 99
    a.resize((5, 6))
    data = np.concatenate([data, np.zeros((1, 6), "i4")])
    assert json.loads((path / "attributes.json").read_text())["compression"] == attrs["compression"]
    np.testing.assert_array_equal(_ts_open(path).read().result().T, data)
    np.testing.assert_array_equal(
        cuzarr.open_array(str(tmp_path / "t.n5"), path="ds", mode="r")[...], data
    )


def _dataset(tmp_path, comp=None, dtype="uint16", dims=(5, 3), block=(4, 2)):
    d = tmp_path / "h.n5"
    d.mkdir()
    (d / "attributes.json").write_text(
        json.dumps(
            {
                "dimensions": list(dims),
                "blockSize": list(block),
                "dataType": dtype,
                "compression": comp or {"type": "raw"},
            }
        )
    )
    return d


def _write_block(d, pos, data):
    p = d.joinpath(*map(str, pos))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def _header(mode, sizes, count=None):
    h = struct.pack(f">HH{len(sizes)}I", mode, len(sizes), *sizes)
    return h if count is None else h + struct.pack(">I", count)


def test_block_modes_and_header_errors(tmp_path):
    d = _dataset(tmp_path)
    vals = np.arange(1, 9, dtype=">u2")
    expected = np.zeros((3, 5), "u2")
    expected[:2, :4] = vals.reshape(2, 4)
    # mode 1 (varlength) whose element count is that of its size: read as mode 0
    _write_block(d, (0, 0), _header(1, [4, 2], 8) + vals.tobytes())
    np.testing.assert_array_equal(cuzarr.open_array(str(d), mode="r")[...], expected)
    cases = [
        (_header(1, [4, 2], 6) + vals[:6].tobytes(), "varlength block of 6 elements"),
        (struct.pack(">HI", 2, 8) + vals.tobytes(), "mode 2 .*object"),
        (_header(3, [4, 2]) + vals.tobytes(), "unknown block mode 3"),
        (b"\0\0\0\2\0\0", "shorter than its 12-byte header"),
        (b"\0", "shorter than the block header"),
        (_header(0, [5, 2]) + vals.tobytes() + vals[:2].tobytes(), "exceeds the block size"),
        (_header(0, [8]) + vals.tobytes(), "1 dimensions, the dataset 2"),
        (_header(0, [4, 2]) + vals[:5].tobytes(), "holds 10 bytes, expected 16"),
    ]
    for block, message in cases:
        _write_block(d, (0, 0), block)
        a = cuzarr.open_array(str(d), mode="r")
        with pytest.raises(MetadataError, match=f"N5 block '0/0': .*{message}"):
            a[...]
        np.testing.assert_array_equal(a[2:, :], 0)  # other (missing) blocks still read


def test_corrupt_compressed_block_is_a_codec_error_naming_the_block(tmp_path):
    for kind in ("gzip", "bzip2", "xz", "zstd", "blosc"):
        d = tmp_path / kind
        d.mkdir()
        ds = _dataset(d, {"type": kind})
        _write_block(ds, (1, 0), _header(0, [1, 2]) + b"\x00garbage-not-compressed" * 3)
        a = cuzarr.open_array(str(ds), mode="r")
        with pytest.raises(CodecError, match=f"N5 block '1/0': (N5 {kind} decompression|blosc)"):
            a[...]


def _bomb(kind, nbytes):
    step = 1 << 20
    if kind == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
    elif kind == "bzip2":
        c = bz2.BZ2Compressor(9)
    elif kind == "xz":
        c = lzma.LZMACompressor(preset=0)
    else:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(c.compress(bytes(step)) for _ in range(nbytes // step)) + c.flush()


@pytest.mark.parametrize(
    ("kind", "size_mb"), [("zstd", 256), ("bzip2", 64), ("xz", 96), ("gzip", 64)]
)
def test_decompression_stops_at_the_block_size(tmp_path, kind, size_mb):
    """A stream that expands far beyond its block (a decompression bomb) is read
    as the reference implementation reads it, only as far as the header says,
    without materializing the rest."""
    d = _dataset(tmp_path, {"type": kind}, dtype="uint8", dims=(4,), block=(4,))
    _write_block(d, (0,), _header(0, [4]) + _bomb(kind, size_mb << 20))
    a = cuzarr.open_array(str(d), mode="r")
    tracemalloc.start()
    try:
        got = a[...]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, np.zeros(4, "u1"))
    assert peak < 16 << 20, f"peak {peak >> 20} MiB while reading a 4-byte block"


def test_blosc_buffer_larger_than_the_block_is_refused(tmp_path):
    d = _dataset(tmp_path, {"type": "blosc"}, dtype="uint8", dims=(4,), block=(4,))
    big = numcodecs.Blosc(cname="lz4").encode(bytes(64 << 20))
    _write_block(d, (0,), _header(0, [4]) + bytes(big))
    with pytest.raises(CodecError, match=r"N5 block '0'.*declares 67108864 bytes"):
        cuzarr.open_array(str(d), mode="r")[...]


def test_nested_groups_and_user_attributes_from_tensorstore(tmp_path):
    root = tmp_path / "n.n5"
    t = _ts_create(root / "g1" / "g2" / "ds", (4, 6), (3, 4), "float32", {"type": "raw"})
    t[...] = np.arange(24, dtype="f4").reshape(6, 4)
    p = root / "g1" / "g2" / "ds" / "attributes.json"
    attrs = json.loads(p.read_text())
    attrs["pixelResolution"] = {"unit": "um", "dimensions": [1, 2]}
    p.write_text(json.dumps(attrs))
    (root / "g1" / "attributes.json").write_text(json.dumps({"desc": "group 1"}))
    g = cuzarr.open_group(str(root), mode="r")
    assert list(g.keys()) == ["g1"] and list(g["g1"].keys()) == ["g2"]
    assert dict(g["g1"].attrs) == {"desc": "group 1"}
    ds = g["g1/g2/ds"]
    assert dict(ds.attrs) == {"pixelResolution": {"unit": "um", "dimensions": [1, 2]}}
    np.testing.assert_array_equal(ds[...], np.arange(24, dtype="f4").reshape(6, 4).T)
