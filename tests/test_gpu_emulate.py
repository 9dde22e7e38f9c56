"""The device read path, run on the host (``gpu.emulate``).

With ``cuzarr.config`` key ``gpu.emulate`` set, reads go through exactly the code a
GPU read runs — the engine hands each batch to ``gpu.reader.DeviceReader``, which
parses the stored bytes into raw streams (``executor.prepare_batch``) and builds
the scatter plan — and only the last step differs: ``HostExecutor`` (numpy staging
buffer, lz4/zstandard/zlib decoding the raw streams, ``execute_plan_numpy``) runs
the batch instead of ``GpuExecutor`` (nvCOMP, CUDA kernels). Every case is compared
with the ordinary host read and with numpy, and the executor's counters show which
chunks the GPU would decode itself.
"""

from __future__ import annotations

import os

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import cuzarr
from _gpu_helpers import sample
from cuzarr.gpu.executor import HostExecutor
from cuzarr.storage import LocalStore, MemoryStore


@pytest.fixture
def emulate():
    HostExecutor.stats.clear()
    with cuzarr.config.set({"gpu.emulate": True}):
        yield HostExecutor.stats


def _data(shape, dtype, seed=0):
    return sample(shape, dtype, seed, offset=0)


SELECTIONS = [
    (slice(None), slice(None)),
    (slice(3, 40, 3), slice(None, None, -2)),
    (slice(None, None, -1), 5),
    (7, slice(2, 29)),
    (np.newaxis, slice(1, 9), Ellipsis),
    (slice(38, 3, -5), slice(30, 0, -7)),
]

def _v3(store, name, data, chunks, compressors, **kw):
    a = cuzarr.create_array(
        store, name=name, shape=data.shape, dtype=data.dtype, chunks=chunks,
        compressors=compressors, fill_value=0, **kw,
    )
    a[...] = data
    return a


def _check(a, data, emulate, selections=SELECTIONS):
    for sel in selections:
        with cuzarr.config.set({"gpu.emulate": False}):
            host = a[sel]
        got = a[sel]
        np.testing.assert_array_equal(got, data[sel])
        np.testing.assert_array_equal(got, host)
        assert np.asarray(got).dtype == np.asarray(host).dtype


V3_COMPRESSORS = [
    pytest.param(None, "copy", id="none"),
    pytest.param({"name": "zstd", "configuration": {"level": 1}}, "zstd", id="zstd"),
    pytest.param({"name": "gzip", "configuration": {"level": 3}}, "deflate", id="gzip"),
    pytest.param(
        {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                            "typesize": 4, "blocksize": 0}},
        "lz4", id="blosc-lz4-shuffle",
    ),
    pytest.param(
        {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                                            "typesize": 4, "blocksize": 512}},
        "zstd", id="blosc-zstd-shuffle-blocks",
    ),
    pytest.param(
        {"name": "blosc", "configuration": {"cname": "blosclz", "clevel": 5,
                                            "shuffle": "noshuffle", "typesize": 4,
                                            "blocksize": 0}},
        None, id="blosc-blosclz-host",
    ),
    pytest.param(numcodecs.LZ4(), "lz4", id="numcodecs-lz4"),
    pytest.param(numcodecs.Zlib(level=1), "deflate", id="numcodecs-zlib"),
    pytest.param(numcodecs.BZ2(), None, id="bz2-host"),
]


@pytest.mark.parametrize("compressor, stream", V3_COMPRESSORS)
@pytest.mark.parametrize("dtype", ["<f4", "<i2", "<c8"])
def test_v3_codecs(emulate, compressor, stream, dtype):
    # chunks of a few KiB: blosc stores smaller buffers uncompressed (memcpyed)
    data = _data((100, 61), dtype)
    a = _v3(MemoryStore(), "a", data, (40, 32), compressor)
    _check(a, data, emulate)
    assert emulate["batches"] > 0
    if stream is None:
        # (blosc stores incompressible blocks as plain copies, which the GPU takes)
        assert emulate["host_decoded"] > 0 and not any(
            k.startswith("stream:") and k != "stream:copy" for k in emulate
        )
    else:
        assert emulate[f"stream:{stream}"] > 0 and emulate["host_decoded"] == 0


