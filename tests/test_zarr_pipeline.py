"""cuzarr's codec pipeline inside zarr-python (cuzarr.zarr_pipeline).

Arrays are written and read through zarr-python with the cuzarr pipeline
configured, on real local directories and zarr's MemoryStore, and checked
against numpy, cuzarr itself and tensorstore, in both directions.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.dtype import get_data_type_from_native_dtype

import cuzarr
from cuzarr.errors import CodecError
from cuzarr.zarr_pipeline import CuzarrCodecPipeline
from cuzarr.zarr_pipeline import jobs as jobs_module
from cuzarr.zarr_pipeline.jobs import ZarrReadJob, ZarrWriteJob

ts = pytest.importorskip("tensorstore")

PATH = "cuzarr.zarr_pipeline.CuzarrCodecPipeline"


@pytest.fixture
def cuzarr_pipeline():
    with zarr.config.set({"codec_pipeline.path": PATH}):
        yield


@pytest.fixture
def engine_calls(monkeypatch):
    """How many reads and writes went through cuzarr's engine jobs."""
    calls = {"read": 0, "write": 0}
    r_init, w_init = ZarrReadJob.__init__, ZarrWriteJob.__init__

    def r(self, *a, **k):
        calls["read"] += 1
        r_init(self, *a, **k)

    def w(self, *a, **k):
        calls["write"] += 1
        w_init(self, *a, **k)

    monkeypatch.setattr(ZarrReadJob, "__init__", r)
    monkeypatch.setattr(ZarrWriteJob, "__init__", w)
    return calls


CASES = {
    "zstd": dict(chunks=(16, 16), compressors=ZstdCodec(level=3)),
    "gzip-transpose": dict(
        chunks=(16, 8), filters=TransposeCodec(order=(1, 0)), compressors=GzipCodec()
    ),
    "blosc": dict(chunks=(32, 32), compressors=BloscCodec(cname="lz4")),
    "sharded": dict(chunks=(8, 8), shards=(32, 32), compressors=ZstdCodec()),
    "raw": dict(chunks=(10, 25), compressors=None),
}


def _data(shape, dtype):
    rng = np.random.default_rng(5)
    return (rng.random(shape) * 1000).astype(dtype)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["f4", "i2", "u8"])
def test_write_through_pipeline_read_everywhere(
    tmp_path, cuzarr_pipeline, engine_calls, case, dtype
):
    data = _data((70, 53), dtype)
    a = zarr.create_array(tmp_path, shape=data.shape, dtype=dtype, fill_value=0, **CASES[case])
    assert isinstance(a._async_array.codec_pipeline, CuzarrCodecPipeline)
    a[:] = data
    data[3:40, 5:7] = 7  # a read-modify-write of partial chunks
    a[3:40, 5:7] = 7
    assert engine_calls["write"] >= 2
    assert np.array_equal(a[:], data)
    assert np.array_equal(a[[0, 9, 69], 2:50:3], data[[0, 9, 69], 2:50:3])
    assert engine_calls["read"] >= 2
    assert np.array_equal(cuzarr.open_array(str(tmp_path), mode="r")[:], data)
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path)}}).result()
    assert np.array_equal(t.read().result(), data)


@pytest.mark.parametrize("case", sorted(CASES))
def test_written_elsewhere_read_through_pipeline(tmp_path, cuzarr_pipeline, engine_calls, case):
    data = _data((70, 53), "f8")
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        zarr.create_array(tmp_path / "z", shape=data.shape, dtype="f8", **CASES[case])[:] = data
    c = cuzarr.create_array(str(tmp_path / "c"), shape=data.shape, dtype="f8", chunks=(16, 16))
    c[:] = data
    t = ts.open(
        {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": str(tmp_path / "t")},
            "metadata": {
                "shape": list(data.shape),
                "data_type": "float64",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 16]}},
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 1}}],
            },
            "create": True,
        }
    ).result()  # fmt: skip
    t.write(data).result()
    for name in ("z", "c", "t"):
        got = zarr.open_array(tmp_path / name, mode="r")
        assert np.array_equal(got[:], data)
        assert np.array_equal(got[5:9, 50], data[5:9, 50])
    assert engine_calls["read"] >= 6


