"""nvCOMP stream-format helpers, checked on the CPU against numcodecs: each parser
turns a numcodecs-encoded chunk into raw streams that the plain lz4 / zstandard /
zlib packages decode back to the original bytes."""

from __future__ import annotations

import gzip
import struct
import zlib

import numcodecs
import numpy as np
import pytest

from cuzarr.errors import CodecError
from cuzarr.gpu.formats import (
    UNSHUFFLE_DTYPE,
    UnsupportedStream,
    blosc_unshuffle_rows,
    decode_streams_cpu,
    parse_blosc,
    parse_gzip,
    parse_lz4,
    parse_zlib,
    parse_zstd,
    unshuffle_numpy,
    wrap_zlib,
    zstd_frame_info,
)
from cuzarr.gpu.formats import RawStream as RawStreamT

lz4 = pytest.importorskip("lz4.block", reason="the lz4 package decodes raw LZ4 blocks here")


def _data(n, dtype="<f4", seed=0):
    rng = np.random.default_rng(seed)
    # compressible but not trivial
    a = np.cumsum(rng.integers(-3, 4, size=n)).astype(dtype)
    return a.tobytes()


SIZES = [0, 1, 7, 1000, 65536 + 13, 150_000]


@pytest.mark.parametrize("n", SIZES)
def test_lz4(n):
    raw = _data(n, "<i2")
    enc = numcodecs.LZ4(acceleration=1).encode(raw)
    st = parse_lz4(enc, len(raw))
    assert st.decoded_size == len(raw)
    assert decode_streams_cpu(enc, [st], len(raw)).tobytes() == raw
    with pytest.raises(CodecError):
        parse_lz4(enc, len(raw) + 1)
    with pytest.raises(CodecError):
        parse_lz4(enc[:3])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("level", [1, 5])
def test_zstd(n, level):
    raw = _data(n)
    enc = numcodecs.Zstd(level=level).encode(raw)
    st = parse_zstd(enc, len(raw))
    assert decode_streams_cpu(enc, [st], len(raw)).tobytes() == raw
    info = zstd_frame_info(enc)
    assert info.length == len(enc) and info.content_size in (len(raw), None)


def test_zstd_checksum_and_streaming_frames():
    import zstandard

    raw = _data(50_000)
    enc = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(raw)
    assert zstd_frame_info(enc).checksum and zstd_frame_info(enc).content_size is None
    st = parse_zstd(enc, len(raw))
    assert decode_streams_cpu(enc, [st], len(raw)).tobytes() == raw
    with pytest.raises(UnsupportedStream):
        parse_zstd(enc)  # no content size, none expected
    with pytest.raises(UnsupportedStream):
        parse_zstd(enc + enc, 2 * len(raw))  # two frames: CPU path


def test_zstd_corrupt():
    raw = _data(20_000)
    enc = numcodecs.Zstd(level=3).encode(raw)
    with pytest.raises(CodecError):
        parse_zstd(b"\0" * 16)
    with pytest.raises(CodecError):
        parse_zstd(enc[:-5], len(raw))  # truncated
    with pytest.raises(CodecError):
        parse_zstd(enc, len(raw) + 1)  # wrong content size
    bad = bytearray(enc)
    bad[4] |= 0x08  # reserved bit
    with pytest.raises(CodecError):
        parse_zstd(bytes(bad))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("level", [1, 6])
def test_zlib_roundtrip(n, level):
    raw = _data(n)
    enc = numcodecs.Zlib(level=level).encode(raw)
    st, adler = parse_zlib(enc, len(raw))
    dec = decode_streams_cpu(enc, [st], len(raw)).tobytes()
    assert dec == raw and adler == zlib.adler32(raw)
    # reverse: a raw deflate stream wrapped with header + adler32 is what numcodecs reads
    co = zlib.compressobj(level, zlib.DEFLATED, -15)
    deflate = co.compress(raw) + co.flush()
    wrapped = wrap_zlib(deflate, raw, level=level)
    assert numcodecs.Zlib().decode(wrapped) == raw
    assert parse_zlib(wrapped)[1] == zlib.adler32(raw)
    assert wrap_zlib(deflate, adler32=zlib.adler32(raw)) == wrap_zlib(deflate, raw)


def test_zlib_corrupt():
    with pytest.raises(CodecError):
        parse_zlib(b"\x79\x9c" + b"\0" * 10)
    with pytest.raises(CodecError):
        parse_zlib(b"\x78\x9d" + b"\0" * 10)  # check bits
    with pytest.raises(UnsupportedStream):
        parse_zlib(bytes((0x78, 0xBB)) + b"\0" * 10)  # preset dictionary
    with pytest.raises(ValueError):
        wrap_zlib(b"")


