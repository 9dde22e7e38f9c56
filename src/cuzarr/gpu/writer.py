"""Writes from device memory: gather chunks on the GPU, compress them with nvCOMP.

For a write whose value is a CuPy array, each batch of chunks is built in one
device staging buffer: old chunks that are only partly overwritten are decoded
on the host and uploaded (one pinned copy per batch), one ``cuzarr_gather``
launch copies the value's regions into their chunk slots (new chunks padded with
the fill value), chunks equal to the fill value are found with one comparison
per batch (and deleted, unless ``write_empty_chunks``), and the rest are
compressed by one batched nvCOMP call. Only the compressed bytes cross to the
host, where each raw stream gets the container numcodecs writes: a zstd frame
as is, LZ4 with its 4-byte size prefix, zlib with header and Adler-32, gzip with
header, CRC-32 and size (checksums computed on the device, ``gpu.checksums``).

Blosc with lz4 or zstd inside (byte shuffle or none) is written on the device
too: each chunk's blocks are byte-shuffled by ``cuzarr_shuffle``, every block of
the batch is compressed in the same batched call, and the host assembles the
c-blosc 1.x container (one stream per block, ``BLOSC_DONT_SPLIT``; blocks that
do not shrink are stored raw).

Codecs nvCOMP does not encode (bit shuffle, blosclz/zlib/snappy blosc, filters,
transpose, crc32c, zstd with checksums) and chunks larger than nvCOMP's batch
limit take the host route:
the gathered chunks come back in one copy per batch and the pipeline encodes
them. :class:`HostEncoder` runs every step with numpy (``gpu.emulate``), so the
CPU test suite checks the plans and the containers the GPU path produces.
Whole shards of sharded arrays are built from their inner chunks by the same
steps (:mod:`cuzarr.gpu.shardwriter`, through :meth:`DeviceWriter.encode_items`).
"""

from __future__ import annotations

import itertools
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzarr.buffer.gpu import is_device_array
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu import formats
from cuzarr.gpu.executor import (
    StreamCodecs,
    TwinStats,
    copy_word,
    leased,
    upload_to_slots,
)
from cuzarr.gpu.plan import (
    FLAG_PAD,
    STAGING_ALIGN,
    ScatterPlan,
    build_plan,
    fill_bytes,
)
from cuzarr.gpu.reader import device_codec, nvcomp_usable, swap_unit

__all__ = [
    "DeviceWriter",
    "EncodeBatch",
    "GpuEncoder",
    "HostEncoder",
    "encode_kind",
]

# Containers the GPU writes, and the raw stream codec nvCOMP produces for each.
ENCODE_STREAM = {"none": "copy", "zstd": "zstd", "lz4": "lz4", "zlib": "deflate", "gzip": "deflate"}
# nvCOMP's batched compressors take chunks of at most this many bytes; larger
# chunks are encoded on the host.
# Checksum blocks: one device thread each (4 KiB: 256 threads per 1 MiB chunk).
CHECKSUM_BLOCK = 4096
ENCODE_MAX_CHUNK = {"copy": 1 << 62, "zstd": 16 << 20, "lz4": 16 << 20, "deflate": 64 << 10}


@dataclass(frozen=True)
class BloscParams:
    """How the device writes blosc chunks: one ``cname`` stream per block
    (``blocksize`` bytes), byte-shuffled first when ``shuffle``."""

    cname: str
    shuffle: bool
    typesize: int
    blocksize: int


# Blocks of a device-written blosc chunk when the codec leaves the size to blosc.
BLOSC_BLOCKSIZE = 256 << 10


def encode_kind(pipeline: Any, itemsize: int = 1) -> tuple[str | None, int, BloscParams | None]:
    """``(container, level, blosc parameters)`` the device writes for
    ``pipeline``'s chunks, or ``(None, 0, None)`` when the pipeline encodes on
    the host."""
    kind, _stored, _order = device_codec(pipeline)
    comp = _compressor(pipeline)
    conf = _config(comp)
    if kind == "blosc":
        params = _blosc_params(conf, itemsize)
        if params is None:
            return None, 0, None
        return "blosc", int(conf.get("clevel", 5)), params
    if kind not in ENCODE_STREAM:
        return None, 0, None
    if kind == "zstd" and conf.get("checksum"):
        return None, 0, None  # nvCOMP writes no content checksum
    level = conf.get("level", conf.get("clevel", 1)) if comp is not None else 0
    return kind, int(level or 0), None


