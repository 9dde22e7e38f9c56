"""The device write path, run on the host (``gpu.emulate``).

Writes go through ``gpu.writer.DeviceWriter`` — the gather plan (new chunks
padded with the fill value, old chunks decoded and uploaded for partial
updates), the fill-value check, and the containers around raw streams (zstd
frames, numcodecs' LZ4 size prefix, zlib header + Adler-32, gzip header + CRC-32)
— with ``HostEncoder`` standing in for the device (numpy gather, lz4/zstandard/
zlib for nvCOMP). What it writes is read back by zarr-python (numcodecs decodes
every chunk) and compared with numpy.
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import cuzarr
from _gpu_helpers import sample
from cuzarr.gpu.writer import HostEncoder
from cuzarr.storage import LocalStore


@pytest.fixture
def emulate():
    HostEncoder.stats.clear()
    with cuzarr.config.set({"gpu.emulate": True}):
        yield HostEncoder.stats


def _data(shape, dtype, seed=0):
    return sample(shape, dtype, seed, offset=1000)


def _writes(a, data):
    """Full write, then partial updates (into stored and missing chunks), then a
    region set to the fill value; returns the expected array."""
    expect = np.zeros(data.shape, data.dtype)
    a[5:, 3:] = data[5:, 3:]  # leaves chunk (0, 0) partly, others wholly written
    expect[5:, 3:] = data[5:, 3:]
    a[:7, :2] = data[:7, :2]  # partial update of a stored chunk and a missing one
    expect[:7, :2] = data[:7, :2]
    a[20:, :] = 0  # whole chunks back to the fill value: deleted
    expect[20:, :] = 0
    part = data[-2:, ::3][:, : len(range(1, data.shape[1], 3))]
    a[12:14, 1::3] = part
    expect[12:14, 1::3] = part
    return expect


V3_CASES = [
    pytest.param(None, "none", id="none"),
    pytest.param({"name": "zstd", "configuration": {"level": 3}}, "zstd", id="zstd"),
    pytest.param({"name": "gzip", "configuration": {"level": 5}}, "gzip", id="gzip"),
    pytest.param(numcodecs.LZ4(), "lz4", id="numcodecs-lz4"),
    pytest.param(numcodecs.Zlib(level=1), "zlib", id="numcodecs-zlib"),
    pytest.param({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4,
                                                     "blocksize": 0}}, "blosc", id="blosc-lz4"),
    pytest.param({"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                                                     "shuffle": "noshuffle", "typesize": 4,
                                                     "blocksize": 256}}, "blosc",
                 id="blosc-zstd-small-blocks"),
    pytest.param({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "bitshuffle", "typesize": 4,
                                                     "blocksize": 0}}, None,
                 id="blosc-bitshuffle-host"),
    pytest.param({"name": "blosc", "configuration": {"cname": "blosclz", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4,
                                                     "blocksize": 0}}, None, id="blosclz-host"),
    pytest.param([{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}], None,
                 id="crc32c-host"),
    pytest.param({"name": "zstd", "configuration": {"level": 1, "checksum": True}}, None,
                 id="zstd-checksum-host"),
]


@pytest.mark.parametrize("compressor, container", V3_CASES)
@pytest.mark.parametrize("dtype", ["<f4", "<i2", "|b1", "<c16"])
def test_v3_written_on_device_read_by_zarr(tmp_path, emulate, compressor, container, dtype):
    data = _data((30, 22), dtype)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=dtype,
                            chunks=(8, 7), compressors=compressor, fill_value=0)
    expect = _writes(a, data)
    z = zarr.open_array(str(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(z[...], expect)
    np.testing.assert_array_equal(a[...], expect)
    assert emulate[f"container:{container}"] > 0
    assert emulate["rmw"] > 0 and emulate["empty"] > 0
    # chunk (3, *) and beyond are all fill: not stored
    assert a.nchunks_initialized == z.nchunks_initialized < a.nchunks


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    "compressor, container",
    [(None, "none"), (numcodecs.Zstd(level=1), "zstd"), (numcodecs.Zlib(level=6), "zlib"),
     (numcodecs.GZip(level=1), "gzip"), (numcodecs.LZ4(), "lz4"),
     (numcodecs.Blosc("zstd", shuffle=1), "blosc"),
     (numcodecs.Blosc("lz4", shuffle=numcodecs.Blosc.AUTOSHUFFLE), "blosc"),
     (numcodecs.Blosc("zlib", shuffle=1), None)],
)
@pytest.mark.parametrize("dtype", [">i4", "<f8", "|u1"])
def test_v2_written_on_device_read_by_zarr(tmp_path, emulate, order, compressor, container,
                                           dtype):
    data = _data((30, 22), dtype, seed=2)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=dtype,
                            chunks=(8, 7), compressors=compressor, zarr_format=2, order=order,
                            fill_value=0)
    expect = _writes(a, data)
    z = zarr.open_array(str(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(z[...], expect)
    if getattr(compressor, "shuffle", None) == numcodecs.Blosc.AUTOSHUFFLE and dtype == "|u1":
        container = None  # blosc's auto shuffle is a bit shuffle for 1-byte items: host
    assert emulate[f"container:{container}"] > 0


@pytest.mark.parametrize("endian", ["big", "little"])
def test_v3_big_endian_bytes(tmp_path, emulate, endian):
    data = _data((30, 22), "<f8")
    a = cuzarr.create_array(
        LocalStore(tmp_path / "a"), shape=data.shape, dtype="f8", chunks=(8, 7), fill_value=0,
        serializer={"name": "bytes", "configuration": {"endian": endian}},
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    expect = _writes(a, data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], expect)
    assert emulate["container:zstd"] > 0


def test_nan_fill_and_write_empty_chunks(tmp_path, emulate):
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(20, 20), dtype="f4",
                            chunks=(10, 10), fill_value=np.nan)
    a[...] = np.nan
    assert a.nchunks_initialized == 0 and emulate["empty"] == 4
    a[3, 4] = 1.0
    assert a.nchunks_initialized == 1
    b = cuzarr.create_array(LocalStore(tmp_path / "b"), shape=(20, 20), dtype="f4",
                            chunks=(10, 10), fill_value=0, write_empty_chunks=True)
    b[...] = 0
    assert b.nchunks_initialized == 4


def test_partial_shards_and_fancy_writes_take_the_host_path(tmp_path, emulate):
    """Shards written in part are updated on the host (whole ones: see
    tests/test_gpu_emulate_shard_writes.py); so are orthogonal writes."""
    data = _data((32, 32), "<u2")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 8), shards=(16, 16))
    a[1:, 1:] = data[1:, 1:]
    assert emulate["batches"] == 1 and emulate["chunks"] == 4  # shard (1, 1)
    np.testing.assert_array_equal(a[1:, 1:], data[1:, 1:])
    b = cuzarr.create_array(LocalStore(tmp_path / "b"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 8))
    b.oindex[[1, 5, 30], :] = data[:3]
    expect = np.zeros_like(data)
    expect[[1, 5, 30], :] = data[:3]
    np.testing.assert_array_equal(b[...], expect)


def test_zstd_frames_decode_with_numcodecs(tmp_path, emulate):
    """Chunks written by the device path decode with plain numcodecs codecs."""
    data = _data((16, 16), "<i4")
    for name, codec in [("zstd", numcodecs.Zstd()), ("zlib", numcodecs.Zlib()),
                        ("gzip", numcodecs.GZip()), ("lz4", numcodecs.LZ4()),
                        ("blosc", numcodecs.Blosc("lz4", shuffle=1))]:
        a = cuzarr.create_array(LocalStore(tmp_path / name), shape=data.shape, dtype="<i4",
                                chunks=(8, 8), compressors=codec, zarr_format=2)
        a[...] = data
        raw = (tmp_path / name / "1.0").read_bytes()
        got = np.frombuffer(codec.decode(raw), "<i4").reshape(8, 8)
        np.testing.assert_array_equal(got, data[8:, :8])


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_random_slice_writes_match_numpy(tmp_path_factory, data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 10)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    sel = tuple(
        slice(
            data.draw(st.one_of(st.none(), st.integers(-s - 1, s + 1))),
            data.draw(st.one_of(st.none(), st.integers(-s - 1, s + 1))),
            data.draw(st.sampled_from([None, 1, 2, -1, -3])),
        )
        for s in shape
    )
    comp = data.draw(st.sampled_from([None, numcodecs.Zstd(1), numcodecs.Zlib(1),
                                      numcodecs.LZ4()]))
    base = _data(shape, "<i4", seed=1)
    expect = base.copy()
    val = -np.arange(expect[sel].size, dtype="<i4").reshape(expect[sel].shape)
    expect[sel] = val
    path = tmp_path_factory.mktemp("w")
    a = cuzarr.create_array(LocalStore(path), shape=shape, dtype="<i4", chunks=chunks,
                            compressors=comp, zarr_format=2)
    with cuzarr.config.set({"gpu.emulate": True}):
        a[...] = base
        a[sel] = val
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], expect)


def test_blosc_parameters_the_device_takes():
    """Blosc chunks the device cannot write (blocks over nvCOMP's 16 MiB, bit
    shuffle, other inner codecs, type sizes a header byte cannot hold) take the
    host route."""
    from cuzarr.gpu.writer import _blosc_params

    p = _blosc_params({"cname": "lz4", "shuffle": "shuffle", "blocksize": 0}, 4)
    assert p is not None and p.shuffle and p.blocksize % 64 == 0 and p.typesize == 4
    assert _blosc_params({"cname": "zstd", "shuffle": 0, "blocksize": 1000}, 8).blocksize == 896
    assert _blosc_params({"cname": "lz4", "shuffle": 1, "blocksize": 32 << 20}, 4) is None
    assert _blosc_params({"cname": "lz4", "shuffle": "bitshuffle"}, 4) is None
    assert _blosc_params({"cname": "lz4", "shuffle": -1}, 1) is None  # auto: bit shuffle
    assert _blosc_params({"cname": "blosclz", "shuffle": 1}, 4) is None
    assert _blosc_params({"cname": "lz4", "shuffle": 1, "typesize": 300}, 4) is None


@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("dtype, fill", [("<c8", complex(np.nan, 0)),
                                         ("<c16", complex(np.nan, np.nan))])
def test_complex_nan_fill_matches_any_nan(tmp_path, emulate, endian, dtype, fill):
    """A complex fill with NaN parts: a chunk whose parts are NaN with another
    payload (here -NaN) is empty, as on the host (not stored)."""
    neg = np.float64(-np.nan)
    value = np.full(4, complex(neg, 0 if np.isfinite(fill.imag) else neg), dtype)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(8,), dtype=dtype, chunks=(4,),
                            fill_value=fill,
                            serializer={"name": "bytes", "configuration": {"endian": endian}})
    a[:4] = value
    a[4:] = np.array([complex(neg, -0.0)] * 4, dtype)  # imag -0.0 differs: stored
    assert emulate["empty"] == 1
    stored = 1
    assert a.nchunks_initialized == stored
    with cuzarr.config.set({"gpu.emulate": False}):
        b = cuzarr.create_array(LocalStore(tmp_path / "b"), shape=(8,), dtype=dtype,
                                chunks=(4,), fill_value=fill)
        b[:4] = value
        b[4:] = np.array([complex(neg, -0.0)] * 4, dtype)
        assert b.nchunks_initialized == stored


def _stored(root):
    """Every stored file under ``root``: relative path -> bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _cut_edge_writes(a, fill, path, reopen):
    """Shrink a written array with zarr-python so that edge chunks (and shards)
    are cut and keep their elements past the end (cuzarr's own shrink sets them
    to the fill value), then write into them every way: a covering step-1 slice
    (zarr-python writes such a chunk whole, dropping the stale elements past the
    end), a stepped slice and index arrays (read-modify-written: they survive),
    fill values; grow back. ``reopen()``: the array after the shrink."""
    a[...] = np.arange(1, a.size + 1, dtype=a.dtype).reshape(a.shape)
    zarr.open_array(str(path), mode="r+").resize((7, 5))
    a = reopen()
    a[4:7, 3:5] = 9  # covers cut edge chunks: written whole
    a[0:7:3, 0:2] = 8  # stepped: read-modify-write
    a.oindex[[0, 5, 6], [4]] = 7
    a[[6, 1], 2:5] = 6  # cuzarr's own fancy path
    a[6, 0:2] = fill  # a cut chunk's in-bounds part back to the fill value
    a.resize((9, 7))


