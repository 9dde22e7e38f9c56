"""bench_core.py --profile: one workload of one contender under cProfile or
py-spy."""

from __future__ import annotations

import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from core_adapters import make_adapter
from core_common import (
    CHUNKS,
    RANDOM_WIN,
    SEL_UNITS,
    SHARD_INNER,
    TINY_CHUNKS,
    expected_selection,
    random_windows,
    selection,
    shard_shape,
    tiny_source,
)
from core_measure import _flush_dirty_pages, _same, to_numpy
from core_report import label, row_sizes


def _profile_setup(args, source: Path, store: Path, shape, tshape):
    """Prepare one workload of one contender; return (region, check, n_items)."""
    ad = make_adapter(args.profile_contender, args.impl_module, args.cuzarr_mem)
    wl = args.profile
    n = row_sizes(shape, tshape, args.size_mib)[wl]["items"]
    if wl.startswith("tiny-"):
        data = tiny_source(tshape)
        if args.tiny_store == "disk":
            store.parent.mkdir(parents=True, exist_ok=True)
            loc = ad.disk_location(Path(str(store) + "_tiny"))
        else:
            loc = ad.mem_location()
        h = ad.create(loc, data.shape, TINY_CHUNKS)
    else:
        data = np.load(source)
        store.parent.mkdir(parents=True, exist_ok=True)
        if wl.startswith("shard-"):
            loc = ad.disk_location(Path(str(store) + "_shard"))
            h = ad.create(loc, data.shape, SHARD_INNER, shards=shard_shape(shape))
        else:
            loc = ad.disk_location(store)
            h = ad.create(loc, data.shape, CHUNKS)
    if wl.endswith("write"):

        def region():
            ad.write(h, data)

        def check():
            return np.array_equal(to_numpy(ad.read(ad.open(loc))), data)

        return region, check, n

    ad.write(h, data)
    rh = ad.open(loc)
    box: list[Any] = []
    if wl == "shard-random":
        wins = random_windows(shape)
        w = RANDOM_WIN

        def region():
            box[:] = [ad.select(rh, "basic", (slice(y, y + w), slice(x, x + w))) for y, x in wins]

        def check():
            return all(
                np.array_equal(to_numpy(o), data[y : y + w, x : x + w])
                for o, (y, x) in zip(box, wins)
            )

    elif wl in SEL_UNITS:
        kind, sel = selection(wl, shape)

        def region():
            box[:] = [ad.select(rh, kind, sel)]

        def check():
            return _same(box[0], expected_selection(data, kind, sel))

    else:

        def region():
            box[:] = [ad.read(rh)]

        def check():
            return np.array_equal(to_numpy(box[0]), data)

    return region, check, n


def _timed_iters(region, iters: int, prewarm_bytes: int = 0) -> list[float]:
    times = []
    for _ in range(iters):
        if prewarm_bytes:  # as Meter.measure: no first-touch stall in the timing
            warm = np.ones(prewarm_bytes, dtype=np.uint8)
            del warm
        _flush_dirty_pages()
        t0 = time.perf_counter()
        region()
        times.append(time.perf_counter() - t0)
    return times


def _report(args, times: list[float], n: int, ok: bool, note: str) -> None:
    m = statistics.median(times)
    print(
        f"{label(args.profile_contender, args.impl_module)} {args.profile}: "
        f"{len(times)} iteration(s), median {m:.3f}s ({m / n * 1e6:.1f} us/item), "
        f"verified={ok} ({note})",
        flush=True,
    )


def summarize_collapsed(path: Path, top: int = 25) -> None:
    """Print the top frames of a py-spy raw (collapsed stacks) file."""
    own: dict[str, int] = {}
    own_line: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        total += c
        raw = stack.split(";")
        own_line[raw[-1]] = own_line.get(raw[-1], 0) + c
        frames = [f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in raw]
        own[frames[-1]] = own.get(frames[-1], 0) + c
        for f in set(frames):
            incl[f] = incl.get(f, 0) + c
    if not total:
        print("no samples")
        return
    print(
        f"\n=== py-spy: {total} samples over the timed iterations, all threads (a thread "
        "blocked on a lock or waiting to re-take the GIL can show as own time of the frame "
        "that released it) ==="
    )
    print(f"--- top {top} by own samples ---")
    for f, c in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")
    print(f"--- top {top} by inclusive samples ---")
    for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")
    print(f"--- top {top} by own samples, per line (file:line) ---")
    for f, c in sorted(own_line.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * c / total:6.1f}%  {f}")


def profile(args, source: Path, store: Path, shape, tshape) -> int:
    """Profile one workload of one contender (cProfile in-process, or py-spy)."""
    if args.profiler == "py-spy":
        return profile_py_spy(args)
    region, check, n = _profile_setup(args, source, store, shape, tshape)
    warm = int(np.prod(shape)) * 2 * 5 // 4
    if args.profiler == "attach":  # child of profile_py_spy: wait for the sampler
        print("READY", flush=True)
        sys.stdin.readline()
        times = _timed_iters(region, args.profile_iters, warm)
        print("DONE", flush=True)
        sys.stdin.readline()  # py-spy has stopped: the check is not sampled
        _report(args, times, n, check(), "under py-spy")
    else:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        times = _timed_iters(region, args.profile_iters, warm)
        prof.disable()
        _report(args, times, n, check(), "under cProfile: main thread only, slower")
        st = pstats.Stats(prof)
        st.strip_dirs()
        print("\n=== top 25 by own time (tottime) ===")
        st.sort_stats("tottime").print_stats(25)
        print("=== top 25 by cumulative time ===")
        st.sort_stats("cumulative").print_stats(25)
    if not args.keep and not args.profile.startswith("tiny-"):
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(Path(str(store) + "_shard"), ignore_errors=True)
    return 0


def profile_py_spy(args) -> int:
    """Run the workload in a child; attach py-spy only around the timed iterations."""
    spy = args.py_spy or shutil.which("py-spy")
    if not spy:
        print("py-spy not found (pip install py-spy, or pass --py-spy PATH)", file=sys.stderr)
        return 2
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--profiler") if "--profiler" in argv else -1
    if i >= 0:
        del argv[i : i + 2]
    argv = [a for a in argv if not a.startswith("--profiler=")]
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *argv, "--profiler", "attach"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    for line in child.stdout:
        if line.strip() == "READY":
            break
        print(line, end="")
    out = args.data_dir / f"pyspy_{args.profile_contender}_{args.profile}.txt"
    spy_cmd = [spy, "record", "--format", "raw", "-r", str(args.spy_rate), "-o", str(out)]
    spy_cmd += ["--pid", str(child.pid), "--nonblocking"] + (["--gil"] if args.spy_gil else [])
    spy_proc = subprocess.Popen(
        spy_cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # let py-spy attach
    child.stdin.write("GO\n")
    child.stdin.flush()
    for line in child.stdout:
        if line.strip() == "DONE":
            break
        print(line, end="")
    spy_proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        _, err = spy_proc.communicate(timeout=60)
    finally:
        child.stdin.write("GO\n")
        child.stdin.flush()
    for line in child.stdout:
        print(line, end="")
    child.wait()
    if not out.exists():
        print("py-spy wrote nothing:", err.strip()[-500:], file=sys.stderr)
        return 1
    summarize_collapsed(out)
    print(f"(raw stacks: {out}; feed to flamegraph.pl or speedscope)")
    return 0
