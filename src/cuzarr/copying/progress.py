"""Progress of long operations: a small stderr bar (no dependency) that counts
bytes or items, and the reporters that ``copy``, ``copy_all`` and
``copy_store`` build from their ``progress=`` argument."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Progress", "human", "reporter"]


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
    """A small stderr progress bar.

    Parameters
    ----------
    total : int or None
        The number of steps (bytes with ``unit="B"``); None when not known
        beforehand (then the count and rate are shown without a bar).
    label : str
        Shown before the bar.
    force : bool
        Draw it when stderr is not a terminal too (else it stays silent there,
        so logs and pipes get no carriage returns).
    unit : str
        ``"B"``: the steps are bytes, shown as sizes (``"3.0 MiB/12.0 MiB"``)
        with a rate in bytes per second; else a plain count (``"items"``...).
    """

    def __init__(self, total: int | None, label: str, force: bool = False, unit: str = "") -> None:
        self.total = None if total is None else max(1, total)
        self.label = label
        self.unit = unit
        self.done = 0
        self.enabled = force or sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self._last = 0.0

    def _amount(self, n: float) -> str:
        return human(n) if self.unit == "B" else f"{int(n)}"

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps done; redrawn at most every 0.1 s, and at the end."""
        self.done += n
        now = time.perf_counter()
        end = self.total is not None and self.done >= self.total
        if self.enabled and (now - self._last > 0.1 or end):
            self._last = now
            rate = self.done / max(1e-9, now - self.t0)
            speed = f"{human(rate)}/s" if self.unit == "B" else f"{rate:.1f}/s"
            if self.total is None:
                unit = f" {self.unit}" if self.unit not in ("", "B") else ""
                sys.stderr.write(f"\r{self.label} {self._amount(self.done)}{unit} ({speed})")
            else:
                bar = "#" * int(30 * min(1.0, self.done / self.total))
                sys.stderr.write(
                    f"\r{self.label} [{bar:<30}] {self._amount(self.done)}/"
                    f"{self._amount(self.total)} ({speed})"
                )
            if end:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def close(self) -> None:
        """End the line of a bar whose total was not known (or not reached)."""
        if self.enabled and (self.total is None or self.done < self.total):
            sys.stderr.write("\n")
            sys.stderr.flush()


def reporter(progress: Any, total: int | None, label: str) -> Callable[[int], None] | None:
    """What a ``progress=`` argument asks for, as a function of the bytes just done.

    Parameters
    ----------
    progress : bool or callable
        False (or None): nothing. True: a bar on stderr, also where stderr is
        not a terminal (a notebook). A callable: called as
        ``progress(done_bytes, total_bytes)`` after each step (``total_bytes``
        None where it is not known beforehand).
    total : int or None
        The bytes to do.
    label : str
        The bar's label.

    Returns
    -------
    callable or None
        ``step(nbytes)``, or None for no reporting.

    Raises
    ------
    TypeError
        If ``progress`` is neither a bool nor callable.
    """
    if progress is None or progress is False:
        return None
    if progress is True:
        return Progress(total, label, force=True, unit="B").update
    if not callable(progress):
        raise TypeError(f"progress must be a bool or a callable, not {progress!r}")
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        progress(done, total)

    return step
