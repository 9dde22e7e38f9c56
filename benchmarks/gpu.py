"""GPU read benchmark (needs a CUDA device, CuPy, nvCOMP; optionally zarr-python).

Writes ``--gib`` (default 4) of float32 in ~1 MiB chunks per codec (zstd,
numcodecs LZ4, blosc-lz4 with byte shuffle), plain and sharded (64 chunks per
shard), then reads it all into device memory with:

* ``cuzarr gpu``: ``cuzarr.config.enable_gpu()`` (nvCOMP decode + batched scatter);
* ``cuzarr cpu+copy``: cuzarr's CPU decode, then one ``cupy.asarray`` copy;
* ``zarr gpu``: zarr-python with ``zarr.config.enable_gpu()``;
* ``nvcomp ceiling``: nvCOMP's batched RAW decode of the same raw streams already
  in device memory (parsed out of their containers and shards by
  ``cuzarr.gpu.formats``; no I/O, no unshuffle, no scatter) — what decoding
  alone costs, the ceiling for an end-to-end read;
* ``upload+decode ceiling``: the same streams from pinned host memory, uploaded
  and decoded by a raw pipelined loop (32 MiB sub-batches on 2 streams) — the
  ceiling for a read whose data starts in the page cache.

Then writes the same data back from device memory (``--writes``, default on)
into a fresh array of the same codec and layout:

* ``cuzarr gpu write``: ``a[...] = cupy_array`` (device gather, fill check and
  nvCOMP compression where the codec allows; sharded arrays encode on the host);
* ``cuzarr cpu write``: one ``cupy.asnumpy`` copy, then cuzarr's host write;
* ``zarr gpu write``: zarr-python with ``zarr.config.enable_gpu()``.

Medians of ``--repeats`` runs, contenders interleaved. Prints one line per
(codec, layout, contender): GiB/s of decoded data, and the ratio to cuzarr gpu;
then cuzarr gpu as a fraction of the ceiling.

    python benchmarks/gpu.py --gib 4 --dir /tmp/cuzarr-gpu-bench

``--emulate`` runs everything that needs no device (build, stream extraction,
cuzarr's device path on the host via ``gpu.emulate``) on a small array, to
check the script itself on a machine without a GPU.

``--host-only`` measures the host's share of a device read on any machine: the
device read path with a null executor (no decode, no scatter) over ``--gib``
(default 1 there) of zstd, plain and sharded, against a plain loop of preads of
the same files (``gpu_host.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

CODECS = {
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "lz4": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
    "blosc-lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4}},
}
SIDE = 1 << 18  # columns: one chunk = 1 x 262144 float32 = 1 MiB


def _sync(device: bool) -> None:
    if device:
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def build(root: Path, gib: float, codec: str, sharded: bool):
    import cuzarr

    n = int(gib * (1 << 30)) // 4
    rows = max(1, n // SIDE)
    path = root / f"{codec}-{'sharded' if sharded else 'plain'}"
    if (path / "zarr.json").exists():
        a = cuzarr.open_array(str(path), mode="r")
        if a.shape == (rows, SIDE):
            return a
    a = cuzarr.create_array(str(path), shape=(rows, SIDE), dtype="f4", chunks=(1, SIDE),
                            shards=(64, SIDE) if sharded else None,
                            compressors=[CODECS[codec]], overwrite=True)
    rng = np.random.default_rng(0)
    step = 256
    for r in range(0, rows, step):
        blk = np.cumsum(rng.standard_normal((min(step, rows - r), SIDE), dtype="f4"), axis=1)
        a[r : r + step] = blk.round(2)
    return a


def raw_streams(a) -> dict[str, tuple[list[bytes], list[int]]]:
    """Every raw compressed stream of the array, per nvCOMP codec: (streams,
    decoded sizes). Sharded arrays are split into their inner chunks."""
    from cuzarr.codecs.sharding import EMPTY
    from cuzarr.gpu.batch import _parse
    from cuzarr.gpu.reader import device_codec
    from cuzarr.runtime.sync import sync

    arr = a.async_array
    pipeline = arr._pipeline
    shard = arr._shard_codec
    inner_shape = shard.chunk_shape if shard else a.chunks
    if shard is not None:
        from cuzarr.codecs.base import ChunkSpec

        meta = a.metadata
        inner = shard.inner_pipeline(ChunkSpec(meta.chunk_shape, meta.dtype, meta.read_fill))
    else:
        inner = None
    kind, _stored, _order = device_codec(inner if inner is not None else pipeline)
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


def nvcomp_ceiling(streams: dict[str, tuple[list[bytes], list[int]]], repeats: int) -> float:
    """Median seconds for nvCOMP to decode every raw stream (one batch per codec)."""
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
    return statistics.median(times)


def pipelined_ceiling(streams: dict[str, tuple[list[bytes], list[int]]], repeats: int,
                      nstreams: int = 2, sub_bytes: int = 32 << 20) -> float:
    """Median seconds for a raw pipelined loop over the same raw streams, from
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

    times = []
    for _ in range(repeats):
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def host_only(args: argparse.Namespace) -> None:
    """``--host-only``: gpu_host.py's measurement (``--gib`` 1 unless given)."""
    from gpu_host import run

    gib = 1.0 if "--gib" not in sys.argv else args.gib
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    run(root, gib, args.repeats, args.workers, args.layouts.split(","))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    ap.add_argument("--codecs", default="zstd,lz4,blosc-lz4")
    ap.add_argument("--layouts", default="plain,sharded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--writes", action=argparse.BooleanOptionalAction, default=True,
                    help="also time writes from device memory")
    ap.add_argument("--emulate", action="store_true",
                    help="no device: host twin of the GPU path, small array, no nvCOMP")
    ap.add_argument("--host-only", action="store_true",
                    help="no device: host overhead of the device read path (gpu_host.py)")
    ap.add_argument("--workers", type=int, default=1, help="read threads for --host-only")
    args = ap.parse_args()
    import cuzarr

    if args.host_only:
        host_only(args)
        return

    device = not args.emulate
    if args.emulate:
        args.gib = min(args.gib, 0.02)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    for codec in args.codecs.split(","):
        for layout in args.layouts.split(","):
            sharded = layout == "sharded"
            a = build(root, args.gib, codec, sharded)
            gib = a.nbytes / (1 << 30)
            contenders = {}
            if device:
                import cupy

                def gpu_read(a=a):
                    with cuzarr.config.enable_gpu():
                        return a[...]

                contenders["cuzarr gpu"] = gpu_read
                contenders["cuzarr cpu+copy"] = lambda a=a: cupy.asarray(a[...])
                try:
                    import zarr

                    z = zarr.open_array(str(root / f"{codec}-{layout}"), mode="r")

                    def zarr_gpu(z=z):
                        with zarr.config.enable_gpu():
                            return z[...]

                    zarr_gpu()  # fails here, not in the timed loop, without zarr's GPU extras
                    contenders["zarr gpu"] = zarr_gpu
                except Exception as e:
                    print(f"  zarr gpu: skipped ({type(e).__name__}: {e})")
            else:

                def emulated(a=a):
                    with cuzarr.config.set({"gpu.emulate": True}):
                        return a[...]

                contenders["cuzarr gpu (emulated)"] = emulated
                contenders["cuzarr cpu"] = lambda a=a: a[...]
            times: dict[str, list[float]] = {k: [] for k in contenders}
            for _ in range(args.repeats):
                for name, fn in contenders.items():  # interleaved
                    _sync(device)
                    t = time.perf_counter()
                    res = fn()
                    _sync(device)
                    times[name].append(time.perf_counter() - t)
                    del res
            med = {k: statistics.median(v) for k, v in times.items()}
            streams = raw_streams(a)
            nstreams = sum(len(s) for s, _ in streams.values())
            if device:
                med["nvcomp ceiling"] = nvcomp_ceiling(streams, args.repeats)
                try:
                    med["upload+decode ceiling"] = pipelined_ceiling(streams, args.repeats)
                except Exception as e:  # a benchmark row, not a reason to stop the run
                    print(f"  upload+decode ceiling: failed ({type(e).__name__}: {e})")
            base = med[next(iter(contenders))]
            print(f"{codec} {layout}: {a.nchunks} chunks, {nstreams} raw streams "
                  f"({', '.join(sorted(streams))}), {gib:.3f} GiB")
            for name, t in med.items():
                print(f"  {name:24s} {t:8.4f} s {gib / t:8.2f} GiB/s  x{base / t:5.2f}")
            if "nvcomp ceiling" in med:
                print(f"  cuzarr gpu at {med['nvcomp ceiling'] / base:.0%} of the nvCOMP ceiling")
            if "upload+decode ceiling" in med:
                print(f"  cuzarr gpu at {med['upload+decode ceiling'] / base:.0%} of the "
                      "pipelined upload+decode ceiling")
            if args.writes:
                write_contenders(root, a, codec, layout, device, args.repeats)