@pytest.mark.parametrize("n", SIZES)
def test_gzip(n):
    raw = _data(n)
    enc = numcodecs.GZip(level=5).encode(raw)
    m = parse_gzip(enc, len(raw))
    assert m.isize == len(raw) and m.crc32 == zlib.crc32(raw)
    assert decode_streams_cpu(enc, [m.stream], len(raw)).tobytes() == raw
    # optional header fields (name, comment via the gzip module's FNAME)
    enc2 = gzip.compress(raw, mtime=0)
    named = bytearray(enc2)
    named[3] |= 0x08
    named[10:10] = b"file.bin\0"
    m2 = parse_gzip(bytes(named), len(raw))
    assert decode_streams_cpu(bytes(named), [m2.stream], len(raw)).tobytes() == raw
    with pytest.raises(CodecError):
        parse_gzip(b"\x1f\x8c" + enc[2:])
    with pytest.raises(CodecError):
        parse_gzip(enc, len(raw) + 1)


def _blosc_decode(enc, nbytes):
    ch = parse_blosc(enc, nbytes)
    shuffled = decode_streams_cpu(enc, ch.streams, ch.nbytes)
    if ch.shuffle == 1 and ch.typesize > 1:
        rows = blosc_unshuffle_rows(ch, 0, 0)
        out = np.empty_like(shuffled)
        unshuffle_numpy(rows, shuffled, out)
        return ch, out.tobytes()
    return ch, shuffled.tobytes()


@pytest.mark.parametrize("cname", ["lz4", "lz4hc", "zstd"])
@pytest.mark.parametrize("shuffle", [numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE])
@pytest.mark.parametrize("dtype", ["u1", "<i2", "<f8", "V12", "V20"])
@pytest.mark.parametrize("n", [0, 5, 3001, 40_000])
@pytest.mark.parametrize("blocksize", [0, 4096])
def test_blosc(cname, shuffle, dtype, n, blocksize):
    dt = np.dtype(dtype)
    raw = _data(n * dt.itemsize, "u1")[: n * dt.itemsize] if dt.kind == "V" else _data(n, dtype)
    codec = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=blocksize)
    arr = np.frombuffer(raw, dtype=dt)
    enc = codec.encode(arr)
    ch, dec = _blosc_decode(enc, len(raw))
    assert dec == raw
    assert ch.typesize == dt.itemsize and ch.nbytes == len(raw)


def test_blosc_memcpyed_and_random():
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=10_000, dtype=np.uint8).view("<f8").tobytes()
    enc = numcodecs.Blosc(cname="lz4", clevel=9, shuffle=numcodecs.Blosc.SHUFFLE).encode(raw)
    _ch, dec = _blosc_decode(enc, len(raw))
    assert dec == raw


def test_blosc_unsupported_and_corrupt():
    raw = _data(5000)
    for cname in ("blosclz", "zlib"):
        enc = numcodecs.Blosc(cname=cname, shuffle=1).encode(raw)
        with pytest.raises(UnsupportedStream):
            parse_blosc(enc)
        assert parse_blosc(enc, gpu=False).codec == cname
    enc = numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.BITSHUFFLE).encode(raw)
    with pytest.raises(UnsupportedStream):
        parse_blosc(enc)
    enc = numcodecs.Blosc(cname="zstd", shuffle=1).encode(raw)
    with pytest.raises(CodecError):
        parse_blosc(enc[:10])
    with pytest.raises(CodecError):
        parse_blosc(enc[:-1])  # cbytes mismatch
    with pytest.raises(CodecError):
        parse_blosc(enc, len(raw) + 4)
    bad = bytearray(enc)
    struct.pack_into("<i", bad, 16, 3)  # first block starts inside the offsets table
    with pytest.raises(CodecError):
        parse_blosc(bytes(bad))
    bad = bytearray(enc)
    bad[3] = 0
    with pytest.raises(CodecError):
        parse_blosc(bytes(bad))


def test_unshuffle_rows_layout():
    from pathlib import Path

    header = (Path(__file__).parents[1] / "kernels" / "cuzarr_plan.cuh").read_text()
    assert f"CUZARR_UNSHUFFLE_ROW_BYTES {UNSHUFFLE_DTYPE.itemsize}" in header
    for name in UNSHUFFLE_DTYPE.names:
        assert f" {name};" in header, name


