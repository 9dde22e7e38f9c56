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


def _bytes_at(buf: np.ndarray, pos: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """Little-endian unsigned integers of ``n`` bytes (at most 8; an array: per
    position) at ``pos``; bytes past the buffer read as 0 (callers bound ``pos``)."""
    width = (int(np.max(n, initial=0))) if np.ndim(n) else int(n)
    val = np.zeros(len(pos), np.uint64)
    last = len(buf) - 1
    if last < 0:
        return val
    for k in range(width):
        b = buf[np.minimum(pos + k, last)].astype(np.uint64)
        if np.ndim(n):
            b[k >= n] = 0
        val |= b << np.uint64(8 * k)
    return val


def scan_copy(offs: np.ndarray, lens: np.ndarray, expect: np.ndarray) -> np.ndarray:
    """Uncompressed chunks: the stored size is the decoded size."""
    return lens == expect


def scan_lz4(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, expect: np.ndarray,
             max_size: int) -> np.ndarray:
    """numcodecs LZ4: ``<u4`` decoded size, then one raw LZ4 block (bounds as in
    :func:`cuzarr.gpu.formats.parse_lz4`)."""
    ok = lens >= 4
    size = _bytes_at(buf, offs, 4).astype(np.int64)
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
    magic = _bytes_at(buf, offs, 4)
    ok &= magic == ZSTD_MAGIC
    fhd = _bytes_at(buf, offs + 4, 1).astype(np.int64)
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    ok &= (fhd & 0x08) == 0
    ok &= dict_flag == 0  # a dictionary id (even 0 written out): the host decides
    fcs_size = np.array([0, 2, 4, 8])[fcs_flag]
    fcs_size = np.where((fcs_flag == 0) & (single == 1), 1, fcs_size)
    ok &= fcs_size > 0  # no content size: nvCOMP's RAW zstd needs one
    fcs_at = offs + 5 + (1 - single)
    header_end = fcs_at + fcs_size
    ok &= header_end <= offs + lens
    content = _bytes_at(buf, fcs_at, np.where(ok, fcs_size, 0)).astype(np.int64)
    content = np.where(fcs_size == 2, content + 256, content)
    ok &= (content == expect) & (content <= max_size)
    end = offs + lens
    pos = header_end.copy()
    active = np.flatnonzero(ok)
    while len(active):
        p = pos[active]
        e = end[active]
        bad = p + 3 > e
        bh = _bytes_at(buf, p, 3).astype(np.int64)
        last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
        bad |= (btype == 3) | (bsize > ZSTD_BLOCK_MAX)
        p = p + 3 + np.where(btype == 1, 1, bsize)
        bad |= p > e
        pos[active] = p
        ok[active[bad]] = False
        active = active[~bad & (last == 0)]
    pos += 4 * checksum
    ok &= pos == end  # shorter: more frames follow (host); longer: truncated
    return ok
