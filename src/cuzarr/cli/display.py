"""What the command line shows while it works: byte sizes for people, and a
progress bar on stderr."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress", "human"]


def human(n: float) -> str:
    """A byte count for people.

    Parameters
    ----------
    n : float
        A number of bytes.

    Returns
    -------
    str
        E.g. ``"512 B"``, ``"1.5 MiB"`` (binary units, up to TiB).
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n}"  # pragma: no cover


class Progress:
    """A small stderr progress bar (no dependency).

    Parameters
    ----------
    total : int
        The number of steps.
    label : str
        Shown before the bar.
    force : bool
        Draw it when stderr is not a terminal too (else it stays silent there,
        so logs and pipes get no carriage returns).
    """

    def __init__(self, total: int, label: str, force: bool = False) -> None:
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self.enabled = force or sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps done; redrawn at most every 0.1 s, and at the end."""
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            frac = self.done / self.total
            bar = "#" * int(30 * frac)
            rate = self.done / max(1e-9, now - self.t0)
            sys.stderr.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total} ({rate:.1f}/s)")
            if self.done >= self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