@pytest.mark.parametrize(
    "compressor",
    [
        None,
        numcodecs.Zstd(level=1),
        numcodecs.LZ4(),
        numcodecs.Zlib(level=1),
        numcodecs.GZip(level=1),
        numcodecs.Blosc(cname="lz4", shuffle=1),
        numcodecs.Blosc(cname="zstd", shuffle=1, blocksize=256),
        numcodecs.Blosc(cname="blosclz", shuffle=1),  # CPU fallback
        numcodecs.BZ2(),  # no GPU decoder at all
    ],
)
def test_executor_prepare_batch_on_cpu(compressor):
    """prepare_batch (host half of the GPU read), then the device steps replayed on
    the host: decode each packed raw stream, unshuffle, copy host-decoded chunks,
    scatter with the numpy executor. Matches numpy indexing."""
    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.executor import copy_word, prepare_batch, stream_kind
    from cuzarr.gpu.plan import execute_plan_numpy
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    shape, chunks = (23, 17), (8, 5)
    full = np.arange(np.prod(shape), dtype="<f8").reshape(shape) * 1.5
    grid = RegularChunkGrid(chunks)
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks)]
    sel = (slice(2, 21, 3), slice(None, None, -2))
    p = normalize_numpy(sel, shape, dims)
    items = chunk_items(p.projections)
    datas = []
    for k, it in enumerate(items):
        if k == 1:
            datas.append(None)  # missing chunk
            continue
        region = tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(it[0], chunks))
        chunk = np.zeros(chunks, full.dtype)
        part = full[region]
        chunk[: part.shape[0], : part.shape[1]] = part
        raw = chunk.tobytes()
        datas.append(raw if compressor is None else compressor.encode(raw))
    kind = stream_kind(compressor)

    def cpu_decode(data, cshape):
        raw = data if compressor is None else compressor.decode(data)
        return np.frombuffer(raw, full.dtype).reshape(cshape)

    out = np.zeros(p.buffer_shape, full.dtype)
    batch = prepare_batch(items, datas, grid.stored_chunk_shape, out.shape, out.strides,
                          full.dtype, kind, cpu_decode)
    staging = np.zeros(batch.plan.staging_nbytes, np.uint8)
    scratch = np.zeros(batch.scratch_nbytes, np.uint8)
    for codec, rows in batch.streams.items():
        for src, n, dst, size, to_scratch, _to_out in rows:
            st = RawStreamT(codec, src, n, size)
            dec = decode_streams_cpu(batch.packed, [st], size)
            (scratch if to_scratch else staging)[dst : dst + size] = dec
    for slot, raw in batch.host_decoded:
        staging[slot : slot + len(raw)] = raw
    if len(batch.unshuffle):
        unshuffle_numpy(batch.unshuffle, scratch, staging)
    execute_plan_numpy(batch.plan.table, staging, out, -1.0)
    ref = full.copy()
    c1 = items[1][0]
    ref[tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(c1, chunks))] = -1.0
    np.testing.assert_array_equal(out, ref[sel])
    if kind in (None,) or (isinstance(compressor, numcodecs.Blosc) and compressor.cname == "blosclz"):
        assert batch.host_decoded and not batch.streams
    else:
        assert batch.streams and not batch.host_decoded
    assert copy_word(batch.plan.table, 8, [0]) == 8


@pytest.mark.parametrize("typesize", [1, 2, 4, 8])
@pytest.mark.parametrize("n", [1, 25, 1024, 75000])
@pytest.mark.parametrize("blocksize", [64, 4096, 1 << 20])
@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_wrap_blosc_roundtrips_through_numcodecs(typesize, n, blocksize, codec):
    """The blosc container the GPU writer assembles (byte shuffle by the numpy twin
    of cuzarr_shuffle, one stream per block) decodes with c-blosc (numcodecs) and
    parses with our own reader; incompressible blocks are stored raw."""
    import lz4.block
    import zstandard

    from cuzarr.gpu.formats import (
        block_rows,
        blosc_blocks,
        blosc_blocksize,
        parse_blosc,
        shuffle_numpy,
        wrap_blosc,
    )

    rng = np.random.default_rng(n)
    dt = "u1" if typesize == 1 else f"<i{typesize}"
    arr = (np.cumsum(rng.standard_normal(n)) * 10).astype(dt)
    if n == 1024:
        arr = rng.integers(0, 255, n).astype(dt)  # incompressible: raw blocks
    data = arr.tobytes()
    bs = blosc_blocksize(len(data), blocksize, typesize)
    blocks = blosc_blocks(len(data), bs)
    src = np.frombuffer(data, np.uint8)
    shuffled = np.zeros(len(data), np.uint8)
    rows = block_rows(blocks, typesize, 0, 0)
    shuffle_numpy(rows, src, shuffled)
    back = np.zeros(len(data), np.uint8)
    unshuffle_numpy(rows, shuffled, back)
    assert (back == src).all()
    raws = [shuffled[o : o + m].tobytes() for o, m in blocks]
    comps = [lz4.block.compress(r, store_size=False) if codec == "lz4"
             else zstandard.ZstdCompressor(level=1).compress(r) for r in raws]
    chunk = wrap_blosc(comps, raws, len(data), bs, typesize, codec, typesize > 1)
    assert bytes(numcodecs.Blosc().decode(chunk)) == data
    parsed = parse_blosc(chunk, len(data))
    assert parsed.nbytes == len(data) and len(parsed.blocks) == len(blocks)


