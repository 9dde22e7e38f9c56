"""Host-side parsing of compressed chunks into the raw streams nvCOMP decodes.

nvCOMP's RAW bitstreams trust their input, so every header and size is checked
here, on the host, before a byte goes to the device; anything malformed raises
``cuzarr.errors.CodecError``, anything valid that the GPU path does not handle
raises ``UnsupportedStream`` (a ``CodecError``) so callers can fall back to the
CPU codec.

* numcodecs LZ4: 4-byte little-endian uncompressed size + one raw LZ4 block.
* zlib (RFC 1950): 2-byte header, raw deflate, 4-byte big-endian adler32.
* gzip (RFC 1952): one member: header (+ optional fields), raw deflate, CRC32, ISIZE.
* zstd: frames (RFC 8878); the header gives the content size; blocks are walked
  to find the frame's end.
* blosc (c-blosc 1.x container): 16-byte header, block offsets, per block one
  stream or ``typesize`` split streams (each ``int32`` size + data, raw when the
  size equals the split's length), then byte-unshuffle.

All functions return offsets into the original buffer (no copies), so a batch's
compressed bytes can be packed into one pinned buffer and sent to the device once.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzarr.errors import CodecError

__all__ = [
    "UNSHUFFLE_DTYPE",
    "BloscChunk",
    "RawStream",
    "UnsupportedStream",
    "block_rows",
    "blosc_blocks",
    "blosc_blocksize",
    "blosc_unshuffle_rows",
    "decode_streams_cpu",
    "parse_blosc",
    "parse_gzip",
    "parse_lz4",
    "parse_zlib",
    "parse_zstd",
    "shuffle_numpy",
    "unshuffle_numpy",
    "wrap_blosc",
    "wrap_gzip",
    "wrap_lz4",
    "wrap_zlib",
    "zstd_frame_info",
]


class UnsupportedStream(CodecError):
    """Valid data that the GPU path does not decode (decode it on the CPU)."""


@dataclass(frozen=True)
class RawStream:
    """One raw compressed stream: ``data[offset : offset + length]`` decodes (with
    ``codec``: ``"lz4"``, ``"zstd"``, ``"deflate"`` or ``"copy"``) to
    ``decoded_size`` bytes, placed at ``dst_offset`` of the chunk's decoded bytes."""

    codec: str
    offset: int
    length: int
    decoded_size: int
    dst_offset: int = 0


def _mv(data: Any) -> memoryview:
    mv = memoryview(data)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


# -- numcodecs LZ4 ------------------------------------------------------------------
def parse_lz4(data: Any, expected_size: int | None = None) -> RawStream:
    """A numcodecs LZ4 chunk: ``<u4`` uncompressed size, then a raw LZ4 block."""
    mv = _mv(data)
    if len(mv) < 4:
        raise CodecError(f"LZ4 chunk of {len(mv)} bytes has no size header")
    (size,) = struct.unpack_from("<I", mv, 0)
    if expected_size is not None and size != expected_size:
        raise CodecError(f"LZ4 chunk decodes to {size} bytes, expected {expected_size}")
    if size and len(mv) == 4:
        raise CodecError("LZ4 chunk has a size but no data")
    # LZ4 expands by at most 1/255 (+16), and compresses by at most ~255:1.
    clen = len(mv) - 4
    if clen > size + size // 255 + 16 or size > clen * 255 + 64:
        raise CodecError(f"LZ4 chunk of {len(mv)} bytes cannot hold {size} bytes")
    return RawStream("lz4", 4, len(mv) - 4, size)


def wrap_lz4(raw_block: Any, decoded_size: int) -> bytes:
    """The reverse of :func:`parse_lz4`: numcodecs' LZ4 chunk around a raw block."""
    return struct.pack("<I", decoded_size) + bytes(_mv(raw_block))