def test_bit_identical_chunks_with_default_pipeline(tmp_path, cuzarr_pipeline):
    """The stored chunks are the bytes zarr-python's own pipeline writes."""
    data = _data((64, 64), "f4")
    for name, path in (
        ("cuzarr", PATH),
        ("default", "zarr.core.codec_pipeline.BatchedCodecPipeline"),
    ):
        with zarr.config.set({"codec_pipeline.path": path}):
            zarr.create_array(tmp_path / name, shape=data.shape, dtype="f4",
                              chunks=(16, 16), compressors=ZstdCodec(level=1))[:] = data  # fmt: skip
    for f in sorted((tmp_path / "default").rglob("c/*/*")):
        other = tmp_path / "cuzarr" / f.relative_to(tmp_path / "default")
        assert other.read_bytes() == f.read_bytes()


def test_memory_store_missing_and_empty_chunks(cuzarr_pipeline, engine_calls):
    store = zarr.storage.MemoryStore()
    a = zarr.create_array(store, shape=(40,), chunks=(10,), dtype="i4", fill_value=-1)
    a[12:18] = 3
    assert sorted(k for k in store._store_dict if k.startswith("c/")) == ["c/1"]
    expect = np.full(40, -1, "i4")
    expect[12:18] = 3
    assert np.array_equal(a[:], expect)
    a[10:20] = -1  # back to the fill value: the chunk is deleted, as zarr-python does
    assert not [k for k in store._store_dict if k.startswith("c/")]
    assert engine_calls["write"] == 2 and engine_calls["read"] == 1


def test_v2_array(tmp_path, cuzarr_pipeline, engine_calls):
    data = _data((30, 20), "i8")
    a = zarr.create_array(tmp_path, shape=data.shape, chunks=(7, 6), dtype="i8", zarr_format=2)
    a[:] = data
    assert np.array_equal(a[:], data)
    assert np.array_equal(cuzarr.open_array(str(tmp_path), mode="r")[:], data)
    assert engine_calls["read"] and engine_calls["write"]


def test_scalar_and_dropped_axes(tmp_path, cuzarr_pipeline):
    data = _data((20, 30, 4), "f4")
    a = zarr.create_array(tmp_path, shape=data.shape, chunks=(6, 7, 4), dtype="f4")
    a[:] = data
    assert a[5, 6, 2] == data[5, 6, 2]
    assert np.array_equal(a[5, :, 1], data[5, :, 1])
    a[3, 2:20, 0] = np.arange(18)
    data[3, 2:20, 0] = np.arange(18)
    a[7] = 1.5
    data[7] = 1.5
    assert np.array_equal(a[:], data)


class _Unknown(GzipCodec):
    """A codec cuzarr does not know (its own name)."""

    def to_dict(self):
        return {"name": "x_unknown_gzip", "configuration": {"level": self.level}}


