"""Corruption: flipped bytes, truncated and lying shard indexes, decompression bombs."""

from __future__ import annotations

import zlib

import numcodecs
import numpy as np
import pytest
import zstandard

import cuzarr
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.compressors import BloscCodec, GzipCodec, zstd_decompress
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.errors import ChecksumError, CodecError
from cuzarr.metadata.dtypes import parse_data_type

STATS = {"flips": 0}


def test_every_byte_flip_in_crc32c_chunk_is_detected():
    d: dict = {}
    a = cuzarr.create_array(
        d, name="a", shape=(16,), chunks=(16,), dtype="i4", compressors=[{"name": "crc32c"}]
    )
    a[:] = np.arange(16)
    good = d["a/c/0"]
    for i in range(len(good)):
        for bit in range(8):
            b = bytearray(good)
            b[i] ^= 1 << bit
            d["a/c/0"] = bytes(b)
            with pytest.raises(ChecksumError):
                a[:]
            STATS["flips"] += 1
    d["a/c/0"] = good
    np.testing.assert_array_equal(a[:], np.arange(16))
    assert STATS["flips"] == len(good) * 8



def test_checksum_error_names_the_key():
    d: dict = {}
    a = cuzarr.create_array(
        d, name="a", shape=(4,), chunks=(4,), dtype="i4", compressors=[{"name": "crc32c"}]
    )
    a[:] = 1
    d["a/c/0"] = b"\0" + d["a/c/0"][1:]
    with pytest.raises(ChecksumError, match="a/c/0"):
        a[:]


def _sharded():
    d: dict = {}
    a = cuzarr.create_array(d, name="a", shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="u2")
    a[:] = np.arange(64).reshape(8, 8)
    return d, a


def test_every_byte_flip_in_shard_index_is_detected():
    d, a = _sharded()
    good = d["a/c/0/0"]
    codec: ShardingCodec = a.metadata.codecs[0] if hasattr(a.metadata, "codecs") else None
    n_index = 4 * 2 * 8 + 4
    for i in range(len(good) - n_index, len(good)):
        b = bytearray(good)
        b[i] ^= 0x10
        d["a/c/0/0"] = bytes(b)
        with pytest.raises(ChecksumError):
            a[:]
        with pytest.raises(ChecksumError):
            a[0, 0]  # partial read path: index fetched alone
        STATS["flips"] += 1
    del codec


def _codec() -> ShardingCodec:
    return ShardingCodec(
        (4,), index_codecs=[{"name": "bytes", "configuration": {"endian": "little"}}]
    )


def _index(pairs) -> bytes:
    return np.array(pairs, dtype="<u8").tobytes()


@pytest.mark.parametrize(
    "pairs,total",
    [
        ([(0, 8), (4, 8)], 40),  # overlapping ranges
        ([(0, 8), (2**63, 8)], 40),  # past the end
        ([(0, 8), (2**64 - 8, 16)], 40),  # wraps around
        ([(0, 2**64 - 1), (8, 8)], 40),  # half empty
        ([(8, 8), (20, 8)], 40),  # into the index itself (index at the end: 32..40)
    ],
)
def test_lying_shard_index_is_refused(pairs, total):
    c = _codec()
    raw = _index(pairs)
    with pytest.raises(CodecError):
        c.decode_index(raw, (8,), total)
    with pytest.raises(CodecError):
        c.split(b"\0" * (total - len(raw)) + raw, (8,))


@pytest.mark.parametrize("n", [0, 3, 31, 33, 1000])
def test_truncated_or_oversized_index(n):
    with pytest.raises(CodecError):
        _codec().decode_index(b"\0" * n, (8,))


def test_partial_read_with_index_past_end_is_refused():
    d, a = _sharded()
    c = ShardingCodec((4, 4))
    spec = ChunkSpec((8, 8), parse_data_type("uint16", 3), 0)
    bad_index = np.full((2, 2, 2), 2**64 - 1, dtype="<u8")
    bad_index[0, 0] = (0, 2**40)  # claims a terabyte
    raw = c.index_pipeline((8, 8)).encode(bad_index, (2, 2, 2))
    d["a/c/0/0"] = b"\0" * 32 + raw
    del spec
    with pytest.raises(CodecError):
        a[0, 0]
    with pytest.raises(CodecError):
        a[:]


def _bomb_zstd(size: int) -> bytes:
    # a valid frame header that claims ``size`` bytes of content
    c = zstandard.ZstdCompressor(write_content_size=True)
    cobj = c.compressobj(size=size)
    return cobj.compress(b"\0" * 1024) + cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def test_zstd_content_size_bomb_refused_before_allocation():
    frame = _bomb_zstd(100 << 30)
    with pytest.raises(CodecError):
        zstd_decompress(frame, 64)