@pytest.mark.parametrize("endian", ["big", "little"])
@pytest.mark.parametrize("dtype", ["u2", "f8", "c16", "i4"])
def test_v3_endianness(emulate, endian, dtype):
    """Big-endian stored bytes are swapped by the plan (swap unit: the item, or
    half of it for complex numbers)."""
    data = _data((20, 13), dtype)
    a = cuzarr.create_array(
        MemoryStore(), shape=data.shape, dtype=dtype, chunks=(6, 5),
        serializer={"name": "bytes", "configuration": {"endian": endian}},
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    _check(a, data, emulate, SELECTIONS[:4])
    assert emulate["stream:zstd"] > 0 and emulate["host_decoded"] == 0


def test_v3_host_fallbacks(emulate):
    """Pipelines the GPU does not decode (transpose, crc32c, other codecs) give the
    same answer through host decoding and one upload per batch."""
    data = _data((30, 22), "<f4")
    cases = [
        dict(filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}]),
        dict(compressors=[{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}]),
        dict(compressors=[numcodecs.Shuffle(elementsize=4)]),  # bytes->bytes, host only
    ]
    for i, kw in enumerate(cases):
        kw.setdefault("compressors", None)
        a = cuzarr.create_array(
            MemoryStore(), name=f"a{i}", shape=data.shape, dtype=data.dtype, chunks=(7, 6), **kw
        )
        a[...] = data
        _check(a, data, emulate, SELECTIONS[:3])
    assert emulate["host_decoded"] > 0
    assert not any(k.startswith("stream:") for k in emulate)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    "compressor, stream",
    [
        (None, "copy"),
        (numcodecs.Zstd(level=1), "zstd"),
        (numcodecs.Zlib(level=1), "deflate"),
        (numcodecs.GZip(level=1), "deflate"),
        (numcodecs.LZ4(), "lz4"),
        (numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE), "lz4"),
    ],
)
@pytest.mark.parametrize("dtype", [">i4", "<f8", "|u1"])
def test_v2_written_by_zarr_python(tmp_path, emulate, order, compressor, stream, dtype):
    """v2 arrays written by zarr-python (C and F chunk order, big-endian dtypes),
    read through the device path."""
    data = _data((33, 26), dtype, seed=3)
    z = zarr.create_array(
        str(tmp_path / "z"), shape=data.shape, dtype=dtype, chunks=(10, 8), zarr_format=2,
        order=order, compressors=compressor, fill_value=0,
    )
    z[...] = data
    z[:10, :8] = 0  # an all-fill chunk: zarr-python does not store it (missing)
    data = data.copy()
    data[:10, :8] = 0
    a = cuzarr.open_array(LocalStore(tmp_path / "z"), mode="r")
    _check(a, data, emulate)
    # (blosc stores chunks it cannot shrink as plain copies)
    assert emulate[f"stream:{stream}"] + emulate["stream:copy"] > 0
    assert emulate["host_decoded"] == 0


def test_missing_chunks_and_nan_fill(emulate):
    data = np.full((25, 25), np.nan, "<f8")
    a = cuzarr.create_array(MemoryStore(), shape=data.shape, dtype="<f8", chunks=(10, 10),
                            fill_value=np.nan)
    a[12:18, 3:7] = 1.5
    data[12:18, 3:7] = 1.5
    _check(a, data, emulate)


