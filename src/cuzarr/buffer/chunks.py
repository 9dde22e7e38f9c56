"""Chunk contents against the fill value, and partial updates of a chunk.

Plain numpy on host chunks, used by the engine's writes and by the sharding
codec's inner-chunk updates alike (they sit below both).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_fill", "merge_into"]


def is_fill(chunk: np.ndarray, fill: Any, dtype: Any) -> bool:
    """Whether every element of ``chunk`` is ``fill`` (bit for bit for floats:
    -0.0 is not a 0.0 fill, any NaN is a NaN fill; NaT compares as its integer)."""
    # Most chunks differ from the fill in their first element: answer that cheaply
    # before comparing the whole chunk.
    if chunk.size and chunk.dtype.kind in "biufcmM" and not chunk.dtype.fields:
        first = chunk.reshape(-1)[0] if chunk.flags.c_contiguous else chunk[(0,) * chunk.ndim]
        if first == first and first != fill:  # NaN first element: fall through
            return False
        if chunk.ndim and chunk.size > _FILL_PROBE and chunk.shape[0] > 1:
            # ... and the rest in its first few rows (data that starts at the fill
            # value, as a sum from zero does): a whole 64 MiB shard compared with
            # the fill took ~10 ms before its encoding started.
            rows = max(1, _FILL_PROBE * chunk.shape[0] // chunk.size)
            if not is_fill(chunk[:rows], fill, dtype):
                return False
    if chunk.dtype.kind == "V" or chunk.dtype.fields:
        fb = np.array(fill, dtype=chunk.dtype).tobytes()
        return np.ascontiguousarray(chunk).tobytes() == fb * chunk.size
    if chunk.dtype.kind in "fc":
        try:
            f = np.asarray(fill, dtype=chunk.dtype)
        except (TypeError, ValueError):
            return False
        if chunk.dtype.kind == "c":
            return _floats_are(chunk.real, f.real) and _floats_are(chunk.imag, f.imag)
        return _floats_are(chunk, f)
    if chunk.dtype.kind in "mM":
        # Compare the int64 values: NaT != NaT, so a NaT fill never matched.
        try:
            f = np.asarray(fill, dtype=chunk.dtype)
        except (TypeError, ValueError):
            return False
        return bool((chunk.view("i8") == f.view("i8")).all())
    if chunk.dtype.kind == "O":
        # Element by element with Python's ==: numpy would turn a bytes or str
        # fill into a numpy scalar first, which drops trailing NULs (b"a" would
        # then equal a b"a\x00" fill, and be lost).
        f = np.empty((), dtype=object)
        f[()] = fill
        try:
            return bool(np.all(chunk == f))
        except (TypeError, ValueError):
            return False
    try:
        return bool(np.all(chunk == fill))
    except (TypeError, ValueError):
        return False


# Elements of a chunk's leading rows compared with the fill value first.
_FILL_PROBE = 1 << 14


def _floats_are(x: np.ndarray, f: np.ndarray) -> bool:
    """Whether every element of the float array ``x`` is the 0-d ``f``: the same
    bits (-0.0 is not a 0.0 fill), any NaN for a NaN fill."""
    if np.isnan(f):
        return bool(np.isnan(x).all())
    bits = np.dtype(f"u{x.dtype.itemsize}")
    return bool((x.view(bits) == f.view(bits)).all())


def merge_into(
    chunk: np.ndarray,
    sel: Any,
    part: np.ndarray,
    fields: str | list[str] | None = None,
    where: np.ndarray | None = None,
) -> None:
    """``chunk[sel] = part``, limited to the record ``fields`` of a structured
    dtype and to the elements where ``where`` (shaped like ``part``) is True."""
    if isinstance(fields, list):
        # One name at a time: a view of several fields keeps the whole record's
        # item size, and a fancy-indexed assignment through it writes the other
        # fields' bytes too.
        for name in fields:
            merge_into(chunk, sel, part, name, where)
        return
    if fields is not None:
        chunk = chunk[fields]
        part = part[fields]
    if where is None:
        chunk[sel] = part
        return
    target = chunk[sel]
    if target.ndim > where.ndim:  # a sub-array field: its own axes trail the mask's
        where = where.reshape(where.shape + (1,) * (target.ndim - where.ndim))
    if np.shares_memory(target, chunk):
        np.copyto(target, part, where=where)
    else:  # index arrays gave a copy: merged, then put back
        np.copyto(target, part, where=where)
        chunk[sel] = target
