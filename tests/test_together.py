"""Whole chunks of a batch decoded in place by one call (``core.together``):
plain reads of chunks above the block path's size (``read_job``), small chunks
on a block grid (``core.blocks``), and shards' inner chunks take the pipeline's
``decode_chunks_into``. Same answers as numpy and zarr-python, with edge,
partial and missing chunks, strided outputs, and corrupt or wrong-size chunks
named by key."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
import zstandard

import cuzarr
from cuzarr.codecs.pipeline import V3Pipeline
from cuzarr.core import blocks
from cuzarr.core.together import decode_together, whole_block_start
from cuzarr.storage import LocalStore

# 32 x 1024 float32: 128 KiB chunks, above the block path's 64 KiB and below
# the one-chunk-per-batch size (read_job.LARGE_CHUNK_BYTES)
CHUNKS = (32, 1024)


def _calls(monkeypatch):
    """Each call of V3Pipeline.decode_chunks_into: how many chunks it got."""
    seen: list[int] = []
    real = V3Pipeline.decode_chunks_into

    def counted(self, datas, *args):
        seen.append(len(datas))
        return real(self, datas, *args)

    monkeypatch.setattr(V3Pipeline, "decode_chunks_into", counted)
    return seen


@pytest.fixture
def mid(tmp_path):
    """A zstd float32 array of 128 KiB chunks with edge chunks in both
    dimensions, written by cuzarr; its data."""
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(250, 5000), chunks=CHUNKS,
                            dtype="<f4", fill_value=-1.0,
                            compressors={"name": "zstd", "configuration": {"level": 1}})
    data = np.cumsum(np.random.default_rng(3).standard_normal(a.shape), axis=1).astype("<f4")
    a[...] = data
    return a, data


def test_mid_size_chunks_decode_together(mid, monkeypatch, tmp_path):
    a, data = mid
    seen = _calls(monkeypatch)
    with cuzarr.config.set({"threading.max_workers": 2}):
        np.testing.assert_array_equal(a[...], data)
        assert seen and max(seen) > 1  # batches of whole chunks, one call each
        for sel in [(slice(32, 224), slice(1024, 4096)), (slice(5, 249), slice(3, 4999)),
                    (slice(None, None, -1), slice(None)), (slice(0, 64), slice(0, 5000, 2))]:
            np.testing.assert_array_equal(a[sel], data[sel])
        # one whole chunk alone: the same call, no scratch buffer and copy
        seen.clear()
        np.testing.assert_array_equal(a[32:64, 1024:2048], data[32:64, 1024:2048])
        assert seen == [1]
        # a strided output: each chunk decoded aside and copied into its block
        big = np.zeros((250, 10000), "<f4")
        a.get_basic_selection(Ellipsis, out=big[:, ::2])
        np.testing.assert_array_equal(big[:, ::2], data)
        assert not big[:, 1::2].any()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)


def test_mid_size_chunks_missing_corrupt_and_wrong_size(mid, tmp_path):
    a, data = mid
    root = tmp_path / "a" / "c"
    (root / "2" / "3").unlink()  # missing: the fill value
    expect = data.copy()
    expect[64:96, 3072:4096] = -1.0
    np.testing.assert_array_equal(a[...], expect)
    # a valid frame of the wrong size: refused, named, nothing decoded past it
    (root / "1" / "2").write_bytes(zstandard.ZstdCompressor().compress(bytes(1000)))
    with pytest.raises(cuzarr.errors.CodecError, match="c/1/2"):
        a[...]
    (root / "1" / "2").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    with pytest.raises(cuzarr.errors.CodecError, match="c/1/2"):
        a[...]
    np.testing.assert_array_equal(a[96:250], expect[96:250])  # the other rows still read


def test_block_grid_small_chunks_decode_in_place_like_decode_many(tmp_path, monkeypatch):
    """Small chunks on a block grid decode straight into the output; the same
    answers as through decode_many's buffer and one scatter."""
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(90, 70), chunks=(8, 4),
                            dtype="<i4", fill_value=0)
    data = np.arange(a.size, dtype="<i4").reshape(a.shape) * 7
    a[...] = data
    seen = _calls(monkeypatch)
    sels = [Ellipsis, (slice(4, 86), slice(2, 66)), (slice(8, 64), slice(None, None, -1))]
    got = [a[s] for s in sels]
    assert seen
    monkeypatch.setattr(blocks.BlockDecoder, "_into", lambda self, chosen, where: None)
    for s, g in zip(sels, got, strict=True):
        np.testing.assert_array_equal(g, data[s])
        np.testing.assert_array_equal(a[s], g)


def test_decode_together_leaves_what_it_cannot_place():
    """Missing chunks, partly selected ones and a pipeline that declines go back
    to the caller; a chunk the call did not place too."""
    shape = (2, 3)
    whole = ((0, 0), (slice(0, 2), slice(0, 3)), (slice(0, 2), slice(3, 6)), True)
    part = ((0, 1), (slice(0, 1), slice(0, 3)), (slice(0, 1), slice(0, 3)), False)
    other = ((1, 0), (slice(0, 2), slice(0, 3)), (slice(2, 4), slice(0, 3)), True)
    items = [whole, part, other, whole]
    assert whole_block_start(whole, shape) == [0, 3]
    assert whole_block_start(part, shape) is None
    out = np.zeros((4, 6))
    got = []

    def into(datas, starts, shp, target):
        got.append((list(datas), starts.tolist()))
        return np.array([True, False])

    pairs = [(0, b"a"), (1, b"b"), (2, b"c"), (3, None)]

    def start_of(i):
        return whole_block_start(items[i], shape)

    left = decode_together(into, start_of, pairs, shape, out)
    assert got == [([b"a", b"c"], [[0, 3], [2, 0]])]
    assert left == [(1, b"b"), (3, None), (2, b"c")]
    assert decode_together(lambda *a: None, start_of, pairs, shape, out) == pairs
    assert decode_together(None, start_of, pairs, shape, out) == pairs
    assert decode_together(into, start_of, pairs, shape, [[0.0]]) == pairs
    assert decode_together(into, start_of, pairs, (), out) == pairs  # 0-d: one by one


@pytest.mark.parametrize("compressors", [None, {"name": "zstd", "configuration": {"level": 1}}])
def test_zero_dimensional_arrays_read_one_by_one(tmp_path, compressors):
    a = cuzarr.create_array(LocalStore(tmp_path / "z"), shape=(), dtype="<f8", fill_value=0,
                            compressors=compressors)
    a[()] = 2.5
    assert a[()] == 2.5 and a[...].shape == ()
    assert a.lazy[...].read() == 2.5
