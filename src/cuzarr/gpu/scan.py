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

from cuzarr.codecs import libzstd
from cuzarr.runtime import native

__all__ = ["scan_copy", "scan_lz4", "scan_zstd"]

ZSTD_MAGIC = 0xFD2FB528
ZSTD_BLOCK_MAX = 128 << 10
# content size field width by (flag + 4 * single segment): flag 0 means none,
# or one byte in a single-segment frame
_FCS_SIZE = np.array([0, 2, 4, 8, 1, 2, 4, 8], np.int64)
_FCS_MASK = np.array([0, 0xFF, 0xFFFF, 0, 0xFFFFFFFF, 0, 0, 0, 0xFFFFFFFFFFFFFFFF], np.uint64)


def _words(buf: np.ndarray, dtype: str) -> tuple[np.ndarray, int, np.ndarray]:
    """A view of ``buf`` holding the ``dtype`` word that starts at *every* byte
    (stride 1, unaligned: one fancy index then reads a field of every chunk at
    once), the last position whose word lies inside ``buf``, and the words of
    the positions after it, over ``buf``'s end padded with zeros."""
    width = np.dtype(dtype).itemsize
    last = len(buf) - width
    tail = np.zeros(2 * width - 1, np.uint8)
    if last < 0:
        tail[: len(buf)] = buf
        view = np.zeros(1, dtype)  # never read: every position is past ``last``
    else:
        tail[: width - 1] = buf[last + 1 :]
        view = np.ndarray((last + 1,), dtype, buffer=buf, strides=(1,))
    words = np.ndarray((width,), dtype, buffer=tail, strides=(1,))
    return view, last, words


def _at(words: tuple[np.ndarray, int, np.ndarray], pos: np.ndarray) -> np.ndarray:
    """The word at each of ``pos`` (``int64``, each at least 0 and at most the
    buffer's length), as ``int64``; bytes past the buffer's end read as 0."""
    view, last, tail = words
    out = view[np.minimum(pos, max(last, 0))].astype(np.int64)
    over = pos > last
    if over.any():
        out[over] = tail[np.minimum(pos[over] - max(last + 1, 0), len(tail) - 1)]
    return out


def _u32_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian ``uint32`` at each of ``pos`` (``int64``), bytes past the
    buffer's end not read (callers bound what they use)."""
    return _at(_words(buf, "<u4"), pos)


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
              max_size: int, frames: np.ndarray | None = None) -> np.ndarray:
    """One zstd frame per chunk, filling it: magic, frame header (no reserved bit,
    no dictionary, a content size equal to ``expect``), then every block header
    (type, inside the chunk) up to the last block and the optional checksum,
    ending exactly at the chunk's end.

    The headers are walked in C where they can be: by ``cuzarr.runtime.native``
    where it was built (each frame header read once, with the checks of
    :func:`_walk_blocks` for its blocks), else the frame headers here in numpy
    and the block headers by the system's libzstd
    (``ZSTD_findFrameCompressedSize``, which does not hold a block to 128 KiB);
    with neither, the block headers side by side in numpy (:func:`_walk_blocks`).
    ``frames`` (n x 2, ``cuzarr.runtime.native.frames_array``): the walk of each
    chunk made as it was read (a row not walked is walked here)."""
    if len(offs) == 0:
        return np.zeros(0, bool)
    end = offs + lens
    ok = (lens >= 6) & (end <= len(buf))
    if frames is None and native.available():
        frames = native.zstd_frames(buf, offs, lens)
    if frames is not None and native.available():
        todo = np.flatnonzero(frames[:, 0] == 0)
        if len(todo):  # not walked as they were read (read as separate bytes)
            frames = frames.copy()
            frames[todo] = native.zstd_frames(buf, offs[todo], lens[todo])
        if not (frames[:, 1] == native.NOT_PARSED).any():
            # every frame header parsed in C: sizes compared, nothing read here
            walked = frames.view(np.int64)  # errors and NO_CONTENT: negative
            content = walked[:, 1]
            return ok & (walked[:, 0] == lens) & (content == expect) & (content <= max_size)
    return _scan_headers(buf, offs, lens, expect, max_size, end,
                         None if frames is None else frames[:, 0])