@pytest.mark.parametrize("index_location", ["start", "end"])
def test_sharded_partial_reads(emulate, index_location):
    """Inner chunks fetched by byte range go through the device path per batch."""
    data = _data((64, 48), "<u2")
    a = cuzarr.create_array(
        MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(8, 8), shards=(32, 24),
        compressors={"name": "zstd", "configuration": {"level": 1}},
        shard_index_location=index_location,
    ) if _has_index_location() else cuzarr.create_array(
        MemoryStore(), shape=data.shape, dtype=data.dtype, chunks=(8, 8), shards=(32, 24),
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    a[32:, 24:] = 0  # an empty shard
    data = data.copy()
    data[32:, 24:] = 0
    _check(a, data, emulate, [*SELECTIONS, (slice(5, 6), slice(9, 10)), (slice(None), 47)])
    assert emulate["stream:zstd"] > 0 and emulate["host_decoded"] == 0


@pytest.mark.parametrize("native_io", [True, False])
def test_whole_local_shards_with_unstored_inner_chunks(tmp_path, emulate, native_io,
                                                      monkeypatch):
    """Whole shards of a local store read into staging, some of their inner
    chunks not stored (all fill value): those read as the fill value, the
    others decode in place, with the C index rows or the numpy ones."""
    from cuzarr.runtime import native

    empties = []
    real = native.index_rows
    monkeypatch.setattr(native, "index_rows",
                        lambda *a: (lambda got: empties.append(got[3]) or got)(real(*a)))
    data = _data((64, 48), "<f4")
    data[8:16, 8:16] = 0  # one inner chunk of fill values: not stored
    data[32:40, :] = 0  # a row of them across two shards
    a = cuzarr.create_array(LocalStore(tmp_path / "s"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 8), shards=(32, 24), fill_value=0,
                            compressors={"name": "zstd", "configuration": {"level": 1}},
                            config={"write_empty_chunks": False})
    a[...] = data
    with cuzarr.config.set({"storage.native_io": native_io}):
        _check(a, data, emulate, [(slice(None), slice(None)), (slice(3, 60), slice(1, 47))])
    assert emulate["stream:zstd"] > 0 and emulate["host_decoded"] == 0
    assert (max(empties) > 0) if native_io else not empties


def test_whole_and_partial_local_shards_in_one_batch(tmp_path, emulate):
    """A batch of local shards some wanted whole (read into staging), some in
    part (byte ranges) and one not stored at all: the placed inner chunks and
    the others decode into the same output as numpy's."""
    data = _data((64, 48), "<f4")
    data[32:, :24] = 0  # a whole shard of fill values: not stored
    a = cuzarr.create_array(LocalStore(tmp_path / "s"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 8), shards=(32, 24), fill_value=0,
                            compressors={"name": "zstd", "configuration": {"level": 1}},
                            config={"write_empty_chunks": False})
    a[...] = data
    assert not (tmp_path / "s" / "c" / "1" / "0").exists()
    # (one read worker: two shards a batch, whole and partial ones together)
    with cuzarr.config.set({"gpu.read_workers": 1}):
        _check(a, data, emulate, [(slice(None), slice(0, 40)), (slice(0, 64), slice(20, 48))])
    assert emulate["stream:zstd"] > 0 and emulate["host_decoded"] == 0


def test_sampled_local_shards_missing_or_truncated(tmp_path, emulate):
    """Random samples of local shards (some read whole, the others' ranges,
    into one staging buffer): a shard not stored reads as the fill value; a
    truncated one raises ``CodecError`` naming its key."""
    data = _data((96, 16, 16), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "s"), shape=data.shape, dtype=data.dtype,
                            chunks=(1, 16, 16), shards=(8, 16, 16), fill_value=-1,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = data
    data = data.copy()
    (tmp_path / "s" / "c" / "3" / "0" / "0").unlink()  # samples 24-31
    data[24:32] = -1
    idx = np.random.default_rng(3).permutation(96)[:40]
    emulate.clear()
    (got,) = cuzarr.read_many([a.lazy[idx]])
    np.testing.assert_array_equal(got, data[idx])
    stored = int(np.count_nonzero((idx < 24) | (idx >= 32)))
    assert emulate["in_place"] == emulate["stream:zstd"] == stored
    shard = tmp_path / "s" / "c" / "5" / "0" / "0"  # samples 40-47
    raw = shard.read_bytes()
    shard.write_bytes(raw[:100] + raw[-(8 * 16 + 4):])  # the index kept, the chunks cut
    pick = np.array([41, 3, 60, 44])
    with pytest.raises(cuzarr.errors.CodecError, match="c/5/0/0"):
        cuzarr.read_many([a.lazy[pick]])


def _has_index_location():
    import inspect

    return "shard_index_location" in inspect.signature(cuzarr.create_array).parameters


def test_sharded_written_by_zarr_python(tmp_path, emulate):
    data = _data((40, 30), "<f4", seed=5)
    z = zarr.create_array(str(tmp_path / "s"), shape=data.shape, dtype=data.dtype,
                          chunks=(5, 6), shards=(20, 12), fill_value=0)
    z[...] = data
    a = cuzarr.open_array(LocalStore(tmp_path / "s"), mode="r")
    _check(a, data, emulate)
    assert emulate["stream:zstd"] > 0


def test_fancy_selections_take_the_fallback(emulate):
    data = _data((40, 35), "<i8")
    a = _v3(MemoryStore(), "a", data, (9, 8), {"name": "zstd", "configuration": {"level": 1}})
    rows = np.array([0, 39, 5, 5, 17])
    cols = np.array([34, 0, 8, 9, 16])
    np.testing.assert_array_equal(a.vindex[rows, cols], data[rows, cols])
    assert emulate["fancy"] > 0
    mask = data % 3 == 0
    np.testing.assert_array_equal(a.vindex[mask], data[mask])
    np.testing.assert_array_equal(a.oindex[rows, 3:20:4], data[rows][:, 3:20:4])
    np.testing.assert_array_equal(a[rows[:, None], cols[None, :]], data[rows[:, None], cols])
    np.testing.assert_array_equal(a.blocks[1:3, 2], data[9:27, 16:24])
    np.testing.assert_array_equal(a.get_mask_selection(mask), data[mask])


@pytest.mark.parametrize("sharded", [False, True])
def test_shuffled_sample_batches_take_the_batched_device_path(tmp_path, emulate, sharded):
    """A training batch (shuffled samples, one per chunk along axis 0, as
    ``ArrayDataset.read_batch`` reads it) is slices only per chunk: one batched
    device read (nvCOMP streams, one scatter), not the per-chunk fancy fallback."""
    data = _data((96, 16, 16), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype,
                            chunks=(1, 16, 16), shards=(8, 16, 16) if sharded else None,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = data
    emulate.clear()
    idx = np.random.default_rng(3).permutation(96)[:32]
    (got,) = cuzarr.read_many([a.lazy[idx]])
    np.testing.assert_array_equal(got, data[idx])
    assert emulate["stream:zstd"] == 32 and emulate["fancy"] == 0
    # every sample decoded where it was read (the shards' ranges read straight
    # into staging, as whole chunk files are): nothing packed
    assert emulate["in_place"] == 32
    # a run of samples stepping evenly through the batch is one slice as well
    np.testing.assert_array_equal(a.oindex[np.array([40, 2, 41, 3]), :], data[[40, 2, 41, 3]])


def test_out_views_and_read_many(emulate):
    data = _data((50, 40), "<f4")
    a = _v3(MemoryStore(), "a", data, (12, 9), {"name": "zstd", "configuration": {"level": 1}})
    out = np.zeros((20, 40), "<f4")
    a.get_basic_selection((slice(10, 30), slice(None)), out=out)
    np.testing.assert_array_equal(out, data[10:30])
    v = a.lazy[5:45:2][:, ::-3]
    np.testing.assert_array_equal(v.read(), data[5:45:2][:, ::-3])
    r1, r2 = cuzarr.read_many([a.lazy[0:20], a.lazy[10:30, 5:]])
    np.testing.assert_array_equal(r1, data[0:20])
    np.testing.assert_array_equal(r2, data[10:30, 5:])


def test_large_read_uses_big_batches(tmp_path, emulate):
    """A many-chunk read on a local store: batches of many chunks (one upload and
    one kernel launch each on a GPU), result identical."""
    data = _data((256, 256), "<u2")
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 16), compressors={"name": "zstd",
                                                          "configuration": {"level": 1}})
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    assert emulate["stream:zstd"] == 256
    assert emulate["batches"] <= 8


def test_corrupt_chunk_names_key(emulate):
    a = _v3(MemoryStore(), "a", _data((10, 10), "<f4"), (5, 5),
            {"name": "zstd", "configuration": {"level": 1}})
    store = a.store
    key = "a/c/1/0"
    raw = bytearray(cuzarr.runtime.sync.sync(store.get(key)))
    raw[0] ^= 0xFF  # break the zstd magic number
    cuzarr.runtime.sync.sync(store.set(key, bytes(raw)))
    with pytest.raises(cuzarr.errors.CodecError, match="a/c/1/0"):
        a[...]