def test_zstd_bomb_through_pipeline():
    d: dict = {}
    a = cuzarr.create_array(d, name="a", shape=(16,), chunks=(16,), dtype="u1")
    a[:] = 1
    d["a/c/0"] = _bomb_zstd(100 << 30)
    with pytest.raises(CodecError):
        a[:]


def test_zstd_bomb_second_bytes_codec_is_bounded():
    # [bytes, crc32c, zstd]: zstd decodes first, with size_hint=None
    d: dict = {}
    a = cuzarr.create_array(
        d,
        name="a",
        shape=(16,),
        chunks=(16,),
        dtype="u1",
        compressors=[{"name": "crc32c"}, {"name": "zstd"}],
    )
    a[:] = 1
    big = zstandard.ZstdCompressor(write_content_size=True).compress(b"\0" * (64 << 20))
    d["a/c/0"] = big
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(CodecError):
            a[:]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (16 << 20), peak


def test_gzip_bomb_bounded_by_chunk_size():
    bomb = GzipCodec(9).encode(b"\0" * (64 << 20), None)
    with pytest.raises(CodecError):
        GzipCodec().decode(bomb, None, 4096)


def test_blosc_header_claiming_huge_size_refused():
    good = numcodecs.Blosc(cname="lz4").encode(np.zeros(64, "u1"))
    b = bytearray(good)
    b[4:8] = (2**31 - 1).to_bytes(4, "little")
    with pytest.raises(CodecError):
        BloscCodec("lz4").decode(bytes(b), None, 64)
    with pytest.raises(CodecError):
        BloscCodec("lz4").decode(good[:10], None, 64)


@pytest.mark.parametrize("codec", ["zstd", "gzip", "blosc"])
def test_wrong_decompressed_size_is_an_error(codec):
    comp = {"zstd": {"name": "zstd"}, "gzip": {"name": "gzip"}, "blosc": {"name": "blosc"}}[codec]
    d: dict = {}
    a = cuzarr.create_array(d, name="a", shape=(16,), chunks=(16,), dtype="u2", compressors=[comp])
    b = cuzarr.create_array(d, name="b", shape=(8,), chunks=(8,), dtype="u2", compressors=[comp])
    a[:] = 3
    b[:] = 3
    d["a/c/0"] = d["b/c/0"]  # valid stream, half the expected size
    with pytest.raises(CodecError):
        a[:]


def test_v2_gzip_truncated_and_garbage():
    d: dict = {}
    a = cuzarr.create_array(
        d,
        name="a",
        shape=(16,),
        chunks=(16,),
        dtype="u2",
        zarr_format=2,
        compressors=numcodecs.GZip(),
    )
    a[:] = 5
    raw = d["a/0"]
    for bad in (raw[: len(raw) // 2], b"garbage", zlib.compress(b"\0" * 10)):
        d["a/0"] = bad
        with pytest.raises(CodecError):
            a[:]


# -- lying shard indexes on every store and read path (issue 28, item 3) ----------
def _lying_shard(store, index_location: str, lie: str) -> tuple[bytes, bytes]:
    """An (8, 8) u2 array in one shard of 2x2 inner chunks; returns the shard's
    bytes (good, lying): inner chunk (0, 0)'s entry overlaps (0, 1)'s, or (index at
    the end) points into the index."""
    codec = ShardingCodec((4, 4), index_location=index_location)
    serializer = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [4, 4],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": codec.configuration()["index_codecs"],
            "index_location": index_location,
        },
    }
    a = cuzarr.create_array(
        store, name="a", shape=(8, 8), chunks=(8, 8), dtype="u2", serializer=serializer,
        compressors=None, overwrite=True,
    )
    a[:] = np.arange(64, dtype="u2").reshape(8, 8) + 1
    if isinstance(store, str):
        with open(f"{store}/a/c/0/0", "rb") as f:
            good = f.read()
    else:
        good = bytes(store["a/c/0/0"])
    n = codec.index_nbytes((8, 8))
    raw = good[:n] if index_location == "start" else good[-n:]
    index = codec.decode_index(raw, (8, 8), len(good)).copy()
    if lie == "overlap":
        index[0, 0] = index[0, 1]
    else:
        index[0, 0] = (len(good) - n, 32)  # the index's own bytes, as a chunk
    new = bytes(codec.index_pipeline((8, 8)).encode(index, (2, 2, 2)))
    bad = new + good[n:] if index_location == "start" else good[:-n] + new
    return good, bad


