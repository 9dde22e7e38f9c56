"""Read-ahead of a device read's batches: their files read into staging on
store I/O threads while the worker loops prepare the batches before them.

Why: a batch's host preparation is a few dozen numpy operations and Python
calls. Right after the batch's 27 MB of copies into staging have gone through
the same core's cache, they cost about twice what they cost with the copies on
another core (prepare_batch of 32 chunks: 166 against 79 us on the 2-CPU
reference machine). Reading ahead on another thread moves those copies off the
preparing core, and overlaps them with the preparation.

The batches are the engine's (``plans.execute``): ranges of ``size`` items
from 0, which the worker loops take from a few contiguous runs in turn
(``runtime.workers``). Taking a batch reads the ``depth`` batches after it
ahead, those not asked for yet; a batch not read ahead (a different split, or
a closed read-ahead) is read by its taker, as without read-ahead. Errors of a
read surface where its batch is taken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cuzarr.runtime.tasks import io_executor

__all__ = ["ReadAhead"]


class ReadAhead:
    """Batches ``lo:hi`` of ``range(n)`` (``size`` items each) fetched ahead by
    ``fetch(lo, hi)`` on the store I/O threads; ``release(value)`` gives back a
    value fetched ahead that no batch took (the read failed or stopped)."""

    def __init__(self, fetch: Callable[[int, int], Any], release: Callable[[Any], None],
                 n: int, size: int, depth: int) -> None:
        self._fetch = fetch
        self._release = release
        self._n = n
        self._size = max(1, size)
        self._depth = max(1, depth)
        self._ahead: dict[int, tuple[int, Future[Any]]] = {}
        self._asked: set[int] = set()  # batches read ahead or taken
        self._lock = threading.Lock()
        self._closed = False

    def take(self, lo: int, hi: int) -> Any:
        """Batch ``lo:hi``'s value: read ahead (waited for), or read now."""
        with self._lock:
            self._asked.add(lo)
            if not self._closed:
                self._submit_after(hi)
            got = self._ahead.pop(lo, None)
        if got is None or got[0] != hi:
            if got is not None:
                self._drop(got[1])
            return self._fetch(lo, hi)
        return got[1].result()

    def _submit_after(self, hi: int) -> None:
        """The ``depth`` batches from ``hi`` on read ahead, those not asked yet."""
        pool = io_executor()
        for k in range(self._depth):
            lo = hi + k * self._size
            if lo >= self._n:
                return
            if lo not in self._asked:
                self._asked.add(lo)
                end = min(lo + self._size, self._n)
                self._ahead[lo] = (end, pool.submit(self._fetch, lo, end))

    def close(self) -> None:
        """No more reads ahead; those no batch took end and are released
        (reads not started are cancelled). Call once the batches have run."""
        with self._lock:
            self._closed = True
            left = [fut for _, fut in self._ahead.values()]
            self._ahead.clear()
        for fut in left:
            self._drop(fut)

    def _drop(self, fut: Future[Any]) -> None:
        if fut.cancel():
            return
        try:
            value = fut.result()
        except Exception:  # no batch asked for it: nothing to report
            return
        self._release(value)
