"""The per-chunk loops of a batch read, in C, where ``cuzarr.runtime._native``
was built (``setup.py``; optional: no C compiler, no module).

A device read of 1 MiB chunk files spent most of its host time on Python calls
per chunk: open, size, read into the staging buffer, close and the zstd frame
walk. Here each loop is one call per batch, without the GIL. Every function
does the common case only and marks, per item, what it did not do; the callers
take those items through their Python path, which raises the precise error.
``cuzarr.config`` key ``storage.native_io`` (default True) turns it off, for
the Python path alone (tests run both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cuzarr.config import setting

try:
    from cuzarr.runtime import _native as _c
except ImportError:  # not built (see setup.py): the callers' Python loops
    _c = None

__all__ = [
    "NOT_PARSED",
    "NO_CONTENT",
    "OPEN_SKIPPED",
    "OPEN_UNSIZED",
    "WALK_ERROR",
    "available",
    "close_fds",
    "frames_array",
    "index_rows",
    "open_sized",
    "place",
    "read_placed",
    "slice_rows",
    "stream_rows",
    "window_rows",
    "zstd_decode_into",
    "zstd_frames",
]

#: the zstd walk's frame size for a frame it could not walk
WALK_ERROR = np.uint64(2**64 - 1)
#: the zstd walk's content size for a frame nvCOMP's raw decoder does not take
#: (no content size field, a dictionary id, the reserved bit set)
NO_CONTENT = np.uint64(2**64 - 1)
#: a content size nobody has parsed yet (a frame walked by libzstd, which gives
#: the frame's size alone)
NOT_PARSED = np.uint64(2**64 - 2)


def available() -> bool:
    """Whether the C loops are built and ``storage.native_io`` is on."""
    return _c is not None and bool(setting("storage.native_io", True))


#: :func:`open_sized` flags: an item was skipped (its fd is -1) ...
OPEN_SKIPPED = 1
#: ... an item has no descriptor or no size (skipped, failed, not a regular file)
OPEN_UNSIZED = 2


def open_sized(paths: list[Any], known: dict[str, str] | None = None,
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each of ``paths`` (``str``; ``None``: skipped) opened read-only without
    following a final symlink and sized: ``(fds, sizes, flags)``, ``int64``; an
    fd < 0 is ``-errno`` (-1: skipped), a size -1 means not a regular file (or
    not opened); ``flags``: :data:`OPEN_SKIPPED` and :data:`OPEN_UNSIZED` where
    they hold for some item (0: every file opened and sized). With ``known``,
    ``paths`` are keys of it, each standing for its path there (a key not in
    it, or not a ``str``, is skipped). The caller closes the descriptors
    (:func:`close_fds`)."""
    n = len(paths)
    fds = np.empty(n, np.int64)
    sizes = np.empty(n, np.int64)
    if known is None:
        flags = _c.open_sized(paths, fds, sizes)
    else:
        flags = _c.open_sized(paths, fds, sizes, known)
    return fds, sizes, flags


def close_fds(fds: np.ndarray) -> None:
    """Close every descriptor >= 0 of ``fds`` (``int64``) and set it to -1."""
    _c.close_fds(fds)


def frames_array(n: int) -> np.ndarray:
    """An (``n`` x 2) ``uint64`` array for zstd walks (see :func:`zstd_frames`),
    none walked yet: frame sizes 0, content sizes :data:`NOT_PARSED`."""
    out = np.zeros((n, 2), np.uint64)
    out[:, 1] = NOT_PARSED
    return out


def place(sizes: np.ndarray, head: int, align: int) -> tuple[np.ndarray, int]:
    """Where each value of ``sizes`` (``int64``; negative: missing, offset -1)
    goes in one buffer, one after another, each start rounded up to ``align``
    after ``head`` bytes (the first at ``(-head) % align``): ``(offsets,
    total)``, ``total`` the end of the last value placed (0: none)."""
    sizes = np.ascontiguousarray(sizes, np.int64)
    offsets = np.empty(len(sizes), np.int64)
    return offsets, _c.place(sizes, head, align, offsets)