def test_unknown_codec_falls_back(cuzarr_pipeline, caplog):
    pipe = CuzarrCodecPipeline.from_codecs([zarr.codecs.BytesCodec(), _Unknown()])
    spec = ArraySpec(
        shape=(4,),
        dtype=get_data_type_from_native_dtype(np.dtype("i4")),
        fill_value=np.int32(0),
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    with caplog.at_level(logging.DEBUG, logger="cuzarr.zarr_pipeline"):
        evolved = pipe.evolve_from_array_spec(spec)
    assert evolved.translated is None
    assert "zarr-python's pipeline" in caplog.text
    with (
        zarr.config.set({"codec_pipeline.strict": True}),
        pytest.raises(CodecError, match="x_unknown"),
    ):
        pipe.evolve_from_array_spec(spec)


def test_sharding_inner_pipeline_is_zarrs(tmp_path, cuzarr_pipeline):
    """zarr's sharding codec builds its inner pipeline with from_codecs alone:
    that one goes to zarr-python's pipeline, and the shards still round-trip."""
    data = _data((16, 16), "u2")
    a = zarr.create_array(tmp_path, shape=data.shape, chunks=(4, 4), shards=(8, 8), dtype="u2")
    a[:] = data
    codec = next(c for c in a._async_array.codec_pipeline if isinstance(c, ShardingCodec))
    assert codec is not None
    assert np.array_equal(a[1:15, 3], data[1:15, 3])


SHARD_SELECTIONS = [
    (slice(3, 9), slice(40, 47)),
    (5, slice(None)),
    (slice(0, 64, 5), 17),
    (np.array([1, 2, 60]), slice(10, 12)),
    (slice(30, 34), np.array([0, 3, 63])),
    (slice(63, 64), slice(63, 64)),
]


@pytest.mark.parametrize("index_location", ["start", "end"])
def test_partial_shard_reads(tmp_path, cuzarr_pipeline, index_location):
    data = _data((64, 64), "i4")
    codec = ShardingCodec(
        chunk_shape=(4, 4), codecs=[zarr.codecs.BytesCodec(), ZstdCodec()],
        index_location=index_location,
    )  # fmt: skip
    a = zarr.create_array(tmp_path, shape=data.shape, dtype="i4", chunks=(64, 64),
                          serializer=codec, compressors=None, fill_value=-7)  # fmt: skip
    a[:] = data
    a[0:4, 0:4] = -7  # an inner chunk of fill: not stored
    data[0:4, 0:4] = -7
    for sel in SHARD_SELECTIONS:
        assert np.array_equal(a[sel], data[sel]), sel
    assert np.array_equal(a.oindex[[0, 2, 50], [1, 63]], data[np.ix_([0, 2, 50], [1, 63])])
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path)}}).result()
    assert np.array_equal(t.read().result(), data)


class _RecordingStore(zarr.storage.MemoryStore):
    """zarr's MemoryStore, recording the byte ranges asked of it."""

    def __init__(self):
        super().__init__()
        self.gets = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append((key, byte_range))
        return await super().get(key, prototype, byte_range)


def test_partial_shard_read_fetches_ranges(cuzarr_pipeline, engine_calls):
    store = _RecordingStore()
    data = _data((128, 128), "u2")
    a = zarr.create_array(store, shape=data.shape, dtype="u2", chunks=(8, 8), shards=(128, 128))
    a[:] = data
    store.gets.clear()
    assert np.array_equal(a[10:12, 100:101], data[10:12, 100:101])
    ranged = [r for k, r in store.gets if k == "c/0/0" and r is not None]
    # the index, then the one inner chunk (zarr's MemoryStore.getsize, asked
    # for the index check, gets the value too: that is no read of a file)
    assert [type(r).__name__ for r in ranged] == ["SuffixByteRequest", "RangeByteRequest"]
    assert ranged[1].end - ranged[1].start < 1000
    assert engine_calls["read"] == 1


def test_partial_shard_writes_keep_untouched_chunks(tmp_path, cuzarr_pipeline):
    data = _data((32, 32), "f8")
    a = zarr.create_array(tmp_path, shape=(30, 30), dtype="f8", chunks=(4, 4), shards=(16, 16),
                          config={"write_empty_chunks": True})  # fmt: skip
    a[:] = data[:30, :30]
    a[5:7, 20:29] = 0.0
    data[5:7, 20:29] = 0.0
    assert np.array_equal(a[:], data[:30, :30])
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        b = zarr.create_array(tmp_path / "z", shape=(30, 30), dtype="f8", chunks=(4, 4),
                              shards=(16, 16), config={"write_empty_chunks": True})  # fmt: skip
        b[:] = _data((32, 32), "f8")[:30, :30]
        b[5:7, 20:29] = 0.0
    for f in sorted((tmp_path / "z").rglob("c/*/*")):
        mine = tmp_path / f.relative_to(tmp_path / "z")
        assert mine.read_bytes() == f.read_bytes(), f


