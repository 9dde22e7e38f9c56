"""What a sharded device read hands its device reader: inner chunks in staging.

A batch of shards read into one staging buffer (whole shards, or the byte
ranges of those wanted in part) is described as the ids of its inner chunks,
their values (views made when asked for) and where each lies in the buffer,
which the device reader plans from without looking at the values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["Placed", "range_members"]


class Placed:
    """(item, inner chunk bytes) pairs of which the first lie in the host buffer
    ``base``, kept as the items' ids and their values: whole shards' values
    (``add``, with where each lies in ``base`` and its size; -1: elsewhere, or
    missing), then any other pairs (``append``, ``extend``: byte ranges, or
    missing chunks), which lie elsewhere. A shard's values may be views made
    when asked for (``PlacedViews``): a device batch planned from the places
    alone asks for none."""

    def __init__(self, base: np.ndarray) -> None:
        self.base = base
        self.view = memoryview(base).cast("B")
        self.ids: list[int] = []
        self._values: list[Sequence[Any]] = []
        self._at: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self._placed = 0  # how many of ids lie in base (the first ones)

    def add(self, ids: list[int], values: Sequence[Any], at: np.ndarray,
            sizes: np.ndarray) -> None:
        """A shard's inner chunks ``ids``, placed (before any other pair)."""
        self.ids.extend(ids)
        self._values.append(values)
        self._at.append(at)
        self._sizes.append(sizes)
        self._placed += len(ids)

    def append(self, pair: tuple[int, Any]) -> None:
        self.ids.append(pair[0])
        self._values.append([pair[1]])

    def extend(self, pairs: Iterable[tuple[int, Any]]) -> None:
        for pair in pairs:
            self.append(pair)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return zip(self.ids, self.datas(), strict=True)

    def datas(self) -> Sequence[Any]:
        """The values, in the order of ``ids``."""
        if len(self._values) == 1:  # one shard, no other pairs: as it is (maybe lazy)
            return self._values[0]
        return list(itertools.chain.from_iterable(self._values))

    def places(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each value lies in ``base`` (-1: elsewhere, or missing), and its
        size (-1: missing; the others' own length)."""
        n = len(self.ids)
        if len(self._at) == 1 and self._placed == n:
            return self._at[0], self._sizes[0]
        at = np.full(n, -1, np.int64)
        rest = itertools.chain.from_iterable(self._values[len(self._at):])  # (appended)
        sizes = np.empty(n, np.int64)
        sizes[self._placed:] = [-1 if v is None else len(v) for v in rest]
        if self._at:
            at[: self._placed] = np.concatenate(self._at)
            sizes[: self._placed] = np.concatenate(self._sizes)
        return at, sizes


def range_members(groups: list[tuple[list[int], list[tuple[int, int]], int, int]],
                   ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """The inner chunks of coalesced ranges: their ids, offsets in their
    range, sizes and ranges."""
    ids: list[int] = []
    rel: list[int] = []
    lens: list[int] = []
    which: list[int] = []
    for r, (members, ranges, gs, _ge) in enumerate(groups):
        ids.extend(members)
        for s, e in ranges:
            rel.append(s - gs)
            lens.append(e - s)
            which.append(r)
    return (ids, np.array(rel, np.int64), np.array(lens, np.int64),
            np.array(which, np.int64))