def _blosc_params(conf: dict[str, Any], itemsize: int) -> BloscParams | None:
    cname = conf.get("cname")
    if cname not in ("lz4", "zstd"):
        return None  # blosclz, lz4hc, zlib, snappy: host
    shuffle = conf.get("shuffle", 0)
    typesize = int(conf.get("typesize") or itemsize or 1)
    if typesize > 255:
        return None  # the blosc header holds one byte of it
    if shuffle in ("bitshuffle", 2) or (shuffle == -1 and typesize == 1):
        return None  # bit shuffle: host
    byte = shuffle in ("shuffle", 1, -1) and typesize > 1
    step = 16 * typesize  # blocks start nvCOMP-aligned and on whole items
    req = int(conf.get("blocksize") or BLOSC_BLOCKSIZE)
    if req > ENCODE_MAX_CHUNK[cname]:
        return None  # blocks above nvCOMP's batch limit: host
    return BloscParams(cname, byte, typesize, max(step, req - req % step))


def _compressor(pipeline: Any) -> Any:
    bb = getattr(pipeline, "bytes_bytes", None)
    if bb is not None:
        return bb[0] if bb else None
    return getattr(pipeline, "compressor", None)


def _config(comp: Any) -> dict[str, Any]:
    if comp is None:
        return {}
    get = getattr(comp, "get_config", None)
    if callable(get):
        return dict(get())
    to_json = getattr(comp, "to_json", None)
    if callable(to_json):
        return dict(to_json().get("configuration") or {})
    return {}


@dataclass
class EncodeBatch:
    """One batch of chunks to build and encode (host half of a device write)."""

    plan: ScatterPlan  # gather table: value regions -> chunk slots
    kind: str | None  # container, or None: return the raw chunks for host encoding
    level: int
    fill: Any
    dtype: np.dtype  # the value's (native) dtype
    swap: int  # byte-swap unit from native to stored order
    check_empty: bool
    # (slot, stored bytes) of old chunks a partial write updates
    host_old: list[tuple[int, np.ndarray]] = field(default_factory=list)
    blosc: BloscParams | None = None


