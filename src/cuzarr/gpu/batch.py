"""The host half of a device read: a batch of stored chunks turned into the raw
streams nvCOMP decodes and the scatter plan (:func:`prepare_batch`), with no
device and no CuPy.

Batches whose chunks lie in one host buffer (read there by the store, or whole
shards) are parsed with numpy over arrays of offsets and sizes
(``gpu.scan``): every zstd frame header and block header, LZ4 size prefix and
uncompressed size is checked at once, and the streams are described where they
lie (no packing copy). Chunks the vectorised scan does not accept (other
codecs, several frames, a malformed header) take the per-chunk parsers of
``gpu.formats``, which raise the precise ``CodecError`` or send the chunk to the
host decoder.
"""

from __future__ import annotations

import itertools
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzarr.errors import CodecError
from cuzarr.gpu import formats, scan
from cuzarr.gpu.plan import (
    PLAN_DTYPE,
    STAGING_ALIGN,
    ReadDims,
    ScatterPlan,
    build_plan,
    whole_block,
)
from cuzarr.indexing.items import ChunkItems
from cuzarr.runtime import native
from cuzarr.storage.local import LocalFile

__all__ = [
    "DIRECT_KINDS",
    "INPUT_ALIGN",
    "MAX_DEVICE_STREAM",
    "NVCOMP_ALGORITHMS",
    "OUTPUT_ALIGN",
    "STREAM_DTYPE",
    "STREAM_HEAD",
    "GpuBatch",
    "place_chunks",
    "prepare_batch",
    "stream_kind",
    "stream_rows",
]

# codec name -> (nvCOMP algorithm, RAW stream codec name used in formats.RawStream)
NVCOMP_ALGORITHMS = {"lz4": "LZ4", "zstd": "Zstd", "deflate": "Deflate"}

# nvCOMP's batched RAW decoders take chunks of at most 16 MiB decoded; larger
# streams are decoded on the host (and uploaded with the batch).
MAX_DEVICE_STREAM = 16 << 20
# Output alignment nvCOMP requires per raw stream codec (nvcomp/lz4.h, zstd.h,
# deflate.h: get_required_decompression_alignment).
OUTPUT_ALIGN = {"lz4": 4, "zstd": 8, "deflate": 4, "copy": 1}
# Input alignment nvCOMP >= 6.0 requires (its C API headers, see
# scripts/nvcomp_alignments.py: zstd and LZ4 none, deflate 4 bytes): streams
# starting there are decoded where they lie, the inner chunks of whole shards
# included. Earlier releases asked 8 bytes of zstd inputs; the gpu extra
# requires nvCOMP 6.0. Not yet run on a device with unaligned inputs
# (tests_gpu/test_gpu_reads.py checks it where one is lent).
INPUT_ALIGN = {"lz4": 1, "zstd": 1, "deflate": 4, "copy": 1}
# Where a chunk's first raw stream starts, per stream_kind: chunks read straight
# into a host buffer are placed so that it lands 16-byte aligned (numcodecs LZ4:
# a 4-byte size; zlib: a 2-byte header; gzip: 10 bytes without optional fields).
STREAM_HEAD = {"zstd": 0, "lz4": 4, "zlib": 2, "gzip": 10, "none": 0}


def stream_kind(compressor: Any) -> str | None:
    """Which parser handles chunks compressed by ``compressor`` (a cuzarr codec, a
    numcodecs codec, or a v3 codec dict): ``"zstd"``, ``"lz4"``, ``"zlib"``,
    ``"gzip"``, ``"blosc"``, ``"none"`` (no compressor), or ``None`` (CPU only)."""
    if compressor is None:
        return "none"
    name = compressor.get("name") if isinstance(compressor, dict) else None
    if name is None:
        name = getattr(compressor, "codec_id", None) or getattr(compressor, "name", None)
    inner = getattr(compressor, "numcodec", None) or getattr(compressor, "codec", None)
    if name in (None, "numcodecs") and inner is not None:
        name = getattr(inner, "codec_id", None)
    name = str(name or "").removeprefix("numcodecs.")
    return {"zstd": "zstd", "lz4": "lz4", "zlib": "zlib", "gzip": "gzip", "blosc": "blosc"}.get(
        name
    )