@pytest.mark.parametrize("walker", ["native", "libzstd"])
def test_zstd_frames_walked_as_read_from_local_files(tmp_path, emulate, monkeypatch, walker):
    """Chunk files of a local store have their zstd frames walked as each one
    lands in the staging buffer (while its bytes are in cache: in the store's
    C loop, cuzarr.runtime.native, else by libzstd per chunk): every chunk of
    the batch is walked there, the read is right, and a chunk whose block
    header is broken (frame header intact) is caught by that walk and raises a
    CodecError naming its key."""
    from cuzarr.codecs import libzstd
    from cuzarr.gpu import reader as reader_module
    from cuzarr.runtime import native

    if walker == "libzstd" and not libzstd.available():
        pytest.skip("no system libzstd on this machine")
    if walker == "native" and not native.available():
        pytest.fail("cuzarr.runtime._native is not built (setup.py)")
    monkeypatch.setitem(cuzarr.config.config["storage"], "native_io", walker == "native")
    walked = []
    real = reader_module.DeviceReader.fetch_into

    def spy(self, get_into, keys, kind):
        got = real(self, get_into, keys, kind)
        walked.append(got.frames.copy())
        return got

    monkeypatch.setattr(reader_module.DeviceReader, "fetch_into", spy)
    data = _data((64, 64), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 64), compressors={"name": "zstd",
                                                          "configuration": {"level": 1}})
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    sizes = sorted(os.path.getsize(tmp_path / "c" / str(i) / "0") for i in range(4))
    assert sorted(int(f) for w in walked for f in w[:, 0]) == sizes
    path = tmp_path / "c" / "2" / "0"
    raw = bytearray(path.read_bytes())
    hdr = 4 + 1 + (0 if raw[4] & 0x20 else 1) + [0, 2, 4, 8][raw[4] >> 6]  # first block
    if raw[4] >> 6 == 0 and raw[4] & 0x20:
        hdr += 1
    raw[hdr] |= 0x06  # the first block's type made reserved (3)
    path.write_bytes(bytes(raw))
    with pytest.raises(cuzarr.errors.CodecError, match="c/2/0"):
        a[...]


def test_unsupported_dtypes_stay_on_host(emulate):
    """Strings and objects never take the device path (no plan for them)."""
    a = cuzarr.create_array(MemoryStore(), shape=(6,), dtype=str, chunks=(4,))
    a[...] = np.array(["a", "bb", "", "dddd", "é", "x"])
    assert list(a[...]) == ["a", "bb", "", "dddd", "é", "x"]
    assert emulate["batches"] == 0


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_slices_match_numpy(data):
    """Random shapes, chunks and slice selections (any step sign) through the
    device path, against numpy."""
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    arr = _data(shape, "<i4", seed=ndim)
    sel = tuple(
        slice(
            data.draw(st.one_of(st.none(), st.integers(-s - 2, s + 2))),
            data.draw(st.one_of(st.none(), st.integers(-s - 2, s + 2))),
            data.draw(st.sampled_from([None, 1, 2, 3, -1, -2, -5])),
        )
        for s in shape
    )
    a = cuzarr.create_array(MemoryStore(), shape=shape, dtype="<i4", chunks=chunks,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = arr
    with cuzarr.config.set({"gpu.emulate": True}):
        got = a[sel]
    np.testing.assert_array_equal(got, arr[sel])


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_layouts_and_routes_match_numpy(tmp_path_factory, data):
    """Random layouts (sharded or not, local or memory store, codec), routes
    (``gpu.gds``, sub-batch size) and selections (slices with any step, or a
    shuffled sample batch through ``read_many``) through the host twin of the
    device read, against numpy."""
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, 5)) for _ in range(ndim))
    shards = None
    if data.draw(st.booleans()):
        shards = tuple(c * data.draw(st.integers(1, 3)) for c in chunks)
    codec = data.draw(st.sampled_from([None, {"name": "zstd", "configuration": {"level": 1}},
                                       {"name": "numcodecs.lz4", "configuration": {}}]))
    local = data.draw(st.sampled_from([True, True, False]))  # (direct reads: local only)
    store = LocalStore(tmp_path_factory.mktemp("a")) if local else MemoryStore()
    arr = _data(shape, data.draw(st.sampled_from(["<f4", ">i4", "<i2"])), seed=ndim)
    a = cuzarr.create_array(store, shape=shape, dtype=arr.dtype, chunks=chunks, shards=shards,
                            compressors=codec)
    a[...] = arr
    conf = {"gpu.emulate": True, "gpu.gds": data.draw(st.sampled_from([True, True, False])),
            "gpu.sub_batch_bytes": data.draw(st.sampled_from([64, 4096, 1 << 20]))}
    if data.draw(st.booleans()):
        sel = tuple(slice(data.draw(st.one_of(st.none(), st.integers(-s, s))),
                          data.draw(st.one_of(st.none(), st.integers(-s, s))),
                          data.draw(st.sampled_from([None, 1, 2, -1, 3]))) for s in shape)
        with cuzarr.config.set(conf):
            got = a[sel]
        expected = arr[sel]
    else:
        idx = np.random.default_rng(data.draw(st.integers(0, 99))).permutation(shape[0])
        idx = idx[: data.draw(st.integers(1, shape[0]))]
        with cuzarr.config.set(conf):
            (got,) = cuzarr.read_many([a.lazy[idx]])
        expected = arr[idx]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("zarr_format, order", [(3, "C"), (2, "C"), (2, "F")])
