"""The per-batch device read pipeline, on the host twin (``gpu.emulate``):
whole local shards staged in one buffer with their inner chunks decoded where
they lie, the staging pool, the ``gpu.untrusted`` route and the fallback when
nvCOMP is missing. Arrays are written by zarr-python (the oracle) and compared
with numpy."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import zarr
from zarr.codecs.numcodecs import LZ4

import cuzarr
from cuzarr.errors import CodecError
from cuzarr.gpu import reader
from cuzarr.gpu.executor import HostExecutor
from cuzarr.gpu.staging import HostStaging
from cuzarr.storage import LocalStore

ZSTD = {"name": "zstd", "configuration": {"level": 1}}


@pytest.fixture
def emulate():
    HostExecutor.stats.clear()
    with cuzarr.config.set({"gpu.emulate": True}):
        yield HostExecutor.stats


def _data(shape):
    rng = np.random.default_rng(3)
    return np.cumsum(rng.standard_normal(shape), axis=-1).astype("<f4").round(2)


def _zarr_sharded(path, data, compressors, missing=()):
    z = zarr.create_array(str(path), shape=data.shape, chunks=(4, 8), shards=(8, 16),
                          dtype=data.dtype, compressors=compressors, fill_value=-1)
    z[...] = data
    want = data.copy()
    for r, c in missing:  # inner chunks written as fill: absent from their shard
        z[r * 4 : (r + 1) * 4, c * 8 : (c + 1) * 8] = -1
        want[r * 4 : (r + 1) * 4, c * 8 : (c + 1) * 8] = -1
    return want


@pytest.mark.parametrize("codec", ["zstd", "lz4", None])
@pytest.mark.parametrize("sel", [(slice(None), slice(None)), (slice(3, 30, 2), slice(None, None, -3))])
def test_sharded_reads_decode_inner_chunks_in_place(tmp_path, emulate, codec, sel):
    data = _data((32, 48))
    comp = {"zstd": [ZSTD], "lz4": [LZ4()], None: None}[codec]
    want = _zarr_sharded(tmp_path / "a", data, comp, missing=[(1, 2)])
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(a[sel], want[sel])
    # every present inner chunk of a whole-shard read decoded where it was read
    assert emulate["in_place"] > 0 and emulate["host_decoded"] == 0


def test_sharded_corrupt_inner_chunk_names_its_shard(tmp_path, emulate):
    data = _data((16, 32))
    _zarr_sharded(tmp_path / "a", data, [ZSTD])
    path = tmp_path / "a" / "c" / "0" / "1"
    raw = bytearray(path.read_bytes())
    raw[5] ^= 0xFF  # the first inner chunk's frame header
    path.write_bytes(bytes(raw))
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    with pytest.raises(CodecError, match="c/0/1"):
        a[...]
    # the other shard still reads
    np.testing.assert_array_equal(a[0:8, 0:16], data[0:8, 0:16])


def test_staging_pool_reuses_blocks():
    pool = HostStaging(keep_bytes=8 << 20)
    a = pool.take(3 << 20)
    block = a.base
    pool.give(a)
    pool.give(a)  # twice: kept once
    b = pool.take(2 << 20 | 5)
    assert b.base is block and len(b) == (2 << 20 | 5)
    c = pool.take(3 << 20)
    assert c.base is not block
    pool.give(np.empty(5 << 20, np.uint8))  # not lent by the pool: ignored
    pool.give(b)
    pool.give(c)
    assert pool._held == 8 << 20
    pool.give(pool.take(16 << 20))  # over keep_bytes: dropped
    assert pool._held <= 8 << 20


def test_untrusted_decodes_on_the_host(tmp_path, emulate):
    data = _data((24, 40))
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(8, 8),
                          dtype=data.dtype, compressors=[ZSTD])
    z[...] = data
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    with cuzarr.config.set({"gpu.untrusted": True}):
        np.testing.assert_array_equal(a[2:20, ::3], data[2:20, ::3])
    assert emulate["host_decoded"] > 0 and not emulate["stream:zstd"]
    HostExecutor.stats.clear()
    np.testing.assert_array_equal(a[2:20, ::3], data[2:20, ::3])
    assert emulate["stream:zstd"] > 0 and not emulate["host_decoded"]


def test_missing_nvcomp_falls_back_to_host_decode_with_a_warning(monkeypatch):
    monkeypatch.setattr(reader, "_nvcomp_state", {"why": "ImportError: no nvidia.nvcomp"})
    with pytest.warns(RuntimeWarning, match="nvCOMP is not available"):
        assert reader.decode_route("zstd", device=True) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert reader.decode_route("lz4", device=True) is None
        # uncompressed chunks need no decoder; the host twin needs no nvCOMP
        assert reader.decode_route("none", device=True) == "none"
        assert reader.decode_route("zstd", device=False) == "zstd"
    monkeypatch.setattr(reader, "_nvcomp_state", {"why": None})
    assert reader.decode_route("blosc", device=True) == "blosc"
    with cuzarr.config.set({"gpu.untrusted": True}):
        assert reader.decode_route("blosc", device=True) is None


CODECS = {
    "zstd": [ZSTD],
    "blosc-shuffle": [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                          "shuffle": "shuffle", "typesize": 4}}],
    "blosclz": [{"name": "blosc", "configuration": {"cname": "blosclz", "clevel": 5,
                                                    "shuffle": "noshuffle"}}],
    "gzip": [{"name": "gzip", "configuration": {"level": 1}}],
    "none": None,
}


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("sub_bytes", [1, 3000, 1 << 30])
def test_sub_batches_read_what_zarr_wrote(tmp_path, emulate, codec, sub_bytes):
    """Batches cut into sub-batches (one chunk each with 1 byte, a few chunks,
    or whole) read what zarr-python wrote: device streams, blosc unshuffles,
    gzip checksums and host-decoded chunks (blosclz) all split by chunk."""
    data = _data((40, 56))
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(8, 16),
                          dtype=data.dtype, compressors=CODECS[codec], fill_value=0)
    z[...] = data
    z[8:16, 16:32] = 0  # a missing chunk
    want = data.copy()
    want[8:16, 16:32] = 0
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    with cuzarr.config.set({"gpu.sub_batch_bytes": sub_bytes}):
        for sel in [(slice(None), slice(None)), (slice(37, 2, -3), slice(5, 50, 4))]:
            np.testing.assert_array_equal(a[sel], want[sel])
    if sub_bytes == 1:
        assert emulate["sub_batches"] > emulate["batches"]
    elif sub_bytes == 1 << 30:
        assert emulate["sub_batches"] == emulate["batches"]


def _zstd_batch(nchunks, corrupt=()):
    import zstandard

    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.executor import prepare_batch
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    shape = (64 * nchunks,)
    p = normalize_numpy((slice(None),), shape, [DimGrid(shape[0], 64)])
    items = chunk_items(p.projections)
    datas = []
    for k in range(nchunks):
        raw = bytearray(zstandard.ZstdCompressor().compress(
            (np.arange(64, dtype="<f8") * (k + 1)).tobytes()))
        if k in corrupt:
            raw[-3] ^= 0xFF  # the body, not the headers: found by the decoder
        datas.append(bytes(raw))
    names = [f"a/c/{k}" for k in range(nchunks)]
    out = np.zeros(shape, "<f8")
    batch = prepare_batch(items, datas, RegularChunkGrid((64,)).stored_chunk_shape, out.shape,
                          out.strides, np.dtype("<f8"), "zstd", lambda d, s: None, names=names)
    return batch, out


def test_split_batch_covers_every_chunk_once_in_order():
    from cuzarr.gpu.subbatch import split_batch

    batch, _out = _zstd_batch(9)
    for max_bytes in (1, 100, 700, 1 << 30):
        subs = split_batch(batch, max_bytes)
        assert subs[0].k0 == 0 and subs[-1].k1 == 9
        assert all(a.k1 == b.k0 for a, b in itertools.pairwise(subs))
        rows = np.concatenate([s.rows["zstd"] for s in subs])
        np.testing.assert_array_equal(rows, np.arange(len(batch.streams["zstd"])))
        for s in subs:  # each sub-batch's streams lie in the bytes it uploads
            r = s.streams["zstd"]
            assert (r["src"] >= 0).all() and (r["src"] + r["n"] <= s.hi - s.lo).all()
            np.testing.assert_array_equal(s.table, batch.plan.table[s.k0 : s.k1])
    assert len(split_batch(batch, 1)) == 9 and len(split_batch(batch, 1 << 30)) == 1


def test_corrupt_stream_is_reported_when_the_read_settles(emulate):
    """The host twin reports a stream its decoder refuses as the device does:
    after every sub-batch has run, when the batch is settled; the error names
    the chunk, and the other chunks are in the output."""
    batch, out = _zstd_batch(6, corrupt=(1, 4))
    with cuzarr.config.set({"gpu.sub_batch_bytes": 1}):
        pending = HostExecutor().run(batch, out, 0.0)
    assert emulate["sub_batches"] == 6
    expect = np.concatenate([np.arange(64) * (k + 1) for k in range(6)])
    good = np.ones(6 * 64, bool)
    good[64:128] = good[256:320] = False
    np.testing.assert_array_equal(out[good], expect[good])
    with pytest.raises(CodecError, match="a/c/1"):
        pending.settle()


def test_corrupt_chunk_fails_the_read_after_its_batches(tmp_path, emulate):
    data = _data((32, 32))
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(8, 32),
                          dtype=data.dtype, compressors=[ZSTD])
    z[...] = data
    path = tmp_path / "a" / "c" / "2" / "0"
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    with cuzarr.config.set({"gpu.sub_batch_bytes": 1}), pytest.raises(CodecError, match="c/2/0"):
        a[...]
    np.testing.assert_array_equal(a[0:16], data[0:16])


@pytest.mark.parametrize("codec", ["zstd", "lz4", None])
def test_whole_chunks_decode_straight_into_the_output(tmp_path, emulate, codec):
    """Chunks that are whole, contiguous blocks of a C-contiguous output are
    decoded there (no staging slot copy); the others go through staging and the
    scatter, in the same batch."""
    data = _data((32, 48))
    comp = {"zstd": [ZSTD], "lz4": [LZ4()], None: None}[codec]
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(4, 48),
                          dtype=data.dtype, compressors=comp, fill_value=0)
    z[...] = data
    z[8:12] = 0  # missing: filled by the scatter
    want = data.copy()
    want[8:12] = 0
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(a[...], want)
    assert emulate["decoded_into_out"] == 7
    HostExecutor.stats.clear()
    np.testing.assert_array_equal(a[2:30], want[2:30])  # whole rows of chunks 1-6
    assert emulate["decoded_into_out"] == 5
    HostExecutor.stats.clear()
    np.testing.assert_array_equal(a[:, ::2], want[:, ::2])  # nothing contiguous
    assert emulate["decoded_into_out"] == 0


def test_out_parameter_views_are_decoded_where_they_allow(tmp_path, emulate):
    data = _data((16, 24))
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(4, 24),
                          dtype=data.dtype, compressors=[ZSTD])
    z[...] = data
    a = cuzarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    big = np.zeros((16, 48), data.dtype)
    a.get_basic_selection(Ellipsis, out=big[:, 10:34])  # not C-contiguous
    np.testing.assert_array_equal(big[:, 10:34], data)
    assert emulate["decoded_into_out"] == 0
    raw = np.zeros(16 * 24 * 4 + 4, np.uint8)
    shifted = raw[4:].view(data.dtype).reshape(16, 24)  # 4-byte aligned: not for zstd
    a.get_basic_selection(Ellipsis, out=shifted)
    np.testing.assert_array_equal(shifted, data)
    assert emulate["decoded_into_out"] == 0


def test_missing_nvcomp_device_writes_encode_on_the_host(monkeypatch):
    from cuzarr.gpu.writer import DeviceWriter

    monkeypatch.setattr(reader, "_nvcomp_state", {"why": "OSError: libnvcomp.so"})
    a = cuzarr.create_array({}, shape=(8, 8), chunks=(4, 4), dtype="f4", compressors=[ZSTD])
    pipeline = a.async_array._pipeline
    value = np.zeros((8, 8), "f4")
    with pytest.warns(RuntimeWarning, match="device writes encode on the host"):
        w = DeviceWriter(pipeline, value, 0.0, lambda c: (4, 4), True, device=True)
    assert w.kind is None
    assert DeviceWriter(pipeline, value, 0.0, lambda c: (4, 4), True, device=False).kind == "zstd"
