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


def test_gpu_write_sharded_falls_back(tmp_path):
    data = _data((64, 64), "<u2")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype="<u2",
                            chunks=(8, 8), shards=(32, 32))
    a[...] = cp.asarray(data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)


def test_write_orders_after_user_stream(tmp_path):
    """A value still being computed on the caller's non-blocking stream is written
    only once it is done (enable_gpu(stream=...))."""
    s = cp.cuda.Stream(non_blocking=True)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(2048, 2048), dtype="f4",
                            chunks=(256, 256))
    with s:
        x = cp.ones((2048, 2048), "f4")
        for _ in range(20):  # keep the stream busy
            x = x * 1.0001
    with cuzarr.config.enable_gpu(stream=s):
        a[...] = x
    s.synchronize()
    np.testing.assert_array_equal(a[...], cp.asnumpy(x))


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