def _blosc_zstd(raw: bytes, *, content_size: bool = True, blocksize: int = 4096) -> bytes:
    """A blosc chunk of zstd streams (one per block, as the GPU writer lays it
    out), each frame with or without the content size in its header."""
    import zstandard

    from cuzarr.gpu.formats import blosc_blocks, wrap_blosc

    cctx = zstandard.ZstdCompressor(level=3, write_content_size=content_size)
    blocks = [raw[o : o + n] for o, n in blosc_blocks(len(raw), blocksize)]
    return wrap_blosc([cctx.compress(b) for b in blocks], blocks, len(raw), blocksize, 4,
                      "zstd", False)


def _first_stream(enc: bytes) -> int:
    """Offset of the first block's (only) stream in a DONT_SPLIT blosc chunk."""
    (start,) = struct.unpack_from("<i", enc, 16)
    return start + 4


def test_blosc_zstd_streams_are_checked_before_nvcomp():
    """Inside blosc, every zstd stream gets the checks a zstd chunk gets before
    it reaches nvCOMP (which trusts its input): a bad frame is a CodecError, a
    frame nvCOMP cannot size (no content size) or decode alone (dictionary,
    several frames) goes to the host, and its content size must be the split's."""
    raw = _data(3000)  # 12000 bytes: blocks of 4096, 4096, 3808
    enc = _blosc_zstd(raw)
    ch = parse_blosc(enc, len(raw))
    assert [s.codec for s in ch.streams] == ["zstd"] * 3
    assert decode_streams_cpu(enc, ch.streams, len(raw)).tobytes() == raw
    assert numcodecs.Blosc().decode(enc) == raw  # c-blosc reads it too
    at = _first_stream(enc)

    bad = bytearray(enc)
    bad[at] ^= 0xFF  # not a zstd magic number
    with pytest.raises(CodecError, match="blosc block 0") as info:
        parse_blosc(bytes(bad), len(raw))
    assert not isinstance(info.value, UnsupportedStream)

    frame = zstd_frame_info(enc[at:])
    assert frame.content_size == 4096 and frame.header_size == 7  # FCS: 2 bytes, +256
    bad = bytearray(enc)
    struct.pack_into("<H", bad, at + 5, 4097 - 256)  # content size 4097 in a 4096 split
    with pytest.raises(CodecError, match="4097") as info:
        parse_blosc(bytes(bad), len(raw))
    assert not isinstance(info.value, UnsupportedStream)

    bad = bytearray(enc)
    bad[at + 4] |= 0x08  # the reserved bit of the frame header
    with pytest.raises(CodecError, match="reserved"):
        parse_blosc(bytes(bad), len(raw))

    no_size = _blosc_zstd(raw, content_size=False)
    assert numcodecs.Blosc().decode(no_size) == raw
    with pytest.raises(UnsupportedStream, match="content size"):
        parse_blosc(no_size, len(raw))
    # the host-only parse (gpu=False) does not ask for what nvCOMP needs
    assert len(parse_blosc(no_size, len(raw), gpu=False).streams) == 3


def test_blosc_zstd_without_content_size_decodes_on_the_host():
    """prepare_batch hands such a chunk to the host decoder, not to nvCOMP; the
    host twin's run gives the data."""
    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.executor import HostExecutor, prepare_batch
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    full = np.frombuffer(_data(2 * 3000), "<f4").reshape(2, 3000)
    datas = [_blosc_zstd(full[0].tobytes(), content_size=False), _blosc_zstd(full[1].tobytes())]
    p = normalize_numpy((slice(None), slice(None)), full.shape, [DimGrid(2, 1), DimGrid(3000, 3000)])
    items = chunk_items(p.projections)
    out = np.zeros(full.shape, full.dtype)
    batch = prepare_batch(items, datas, RegularChunkGrid((1, 3000)).stored_chunk_shape, out.shape,
                          out.strides, full.dtype, "blosc",
                          lambda d, s: np.frombuffer(numcodecs.Blosc().decode(d), "<f4").reshape(s))
    assert len(batch.host_decoded) == 1 and batch.host_decoded[0][0] == batch.plan.slots[0]
    assert [int((batch.owners["zstd"] == k).sum()) for k in (0, 1)] == [0, 3]
    HostExecutor().run(batch, out, 0)
    np.testing.assert_array_equal(out, full)
