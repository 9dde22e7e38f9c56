"""Writes from CuPy arrays: gathered and compressed on the GPU, read back by
zarr-python (numcodecs on the CPU), and the reverse (needs a GPU)."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr

cp = pytest.importorskip("cupy")

import cuzarr  # noqa: E402
from _gpu_helpers import sample  # noqa: E402  (tests/, see conftest)
from cuzarr.storage import LocalStore  # noqa: E402


def _data(shape, dtype, seed=0):
    return sample(shape, dtype, seed, offset=1000)


@pytest.mark.parametrize(
    "compressor",
    [None, {"name": "zstd", "configuration": {"level": 1}},
     {"name": "gzip", "configuration": {"level": 5}}, numcodecs.LZ4(), numcodecs.Zlib(1),
     {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                         "typesize": 4, "blocksize": 0}}],
)
@pytest.mark.parametrize("dtype", ["<f4", "<i2", "|b1", "<f8"])
def test_gpu_write_read_by_zarr(tmp_path, compressor, dtype):
    data = _data((300, 220), dtype)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=dtype,
                            chunks=(64, 64), compressors=compressor, fill_value=0)
    expect = np.zeros_like(data)
    a[10:, 3:] = cp.asarray(data[10:, 3:])
    expect[10:, 3:] = data[10:, 3:]
    a[:70, :5] = cp.asarray(data[:70, :5])  # partial update of stored chunks
    expect[:70, :5] = data[:70, :5]
    a[256:, :] = cp.zeros((44, 220), dtype)  # back to fill: deleted
    expect[256:, :] = 0
    a[100:140:3, ::-7] = cp.asarray(data[:14, :32])
    expect[100:140:3, ::-7] = data[:14, :32]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], expect)
    with cuzarr.config.enable_gpu():
        np.testing.assert_array_equal(cp.asnumpy(a[...]), expect)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [numcodecs.Zstd(1), numcodecs.GZip(1), numcodecs.LZ4()])
def test_gpu_write_v2(tmp_path, order, compressor):
    data = _data((130, 90), ">i4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=">i4",
                            chunks=(32, 32), compressors=compressor, zarr_format=2, order=order)
    a[...] = cp.asarray(data.astype("<i4"))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)


SHARD_CODECS = {
    "none": None,
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "gzip": {"name": "gzip", "configuration": {"level": 5}},
    "lz4": numcodecs.LZ4(),
    "blosc-lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4,
                                                     "blocksize": 0}},
}


def _stored(root):
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _shard_writes(a, data, as_value):
    """Whole shards, whole shards back to the fill value, an all-fill inner
    chunk, a partial shard and cut edge shards (shards (64, 64) of (16, 16))."""
    expect = np.zeros_like(data)
    a[...] = as_value(data)
    expect[...] = data
    a[64:128, :] = as_value(np.zeros((64, data.shape[1]), data.dtype))
    expect[64:128, :] = 0
    z = data[:64, :128].copy()
    z[16:32, :16] = 0
    a[:64, :128] = as_value(z)
    expect[:64, :128] = z
    a[30:90, 10:20] = as_value(data[:60, :10])
    expect[30:90, 10:20] = data[:60, :10]
    return expect


@pytest.mark.parametrize("wec", [False, True], ids=["drop-empty", "write-empty"])
@pytest.mark.parametrize("loc", ["start", "end"])
@pytest.mark.parametrize("codec", list(SHARD_CODECS))
def test_gpu_sharded_write_as_the_host_write(tmp_path, codec, loc, wec):
    """Whole shards built and encoded on the device: the same keys as the host
    write, the same inner chunks left out (index entries), byte for byte the
    same shards where the inner chunks are stored raw; read back by zarr-python
    (and tensorstore, where it knows the codec) and by cuzarr's device read."""
    from cuzarr.codecs.sharding import EMPTY, ShardingCodec

    data = _data((200, 190), "<f4")
    kw = dict(shape=data.shape, dtype="<f4", chunks=(16, 16),
              shards={"shape": (64, 64), "index_location": loc},
              compressors=SHARD_CODECS[codec], fill_value=0, write_empty_chunks=wec)
    a = cuzarr.create_array(LocalStore(tmp_path / "d"), **kw)
    expect = _shard_writes(a, data, cp.asarray)
    h = cuzarr.create_array(LocalStore(tmp_path / "h"), **kw)
    _shard_writes(h, data, np.asarray)
    dev, host = _stored(tmp_path / "d"), _stored(tmp_path / "h")
    assert dev.keys() == host.keys()
    if codec == "none":
        assert dev == host
    index = ShardingCodec((16, 16), index_location=loc)
    for key in [k for k in dev if k.startswith("c/")]:
        got = index.split(dev[key], (64, 64))[0][..., 0] == EMPTY
        want = index.split(host[key], (64, 64))[0][..., 0] == EMPTY
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "d"), mode="r")[...], expect)
    if codec != "lz4":  # tensorstore has no numcodecs.* codecs
        import tensorstore as ts

        t = ts.open({"driver": "zarr3",
                     "kvstore": {"driver": "file", "path": str(tmp_path / "d")}}).result()
        np.testing.assert_array_equal(t.read().result(), expect)
    with cuzarr.config.enable_gpu():
        np.testing.assert_array_equal(cp.asnumpy(a[...]), expect)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_gpu_shard_writer_takes_whole_shards(codec):
    """The dispatch gives whole-shard writes of a CuPy value to the device
    writer of shards; its shards decode to the value (and, with raw inner
    chunks, are the host encode's bytes)."""
    from cuzarr.codecs.base import ChunkSpec, codec_from_json
    from cuzarr.codecs.bytes_codec import BytesCodec
    from cuzarr.codecs.sharding import ShardingCodec
    from cuzarr.gpu.dispatch import device_writer_for
    from cuzarr.gpu.shardwriter import ShardWriter
    from cuzarr.metadata.dtypes import parse_data_type

    inner = [BytesCodec()] + ([codec_from_json(SHARD_CODECS[codec])] if SHARD_CODECS[codec]
                              else [])
    sc = ShardingCodec((16, 16), inner, index_location="start")
    spec = ChunkSpec((64, 64), parse_data_type("uint16", 3), 0)
    data = _data((64, 128), "<u2")
    data[:16, :16] = 0  # left out of shard 0
    items = [((0, j), (slice(0, 64), slice(0, 64)), (slice(0, 64), slice(64 * j, 64 * j + 64)),
              True) for j in range(2)]
    writer = device_writer_for(None, cp.asarray(data), 0, lambda _c: (64, 64), items, False,
                               True, sc, sc.inner_pipeline(spec))
    assert isinstance(writer, ShardWriter)
    to_set, to_delete = writer(items, [None, None], ["c/0/0", "c/0/1"])
    assert not to_delete and [k for k, _ in to_set] == ["c/0/0", "c/0/1"]
    for j, (_key, shard) in enumerate(to_set):
        part = data[:, 64 * j : 64 * j + 64]
        np.testing.assert_array_equal(sc.decode(bytes(shard), spec), part)
        if codec == "none":
            assert bytes(shard) == sc.encode(part, spec)


