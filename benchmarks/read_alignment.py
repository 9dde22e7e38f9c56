"""How fast the kernel copies a file read into memory, by where in a page the
destination starts.

Reads every chunk file of a directory (default: the host-only benchmark's plain
array, ``benchmarks/gpu.py --host-only`` makes it) again and again into one
page-aligned buffer, at each destination offset given, and prints seconds per
pass. On the development VM (AMD EPYC, 2026-12-03) offsets 1-31 took 0.37-0.54 s
per 862 MB and every other offset 0.08-0.11 s: that is why cuzarr's read
destinations are page-aligned (``cuzarr.buffer.aligned``).

    python benchmarks/read_alignment.py [--dir D] [--offsets 0,16,32,64] [--passes 2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cuzarr.buffer.aligned import empty_aligned


def _chunk_files(root: Path) -> list[tuple[str, int]]:
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if n not in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
                p = os.path.join(dirpath, n)
                out.append((p, os.path.getsize(p)))
    return sorted(out)


def one_pass(files: list[tuple[str, int]], view: memoryview, offset: int) -> float:
    """Seconds to read every file into ``view`` at ``offset``."""
    t = time.perf_counter()
    for path, n in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.preadv(fd, [view[offset : offset + n]], 0)
        finally:
            os.close(fd)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/cuzarr-gpu-bench/zstd-plain")
    ap.add_argument("--offsets", default="0,1,8,16,24,32,48,64,4064")
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    files = _chunk_files(Path(args.dir))
    if not files:
        raise SystemExit(f"no chunk files under {args.dir}")
    offsets = [int(x) for x in args.offsets.split(",")]
    n = max(s for _, s in files) + max(offsets) + 4096
    buf = empty_aligned(n)
    buf[:] = 1  # faulted in before the passes
    view = memoryview(buf)
    total = sum(s for _, s in files)
    print(f"{len(files)} files, {total / 1e6:.0f} MB, destination offsets within a page")
    one_pass(files, view, 0)  # untimed: the files into the page cache
    for p in range(args.passes):
        times = {off: one_pass(files, view, off) for off in offsets}
        print(f"pass {p + 1}: " + "  ".join(f"{off}: {t:.3f} s" for off, t in times.items()))


if __name__ == "__main__":
    main()
