"""Small reads and writes of the sync ``Array``, done in the calling thread.

For a few chunks on a store with cheap blocking I/O (memory, local files), the
trip through the event loop and the thread pool costs more than the work. The
sync :class:`~cuzarr.core.array.Array` therefore plans such a request as
``getitem``/``setitem`` do and runs the same job with the inline driver
(:func:`cuzarr.core.plans.try_inline`); each function here returns
``NotImplemented`` (nothing done) when the request is not such a one, and the
caller goes through the event loop.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cuzarr.buffer import host_selection, is_device_array
from cuzarr.core import engine
from cuzarr.core.plans import try_inline
from cuzarr.core.shards import try_read_sharded_inline
from cuzarr.indexing.selection import (
    BasicPlan,
    normalize_coordinate,
    normalize_numpy,
    normalize_orthogonal,
    pop_fields,
)

__all__ = ["Converted", "get_selection_inline", "getitem_inline", "setitem_inline"]

_HOST_PROBE = np.empty(0)


class Converted:
    """A write's value already converted to the array's dtype and the
    selection's shape (see :func:`setitem_inline`)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def getitem_inline(arr: Any, selection: Any, prototype: Any = None,
                   planned: list[Any] | None = None) -> Any:
    """``arr.getitem(selection)`` (``arr`` an ``AsyncArray``) for a small basic
    selection, in the calling thread; ``NotImplemented`` otherwise. A basic
    selection's plan, once made, is appended to ``planned`` (the caller's
    ``AsyncArray.getitem_planned`` takes it instead of planning again)."""
    sio = arr.store_path.store.sync_io()
    if sio is None or pop_fields(selection)[0] is not None:
        return NotImplemented
    plan = normalize_numpy(host_selection(selection), arr.shape, arr._dims())
    if not isinstance(plan, BasicPlan):
        return NotImplemented
    if planned is not None:
        planned.append(plan)
    if math.prod(len(p.chunks) for p in plan.projections) > engine.SMALL_READ_MAX:
        return NotImplemented  # never small: no items made for nothing
    items = engine.chunk_items(plan.projections)
    result = _read(arr, items, plan.buffer_shape, plan.result_shape, prototype, sio)
    if result is NotImplemented:
        return result
    return result[()] if plan.scalar else result


def get_selection_inline(arr: Any, kind: str, selection: Any,
                         planned: list[Any] | None = None) -> Any:
    """:func:`getitem_inline` for ``get_orthogonal_selection`` (``kind``
    "orthogonal") and ``get_coordinate_selection`` ("coordinate") without
    ``out``, ``prototype`` or ``fields``. What it planned is appended to
    ``planned``: an orthogonal selection's plan (for
    ``AsyncArray.get_orthogonal_planned``), or a coordinate selection's shape
    and items (``AsyncArray.get_coordinate_planned``)."""
    sio = arr.store_path.store.sync_io()
    if sio is None:
        return NotImplemented
    if kind == "coordinate":
        coords, shape = normalize_coordinate(host_selection(selection), arr.shape)
        n = math.prod(shape)
        items = engine.coordinate_items(arr._dims(), coords) if n else []
        if planned is not None:
            planned.append((shape, items))
        result = _read(arr, items, (n,), shape, None, sio)
    else:
        plan = normalize_orthogonal(host_selection(selection), arr.shape, arr._dims())
        if planned is not None:
            planned.append(plan)
        if math.prod(len(p.chunks) for p in plan.projections) > engine.SMALL_READ_MAX:
            return NotImplemented  # never small: no items made for nothing
        items = engine.chunk_items(plan.projections)
        result = _read(arr, items, plan.buffer_shape, plan.result_shape, None, sio)
    if result is NotImplemented:
        return result
    return result[()] if result.ndim == 0 else result


def _read(
    arr: Any,
    items: list[Any],
    buffer_shape: tuple[int, ...],
    result_shape: Any,
    prototype: Any,
    sio: Any,
) -> Any:
    """Read ``items`` into a new buffer inline if the request is small: the
    buffer reshaped to ``result_shape``, or ``NotImplemented`` (nothing read)."""
    codec = arr._shard_codec
    if len(items) > engine.SMALL_READ_CHUNKS and (
        codec is not None or not engine.small_read(arr.metadata, len(items), _HOST_PROBE)
    ):
        return NotImplemented  # checked before a buffer is made for nothing
    buf = arr._out_buffer(buffer_shape, None, prototype)
    if not items or buf.size == 0:
        done = True
    elif codec is not None:
        done = try_read_sharded_inline(
            arr.store_path, arr.metadata, arr._pipeline, codec, items, buf
        )
    elif len(items) > engine.SMALL_READ_CHUNKS and type(buf) is not np.ndarray:
        done = False  # beyond SMALL_READ_CHUNKS, host reads only (engine.small_read)
    else:
        # engine.try_read_inline's checks are done above: its job, straight
        job = engine.read_job(arr.store_path, arr.metadata, arr._pipeline, items, buf, sio)
        done = try_inline(job, arr.store_path.store, sio)
    if not done:
        return NotImplemented
    return buf.reshape(result_shape)


def setitem_inline(arr: Any, selection: Any, value: Any) -> Any:
    """Do a small basic write in the calling thread: None when done;
    ``NotImplemented`` (nothing written, ``value`` untouched) or, when the
    chunks' locks were busy, the converted value as a :class:`Converted`
    (nothing written either) for the caller to write through the event loop
    without converting ``value`` again (a dask array would be computed twice).

    Same plan, same value conversion, same encoder and the same key locks as
    ``setitem`` (taken at once, or the call goes the slow way and waits for
    them there)."""
    if (
        arr.store_path.store.sync_io() is None
        or pop_fields(selection)[0] is not None
        or _is_array_like_source(value)
        or is_device_array(value)
    ):
        return NotImplemented
    arr._check_writable()
    plan = normalize_numpy(host_selection(selection), arr.shape, arr._write_dims())
    if not isinstance(plan, BasicPlan):
        return NotImplemented
    items = engine.chunk_items(plan.projections)
    if not engine.small_write(arr.metadata, len(items)):
        return NotImplemented
    converted = arr._as_value(
        value, plan.result_shape, keep_device=True, basic=True, scalar=plan.scalar
    )
    if engine.try_write_inline(
        arr.store_path,
        arr.metadata,
        arr._pipeline,
        items,
        converted.reshape(plan.buffer_shape),
        arr.write_empty_chunks,
    ):
        return None
    return Converted(converted)


def _is_array_like_source(value: Any) -> bool:
    """A cuzarr array (sync: ``_async_array``; async: a store path and
    metadata) or a lazy view (``read_async``): read on the loop, not here."""
    return (
        hasattr(value, "_async_array")
        or (hasattr(value, "store_path") and hasattr(value, "metadata"))
        or callable(getattr(value, "read_async", None))
    )
