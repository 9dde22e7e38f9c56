"""Values that lie in one buffer, as a sequence of views made when asked for.

A batch of whole values read into one host buffer (a local store's
``get_into``; a shard's inner chunks in its bytes) is described by where each
lies and its size. Consumers that plan from those offsets (the device path)
never look at the values; others get a memoryview per value, made once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["PlacedViews"]


class PlacedViews(Sequence):  # type: ignore[type-arg]
    """The values of a batch read whole into one buffer: value ``j`` is
    ``view[at[j]:at[j] + sizes[j]]``, or ``None`` where ``sizes[j] < 0`` (a
    missing key; ``at[j]`` -1). Their memoryviews are made when first asked
    for: a device batch planned from the offsets and sizes alone asks for none
    (32 per batch cost ~20 us, right after the batch's copies). ``complete``:
    none is missing (the caller says so, having counted them)."""

    def __init__(self, view: memoryview, at: np.ndarray, sizes: np.ndarray,
                 complete: bool = True) -> None:
        self._view, self._at, self._sizes = view, at, sizes
        #: every value is there (none missing): see ``SyncIO.get_into``
        self.complete = complete
        self._made: list[memoryview | None] | None = None

    def __len__(self) -> int:
        return len(self._at)

    def __getitem__(self, i: Any) -> Any:
        return self._list()[i]

    def __iter__(self) -> Iterator[memoryview | None]:
        return iter(self._list())

    def missing(self) -> list[int]:
        """The indices of the missing values, found without making any value."""
        return [] if self.complete else np.flatnonzero(self._sizes < 0).tolist()

    def _list(self) -> list[memoryview | None]:
        if self._made is None:
            # one slice per value, made in C (map), none per Python step
            ends = (self._at + self._sizes).tolist()
            made: list[memoryview | None] = list(
                map(self._view.__getitem__, map(slice, self._at.tolist(), ends)))
            for j in self.missing():
                made[j] = None
            self._made = made
        return self._made