# -- zlib ---------------------------------------------------------------------------
def parse_zlib(data: Any, expected_size: int | None = None) -> tuple[RawStream, int]:
    """A zlib stream: returns the raw deflate stream and the stored adler32 (check it
    against the decoded bytes with ``zlib.adler32``)."""
    mv = _mv(data)
    if len(mv) < 6:
        raise CodecError(f"zlib stream of {len(mv)} bytes is too short")
    cmf, flg = mv[0], mv[1]
    if cmf & 0x0F != 8 or cmf >> 4 > 7:
        raise CodecError(f"not a zlib stream (CMF 0x{cmf:02x})")
    if (cmf * 256 + flg) % 31:
        raise CodecError("zlib header check bits are wrong")
    if flg & 0x20:
        raise UnsupportedStream("zlib stream needs a preset dictionary")
    (adler,) = struct.unpack_from(">I", mv, len(mv) - 4)
    return RawStream("deflate", 2, len(mv) - 6, -1 if expected_size is None else expected_size), adler


def wrap_zlib(raw_deflate: Any, decoded: Any = None, *, adler32: int | None = None,
              level: int = 6) -> bytes:
    """The reverse of :func:`parse_zlib`: header + raw deflate + adler32 of the
    uncompressed bytes (pass ``decoded`` or a precomputed ``adler32``)."""
    if adler32 is None:
        if decoded is None:
            raise ValueError("wrap_zlib needs the decoded bytes or their adler32")
        adler32 = zlib.adler32(_mv(decoded))
    flevel = 0 if level <= 1 else 1 if level <= 5 else 2 if level == 6 else 3
    cmf = 0x78
    flg = flevel << 6
    flg += 31 - (cmf * 256 + flg) % 31
    return bytes((cmf, flg)) + bytes(_mv(raw_deflate)) + struct.pack(">I", adler32 & 0xFFFFFFFF)


# -- gzip ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GzipMember:
    stream: RawStream  # the raw deflate data
    crc32: int
    isize: int         # uncompressed size mod 2**32


def parse_gzip(data: Any, expected_size: int | None = None) -> GzipMember:
    """One gzip member (numcodecs' GZip writes exactly one)."""
    mv = _mv(data)
    if len(mv) < 18:
        raise CodecError(f"gzip data of {len(mv)} bytes is too short")
    if mv[0] != 0x1F or mv[1] != 0x8B or mv[2] != 8:
        raise CodecError("not a gzip member (bad magic or method)")
    flg = mv[3]
    if flg & 0xE0:
        raise CodecError("gzip header has reserved flag bits set")
    pos = 10
    if flg & 0x04:  # FEXTRA
        if pos + 2 > len(mv):
            raise CodecError("truncated gzip extra field")
        (xlen,) = struct.unpack_from("<H", mv, pos)
        pos += 2 + xlen
    for bit in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flg & bit:
            end = bytes(mv[pos:]).find(b"\0")
            if end < 0:
                raise CodecError("truncated gzip name or comment")
            pos += end + 1
    if flg & 0x02:  # FHCRC
        pos += 2
    if pos + 8 > len(mv):
        raise CodecError("gzip member has no room for data and trailer")
    crc, isize = struct.unpack_from("<II", mv, len(mv) - 8)
    if expected_size is not None and isize != expected_size & 0xFFFFFFFF:
        # Several members (or zero padding) end otherwise: the host reads those,
        # and explains a chunk that is really damaged.
        raise UnsupportedStream(f"gzip trailer says {isize} bytes, expected {expected_size}")
    return GzipMember(RawStream("deflate", pos, len(mv) - 8 - pos, isize), crc, isize)


