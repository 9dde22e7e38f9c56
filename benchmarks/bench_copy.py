#!/usr/bin/env python
"""Peak memory of ``cuzarr copy`` (rechunk / convert) on a 1 GiB array.

A uint16 array of ``--size-mib`` (default 1024 MiB: shape (16384, 32768)) of
"smooth noise" is written first (untimed, in slabs, by cuzarr) as Zarr v3 with
(512, 1024) chunks and zstd level 1. Then the command line is run as a child
process, one child per case:

* ``rechunk``  ``python -m cuzarr.cli copy SRC DST --zarr-format 3
               --chunks 256,256 --shards 4096,4096 --compressor zstd:1``
* ``v2``       ``python -m cuzarr.cli copy SRC DST --zarr-format 2
               --compressor zstd:1`` (keeps the source's (512, 1024) chunks;
               ``--v2-chunks`` rechunks too)

Measured per child: wall time, peak RSS from the kernel (``ru_maxrss`` of that
one child, via ``os.wait4`` in a tiny launcher process, see ``LAUNCHER``) and
from polling every ~20 ms (psutil RSS and /proc VmHWM of the child). Afterwards the destination is compared
with the source block by block (blocks aligned to both chunkings, so memory
stays bounded). Goal: peak RSS < ``--goal-mib`` (256 MiB); a PASS/FAIL line per
case and overall.

Usage::

    .venv/bin/python benchmarks/bench_copy.py                 # 1 GiB, both cases (~2-3 min)
    .venv/bin/python benchmarks/bench_copy.py --quick         # 128 MiB smoke run
    .venv/bin/python benchmarks/bench_copy.py --cases rechunk --repeats 3 --keep

The data lives under ``.bench_data/copy`` (git-ignored) and is deleted at the
end unless ``--keep``. The last line is ``BENCH_JSON {...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

import cuzarr

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA_DIR = REPO / ".bench_data" / "copy"
COLS = 32768
MIB = 1 << 20


def parse_ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())


def smooth_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A random walk along each row (steps in [-3, 3], halved), as uint16."""
    walk = np.cumsum(rng.integers(-3, 4, size=(rows, cols), dtype=np.int16), axis=1, dtype=np.int32)
    return ((walk // 2) + 32768).astype(np.uint16)


def write_source(path: Path, shape: tuple[int, int], chunks: tuple[int, int]) -> float:
    t0 = time.perf_counter()
    a = cuzarr.create_array(
        str(path),
        shape=shape,
        chunks=chunks,
        dtype="uint16",
        compressors={"name": "zstd", "configuration": {"level": 1}},
        overwrite=True,
    )
    rng = np.random.default_rng(0)
    # Slabs of whole chunk rows, ~64 MiB each, so the writer's memory stays small too.
    slab = max(chunks[0], (64 * MIB) // (shape[1] * 2) // chunks[0] * chunks[0])
    for r0 in range(0, shape[0], slab):
        r1 = min(shape[0], r0 + slab)
        a[r0:r1, :] = smooth_rows(rng, r1 - r0, shape[1])
    return time.perf_counter() - t0


def dir_bytes(path: Path) -> tuple[int, int]:
    n = files = 0
    for root, _, names in os.walk(path):
        for f in names:
            n += os.path.getsize(os.path.join(root, f))
            files += 1
    return n, files


# The child's ru_maxrss cannot be taken from this process: at exec() Linux
# carries the hiwater RSS of the forking process's address space over into the
# child's maxrss, so every child would "peak" at least at this (big) process's
# RSS. A tiny launcher (only os/sys/json imported) forks the real child from its
# own small address space and reports that grandchild's rusage via wait4.
LAUNCHER = r"""
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall_s": time.perf_counter() - t0,
                  "maxrss_kib": ru.ru_maxrss, "user_s": ru.ru_utime, "sys_s": ru.ru_stime}))
"""


def read_hwm(pid: int) -> int:
    """VmHWM (peak RSS of the current address space) of ``pid`` in bytes, or 0."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssPoller:
    """Polls, every ``interval`` s, the RSS of the descendants of ``pid`` (sum)
    and their VmHWM (max): the copy child is a grandchild, under the launcher."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.hwm = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            proc = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.is_set():
            try:
                kids = proc.children(recursive=True)
            except psutil.Error:
                break
            rss = 0
            for c in kids:
                with contextlib.suppress(psutil.Error):
                    rss += c.memory_info().rss
                self.hwm = max(self.hwm, read_hwm(c.pid))
            if kids:
                self.peak = max(self.peak, rss)
                self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def run_copy(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Run one child under the launcher: wall time, kernel peak RSS (wait4 of
    that child), polled peak RSS and polled VmHWM."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with RssPoller(proc.pid) as poller:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for c in psutil.Process(proc.pid).children(recursive=True):
                c.kill()
            out, err = proc.communicate()
    res: dict[str, Any] = {
        "cmd": cmd,
        "rc": proc.returncode,
        "wall_s": float("nan"),
        "user_s": 0.0,
        "sys_s": 0.0,
        "maxrss_mib": float("nan"),
    }
    lines = out.decode(errors="replace").strip().splitlines()
    if proc.returncode == 0 and lines:
        info = json.loads(lines[-1])
        res.update(
            rc=info["rc"],
            wall_s=info["wall_s"],
            user_s=info["user_s"],
            sys_s=info["sys_s"],
            maxrss_mib=info["maxrss_kib"] / 1024,
        )
    elif proc.returncode == 0:
        res["rc"] = -1
    res.update(
        polled_mib=poller.peak / MIB,
        hwm_mib=poller.hwm / MIB,
        polls=poller.samples,
        stderr=err.decode(errors="replace")[-2000:],
    )
    return res


def interpreter_baseline(python: str) -> float:
    """Peak RSS of a child that only imports cuzarr and the CLI (MiB)."""
    cmd = [python, "-c", "import cuzarr, cuzarr.cli, numcodecs"]
    return run_copy(cmd, 120)["maxrss_mib"]


def verify(src_path: Path, dst_path: Path, block: tuple[int, int]) -> tuple[bool, str]:
    """Compare destination and source block by block (bounded memory)."""
    src = cuzarr.open_array(str(src_path), mode="r")
    dst = cuzarr.open_array(str(dst_path), mode="r")
    if dst.shape != src.shape or dst.dtype != src.dtype:
        return False, f"shape/dtype {dst.shape} {dst.dtype} != {src.shape} {src.dtype}"
    for r0 in range(0, src.shape[0], block[0]):
        for c0 in range(0, src.shape[1], block[1]):
            sel = (slice(r0, r0 + block[0]), slice(c0, c0 + block[1]))
            a, b = src[sel], dst[sel]
            if not np.array_equal(a, b):
                bad = np.argwhere(a != b)[0]
                return (
                    False,
                    f"MISMATCH in block {sel} at {tuple(int(x) + s.start for x, s in zip(bad, sel, strict=True))}",
                )
    return True, "verified"


def lcm_block(
    *chunkings: tuple[int, ...],
    target_bytes: int = 32 * MIB,
    itemsize: int = 2,
    shape: tuple[int, ...],
) -> tuple[int, int]:
    """A verification block that is a multiple of every chunking and ~target_bytes."""
    base = [math.lcm(*(c[d] for c in chunkings)) for d in range(2)]
    block = [min(b, s) for b, s in zip(base, shape, strict=True)]
    while block[1] < shape[1] and block[0] * block[1] * 2 * itemsize <= target_bytes:
        block[1] = min(block[1] * 2, shape[1])
    while block[0] < shape[0] and block[0] * 2 * block[1] * itemsize <= target_bytes:
        block[0] = min(block[0] * 2, shape[0])
    return block[0], block[1]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--size-mib", type=int, default=1024, help="source array size (uint16, 32768 columns)"
    )
    p.add_argument("--src-chunks", default="512,1024")
    p.add_argument("--chunks", default="256,256", help="destination chunks of the rechunk case")
    p.add_argument("--shards", default="4096,4096", help="destination shards of the rechunk case")
    p.add_argument(
        "--v2-chunks",
        default=None,
        help="destination chunks of the v2 case (default: the source's)",
    )
    p.add_argument(
        "--compressor",
        default="zstd:1",
        help="--compressor for the CLI ('' = not passed: cuzarr's default)",
    )
    p.add_argument(
        "--max-block-mib",
        type=int,
        default=None,
        help="passed to the CLI (default: not passed, i.e. 64)",
    )
    p.add_argument("--cases", default="rechunk,v2", help="comma list of rechunk, v2")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--goal-mib", type=float, default=256.0)
    p.add_argument("--timeout", type=float, default=600.0, help="per copy child, seconds")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--keep", action="store_true", help="keep the stores")
    p.add_argument("--quick", action="store_true", help="128 MiB smoke run")
    p.add_argument("--json-out", type=Path, default=None)
    return p


def _case_cmd(args: argparse.Namespace, case: str, src_path: Path, dst: Path,
              src_chunks: tuple[int, ...]) -> tuple[list[str], tuple[tuple[int, ...], ...]]:
    """The `cuzarr copy` command of ``case``, and the chunkings it reads and writes."""
    cmd = [sys.executable, "-m", "cuzarr.cli", "copy", str(src_path), str(dst), "--quiet"]
    if case == "rechunk":
        cmd += ["--zarr-format", "3", "--chunks", args.chunks, "--shards", args.shards]
        chunkings = (src_chunks, parse_ints(args.chunks), parse_ints(args.shards))
    else:
        cmd += ["--zarr-format", "2"]
        if args.v2_chunks:
            cmd += ["--chunks", args.v2_chunks]
        chunkings = (
            src_chunks,
            parse_ints(args.v2_chunks) if args.v2_chunks else src_chunks,
        )
    if args.compressor:
        cmd += ["--compressor", args.compressor]
    if args.max_block_mib is not None:
        cmd += ["--max-block-mib", str(args.max_block_mib)]
    return cmd, chunkings


def _run_case(args: argparse.Namespace, case: str, rep: int, data_dir: Path, src_path: Path,
              src_chunks: tuple[int, ...], shape: tuple[int, int]) -> dict[str, Any]:
    """One copy of ``case`` in a child process, verified; its figures."""
    dst = data_dir / f"dst_{case}.zarr"
    if dst.exists():
        shutil.rmtree(dst)
    os.sync()
    cmd, chunkings = _case_cmd(args, case, src_path, dst, src_chunks)
    if rep == 0:
        print(f"[{case}] $ {' '.join(cmd[1:])}".replace(str(REPO) + "/", ""))
    r = run_copy(cmd, args.timeout)
    r["repeat"] = rep
    r["ok"] = True
    if r["rc"] != 0:
        r["verify"] = f"FAILED rc={r['rc']}: {r['stderr'].strip().splitlines()[-1:]}"
        r["ok"] = False
    elif args.no_verify:
        r["verify"] = "not verified"
    else:
        stored, files = dir_bytes(dst)
        r["dst_stored_mib"] = stored / MIB
        r["dst_files"] = files
        block = lcm_block(*chunkings, shape=shape)
        t0 = time.perf_counter()
        r["ok"], r["verify"] = verify(src_path, dst, block)
        r["verify_s"] = time.perf_counter() - t0
    extra = (
        f", {r['dst_files']} files, {r['dst_stored_mib']:.0f} MiB stored"
        if "dst_files" in r
        else ""
    )
    print(
        f"[{case} #{rep + 1}] {r['wall_s']:6.1f} s (user {r['user_s']:.1f} + sys {r['sys_s']:.1f}), "
        f"peak RSS {r['maxrss_mib']:6.1f} MiB (polled: RSS {r['polled_mib']:.1f}, VmHWM {r['hwm_mib']:.1f}, "
        f"{r['polls']} polls)"
        f"{extra}: {r['verify']}"
    )
    return r


def _summary(args: argparse.Namespace, cases: list[str], results: dict[str, list[dict[str, Any]]],
             size: int, base: float) -> dict[str, Any]:
    """The table of the cases (median time, peak RSS against the goal)."""
    print()
    print(
        f"{'case':<8} {'time s':>8} {'MB/s':>7} {'peak RSS MiB':>13} {'polled':>8} {'over import':>12}  result"
    )
    summary: dict[str, Any] = {}
    for case in cases:
        rs = [r for r in results[case] if r["rc"] == 0]
        if not rs:
            print(f"{case:<8} FAILED")
            summary[case] = {"pass": False}
            continue
        t = statistics.median(r["wall_s"] for r in rs)
        # Kernel ru_maxrss; a polled VmHWM a hair above it (RSS counters are
        # folded in lazily) counts too, to stay conservative.
        peak = max(max(r["maxrss_mib"], r["hwm_mib"]) for r in rs)
        polled = max(r["polled_mib"] for r in rs)
        verdict = "PASS" if peak < args.goal_mib else "FAIL"
        ver = all(r["verify"] in ("verified", "not verified") for r in rs)
        summary[case] = {
            "median_s": t,
            "mb_per_s": size / t / 1e6,
            "peak_rss_mib": peak,
            "polled_peak_mib": polled,
            "over_import_mib": peak - base,
            "pass": verdict == "PASS" and ver,
        }
        print(
            f"{case:<8} {t:8.1f} {size / t / 1e6:7.0f} {peak:13.1f} {polled:8.1f} {peak - base:12.1f}  "
            f"{verdict} (< {args.goal_mib:.0f} MiB){'' if ver else ', NOT VERIFIED'}"
        )
    return summary


def _setup(src_path: Path, shape: tuple[int, int], src_chunks: tuple[int, ...]) -> float:
    """The source array written; the peak RSS of a child that only imports cuzarr."""
    tw = write_source(src_path, shape, src_chunks)
    nbytes, nfiles = dir_bytes(src_path)
    os.sync()
    print(
        f"[setup] wrote source in {tw:.1f} s: {nbytes / MIB:.0f} MiB stored in {nfiles} files (ratio {shape[0] * COLS * 2 / nbytes:.2f})"
    )
    floor = run_copy([sys.executable, "-c", "pass"], 60)["maxrss_mib"]
    base = interpreter_baseline(sys.executable)
    print(
        f"[setup] baseline: a child that only imports cuzarr peaks at {base:.0f} MiB RSS "
        f"(a bare interpreter {floor:.0f} MiB)"
    )
    return base


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.quick:
        args.size_mib = min(args.size_mib, 128)
    rows = args.size_mib * MIB // (COLS * 2)
    shape = (rows, COLS)
    src_chunks = parse_ints(args.src_chunks)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in ("rechunk", "v2"):
            p.error(f"unknown case {c!r}")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(
        f"# cuzarr {cuzarr.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print(f"# uptime: {uptime}")
    print(
        f"# source: uint16 {shape} = {rows * COLS * 2 / MIB:.0f} MiB, chunks {src_chunks}, zstd 1, Zarr v3; "
        f"goal: peak RSS < {args.goal_mib:.0f} MiB"
    )
    data_dir: Path = args.data_dir
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    src_path = data_dir / "src.zarr"
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    try:
        base = _setup(src_path, shape, src_chunks)
        for rep in range(args.repeats):
            for case in cases:
                results[case].append(
                    _run_case(args, case, rep, data_dir, src_path, src_chunks, shape))
        size = rows * COLS * 2
        summary = _summary(args, cases, results, size, base)
        ok_all = all(r["ok"] for rs in results.values() for r in rs) and all(
            v["pass"] for v in summary.values())
        print(
            f"\n{'PASS' if ok_all else 'FAIL'}: peak RSS of `cuzarr copy` on a {size / MIB:.0f} MiB array "
            f"{'<' if ok_all else 'not <'} {args.goal_mib:.0f} MiB in every case (kernel ru_maxrss, max over repeats), "
            "destination verified"
        )
        out = {
            "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "shape": shape,
            "uptime": uptime,
            "baseline_import_mib": base,
            "cuzarr": cuzarr.__version__,
            "python": platform.python_version(),
            "results": {
                c: [{k: v for k, v in r.items() if k != "stderr"} for r in rs]
                for c, rs in results.items()
            },
            "summary": summary,
            "pass": ok_all,
        }
        if args.json_out:
            args.json_out.write_text(json.dumps(out, indent=1))
        print("BENCH_JSON " + json.dumps(out))
    finally:
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