def test_subchunk_write_order_goes_to_zarr(tmp_path, cuzarr_pipeline):
    """zarr's sharding option beyond the JSON (inner chunk layout) is zarr's to honour."""
    data = _data((8, 8), "u1")
    codec = ShardingCodec(chunk_shape=(4, 4), subchunk_write_order="lexicographic")
    a = zarr.create_array(tmp_path, shape=(8, 8), dtype="u1", chunks=(8, 8), serializer=codec,
                          compressors=None)  # fmt: skip
    assert a._async_array.codec_pipeline.translated is None
    a[:] = data
    assert np.array_equal(a[:], data)


def test_shrunk_shard_keeps_cells_beyond_shape(cuzarr_pipeline, engine_calls):
    """zarr-python's rule: a write to a shard cut by the array's end keeps the
    inner chunks past the end, which come back when the array grows."""
    a = zarr.create_array({}, shape=(8,), chunks=(2,), shards=(8,), dtype="i2", fill_value=0)
    a[:] = np.arange(1, 9)
    a.resize((3,))
    a[:] = [9, 9, 9]
    a.resize((8,))
    assert a[:].tolist() == [9, 9, 9, 4, 5, 6, 7, 8]
    assert engine_calls["write"] == 2


@pytest.mark.parametrize("case", ["zstd", "raw", "gzip-transpose", "sharded"])
def test_device_read_path_emulated(tmp_path, cuzarr_pipeline, case, monkeypatch):
    """Reads through cuzarr's device reader (its host twin, ``gpu.emulate``):
    the code a CuPy output of ``zarr.config.enable_gpu()`` runs, bar the kernels."""
    used = []
    real = jobs_module.device_reader_for

    def spy(*a, **k):
        r = real(*a, **k)
        used.append(r is not None)
        return r

    monkeypatch.setattr(jobs_module, "device_reader_for", spy)
    data = _data((70, 53), "f4")
    a = zarr.create_array(tmp_path, shape=data.shape, dtype="f4", fill_value=-1, **CASES[case])
    a[:] = data
    a[0:16, 0:16] = -1  # a chunk (an inner chunk) of fill: not stored
    data[0:16, 0:16] = -1
    with cuzarr.config.set({"gpu.emulate": True}):
        assert np.array_equal(a[:], data)
        assert np.array_equal(a[3:60:2, 7:50], data[3:60:2, 7:50])
        assert np.array_equal(a.oindex[[1, 40, 69], :], data[[1, 40, 69], :])
    assert any(used) == (case != "sharded")  # sharded reads plan their shards on the host


def test_large_chunks_decode_into_output(tmp_path, cuzarr_pipeline, monkeypatch):
    """Whole 512 KiB zstd chunks are decompressed straight into zarr's output
    (one by one, each by the C call of ``core.together``); the edge chunk
    takes the one-chunk path."""
    from cuzarr.codecs.pipeline import V3Pipeline

    landed, one_by_one = [], []
    real_into = V3Pipeline.decode_chunks_into
    real_one = jobs_module.ZarrReadJob._decode_in_place

    def into(self, datas, *args):
        done = real_into(self, datas, *args)
        landed.extend(done.tolist())
        return done

    def one(self, i, data):
        ok = real_one(self, i, data)
        one_by_one.append(ok)
        return ok

    monkeypatch.setattr(V3Pipeline, "decode_chunks_into", into)
    monkeypatch.setattr(jobs_module.ZarrReadJob, "_decode_in_place", one)
    data = _data((300, 256), "f8")
    a = zarr.create_array(tmp_path, shape=data.shape, dtype="f8", chunks=(256, 256),
                          compressors=ZstdCodec(level=1))  # fmt: skip
    a[:] = data
    assert np.array_equal(a[:], data)  # one whole chunk in place, the edge one not
    assert landed == [True] and one_by_one == [False]
    assert np.array_equal(a[0:256, :][5], data[5])


