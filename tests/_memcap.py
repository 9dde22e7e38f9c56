"""Hostile inputs tried in a child process whose address space is capped.

A decompression bomb that is not refused in time makes the child hit its cap
(``MemoryError``) instead of exhausting the test machine. The child reports
each attempt as one JSON line: the error raised, the seconds it took and the
peak memory it added.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
MiB = 1 << 20


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def attempt(fn: Callable[[], Any], extra: int = 512 * MiB) -> dict[str, Any]:
    """Run ``fn`` with the address space limited to what is mapped now plus
    ``extra`` bytes; what it raised, how long it took, the peak RSS it added."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (peak RSS) to the current RSS
    except OSError:
        pass
    rss0 = _status("VmRSS")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_status("VmSize") + extra, hard))
    t0 = time.perf_counter()
    err: BaseException | None = None
    try:
        fn()
    except BaseException as e:  # reported to the parent
        err = e
    seconds = time.perf_counter() - t0
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    peak = max(0, _status("VmHWM") - rss0)
    return {
        "error": None if err is None else type(err).__name__,
        "message": None if err is None else str(err),
        "cause": None if err is None or err.__cause__ is None else type(err.__cause__).__name__,
        "seconds": round(seconds, 4),
        "peak_mib": round(peak / MiB, 1),
    }


def run_child(module: str, func: str, *args: str, timeout: float = 300) -> Any:
    """Call ``module.func(*args)`` (a test module's function) in a fresh Python
    and return the JSON it printed last."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
        # one malloc arena per thread would reserve 64 MiB of address space each
        "MALLOC_ARENA_MAX": "2",
    }
    code = f"import json, {module} as m; print(json.dumps(m.{func}(*{list(args)!r})))"
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )
    if p.returncode != 0:
        raise AssertionError(f"child failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])
