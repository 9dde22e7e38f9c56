"""The per-batch device read pipeline, on the host twin (``gpu.emulate``):
whole local shards staged in one buffer with their inner chunks decoded where
they lie, the staging pool, the ``gpu.untrusted`` route and the fallback when
nvCOMP is missing. Arrays are written by zarr-python (the oracle) and compared
with numpy."""

from __future__ import annotations

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