@pytest.mark.parametrize("chunks", [(8, 16), (128, 256)])  # 1 KiB and 256 KiB of f8
@pytest.mark.parametrize("where", ["local", "memory"])
def test_whole_chunks_of_a_batch_decode_together(tmp_path, cuzarr_pipeline, monkeypatch,
                                                 chunks, where):
    """Whole zstd chunks of a batch are decoded into zarr's output by one call
    (``core.together``), edge, partial and missing chunks one by one; the same
    answers as the default pipeline, and a corrupt chunk among them is named."""
    from cuzarr.codecs.pipeline import V3Pipeline

    calls = []
    real = V3Pipeline.decode_chunks_into

    def counted(self, datas, *args):
        calls.append(len(datas))
        return real(self, datas, *args)

    monkeypatch.setattr(V3Pipeline, "decode_chunks_into", counted)
    store = tmp_path / "a" if where == "local" else zarr.storage.MemoryStore()
    data = _data((300, 700), "f8")
    a = zarr.create_array(store, shape=data.shape, dtype="f8", chunks=chunks,
                          compressors=ZstdCodec(level=1), fill_value=-1.0)
    a[:] = data
    a[chunks[0] : 2 * chunks[0], 0 : chunks[1]] = -1.0  # all fill: not stored
    expect = data.copy()
    expect[chunks[0] : 2 * chunks[0], 0 : chunks[1]] = -1.0
    b = zarr.open_array(store, mode="r")
    for sel in [np.s_[:], np.s_[3:297, 5:690], np.s_[::3, 1:], np.s_[7]]:
        assert np.array_equal(b[sel], expect[sel])
    assert calls and max(calls) > 1
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        assert np.array_equal(zarr.open_array(store, mode="r")[:], expect)
    key = "c/1/1"
    if where == "local":
        (tmp_path / "a" / "c" / "1" / "1").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    else:
        import asyncio

        from zarr.core.buffer import cpu

        asyncio.run(store.set(key, cpu.Buffer.from_bytes(b"\x28\xb5\x2f\xfd garbage")))
    with pytest.raises(CodecError, match=key):
        zarr.open_array(store, mode="r")[:]


def test_large_chunks_read_one_by_one_into_a_reused_buffer(tmp_path, cuzarr_pipeline,
                                                          monkeypatch):
    """Chunks of 512 KiB and more are fetched one per batch into the local
    store's reused buffer (no fresh buffer per chunk), as the engine's own
    reads; every chunk still lands right, the edge ones and partial selections
    included, whichever thread read the chunk before."""
    import dataclasses

    from cuzarr.storage.local.store import LocalStore

    fetched = []
    real = LocalStore.sync_io

    def spy(self):
        sio = real(self)
        if sio is not None and sio.get_reused is not None:
            inner = sio.get_reused

            def get_reused(key):
                fetched.append(key)
                return inner(key)

            sio = dataclasses.replace(sio, get_reused=get_reused)
        return sio

    monkeypatch.setattr(LocalStore, "sync_io", spy)
    data = _data((1100, 300), "f8")
    a = zarr.create_array(tmp_path, shape=data.shape, dtype="f8", chunks=(256, 300),
                          compressors=ZstdCodec(level=1))  # fmt: skip
    a[:] = data
    b = zarr.open_array(tmp_path, mode="r")
    assert np.array_equal(b[:], data)
    assert sorted(fetched) == [f"c/{i}/0" for i in range(5)]
    assert np.array_equal(b[100:1000, 7:299], data[100:1000, 7:299])
    assert np.array_equal(b[::3, 5], data[::3, 5])