def _aligned(n: int) -> int:
    return -(-n // STAGING_ALIGN) * STAGING_ALIGN


class _Encoder(ABC):
    """The flow of a device write, shared by the GPU and its host twin; the
    subclasses supply the memory and the primitive steps."""

    def encode(self, batch: EncodeBatch, value: Any) -> list[bytes | None]:
        """The stored bytes of every chunk of ``batch`` (``None``: the chunk holds
        only the fill value and is to be deleted). With ``batch.kind`` ``None``,
        the raw chunk bytes (native order, chunk layout) for the host to encode."""
        plan = batch.plan
        n = len(plan.table)
        if n == 0:
            return []
        staging = self._staging(plan.staging_nbytes)
        if batch.host_old:
            self._upload(batch.host_old, staging)
        self._gather(plan, staging, value, batch.fill, batch.dtype)
        offsets = [int(o) for o in plan.slots]
        sizes = [int(s) for s in plan.slot_nbytes]
        keep = list(range(n))
        if batch.check_empty:
            empty = self._empty(staging, offsets, sizes, batch)
            keep = [i for i in range(n) if not empty[i]]
        result: list[bytes | None] = [None] * n
        self._count(batches=1, chunks=n, empty=n - len(keep), rmw=len(batch.host_old))
        if not keep:
            return self._done(result)
        ko = [offsets[i] for i in keep]
        ks = [sizes[i] for i in keep]
        if batch.kind == "blosc" and batch.blosc is not None:
            self._count(**{"container__blosc": len(keep)})
            for i, chunk in zip(keep, self._blosc(staging, ko, ks, batch), strict=True):
                result[i] = chunk
            return self._done(result)
        stream = ENCODE_STREAM.get(batch.kind or "none", "copy")
        if batch.kind is None or batch.kind == "none" or max(ks) > ENCODE_MAX_CHUNK[stream]:
            self._count(**{"downloaded": len(keep), f"container__{batch.kind}": len(keep)})
            raws = self._download(staging, ko, ks)
            for i, raw in zip(keep, raws, strict=True):
                result[i] = raw
            if batch.kind is not None and batch.kind != "none":
                # Too large for nvCOMP: encode these on the host, same container.
                for i, raw in zip(keep, raws, strict=True):
                    result[i] = _host_container(batch.kind, batch.level, raw)
            return self._done(result)
        self._count(**{f"container__{batch.kind}": len(keep)})
        comp = self._compress(stream, staging, ko, ks, batch.level)
        sums: list[int] = [0] * len(keep)
        if batch.kind in ("zlib", "gzip"):
            sums = self._checksums("adler32" if batch.kind == "zlib" else "crc32", staging, ko, ks)
        for j, i in enumerate(keep):
            result[i] = _wrap(batch.kind, comp[j], ks[j], sums[j], batch.level)
        return self._done(result)

    def _count(self, **kw: int) -> None:  # noqa: B027 - optional hook, not a step
        """Statistics hook (the host twin counts what it ran)."""

    def _blosc(self, staging: Any, offsets: list[int], sizes: list[int],
               batch: EncodeBatch) -> list[bytes]:
        """Blosc chunks: each chunk's blocks byte-shuffled into scratch (when
        asked), every block of the batch compressed in one batched call, the
        containers assembled on the host (incompressible blocks stored as is)."""
        p = batch.blosc
        assert p is not None
        layout = []  # per chunk: (blocksize, blocks)
        rows = []
        scratch_off = []
        pos = 0
        for off, n in zip(offsets, sizes, strict=True):
            bs = formats.blosc_blocksize(n, p.blocksize, p.typesize)
            blocks = formats.blosc_blocks(n, bs)
            layout.append((bs, blocks))
            if p.shuffle:
                rows.append(formats.block_rows(blocks, p.typesize, off, pos))
            scratch_off.append(pos)
            pos += _aligned(n)
        if p.shuffle:
            src = self._staging(pos)
            self._shuffle(np.concatenate(rows), staging, src)
            bases = scratch_off
        else:
            src = staging
            bases = offsets
        s_off = [b + o for b, (_bs, blocks) in zip(bases, layout, strict=True) for o, _n in blocks]
        s_len = [n for _bs, blocks in layout for _o, n in blocks]
        comp = self._compress(p.cname, src, s_off, s_len, batch.level) if s_off else []
        # Blocks that did not shrink are stored raw: fetch just those.
        raw_idx = [j for j, (c, n) in enumerate(zip(comp, s_len, strict=True)) if len(c) >= n]
        raws = dict(zip(raw_idx, self._download(src, [s_off[j] for j in raw_idx],
                                                [s_len[j] for j in raw_idx]), strict=True)) \
            if raw_idx else {}
        out = []
        j = 0
        for n, (bs, blocks) in zip(sizes, layout, strict=True):
            cs = comp[j : j + len(blocks)]
            rb = [raws.get(j + k, b"") for k in range(len(blocks))]
            fixed = [None if (j + k) in raws else cs[k] for k in range(len(blocks))]
            out.append(formats.wrap_blosc(fixed, rb, n, bs, p.typesize, p.cname, p.shuffle))
            j += len(blocks)
        return out

    @abstractmethod
    def _shuffle(self, rows: np.ndarray, src: Any, dst: Any) -> None:
        """A primitive step (see the subclasses)."""

    # -- primitives (subclasses) --------------------------------------------------
    @abstractmethod
    def _staging(self, nbytes: int) -> Any:
        """A primitive step (see the subclasses)."""

    @abstractmethod
    def _upload(self, chunks: list[tuple[int, np.ndarray]], staging: Any) -> None:
        """A primitive step (see the subclasses)."""

    @abstractmethod
    def _gather(self, plan: ScatterPlan, staging: Any, value: Any, fill: Any, dtype: Any) -> None:
        """A primitive step (see the subclasses)."""

    @abstractmethod
    def _rows(self, staging: Any, offsets: list[int], size: int) -> Any:
        """A primitive step (see the subclasses)."""

    def _empty(self, staging: Any, offsets: list[int], sizes: list[int], batch: EncodeBatch) -> Any:
        """Per chunk: does it hold only the fill value? (bytes compared with the
        fill's stored bytes; for a NaN float fill, every element NaN)."""
        out = np.zeros(len(offsets), dtype=bool)
        dt = batch.dtype
        isz = dt.itemsize
        fb = fill_bytes(batch.fill, dt)
        if batch.swap > 1:
            fb = fb.reshape(-1, batch.swap)[:, ::-1].reshape(-1)
        # Floats and complex numbers compare per component (the real and the
        # imaginary part): a NaN component of the fill matches any NaN there, as
        # the host's check does; the others compare bits (-0.0 is not 0.0).
        cs = isz // 2 if dt.kind == "c" else isz
        fdt = np.dtype(f"f{cs}") if dt.kind in "fc" else None
        fill_parts = (np.asarray(batch.fill, dtype=dt).reshape(1).view(fdt)
                      if fdt is not None else None)
        nan_fill = fill_parts is not None and bool(np.isnan(fill_parts).any())
        by_size: dict[int, list[int]] = {}
        for i, s in enumerate(sizes):
            by_size.setdefault(s, []).append(i)
        for size, idx in by_size.items():
            if size == 0:
                out[idx] = True
                continue
            rows = self._rows(staging, [offsets[i] for i in idx], size)
            xp = _xp(rows)
            if nan_fill:
                assert fdt is not None and fill_parts is not None
                items = rows.reshape(len(idx), size // cs, cs)
                if batch.swap > 1:
                    items = items[:, :, ::-1]
                parts = xp.ascontiguousarray(items).reshape(len(idx), size).view(fdt)
                parts = parts.reshape(len(idx), size // isz, isz // cs)
                bits = np.dtype(f"u{cs}")
                eq = xp.ones(len(idx), dtype=bool)
                for j, f in enumerate(fill_parts):
                    if np.isnan(f):
                        eq &= xp.isnan(parts[:, :, j]).all(axis=1)
                    else:
                        eq &= (parts[:, :, j].view(bits) == f.view(bits)).all(axis=1)
            else:
                pattern = xp.asarray(np.tile(fb, size // isz))
                eq = (rows == pattern[None, :]).all(axis=1)
            out[idx] = _to_host(eq)
        return out

    @abstractmethod
    def _download(self, staging: Any, offsets: list[int], sizes: list[int]) -> list[bytes]:
        """A primitive step (see the subclasses)."""

    @abstractmethod
    def _compress(
        self, stream: str, staging: Any, offsets: list[int], sizes: list[int], level: int
    ) -> list[bytes]:
        """A primitive step (see the subclasses)."""

    @abstractmethod
    def _checksums(self, kind: str, staging: Any, offsets: list[int], sizes: list[int]) -> list[int]:
        """A primitive step (see the subclasses)."""

    def _done(self, result: list[bytes | None]) -> list[bytes | None]:
        return result


def _xp(a: Any) -> Any:
    if is_device_array(a):
        from cuzarr.buffer.gpu import import_cupy

        return import_cupy()
    return np


def _to_host(a: Any) -> np.ndarray:
    get = getattr(a, "get", None)
    return np.asarray(get() if callable(get) and is_device_array(a) else a)


def _wrap(kind: str | None, raw: bytes, size: int, check: int, level: int) -> bytes:
    if kind == "zstd":
        return raw
    if kind == "lz4":
        return formats.wrap_lz4(raw, size)
    if kind == "zlib":
        return formats.wrap_zlib(raw, adler32=check, level=level)
    if kind == "gzip":
        return formats.wrap_gzip(raw, check, size)
    raise CodecError(f"no container for {kind!r}")


def _host_container(kind: str, level: int, raw: bytes) -> bytes:
    stream = ENCODE_STREAM[kind]
    comp = _host_compress(stream, memoryview(raw), level)
    check = 0
    if kind == "zlib":
        check = zlib.adler32(raw)
    elif kind == "gzip":
        check = zlib.crc32(raw)
    return _wrap(kind, comp, len(raw), check, level)


def _host_compress(stream: str, data: memoryview, level: int) -> bytes:
    if stream == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=level or 1, write_content_size=True).compress(data)
    if stream == "lz4":
        import lz4.block

        return lz4.block.compress(bytes(data), store_size=False)
    if stream == "deflate":
        c = zlib.compressobj(level if 0 <= level <= 9 else 1, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    raise CodecError(f"unknown stream codec {stream!r}")


class HostEncoder(TwinStats, _Encoder):
    """The numpy twin of :class:`GpuEncoder` (``gpu.emulate``): the same flow,
    with the staging buffer in host memory, ``execute_gather_numpy`` for the
    gather kernel, and lz4/zstandard/zlib producing the raw streams nvCOMP would.
    ``stats`` sums what every host twin ran: "batches", "chunks", "empty"
    (deleted), "rmw" (old chunks uploaded), "container:<kind>" (chunks written
    in that container; "container:None": encoded by the host pipeline),
    "downloaded" (chunks that came back raw)."""

    def _staging(self, nbytes: int) -> np.ndarray:
        return np.zeros(max(nbytes, 1), np.uint8)

    def _upload(self, chunks: list[tuple[int, np.ndarray]], staging: np.ndarray) -> None:
        for slot, raw in chunks:
            staging[slot : slot + len(raw)] = raw

    def _gather(self, plan: ScatterPlan, staging: Any, value: Any, fill: Any, dtype: Any) -> None:
        from cuzarr.gpu.plan import execute_gather_numpy

        execute_gather_numpy(plan.table, staging, value, fill)

    def _rows(self, staging: np.ndarray, offsets: list[int], size: int) -> np.ndarray:
        return np.stack([staging[o : o + size] for o in offsets])

    def _shuffle(self, rows: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
        formats.shuffle_numpy(rows, src, dst)

    def _download(self, staging: np.ndarray, offsets: list[int], sizes: list[int]) -> list[bytes]:
        return [staging[o : o + s].tobytes() for o, s in zip(offsets, sizes, strict=True)]

    def _compress(
        self, stream: str, staging: np.ndarray, offsets: list[int], sizes: list[int], level: int
    ) -> list[bytes]:
        return [
            _host_compress(stream, memoryview(staging[o : o + s]), level)
            for o, s in zip(offsets, sizes, strict=True)
        ]

    def _checksums(
        self, kind: str, staging: np.ndarray, offsets: list[int], sizes: list[int]
    ) -> list[int]:
        from cuzarr.gpu import checksums

        return [int(c) for c in checksums.host_chunk_checksums(
            staging, offsets, sizes, kind, block=CHECKSUM_BLOCK)]


class GpuEncoder(_Encoder, StreamCodecs):
    """Builds and compresses chunks on the current CUDA device (CuPy + nvCOMP),
    on its own stream; returns once the compressed bytes are on the host."""

    threads = 256

    def __init__(self) -> None:
        from cuzarr.buffer.gpu import import_cupy

        StreamCodecs.__init__(self, import_cupy())
        self._keep: list[Any] = []

    def encode(self, batch: EncodeBatch, value: Any) -> list[bytes | None]:
        from cuzarr.gpu.reader import wait_for_user_stream

        wait_for_user_stream(self.stream)  # the value may still be computed there
        with self.stream:
            return super().encode(batch, value)

    def _done(self, result: list[bytes | None]) -> list[bytes | None]:
        self.stream.synchronize()
        self._keep.clear()
        return result

    def _staging(self, nbytes: int) -> Any:
        return self.cp.empty(max(nbytes, 1), dtype=self.cp.uint8)

    def _upload(self, chunks: list[tuple[int, np.ndarray]], staging: Any) -> None:
        # released once encode() has synchronized
        self._keep.append(upload_to_slots(self.cp, self.stream, chunks, staging))

    def _gather(self, plan: ScatterPlan, staging: Any, value: Any, fill: Any, dtype: Any) -> None:
        from cuzarr.gpu import kernels
        from cuzarr.gpu.plan import check_plan_bounds

        cp = self.cp
        table = plan.table
        lo = sum((s - 1) * st for s, st in zip(value.shape, value.strides) if st < 0)
        hi = sum((s - 1) * st for s, st in zip(value.shape, value.strides) if st > 0)
        check_plan_bounds(table, plan.staging_nbytes, lo, hi + value.itemsize)
        fb = np.concatenate([fill_bytes(fill, np.dtype(dtype)), np.zeros(16, np.uint8)])
        fill_dev = cp.asarray(fb)
        w = copy_word(table, plan.itemsize, [value.data.ptr, staging.data.ptr, fill_dev.data.ptr])
        fn = kernels.get_function("scatter.cu", kernels.GATHER.format(kernels.word_type(w)))
        rows = cp.asarray(table.view(np.uint8))
        words = max(1, int(table["chunk_count"].max()) * plan.itemsize // w)
        grid = kernels.row_grid(words, len(table), self.threads)
        fn(grid, (self.threads,), (rows, np.int64(len(table)), staging, value, fill_dev))

    def _shuffle(self, rows: np.ndarray, src: Any, dst: Any) -> None:
        from cuzarr.gpu import kernels

        table = self.cp.asarray(rows.view(np.uint8))
        fn = kernels.get_function("unshuffle.cu", kernels.SHUFFLE)
        grid = kernels.row_grid(int(rows["nbytes"].max()), len(rows), self.threads)
        fn(grid, (self.threads,), (table, np.int64(len(rows)), src, dst))

    def _rows(self, staging: Any, offsets: list[int], size: int) -> Any:
        cp = self.cp
        offs = np.asarray(offsets, dtype=np.int64)
        step = _aligned(size)
        if len(offs) == 1 or np.all(np.diff(offs) == step):
            start = int(offs[0])
            return staging[start : start + step * len(offs)].reshape(len(offs), step)[:, :size]
        # Slots of this size not evenly spaced (edge chunks between them): copy
        # them out. (An int64 index per byte, as fancy indexing takes, would need
        # eight times the chunks' size in device memory.)
        return cp.stack([staging[o : o + size] for o in offs.tolist()])

    def _download(self, staging: Any, offsets: list[int], sizes: list[int]) -> list[bytes]:
        # Pack the wanted ranges on the device: one copy of just those bytes.
        packed = self.cp.concatenate(
            [staging[o : o + n] for o, n in zip(offsets, sizes, strict=True)]
        )
        host = self.cp.asnumpy(packed, stream=self.stream)  # blocking
        starts = np.cumsum([0, *sizes])
        return [host[int(a) : int(b)].tobytes() for a, b in itertools.pairwise(starts)]

    def _compress(
        self, stream: str, staging: Any, offsets: list[int], sizes: list[int], level: int
    ) -> list[bytes]:
        from nvidia import nvcomp

        cp = self.cp
        codec = self._codec(stream)
        sp = int(self.stream.ptr)
        j = sizes.index(max(sizes))
        largest = nvcomp.as_array(staging[offsets[j] : offsets[j] + sizes[j]], sp)
        cap = _aligned(int(codec.get_max_comp_buffer_size(largest)))
        out = cp.empty(cap * len(sizes), dtype=cp.uint8)
        srcs = nvcomp.as_arrays(staging, offsets, sizes, sp)
        outs = nvcomp.as_arrays(out, [i * cap for i in range(len(sizes))], [cap] * len(sizes), sp)
        res = codec.encode(srcs, out=outs)
        used = [int(n) for n in res.buffer_sizes]  # waits for the encode
        if any(n > cap for n in used):
            raise CodecError("nvCOMP reported a compressed size above its own bound")
        # Only the compressed bytes cross to the host: pack them, one copy.
        starts = np.cumsum([0, *used])
        packed = cp.concatenate([out[i * cap : i * cap + n] for i, n in enumerate(used)])
        host = cp.asnumpy(packed, stream=self.stream)  # blocking
        return [host[int(a) : int(b)].tobytes() for a, b in itertools.pairwise(starts)]

    def _checksums(self, kind: str, staging: Any, offsets: list[int], sizes: list[int]) -> list[int]:
        from cuzarr.gpu import checksums

        return [int(c) for c in checksums.device_chunk_checksums(
            staging, offsets, sizes, kind, stream=self.stream, block=CHECKSUM_BLOCK)]


def _encoder(device: int | None) -> Any:
    """An encoder for CUDA device ``device`` (``None``: the host twin), the
    calling thread's for the ``with`` block."""
    return leased("encoders", device, HostEncoder, GpuEncoder)


class DeviceWriter:
    """Builds and encodes batches of chunk items from one value.

    ``pipeline`` encodes on the host when the device cannot, and decodes old
    chunks for partial updates; ``chunk_shape(coords)`` gives a chunk's stored
    shape; ``order`` the chunks' memory order.
    """

    def __init__(
        self,
        pipeline: Any,
        value: Any,
        fill: Any,
        chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
        write_empty_chunks: bool,
        device: bool,
    ) -> None:
        self.pipeline = pipeline
        self.value = value
        self.fill = fill
        self.chunk_shape = chunk_shape
        self.write_empty_chunks = write_empty_chunks
        self.device = device
        self.dtype = np.dtype(value.dtype)
        _kind, stored, self.order = device_codec(pipeline)
        self.kind, self.level, self.blosc = encode_kind(pipeline, self.dtype.itemsize)
        if self.kind not in (None, "none") and device and not nvcomp_usable():
            self.kind, self.blosc = None, None  # no nvCOMP: the host encodes (warned once)
        if (
            self.kind is not None
            and stored is not None
            and stored.newbyteorder("=") != self.dtype.newbyteorder("=")
        ):
            self.kind = None
        # Device-built chunks are in stored byte order only when the device
        # compresses them; the host encodes native-order chunks itself.
        self.swap = swap_unit(stored, self.dtype) if self.kind is not None and stored is not None else 0

    def __call__(
        self, items: Sequence[Any], olds: Sequence[bytes | None], keys: Sequence[str]
    ) -> tuple[list[tuple[str, bytes]], list[str]]:
        """``(to_set, to_delete)`` for one batch (``olds[i]``: the stored bytes of
        a partly overwritten chunk, else ``None``)."""
        to_set: list[tuple[str, bytes]] = []
        to_delete: list[str] = []
        for key, res in zip(keys, self.encode_items(items, olds, keys), strict=True):
            if res is None:
                to_delete.append(key)
            else:
                to_set.append((key, res))
        return to_set, to_delete

    def to_host(self, part: Any) -> np.ndarray:
        """``part`` of the value, on the host (chunks the host encodes, such as
        shards written in part): on a device, copied on an encoder's stream
        once the caller's stream (``gpu.stream``) has made the value."""
        if not self.device:
            return np.asarray(part)
        from cuzarr.gpu.reader import wait_for_user_stream

        with self.value.device, _encoder(self.value.device.id) as enc:
            wait_for_user_stream(enc.stream)
            return enc.cp.asnumpy(part, stream=enc.stream)  # blocking

    def encode_items(
        self, items: Sequence[Any], olds: Sequence[bytes | None], keys: Sequence[str]
    ) -> list[bytes | None]:
        """The stored bytes of each item's chunk, built and encoded as one batch
        (``None``: all fill, to be left out); ``keys`` name the chunks in errors.
        The device writer of whole shards (``cuzarr.gpu.shardwriter``) runs its
        inner chunks through this too."""
        shapes = [tuple(self.chunk_shape(tuple(it[0]))) for it in items]
        host_old: list[tuple[int, np.ndarray]] = []
        rmw = [i for i, it in enumerate(items) if olds[i] is not None and not it[3]]
        plan = build_plan(
            items, shapes, self.value.shape, self.value.strides, self.dtype.itemsize,
            chunk_order=self.order, swap=self.swap, pad=True,
        )
        for i in rmw:
            plan.table["flags"][i] &= ~FLAG_PAD
            try:
                old = np.asarray(self.pipeline.decode(olds[i], shapes[i]))
            except CodecError as e:

                raise keyed(e, keys[i]) from e
            old = old.astype(self.dtype, copy=False)
            if self.swap:
                old = old.astype(self.dtype.newbyteorder())
            raw = np.frombuffer(old.tobytes(order=self.order), np.uint8)
            host_old.append((int(plan.slots[i]), raw))
        batch = EncodeBatch(
            plan, self.kind, self.level, self.fill, self.dtype, self.swap,
            not self.write_empty_chunks, host_old, self.blosc,
        )
        if self.device:
            with self.value.device, _encoder(self.value.device.id) as enc:
                results = enc.encode(batch, self.value)
        else:
            with _encoder(None) as enc:
                results = enc.encode(batch, self.value)
        if self.kind is None:
            for i, res in enumerate(results):
                if res is not None:
                    chunk = np.frombuffer(res, self.dtype).reshape(shapes[i], order=self.order)
                    results[i] = self.pipeline.encode(chunk, shapes[i])
        return results
