"""Chunks of several zstd frames (RFC 8878; pzstd writes them) or several gzip
members (RFC 1952; concatenated gzip files are one).

numcodecs, and so zarr-python, read them one after another; cuzarr used to stop
after the first and refuse the chunk as too short.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import zarr
import zstandard

import cuzarr
from cuzarr.codecs.checksum import crc32c
from cuzarr.errors import CodecError
from cuzarr.storage import LocalStore


def _frames(raw: bytes, parts: int, content_size: bool = True) -> bytes:
    cctx = zstandard.ZstdCompressor(level=1, write_content_size=content_size)
    step = -(-len(raw) // parts)
    return b"".join(cctx.compress(raw[i : i + step]) for i in range(0, len(raw), step))


def _rewrite_chunks(paths, parts, content_size=True):
    for p in paths:
        raw = zstandard.ZstdDecompressor().decompress(p.read_bytes())
        p.write_bytes(_frames(raw, parts, content_size))


@pytest.mark.parametrize("emulate", [False, True])
@pytest.mark.parametrize("content_size", [True, False])
@pytest.mark.parametrize(
    "shape,chunks",
    [((64, 64), (8, 8)), ((1024, 512), (512, 256))],  # tiny (batched) and 256 KiB chunks
    ids=["tiny", "large"],
)
def test_multi_frame_chunks_read_like_zarr_python(tmp_path, emulate, content_size, shape, chunks):
    data = np.arange(np.prod(shape), dtype="u2").reshape(shape)
    a = cuzarr.create_array(
        LocalStore(tmp_path), shape=shape, dtype="u2", chunks=chunks,
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    paths = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert paths
    _rewrite_chunks(paths, 3, content_size)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[...], data)
    with cuzarr.config.set({"gpu.emulate": emulate}):
        b = cuzarr.open_array(tmp_path, mode="r")
        np.testing.assert_array_equal(b[...], data)
        np.testing.assert_array_equal(b[3:50, 5:7], data[3:50, 5:7])


def test_multi_frame_inner_chunks_of_a_shard(tmp_path):
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    z = zarr.create_array(
        str(tmp_path), shape=data.shape, dtype="i4", chunks=(16, 16), shards=(32, 32),
        compressors=zarr.codecs.ZstdCodec(level=1),
    )
    z[...] = data
    # Rebuild one shard with multi-frame inner chunks (index at the end, crc32c).
    shard = tmp_path / "c" / "0" / "0"
    blob = shard.read_bytes()
    n_inner = 4
    index = np.frombuffer(blob[-(n_inner * 16 + 4) : -4], dtype="<u8").reshape(n_inner, 2)
    pieces, offsets, pos = [], [], 0
    for off, nb in index.tolist():
        raw = zstandard.ZstdDecompressor().decompress(blob[off : off + nb])
        piece = _frames(raw, 2)
        pieces.append(piece)
        offsets.append((pos, len(piece)))
        pos += len(piece)
    idx = np.array(offsets, dtype="<u8").tobytes()
    shard.write_bytes(b"".join(pieces) + idx + crc32c(idx).to_bytes(4, "little"))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[...], data)
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path, mode="r")[...], data)
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path, mode="r")[5:9, 1:30], data[5:9, 1:30])


def test_multi_frame_chunk_errors_stay_clear(tmp_path):
    data = np.arange(4096, dtype="u2").reshape(64, 64)
    a = cuzarr.create_array(
        LocalStore(tmp_path), shape=data.shape, dtype="u2", chunks=(64, 64),
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    p = tmp_path / "c" / "0" / "0"
    raw = zstandard.ZstdDecompressor().decompress(p.read_bytes())
    two = _frames(raw, 2)
    for bad in (two[:-3], two + _frames(raw[:16], 1), two + b"junk!"):
        p.write_bytes(bad)
        with pytest.raises(CodecError, match="zstd"):
            cuzarr.open_array(tmp_path, mode="r")[...]


def _gzip_members(raw: bytes, parts: int) -> bytes:
    step = -(-len(raw) // parts)
    return b"".join(gzip.compress(raw[i : i + step], mtime=0) for i in range(0, len(raw), step))


@pytest.mark.parametrize("emulate", [False, True])
@pytest.mark.parametrize("padding", [b"", b"\0" * 5])
def test_multi_member_gzip_chunks_read_like_zarr_python(tmp_path, emulate, padding):
    data = np.arange(128 * 96, dtype="f4").reshape(128, 96)
    a = cuzarr.create_array(
        LocalStore(tmp_path), shape=data.shape, dtype="f4", chunks=(32, 48),
        compressors={"name": "gzip", "configuration": {"level": 1}},
    )
    a[...] = data
    paths = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    for p in paths:
        p.write_bytes(_gzip_members(gzip.decompress(p.read_bytes()), 3) + padding)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), mode="r")[...], data)
    with cuzarr.config.set({"gpu.emulate": emulate}):
        b = cuzarr.open_array(tmp_path, mode="r")
        np.testing.assert_array_equal(b[...], data)
        np.testing.assert_array_equal(b[7:40, 50:51], data[7:40, 50:51])


@pytest.mark.parametrize("emulate", [False, True])
def test_multi_member_gzip_errors_stay_clear(tmp_path, emulate):
    data = np.arange(4096, dtype="u2").reshape(64, 64)
    a = cuzarr.create_array(
        LocalStore(tmp_path), shape=data.shape, dtype="u2", chunks=(64, 64),
        compressors={"name": "gzip", "configuration": {"level": 1}},
    )
    a[...] = data
    p = tmp_path / "c" / "0" / "0"
    raw = gzip.decompress(p.read_bytes())
    two = _gzip_members(raw, 2)
    cases = {
        "truncated": two[:-3],
        "too long": two + gzip.compress(raw[:16]),
        "junk after": two + b"junk!",
    }
    for name, bad in cases.items():
        p.write_bytes(bad)
        with cuzarr.config.set({"gpu.emulate": emulate}), pytest.raises(CodecError, match="gzip"):
            cuzarr.open_array(tmp_path, mode="r")[...]
            pytest.fail(name)
