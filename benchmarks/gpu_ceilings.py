"""The ceilings ``gpu.py`` reports its device rows against (needs CuPy and nvCOMP,
except :func:`raw_streams`, :func:`encode_units` and the host twin of
:func:`encode_ceiling`, which run anywhere):

* ``nvcomp ceiling``: nvCOMP's batched RAW decode of every raw stream of an
  array, already in device memory (no I/O, no unshuffle, no scatter);
* ``upload+decode ceiling``: the same streams from pinned host memory, uploaded
  and decoded by a raw pipelined loop (sub-batches on 2 streams);
* ``encode ceiling``: nvCOMP's batched RAW encode of an array's chunks already
  in device memory, in the units cuzarr's device write compresses (whole
  chunks for zstd and LZ4, blosc blocks for blosc); no gather, no fill check,
  no download, no container.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

# Most input bytes one batched encode call takes here: bounds nvCOMP's scratch
# and output buffers for large --gib runs, and is big enough to fill the device.
ENCODE_BATCH_BYTES = 1 << 30


def chunk_pipeline(a: Any) -> Any:
    """The codec pipeline of ``a``'s chunks (the inner chunks of a sharded array)."""
    arr = a.async_array
    shard = arr._shard_codec
    if shard is None:
        return arr._pipeline
    from cuzarr.codecs.base import ChunkSpec

    meta = a.metadata
    return shard.inner_pipeline(ChunkSpec(meta.chunk_shape, meta.dtype, meta.read_fill))


def raw_streams(a) -> dict[str, tuple[list[bytes], list[int]]]:
    """Every raw compressed stream of the array, per nvCOMP codec: (streams,
    decoded sizes). Sharded arrays are split into their inner chunks."""
    from cuzarr.codecs.sharding import EMPTY
    from cuzarr.gpu.batch import _parse
    from cuzarr.gpu.reader import device_codec
    from cuzarr.runtime.sync import sync

    shard = a.async_array._shard_codec
    inner_shape = shard.chunk_shape if shard else a.chunks
    kind, _stored, _order = device_codec(chunk_pipeline(a))
    nbytes = int(np.prod(inner_shape)) * a.dtype.itemsize
    out: dict[str, tuple[list[bytes], list[int]]] = {}
    keys = sorted(sync(_list(a.store, a.path + "/" if a.path else "")))
    for key in keys:
        if key.endswith("zarr.json"):
            continue
        blob = sync(a.store.get(key))
        chunks = [blob]
        if shard is not None:
            index, mv = shard.split(blob, a.metadata.chunk_shape)
            chunks = [bytes(mv[int(o) : int(o) + int(n)]) for o, n in index.reshape(-1, 2)
                      if o != EMPTY]
        for c in chunks:
            streams, _blosc = _parse(kind, c, nbytes)
            mv = memoryview(c)
            for st in streams:
                s, d = out.setdefault(st.codec, ([], []))
                s.append(bytes(mv[st.offset : st.offset + st.length]))
                d.append(st.decoded_size)
    return out


async def _list(store, prefix):
    return [k async for k in store.list_prefix(prefix)]


