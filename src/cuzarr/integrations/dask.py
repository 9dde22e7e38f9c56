"""dask: cuzarr arrays as dask arrays, and dask arrays written to cuzarr."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.api.synchronous import create_array
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.build import element_type
from cuzarr.core.group import Group
from cuzarr.core.lazy import LazyArray
from cuzarr.storage.base import Store

__all__ = ["from_dask", "register_tokenizers", "to_dask"]

_registered = False


def register_tokenizers() -> None:
    """Teach ``dask.base.tokenize`` cuzarr's stores, arrays and groups: by which
    store (as it compares: its root, or for a memory store the mapping itself),
    node path and array metadata, never by the bytes they hold.

    dask's fallback pickles the object, which for a memory store is every byte in
    it (a second per 200 MB, at each ``to_dask`` or ``xr.open_dataset(store,
    chunks=...)``), and names two memory arrays holding equal bytes alike, so one
    graph over both reads one of them twice. Data is read when the graph runs,
    so the same node gives the same name whatever it holds now. Idempotent; a
    no-op without dask.
    """
    global _registered
    if _registered:
        return
    try:
        from dask.base import normalize_token
    except ImportError:  # pragma: no cover - dask is optional
        return
    # Arrays, views and stores name themselves (``__dask_tokenize__``); the
    # registrations make that so for subclasses that override it too.
    for cls in (Store, Array, AsyncArray, LazyArray):
        normalize_token.register(cls)(lambda o: o.__dask_tokenize__())
    normalize_token.register(Group)(
        lambda g: ("cuzarr.Group", g.store.__dask_tokenize__(), g.path, g.metadata.zarr_format)
    )
    _registered = True


def to_dask(a: Any, chunks: Any = None, **kwargs: Any) -> Any:
    """A dask array reading ``a`` lazily, one task per block.

    Blocks align with the array's shards (or chunks when unsharded), so each
    task reads whole stored objects. Tasks pickle the array by reference
    (store + path), so a distributed cluster reads it directly.
    """
    import dask.array as da

    if chunks is None:
        chunks = a.shards or a.chunks
    if a.ndim == 0:  # see _getter_0d
        kwargs.setdefault("getitem", _getter_0d)
    register_tokenizers()
    return da.from_array(
        a,
        chunks=chunks,
        asarray=False,
        lock=False,
        fancy=False,
        meta=np.empty((0,) * a.ndim, dtype=a.dtype),
        **kwargs,
    )


def _getter_0d(a: Any, key: Any, asarray: bool = True, lock: Any = None) -> Any:
    """dask's getter for a 0-d array: ``a[()]`` is a numpy scalar, whose dtype
    may be narrower than the array's (``b"ab"`` from an ``S4`` array is ``S2``);
    the block keeps the array's dtype, as the dask array (and ``numpy``) say."""
    from dask.array.core import getter

    out = getter(a, key, asarray=asarray, lock=lock)
    return np.asarray(out, dtype=a.dtype) if isinstance(out, np.generic) else out


def from_dask(
    x: Any,
    store: Any = None,
    name: str | None = None,
    *,
    compute: bool = True,
    **create_kwargs: Any,
) -> Any:
    """Write dask array ``x`` to a new cuzarr array, in parallel.

    ``x`` is rechunked so every task writes whole shards (or chunks): no two
    tasks touch the same stored object, so no locking is needed.
    """
    import dask.array as da

    register_tokenizers()
    if any(np.isnan(c) for dim in x.chunks for c in dim):
        # as dask's own to_zarr: the shape (and where each block lands) is unknown
        raise ValueError(
            "Saving a dask array with unknown chunk sizes is not supported: call "
            "x.compute_chunk_sizes() first (or ddf.to_dask_array(lengths=True) for a "
            "dask DataFrame). See https://docs.dask.org/en/latest/array-chunks.html#unknown-chunks"
        )
    create_kwargs.setdefault("shape", x.shape)
    create_kwargs.setdefault("dtype", element_type(x.dtype))  # object: strings
    if "chunks" not in create_kwargs:
        create_kwargs["chunks"] = tuple(max(max(c), 1) if c else 1 for c in x.chunks)
    arr = create_array(store, name, **create_kwargs)
    # Stored objects (shards, or chunks) per dimension: regular or rectilinear.
    units = arr.write_chunk_sizes
    aligned = x.rechunk(tuple(_aligned(c, u) for c, u in zip(x.chunks, units, strict=True)))
    result = da.store(aligned, arr, lock=False, compute=compute)
    return arr if compute else (arr, result)


def _aligned(current: tuple[int, ...], units: tuple[int, ...]) -> tuple[int, ...]:
    """Block sizes along one axis: runs of whole stored objects (``units``, their
    extents inside the array), each run at most the current block size when possible."""
    target = max(current) if current else 0
    out: list[int] = []
    acc = 0
    for u in units:
        if acc and acc + u > target:
            out.append(acc)
            acc = 0
        acc += u
    if acc:
        out.append(acc)
    return tuple(out) or (0,)
