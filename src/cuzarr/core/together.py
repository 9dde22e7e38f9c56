"""Whole chunks decoded straight into the output, several in one call.

Where chunks of a read land whole in the output (a unit-step block of the
chunk's full shape), the pipeline's ``decode_chunks_into`` (plain zstd: one C
call without the GIL, cuzarr.runtime.native) decodes a batch of them in
place: no Python per chunk, no intermediate buffer and copy, and the read's
worker threads do not trade the GIL at every chunk. A read of one whole chunk
takes the same call: a dask task reading a 128 KiB chunk then releases the
GIL once for its decode, straight into the output, instead of decoding into a
scratch buffer and copying. Used by plain reads
(``read_job``) and by the inner chunks of shards (``shards``); chunks the call
does not place (corrupt, the wrong size) are left to the caller's one-chunk
path, which raises the precise error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["decode_together", "whole_block_start"]


def whole_block_start(item: Any, shape: tuple[int, ...]) -> list[int] | None:
    """Where chunk ``item`` (coords, chunk selection, output selection,
    complete) lands in the output as a whole block of ``shape`` (its output
    selection: unit-step slices of the chunk's extent, one per dimension), or
    None."""
    osel = item[2]
    if not item[3] or len(osel) != len(shape):
        return None
    start = []
    for s, n in zip(osel, shape, strict=True):
        if type(s) is not slice or s.step not in (None, 1) or s.start is None:
            return None
        if s.stop - s.start != n:
            return None
        start.append(s.start)
    return start


def decode_together(
    together: Any,
    start_of: Callable[[int], list[int] | None],
    pairs: Sequence[tuple[int, Any]],
    shape: tuple[int, ...],
    out: Any,
    step: int | None = None,
    run_groups: Callable[[Callable[[int], Any], int], list[Any]] | None = None,
) -> list[tuple[int, Any]]:
    """Decode the (item index, encoded chunk or None) ``pairs`` whose chunks
    are stored and land whole in ``out`` (chunks of ``shape``: item ``i`` at
    element ``start_of(i)``, None where it does not land whole, as
    :func:`whole_block_start` answers) with ``together`` (a pipeline's
    ``decode_chunks_into``; None: nothing done).

    ``step`` chunks per call (default: all in one), the calls run by
    ``run_groups(fn, count)`` where given (worker loops sharing them out).
    Returns the pairs left for the caller's one-chunk path: missing or partly
    selected chunks, chunks the call did not place, and every pair where the
    pipeline (or ``out``) is not one the call takes."""
    if together is None or not shape or type(out) is not np.ndarray:
        return list(pairs)  # (0-d chunks: the one-chunk path)
    stored, starts, rest = [], [], []
    for pair in pairs:
        start = None if pair[1] is None else start_of(pair[0])
        if start is None:
            rest.append(pair)
        else:
            stored.append(pair)
            starts.append(start)
    if not stored:
        return list(pairs)
    step = step or len(stored)
    groups = range(0, len(stored), step)

    def run(g: int) -> Any:
        lo = groups[g]
        return together([d for _, d in stored[lo : lo + step]],
                        np.array(starts[lo : lo + step], np.int64), shape, out)

    if run_groups is not None and len(groups) > 1:
        done = run_groups(run, len(groups))
    else:
        done = [run(g) for g in range(len(groups))]
    if any(d is None for d in done):
        return list(pairs)  # the pipeline does not take it (the same answer for every group)
    ok = np.concatenate(done).tolist()
    rest.extend(p for p, placed in zip(stored, ok, strict=True) if not placed)
    return rest