def _parse(kind: str, data: Any, nbytes: int) -> tuple[list[formats.RawStream], Any]:
    """Raw streams for one chunk (``dst_offset`` relative to the chunk) and the
    blosc header when the chunk needs an unshuffle."""
    if kind == "none":
        if len(data) != nbytes:
            raise CodecError(f"uncompressed chunk has {len(data)} bytes, expected {nbytes}")
        return [formats.RawStream("copy", 0, nbytes, nbytes)], None
    if kind == "zstd":
        if formats.zstd_frame_info(data).content_size is None:
            # nvCOMP's RAW Zstd takes the output size from the frame header.
            raise formats.UnsupportedStream("zstd frame without a content size")
        return [formats.parse_zstd(data, nbytes)], None
    if kind == "lz4":
        return [formats.parse_lz4(data, nbytes)], None
    if kind == "zlib":
        return [formats.parse_zlib(data, nbytes)[0]], None
    if kind == "gzip":
        return [formats.parse_gzip(data, nbytes).stream], None
    if kind == "blosc":
        ch = formats.parse_blosc(data, nbytes)
        return ch.streams, (ch if ch.shuffle == 1 and ch.typesize > 1 else None)
    raise formats.UnsupportedStream(f"no GPU decoder for {kind!r}")


# A raw stream: ``n`` bytes at ``src`` of the uploaded buffer decode to ``size``
# bytes at ``dst`` of the staging buffer, of the scratch buffer (``scratch``:
# blosc before its unshuffle), or of the output itself (``out``: a whole chunk
# that is one contiguous block of a C-contiguous output, decoded straight there).
STREAM_DTYPE = np.dtype([("src", "<i8"), ("n", "<i8"), ("dst", "<i8"), ("size", "<i8"),
                         ("scratch", "?"), ("out", "?")])


def stream_rows(src: Any, n: Any, dst: Any, size: Any, scratch: Any = False,
                out: Any = False) -> np.ndarray:
    """``STREAM_DTYPE`` rows from columns (arrays or lists of equal length)."""
    rows = np.empty(len(src), STREAM_DTYPE)
    rows["src"], rows["n"], rows["dst"], rows["size"] = src, n, dst, size
    rows["scratch"], rows["out"] = scratch, out
    return rows


# a batch's unshuffle rows when it has none (shared, read-only: a batch that
# has some gets its own array)
_NO_UNSHUFFLE = np.zeros(0, formats.UNSHUFFLE_DTYPE)
_NO_UNSHUFFLE.flags.writeable = False