def wrap_gzip(raw_deflate: Any, crc32: int, isize: int) -> bytes:
    """The reverse of :func:`parse_gzip`: one gzip member (no name, mtime 0, OS
    unknown, as Python's gzip module writes with ``mtime=0``) around a raw deflate
    stream, with the CRC-32 and size of the uncompressed bytes."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", crc32 & 0xFFFFFFFF, isize & 0xFFFFFFFF)
    return header + bytes(_mv(raw_deflate)) + trailer


# -- zstd ---------------------------------------------------------------------------
ZSTD_MAGIC = 0xFD2FB528


@dataclass(frozen=True)
class ZstdFrame:
    offset: int
    length: int
    content_size: int | None
    header_size: int
    checksum: bool
    dict_id: int
    window_size: int | None


def zstd_frame_info(data: Any, offset: int = 0) -> ZstdFrame:
    """Parse one zstd frame header at ``offset`` and walk its blocks to its end."""
    mv = _mv(data)
    n = len(mv)
    if n - offset < 6:
        raise CodecError("zstd frame is too short")
    (magic,) = struct.unpack_from("<I", mv, offset)
    if magic & 0xFFFFFFF0 == 0x184D2A50:
        raise UnsupportedStream("zstd skippable frame")
    if magic != ZSTD_MAGIC:
        raise CodecError(f"not a zstd frame (magic 0x{magic:08x})")
    fhd = mv[offset + 4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    if fhd & 0x08:
        raise CodecError("zstd frame header has the reserved bit set")
    pos = offset + 5
    window = None
    if not single:
        wd = mv[pos]
        exp, mant = wd >> 3, wd & 7
        base = 1 << (10 + exp)
        window = base + (base >> 3) * mant
        pos += 1
    did_size = (0, 1, 2, 4)[dict_flag]
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if pos + did_size + fcs_size > n:
        raise CodecError("truncated zstd frame header")
    dict_id = int.from_bytes(mv[pos : pos + did_size], "little") if did_size else 0
    pos += did_size
    content = None
    if fcs_size:
        content = int.from_bytes(mv[pos : pos + fcs_size], "little")
        if fcs_size == 2:
            content += 256
    pos += fcs_size
    header_size = pos - offset
    while True:  # blocks
        if pos + 3 > n:
            raise CodecError("truncated zstd block header")
        bh = int.from_bytes(mv[pos : pos + 3], "little")
        last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
        pos += 3
        if btype == 3:
            raise CodecError("zstd block of reserved type")
        if bsize > (128 << 10):
            raise CodecError("zstd block larger than 128 KiB")
        pos += 1 if btype == 1 else bsize
        if pos > n:
            raise CodecError("truncated zstd block")
        if last:
            break
    if checksum:
        pos += 4
        if pos > n:
            raise CodecError("truncated zstd frame checksum")
    return ZstdFrame(offset, pos - offset, content, header_size, bool(checksum), dict_id, window)


def parse_zstd(data: Any, expected_size: int | None = None) -> RawStream:
    """A zstd chunk as one frame nvCOMP can decode (content size checked against
    ``expected_size`` when the frame records it)."""
    mv = _mv(data)
    frame = zstd_frame_info(mv)
    if frame.dict_id:
        raise UnsupportedStream("zstd frame needs a dictionary")
    if frame.length != len(mv):
        # More frames follow: valid zstd, but decode it on the CPU.
        pos = frame.length
        while pos < len(mv):
            pos += zstd_frame_info(mv, pos).length
        raise UnsupportedStream("zstd chunk holds several frames")
    size = frame.content_size
    if expected_size is not None:
        if size is not None and size != expected_size:
            raise CodecError(f"zstd frame decodes to {size} bytes, expected {expected_size}")
        size = expected_size
    if size is None:
        raise UnsupportedStream("zstd frame without content size and no expected size")
    return RawStream("zstd", 0, len(mv), size)


# -- blosc --------------------------------------------------------------------------
BLOSC_DOSHUFFLE = 0x1
BLOSC_MEMCPYED = 0x2
BLOSC_DOBITSHUFFLE = 0x4
BLOSC_DONT_SPLIT = 0x10
BLOSC_CODECS = {0: "blosclz", 1: "lz4", 2: "snappy", 3: "zlib", 4: "zstd"}
BLOSC_MAX_OVERHEAD = 16

UNSHUFFLE_DTYPE = np.dtype(
    [("src_offset", "<i8"), ("dst_offset", "<i8"), ("nbytes", "<i8"), ("typesize", "<i4"),
     ("pad_", "<i4")]
)


@dataclass
class BloscChunk:
    """A parsed blosc chunk: decode ``streams`` (offsets into the chunk) into a
    buffer of ``nbytes`` at each stream's ``dst_offset``; if ``shuffle`` is 1,
    byte-unshuffle each block (``blocks``: ``(offset, nbytes)``) with ``typesize``."""

    version: int
    versionlz: int
    flags: int
    typesize: int
    nbytes: int
    blocksize: int
    cbytes: int
    codec: str
    shuffle: int  # 0 none, 1 byte, 2 bit
    memcpyed: bool
    streams: list[RawStream] = field(default_factory=list)
    blocks: list[tuple[int, int]] = field(default_factory=list)


def parse_blosc(data: Any, expected_size: int | None = None, *, gpu: bool = True) -> BloscChunk:
    """Parse and validate a c-blosc 1.x chunk. With ``gpu=True`` the chunk must be
    decodable by the GPU path (lz4/zstd streams or memcpyed; byte shuffle or none),
    else ``UnsupportedStream``."""
    mv = _mv(data)
    if len(mv) < BLOSC_MAX_OVERHEAD:
        raise CodecError(f"blosc chunk of {len(mv)} bytes is shorter than its header")
    version, versionlz, flags, typesize = mv[0], mv[1], mv[2], mv[3]
    nbytes, blocksize, cbytes = struct.unpack_from("<III", mv, 4)
    if version == 0 or version > 4:
        raise CodecError(f"unknown blosc format version {version}")
    if typesize == 0:
        raise CodecError("blosc typesize is 0")
    if cbytes != len(mv):
        raise CodecError(f"blosc header says {cbytes} bytes, the chunk has {len(mv)}")
    if expected_size is not None and nbytes != expected_size:
        raise CodecError(f"blosc chunk decodes to {nbytes} bytes, expected {expected_size}")
    memcpyed = bool(flags & BLOSC_MEMCPYED)
    shuffle = 2 if flags & BLOSC_DOBITSHUFFLE else 1 if flags & BLOSC_DOSHUFFLE else 0
    codec = BLOSC_CODECS.get(flags >> 5)
    if codec is None:
        raise CodecError(f"unknown blosc compressor code {flags >> 5}")
    chunk = BloscChunk(version, versionlz, flags, typesize, nbytes, blocksize, cbytes, codec,
                       shuffle, memcpyed)
    if memcpyed:
        if cbytes != nbytes + BLOSC_MAX_OVERHEAD:
            raise CodecError("memcpyed blosc chunk has the wrong size")
        chunk.shuffle = 0  # the data was copied before any shuffle
        chunk.streams = [RawStream("copy", 16, nbytes, nbytes, 0)] if nbytes else []
        return chunk
    if nbytes == 0:
        return chunk
    if blocksize == 0 or (blocksize > max(nbytes, 1) and nbytes > 0 and blocksize > (1 << 31)):
        raise CodecError(f"bad blosc blocksize {blocksize}")
    if gpu and codec not in ("lz4", "zstd"):
        raise UnsupportedStream(f"blosc with the {codec} compressor")
    if gpu and shuffle == 2:  # blosc bit-shuffles even with typesize 1
        raise UnsupportedStream("blosc bitshuffle")
    nblocks = -(-nbytes // blocksize)
    leftover = nbytes % blocksize
    if 16 + 4 * nblocks > len(mv):
        raise CodecError("truncated blosc block offsets")
    bstarts = struct.unpack_from(f"<{nblocks}i", mv, 16)
    dont_split = bool(flags & BLOSC_DONT_SPLIT)
    lo = 16 + 4 * nblocks
    for b, start in enumerate(bstarts):
        bsize = leftover if (b == nblocks - 1 and leftover) else blocksize
        if start < lo or start >= len(mv):
            raise CodecError(f"blosc block {b} starts outside the chunk")
        nsplits = typesize if (not dont_split and not (b == nblocks - 1 and leftover)) else 1
        if bsize % nsplits:
            nsplits = 1
        neblock = bsize // nsplits
        pos = start
        for s in range(nsplits):
            if pos + 4 > len(mv):
                raise CodecError(f"truncated blosc block {b}")
            (cs,) = struct.unpack_from("<i", mv, pos)
            pos += 4
            if cs <= 0 or pos + cs > len(mv):
                raise CodecError(f"blosc block {b} split {s} has a bad size {cs}")
            dst = b * blocksize + s * neblock
            if cs == neblock:
                chunk.streams.append(RawStream("copy", pos, cs, neblock, dst))
            elif cs > neblock:
                raise CodecError(f"blosc block {b} split {s} is larger than its data")
            else:
                if gpu and codec == "zstd":
                    _check_blosc_zstd(mv[pos : pos + cs], neblock, b, s)
                chunk.streams.append(RawStream(codec, pos, cs, neblock, dst))
            pos += cs
        chunk.blocks.append((b * blocksize, bsize))
    return chunk


def _check_blosc_zstd(stream: memoryview, size: int, block: int, split: int) -> None:
    """The zstd stream of one blosc split, checked as a zstd chunk is before nvCOMP
    sees it: one frame, no dictionary, a content size in its header (nvCOMP's RAW
    zstd reads the output size there) equal to the split's ``size``."""
    try:
        if zstd_frame_info(stream).content_size is None:
            raise UnsupportedStream("zstd frame without a content size")
        parse_zstd(stream, size)
    except CodecError as e:  # UnsupportedStream too (a CodecError): same kind
        raise type(e)(f"blosc block {block} split {split}: {e}") from e