def slice_rows(chunk_sels: Sequence[Any], out_sels: Sequence[Any], extents: Sequence[int],
               out_len: int, out_stride: int) -> np.ndarray | None:
    """One dimension's plan rows (``n`` x 7 ``int64``: start, stop, 1, n,
    ``out_stride``, output offset, extent; see ``cuzarr.gpu.plan._dim_rows``)
    where every selection is a forward step-1 slice inside its chunk's extent
    and the output; ``None`` where one is not."""
    rows = np.empty((len(chunk_sels), 7), np.int64)
    ok = _c.slice_rows(chunk_sels, out_sels, extents, out_len, out_stride, rows)
    return rows if ok else None


def read_placed(fds: np.ndarray, sizes: np.ndarray, offsets: np.ndarray, buf: Any,
                frames: np.ndarray | None = None,
                starts: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Each file ``fds[j]`` (of ``sizes[j]`` bytes) read whole by one ``pread``
    into ``buf[offsets[j]:]`` where it fits (with ``starts``, ``int64``: the
    ``sizes[j]`` bytes from ``starts[j]`` on, a byte range of it); returns where
    that worked (``bool``; False: a short read, an error, no descriptor, no
    room). ``frames`` (:func:`frames_array`): row ``j`` of each read item set to
    the zstd walk of the frame it starts with (:func:`zstd_frames`), while its
    bytes are still in the CPU's cache. Returns ``(got, count)``, ``count`` how
    many were read."""
    got = np.empty(len(fds), np.uint8)
    if starts is None:
        count = _c.read_placed(fds, sizes, offsets, buf, got, frames)
    else:
        count = _c.read_placed(fds, sizes, offsets, buf, got, frames, starts)
    return got.view(bool), count


def stream_rows(kind: int, head: int, in_align: int, max_size: int, base: Any,
                offsets: np.ndarray, lengths: np.ndarray, frames: np.ndarray | None,
                slots: np.ndarray, nbytes: np.ndarray, table: np.ndarray,
                whole: np.ndarray | None, out_ptr: int, out_align: int,
                row_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The raw streams of a device batch whose chunks lie in ``base``: item
    ``j`` at ``offsets[j]`` (-1: not there), ``lengths[j]`` bytes, checked as
    ``cuzarr.gpu.scan`` checks them (``kind`` 0: uncompressed, 1: one zstd
    frame, walked here where ``frames`` has no walk of it, 2: numcodecs LZ4)
    against its slot's ``nbytes[j]`` (``slots[j]`` -1: missing) and
    ``max_size``, its raw stream (``head`` bytes in) aligned to ``in_align``.
    Returns ``(rows, owners, done)``: ``row_dtype`` rows
    (``cuzarr.gpu.batch.STREAM_DTYPE``) of the chunks that pass, in item order,
    their items, and per item whether it passed. A passing chunk that is
    ``whole[j]`` (``None``: none) and lands aligned to ``out_align`` at
    ``out_ptr`` (-1: no output address) plus its ``table`` row's
    ``dst_offset`` is decoded there: its row's ``out`` set, its plan row's
    ``count`` zeroed."""
    n = len(offsets)
    rows = np.empty(n, row_dtype)
    owners = np.empty(n, np.int64)
    done = np.zeros(n, np.uint8)
    k = _c.stream_rows(kind, head, in_align, max_size, base,
                       np.ascontiguousarray(offsets, np.int64),
                       np.ascontiguousarray(lengths, np.int64), frames,
                       np.ascontiguousarray(slots, np.int64),
                       np.ascontiguousarray(nbytes, np.int64), table,
                       None if whole is None else np.ascontiguousarray(whole, bool),
                       out_ptr, out_align, rows, owners, done)
    return rows[:k], owners[:k], done.view(bool)


def index_rows(index: np.ndarray, flat: np.ndarray, at: int,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The rows of a shard's checked index (``uint64`` offset, size pairs) for
    its inner chunks at positions ``flat``: ``(offsets, sizes, where,
    empty)``, ``int64``, -1 where a chunk is not stored; ``where``: each
    chunk's place in a buffer holding the shard at ``at`` (-1 everywhere when
    ``at`` < 0); ``empty``: how many are not stored."""
    n = len(flat)
    offs = np.empty(n, np.int64)
    sizes = np.empty(n, np.int64)
    where = np.empty(n, np.int64)
    empty = _c.index_rows(index, np.ascontiguousarray(flat, np.int64), at, offs, sizes, where)
    return offs, sizes, where, empty


def window_rows(kind: int, head: int, in_align: int, max_size: int, base: Any,
                offsets: np.ndarray, lengths: np.ndarray, frames: np.ndarray | None, lo: int,
                positions: np.ndarray | None, read: Any, out_ptr: int, out_align: int,
                row_dtype: np.dtype, plan_dtype: np.dtype) -> tuple[Any, ...] | None:
    """:func:`stream_rows` of a batch of ``n = len(offsets)`` items of a read,
    together with its plan, in one call: item ``j`` is the
    read's item ``lo + j`` (``positions`` None) or ``positions[j]``, in C order
    over ``read.rows`` (``cuzarr.gpu.plan.ReadDims``: each dimension's plan
    rows, the chunks' itemsize, order and byte swap); ``out_ptr`` -1: no
    decode into the output. Returns ``(table, slots, nbytes, whole, total,
    rows, owners, done)``: the batch's ``plan_dtype`` rows, staging slots laid
    out one after another (``total`` bytes in all), slot sizes and whole-block
    flags, then :func:`stream_rows`' answer (``done`` also set for missing
    items); ``None`` where an item's bytes lie elsewhere (offset < 0, length
    >= 0). A missing item (offset and length < 0) reads as the fill value: its
    row flagged ``FLAG_MISSING``, no staging slot (-1, 0 bytes)."""
    n = len(offsets)
    table = np.empty(n, plan_dtype)
    slots = np.empty(n, np.int64)
    nbytes = np.empty(n, np.int64)
    whole = np.empty(n, bool)
    rows = np.empty(n, row_dtype)
    owners = np.empty(n, np.int64)
    done = np.empty(n, np.uint8)
    k, total = _c.window_rows(kind, head, in_align, max_size, base, offsets, lengths, frames,
                              lo, positions, read.rows, read.itemsize, read.fortran, read.swap,
                              out_ptr, out_align, table, slots, nbytes, whole, rows, owners,
                              done)
    if k < 0:
        return None
    return table, slots, nbytes, whole, total, rows[:k], owners[:k], done.view(bool)


def zstd_frames(buf: Any, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The zstd walk of the frame at each ``buf[offsets[j]:][:lengths[j]]``: an
    (n x 2) ``uint64`` array of its compressed size (:data:`WALK_ERROR` where
    magic, frame header, a block header (type, at most 128 KiB, inside the item)
    or the optional checksum does not hold, as ``cuzarr.gpu.scan``'s numpy walk
    checks them) and its content size where nvCOMP's raw decoder may take the
    frame (:data:`NO_CONTENT`: no content size field, a dictionary id, the
    reserved bit set). Each frame header is read once, in C."""
    out = np.empty((len(offsets), 2), np.uint64)
    _c.zstd_frames(buf, np.ascontiguousarray(offsets, np.int64),
                   np.ascontiguousarray(lengths, np.int64), out)
    return out


def zstd_decode_into(decompress: tuple[int, int], srcs: list[Any], starts: np.ndarray,
                     target: np.ndarray, chunk_shape: tuple[int, ...],
                     scratch: np.ndarray) -> np.ndarray:
    """Decode the zstd chunks ``srcs`` (bytes-like) into the blocks of ``target``
    (a writable numpy array of their item type) of ``chunk_shape`` starting at
    the element positions ``starts`` (n x ndim): straight into a block that is
    contiguous, else into ``scratch`` (``uint8``, at least one chunk) and
    copied; in C, one call without the GIL (the work of a shard's inner chunks,
    where one Python call per chunk traded the GIL between the read threads).
    ``decompress``: libzstd's ``ZSTD_decompressDCtx`` and a context of this
    thread, as addresses (``cuzarr.codecs.libzstd.decompress_function``).

    Returns where each chunk decoded to exactly its block's size and was
    placed (``bool``); the caller decodes the others its own way, which raises
    the precise error."""
    status = np.zeros(len(srcs), np.uint8)
    _c.zstd_decode_into(decompress[0], decompress[1], srcs,
                        np.ascontiguousarray(starts, np.int64), target,
                        np.asarray(chunk_shape, np.int64), scratch, status)
    return status.view(bool)