@dataclass(slots=True)
class GpuBatch:
    """Everything ``GpuExecutor.run`` needs, built on the host."""

    plan: ScatterPlan
    # packed compressed streams: one host buffer, and per codec its streams as
    # STREAM_DTYPE rows: offset and length in it, staging (or scratch, when
    # ``scratch``) offset and size it decodes to
    packed: np.ndarray
    streams: dict[str, np.ndarray] = field(default_factory=dict)
    # blosc chunks to unshuffle: formats.UNSHUFFLE_DTYPE rows (scratch -> staging)
    unshuffle: np.ndarray = field(default_factory=lambda: _NO_UNSHUFFLE)
    scratch_nbytes: int = 0
    # chunks decoded on the host: (staging offset, decoded bytes)
    host_decoded: list[tuple[int, np.ndarray]] = field(default_factory=list)
    # uncompressed chunks read from files straight into their slots (GPUDirect
    # Storage): (staging offset, path, file offset, bytes)
    direct: list[tuple[int, str, int, int]] = field(default_factory=list)
    # compressed chunks read from their files straight into device memory
    # (GPUDirect Storage, trusted stores only): (chunk index, offset in the
    # batch's direct area, path, file offset, bytes); their stream rows' ``src``
    # address that area, which replaces the packed buffer (a direct batch packs
    # nothing)
    direct_src: list[tuple[int, int, str, int, int]] = field(default_factory=list)
    # per row of ``streams[codec]``: the index of the chunk it belongs to
    owners: dict[str, np.ndarray] = field(default_factory=dict)
    # zlib / gzip chunks whose decoded bytes are checked against their stored
    # checksum: (chunk index, staging offset, bytes, "adler32" | "crc32", value)
    checks: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    # store keys of the chunks (prefix of the errors they raise), when known
    names: Sequence[str] | None = None
    # streams decoded where they were read (in ``prepare_batch``'s ``base``)
    in_place: int = 0
    # bytes of the direct area (``direct_src``)
    direct_bytes: int = 0


class _Rows:
    """Stream rows collected per codec (arrays from the vectorised scan, tuples
    from the per-chunk parsers), merged into ``GpuBatch.streams`` at the end."""

    def __init__(self) -> None:
        self.arrays: dict[str, list[np.ndarray]] = {}
        self.owners: dict[str, list[np.ndarray]] = {}
        self.tuples: dict[str, list[tuple[int, int, int, int, bool]]] = {}
        self.tuple_owners: dict[str, list[int]] = {}

    def add(self, codec: str, rows: np.ndarray, owners: np.ndarray) -> None:
        if len(rows):
            self.arrays.setdefault(codec, []).append(rows)
            self.owners.setdefault(codec, []).append(owners)

    def add_one(self, codec: str, row: tuple[int, int, int, int, bool], owner: int) -> None:
        self.tuples.setdefault(codec, []).append(row)
        self.tuple_owners.setdefault(codec, []).append(owner)

    def finish(self, batch: GpuBatch) -> None:
        """Into ``batch.streams`` and ``batch.owners``."""
        for codec, rows in self.tuples.items():
            arr = np.zeros(len(rows), STREAM_DTYPE)
            if rows:
                cols = list(zip(*rows, strict=True))
                for name, col in zip(("src", "n", "dst", "size", "scratch"), cols, strict=True):
                    arr[name] = col
            self.add(codec, arr, np.asarray(self.tuple_owners[codec], np.int64))
        for codec, parts in self.arrays.items():
            rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
            owners = self.owners[codec]
            batch.streams[codec] = rows
            batch.owners[codec] = np.concatenate(owners) if len(owners) > 1 else owners[0]


