"""GPU read benchmark (needs a CUDA device, CuPy, nvCOMP; optionally zarr-python).

Writes >= 4 GiB (``--gib``) of float32 in ~1 MiB chunks, zstd and lz4, plain and
sharded, then times reading it all into device memory with:

* cuzarr with ``cuzarr.config.enable_gpu()`` (nvCOMP decode + batched scatter);
* cuzarr CPU decode + one ``cupy.asarray`` copy;
* zarr-python with ``zarr.config.enable_gpu()``;
* nvCOMP's raw batched decode of the same compressed chunks (the ceiling).

    python benchmarks/gpu.py --gib 4 --dir /tmp/cuzarr-gpu-bench
Prints one line per (codec, layout, method) with GiB/s and the ratio to cuzarr.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def _sync():
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _timed(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        _sync()
        best = min(best, time.perf_counter() - t)
    return best


def build(root: Path, gib: float, codec: str, sharded: bool):
    import cuzarr

    n = int(gib * (1 << 30)) // 4
    side = 1 << 18  # columns; one 1 MiB chunk = 1 x 262144 float32
    rows = max(1, n // side)
    comp = {"zstd": {"name": "zstd", "configuration": {"level": 1}},
            "lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                         "shuffle": "shuffle", "typesize": 4}}}[codec]
    path = root / f"{codec}-{'sharded' if sharded else 'plain'}"
    if (path / "zarr.json").exists():
        return cuzarr.open_array(str(path), mode="r")
    a = cuzarr.create_array(str(path), shape=(rows, side), dtype="f4", chunks=(1, side),
                            shards=(64, side) if sharded else None, compressors=[comp],
                            overwrite=True)
    rng = np.random.default_rng(0)
    step = 256
    for r in range(0, rows, step):
        blk = np.cumsum(rng.standard_normal((min(step, rows - r), side), dtype="f4"), axis=1)
        a[r : r + step] = blk.round(2)
    return a


def raw_nvcomp_ceiling(a) -> float:
    """Batched nvCOMP decode of every stored chunk already on the device."""
    import cupy
    from nvidia import nvcomp

    from cuzarr.gpu import formats

    store = Path(a.store.root) / a.path if hasattr(a.store, "root") else None
    if store is None:
        return float("nan")
    files = sorted(p for p in store.rglob("*") if p.is_file() and p.name != "zarr.json")
    blobs = [p.read_bytes() for p in files]
    if any(b[:4] == b"\x28\xb5\x2f\xfd" for b in blobs[:1]):
        streams = [formats.parse_zstd(b) for b in blobs]
        algo = "Zstd"
    else:
        return float("nan")  # blosc/sharded: parsed per block; left for the GPU session
    offs = np.cumsum([0] + [len(b) for b in blobs])
    comp = cupy.asarray(np.frombuffer(b"".join(blobs), np.uint8))
    sizes = [s.decoded_size for s in streams]
    outoffs = np.cumsum([0] + sizes)
    out = cupy.empty(int(outoffs[-1]), cupy.uint8)
    codec = nvcomp.Codec(algorithm=algo, bitstream_kind=nvcomp.BitstreamKind.RAW)
    srcs = nvcomp.as_arrays(comp, offs[:-1].tolist(), [len(b) for b in blobs])
    outs = nvcomp.as_arrays(out, outoffs[:-1].tolist(), sizes)
    return _timed(lambda: codec.decode(srcs, out=outs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench")
    ap.add_argument("--codecs", default="zstd,lz4")
    args = ap.parse_args()
    import cupy

    import cuzarr

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    for codec in args.codecs.split(","):
        for sharded in (False, True):
            a = build(root, args.gib, codec, sharded)
            gib = a.nbytes / (1 << 30)
            results = {}
            with cuzarr.config.enable_gpu():
                results["cuzarr gpu"] = _timed(lambda a=a: a[...])
            results["cuzarr cpu+copy"] = _timed(lambda a=a: cupy.asarray(a[...]))
            try:
                import zarr

                z = zarr.open_array(str(root / f"{codec}-{'sharded' if sharded else 'plain'}"),
                                    mode="r")
                with zarr.config.enable_gpu():
                    results["zarr-python gpu"] = _timed(lambda z=z: z[...])
            except Exception as e:  # zarr's GPU path needs its own extras
                print(f"  zarr-python gpu: skipped ({e})")
            if not sharded:
                results["nvcomp raw ceiling"] = raw_nvcomp_ceiling(a)
            base = results["cuzarr gpu"]
            for name, t in results.items():
                print(f"{codec:5s} {'sharded' if sharded else 'plain':8s} {name:20s} "
                      f"{gib / t:8.2f} GiB/s  x{base / t:5.2f} vs cuzarr gpu")


if __name__ == "__main__":
    main()