def write_contenders(root: Path, a, codec: str, layout: str, device: bool, repeats: int) -> None:
    """Time writes of ``a``'s data, held in device memory (host memory with
    ``--emulate``), into a fresh array of the same codec and layout."""
    import cuzarr

    sharded = layout == "sharded"
    path = root / f"{codec}-{layout}-write"
    dst = cuzarr.create_array(str(path), shape=a.shape, dtype=a.dtype, chunks=(1, SIDE),
                              shards=(64, SIDE) if sharded else None,
                              compressors=[CODECS[codec]], overwrite=True)
    contenders = {}
    if device:
        import cupy

        with cuzarr.config.enable_gpu():
            src = a[...]

        def gpu_write():
            with cuzarr.config.enable_gpu():
                dst[...] = src

        contenders["cuzarr gpu write"] = gpu_write
        contenders["cuzarr cpu write"] = lambda: dst.__setitem__(Ellipsis, cupy.asnumpy(src))
        try:
            import zarr

            z = zarr.open_array(str(path), mode="r+")

            def zarr_gpu_write():
                with zarr.config.enable_gpu():
                    z[...] = src

            zarr_gpu_write()  # fails here, not in the timed loop, without zarr's GPU extras
            contenders["zarr gpu write"] = zarr_gpu_write
        except Exception as e:
            print(f"  zarr gpu write: skipped ({type(e).__name__}: {e})")
    else:
        src = a[...]

        def emulated_write():
            with cuzarr.config.set({"gpu.emulate": True}):
                dst[...] = src

        contenders["cuzarr gpu write (emulated)"] = emulated_write
        contenders["cuzarr cpu write"] = lambda: dst.__setitem__(Ellipsis, src)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():  # interleaved
            _sync(device)
            t = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - t)
    got = dst[...]
    if device:
        import cupy

        got = cupy.asnumpy(got)
        same = bool((got == cupy.asnumpy(src)).all())
    else:
        same = bool((got == src).all())
    gib = a.nbytes / (1 << 30)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med[next(iter(contenders))]
    print(f"{codec} {layout} write: {gib:.3f} GiB from {'device' if device else 'host'} "
          f"memory, read back {'equal' if same else 'DIFFERENT'}")
    for name, t in med.items():
        print(f"  {name:24s} {t:8.4f} s {gib / t:8.2f} GiB/s  x{base / t:5.2f}")


if __name__ == "__main__":
    main()
