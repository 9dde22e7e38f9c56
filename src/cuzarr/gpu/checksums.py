"""CRC-32 and Adler-32 of chunks in device memory, without copying them to the host.

nvCOMP's deflate writes a raw stream; the zlib container needs the Adler-32 and
gzip the CRC-32 of the *uncompressed* chunk. ``kernels/checksum.cu``
(``cuzarr_block_checksums``) checksums fixed-size blocks of every chunk in one
launch; the few bytes per block come back to the host, where the values of each
chunk's blocks are folded, in order, into the checksum of the whole chunk:

- CRC-32: ``crc(A + B) = shift(crc(A), len(B)) ^ crc(B)``, ``shift(c, n)`` being
  multiplication by ``x**(8n)`` modulo the CRC polynomial (zlib's
  ``crc32_combine``). It is linear in ``c``: an operator is kept as four 256-entry
  tables (one per byte of ``c``) and applied to many values at once with numpy.
- Adler-32: per block ``a = sum(x_i)`` and ``b = sum((n - i) * x_i)`` (mod 65521),
  so a chunk's ``A = 1 + sum(a_k)`` and ``B = L + sum(b_k) + sum(a_k * S_k)``,
  ``S_k`` the number of chunk bytes after block ``k``.

:func:`block_checksums_numpy` is the kernel's host twin. CuPy is imported only by
:func:`device_chunk_checksums`.
"""

from __future__ import annotations

import contextlib
import functools
import zlib
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ADLER_MOD",
    "DEFAULT_BLOCK",
    "KINDS",
    "BlockChecksums",
    "Blocks",
    "block_checksums_numpy",
    "chunk_checksums",
    "combine_adler32",
    "combine_crc32",
    "crc32_shift",
    "device_chunk_checksums",
    "host_chunk_checksums",
    "split_blocks",
]

CRC_POLY = 0xEDB88320  # reflected
ADLER_MOD = 65521
DEFAULT_BLOCK = 16384
# kind -> the kernel's `kinds` bit
KINDS = {"crc32": 1, "adler32": 2}


class Blocks(NamedTuple):
    """Blocks of a batch of chunks, in chunk order (int64 arrays of one length)."""

    offsets: np.ndarray  # byte offset in the buffer
    lengths: np.ndarray  # bytes (``block``, less for a chunk's last block)
    owners: np.ndarray  # index of the chunk (non-decreasing)


class BlockChecksums(NamedTuple):
    """Per-block outputs of ``cuzarr_block_checksums`` (uint32 arrays)."""

    crc: np.ndarray  # zlib.crc32 of the block alone
    adler_a: np.ndarray  # sum of the bytes, mod 65521
    adler_b: np.ndarray  # sum of (len - i) * byte_i, mod 65521