def prepare_batch(
    items: Sequence[Any],
    datas: Sequence[Any],
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    out_shape: Sequence[int],
    out_strides: Sequence[int],
    dtype: np.dtype,
    kind: str | None,
    cpu_decode: Callable[[Any, tuple[int, ...]], np.ndarray],
    *,
    chunk_order: str = "C",
    swap: int = 0,
    names: Sequence[str] | None = None,
    base: np.ndarray | None = None,
    base_offsets: Sequence[int] | np.ndarray | None = None,
    base_sizes: Sequence[int] | np.ndarray | None = None,
    base_frames: np.ndarray | None = None,
    alloc: Callable[[int], np.ndarray] | None = None,
    out_ptr: int | None = None,
    read_dims: Any = None,
) -> GpuBatch:
    """Host half of a GPU read. ``datas[i]`` is chunk ``i``'s stored bytes (``None``:
    missing); ``kind`` is :func:`stream_kind` of the array's compressor (``None``:
    everything on the CPU); ``cpu_decode(data, shape)`` is the pipeline's decode
    (the fallback; it returns the chunk in native order, so ``swap`` must then be
    0 for those chunks — the caller passes ``swap`` only for raw stored bytes).
    ``names[i]`` (a store key) prefixes the message of a ``CodecError`` chunk
    ``i`` raises.

    ``base`` (a uint8 host buffer, pinned on a GPU) holds chunk ``i``'s bytes at
    ``base_offsets[i]`` (-1: not there; ``base_sizes[i]`` bytes, else
    ``len(datas[i])``): those chunks are checked together (``gpu.scan``) and
    their streams decoded where they lie when aligned for nvCOMP, and ``base``
    itself becomes the packed buffer when no stream needs moving (no copy at
    all); ``base_frames``: zstd frames walked as they were read (see
    ``gpu.scan.scan_zstd``). ``alloc(nbytes)`` makes the packed buffer
    otherwise (default: ``numpy.empty``).

    ``out_ptr``: the address of a C-contiguous output, whose whole chunks
    landing as one contiguous block of it (same layout, no byte swap, aligned
    for nvCOMP) are decoded straight into it: their streams' ``out`` is set and
    their plan rows copy nothing (``count`` 0). ``None``: everything goes
    through staging.

    ``read_dims``: the read's per-dimension plan rows (``gpu.plan.plan_read``)
    when ``items`` are items of that read; a batch whose chunks all lie in
    ``base`` is then planned and checked in one C call
    (:func:`_prepare_window`)."""
    if (read_dims is not None and base is not None and kind in _SCANS and len(datas)
            and type(base_offsets) is np.ndarray and isinstance(items, ChunkItems)
            and items.dims is not None):
        # (made only where the C loops are built; whether every chunk lies in
        # base, and so is present, the C call tells)
        got = _prepare_window(read_dims, items, datas, kind, cpu_decode, chunk_order, swap,
                              names, base, base_offsets, base_sizes, base_frames, alloc,
                              out_ptr, dtype.itemsize)
        if got is not None:
            return got
    present = np.fromiter(map(operator.is_not, datas, itertools.repeat(None)), bool, len(datas))
    plan = build_plan(items, chunk_shape, out_shape, out_strides, dtype.itemsize,
                      present=present, chunk_order=chunk_order, swap=swap)
    batch = GpuBatch(plan, np.zeros(0, np.uint8), names=names)
    rows = _Rows()
    todo = present
    if base is not None and base_offsets is not None and kind in _SCANS and len(datas):
        offs = np.asarray(base_offsets, np.int64)
        if base_sizes is None:
            lens = np.fromiter((0 if d is None else len(d) for d in datas), np.int64, len(datas))
        else:
            lens = np.asarray(base_sizes, np.int64)
        done = _scan_in_place(batch, rows, base, offs, lens, present, kind, out_ptr,
                              base_frames)
        todo = present & ~done
    pieces, ext0, pos = _per_chunk(batch, rows, datas, np.flatnonzero(todo), kind, cpu_decode,
                                   chunk_order, swap, base, base_offsets)
    _finish_packed(batch, rows, pieces, base, ext0, pos, alloc)
    return batch


# raw stream codec, bytes of container before it, and the vectorised check
_SCANS = {"zstd": "zstd", "lz4": "lz4", "none": "copy"}
_HEAD = {"zstd": 0, "lz4": 4, "none": 0}


