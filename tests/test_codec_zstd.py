"""The v3 ``zstd`` codec's compression: frames every zstd reader decodes
(numcodecs, python-zstandard, zarr-python), with the content size written, for
chunks on both sides of the size where it switches compressor, and one
compressor per thread and parameters shared by every codec instance."""

from __future__ import annotations

import threading

import numcodecs
import numpy as np
import pytest
import zstandard

from cuzarr.codecs import compressors
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.compressors import ZstdCodec
from cuzarr.metadata.dtypes import parse_data_type


def _spec(n: int) -> ChunkSpec:
    return ChunkSpec((n,), parse_data_type("uint8", 3), 0)


@pytest.mark.parametrize("n", [0, 1, 2048, 128 << 10, (512 << 10) - 1, 512 << 10, 3 << 20])
@pytest.mark.parametrize("level,checksum", [(1, False), (3, True), (-2, False)])
def test_frames_decode_everywhere(n, level, checksum):
    rng = np.random.default_rng(n)
    raw = (np.cumsum(rng.integers(-3, 4, n)) % 200).astype(np.uint8).tobytes()
    codec = ZstdCodec(level=level, checksum=checksum)
    frame = codec.encode(raw, _spec(n))
    if n:  # (numcodecs refuses a frame of no content)
        assert numcodecs.Zstd().decode(frame) == raw
    assert zstandard.ZstdDecompressor().decompress(frame) == raw
    params = zstandard.get_frame_parameters(frame)
    assert params.content_size == n and params.has_checksum == checksum
    assert bytes(codec.decode(frame, _spec(n), n)) == raw


def test_one_compressor_per_thread_and_parameters():
    a, b, c = ZstdCodec(level=1), ZstdCodec(level=1), ZstdCodec(level=5)
    assert a._cctx() is b._cctx() and a._cctx() is not c._cctx()
    seen = []
    t = threading.Thread(target=lambda: seen.append(a._cctx()))
    t.start()
    t.join()
    assert seen[0] is not a._cctx()  # contexts are not shared between threads
    assert compressors._zstd_compressor(1, False) is a._cctx()