def test_direct_file_reads(tmp_path, emulate, zarr_format, order):
    """``gpu.gds``: uncompressed chunks of a local store are read from their files
    into the staging slots by the executor (kvikio on a GPU; pread here)."""
    data = _data((40, 30), "<f8")
    kw = {"order": order} if zarr_format == 2 else {}
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 16), compressors=None, zarr_format=zarr_format, **kw)
    a[...] = data
    a[:16, :16] = 0  # chunk (0, 0) all fill: not stored, read as missing
    data = data.copy()
    data[:16, :16] = 0
    with cuzarr.config.set({"gpu.gds": True}):
        _check(a, data, emulate, SELECTIONS[:4])
    assert emulate["direct"] > 0 and not any(k.startswith("stream:") for k in emulate)
    # a truncated chunk file is refused, naming the key
    key = "c/1/1" if zarr_format == 3 else "1.1"
    path = tmp_path / "a" / key
    path.write_bytes(path.read_bytes()[:-8])
    with cuzarr.config.set({"gpu.gds": True}), pytest.raises(cuzarr.errors.CodecError,
                                                             match=key):
        a[...]


@pytest.mark.parametrize("codec", [{"name": "zstd", "configuration": {"level": 3}},
                                   {"name": "numcodecs.lz4", "configuration": {}}])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_direct_compressed_file_reads(tmp_path, emulate, codec, zarr_format):
    """``gpu.gds``: zstd and LZ4 chunk files of a local store go from disk to the
    device's direct area and are decoded there (no host buffer, no packing),
    in sub-batches; a truncated file is a ``CodecError`` naming its key; a
    ``gpu.untrusted`` store is never read that way."""
    data = _data((64, 48), "<f4")
    comp = codec if zarr_format == 3 else (
        numcodecs.Zstd(level=3) if codec["name"] == "zstd" else numcodecs.LZ4())
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 16), zarr_format=zarr_format, compressors=comp)
    a[...] = data
    a[:8, :16] = 0  # chunk (0, 0) all fill: not stored, read as missing
    data = data.copy()
    data[:8, :16] = 0
    conf = {"gpu.gds": True, "gpu.sub_batch_bytes": 2048}
    with cuzarr.config.set(conf):
        _check(a, data, emulate, SELECTIONS[:4])
        assert emulate["direct_src"] > 0 and emulate["sub_batches"] > emulate["batches"]
        emulate.clear()
        with cuzarr.config.set({"gpu.untrusted": True}):
            np.testing.assert_array_equal(a[...], data)
        assert emulate["direct_src"] == 0
    key = "c/3/2" if zarr_format == 3 else "3.2"
    path = tmp_path / "a" / key
    path.write_bytes(path.read_bytes()[:-8])  # truncated
    with cuzarr.config.set(conf), pytest.raises(cuzarr.errors.CodecError, match=key):
        a[...]


def test_direct_reads_of_chunks_too_large_for_nvcomp_decode_on_the_host(tmp_path, emulate,
                                                                       monkeypatch):
    """A zstd chunk decoding to more than nvCOMP's batch limit
    (``MAX_DEVICE_STREAM``) is not read to the device: read on the host and
    decoded there, the others of its batch still direct."""
    from cuzarr.gpu import batch

    monkeypatch.setattr(batch, "MAX_DEVICE_STREAM", 100)
    data = _data((64, 48), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 16), compressors={"name": "zstd",
                                                         "configuration": {"level": 1}})
    a[...] = data
    with cuzarr.config.set({"gpu.gds": True}):
        np.testing.assert_array_equal(a[...], data)
    assert emulate["host_decoded"] == 24 and emulate.get("direct_src", 0) == 0
    monkeypatch.setattr(batch, "MAX_DEVICE_STREAM", 16 << 20)
    emulate.clear()
    with cuzarr.config.set({"gpu.gds": True}):
        np.testing.assert_array_equal(a[...], data)
    assert emulate["direct_src"] == 24 and emulate["host_decoded"] == 0


@pytest.mark.parametrize("inner", [None, {"name": "zstd", "configuration": {"level": 3}}])
def test_direct_shard_reads(tmp_path, emulate, inner):
    """``gpu.gds`` True on a sharded local array: only the shard indexes are read
    on the host; each inner chunk is a byte range of its shard's file, read to
    the device (zstd: decoded there; uncompressed: straight into its slot)."""
    data = _data((64, 48), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(8, 16), shards=(16, 48), compressors=inner)
    a[...] = data
    a[16:24, 16:32] = 0  # one inner chunk all fill: not stored
    data = data.copy()
    data[16:24, 16:32] = 0
    with cuzarr.config.set({"gpu.gds": True, "gpu.sub_batch_bytes": 4096}):
        _check(a, data, emulate, SELECTIONS[:4])
        key = "direct_src" if inner else "direct"
        assert emulate[key] > 0 and emulate["in_place"] == 0
        # integer arrays (two rows of one inner chunk, out of order) decode on
        # the host, from bytes: no file references reach them
        rows = np.array([3, 1, 40, 17])
        np.testing.assert_array_equal(a.oindex[rows, :], data[rows])
        np.testing.assert_array_equal(cuzarr.read_many([a.lazy[rows]])[0], data[rows])
    if inner is None:
        return
    path = tmp_path / "a" / "c" / "0" / "0"
    raw = bytearray(path.read_bytes())
    raw[:4] = b"\0\0\0\0"  # the first inner chunk's zstd magic
    path.write_bytes(bytes(raw))
    with cuzarr.config.set({"gpu.gds": True}), pytest.raises(cuzarr.errors.CodecError,
                                                             match="c/0/0"):
        a[...]


def test_direct_reads_refuse_symlinks_out_of_root(tmp_path, emulate):
    import os

    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(8,), dtype="u1", chunks=(4,),
                            compressors=None)
    a[...] = np.arange(8, dtype="u1")
    outside = tmp_path / "outside"
    outside.write_bytes(b"\xff" * 4)
    os.remove(tmp_path / "a" / "c" / "1")
    os.symlink(outside, tmp_path / "a" / "c" / "1")
    with cuzarr.config.set({"gpu.gds": True}), pytest.raises(cuzarr.errors.StoreKeyError):
        a[...]


