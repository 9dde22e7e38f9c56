"""What the command line shows while it works: byte sizes for people, and a
progress bar on stderr (both shared with :mod:`cuzarr.copying`, whose
``progress=`` draws the same bar)."""

from __future__ import annotations

from cuzarr.copying.progress import Progress, human

__all__ = ["Progress", "human"]
