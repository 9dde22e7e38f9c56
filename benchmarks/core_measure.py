"""bench_core.py's measurement in a worker process: timers, CPU, peak RSS, and
the check of a result against the source."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from typing import Any

import numpy as np

# --------------------------------------------------------------------------
# worker (one measurement in one process)
# --------------------------------------------------------------------------


def to_numpy(a: Any) -> np.ndarray:
    """Host copy of a result (cuzarr may hand back a CuPy array when a GPU is used)."""
    if (
        not isinstance(a, np.ndarray)
        and hasattr(a, "get")
        and hasattr(a, "__cuda_array_interface__")
    ):
        a = a.get()
    return np.asarray(a)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm() -> int:
    """Peak RSS of this process image (VmHWM; unlike ru_maxrss it is not inherited
    from the forking parent across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _flush_dirty_pages() -> None:
    """Write back the dirty pages earlier writes left (untimed): on this VM the
    kernel's writeback of a 93 MB store competed with whatever ran next (the demo's
    read took 0.17 s or 0.29 s at random after a write), so a measurement after
    another contender's write paid for it."""
    if hasattr(os, "sync"):
        os.sync()


class Meter:
    """Times a block and records [RSS before, peak RSS during] for it."""

    def __init__(self, res: dict[str, Any], prewarm_bytes: int = 0):
        self.res = res
        self.prewarm_bytes = prewarm_bytes
        res["times"] = {}
        res["cpu"] = {}
        res["rss"] = {}

    @contextlib.contextmanager
    def measure(self, wl: str):
        if self.prewarm_bytes:
            # Touch and free more memory than the op will allocate, untimed: on this
            # VM a fresh process's first touch of 256 MiB took 28 ms or, at random
            # (3 of 8 runs), 430 ms (pages the host had not backed yet). Afterwards
            # the op gets pages already backed, whoever the contender is (10 of 10
            # runs at 28 ms); it is the state of any process that ran a while.
            warm = np.ones(self.prewarm_bytes, dtype=np.uint8)
            del warm
        _flush_dirty_pages()
        self.res["hwm_reset"] = _reset_hwm()
        base = _rss()
        c0 = time.process_time()
        t0 = time.perf_counter()
        yield
        t = time.perf_counter() - t0
        # CPU seconds of the process, every thread: what preemption by other
        # jobs on a loaded machine does not inflate
        self.res["cpu"][wl] = time.process_time() - c0
        self.res["times"][wl] = t
        self.res["rss"][wl] = [base, max(base, _hwm())]




def _same(out: Any, expected: np.ndarray) -> bool:
    out = to_numpy(out)
    return bool(
        out.shape == expected.shape
        and out.dtype == expected.dtype
        and np.array_equal(out, expected)
    )