def split_blocks(chunk_offsets: Any, chunk_lengths: Any, block: int = DEFAULT_BLOCK) -> Blocks:
    """Split chunks (``chunk_lengths[j]`` bytes at ``chunk_offsets[j]``) into blocks
    of ``block`` bytes, the last block of a chunk shorter. An empty chunk has no
    blocks."""
    if block < 1:
        raise ValueError(f"block must be positive, got {block}")
    offs = np.asarray(chunk_offsets, dtype=np.int64).reshape(-1)
    lens = np.asarray(chunk_lengths, dtype=np.int64).reshape(-1)
    if offs.shape != lens.shape:
        raise ValueError("chunk_offsets and chunk_lengths differ in length")
    if (lens < 0).any() or (offs < 0).any():
        raise ValueError("chunk offsets and lengths must be non-negative")
    counts = -(-lens // block)
    owners = np.repeat(np.arange(len(lens), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    start = (np.arange(len(owners), dtype=np.int64) - first[owners]) * block
    return Blocks(
        offs[owners] + start, np.minimum(block, lens[owners] - start), owners
    )


def block_checksums_numpy(data: np.ndarray, offsets: Any, lengths: Any) -> BlockChecksums:
    """What ``cuzarr_block_checksums`` computes, on the host: per block, the CRC-32
    (``zlib.crc32``) and the Adler-32 partial sums (numpy)."""
    buf = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1)
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    crc = np.empty(len(offs), np.uint32)
    a = np.empty(len(offs), np.uint32)
    b = np.empty(len(offs), np.uint32)
    for i, (o, n) in enumerate(zip(offs.tolist(), lens.tolist())):
        if o < 0 or n < 0 or o + n > buf.size:
            raise ValueError(f"block {i} ({n} bytes at {o}) is outside the buffer")
        x = buf[o : o + n]
        crc[i] = zlib.crc32(x)
        xi = x.astype(np.int64)
        a[i] = int(xi.sum()) % ADLER_MOD
        w = (n - np.arange(n, dtype=np.int64)) % ADLER_MOD
        b[i] = int((w * xi).sum()) % ADLER_MOD
    return BlockChecksums(crc, a, b)


# --- CRC-32 combination (GF(2) arithmetic, zlib's crc32_combine) ----------------


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC polynomial (reflected: bit 31 is x**0)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ CRC_POLY if b & 1 else b >> 1
    return p


def _x2n_table() -> tuple[int, ...]:
    # x**(2**k) mod p, k = 0..31 (it repeats with period 32)
    p = 1 << 30  # x**1
    out = [p]
    for _ in range(31):
        p = _multmodp(p, p)
        out.append(p)
    return tuple(out)


_X2N = _x2n_table()


@functools.lru_cache(maxsize=1024)
def _x8n(n: int) -> int:
    """x**(8n) modulo the CRC polynomial."""
    p = 1 << 31  # x**0
    k = 3
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_shift(crc: int, n: int) -> int:
    """``crc`` advanced over ``n`` zero bytes of message, without the init/xorout
    terms: ``crc32(A + B) == crc32_shift(crc32(A), len(B)) ^ crc32(B)``."""
    return _multmodp(_x8n(n), crc)


@functools.lru_cache(maxsize=256)
def _shift_tables(n: int) -> np.ndarray:
    """``crc32_shift(., n)`` as byte tables ``t`` (4 x 256 uint32):
    ``shift(c) = t[0][c & 255] ^ t[1][(c >> 8) & 255] ^ t[2][...] ^ t[3][c >> 24]``."""
    # images of the basis vectors: bit i is x**(31 - i); bit i - 1 = bit i times x
    basis = [0] * 32
    v = _x8n(n)  # image of bit 31 (x**0)
    for i in range(31, -1, -1):
        basis[i] = v
        v = (v >> 1) ^ CRC_POLY if v & 1 else v >> 1
    tables = np.empty((4, 256), np.uint32)
    for k in range(4):
        t = np.zeros(1, np.uint32)
        for j in range(8):
            t = np.concatenate([t, t ^ np.uint32(basis[8 * k + j])])
        tables[k] = t
    tables.setflags(write=False)
    return tables


def _apply_shift(tables: np.ndarray, c: np.ndarray) -> np.ndarray:
    by = np.ascontiguousarray(c, dtype="<u4").view(np.uint8).reshape(*c.shape, 4)
    return (tables[0][by[..., 0]] ^ tables[1][by[..., 1]]
            ^ tables[2][by[..., 2]] ^ tables[3][by[..., 3]])


def combine_crc32(crcs: Any, lengths: Any) -> int:
    """The CRC-32 of the concatenation of blocks, from each block's ``zlib.crc32``
    and length (in order); 0 for no blocks."""
    acc = 0
    for c, n in zip(np.asarray(crcs).reshape(-1).tolist(),
                    np.asarray(lengths).reshape(-1).tolist()):
        acc = crc32_shift(acc, int(n)) ^ int(c)
    return acc


def combine_adler32(a: Any, b: Any, lengths: Any) -> int:
    """The Adler-32 of the concatenation of blocks, from each block's partial sums
    (``a = sum x_i``, ``b = sum (len - i) * x_i``, mod 65521) and length; 1 for no
    blocks (``zlib.adler32(b"")``)."""
    av = np.asarray(a, dtype=np.int64).reshape(-1) % ADLER_MOD
    bv = np.asarray(b, dtype=np.int64).reshape(-1) % ADLER_MOD
    lv = np.asarray(lengths, dtype=np.int64).reshape(-1)
    after = (int(lv.sum()) - np.cumsum(lv)) % ADLER_MOD  # bytes after each block
    big_a = (1 + int(av.sum())) % ADLER_MOD
    big_b = (int(lv.sum()) + int(bv.sum()) + int((av * after % ADLER_MOD).sum())) % ADLER_MOD
    return (big_b << 16) | big_a


# --- batches -----------------------------------------------------------------


def _segments(owners: np.ndarray, nchunks: int) -> tuple[np.ndarray, np.ndarray]:
    """First block and block count of every chunk (owners non-decreasing)."""
    if len(owners) and (np.diff(owners) < 0).any():
        raise ValueError("blocks must be in chunk order (owners non-decreasing)")
    if len(owners) and (owners[0] < 0 or owners[-1] >= nchunks):
        raise ValueError("block owner outside range(nchunks)")
    counts = np.bincount(owners, minlength=nchunks).astype(np.int64)
    return np.cumsum(counts) - counts, counts


def _segment_sum(values: np.ndarray, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    cs = np.concatenate([np.zeros(1, np.int64), np.cumsum(values, dtype=np.int64)])
    return cs[first + counts] - cs[first]


def _chunk_adler32(vals: BlockChecksums, lens: np.ndarray, owners: np.ndarray,
                   first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    a = vals.adler_a.astype(np.int64) % ADLER_MOD
    b = vals.adler_b.astype(np.int64) % ADLER_MOD
    ends = np.cumsum(lens)
    chunk_len = _segment_sum(lens, first, counts)
    chunk_end = ends[np.maximum(first + counts - 1, 0)] if len(lens) else ends
    after = (chunk_end[owners] - ends) % ADLER_MOD
    big_a = (1 + _segment_sum(a, first, counts)) % ADLER_MOD
    big_b = (chunk_len % ADLER_MOD + _segment_sum(b, first, counts)
             + _segment_sum(a * after % ADLER_MOD, first, counts)) % ADLER_MOD
    return ((big_b << 16) | big_a).astype(np.uint32)


def _chunk_crc32(crc: np.ndarray, lens: np.ndarray, owners: np.ndarray,
                 first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    nchunks = len(counts)
    out = np.zeros(nchunks, np.uint32)
    has = counts > 0
    if not has.any():
        return out
    last = first + counts - 1
    is_last = np.zeros(len(lens), bool)
    is_last[last[has]] = True
    body_lens = np.unique(lens[~is_last])
    if len(body_lens) > 1:  # blocks not from split_blocks: fold chunk by chunk
        for j in np.flatnonzero(has).tolist():
            s = slice(int(first[j]), int(first[j] + counts[j]))
            out[j] = combine_crc32(crc[s], lens[s])
        return out
    # Every block but a chunk's last has `block` bytes: fold the body blocks of all
    # chunks at once, as a binary tree over right-aligned rows (leading zeros are
    # empty messages: shift(0) == 0), then append each last block.
    nbody = counts - 1
    width = int(nbody.max())
    acc = np.zeros(nchunks, np.uint32)
    if width > 0:
        block = int(body_lens[0])
        width = 1 << (width - 1).bit_length()
        rows = np.zeros((nchunks, width), np.uint32)
        body = np.flatnonzero(~is_last)
        bo = owners[body]
        rows[bo, width - nbody[bo] + (body - first[bo])] = crc[body]
        level = 0
        while rows.shape[1] > 1:
            t = _shift_tables(block << level)
            rows = _apply_shift(t, rows[:, 0::2]) ^ rows[:, 1::2]
            level += 1
        acc = rows[:, 0]
    idx = np.flatnonzero(has)
    tail = lens[last[idx]]
    res = crc[last[idx]].copy()
    for n in np.unique(tail).tolist():
        sel = np.flatnonzero(tail == n)
        if len(sel) > 4:
            res[sel] ^= _apply_shift(_shift_tables(int(n)), acc[idx[sel]])
        else:  # a few chunks of an odd length: no tables
            for i in sel.tolist():
                res[i] ^= np.uint32(crc32_shift(int(acc[idx[i]]), int(n)))
    out[idx] = res
    return out


def chunk_checksums(kind: str, values: BlockChecksums, lengths: Any, owners: Any,
                    nchunks: int) -> np.ndarray:
    """One checksum per chunk (uint32; ``zlib.crc32`` for ``kind="crc32"``,
    ``zlib.adler32`` for ``"adler32"``) from per-block values (``values``, as the
    kernel or :func:`block_checksums_numpy` gives them), the block lengths and
    owning chunks (blocks in chunk order, as :func:`split_blocks` makes them).
    A chunk with no blocks is empty."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    own = np.asarray(owners, dtype=np.int64).reshape(-1)
    if len(own) != len(lens):
        raise ValueError("lengths and owners differ in length")
    first, counts = _segments(own, nchunks)
    if kind == "adler32":
        return _chunk_adler32(values, lens, own, first, counts)
    return _chunk_crc32(np.asarray(values.crc, np.uint32).reshape(-1), lens, own, first,
                        counts)


def device_chunk_checksums(buffer: Any, chunk_offsets: Any, chunk_lengths: Any, kind: str,
                           stream: Any = None, block: int = DEFAULT_BLOCK,
                           threads: int = 128) -> np.ndarray:
    """``kind`` ("crc32" or "adler32") of every chunk (``chunk_lengths[j]`` bytes at
    byte ``chunk_offsets[j]`` of the C-contiguous CuPy array ``buffer``), computed on
    the device (one ``cuzarr_block_checksums`` launch on ``stream``, the current
    stream by default); only the per-block values are copied back. Returns uint32,
    one per chunk; waits for the copy."""
    from cuzarr.buffer.gpu import import_cupy
    from cuzarr.gpu import kernels

    cp = import_cupy()
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    if not buffer.flags.c_contiguous:
        raise ValueError("buffer must be C-contiguous")
    data = buffer.reshape(-1).view(cp.uint8)
    blocks = split_blocks(chunk_offsets, chunk_lengths, block)
    nblocks = len(blocks.offsets)
    nchunks = len(np.asarray(chunk_lengths).reshape(-1))
    if nblocks and int((blocks.offsets + blocks.lengths).max()) > data.size:
        raise ValueError("a chunk lies outside the buffer")
    host = BlockChecksums(*(np.zeros(nblocks, np.uint32) for _ in range(3)))
    if nblocks:
        with stream if stream is not None else contextlib.nullcontext():
            offs = cp.asarray(blocks.offsets)
            lens = cp.asarray(blocks.lengths)
            out = cp.zeros((3, nblocks), cp.uint32)
            fn = kernels.get_function("checksum.cu", kernels.CHECKSUMS)
            grid = (min(-(-nblocks // threads), 65535),)
            fn(grid, (threads,), (data, offs, lens, np.int64(nblocks), np.int32(KINDS[kind]),
                                  out[0], out[1], out[2]))
            host = BlockChecksums(*out.get())
    return chunk_checksums(kind, host, blocks.lengths, blocks.owners, nchunks)


def host_chunk_checksums(data: np.ndarray, chunk_offsets: Any, chunk_lengths: Any, kind: str,
                         block: int = DEFAULT_BLOCK) -> np.ndarray:
    """The host twin of :func:`device_chunk_checksums`: the same blocks, per-block
    values from :func:`block_checksums_numpy`, the same combination."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    blocks = split_blocks(chunk_offsets, chunk_lengths, block)
    nchunks = len(np.asarray(chunk_lengths).reshape(-1))
    values = block_checksums_numpy(np.asarray(data).reshape(-1).view(np.uint8),
                                   blocks.offsets, blocks.lengths)
    return chunk_checksums(kind, values, blocks.lengths, blocks.owners, nchunks)
