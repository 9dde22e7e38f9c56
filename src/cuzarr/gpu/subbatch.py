"""Sub-batches of a prepared batch, for a pipelined device side.

A batch (``gpu.batch.GpuBatch``) is cut into consecutive runs of chunks of
about ``cuzarr.config`` key ``gpu.sub_batch_bytes`` stored bytes each. The
executor queues sub-batch ``j`` on stream ``j % gpu.streams``: its upload
(only the byte range of the packed buffer its streams use), decode, unshuffle
and scatter, so that the upload of one overlaps the decode and scatter of the
one before. Staging slots are laid out in chunk order, so a sub-batch's slots
form one range of the staging buffer, and everything addressed by slot
(host-decoded chunks, direct reads, unshuffle rows, checksums) splits by it.

Checks that need the device's answer (decoded sizes, statuses, checksums) are
not waited for per sub-batch: they are collected in a :class:`Pending` and
settled once, when the read waits for its batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzarr.gpu.batch import GpuBatch

__all__ = ["Pending", "SubBatch", "split_batch", "stream_count", "sub_batch_bytes"]

SUB_BATCH_BYTES = 32 << 20


def sub_batch_bytes() -> int:
    """``cuzarr.config`` key ``gpu.sub_batch_bytes`` (default 32 MiB)."""
    from cuzarr.config import config

    return max(1, int(config.get("gpu.sub_batch_bytes", SUB_BATCH_BYTES) or SUB_BATCH_BYTES))


def stream_count() -> int:
    """``cuzarr.config`` key ``gpu.streams``: CUDA streams one executor spreads
    its sub-batches over (1 to 4)."""
    from cuzarr.config import config

    return min(4, max(1, int(config.get("gpu.streams", 2) or 1)))


@dataclass
class SubBatch:
    """Chunks ``k0:k1`` of ``batch``: their plan rows, the packed bytes
    ``lo:hi`` their streams use (``streams`` rows count from ``lo``; ``rows``
    are their row numbers in ``batch.streams``), and what lies in their
    staging range."""

    batch: GpuBatch
    k0: int
    k1: int
    table: np.ndarray
    lo: int = 0
    hi: int = 0
    streams: dict[str, np.ndarray] = field(default_factory=dict)
    rows: dict[str, np.ndarray] = field(default_factory=dict)
    host_decoded: list[tuple[int, np.ndarray]] = field(default_factory=list)
    direct: list[tuple[int, str, int, int]] = field(default_factory=list)
    # compressed files read into this sub-batch's part of the direct area:
    # (offset from ``lo``, path, file offset, bytes)
    direct_src: list[tuple[int, str, int, int]] = field(default_factory=list)
    unshuffle: np.ndarray | None = None
    checks: list[tuple[int, int, int, str, int]] = field(default_factory=list)

    @property
    def packed(self) -> np.ndarray:
        """The bytes this sub-batch uploads (none when it reads ``direct_src``)."""
        if self.direct_src:
            return self.batch.packed[:0]
        return self.batch.packed[self.lo : self.hi]


def _stored_bytes(batch: GpuBatch, n: int) -> np.ndarray:
    """Bytes each chunk brings to the device (its streams, or its host-decoded
    or directly read bytes)."""
    per = np.zeros(n, np.float64)
    for codec, rows in batch.streams.items():
        per += np.bincount(batch.owners[codec], weights=rows["n"], minlength=n)[:n]
    slots = batch.plan.slots
    present = np.flatnonzero(slots >= 0)  # their slots ascend with the chunk index
    for slot, raw in batch.host_decoded:
        per[present[np.searchsorted(slots[present], slot)]] += len(raw)
    for slot, _path, _off, nbytes in batch.direct:
        per[present[np.searchsorted(slots[present], slot)]] += nbytes
    return per  # (direct_src chunks: their streams' bytes, counted above)


def _bounds(batch: GpuBatch, max_bytes: int) -> list[tuple[int, int]]:
    """Chunk ranges of about ``max_bytes`` stored bytes each (at least one chunk)."""
    n = len(batch.plan.table)
    if n == 0:
        return []
    per = _stored_bytes(batch, n)
    starts = np.cumsum(per) - per
    # a chunk starting in a new window of max_bytes starts a new sub-batch
    window = (starts // max_bytes).astype(np.int64)
    edges = np.flatnonzero(np.diff(window)) + 1
    edges = np.concatenate([[0], edges, [n]])
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


def split_batch(batch: GpuBatch, max_bytes: int) -> list[SubBatch]:
    """``batch`` as consecutive sub-batches of about ``max_bytes`` stored bytes."""
    plan = batch.plan
    slots = plan.slots
    # the staging range of chunks k0:k1 (missing chunks have no slot)
    slot_end = np.maximum.accumulate(np.where(slots >= 0, slots + plan.slot_nbytes, 0))
    subs = []
    for k0, k1 in _bounds(batch, max_bytes):
        s_lo = int(slot_end[k0 - 1]) if k0 else 0
        s_hi = int(slot_end[k1 - 1]) if k1 < len(slots) else plan.staging_nbytes + 1
        sub = SubBatch(batch, k0, k1, plan.table[k0:k1])
        los, his = [], []
        for codec, rows in batch.streams.items():
            own = batch.owners[codec]
            pick = np.flatnonzero((own >= k0) & (own < k1))
            if len(pick):
                sub.rows[codec] = pick
                sub.streams[codec] = rows[pick].copy()
                los.append(int(rows["src"][pick].min()))
                his.append(int((rows["src"][pick] + rows["n"][pick]).max()))
        mine = [d for d in batch.direct_src if k0 <= d[0] < k1]
        if mine:  # the streams lie in the direct area, after their file's head
            los.append(min(d[1] for d in mine))
            his.append(max(d[1] + d[4] for d in mine))
        if los:
            sub.lo, sub.hi = min(los), max(his)
            for r in sub.streams.values():
                r["src"] -= sub.lo
            sub.direct_src = [(at - sub.lo, path, off, n) for _k, at, path, off, n in mine]
        sub.host_decoded = [h for h in batch.host_decoded if s_lo <= h[0] < s_hi]
        sub.direct = [d for d in batch.direct if s_lo <= d[0] < s_hi]
        sub.checks = [c for c in batch.checks if k0 <= c[0] < k1]
        if len(batch.unshuffle):
            dst = batch.unshuffle["dst_offset"]
            sub.unshuffle = batch.unshuffle[(dst >= s_lo) & (dst < s_hi)]
        subs.append(sub)
    return subs


class Pending:
    """What a batch left to settle: the event after its device work (``None``
    on the host) and checks to run once it is done (each raises ``CodecError``
    on a corrupt chunk). :meth:`settle` waits once, then runs them in order."""

    def __init__(self, event: Any = None) -> None:
        self.event = event
        self.checks: list[Callable[[], None]] = []

    def defer(self, check: Callable[[], None]) -> None:
        self.checks.append(check)

    def synchronize(self) -> None:
        """Wait for the batch's device work (the read's one wait)."""
        if self.event is not None:
            self.event.synchronize()

    def settle(self) -> None:
        """Wait, then run the deferred checks (the first failure raises)."""
        self.synchronize()
        checks, self.checks = self.checks, []
        for check in checks:
            check()
