"""Vectorised header checks for a batch of chunks lying in one host buffer.

Each function takes the buffer (``uint8``), the chunks' byte offsets and
lengths in it and their expected decoded sizes (``int64`` arrays), and returns
a boolean mask: ``True`` where the chunk is one raw stream nvCOMP can decode,
every header and size checked (the same checks as the per-chunk parsers of
``gpu.formats``). ``False`` does not mean corrupt: those chunks go through the
per-chunk parsers, which raise the precise ``CodecError`` or send them to the
host decoder (several zstd frames, no content size, a dictionary...). Work is
a few numpy operations per batch, and per zstd block *position* (blocks of
all chunks walked side by side), never a Python step per chunk.
"""

from __future__ import annotations

import numpy as np

__all__ = ["scan_copy", "scan_lz4", "scan_zstd"]

ZSTD_MAGIC = 0xFD2FB528
ZSTD_BLOCK_MAX = 128 << 10


def _gather(buf: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """``n`` bytes at each of ``pos`` as a (positions x n) array, bytes past the
    buffer's end read as its last byte (callers bound what they use)."""
    if len(buf) == 0:
        return np.zeros((len(pos), n), np.uint8)
    return buf[np.minimum(pos[:, None] + np.arange(n, dtype=np.int64), len(buf) - 1)]


def _u32_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian ``uint32`` at each of ``pos`` (``int64``), bytes past the
    buffer's end read as its last byte (callers bound what they use)."""
    return _gather(buf, pos, 4).view("<u4")[:, 0].astype(np.int64)


def scan_copy(offs: np.ndarray, lens: np.ndarray, expect: np.ndarray) -> np.ndarray:
    """Uncompressed chunks: the stored size is the decoded size."""
    return lens == expect


def scan_lz4(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, expect: np.ndarray,
             max_size: int) -> np.ndarray:
    """numcodecs LZ4: ``<u4`` decoded size, then one raw LZ4 block (bounds as in
    :func:`cuzarr.gpu.formats.parse_lz4`)."""
    ok = lens >= 4
    size = _u32_at(buf, offs)
    clen = lens - 4
    ok &= size == expect
    ok &= ~((size > 0) & (clen == 0))
    ok &= (clen <= size + size // 255 + 16) & (size <= clen * 255 + 64)
    ok &= size <= max_size
    return ok


def scan_zstd(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, expect: np.ndarray,
              max_size: int) -> np.ndarray:
    """One zstd frame per chunk, filling it: magic, frame header (no reserved bit,
    no dictionary, a content size equal to ``expect``), then every block header
    (type, size at most 128 KiB, inside the chunk) up to the last block and the
    optional checksum, ending exactly at the chunk's end."""
    ok = lens >= 6
    # the frame headers, 14 bytes each (magic, descriptor, window, content size
    # up to 8 bytes), in one gather; bytes past a chunk are checked below
    hdr = _gather(buf, offs, 14)
    magic = hdr[:, :4].copy().view("<u4")[:, 0]
    ok &= magic == ZSTD_MAGIC
    fhd = hdr[:, 4].astype(np.int64)
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    ok &= (fhd & 0x08) == 0
    ok &= dict_flag == 0  # a dictionary id (even 0 written out): the host decides
    fcs_size = np.array([0, 2, 4, 8])[fcs_flag]
    fcs_size = np.where((fcs_flag == 0) & (single == 1), 1, fcs_size)
    ok &= fcs_size > 0  # no content size: nvCOMP's RAW zstd needs one
    rel = 5 + (1 - single)  # where the content size starts in the header
    header_end = offs + rel + fcs_size
    ok &= header_end <= offs + lens
    fcs = hdr[np.arange(len(hdr))[:, None], rel[:, None] + np.arange(8)]
    content = fcs.copy().view("<u8")[:, 0]
    width = np.where(ok, fcs_size, 0).astype(np.uint64)
    mask = np.where(width >= 8, ~np.uint64(0), (np.uint64(1) << (8 * width)) - np.uint64(1))
    content = (content & mask).astype(np.int64)
    content = np.where(fcs_size == 2, content + 256, content)
    ok &= (content == expect) & (content <= max_size)
    end = offs + lens
    pos = header_end.copy()
    active = np.flatnonzero(ok)
    while len(active):
        # one 4-byte gather per block header (a 3-byte header and one byte more,
        # bounded by the buffer's end): one pass over memory per block position
        p = pos[active]
        e = end[active]
        bh = _u32_at(buf, p) & 0xFFFFFF
        btype = (bh >> 1) & 3
        bsize = bh >> 3
        nxt = p + 3 + np.where(btype == 1, 1, bsize)
        bad = (p + 3 > e) | (btype == 3) | (bsize > ZSTD_BLOCK_MAX) | (nxt > e)
        pos[active] = nxt
        ok[active[bad]] = False
        active = active[~bad & ((bh & 1) == 0)]
    pos += 4 * checksum
    ok &= pos == end  # shorter: more frames follow (host); longer: truncated
    return ok