def _scan_in_place(batch: GpuBatch, rows: _Rows, base: np.ndarray, offs: np.ndarray,
                   lens: np.ndarray, present: np.ndarray, kind: str,
                   out_ptr: int | None = None, frames: np.ndarray | None = None) -> np.ndarray:
    """Check the chunks lying in ``base`` at once and describe their streams where
    they lie; returns which chunks are done."""
    if native.available():
        return _scan_native(batch, rows, base, offs, lens, kind, out_ptr, frames)
    plan = batch.plan
    cand = np.flatnonzero(present & (offs >= 0) & (offs + lens <= len(base)))
    o, n, expect = offs[cand], lens[cand], plan.slot_nbytes[cand]
    if kind == "zstd":
        ok = scan.scan_zstd(base, o, n, expect, MAX_DEVICE_STREAM,
                            None if frames is None else frames[cand])
    elif kind == "lz4":
        ok = scan.scan_lz4(base, o, n, expect, MAX_DEVICE_STREAM)
    else:
        ok = scan.scan_copy(o, n, expect)
    codec = _SCANS[kind]
    head = _HEAD[kind]
    ok &= (o + head) % INPUT_ALIGN[codec] == 0
    idx = cand[ok]
    src = offs[idx] + head
    dst = plan.slots[idx]
    to_out = np.zeros(len(idx), bool)
    if out_ptr is not None and len(idx):
        t = plan.table[idx]
        whole = whole_block(t) if plan.whole is None else plan.whole[idx]
        to_out = whole & ((out_ptr + t["dst_offset"]) % OUTPUT_ALIGN[codec] == 0)
        dst = np.where(to_out, t["dst_offset"], dst)
        plan.table["count"][idx[to_out]] = 0  # decoded in place: nothing to scatter
    rows.add(codec, stream_rows(src, lens[idx] - head, dst, plan.slot_nbytes[idx], out=to_out),
             idx.astype(np.int64))
    batch.in_place += len(idx)
    done = np.zeros(len(present), bool)
    done[idx] = True
    return done


def _prepare_window(read: ReadDims, items: ChunkItems, datas: Sequence[Any], kind: str,
                    cpu_decode: Callable[[Any, tuple[int, ...]], np.ndarray], chunk_order: str,
                    swap: int, names: Sequence[str] | None, base: np.ndarray, base_offsets: Any,
                    base_sizes: Any, frames: np.ndarray | None,
                    alloc: Callable[[int], np.ndarray] | None, out_ptr: int | None,
                    itemsize: int) -> GpuBatch | None:
    """``prepare_batch`` of ``items`` of a read planned as ``read`` (a window of
    consecutive items, or a subset: a shard's inner chunks): the plan (its rows
    filled from the read's per-dimension rows, its staging slots; missing
    chunks, offset and size -1, flagged for the fill value) and the in-place
    check of the chunks lying in ``base`` in one C call (``native.window_rows``),
    about 30 numpy operations fewer per batch, each slow right after the
    batch's copies have left the CPU's caches cold. Chunks it does not take go
    through :func:`_per_chunk`, as in ``prepare_batch``. ``None``, with nothing
    done, where a chunk's bytes lie elsewhere (read apart from ``base``)."""
    codec = _SCANS[kind]
    offs = np.asarray(base_offsets, np.int64)
    if base_sizes is None:
        lens = np.fromiter((len(d) for d in datas), np.int64, len(datas))
    else:
        lens = np.asarray(base_sizes, np.int64)
    got = native.window_rows(
        _NATIVE_KINDS[kind], _HEAD[kind], INPUT_ALIGN[codec], MAX_DEVICE_STREAM, base, offs,
        lens, frames, items.start, items.positions_, read,
        -1 if out_ptr is None else out_ptr, OUTPUT_ALIGN[codec], STREAM_DTYPE, PLAN_DTYPE)
    if got is None:
        return None
    table, slots, nbytes, whole, total, stream, owners, done = got
    plan = ScatterPlan(table, total, slots, nbytes, itemsize, whole)
    batch = GpuBatch(plan, base, names=names)
    batch.in_place = len(owners)
    if len(owners) and (len(owners) == len(datas) or done.all()):
        # the common case: every stream decodes where it lies (the others missing)
        batch.streams[codec] = stream
        batch.owners[codec] = owners
        return batch
    rows = _Rows()
    rows.add(codec, stream, owners)
    pieces, ext0, pos = _per_chunk(batch, rows, datas, np.flatnonzero(~done), kind, cpu_decode,
                                   chunk_order, swap, base, base_offsets)
    _finish_packed(batch, rows, pieces, base, ext0, pos, alloc)
    return batch


