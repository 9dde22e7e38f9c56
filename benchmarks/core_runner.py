"""bench_core.py's driver: worker processes launched one measurement (or one
contender's workloads) at a time, stores set aside between them, and the run
of every repeat into the table and the JSON document."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from core_common import ASSEMBLE, HERE, JSON_TAG, NEEDS, RESULT_TAG, WRITE_UNITS, limit_units
from core_report import (
    compute_summary,
    json_document,
    label,
    print_summary,
    print_table,
    summarize,
)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_worker(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    # The worker imports this module rather than running it as a script: as
    # __main__ it left ~3.6 MiB more in every measuring process (counted in each
    # contender's peak RSS).
    boot = f"import sys; sys.path.insert(0, {str(HERE)!r}); import bench_core; sys.exit(bench_core.main())"
    cmd = [sys.executable, "-c", boot, "--_worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {timeout:.0f}s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"ok": False, "error": f"worker rc={proc.returncode}: " + " | ".join(tail)[-300:]}






# Stores replaced during a run are renamed into this folder and deleted only when
# the run ends. ext4 without a journal (as on this machine's disk) will not reuse
# an inode freed in the last 60 s (360 s while its table block is dirty): every
# new file scans past all of them, so deleting the previous store right before a
# timed write billed that write ~100-450 us of kernel time per chunk file (~15 us
# with nothing freed recently), a cost that depended on what the harness had
# just deleted rather than on the library measured.
TRASH = ".trash"
TRASH_MIN_FREE = 4 << 30


def set_aside(path: Path, stores: Path) -> None:
    """Move ``path`` (if it exists) out of the way without freeing its inodes."""
    if not path.exists():
        return
    if shutil.disk_usage(path).free < TRASH_MIN_FREE:
        shutil.rmtree(path, ignore_errors=True)  # short of disk: free it now after all
        print(
            f"    [warning] less than {TRASH_MIN_FREE >> 30} GiB free: {path.name} deleted, not "
            "set aside; the next write pays for the freed inodes (see new_file_us)",
            flush=True,
        )
        return
    trash = stores / TRASH
    trash.mkdir(parents=True, exist_ok=True)
    path.rename(trash / f"{path.name}-{os.getpid()}-{time.monotonic_ns()}")


def creation_probe(data_dir: Path, stores: Path, n: int = 256) -> float:
    """Microseconds of one new empty file in the data directory (median of ``n``);
    the files are set aside, not deleted."""
    d = data_dir / f"probe-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=True)
    ts = []
    for k in range(n):
        t0 = time.perf_counter()
        fd = os.open(d / str(k), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        ts.append(time.perf_counter() - t0)
        os.close(fd)
    set_aside(d, stores)
    return float(np.median(ts)) * 1e6


def find_chunk_dir(stores: Path, order: list[str], suffix: str = "") -> Path | None:
    for c in order:
        d = stores / (c + suffix) / "c"
        if d.is_dir():
            return d
    return None


class Run:
    """A run of every selected workload, contender and limit row, each measured
    in a fresh worker process, interleaved per repeat; then the table, the
    summary and the JSON document."""

    def __init__(self, args: Any, source: Path, stores: Path, sizes: dict[str, Any]) -> None:
        self.args, self.source, self.stores, self.sizes = args, source, stores, sizes
        self.results: list[dict[str, Any]] = []

    def make_spec(self, c: str, units: list[str], verify: bool) -> dict[str, Any] | str:
        """What worker process ``c`` runs (a string: why it cannot run)."""
        args, stores, sizes = self.args, self.stores, self.sizes
        spec: dict[str, Any] = {
            "contender": c,
            "workloads": units,
            "store": str(stores / c),
            "source": str(self.source),
            "shape": sizes["shape"],
            "tiny_shape": sizes["tiny_shape"],
            "shard_shape": sizes["shard_shape"],
            "impl_module": args.impl_module,
            "cuzarr_mem": args.cuzarr_mem,
            "tiny_store": args.tiny_store,
            "verify": verify,
        }
        if c.startswith("limit:"):
            peers_first = ["zarr", "tensorstore", "zarrs", "zarr-fused", "cuzarr"]
            if "read" in units:
                cd = find_chunk_dir(stores, peers_first)
                if cd is None:
                    return "no chunk files to read (no write succeeded)"
                spec["chunk_dir"] = str(cd)
            if "shard-read" in units:
                sd = find_chunk_dir(stores, peers_first, "_shard")
                if sd is None:
                    return "no shard files to read (no shard-write succeeded)"
                spec["shard_dir"] = str(sd)
        return spec

    def run_one(self, c: str, units: list[str], verify: bool, tag: str) -> dict[str, Any]:
        """Measure ``units`` of contender ``c`` in one worker process."""
        spec = self.make_spec(c, units, verify)
        if isinstance(spec, str):
            return {"ok": False, "contender": c, "workloads": units, "error": spec}
        lib = not c.startswith("limit:")
        # limit:assemble's write also writes files: it gets the same fresh directory
        # and os.sync() as the libraries
        writes = (lib or c == ASSEMBLE) and any(u in WRITE_UNITS for u in units)
        if writes:
            for u, suffix in WRITE_UNITS.items():
                if u in units:
                    set_aside(self.stores / (c + suffix), self.stores)
            os.sync()
        t0 = time.perf_counter()
        r = run_worker(spec, self.args.timeout)
        wall = time.perf_counter() - t0
        r.setdefault("contender", c)
        r["workloads"] = units
        if writes:
            os.sync()  # flush dirty pages so they don't bill the next contender
            if r.get("ok"):
                r.setdefault("stored_bytes", {})
                for u, suffix in WRITE_UNITS.items():
                    st = self.stores / (c + suffix)
                    if u in units and st.exists() and u not in r.get("errors", {}):
                        r["stored_bytes"][u] = dir_bytes(st)
        self._print_status(r, c, units, tag, wall)
        return r

    def _print_status(self, r: dict[str, Any], c: str, units: list[str], tag: str,
                      wall: float) -> None:
        if r.get("ok"):
            parts = [f"{k}={v:.3f}s" for k, v in r["times"].items()]
            parts += [f"{k} FAILED: {v[:120]}" for k, v in r.get("errors", {}).items()]
            status = "ok " + " ".join(parts) if not r.get("errors") else " ".join(parts)
        else:
            status = "FAILED " + r.get("error", "")
        print(
            f"[{tag}] {','.join(units)[:24]:<24} {label(c, self.args.impl_module):<16} "
            f"{status}  (process {wall:.1f}s)",
            flush=True,
        )
        tbs = list(r.get("tracebacks", {}).values()) or (
            [r["traceback"]] if r.get("traceback") else []
        )
        for tb in tbs[:1]:
            print("    " + tb.strip().splitlines()[-1][:200], flush=True)

    def cleanup(self) -> None:
        # set-aside stores never outlive the run, --keep or not (nor a Ctrl-C: atexit)
        shutil.rmtree(self.stores / TRASH, ignore_errors=True)
        if not self.args.keep:
            shutil.rmtree(self.stores, ignore_errors=True)

    def all(self) -> int:
        """The whole run; prints the table, the summary and the JSON line."""
        t_start = time.perf_counter()
        load_start = os.getloadavg()
        atexit.register(self.cleanup)
        create_us = self._probe()
        self._setup_writes()
        for rep in range(self.args.repeats):
            self._repeat(rep)
        rows = summarize(self.results, self.args, self.sizes)
        self.sizes["load"] = (load_start, os.getloadavg())
        print_table(rows, self.args, self.sizes)
        summary = compute_summary(rows, self.args, self.sizes)
        print_summary(summary, self.args)
        print(f"total wall time {time.perf_counter() - t_start:.0f}s")
        out = json_document(self.args, self.sizes, rows, summary, self.results, create_us)
        line = json.dumps(out, default=str)
        if self.args.json_out:
            self.args.json_out.write_text(line + "\n")
        print(JSON_TAG + line)
        self.cleanup()
        return 0

    def _probe(self) -> float:
        data_dir = self.args.data_dir
        create_us = creation_probe(data_dir, self.stores)
        print(
            f"new empty file in {data_dir}: {create_us:.0f} us (median of 256; every contender "
            "creates one per chunk; replaced stores are set aside, deleted after the run)"
            + (
                "; high: files deleted there in the last minutes make each new file scan "
                "past their inodes (ext4 without a journal), adding the same cost to every "
                "contender's write"
                if create_us > 40
                else ""
            ),
            flush=True,
        )
        return create_us

    def _setup_writes(self) -> None:
        """Stores that selected workloads read but no selected workload writes:
        written once, untimed and unrecorded."""
        args = self.args
        setup = [
            u
            for u in WRITE_UNITS
            if u not in args.workloads and any(NEEDS.get(w) == u for w in args.workloads)
        ]
        for u in setup:
            for c in args.contenders:
                r = self.run_one(c, [u], False, "setup")
                if not r.get("ok") or r.get("errors"):
                    print(f"    set-up write of {c} failed: its dependent rows will fail too")

    def _repeat(self, rep: int) -> None:
        args = self.args
        verify = rep == 0
        order = list(args.contenders)
        if args.order == "rotate":
            k = rep % max(1, len(order))
            order = order[k:] + order[:k]
        tag = f"rep {rep + 1}/{args.repeats}"
        if args.isolation == "measurement":
            for unit in args.workloads:
                lims = [c for c in args.limits if unit in limit_units(c)]
                for c in order + lims:
                    r = self.run_one(c, [unit], verify, tag)
                    r["repeat"] = rep
                    self.results.append(r)
            return
        for c in order + args.limits:
            units = [u for u in args.workloads if not c.startswith("limit:") or u in limit_units(c)]
            if not units:
                continue
            r = self.run_one(c, units, verify, tag)
            r["repeat"] = rep
            self.results.append(r)