def test_gpu_sharded_write_host_route_for_inner_crc32c(tmp_path):
    """Inner codecs the device does not encode: the host writes the shards."""
    data = _data((64, 64), "<u2")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype="<u2",
                            chunks=(8, 8), shards=(32, 32),
                            compressors=[{"name": "zstd", "configuration": {"level": 1}},
                                         {"name": "crc32c"}])
    a[...] = cp.asarray(data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)


def _write_while_computed(a):
    """Write into ``a`` a value still being computed on the caller's non-blocking
    stream (enable_gpu(stream=...)), then check what was stored."""
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(a.shape, "f4")
        for _ in range(20):  # keep the stream busy
            x = x * 1.0001
    with cuzarr.config.enable_gpu(stream=s):
        a[...] = x
    s.synchronize()
    np.testing.assert_array_equal(a[...], cp.asnumpy(x))


def test_sharded_write_orders_after_user_stream(tmp_path):
    """Whole shards (device) and cut edge shards (their part copied to the
    host) of a value still being computed on the caller's stream."""
    _write_while_computed(cuzarr.create_array(
        LocalStore(tmp_path / "a"), shape=(2048, 2000), dtype="f4", chunks=(128, 128),
        shards=(512, 512)))


def test_write_orders_after_user_stream(tmp_path):
    """A value still being computed on the caller's non-blocking stream is written
    only once it is done (enable_gpu(stream=...))."""
    _write_while_computed(cuzarr.create_array(
        LocalStore(tmp_path / "a"), shape=(2048, 2048), dtype="f4", chunks=(256, 256)))


@pytest.mark.parametrize("compressor", [
    {"name": "zstd", "configuration": {"level": 1}},
    {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                                        "typesize": 4, "blocksize": 0}},
])
def test_device_written_zstd_frames_have_content_sizes(tmp_path, compressor):
    """The reader sends a zstd frame (also inside blosc) to nvCOMP only when its
    header holds the content size: frames nvCOMP writes must have it, or the
    device's own chunks would be read back on the host."""
    from cuzarr.gpu import formats

    data = _data((256, 256), "<f4")
    store = LocalStore(tmp_path / "a")
    a = cuzarr.create_array(store, shape=data.shape, dtype=data.dtype, chunks=(128, 128),
                            compressors=compressor)
    a[...] = cp.asarray(data)
    nbytes = 128 * 128 * 4
    for key in ("c/0/0", "c/1/1"):
        raw = bytes(store.get_sync(key))
        if compressor["name"] == "zstd":
            assert formats.zstd_frame_info(raw).content_size == nbytes
            formats.parse_zstd(raw, nbytes)
        else:
            ch = formats.parse_blosc(raw, nbytes)  # UnsupportedStream: host decode
            assert {s.codec for s in ch.streams} <= {"zstd", "copy"}
    with cuzarr.config.enable_gpu():
        np.testing.assert_array_equal(cp.asnumpy(a[...]), data)