# the C check's code per kind (cuzarr.runtime._native stream_rows)
_NATIVE_KINDS = {"none": 0, "zstd": 1, "lz4": 2}


def _scan_native(batch: GpuBatch, rows: _Rows, base: np.ndarray, offs: np.ndarray,
                 lens: np.ndarray, kind: str, out_ptr: int | None,
                 frames: np.ndarray | None) -> np.ndarray:
    """:func:`_scan_in_place` in one C call (``native.stream_rows``): the same
    checks, rows and decodes into the output, item by item without numpy
    operations per batch (each costs a few microseconds with the CPU's caches
    cold from the batch's copies)."""
    plan = batch.plan
    codec = _SCANS[kind]
    whole = None
    if out_ptr is not None:
        whole = whole_block(plan.table) if plan.whole is None else plan.whole
    stream, owners, done = native.stream_rows(
        _NATIVE_KINDS[kind], _HEAD[kind], INPUT_ALIGN[codec], MAX_DEVICE_STREAM, base, offs,
        lens, frames, plan.slots, plan.slot_nbytes, plan.table, whole,
        -1 if out_ptr is None else out_ptr, OUTPUT_ALIGN[codec], STREAM_DTYPE)
    rows.add(codec, stream, owners)
    batch.in_place += len(owners)
    return done