def test_enable_gpu_toggle_restores_stream():
    assert cuzarr.config.get("gpu.stream") is None
    with cuzarr.config.enable_gpu(stream=1234):
        assert cuzarr.config.get("buffer") == "gpu"
        assert cuzarr.config.get("gpu.stream") == 1234
    assert cuzarr.config.get("buffer") == "cpu" and cuzarr.config.get("gpu.stream") is None


@pytest.mark.parametrize("kind", ["regular", "sharded", "rectilinear"])
@pytest.mark.parametrize("stage_max", [None, 1])
def test_read_many_shared_chunks_staged(tmp_path, emulate, monkeypatch, kind, stage_max):
    """Several views sharing chunks, bound for the device: each unique chunk is
    decoded once by the device path into a staging array (split into several
    when ``STAGE_MAX`` is small) and copied from there into every view."""
    from cuzarr.core import lazy

    if stage_max is not None:
        monkeypatch.setattr(lazy, "STAGE_MAX", stage_max)
    data = _data((50, 41), "<i4")
    kw = {"compressors": {"name": "zstd", "configuration": {"level": 1}}, "fill_value": -7}
    if kind == "sharded":
        kw.update(chunks=(5, 8), shards=(10, 16))
    elif kind == "rectilinear":
        kw.update(chunks=[[10, 5, 20, 15], [8, 8, 25]])
    else:
        kw.update(chunks=(12, 9))
    a = cuzarr.create_array(LocalStore(tmp_path), shape=data.shape, dtype=data.dtype, **kw)
    a[...] = data
    a[40:50, :] = -7  # chunks equal to the fill: missing, read back as fill
    want = data.copy()
    want[40:50, :] = -7
    rows = np.array([3, 3, 49, 0, 17])
    views = [
        a.lazy[0:20],
        a.lazy[10:30, 5:],
        a.lazy[45:2:-3, ::-4],
        a.lazy.oindex[rows, 1:40:6],
        a.lazy.vindex[rows, np.array([0, 40, 2, 2, 9])],
        a.lazy[0:20],  # repeated: an independent copy
    ]
    before = emulate["stream:zstd"]
    got = cuzarr.read_many(views)
    expect = [
        want[0:20],
        want[10:30, 5:],
        want[45:2:-3, ::-4],
        want[rows][:, 1:40:6],
        want[rows, [0, 40, 2, 2, 9]],
        want[0:20],
    ]
    for g, e in zip(got, expect, strict=True):
        np.testing.assert_array_equal(g, e)
    assert not np.shares_memory(got[0], got[5])
    assert emulate["stream:zstd"] > before  # the device path decoded them


@pytest.mark.parametrize("compressor", [
    {"name": "gzip", "configuration": {"level": 5}},
    numcodecs.Zlib(level=1),
    numcodecs.LZ4(),
    {"name": "zstd", "configuration": {"level": 1}},
])
def test_corrupt_stream_body_raises_codec_error_naming_key(emulate, compressor):
    """A chunk whose compressed body is damaged (header intact) fails as on the
    host: a CodecError naming the key, never the decoder's own exception, and
    zlib / gzip chunks whose Adler-32 / CRC-32 do not match are not returned."""
    data = (np.arange(1200).reshape(40, 30) % 7).astype("<f4")  # compressible
    a = _v3(MemoryStore(), "a", data, (20, 15), compressor)
    store = a.store
    key = "a/c/1/0"
    good = cuzarr.runtime.sync.sync(store.get(key))
    raised = 0
    for pos in range(len(good) // 3, len(good) - 8, max(1, len(good) // 12)):
        raw = bytearray(good)
        raw[pos : pos + 4] = b"\xff\x00\xff\x00"
        cuzarr.runtime.sync.sync(store.set(key, bytes(raw)))
        with cuzarr.config.set({"gpu.emulate": False}):
            try:
                a[...]
            except cuzarr.errors.CodecError:
                pass
            else:
                continue  # the host decodes it too (e.g. a literal byte of lz4)
        with pytest.raises(cuzarr.errors.CodecError, match=key):
            a[...]
        raised += 1
    assert raised


@pytest.mark.parametrize("fmt, compressor, codec", [
    (3, {"name": "zstd", "configuration": {"level": 1}}, "zstd"),
    (3, {"name": "gzip", "configuration": {"level": 1}}, "deflate"),
    (3, {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}, "lz4"),
    (2, numcodecs.Zlib(1), "deflate"),
    (2, numcodecs.LZ4(), "lz4"),
    (3, None, "copy"),
])
def test_local_chunks_read_into_one_buffer_and_decoded_in_place(tmp_path, emulate, fmt,
                                                                compressor, codec):
    """A local store reads a batch's chunk files straight into one host buffer
    (pinned on a GPU), laid out so that each raw stream starts aligned for
    nvCOMP: every stream is decoded where it was read, with no packing copy."""
    data = _data((40, 30), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 8), zarr_format=fmt, fill_value=0,
                            compressors=compressor)
    a[...] = data
    a[16:32, 8:16] = 0  # one chunk all fill: not stored, read as missing
    data = data.copy()
    data[16:32, 8:16] = 0
    with cuzarr.config.set({"gpu.gds": False}):
        _check(a, data, emulate, SELECTIONS[:4])
    assert emulate[f"stream:{codec}"] > 0
    assert emulate["in_place"] == emulate[f"stream:{codec}"]
    assert emulate["host_decoded"] == 0