@pytest.mark.parametrize("order, wec", [("C", False), ("F", True)])
@pytest.mark.parametrize(
    "compressors",
    [None, {"name": "zstd", "configuration": {"level": 1}}],
    ids=["none", "zstd"],
)
@pytest.mark.parametrize("shards", [None, (4, 4)], ids=["chunks", "shards"])
def test_cut_edge_chunks_written_on_device_as_on_the_host(tmp_path, order, compressors, wec,
                                                          shards):
    """The device write path keeps (or drops) the stale elements of chunks and
    shards cut by a shrink exactly as the host path (and zarr-python) does: the
    same keys with the same bytes. Cut shards take the host path, whole ones
    the device's."""
    kw = dict(shape=(9, 7), dtype="<i4", chunks=(2, 2), shards=shards, order=order,
              compressors=compressors, fill_value=0, write_empty_chunks=wec)
    roots = {}
    for emu in (False, True):
        HostEncoder.stats.clear()
        with cuzarr.config.set({"gpu.emulate": emu}):
            a = cuzarr.create_array(LocalStore(tmp_path / str(emu)), **kw)
            _cut_edge_writes(a, 0, tmp_path / str(emu), lambda emu=emu: cuzarr.open_array(
                LocalStore(tmp_path / str(emu)), mode="r+", config={"write_empty_chunks": wec}
            ))
        assert bool(HostEncoder.stats.get("batches")) == emu
        roots[emu] = _stored(tmp_path / str(emu))
    assert roots[True] == roots[False]
    z = zarr.create_array(str(tmp_path / "z"), **{
        k: v for k, v in kw.items() if k != "write_empty_chunks"
    }, config={"write_empty_chunks": wec})
    _cut_edge_writes(z, 0, tmp_path / "z", lambda: zarr.open_array(
        str(tmp_path / "z"), mode="r+", config={"write_empty_chunks": wec}
    ))
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "True"))[...], z[...])
    assert {k for k in roots[True] if not k.endswith("zarr.json")} == {
        str(p.relative_to(tmp_path / "z")) for p in (tmp_path / "z").rglob("c/**/*")
        if p.is_file()
    }
