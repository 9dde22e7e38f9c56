"""Reused host staging buffers for the host twin of the device read path.

On a GPU, a batch's compressed bytes are read into pinned memory from CuPy's
pinned pool, which keeps blocks for reuse: pages stay mapped and locked from
one batch to the next. The host twin (``gpu.emulate``) keeps ordinary buffers
the same way here, so that it, and the host-only benchmark, stage into memory
that is already faulted in, as the device path does, instead of paying a page
fault per 4 KiB of every batch.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["HostStaging", "host_staging"]


class HostStaging:
    """A pool of ``uint8`` blocks (sizes rounded up to powers of two, at least
    1 MiB). :meth:`take` lends a view of a free block (or a new one),
    :meth:`give` returns it; at most ``keep_bytes`` of free blocks are kept."""

    def __init__(self, keep_bytes: int = 1 << 30) -> None:
        self.keep_bytes = keep_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self._held = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        """A buffer of ``nbytes`` (contents undefined)."""
        size = max(1 << 20, 1 << max(0, int(nbytes) - 1).bit_length())
        with self._lock:
            free = self._free.get(size)
            block = free.pop() if free else None
            if block is not None:
                self._held -= size
        if block is None:
            block = np.empty(size, np.uint8)
        return block[:nbytes]

    def give(self, buf: np.ndarray) -> None:
        """Return a buffer :meth:`take` lent (anything else is ignored)."""
        block = buf.base if isinstance(buf.base, np.ndarray) else None
        if block is None or block.ndim != 1 or block.dtype != np.uint8 or block.base is not None:
            return
        size = len(block)
        if size & (size - 1) or size < (1 << 20):
            return
        with self._lock:
            if self._held + size > self.keep_bytes:
                return
            if any(b is block for b in self._free.get(size, ())):
                return  # given twice
            self._free.setdefault(size, []).append(block)
            self._held += size

    def clear(self) -> None:
        """Drop every free block."""
        with self._lock:
            self._free.clear()
            self._held = 0


host_staging = HostStaging()