def test_xarray_round_trip(tmp_path, cuzarr_pipeline, engine_calls):
    """xarray's to_zarr / open_zarr, unchanged, run on cuzarr's engine."""
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {"t": (("time", "x"), rng.normal(size=(12, 30)).astype("f4"))},
        coords={"time": np.arange(12), "x": np.linspace(0, 1, 30)},
    )
    ds.to_zarr(tmp_path / "d.zarr", encoding={"t": {"chunks": (5, 7)}}, zarr_format=3,
               consolidated=False)  # fmt: skip
    back = xr.open_zarr(tmp_path / "d.zarr", consolidated=False)
    xr.testing.assert_identical(back.load(), ds)
    assert engine_calls["write"] and engine_calls["read"]
    got = cuzarr.open_array(str(tmp_path / "d.zarr" / "t"), mode="r")[:]
    assert np.array_equal(got, ds.t.values)


@pytest.mark.parametrize("part", [1, 3000, 1 << 20])
def test_sharded_reads_run_the_engines_shard_reader(tmp_path, cuzarr_pipeline, monkeypatch, part):
    """Shards are read by the engine's ShardReader: local ones a part at a
    time (parts smaller than one inner chunk included); whole shards land in
    zarr's output in place; missing shards and inner chunks read as the fill
    value (a missing shard reported missing to zarr-python); a shard cut short
    is an error naming it."""
    from cuzarr.core import shards as core_shards

    monkeypatch.setattr(core_shards, "LOCAL_RANGE_MAX", part)
    planned = []
    real_plan = core_shards.ShardReader.plan

    def spy(self, wants, *a, **k):
        planned.append((self.in_parts, [w.whole for w in wants]))
        return real_plan(self, wants, *a, **k)

    monkeypatch.setattr(core_shards.ShardReader, "plan", spy)
    data = (np.arange(96 * 80, dtype="i4").reshape(96, 80) * 7) % 1013
    a = zarr.create_array(tmp_path, shape=data.shape, chunks=(16, 16), shards=(48, 32),
                          dtype="i4", fill_value=-1)  # fmt: skip
    a[...] = data
    a[16:32, 0:16] = -1  # an inner chunk equal to the fill: not stored
    a[48:96, 64:80] = -1  # a whole (edge) shard of fill: not stored
    want = data.copy()
    want[16:32, 0:16] = -1
    want[48:96, 64:80] = -1
    assert not (tmp_path / "c" / "1" / "2").exists()
    planned.clear()
    assert np.array_equal(a[...], want)
    assert planned and all(in_parts for in_parts, _ in planned)
    for sel in [np.s_[5:90:3, 3:70:2], np.s_[47:49, 60:70], np.s_[50, :], np.s_[0:0, :]]:
        assert np.array_equal(a[sel], want[sel]), sel
    assert np.array_equal(a.oindex[[0, 50, 95], [1, 79]], want[np.ix_([0, 50, 95], [1, 79])])
    assert np.array_equal(a.vindex[[0, 50, 95], [1, 79, 3]], want[[0, 50, 95], [1, 79, 3]])
    strict = zarr.open_array(tmp_path, mode="r", config={"read_missing_chunks": False})
    with pytest.raises(zarr.errors.ChunkNotFoundError, match="c/1/2"):
        strict[60:70, 70:75]
    shard = tmp_path / "c" / "1" / "1"
    raw = shard.read_bytes()
    shard.write_bytes(raw[:100] + raw[-(16 * 6 + 4) :])  # data gone, index kept
    with pytest.raises(CodecError, match="c/1/1"):
        a[...]


def test_sharded_reads_from_zarrs_memory_store(cuzarr_pipeline):
    """Shards in zarr's MemoryStore (no blocking I/O): wholly wanted ones in
    one request, the others index first; 0-d shards too."""
    data = _data((40, 40), "f4")
    a = zarr.create_array({}, shape=data.shape, chunks=(5, 5), shards=(20, 20), dtype="f4")
    a[:] = data
    assert np.array_equal(a[:], data)
    assert np.array_equal(a[3:37:4, ::3], data[3:37:4, ::3])
    assert np.array_equal(a[[2, 30], 7], data[[2, 30], 7])
    z = zarr.create_array({}, shape=(), dtype="i4", serializer=ShardingCodec(chunk_shape=()),
                          compressors=None, fill_value=3)  # fmt: skip
    assert z[()] == 3
    z[()] = 5
    assert z[()] == 5