def _serve_dir(directory):
    import functools
    import http.server
    import threading

    from test_store_http import RangeHandler

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(RangeHandler, directory=str(directory))
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


_LIES = [("end", "overlap"), ("end", "into-index"), ("start", "overlap")]


@pytest.mark.parametrize("kind", ["memory", "local", "http", "fsspec-memory"])
@pytest.mark.parametrize("index_location,lie", _LIES)
def test_lying_shard_index_is_refused_on_every_store(tmp_path, kind, index_location, lie):
    # Partial reads fetch the index alone; they had skipped the overlap check,
    # and (index at the end) never learnt the shard's size, so an entry over the
    # index read the index's own bytes as data (on local files even whole reads
    # go through that path).
    local = str(tmp_path / "s.zarr")
    d: dict = {}
    good, bad = _lying_shard(d if kind == "memory" else local, index_location, lie)
    server = None
    try:
        if kind == "memory":
            d["a/c/0/0"] = bad
            a = cuzarr.open_array(d, path="a", mode="r")
        else:
            with open(f"{local}/a/c/0/0", "wb") as f:
                f.write(bad)
            if kind == "local":
                a = cuzarr.open_array(local, path="a", mode="r")
            elif kind == "http":
                server = _serve_dir(tmp_path)
                url = f"http://127.0.0.1:{server.server_address[1]}/s.zarr"
                a = cuzarr.open_array(url, path="a", mode="r")
            else:
                import fsspec

                fs = fsspec.filesystem("memory")
                root = f"memory://lying-{index_location}-{lie}"
                fs.put(local, root, recursive=True)
                a = cuzarr.open_array(root, path="a", mode="r")
        for sel in (np.s_[:], np.s_[0, 0], np.s_[0:4, 0:4], np.s_[0, 0:8]):
            with pytest.raises(CodecError, match="a/c/0/0"):
                a[sel]
        # the untouched shard reads back exactly: no false alarm on any path
        if kind == "memory":
            d["a/c/0/0"] = good
        elif kind == "fsspec-memory":
            fs.pipe(f"{root}/a/c/0/0", good)
        else:
            with open(f"{local}/a/c/0/0", "wb") as f:
                f.write(good)
        want = np.arange(64, dtype="u2").reshape(8, 8) + 1
        np.testing.assert_array_equal(a[:], want)
        np.testing.assert_array_equal(a[0:4, 0:4], want[0:4, 0:4])
        assert a[5, 6] == want[5, 6]
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def test_partial_shard_reads_work_where_the_server_refuses_head(tmp_path):
    # The shard's size is asked beside the index (index at the end): a server that
    # answers HEAD with 405 must not fail the read, only skip that one check.
    from test_store_http import RangeHandler

    class NoHead(RangeHandler):
        def do_HEAD(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

    import functools
    import http.server
    import threading

    local = str(tmp_path / "s.zarr")
    _lying_shard(local, "end", "overlap")  # written good; only the return is a lie
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(NoHead, directory=str(tmp_path))
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/s.zarr"
        a = cuzarr.open_array(url, path="a", mode="r")
        want = np.arange(64, dtype="u2").reshape(8, 8) + 1
        np.testing.assert_array_equal(a[0:4, 0:4], want[0:4, 0:4])
        assert a[7, 7] == want[7, 7]
    finally:
        server.shutdown()
        server.server_close()


def test_partial_shard_reads_never_get_the_whole_shard_for_its_size(tmp_path):
    # A server whose HEAD tells no size: fsspec's own size lookup falls back to a
    # GET of the whole shard, which the size check beside the index must not use.
    from test_store_http import RangeHandler

    whole: list[str] = []

    class SizelessHead(RangeHandler):
        def do_HEAD(self):
            self.send_response(200)
            self.end_headers()

        def do_GET(self):
            if self.headers.get("Range") is None and "/c/" in self.path:
                whole.append(self.path)
            return super().do_GET()

    import functools
    import http.server
    import threading

    local = str(tmp_path / "s.zarr")
    a = cuzarr.create_array(local, shape=(64, 64), chunks=(4, 4), shards=(64, 64), dtype="u2")
    a[:] = 3
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(SizelessHead, directory=str(tmp_path))
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/s.zarr"
        b = cuzarr.open_array(url, mode="r")
        assert b[0:4, 0:4].sum() == 48
        assert b[60, 60] == 3
        assert whole == []
    finally:
        server.shutdown()
        server.server_close()