def _per_chunk(batch: GpuBatch, rows: _Rows, datas: Sequence[Any], todo: np.ndarray,
               kind: str | None, cpu_decode: Callable[[Any, tuple[int, ...]], np.ndarray],
               chunk_order: str, swap: int, base: np.ndarray | None,
               base_offsets: Any) -> tuple[list[Any], int, int]:
    """The chunks the vectorised scan did not take, one by one (``formats``
    parsers; host decode for what nvCOMP cannot take). Returns the pieces to
    pack, where packing starts (after the base buffer) and ends."""
    plan, names = batch.plan, batch.names
    pieces: list[bytes | memoryview] = []
    # streams not decoded in place are copied after the base buffer
    ext0 = 0 if base is None else -(-len(base) // STAGING_ALIGN) * STAGING_ALIGN
    pos = ext0
    if not len(todo):
        return pieces, ext0, pos
    unshuffle_rows = []
    scratch = 0
    for i in todo.tolist():
        data = datas[i]
        slot = int(plan.slots[i])
        nbytes = int(plan.slot_nbytes[i])
        if isinstance(data, LocalFile):  # read by the executor, from disk
            if kind not in DIRECT_KINDS or nbytes <= MAX_DEVICE_STREAM:
                _direct_chunk(batch, rows, i, data, kind, slot, nbytes)
                continue
            # too large for one nvCOMP stream: read here, decoded on the host
            data = read_file(data.path, data.offset, data.size)
        try:
            streams, blosc = _device_streams(kind, data, nbytes)
        except formats.UnsupportedStream:
            batch.host_decoded.append((slot, _host_decode(plan, i, data, cpu_decode, swap,
                                                          chunk_order, names)))
            continue
        except CodecError as e:
            raise _named(e, names, i) from e
        if kind == "zlib":
            batch.checks.append((i, slot, nbytes, "adler32", formats.parse_zlib(data)[1]))
        elif kind == "gzip":
            batch.checks.append((i, slot, nbytes, "crc32", formats.parse_gzip(data).crc32))
        out_base = slot
        if blosc is not None:  # decode into scratch, unshuffle into the slot
            out_base = scratch
            unshuffle_rows.append(formats.blosc_unshuffle_rows(blosc, scratch, slot))
            scratch += -(-nbytes // STAGING_ALIGN) * STAGING_ALIGN
        mv = memoryview(data).cast("B")
        at = int(base_offsets[i]) if base is not None and base_offsets is not None else -1
        for st in streams:
            if at >= 0 and (at + st.offset) % INPUT_ALIGN.get(st.codec, STAGING_ALIGN) == 0:
                src = at + st.offset  # decoded where it lies in the base buffer
                batch.in_place += 1
            else:
                pieces.append(mv[st.offset : st.offset + st.length])
                src = pos
                pos += -(-st.length // STAGING_ALIGN) * STAGING_ALIGN
            rows.add_one(st.codec, (src, st.length, out_base + st.dst_offset, st.decoded_size,
                                    blosc is not None), i)
    batch.scratch_nbytes = scratch
    if unshuffle_rows:
        batch.unshuffle = np.concatenate(unshuffle_rows)
    return pieces, ext0, pos


def read_file(path: str, offset: int, n: int) -> bytes:
    """``n`` bytes of the file ``path`` at ``offset`` (all of them, or ``CodecError``)."""
    with open(path, "rb", buffering=0) as f:
        data = os.pread(f.fileno(), n, offset)
    if len(data) != n:
        raise CodecError(f"{path}: read {len(data)} bytes, expected {n} (file changed?)")
    return data


def _direct_chunk(batch: GpuBatch, rows: _Rows, i: int, file: LocalFile, kind: str | None,
                  slot: int, nbytes: int) -> None:
    """Chunk ``i`` read by the executor from ``file``: uncompressed, straight into
    its staging slot; zstd or LZ4, into the batch's direct area, its one raw
    stream decoded from there (no host sees its bytes: nvCOMP's statuses and
    decoded sizes are its checks, as ``gpu.untrusted`` stores never get here)."""
    if kind == "none":
        if file.size != nbytes:
            raise _named(
                CodecError(f"uncompressed chunk has {file.size} bytes, expected {nbytes}"),
                batch.names, i,
            )
        batch.direct.append((slot, file.path, file.offset, nbytes))
        return
    head = STREAM_HEAD[kind] if kind in DIRECT_KINDS else -1
    if head < 0 or file.size <= head:
        raise _named(CodecError(f"{kind} chunk of {file.size} bytes cannot be read directly"),
                     batch.names, i)
    at = batch.direct_bytes
    batch.direct_src.append((i, at, file.path, file.offset, file.size))
    batch.direct_bytes = at + -(-file.size // STAGING_ALIGN) * STAGING_ALIGN
    rows.add_one(DIRECT_KINDS[kind], (at + head, file.size - head, slot, nbytes, False), i)


# stream kinds whose chunk files nvCOMP decodes where they are read (one raw
# stream at STREAM_HEAD) -> the raw stream's codec
DIRECT_KINDS = {"zstd": "zstd", "lz4": "lz4"}


def _device_streams(kind: str | None, data: Any, nbytes: int) -> tuple[list[Any], Any]:
    """A chunk's raw streams, or ``UnsupportedStream`` when nvCOMP cannot take it."""
    if kind is None:
        raise formats.UnsupportedStream("codec pipeline has no GPU decoder")
    streams, blosc = _parse(kind, data, nbytes)
    if any(st.decoded_size > MAX_DEVICE_STREAM for st in streams):
        raise formats.UnsupportedStream("stream larger than nvCOMP's batch limit")
    if any(st.dst_offset % OUTPUT_ALIGN.get(st.codec, 1) for st in streams):
        # nvCOMP wants every output aligned; blosc splits blocks at
        # type-size steps (slots themselves are 16-byte aligned).
        raise formats.UnsupportedStream("misaligned stream output")
    return streams, blosc


def _host_decode(plan: ScatterPlan, i: int, data: Any,
                 cpu_decode: Callable[[Any, tuple[int, ...]], np.ndarray], swap: int,
                 chunk_order: str, names: Sequence[str] | None) -> np.ndarray:
    """Chunk ``i`` decoded by the pipeline, as the bytes of its staging slot."""
    shape = tuple(int(s) for s in plan.table["chunk_shape"][i][: plan.table["ndim"][i]])
    try:
        chunk = np.asarray(cpu_decode(data, shape))
    except CodecError as e:
        raise _named(e, names, i) from e
    if swap:
        chunk = chunk.astype(chunk.dtype.newbyteorder())  # stored order, as the table says
    return np.frombuffer(chunk.tobytes(order=chunk_order), np.uint8)


def _finish_packed(batch: GpuBatch, rows: _Rows, pieces: list[Any], base: np.ndarray | None,
                   ext0: int, pos: int, alloc: Callable[[int], np.ndarray] | None) -> None:
    """The stream table and the buffer uploaded: ``base`` itself when every stream
    lies in it, the copied streams alone when none does, else both."""
    rows.finish(batch)
    if batch.direct_src and (pieces or base is not None):
        raise ValueError("a batch read directly to the device packs no host bytes")
    if base is not None and batch.in_place == 0:
        # nothing decodes from the base buffer: upload the copied streams alone
        for arr in batch.streams.values():
            arr["src"] -= ext0
        batch.packed = _pack(pieces, pos - ext0, 0, alloc)
    elif base is not None and not pieces:
        batch.packed = base
    else:
        packed = _pack(pieces, pos, ext0, alloc)
        if base is not None:
            packed[: len(base)] = base
        batch.packed = packed


def _named(e: CodecError, names: Sequence[str] | None, i: int) -> CodecError:
    if names is None or str(e).startswith(f"{names[i]}: "):
        return e
    return type(e)(f"{names[i]}: {e}")


def _empty_bytes(n: int) -> np.ndarray:
    return np.empty(n, np.uint8)


def _pack(pieces: Sequence[Any], nbytes: int, start: int,
          alloc: Callable[[int], np.ndarray] | None) -> np.ndarray:
    """A buffer of ``nbytes`` with ``pieces`` copied in from ``start``, each at
    a ``STAGING_ALIGN`` boundary."""
    packed = (alloc or _empty_bytes)(nbytes)
    p = start
    for piece in pieces:
        packed[p : p + len(piece)] = np.frombuffer(piece, np.uint8)
        p += -(-len(piece) // STAGING_ALIGN) * STAGING_ALIGN
    return packed


def place_chunks(sizes: Sequence[int | None] | np.ndarray, kind: str | None,
                 alloc: Callable[[int], np.ndarray] | None = None,
                 ) -> tuple[np.ndarray, list[int] | np.ndarray]:
    """A host buffer for whole chunks of ``sizes`` (None, or negative in an
    ``int64`` array: missing) and where each goes (-1: missing): every chunk's
    first raw stream (``STREAM_HEAD`` of ``kind``) lands 16-byte aligned, so
    nvCOMP can decode it in place. The offsets are an ``int64`` array where the
    C placement made them (what the C read takes), else a list."""
    head = STREAM_HEAD.get(kind or "", 0)
    if isinstance(sizes, np.ndarray):
        n = sizes
    else:
        n = np.array([-1 if x is None else x for x in sizes], np.int64)
    if native.available():  # one C call, not eight numpy operations
        offsets, total = native.place(n, head, STAGING_ALIGN)
        return (alloc or _empty_bytes)(max(total, 1)), offsets
    present = n >= 0
    # the first start is aligned for its stream; each next one follows the
    # previous chunk rounded up to the alignment, which keeps it aligned
    step = np.where(present, -(-n // STAGING_ALIGN) * STAGING_ALIGN, 0)
    first = (-head) % STAGING_ALIGN
    starts = first + np.cumsum(step) - step
    ends = starts + np.where(present, n, 0)
    total = int(ends[present].max()) if present.any() else 0
    offsets = np.where(present, starts, -1).tolist()
    return (alloc or _empty_bytes)(max(total, 1)), offsets