def _scan_headers(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, expect: np.ndarray,
                  max_size: int, end: np.ndarray, frames: np.ndarray | None) -> np.ndarray:
    """:func:`scan_zstd` with the frame headers read here (numpy), the block
    headers walked by libzstd (``frames``: frame sizes walked already, 0: not)
    or numpy."""
    u64 = _words(buf, "<u8")
    ok = (lens >= 6) & (end <= len(buf))
    head = _at(u64, offs)  # the magic, then the frame header descriptor
    ok &= (head & 0xFFFFFFFF) == ZSTD_MAGIC
    fhd = (head >> 32) & 0xFF
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    ok &= ((fhd & 0x08) == 0) & (dict_flag == 0)  # a dictionary id (even 0): the host decides
    fcs_size = _FCS_SIZE[fcs_flag + 4 * single]
    ok &= fcs_size > 0  # no content size: nvCOMP's RAW zstd needs one
    start = offs + 6 - single  # where the content size starts
    pos = start + fcs_size  # the first block header
    ok &= pos <= end
    # the content size: the low fcs_size bytes of the 8 there (a read past the
    # buffer's end only where the header is cut short, which ``ok`` refuses)
    content = _at(u64, start).view(np.uint64) & _FCS_MASK[fcs_size]
    content = content.view(np.int64) + 256 * (fcs_size == 2)
    ok &= (content == expect) & (content <= max_size)
    if native.available() or libzstd.available():
        # the block headers walked in C: libzstd's own walk (one call per
        # chunk, ~0.5 us) against ~19 numpy operations per block position of
        # the batch (~6 us per 1 MiB chunk in a batch of 32); error codes turn
        # negative
        idx = np.flatnonzero(ok)
        sizes = np.zeros(len(idx), np.int64) if frames is None else frames[idx].astype(np.int64)
        todo = np.flatnonzero(sizes == 0)
        if len(todo):
            sizes[todo] = _walk(buf, offs[idx[todo]], lens[idx[todo]])
        ok[idx] = sizes == lens[idx]
        return ok
    pos = _walk_blocks(_words(buf, "<u4"), pos, end, ok)
    pos += 4 * checksum
    ok &= pos == end  # shorter: more frames follow (host); longer: truncated
    return ok


def _walk(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The compressed size of the zstd frame at each chunk, walked in C
    (``int64``; negative where the walk failed)."""
    if native.available():
        return native.zstd_frames(buf, offs, lens)[:, 0].astype(np.int64)
    return libzstd.first_frame_sizes(buf, offs, lens)


def _walk_blocks(u32: tuple[np.ndarray, int, np.ndarray], pos: np.ndarray, end: np.ndarray,
                 ok: np.ndarray) -> np.ndarray:
    """Walk the block headers of the ``ok`` chunks side by side (one pass over
    memory per block position), from each one's first at ``pos`` to its last
    block (type, size at most 128 KiB, inside the chunk, which ends at ``end``);
    clears ``ok`` where one is not, and returns where each walk ended.

    A 3-byte header at ``p`` is read as the 4-byte word at ``p - 1`` shifted
    right by a byte: it never reaches past a header's last byte, so the only
    positions clamped to the buffer are those of chunks already cut short. The
    chunks still walking are kept compacted, so a step is ~19 numpy operations
    on them alone."""
    view, last = u32[0], u32[1]
    final = pos.copy()
    idx = np.flatnonzero(ok)
    q = pos[idx] - 1  # the word before each header
    e = end[idx] - 1  # a block must end at or before the chunk: q' <= e
    while len(idx):
        h = view[np.minimum(q, max(last, 0))] >> 8
        size = h >> 3
        btype = (h >> 1) & 3
        nq = q + np.where(btype == 1, 4, size + 3)
        bad = (nq > e) | (btype == 3) | (size > ZSTD_BLOCK_MAX)
        done = (h & 1) == 1
        stop = bad | done
        if not stop.any():
            q = nq
            continue
        ok[idx[bad]] = False
        final[idx[done]] = nq[done] + 1
        keep = ~stop
        idx, q, e = idx[keep], nq[keep], e[keep]
    return final