def test_get_into_reads_files_as_opened(tmp_path):
    """``SyncIO.get_into`` sizes each file through the descriptor it then reads:
    a file replaced or deleted between the size pass and the read comes back as
    it was when opened (a consistent snapshot, inside the caller's buffer)."""
    store = LocalStore(tmp_path)
    for k, v in (("a", b"1" * 10), ("b", b"2" * 20), ("c", b"3" * 30)):
        (tmp_path / k).write_bytes(v)
    seen = []

    def place(sizes):
        # (None, or -1 in an int64 array: missing)
        seen.append([None if n is None or n < 0 else int(n) for n in sizes])
        (tmp_path / "b.new").write_bytes(b"9" * 25)
        os.replace(tmp_path / "b.new", tmp_path / "b")
        (tmp_path / "c").unlink()
        return np.zeros(100, np.uint8), [0, 16, 48, -1]

    values, offsets = store.sync_io().get_into(["a", "b", "c", "missing"], place)
    assert seen == [[10, 20, 30, None]]
    assert list(offsets) == [0, 16, 48, -1]
    assert [bytes(v) for v in values[:3]] == [b"1" * 10, b"2" * 20, b"3" * 30]
    assert all(isinstance(v, memoryview) for v in values[:3]) and values[3] is None
    with pytest.raises(cuzarr.errors.StoreKeyError):
        store.sync_io().get_into(["../x"], place)
    # a place past the buffer's end: the value comes back as its own bytes
    values, offsets = store.sync_io().get_into(["a"], lambda sizes: (np.zeros(12, np.uint8), [4]))
    assert offsets == [-1] and values[0] == b"1" * 10


@pytest.mark.parametrize("native_io", [True, False])
def test_get_into_in_a_pinned_block_keeps_its_descriptors(tmp_path, native_io):
    """Within a pinned block (a sharded read's), ``get_into`` keeps the files it
    read open in the block: a later read of the same key in the block sees the
    file it read even if it was replaced meanwhile; they are closed when the
    block ends."""
    store = LocalStore(tmp_path)
    for k, v in (("a", b"1" * 10), ("b", b"2" * 20)):
        (tmp_path / k).write_bytes(v)
    sio = store.sync_io()
    store.sync_io().get_many(["a", "b"])  # (the keys' paths known to the store)
    before = len(os.listdir("/proc/self/fd"))

    def place(sizes):
        return np.zeros(64, np.uint8), [0, 16]

    with cuzarr.config.set({"storage.native_io": native_io}), sio.pinned():
        values, _ = sio.get_into(["a", "b"], place)
        assert [bytes(v) for v in values] == [b"1" * 10, b"2" * 20]
        (tmp_path / "b.new").write_bytes(b"9" * 20)
        os.replace(tmp_path / "b.new", tmp_path / "b")
        assert sio.get_many(["b"]) == [b"2" * 20]  # the pinned file, not the new one
        assert len(os.listdir("/proc/self/fd")) == before + 2
    assert len(os.listdir("/proc/self/fd")) == before
    assert sio.get_many(["b"]) == [b"9" * 20]


def test_get_into_beyond_held_descriptors_reads_changed_files_safely(tmp_path, monkeypatch):
    """Past ``HOLD_MAX`` keys, sizes come from ``stat``: a file that changes size
    before it is read comes back as its own (new) bytes, one deleted meanwhile
    as missing, the others inside the caller's buffer."""
    from cuzarr.storage.local import batchread

    monkeypatch.setattr(batchread, "HOLD_MAX", 1)
    store = LocalStore(tmp_path)
    for k, v in (("a", b"1" * 10), ("b", b"2" * 20), ("c", b"3" * 30)):
        (tmp_path / k).write_bytes(v)

    def place(sizes):
        assert sizes == [10, 20, 30, None]
        (tmp_path / "b").write_bytes(b"9" * 25)
        (tmp_path / "c").unlink()
        return np.zeros(100, np.uint8), [0, 16, 48, -1]

    values, offsets = store.sync_io().get_into(["a", "b", "c", "missing"], place)
    assert offsets == [0, -1, -1, -1]
    assert bytes(values[0]) == b"1" * 10 and isinstance(values[0], memoryview)
    assert values[1] == b"9" * 25 and values[2] is None and values[3] is None