def test_shard_cut_by_the_array_end_reads_its_inner_chunks_inside(cuzarr_pipeline):
    """zarr-python calls the selection of a shard cut by the array's end
    complete; only the inner chunks inside the array are read of it."""
    store = _RecordingStore()
    a = zarr.create_array(store, shape=(40,), chunks=(4,), shards=(32,), dtype="i2", fill_value=0)
    a[:] = np.arange(40)
    store.gets.clear()
    assert a[:].tolist() == list(range(40))
    # (zarr's MemoryStore.getsize, asked for the index check, gets the value:
    # no read of a file)
    ranged = [r for k, r in store.gets if k == "c/1" and r is not None]
    # the index, then one range: the two inner chunks inside (8 of 32 elements)
    assert [type(r).__name__ for r in ranged] == ["SuffixByteRequest", "RangeByteRequest"]


def _random_selection(rng, shape):
    """A basic, orthogonal or coordinate selection of an array of ``shape``,
    with its kind."""
    kind = rng.choice(["basic", "oindex", "vindex"])
    if kind == "vindex":
        n = int(rng.integers(1, 20))
        return kind, tuple(rng.integers(0, s, n) for s in shape)
    sel = []
    for s in shape:
        pick = rng.integers(0, 3 if kind == "oindex" else 2)
        if pick == 0:
            a = int(rng.integers(0, s))
            sel.append(slice(a, int(rng.integers(a, s + 1)), int(rng.integers(1, 4))))
        elif pick == 1:
            sel.append(int(rng.integers(0, s)))
        else:
            sel.append(np.unique(rng.integers(0, s, int(rng.integers(1, 6)))))
    return kind, tuple(sel)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_sharded_reads_match_numpy_on_random_selections(tmp_path, cuzarr_pipeline, where):
    """Shards read through the engine's shard reader, whole or in part, into
    zarr's output or a box: random arrays and selections against numpy."""
    rng = np.random.default_rng(11)
    for case in range(12):
        ndim = int(rng.integers(1, 4))
        inner = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
        shard = tuple(c * int(rng.integers(1, 4)) for c in inner)
        shape = tuple(int(rng.integers(1, 3 * s + 2)) for s in shard)
        data = rng.integers(0, 50, shape).astype("i4")
        data[data < 10] = -1  # some inner chunks all fill (not stored)
        store = tmp_path / str(case) if where == "local" else {}
        a = zarr.create_array(store, shape=shape, chunks=inner, shards=shard, dtype="i4",
                              fill_value=-1)  # fmt: skip
        a[...] = data
        for _ in range(8):
            kind, sel = _random_selection(rng, shape)
            if kind == "vindex":
                got, want = a.vindex[sel], data[sel]
            elif kind == "oindex":
                got = a.oindex[sel]
                want = data[np.ix_(*[np.atleast_1d(np.arange(n)[s]) for s, n in zip(sel, shape)])]
                want = want.reshape(got.shape)
            else:
                got, want = a[sel], data[sel]
            assert np.array_equal(got, want), (case, shape, inner, shard, kind, sel)


def test_corrupt_inner_chunk_of_a_shard_names_the_shard(tmp_path, cuzarr_pipeline):
    """A shard's inner chunks are decoded together in C where they can be; one
    that is corrupt still raises a CodecError naming its shard, and the others
    read right."""
    data = _data((32, 32), "f4")
    a = zarr.create_array(tmp_path, shape=data.shape, chunks=(8, 8), shards=(16, 32),
                          dtype="f4")  # fmt: skip
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    shard = tmp_path / "c" / "1" / "0"
    raw = bytearray(shard.read_bytes())
    raw[0] ^= 0xFF  # the first inner chunk's zstd magic (the index is at the end)
    shard.write_bytes(bytes(raw))
    with pytest.raises(CodecError, match="c/1/0"):
        a[...]
    np.testing.assert_array_equal(a[:16], data[:16])