def blosc_unshuffle_rows(chunk: BloscChunk, src_base: int, dst_base: int) -> np.ndarray:
    """``UNSHUFFLE_DTYPE`` rows for one chunk whose shuffled bytes sit at ``src_base``
    of a scratch buffer and whose output goes to ``dst_base``."""
    rows = np.zeros(len(chunk.blocks), dtype=UNSHUFFLE_DTYPE)
    if len(rows):
        offs = np.array([b[0] for b in chunk.blocks], dtype=np.int64)
        rows["src_offset"] = src_base + offs
        rows["dst_offset"] = dst_base + offs
        rows["nbytes"] = [b[1] for b in chunk.blocks]
        rows["typesize"] = chunk.typesize
    return rows


def unshuffle_numpy(rows: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """The CPU twin of ``cuzarr_unshuffle``."""
    for row in rows:
        ts, nb = int(row["typesize"]), int(row["nbytes"])
        s0, d0 = int(row["src_offset"]), int(row["dst_offset"])
        ne = nb // ts
        block = src[s0 : s0 + ne * ts]
        dst[d0 : d0 + ne * ts] = block.reshape(ts, ne).T.reshape(-1)
        dst[d0 + ne * ts : d0 + nb] = src[s0 + ne * ts : s0 + nb]


def shuffle_numpy(rows: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """The CPU twin of ``cuzarr_shuffle`` (the reverse of :func:`unshuffle_numpy`)."""
    for row in rows:
        ts, nb = int(row["typesize"]), int(row["nbytes"])
        s0, d0 = int(row["src_offset"]), int(row["dst_offset"])
        ne = nb // ts
        dst[d0 : d0 + ne * ts] = src[s0 : s0 + ne * ts].reshape(ne, ts).T.reshape(-1)
        dst[d0 + ne * ts : d0 + nb] = src[s0 + ne * ts : s0 + nb]


def blosc_blocksize(nbytes: int, blocksize: int, typesize: int) -> int:
    """The block size a blosc chunk of ``nbytes`` is written with: ``blocksize``
    (a multiple of the type size), never above ``nbytes`` (c-blosc refuses it)."""
    bs = max(typesize, blocksize - blocksize % max(1, typesize))
    return max(1, min(bs, nbytes))


def blosc_blocks(nbytes: int, blocksize: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of the blocks of a blosc chunk of ``nbytes``."""
    return [(o, min(blocksize, nbytes - o)) for o in range(0, nbytes, blocksize)]


def block_rows(blocks: list[tuple[int, int]], typesize: int, src_base: int,
               dst_base: int) -> np.ndarray:
    """``UNSHUFFLE_DTYPE`` rows (shuffle or unshuffle) for blocks of one chunk."""
    rows = np.zeros(len(blocks), dtype=UNSHUFFLE_DTYPE)
    if len(rows):
        offs = np.array([b[0] for b in blocks], dtype=np.int64)
        rows["src_offset"] = src_base + offs
        rows["dst_offset"] = dst_base + offs
        rows["nbytes"] = [b[1] for b in blocks]
        rows["typesize"] = typesize
    return rows


BLOSC_CODE = {v: k for k, v in BLOSC_CODECS.items()}
BLOSC_VERSIONLZ = {"blosclz": 1, "lz4": 1, "snappy": 1, "zlib": 1, "zstd": 1}


def wrap_blosc(blocks: list[bytes | None], raw_blocks: list[Any], nbytes: int, blocksize: int,
               typesize: int, codec: str, shuffle: bool) -> bytes:
    """A c-blosc 1.x chunk (format version 2, one stream per block: the
    ``BLOSC_DONT_SPLIT`` layout) from compressed blocks. ``blocks[b]`` is block
    ``b`` compressed; when it is ``None`` or no smaller than the block, the block
    is stored as is, from ``raw_blocks[b]`` (its bytes as they were compressed,
    i.e. shuffled; only those entries are read)."""
    flags = BLOSC_DONT_SPLIT | (BLOSC_CODE[codec] << 5) | (BLOSC_DOSHUFFLE if shuffle else 0)
    sizes = [n for _o, n in blosc_blocks(nbytes, blocksize)]
    nblocks = len(sizes)
    if len(blocks) != nblocks or len(raw_blocks) != nblocks:
        raise ValueError(f"a blosc chunk of {nbytes} bytes in blocks of {blocksize} has "
                         f"{nblocks} blocks, not {len(blocks)}")
    parts: list[bytes] = []
    starts = []
    pos = BLOSC_MAX_OVERHEAD + 4 * nblocks
    for comp, raw, n in zip(blocks, raw_blocks, sizes, strict=True):
        if comp is None or len(comp) >= n:
            body = bytes(_mv(raw))
            if len(body) != n:
                raise ValueError(f"raw blosc block has {len(body)} bytes, expected {n}")
        else:
            body = bytes(comp)
        starts.append(pos)
        parts.append(struct.pack("<i", len(body)) + body)
        pos += 4 + len(body)
    header = struct.pack(
        "<BBBBIII", 2, BLOSC_VERSIONLZ[codec], flags, typesize & 0xFF, nbytes, blocksize, pos
    )
    return header + struct.pack(f"<{nblocks}i", *starts) + b"".join(parts)


# -- CPU reference decode of raw streams ----------------------------------------------
def decode_streams_cpu(data: Any, streams: list[RawStream], nbytes: int) -> np.ndarray:
    """Decode raw streams on the host (lz4 / zstandard / zlib): the reference for the
    parsers above and the fallback of the GPU executor."""
    mv = _mv(data)
    out = np.empty(nbytes, dtype=np.uint8)
    for st in streams:
        src = mv[st.offset : st.offset + st.length]
        if st.codec == "copy":
            raw: Any = src
        elif st.codec == "lz4":
            import lz4.block

            raw = lz4.block.decompress(bytes(src), uncompressed_size=st.decoded_size)
        elif st.codec == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().decompress(src, max_output_size=st.decoded_size)
        elif st.codec == "deflate":
            d = zlib.decompressobj(-15)
            raw = d.decompress(src, st.decoded_size if st.decoded_size > 0 else 0)
        else:
            raise CodecError(f"unknown stream codec {st.codec!r}")
        if len(raw) != st.decoded_size:
            raise CodecError(
                f"{st.codec} stream decoded to {len(raw)} bytes, expected {st.decoded_size}"
            )
        out[st.dst_offset : st.dst_offset + st.decoded_size] = np.frombuffer(raw, np.uint8)
    return out
