"""Reused host staging buffers of the device read path.

A batch's compressed bytes are read into a host buffer and uploaded from it. On
a GPU that buffer is pinned (page-locked) memory, whose allocation costs far
more than the read itself (``cudaHostAlloc`` maps and locks every page); the
host twin (``gpu.emulate``) uses ordinary memory, which still pays a page fault
per 4 KiB on first touch. Both are therefore taken from a :class:`HostStaging`
pool and given back *when the read that used them ends* (every copy from them
done): the next read reuses them, and the pool keeps at most
``cuzarr.config`` key ``gpu.staging_keep_bytes`` (default 1 GiB) of free blocks
between reads; blocks beyond that are dropped, which frees (and unpins) them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import numpy as np

from cuzarr.buffer.aligned import empty_aligned
from cuzarr.buffer.gpu import import_cupy
from cuzarr.config import setting

__all__ = ["HostStaging", "host_staging", "pinned_staging"]

KEEP_BYTES = 1 << 30


def _host_block(size: int) -> np.ndarray:
    # page-aligned, as pinned memory is: file reads into it then run at the
    # kernel copy's full speed (see cuzarr.buffer.aligned)
    return empty_aligned(size)


def _pinned_block(size: int) -> np.ndarray:
    """``size`` bytes of pinned memory (freed when the array goes away), outside
    CuPy's pinned pool: this pool alone decides what is kept."""
    mem = import_cupy().cuda.PinnedMemory(size)
    return np.frombuffer(mem, np.uint8, count=size)


def _keep_bytes() -> int:
    value = setting("gpu.staging_keep_bytes", KEEP_BYTES)
    return KEEP_BYTES if value is None else max(0, int(value))


class HostStaging:
    """A pool of ``uint8`` blocks (sizes rounded up to powers of two, at least
    1 MiB) made by ``alloc(size)``. :meth:`take` lends a view of a free block
    (or a new one), :meth:`give` returns it; at most ``keep_bytes`` (default:
    the ``gpu.staging_keep_bytes`` setting) of free blocks are kept."""

    def __init__(self, keep_bytes: int | None = None,
                 alloc: Callable[[int], np.ndarray] = _host_block) -> None:
        self.keep_bytes = keep_bytes
        self._alloc = alloc
        self._free: dict[int, list[np.ndarray]] = {}
        self._free_ids: set[int] = set()  # id() of each block in _free
        self._held = 0
        self._lock = threading.Lock()
        # blocks this pool made, by id(), weakly: only those are taken back (a
        # plain dict of references: a WeakValueDictionary lookup runs Python
        # code, several microseconds a batch right after its copies)
        self._ours: dict[int, weakref.ref[np.ndarray]] = {}

    @property
    def free_bytes(self) -> int:
        """Bytes of free blocks kept for reuse."""
        return self._held

    def take(self, nbytes: int) -> np.ndarray:
        """A buffer of ``nbytes`` (contents undefined)."""
        size = max(1 << 20, 1 << max(0, int(nbytes) - 1).bit_length())
        with self._lock:
            free = self._free.get(size)
            block = free.pop() if free else None
            if block is not None:
                self._held -= size
                self._free_ids.discard(id(block))
        if block is None:
            block = self._alloc(size)
            key = id(block)
            self._ours[key] = weakref.ref(block, lambda _, k=key: self._ours.pop(k, None))
        return block[:nbytes]

    def keep_limit(self) -> int:
        """Bytes of free blocks kept at most: ``keep_bytes``, or the setting."""
        return _keep_bytes() if self.keep_bytes is None else self.keep_bytes

    def give(self, buf: np.ndarray, keep: int | None = None) -> None:
        """Return a buffer :meth:`take` lent (anything else is ignored);
        ``keep``: :meth:`keep_limit`, where the caller asked it already."""
        block = buf.base if isinstance(buf, np.ndarray) else None
        if not isinstance(block, np.ndarray):
            return
        ref = self._ours.get(id(block))
        if ref is None or ref() is not block:
            return
        size = len(block)
        if keep is None:
            keep = self.keep_limit()
        with self._lock:
            if self._held + size > keep:
                return  # dropped: freed once the last view goes
            if id(block) in self._free_ids:
                return  # given twice
            self._free.setdefault(size, []).append(block)
            self._free_ids.add(id(block))
            self._held += size

    def clear(self) -> None:
        """Drop every free block."""
        with self._lock:
            self._free.clear()
            self._free_ids.clear()
            self._held = 0


host_staging = HostStaging()
pinned_staging = HostStaging(alloc=_pinned_block)