def nvcomp_ceiling(streams: dict[str, tuple[list[bytes], list[int]]], repeats: int) -> list[float]:
    """Seconds for nvCOMP to decode every raw stream (one batch per codec), per repeat."""
    import cupy
    from nvidia import nvcomp

    from cuzarr.gpu.executor import NVCOMP_ALGORITHMS

    jobs = []
    for codec, (blobs, sizes) in streams.items():
        if codec == "copy":
            continue
        align = 16
        offs, p = [], 0
        for b in blobs:
            offs.append(p)
            p += -(-len(b) // align) * align
        packed = np.zeros(p, np.uint8)
        for o, b in zip(offs, blobs, strict=True):
            packed[o : o + len(b)] = np.frombuffer(b, np.uint8)
        outoffs, q = [], 0
        for s in sizes:
            outoffs.append(q)
            q += -(-s // align) * align
        comp = cupy.asarray(packed)
        out = cupy.empty(q, cupy.uint8)
        codec_obj = nvcomp.Codec(algorithm=NVCOMP_ALGORITHMS[codec],
                                 bitstream_kind=nvcomp.BitstreamKind.RAW)
        srcs = nvcomp.as_arrays(comp, offs, [len(b) for b in blobs])
        outs = nvcomp.as_arrays(out, outoffs, sizes)
        jobs.append((codec_obj, srcs, outs))

    def run():
        for codec_obj, srcs, outs in jobs:
            codec_obj.decode(srcs, out=outs)

    times = []
    for _ in range(repeats):
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        run()
        cupy.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t)
    return times


def pipelined_ceiling(streams: dict[str, tuple[list[bytes], list[int]]], repeats: int,
                      nstreams: int = 2, sub_bytes: int = 32 << 20) -> list[float]:
    """Seconds, per repeat, of a raw pipelined loop over the same raw streams, from
    pinned host memory: sub-batches of about ``sub_bytes`` compressed bytes,
    round-robin on ``nstreams`` streams, each one async upload then one batched
    nvCOMP decode (one codec per stream); no parsing, no scatter. The ceiling
    for a read whose data starts in host memory (page cache)."""
    import cupy
    from nvidia import nvcomp

    from cuzarr.buffer.gpu import pinned_prototype
    from cuzarr.gpu.executor import NVCOMP_ALGORITHMS

    sts = [cupy.cuda.Stream(non_blocking=True) for _ in range(nstreams)]
    jobs = []  # (codec name, pinned bytes, offsets, lengths, decoded sizes)
    for codec, (blobs, sizes) in streams.items():
        if codec == "copy":
            continue
        start = 0
        while start < len(blobs):
            end, total = start, 0
            while end < len(blobs) and (end == start or total + len(blobs[end]) <= sub_bytes):
                total += len(blobs[end])
                end += 1
            offs = np.cumsum([0] + [len(b) for b in blobs[start:end]])
            pinned = pinned_prototype.empty((int(offs[-1]),), np.uint8)
            for b, o in zip(blobs[start:end], offs[:-1], strict=True):
                pinned[o : o + len(b)] = np.frombuffer(b, np.uint8)
            jobs.append((codec, pinned, offs[:-1].tolist(),
                         [len(b) for b in blobs[start:end]], sizes[start:end]))
            start = end
    codecs = {(c, k): nvcomp.Codec(algorithm=NVCOMP_ALGORITHMS[c],
                                   bitstream_kind=nvcomp.BitstreamKind.RAW,
                                   cuda_stream=int(sts[k].ptr))
              for c in {j[0] for j in jobs} for k in range(nstreams)}
    outs = [cupy.empty(int(sum(j[4])), cupy.uint8) for j in jobs]

    def run():
        for k, (codec, pinned, offs, lens, sizes) in enumerate(jobs):
            st = sts[k % nstreams]
            with st:
                comp = cupy.empty(pinned.size, cupy.uint8)
                comp.set(pinned, stream=st)
                outoffs = np.cumsum([0, *sizes[:-1]]).tolist()
                srcs = nvcomp.as_arrays(comp, offs, lens, int(st.ptr))
                dsts = nvcomp.as_arrays(outs[k], outoffs, sizes, int(st.ptr))
                codecs[(codec, k % nstreams)].decode(srcs, out=dsts)
        for st in sts:
            st.synchronize()

    try:
        times = []
        for _ in range(repeats):
            cupy.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    finally:
        for st in sts:
            st.synchronize()
        # An nvCOMP codec frees its scratch on its stream: drop the codecs
        # while the streams still exist (see cuzarr.gpu.executor.StreamCodecs).
        codecs.clear()
    return times


def encode_units(a: Any) -> dict[str, Any]:
    """What cuzarr's device write compresses for ``a``'s codec, one nvCOMP batch
    entry per unit: ``{"stream", "level", "offsets", "sizes", "note"}``, units
    laid out as in the C-order array (one chunk = one row, ``a.chunks ==
    (1, a.shape[1])``); ``stream`` is ``None`` when nvCOMP encodes none of it."""
    from cuzarr.gpu import formats
    from cuzarr.gpu.writer import ENCODE_MAX_CHUNK, ENCODE_STREAM, encode_kind

    if tuple(a.chunks[1:]) != tuple(a.shape[1:]) or a.chunks[0] != 1:
        raise ValueError(f"encode ceiling expects row chunks, got {a.chunks} of {a.shape}")
    chunk = int(a.shape[1]) * a.dtype.itemsize
    starts = [r * chunk for r in range(a.shape[0])]
    kind, level, blosc = encode_kind(chunk_pipeline(a), a.dtype.itemsize)
    if kind == "blosc" and blosc is not None:
        bs = formats.blosc_blocksize(chunk, blosc.blocksize, blosc.typesize)
        blocks = formats.blosc_blocks(chunk, bs)
        return {"stream": blosc.cname, "level": level,
                "offsets": [s + o for s in starts for o, _ in blocks],
                "sizes": [n for _ in starts for _, n in blocks],
                "note": f"nvCOMP has no blosc encoder: {blosc.cname} of the {bs >> 10} KiB "
                        "blosc blocks cuzarr's device write compresses, without the byte "
                        "shuffle or the blosc container"}
    stream = ENCODE_STREAM.get(kind or "", None)
    if stream in (None, "copy") or chunk > ENCODE_MAX_CHUNK[stream]:
        return {"stream": None, "level": level, "offsets": [], "sizes": [],
                "note": f"nvCOMP does not encode this codec ({kind}): no ceiling"}
    return {"stream": stream, "level": level, "offsets": starts, "sizes": [chunk] * len(starts),
            "note": f"{stream} of whole {chunk >> 10} KiB chunks, no container"}


def _batches(sizes: list[int], limit: int) -> list[list[int]]:
    """Indices of ``sizes`` in runs of at most ``limit`` bytes (at least one each)."""
    out: list[list[int]] = []
    total = limit + 1
    for i, n in enumerate(sizes):
        if total + n > limit:
            out.append([])
            total = 0
        out[-1].append(i)
        total += n
    return out


def encode_ceiling(src: Any, units: dict[str, Any], repeats: int, device: bool) -> dict[str, Any]:
    """Times of compressing ``units`` (from :func:`encode_units`) of the
    C-contiguous array ``src``: nvCOMP's batched RAW encode on the device
    (``src`` a CuPy array), or the host twin's compressors (numpy ``src``).
    Returns ``{"times_s", "median_s", "compressed_bytes", "input_bytes"}``."""
    if units["stream"] is None:
        raise ValueError(units["note"])
    run = _device_encoder(src, units) if device else _host_encoder(src, units)
    try:
        used = run()  # warm: nvCOMP's scratch, the codec
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            used = run()
            times.append(time.perf_counter() - t)
    finally:
        close = getattr(run, "close", None)
        if close is not None:
            close()
    return {"times_s": times, "median_s": statistics.median(times),
            "compressed_bytes": int(sum(used)), "input_bytes": int(sum(units["sizes"]))}


def _host_encoder(src: np.ndarray, units: dict[str, Any]) -> Any:
    from cuzarr.gpu.writer import _host_compress

    flat = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    stream, level = units["stream"], units["level"]
    pairs = list(zip(units["offsets"], units["sizes"], strict=True))

    def run() -> list[int]:
        return [len(_host_compress(stream, memoryview(flat[o : o + n]), level)) for o, n in pairs]

    return run


def _device_encoder(src: Any, units: dict[str, Any]) -> Any:
    """A callable that encodes every unit of the CuPy array ``src`` with one
    nvCOMP RAW codec on its own stream and waits for the sizes (inputs, output
    slots of nvCOMP's bound size and the codec made once), with ``close()``.
    Built on :class:`cuzarr.gpu.executor.StreamCodecs`, as the device writer's
    encoder is: its codec is dropped before its stream, whatever happens."""
    import cupy
    from nvidia import nvcomp

    from cuzarr.gpu.executor import StreamCodecs
    from cuzarr.gpu.writer import _aligned

    class DeviceEncoder(StreamCodecs):
        def __init__(self) -> None:
            super().__init__(cupy)
            if not src.flags.c_contiguous:
                raise ValueError("encode ceiling expects a C-contiguous device array")
            name, offs, sizes = units["stream"], units["offsets"], units["sizes"]
            sp = int(self.stream.ptr)
            flat = src.reshape(-1).view(cupy.uint8)
            j = sizes.index(max(sizes))
            largest = nvcomp.as_array(flat[offs[j] : offs[j] + sizes[j]], sp)
            # no codec in a local: it must never outlive the stream (StreamCodecs)
            cap = _aligned(int(self._codec(name).get_max_comp_buffer_size(largest)))
            self.jobs = []
            for b in _batches(sizes, ENCODE_BATCH_BYTES):
                out = cupy.empty(cap * len(b), dtype=cupy.uint8)
                srcs = nvcomp.as_arrays(flat, [offs[i] for i in b], [sizes[i] for i in b], sp)
                outs = nvcomp.as_arrays(out, [k * cap for k in range(len(b))], [cap] * len(b),
                                        sp)
                self.jobs.append((srcs, outs, out))
            self.keep = (flat, largest)

        def __call__(self) -> list[int]:
            self.stream.synchronize()
            used: list[int] = []
            for srcs, outs, _out in self.jobs:
                res = self._codec(units["stream"]).encode(srcs, out=outs)
                used.extend(int(n) for n in res.buffer_sizes)  # waits for the encode
            self.stream.synchronize()
            return used

        def close(self) -> None:
            self.release_codecs()
            self.jobs = []

    return DeviceEncoder()