@pytest.mark.parametrize("sharded", [False, True])
def test_read_workers_bound_the_threads_of_a_device_read(tmp_path, emulate, sharded,
                                                         monkeypatch):
    """``gpu.read_workers`` caps how many batches of one device read run at once
    (more threads than that contended on one GPU), independently of the codec
    pool's size."""
    import threading
    import time

    from cuzarr.core import engine

    # (a small array in batches of a few chunks, as a large one's are)
    monkeypatch.setattr(engine, "DEVICE_BATCH_MIN_BYTES", 0)

    data = _data((64, 64), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(4, 64), shards=(8, 64) if sharded else None,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    a[...] = data
    lock = threading.Lock()
    now = peak = 0
    run = HostExecutor.run

    def counted(self, batch, out, fill):
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        try:
            time.sleep(0.03)  # the allowed threads overlap (the old code's all did)
            return run(self, batch, out, fill)
        finally:
            with lock:
                now -= 1

    from cuzarr.gpu import executor

    executor._free.pop(("executors", None), None)
    HostExecutor.run = counted
    try:
        for workers, want in ((4, 2), (4, 1), (2, 4), (8, 2)):
            peak = 0
            with cuzarr.config.set({"threading.max_workers": workers,
                                    "gpu.read_workers": want}):
                np.testing.assert_array_equal(a[...], data)
            assert 1 <= peak <= min(workers, want), (workers, want, peak)
    finally:
        HostExecutor.run = run
    # executors are shared by whichever threads run batches: only as many are
    # made as ran at once, however many pool threads took part
    assert len(executor._free[("executors", None)]) == 2


def test_read_workers_leave_device_writes_batched_per_pool(tmp_path, emulate):
    """``gpu.read_workers`` is about reads: a device write still splits into
    batches for the whole codec pool (it set how many write batches there were,
    so a write ran on as few threads as a read)."""
    from cuzarr.gpu.writer import HostEncoder

    data = _data((64, 64), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(4, 64),
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    counts = {}
    for want in (1, 8):
        HostEncoder.stats.clear()
        with cuzarr.config.set({"threading.max_workers": 8, "gpu.read_workers": want}):
            a[...] = data
        counts[want] = HostEncoder.stats["batches"]
    assert counts[1] == counts[8] == 16, counts
    np.testing.assert_array_equal(a[...], data)


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_misplaced_chunks_are_packed_without_the_read_buffer(tmp_path, emulate, monkeypatch,
                                                             codec):
    """When no stream of a batch can be decoded where it was read (deflate
    streams off nvCOMP's 4-byte input grid here), the batch uploads only the
    copied streams, not the read buffer as well. zstd streams need no input
    alignment (nvCOMP >= 6.0): they decode where they lie, whatever the offset."""
    from cuzarr.gpu import executor, reader

    data = _data((64, 64), "<f4")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 64),
                            compressors={"name": codec, "configuration": {"level": 1}})
    a[...] = data
    stored = sum(p.stat().st_size for p in (tmp_path / "a" / "c").rglob("*") if p.is_file())

    def misplaced(sizes, kind, alloc=None):
        buf, offsets = executor.place_chunks(sizes, kind, alloc)
        big = (alloc or executor._empty_bytes)(len(buf) + 16)
        return big, [o + 1 if o >= 0 else o for o in offsets]  # off the 4-byte grid

    monkeypatch.setattr(reader, "place_chunks", misplaced)
    packed = []
    run = HostExecutor.run
    monkeypatch.setattr(HostExecutor, "run", lambda self, b, out, fill: (
        packed.append((b.packed.nbytes, b.in_place)), run(self, b, out, fill))[1])
    np.testing.assert_array_equal(a[...], data)
    if codec == "zstd":
        assert packed and all(n_in > 0 for _, n_in in packed)
        return
    assert packed and all(n_in == 0 for _, n_in in packed)
    assert sum(n for n, _ in packed) <= stored + 16 * 4


@pytest.mark.parametrize("compressors", [None, {"name": "zstd", "configuration": {"level": 1}}])
@pytest.mark.parametrize("gds", [True, False])
def test_fancy_reads_take_plain_bytes(tmp_path, emulate, monkeypatch, compressors, gds):
    """Fancy selections decode chunks on the host and scatter them: their chunks
    come as plain bytes, not as file references (``gpu.gds``: these had failed
    with "chunk holds 2 bytes") nor read into a host staging buffer that would
    never be uploaded."""
    from cuzarr.gpu import reader

    data = _data((40, 30), "<f8")
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype,
                            chunks=(16, 16), compressors=compressors)
    a[...] = data
    staged = []
    real = reader._ThreadExecutor.host_buffer
    monkeypatch.setattr(reader._ThreadExecutor, "host_buffer",
                        lambda self, n: staged.append(n) or real(self, n))
    rows, cols = [1, 5, 30, 39], [2, 20, 29, 0]
    with cuzarr.config.set({"gpu.gds": gds}):
        np.testing.assert_array_equal(a.vindex[rows, cols], data[rows, cols])
        np.testing.assert_array_equal(a.oindex[rows, cols], data[np.ix_(rows, cols)])
        assert emulate["fancy"] > 0 and not any(staged)
        # slice plans still stage (or read files directly: gds; uncompressed, zstd, LZ4)
        np.testing.assert_array_equal(a[2:35, 1:29], data[2:35, 1:29])
        np.testing.assert_array_equal(a[[3, 17, 33]], data[[3, 17, 33]])  # rows: slices per chunk
    assert any(staged) is not gds


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(0, 100)), max_size=30),
       st.sampled_from(["zstd", "lz4", "zlib", "gzip", "none", None]))
def test_place_chunks_aligns_every_first_stream(sizes, kind):
    """``place_chunks`` (vectorised): chunks in order, none overlapping, each
    one's first raw stream 16-byte aligned, missing ones at -1, no gap wider
    than the alignment, the buffer just long enough."""
    from cuzarr.gpu.batch import STREAM_HEAD, place_chunks

    head = STREAM_HEAD.get(kind or "", 0)
    buf, offsets = place_chunks(sizes, kind)
    end = 0
    for n, at in zip(sizes, offsets):
        if n is None:
            assert at == -1
            continue
        assert at >= end and (at + head) % 16 == 0 and at - end < 16
        end = at + n
    assert len(buf) == max(end, 1)


def test_get_into_sizes_special_files_as_before(tmp_path):
    """``get_into`` sizes files with lseek: a directory planted under a chunk key
    (lseek gives 2**63 - 1) still reads as missing, a regular file as itself."""
    store = LocalStore(tmp_path)
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "d").mkdir()
    seen = []

    def place(sizes):
        seen.append(list(sizes))
        return np.zeros(64, np.uint8), [0 if n is not None else -1 for n in sizes]

    values, offsets = store.sync_io().get_into(["a", "d"], place)
    assert seen == [[10, None]]
    assert bytes(values[0]) == b"x" * 10 and offsets == [0, -1] and values[1] is None
