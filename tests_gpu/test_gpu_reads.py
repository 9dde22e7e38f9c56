"""Reads into device memory through the public API (needs a GPU).

The same cases as tests/test_gpu_emulate.py (which runs the plans on the host),
here with CuPy outputs decoded by nvCOMP and scattered by the CUDA kernels,
compared with the host read and with numpy.
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr

cp = pytest.importorskip("cupy")

import cuzarr  # noqa: E402
from _gpu_helpers import sample  # noqa: E402  (tests/, see conftest)
from cuzarr.storage import LocalStore, MemoryStore  # noqa: E402

SELECTIONS = [
    (slice(None), slice(None)),
    (slice(3, 40, 3), slice(None, None, -2)),
    (slice(None, None, -1), 5),
    (7, slice(2, 29)),
    (np.newaxis, slice(1, 9), Ellipsis),
    (slice(38, 3, -5), slice(30, 0, -7)),
]


def _data(shape, dtype, seed=0):
    return sample(shape, dtype, seed, offset=0)


def _check(a, data, selections=SELECTIONS):
    for sel in selections:
        host = a[sel]
        with cuzarr.config.enable_gpu():
            got = a[sel]
        assert isinstance(got, cp.ndarray), type(got)
        np.testing.assert_array_equal(cp.asnumpy(got), data[sel])
        np.testing.assert_array_equal(cp.asnumpy(got), host)


V3_COMPRESSORS = [
    None,
    {"name": "zstd", "configuration": {"level": 1}},
    {"name": "gzip", "configuration": {"level": 3}},
    {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                        "typesize": 4, "blocksize": 0}},
    {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                                        "typesize": 4, "blocksize": 512}},
    {"name": "blosc", "configuration": {"cname": "blosclz", "clevel": 5, "shuffle": "noshuffle",
                                        "typesize": 4, "blocksize": 0}},
    numcodecs.LZ4(),
    numcodecs.Zlib(level=1),
    numcodecs.BZ2(),
]


@pytest.mark.parametrize("compressor", V3_COMPRESSORS)
@pytest.mark.parametrize("dtype", ["<f4", "<i2", "<c8", "|b1"])
def test_v3_codecs(compressor, dtype):
    data = _data((100, 61), dtype)
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype=dtype, chunks=(40, 32),
                            compressors=compressor, fill_value=0)
    a[...] = data
    _check(a, data)


@pytest.mark.parametrize("endian", ["big", "little"])
@pytest.mark.parametrize("dtype", ["u2", "f8", "c16"])
def test_v3_endianness(endian, dtype):
    data = _data((20, 13), dtype)
    a = cuzarr.create_array(
        MemoryStore(), shape=data.shape, dtype=dtype, chunks=(6, 5),
        serializer={"name": "bytes", "configuration": {"endian": endian}},
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    _check(a, data, SELECTIONS[:4])


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [None, numcodecs.Zstd(1), numcodecs.Zlib(1),
                                        numcodecs.GZip(1), numcodecs.LZ4(),
                                        numcodecs.Blosc("lz4", shuffle=1)])
@pytest.mark.parametrize("dtype", [">i4", "<f8", "|u1"])
def test_v2_written_by_zarr_python(tmp_path, order, compressor, dtype):
    data = _data((33, 26), dtype, seed=3)
    z = zarr.create_array(str(tmp_path / "z"), shape=data.shape, dtype=dtype, chunks=(10, 8),
                          zarr_format=2, order=order, compressors=compressor, fill_value=0)
    z[...] = data
    a = cuzarr.open_array(LocalStore(tmp_path / "z"), mode="r")
    _check(a, data)


def test_sharded(tmp_path):
    data = _data((64, 48), "<u2")
    z = zarr.create_array(str(tmp_path / "s"), shape=data.shape, dtype=data.dtype,
                          chunks=(8, 8), shards=(32, 24), fill_value=0)
    z[...] = data
    a = cuzarr.open_array(LocalStore(tmp_path / "s"), mode="r")
    _check(a, data, [*SELECTIONS, (slice(5, 6), slice(9, 10))])


def test_fancy_cupy_indices_masks_out_views():
    data = _data((40, 35), "<i8")
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(9, 8))
    a[...] = data
    rows = np.array([0, 39, 5, 5, 17])
    cols = np.array([34, 0, 8, 9, 16])
    mask = data % 3 == 0
    with cuzarr.config.enable_gpu():
        got = a.vindex[cp.asarray(rows), cp.asarray(cols)]
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(got), data[rows, cols])
        np.testing.assert_array_equal(cp.asnumpy(a.vindex[cp.asarray(mask)]), data[mask])
        np.testing.assert_array_equal(cp.asnumpy(a.oindex[rows, 3:20:4]), data[rows][:, 3:20:4])
        np.testing.assert_array_equal(cp.asnumpy(a[rows[:, None], cols]),
                                      data[rows[:, None], cols])
        np.testing.assert_array_equal(cp.asnumpy(a.blocks[1:3, 2]), data[9:27, 16:24])
        v = a.lazy[5:35:2][:, ::-3]
        np.testing.assert_array_equal(cp.asnumpy(v.read()), data[5:35:2][:, ::-3])
        r1, r2 = cuzarr.read_many([a.lazy[0:20], a.lazy[10:30, 5:]])
        assert isinstance(r1, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(r2), data[10:30, 5:])
    out = cp.zeros((20, 35), "<i8")
    a.get_basic_selection((slice(10, 30), slice(None)), out=out)
    np.testing.assert_array_equal(cp.asnumpy(out), data[10:30])
    # an explicit prototype per call, and meta_array at open
    assert isinstance(a.get_orthogonal_selection((slice(0, 3),), prototype="gpu"), cp.ndarray)
    b = cuzarr.open_array(a.store, mode="r", meta_array=cp.empty(()))
    assert isinstance(b[0:3], cp.ndarray)
    assert isinstance(np.asarray(b), np.ndarray)


def test_missing_and_nan_fill():
    data = np.full((25, 25), np.nan, "<f8")
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype="<f8", chunks=(10, 10),
                            fill_value=np.nan)
    a[12:18, 3:7] = 1.5
    data[12:18, 3:7] = 1.5
    _check(a, data)


def test_corrupt_chunk_raises():
    a = cuzarr.create_array(MemoryStore(), name="a", shape=(10, 10), dtype="f4", chunks=(5, 5))
    a[...] = 1.0
    raw = bytearray(cuzarr.runtime.sync.sync(a.store.get("a/c/1/0")))
    raw[len(raw) // 2] ^= 0xFF
    raw[0] ^= 0xFF
    cuzarr.runtime.sync.sync(a.store.set("a/c/1/0", bytes(raw)))
    with cuzarr.config.enable_gpu(), pytest.raises(cuzarr.errors.CodecError, match="a/c/1/0"):
        a[...]


def test_result_ready_on_user_stream():
    """A read returns only once its output is complete: work queued afterwards on
    any stream sees the data."""
    data = _data((512, 512), "<f4")
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(64, 64))
    a[...] = data
    s = cp.cuda.Stream(non_blocking=True)
    with s, cuzarr.config.enable_gpu():
        got = a[...]
        total = float(got.sum())
    np.testing.assert_allclose(total, float(data.sum()), rtol=1e-4)


def test_torch_dlpack_zero_copy():
    torch = pytest.importorskip("torch")
    data = _data((32, 16), "<f4")
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(8, 8))
    a[...] = data
    with cuzarr.config.enable_gpu():
        x = a[...]
    t = torch.from_dlpack(x)
    assert t.device.type == "cuda" and t.data_ptr() == x.data.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), data)


@pytest.mark.parametrize("codec", [{"name": "zstd", "configuration": {"level": 3}},
                                   {"name": "numcodecs.lz4", "configuration": {}}])
@pytest.mark.parametrize("gds", [True, "auto"])
@pytest.mark.parametrize("sharded", [False, True])
def test_gds_compressed_local(tmp_path, gds, codec, sharded):
    """zstd and LZ4 local chunk files (or inner chunks: byte ranges of shard
    files, after the index is read on the host) read into device memory
    (kvikio) and decoded there by nvCOMP, in sub-batches, with ``gpu.gds``
    True ("auto": through host memory); a truncated chunk file raises
    CodecError naming its key."""
    data = np.cumsum(_data((300, 200), "<f4"), axis=1).round(1)
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(64, 64), shards=(128, 128) if sharded else None,
                            compressors=codec)
    a[...] = data
    with cuzarr.config.set({"gpu.gds": gds, "gpu.sub_batch_bytes": 16 << 10}):
        _check(a, data)
        if sharded:
            return
        path = tmp_path / "a" / "c" / "1" / "1"
        path.write_bytes(path.read_bytes()[:-8])
        with cuzarr.config.enable_gpu(), pytest.raises(cuzarr.errors.CodecError, match="c/1/1"):
            a[...]


@pytest.mark.parametrize("gds", [True, "auto"])
def test_gds_uncompressed_local(tmp_path, gds):
    """Uncompressed local chunks read from disk into device memory (kvikio: GDS or
    its compat mode; without kvikio, gds=True reads on the host and uploads)."""
    data = _data((300, 200), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(64, 64), compressors=None)
    a[...] = data
    with cuzarr.config.set({"gpu.gds": gds}):
        _check(a, data)
        # fancy selections take plain bytes (they had failed on file references)
        rows, cols = np.array([1, 70, 299, 5]), np.array([3, 199, 0, 64])
        with cuzarr.config.enable_gpu():
            got = a.vindex[rows, cols]
            got_o = a.oindex[rows, cols]
        np.testing.assert_array_equal(cp.asnumpy(got), data[rows, cols])
        np.testing.assert_array_equal(cp.asnumpy(got_o), data[np.ix_(rows, cols)])


@pytest.mark.parametrize("kind", ["regular", "sharded"])
def test_read_many_shared_chunks_staged_on_device(tmp_path, kind):
    """Views sharing chunks: each unique chunk decoded once on the device into a
    staging array, every view copied from it there (tests/test_gpu_emulate.py
    runs the same cases on the host twin)."""
    data = _data((50, 41), "<i4")
    kw = {"compressors": {"name": "zstd", "configuration": {"level": 1}}, "fill_value": -7}
    kw.update({"chunks": (5, 8), "shards": (10, 16)} if kind == "sharded" else {"chunks": (12, 9)})
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype, **kw)
    a[...] = data
    rows = np.array([3, 3, 49, 0, 17])
    views = [a.lazy[0:20], a.lazy[10:30, 5:], a.lazy[45:2:-3, ::-4], a.lazy.oindex[rows, 1:40:6]]
    expect = [data[0:20], data[10:30, 5:], data[45:2:-3, ::-4], data[rows][:, 1:40:6]]
    with cuzarr.config.enable_gpu():
        got = cuzarr.read_many(views)
    for g, e in zip(got, expect, strict=True):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(g), e)


def test_corrupt_zstd_checksum_raises():
    """A zstd frame with a content checksum that does not match is a CodecError on
    the host; nvCOMP must not hand the chunk back as valid on the device either
    (if this fails, route checksummed frames to the host: formats.parse_zstd)."""
    from cuzarr.errors import CodecError

    st = MemoryStore()
    data = _data((64, 64), "<f4")
    a = cuzarr.create_array(st, shape=data.shape, dtype=data.dtype, chunks=(64, 64),
                            compressors={"name": "zstd",
                                         "configuration": {"level": 1, "checksum": True}})
    a[...] = data
    with cuzarr.config.enable_gpu():
        np.testing.assert_array_equal(cp.asnumpy(a[...]), data)
    raw = bytes(st.get_sync("c/0/0"))
    st.set_sync("c/0/0", raw[:-4] + bytes(b ^ 0xFF for b in raw[-4:]))
    with pytest.raises(CodecError, match="c/0/0"):
        a[...]
    with pytest.raises(CodecError, match="c/0/0"), cuzarr.config.enable_gpu():
        a[...]


@pytest.mark.parametrize("compressor", [numcodecs.Zlib(level=1), numcodecs.GZip(level=1),
                                        {"name": "zstd", "configuration": {"level": 1}},
                                        numcodecs.LZ4()])
def test_large_chunks(tmp_path, compressor):
    """Chunks decoding to 1 MiB (nvCOMP's deflate compresses at most 64 KiB a
    chunk; decoding larger ones, and zstd/LZ4 at 1 MiB, is what reads of real
    data do)."""
    data = _data((1024, 768), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(512, 512), compressors=compressor)
    a[...] = data
    _check(a, data, SELECTIONS[:2])


@pytest.mark.parametrize("shape,chunks,dtype", [
    ((), "auto", "<f2"), ((0, 5), (2, 2), "<f2"), ((7, 5), (3, 2), ">f2"),
    ((7, 5), (3, 2), "<f2"), ((9, 4), (2, 3), "|b1"),
])
def test_float16_bool_0d_and_empty_round_trip(shape, chunks, dtype):
    """Written from CuPy and read back to CuPy: float16 (either byte order),
    bool, a 0-d array, an array with no elements."""
    dt = np.dtype(dtype)
    kw = {} if dt.itemsize == 1 else {"serializer": {
        "name": "bytes", "configuration": {"endian": "big" if dt.byteorder == ">" else "little"}}}
    a = cuzarr.create_array(MemoryStore(), shape=shape, dtype=dtype, chunks=chunks, fill_value=1,
                            compressors={"name": "zstd", "configuration": {"level": 1}}, **kw)
    data = (np.arange(int(np.prod(shape))) % 5).astype(dt).reshape(shape)
    a[...] = cp.asarray(data.astype(dt.newbyteorder("=")))
    np.testing.assert_array_equal(a[...], data)  # host read of the device write
    with cuzarr.config.enable_gpu():
        got = a[...]
    assert isinstance(got, cp.ndarray) and got.shape == shape
    np.testing.assert_array_equal(cp.asnumpy(got), data)


@pytest.mark.parametrize("streams", [1, 2, 4])
@pytest.mark.parametrize("sub_bytes", [1, 4096, 1 << 30])
@pytest.mark.parametrize("compressor", [V3_COMPRESSORS[1], V3_COMPRESSORS[2], V3_COMPRESSORS[3],
                                        V3_COMPRESSORS[5], numcodecs.LZ4()])
def test_sub_batches_on_streams(tmp_path, streams, sub_bytes, compressor):
    """Sub-batches (one chunk each, a few chunks, whole batches) spread over 1,
    2 and 4 streams read what the host reads: uploads, decodes, unshuffles,
    checksums and scatters of consecutive sub-batches overlap on their streams
    and the read waits once for all of them."""
    data = _data((40, 30), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, chunks=(8, 7),
                            dtype=data.dtype, compressors=compressor)
    a[...] = data
    with cuzarr.config.set({"gpu.streams": streams, "gpu.sub_batch_bytes": sub_bytes}):
        _check(a, data)


@pytest.mark.parametrize("streams", [2, 4])
@pytest.mark.parametrize("workers", [1, 3])
def test_batches_of_one_sub_batch_on_side_streams(tmp_path, streams, workers):
    """Reads cut into many small batches (``gpu.read_batch_bytes`` of three
    chunks), each one sub-batch on its executor's side streams in turn
    (``GpuExecutor._run_alone``: staging allocated on the stream used, no wait
    for the batch before), read what the host reads."""
    data = _data((64, 30), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, chunks=(8, 7),
                            dtype=data.dtype, compressors=V3_COMPRESSORS[0])
    a[...] = data
    with cuzarr.config.set({"gpu.streams": streams, "gpu.read_batch_bytes": 3 * 8 * 7 * 4,
                            "gpu.read_workers": workers}):
        _check(a, data)


def test_sharded_inner_chunks_decode_unaligned_in_place(tmp_path):
    """Whole shards are staged as read and their inner zstd / LZ4 chunks decoded
    where they lie, at any byte offset (nvCOMP >= 6.0 needs no input alignment
    for them; deflate streams off the 4-byte grid are packed)."""
    data = _data((64, 48), "<f4")
    for comp in ({"name": "zstd", "configuration": {"level": 1}}, numcodecs.LZ4(),
                 {"name": "gzip", "configuration": {"level": 1}}):
        a = cuzarr.create_array(LocalStore(tmp_path / str(id(comp))), shape=data.shape,
                                chunks=(8, 8), shards=(32, 24), dtype=data.dtype,
                                compressors=comp)
        a[...] = data
        _check(a, data)


@pytest.mark.parametrize("compressor", [V3_COMPRESSORS[0], V3_COMPRESSORS[1], numcodecs.LZ4()])
def test_whole_chunks_decode_straight_into_the_output(tmp_path, compressor):
    """Rows of whole chunks are decoded by nvCOMP straight into the output; a
    misaligned or strided ``out=`` goes through staging."""
    data = _data((32, 40), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, chunks=(4, 40),
                            dtype=data.dtype, compressors=compressor)
    a[...] = data
    _check(a, data, [(slice(None), slice(None)), (slice(4, 28), slice(None)),
                     (slice(None), slice(None, None, 2))])
    raw = cp.zeros(32 * 40 * 4 + 4, cp.uint8)
    shifted = raw[4:].view(cp.float32).reshape(32, 40)
    a.get_basic_selection(Ellipsis, out=shifted)
    np.testing.assert_array_equal(cp.asnumpy(shifted), data)
    big = cp.zeros((32, 80), cp.float32)
    a.get_basic_selection(Ellipsis, out=big[:, 7:47])
    np.testing.assert_array_equal(cp.asnumpy(big[:, 7:47]), data)


@pytest.mark.parametrize("where", ["legacy", "per-thread", "own"])
def test_reads_order_after_work_on_the_callers_stream(tmp_path, where):
    """An ``out=`` still being filled on the caller's stream is written by the
    read only after that work: the legacy default stream by CUDA's implicit
    ordering of blocking streams, a per-thread default stream or a stream of
    the caller's own when passed as ``enable_gpu(stream=...)`` (CUDA does not
    order a per-thread default stream against other streams)."""
    data = _data((64, 256), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, chunks=(8, 256),
                            dtype=data.dtype, compressors={"name": "zstd",
                                                           "configuration": {"level": 1}})
    a[...] = data
    stream = {"legacy": cp.cuda.Stream.null, "per-thread": cp.cuda.Stream.ptds,
              "own": cp.cuda.Stream(non_blocking=True)}[where]
    out = cp.empty(data.shape, cp.float32)
    slow = cp.ones((4096, 4096), cp.float32)
    with stream:
        for _ in range(4):
            slow = slow @ slow / 4096  # keeps the stream busy for a while
        out[...] = slow[0, 0] * -1  # then fills out with -1
    with cuzarr.config.enable_gpu(stream=None if where == "legacy" else stream):
        a.get_basic_selection(Ellipsis, out=out)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), data)
