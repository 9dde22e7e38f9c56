"""The JSON record of a ``gpu.py`` / ``gpu_phases.py`` run: where it ran (date,
commit, host, CPUs, library versions, device) and helpers for its rows.

A device machine gets a copy of the working tree without ``.git``: the commit
is then taken from ``CUZARR_COMMIT`` when set, and ``src_digest`` (a SHA-256 of
``src/cuzarr``'s Python files, paths and contents, sorted) ties the figures to
the code that produced them either way.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# (name in the record, module to import) of the libraries a device run depends on
LIBRARIES = (("numpy", "numpy"), ("cupy", "cupy"), ("nvcomp", "nvidia.nvcomp"),
             ("kvikio", "kvikio"), ("zarr", "zarr"), ("numcodecs", "numcodecs"),
             ("zstandard", "zstandard"), ("cuzarr", "cuzarr"))


def _commit() -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        r = None
    if r is not None and r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()
    return os.environ.get("CUZARR_COMMIT") or None


def src_digest() -> str | None:
    """SHA-256 over the paths and contents of the imported cuzarr's ``.py`` files."""
    try:
        import cuzarr
    except ImportError:
        return None
    base = Path(cuzarr.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(base.rglob("*.py")):
        h.update(p.relative_to(base).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def versions() -> dict[str, str | None]:
    """Version of each library in ``LIBRARIES`` that imports (``None``: it does not)."""
    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name, module in LIBRARIES:
        try:
            mod = importlib.import_module(module)
        except Exception:  # a broken install is as good as a missing one here
            out[name] = None
            continue
        out[name] = str(getattr(mod, "__version__", "?"))
    return out


def device_info() -> dict[str, Any] | None:
    """Name, memory and CUDA versions of device 0 (CuPy), or ``None`` without one."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        return {"name": name.decode() if isinstance(name, bytes) else str(name),
                "memory_bytes": int(props["totalGlobalMem"]),
                "compute_capability": f"{props['major']}.{props['minor']}",
                "driver": int(cupy.cuda.runtime.driverGetVersion()),
                "runtime": int(cupy.cuda.runtime.runtimeGetVersion())}
    except Exception:  # no CuPy, no driver, no device: a host-only record
        return None


def environment(mode: str) -> dict[str, Any]:
    """Where and with what this run measures (``mode``: device, emulate, host-only...)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "mode": mode, "commit": _commit(), "src_digest": src_digest(),
            "hostname": socket.gethostname(), "cpu_count": os.cpu_count(),
            "cpus_usable": affinity, "cpu_model": _cpu_model(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "argv": sys.argv[1:], "versions": versions(), "device": device_info(),
            "settings": _settings()}


def _settings() -> dict[str, Any]:
    """The settings that change what a device read does on the host: whether the
    C loops are in use, read-ahead, batch size and read threads."""
    import cuzarr
    from cuzarr.runtime import native

    return {"native_io": native.available(),
            **{k: cuzarr.config.get(k) for k in ("gpu.read_ahead", "gpu.read_batch_bytes",
                                                 "gpu.read_workers", "gpu.streams")}}


def row(times: list[float], gib: float, base: float | None = None) -> dict[str, Any]:
    """A contender's figures: every time, the median, GiB/s of decoded data and,
    with ``base`` (the reference median), ``base / median``."""
    med = statistics.median(times)
    out = {"times_s": list(times), "median_s": med, "gibs": gib / med if med > 0 else None}
    if base is not None:
        out["x_vs_first"] = base / med if med > 0 else None
    return out


def write_json(path: str | os.PathLike[str] | None, record: dict[str, Any],
               quiet: bool = False) -> None:
    """Write ``record`` to ``path`` (nothing when ``path`` is empty)."""
    if not path:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(record, indent=1, default=str) + "\n")
    if not quiet:
        print(f"figures written to {p}")
