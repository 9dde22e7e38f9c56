"""Lazy views (``a.lazy[...]``) and batched reads (``read_many``).

A ``LazyArray`` is an array plus an :class:`~cuzarr.indexing.transform.IndexTransform`;
indexing it composes transforms and does no I/O. Reading plans the transform
onto the array's read grid (inner chunks for sharded arrays):

* an *orthogonal* transform (every output dimension constant, strided, or an
  index array along its own input dimension) is one orthogonal read into a
  buffer, then a free reshape/transpose;
* anything else (pointwise index arrays, numpy's broadcast advanced indices)
  is read either as the bounding orthogonal block of the unique indices followed
  by a numpy gather, or point by point grouped by chunk, whichever touches
  fewer elements.

``read_many`` plans every view, merges their chunk items by chunk coordinates
and runs the merged list through the array's ordinary reader
(``AsyncArray._read_items``: the plain engine, or the partial shard reader)
with a scatter target in place of an output buffer: each chunk is fetched and
decoded once, then copied into every view's buffer that needs part of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from cuzarr.buffer import array_module, is_device_array
from cuzarr.core.async_array import _materialize
from cuzarr.core.shaped import Shaped
from cuzarr.core.values import as_requested, device_index
from cuzarr.gpu.dispatch import emulating
from cuzarr.indexing.items import ChunkItem
from cuzarr.indexing.transform import CONSTANT, STRIDED, IndexTransform
from cuzarr.indexing.view_plans import ViewPlan, plan_transform
from cuzarr.runtime.sync import run_here, sync

__all__ = ["LazyArray", "read_many", "read_many_async"]


# -- planning ---------------------------------------------------------------------
def plan_view(array: Any, t: IndexTransform) -> ViewPlan:
    """The chunk items of view ``t`` of ``array`` on its read grid."""
    return plan_transform(t, array.shape, array._dims())


class _Scatter:
    """Stands in for an output buffer: ``out[u] = chunk`` copies unique chunk ``u``
    into every consumer ``(buffer, chunk selection, output selection)``."""

    def __init__(self, consumers: list[list[tuple[np.ndarray, Any, Any]]], ndim: int) -> None:
        self.consumers = consumers
        self.ndim = ndim
        self.size = len(consumers)

    def __setitem__(self, u: int, value: Any) -> None:
        if self.ndim and isinstance(value, np.ndarray) and value.ndim == self.ndim:
            for buf, csel, osel in self.consumers[u]:
                part = value[csel]
                buf[osel] = part if isinstance(buf, np.ndarray) else array_module(buf).asarray(part)
        else:  # the fill value of a missing chunk, or a 0-d array's only element
            for buf, _csel, osel in self.consumers[u]:
                buf[osel] = value


async def _read_same_array(
    array: Any, transforms: list[IndexTransform], prototype: Any = None
) -> list[Any]:
    plans = [plan_view(array, t) for t in transforms]
    bufs = [array._out_buffer(p.buffer_shape, None, prototype) for p in plans]
    if len(plans) == 1:  # one plan names each chunk once: read it as ``a[...]`` would
        if plans[0].items:
            await array._read_items(plans[0].items, bufs[0])
        return [plans[0].finish(bufs[0])]
    where: dict[tuple[int, ...], int] = {}
    consumers: list[list[tuple[np.ndarray, Any, Any]]] = []
    merged: list[ChunkItem] = []
    for buf, p in zip(bufs, plans, strict=True):
        for coords, csel, osel, _complete in p.items:
            u = where.get(coords)
            if u is None:
                u = where[coords] = len(merged)
                merged.append((coords, (), u, False))  # type: ignore[arg-type]
                consumers.append([])
            consumers[u].append((buf, csel, osel))
    if merged:
        if array.ndim and (is_device_array(bufs[0]) or emulating()):
            await _read_merged_staged(array, merged, consumers, bufs[0])
        else:
            await array._read_items(merged, _Scatter(consumers, array.ndim))
    return [p.finish(b) for p, b in zip(plans, bufs, strict=True)]


# Decoded bytes staged at a time when several device views share chunks.
STAGE_MAX = 256 << 20


def _shift(sel: Any, offset: int, n: int) -> Any:
    """An in-chunk selection along axis 0 moved to a chunk stored ``offset``
    rows down a staging array (``n``: the chunk's extent)."""
    if isinstance(sel, slice):
        start, stop, step = sel.indices(n)
        stop += offset
        return slice(start + offset, stop if stop >= 0 else None, step)
    return np.asarray(sel) + offset


async def _read_merged_staged(
    array: Any, merged: list[ChunkItem], consumers: list[list[Any]], like: Any
) -> None:
    """Views bound for the device: their unique chunks go through the device
    read path whole, stacked along axis 0 of a staging array on the device
    (at most ``STAGE_MAX`` bytes at a time), and each view copies its parts
    from there on the device. The host path decodes each chunk once, then
    uploads it once per view that needs it."""
    grid = array._read_grid
    shapes = [tuple(grid.stored_chunk_shape(tuple(it[0]))) for it in merged]
    block = tuple(max(sh[d] for sh in shapes) for d in range(array.ndim))
    per = max(1, STAGE_MAX // max(1, math.prod(block) * like.dtype.itemsize))
    xp = array_module(like)
    for lo in range(0, len(merged), per):
        part = range(lo, min(len(merged), lo + per))
        stage = xp.empty((len(part) * block[0], *block[1:]), dtype=like.dtype)
        items: list[ChunkItem] = []
        for k, u in enumerate(part):
            sh = shapes[u]
            whole = tuple(slice(0, n) for n in sh)
            at = (slice(k * block[0], k * block[0] + sh[0]), *whole[1:])
            items.append((merged[u][0], whole, at, True))
        await array._read_items(items, stage)
        for k, u in enumerate(part):
            for buf, csel, osel in consumers[u]:
                src = (_shift(csel[0], k * block[0], shapes[u][0]), *csel[1:])
                buf[device_index(buf, osel)] = stage[device_index(stage, src)]


async def read_many_async(views: Iterable[LazyArray], prototype: Any = None) -> list[Any]:
    """Read several views together; each chunk is fetched and decoded once.

    Views may belong to different arrays. Identical views are read once (the
    results are independent copies). Returns one array per view, shaped like
    the view: numpy, or CuPy when ``prototype`` (or the configured default,
    ``cuzarr.config.enable_gpu()``) says the device.
    """
    views = as_views(list(views))
    for v in views:
        if not isinstance(v, LazyArray):
            raise TypeError(f"read_many takes lazy views (a.lazy[...]), got {type(v).__name__}")
    # Group by array (array objects over the same stored array are one), and
    # de-duplicate identical views within an array.
    groups: list[tuple[Any, list[IndexTransform], dict[Any, int]]] = []
    group_of: dict[int, int] = {}  # id(array object) -> index in groups
    slot: list[tuple[int, int]] = []
    for v in views:
        arr = v._async
        gi = group_of.get(id(arr))
        if gi is None:
            gi = next((i for i, g in enumerate(groups) if _same_array(g[0], arr)), len(groups))
            if gi == len(groups):
                groups.append((arr, [], {}))
            group_of[id(arr)] = gi
        g = groups[gi]
        key = v._transform.key()
        j = g[2].get(key)
        if j is None:
            j = g[2][key] = len(g[1])
            g[1].append(v._transform)
        slot.append((gi, j))
    results = await asyncio.gather(*(_read_same_array(g[0], g[1], prototype) for g in groups))
    by_group = dict(enumerate(results))
    out: list[np.ndarray] = []
    used: set[tuple[int, int]] = set()
    for s in slot:
        r = by_group[s[0]][s[1]]
        out.append(r.copy() if s in used else r)
        used.add(s)
    return out


def _same_array(a: Any, b: Any) -> bool:
    """Whether two array objects read the same stored array the same way: the same
    store (one object, or equal stores of one of cuzarr's own store classes other
    than wrappers: a subclass or wrapper may count or change reads per object),
    the same path, the same metadata (a handle opened before a resize is not the
    same), the same memory order and buffer prototype of results."""
    if a is b:
        return True
    from cuzarr.storage.wrapper import WrapperStore

    sa, sb = a.store_path.store, b.store_path.store
    if sa is not sb and (
        type(sa) is not type(sb)
        or not type(sa).__module__.startswith("cuzarr.storage.")
        or isinstance(sa, WrapperStore)
        or sa != sb
    ):
        return False
    return (
        a.store_path.path == b.store_path.path
        and a.order == b.order
        and a._prototype == b._prototype
        and a.metadata.to_dict() == b.metadata.to_dict()
    )


def read_many(views: Iterable[LazyArray], prototype: Any = None) -> list[Any]:
    """Read several views together; each chunk is fetched and decoded once
    (see :func:`read_many_async`)."""
    views = list(views)
    coro = read_many_async(views, prototype)
    # stores with blocking I/O only: planned and waited for in this thread
    # (a training loop's many small reads; see run_here)
    if views and all(_blocking(v) for v in views):
        return run_here(coro)
    return sync(coro)


def _blocking(view: Any) -> bool:
    """Whether ``view`` reads a store whose I/O blocks in worker threads."""
    arr = getattr(view, "_async", None)
    return arr is not None and arr.store_path.store.sync_io() is not None


# -- writing ------------------------------------------------------------------------
async def _write(array: Any, t: IndexTransform, value: Any) -> None:
    array._check_writable()
    t.check_bounds(array.shape)
    shape = t.shape
    # A cuzarr array or view as the value: read it here, on the loop (its
    # ``__array__`` would re-enter the sync API).
    v = array._as_value(await _materialize(value), shape, basic=not t.has_arrays())
    if math.prod(shape) == 0:
        return
    if not t.maps:  # a 0-d array: every point of the view is its element; the last wins
        await array.setitem((), v.reshape(-1)[-1])
        return
    referenced = {d for m in t.maps for d in m.dependent_dims()}
    if t.is_orthogonal() and all(shape[k] == 1 for k in set(range(t.input_rank)) - referenced):
        sel: list[Any] = []
        ref: list[int] = []
        for m in t.maps:
            if m.kind == CONSTANT:
                sel.append(m.offset)
            elif m.kind == STRIDED:
                stop = m.offset + m.stride * shape[m.input_dim]
                sel.append(slice(m.offset, stop if stop >= 0 else None, m.stride))
                ref.append(m.input_dim)
            else:
                sel.append(m.index_array.reshape(-1))
                ref.append(m.dependent_dims()[0])
        order = sorted(ref)
        vv = v.reshape(tuple(shape[k] for k in order))
        perm = [order.index(k) for k in ref]
        if perm != list(range(len(perm))):
            vv = vv.transpose(perm)
        if t.has_arrays():
            await array.set_orthogonal_selection(tuple(sel), vv)
        else:
            await array.setitem(tuple(sel), vv)
        return
    await array.set_coordinate_selection(tuple(t.coordinates()), v.reshape(-1))


# -- the view -----------------------------------------------------------------------
class _ViewIndexer:
    def __init__(self, view: LazyArray, mode: str) -> None:
        self._view = view
        self._mode = mode

    def __getitem__(self, selection: Any) -> LazyArray:
        return self._view._derive(getattr(self._view._transform, self._mode)(selection))

    def __setitem__(self, selection: Any, value: Any) -> None:
        self[selection].write(value)


class LazyArray(Shaped):
    """A lazy view of an array: a composed selection that has not been read.

    Create one with ``a.lazy[...]``. Indexing a view (``[...]`` with numpy's
    rules, ``.oindex[...]``, ``.vindex[...]``) returns another view and does no
    I/O. ``read()``, ``await read_async()`` and ``np.asarray(view)`` read it;
    ``view[...] = v`` and ``write(v)`` write through to the array.
    """

    def __init__(self, array: Any, transform: IndexTransform | None = None) -> None:
        from cuzarr.core.array import Array, AsyncArray

        if isinstance(array, Array):
            self._array = array
            self._async = array.async_array
        elif isinstance(array, AsyncArray):
            self._array = array
            self._async = array
        else:
            raise TypeError(f"LazyArray wraps a cuzarr Array or AsyncArray, not {type(array)}")
        self._transform = transform or IndexTransform.identity(self._async.shape)

    def _derive(self, t: IndexTransform) -> LazyArray:
        return LazyArray(self._array, t)

    # -- properties -------------------------------------------------------------
    @property
    def array(self) -> Any:
        """The underlying array (``Array`` or ``AsyncArray``, as the view was made from)."""
        return self._array

    @property
    def transform(self) -> IndexTransform:
        """The composed selection, as an index transform onto the array."""
        return self._transform

    @property
    def shape(self) -> tuple[int, ...]:
        return self._transform.shape

    @property
    def dtype(self) -> np.dtype:
        return self._async.dtype

    @property
    def lazy(self) -> LazyArray:
        """The view itself (so ``x.lazy[...]`` works on arrays and views alike)."""
        return self

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d view")
        return self.shape[0]

    def __iter__(self) -> Iterator[LazyArray]:
        """Views of the first axis, in order (each does its I/O when read; read
        the whole view once instead to fetch each chunk once)."""
        if not self.shape:
            raise TypeError("iteration over a 0-d view")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return (
            f"<cuzarr.LazyArray of {self._array!r} selection={self._transform.describe()} "
            f"shape={self.shape} dtype={self.dtype}>"
        )

    # -- composing --------------------------------------------------------------
    def __getitem__(self, selection: Any) -> LazyArray:
        return self._derive(self._transform.index(selection))

    def __setitem__(self, selection: Any, value: Any) -> None:
        self[selection].write(value)

    @property
    def oindex(self) -> _ViewIndexer:
        """Orthogonal indexing of the view (each dimension independently)."""
        return _ViewIndexer(self, "oindex")

    @property
    def vindex(self) -> _ViewIndexer:
        """Pointwise indexing of the view (integer arrays broadcast into points, or a mask)."""
        return _ViewIndexer(self, "vindex")

    # -- I/O --------------------------------------------------------------------
    async def read_async(self, *, out: np.ndarray | None = None, prototype: Any = None) -> Any:
        """Read the view: an array of ``self.shape`` (into ``out`` when given:
        decoded straight into it where the view's layout allows, as for
        ``get_*_selection(out=)``)."""
        if out is None:
            (result,) = await _read_same_array(self._async, [self._transform], prototype)
            return result
        if tuple(out.shape) != self.shape:
            raise ValueError(f"out has shape {out.shape}, the view has shape {self.shape}")
        # the array's own check (dtype: TypeError), before any I/O
        self._async._out_buffer(self.shape, out)
        plan = plan_view(self._async, self._transform)
        if plan.direct and out.flags.c_contiguous:
            buf = out.reshape(plan.buffer_shape)
            if plan.items:
                await self._async._read_items(plan.items, buf)
            return out
        (result,) = await _read_same_array(self._async, [self._transform], out)
        out[...] = result
        return out

    def read(self, *, out: np.ndarray | None = None, prototype: Any = None) -> Any:
        """Read the view: an array of ``self.shape`` (into ``out`` when given)."""
        return sync(self.read_async(out=out, prototype=prototype))

    async def write_async(self, value: Any) -> None:
        """Write ``value`` (broadcast to the view's shape) through to the array."""
        await _write(self._async, self._transform, value)

    def write(self, value: Any) -> None:
        """Write ``value`` (broadcast to the view's shape) through to the array."""
        sync(self.write_async(value))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return as_requested(self.read(prototype="cpu"), dtype, copy)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        # named by reference (its array and the elements it selects), not by a
        # pickle of the store
        key = hashlib.sha1(repr(self.transform.key()).encode()).hexdigest()
        return ("cuzarr.LazyArray", self._async.__dask_tokenize__(), key)

    def to_dask(self, chunks: Any = "auto", **kwargs: Any) -> Any:
        """A dask array over this view (``dask.array.from_array`` with a numpy meta)."""
        import dask.array as da

        kwargs.setdefault("meta", np.empty((0,) * self.ndim, dtype=self.dtype))
        return da.from_array(self, chunks=chunks, **kwargs)

    def chunks_touched(self, *, keys: bool = False) -> list[Any]:
        """What a read would fetch, without fetching it.

        By default, the sorted chunk coordinates a read decodes, on the grid of
        ``array.chunks`` (inner chunks for sharded arrays, as ``a.blocks``; shards
        when other codecs wrap the sharding codec and shards are decoded whole).
        With ``keys=True``, the sorted store keys it reads from (shard keys for
        sharded arrays).
        """
        arr = self._async
        coords = sorted({it[0] for it in plan_view(arr, self._transform).items})
        if not keys:
            return coords
        codec = arr._shard_codec
        if codec is not None:
            cps = codec.chunks_per_shard(arr.metadata.chunk_shape)
            coords = sorted({tuple(c // n for c, n in zip(cc, cps, strict=True)) for cc in coords})
        prefix = arr.store_path.path + "/" if arr.store_path.path else ""
        return sorted(prefix + arr.metadata.chunk_key(c) for c in coords)


def as_views(views: Sequence[Any]) -> list[LazyArray]:
    """Arrays become whole-array views; views pass through."""
    from cuzarr.core.array import Array, AsyncArray

    return [LazyArray(v) if isinstance(v, (Array, AsyncArray)) else v for v in views]
