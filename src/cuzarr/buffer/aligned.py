"""Page-aligned host buffers for the destinations of file reads.

Why: the kernel copies a read from the page cache (whose pages start at offset
0 of a 4 KiB page) into the caller's buffer with ``rep movsb``. On AMD EPYC
hosts (seen on this project's development VM) that copy runs 4-6x slower when
the destination sits 1 to 31 bytes past a page boundary relative to the
source: stores and the loads just ahead of them alias in the low 12 address
bits. glibc's ``memcpy`` steers around that case; the kernel's copy does not.
A large ``np.empty``, ``bytearray`` or ``malloc`` block starts 16 bytes into a
page (the allocator's header), exactly that case for a file read at offset 0:
a CPU read of 1 GiB in 1 MiB chunks (into a reused output) took 0.98-1.08 s,
0.51-0.58 s of it in the kernel, through such a buffer, against 0.73-0.87 s
(0.12-0.16 s) through a page-aligned one. Reads into memory made here land
where the kernel's copy runs at full speed.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["PAGE", "ThreadBuffer", "empty_aligned", "is_aligned"]

PAGE = 4096


def empty_aligned(nbytes: int, align: int = PAGE) -> np.ndarray:
    """An uninitialised ``uint8`` array of ``nbytes`` whose first byte is
    ``align``-aligned (a power of two).

    Parameters
    ----------
    nbytes : int
        Size of the array in bytes (0 or more).
    align : int, optional
        Alignment of its address, a power of two; a page by default.

    Returns
    -------
    numpy.ndarray
        An array over part of a slightly larger allocation, which it keeps
        alive. Like a fresh ``np.empty``, it is the ``base`` of its own views.
    """
    if align <= 0 or align & (align - 1):
        raise ValueError(f"alignment must be a power of two, got {align}")
    raw = np.empty(int(nbytes) + align, np.uint8)
    skip = -raw.ctypes.data % align
    # through a memoryview: numpy then makes this array (not ``raw``) the
    # base of its slices, which pools that recognise their blocks rely on
    return np.frombuffer(memoryview(raw)[skip : skip + int(nbytes)], np.uint8)


def is_aligned(buf: np.ndarray, align: int = PAGE) -> bool:
    """Whether ``buf``'s first byte is ``align``-aligned."""
    return buf.ctypes.data % align == 0


class ThreadBuffer:
    """A page-aligned ``uint8`` buffer per thread, reused from call to call and
    grown (by a quarter more than asked) when a call needs more: the
    destination of a thread's reads whose values it is done with before its
    next call. Each instance is a buffer of its own: two users in one thread
    do not overwrite each other's values.

    Parameters
    ----------
    least : int, optional
        The smallest buffer made, in bytes.
    keep_max : int, optional
        The largest buffer a thread keeps: a call for more gets a fresh buffer
        that goes when its caller drops it (None: no limit).
    """

    def __init__(self, least: int = 64 << 10, keep_max: int | None = None) -> None:
        self._least = least
        self._keep_max = keep_max
        self._tls = threading.local()

    def get(self, size: int) -> np.ndarray:
        """The calling thread's buffer, at least ``size`` bytes (its earlier
        contents gone where it grew)."""
        if self._keep_max is not None and size > self._keep_max:
            return empty_aligned(size)
        buf = getattr(self._tls, "buf", None)
        if buf is None or len(buf) < size:
            buf = self._tls.buf = empty_aligned(max(size + size // 4, self._least))
        return buf
