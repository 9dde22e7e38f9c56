"""The async API: every function here is a coroutine (the sync API wraps them).

``create_array``, ``from_array``, ``create`` and ``open_array`` are core's
(:mod:`cuzarr.core.create`, :mod:`cuzarr.core.opening`), exported here: groups
create arrays through them too, and core imports nothing from the api."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.async_array import _materialize
from cuzarr.core.build import element_type
from cuzarr.core.create import create, create_array, create_like_zarr, from_array, name_of
from cuzarr.core.create_args import (
    like_args,
    like_kwargs,
    warn_unimplemented,
)
from cuzarr.core.group import AsyncGroup, Group
from cuzarr.core.hierarchy import create_hierarchy as make_hierarchy
from cuzarr.core.lazy import LazyArray
from cuzarr.core.lazy import read_many_async as read_many
from cuzarr.core.modes import resolve_mode, zarr_format_for
from cuzarr.core.nodes import load_node_metadata
from cuzarr.core.opening import open_array
from cuzarr.errors import ContainsArrayError, GroupNotFoundError, NodeNotFoundError
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.storage.common import make_store_path

__all__ = [
    "AsyncArray",
    "AsyncGroup",
    "LazyArray",
    "array",
    "consolidate_metadata",
    "copy",
    "copy_all",
    "copy_store",
    "create",
    "create_array",
    "create_group",
    "create_hierarchy",
    "empty",
    "empty_like",
    "from_array",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_like",
    "read_many",
    "save",
    "save_array",
    "save_group",
    "tree",
    "zeros",
    "zeros_like",
]


async def create_group(
    store: Any = None,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Create a group; see :func:`cuzarr.create_group`."""
    sp = make_store_path(store, path, mode="a", storage_options=storage_options)
    return await AsyncGroup.create(
        sp, zarr_format=zarr_format_for(zarr_format, sp), attributes=attributes, overwrite=overwrite
    )


async def open_group(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
    meta_array: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    chunk_store: Any = None,
) -> AsyncGroup:
    """Open a group; modes ``a``/``w``/``w-`` create it when missing or asked to.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python). ``meta_array``: where the
    reads of the arrays got through the group land (numpy or CuPy). zarr-python's
    legacy ``cache_attrs``, ``synchronizer`` and ``chunk_store`` are accepted with
    the warning zarr-python gives: they have no effect."""
    warn_unimplemented(
        cache_attrs=cache_attrs, synchronizer=synchronizer, chunk_store=chunk_store
    )
    group = await _open_group(
        store, mode, path, zarr_format, storage_options, attributes, use_consolidated
    )
    group.set_prototype(meta_array)
    return group


async def _open_group(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    attributes: dict[str, Any] | None,
    use_consolidated: bool | None,
) -> AsyncGroup:
    mode = resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode == "w":
        return await AsyncGroup.create(
            sp, zarr_format=zarr_format_for(zarr_format, sp), attributes=attributes, overwrite=True
        )
    if mode == "w-":
        return await AsyncGroup.create(sp, zarr_format=zarr_format_for(zarr_format, sp), attributes=attributes)
    try:
        return await AsyncGroup.open(sp, zarr_format, use_consolidated=use_consolidated)
    except GroupNotFoundError:
        if mode == "a":
            try:
                await load_node_metadata(sp, zarr_format)
            except NodeNotFoundError:
                return await AsyncGroup.create(
                    sp, zarr_format=zarr_format_for(zarr_format, sp), attributes=attributes
                )
            raise ContainsArrayError(f"an array, not a group, exists at path {sp.path!r}") from None
        raise


async def open(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open whatever node is at ``path``: an array or a group."""
    mode = resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" in kwargs:
            return await open_array(sp, mode=mode, zarr_format=zarr_format, **kwargs)
        return await open_group(sp, mode=mode, zarr_format=zarr_format)
    try:
        meta = await load_node_metadata(sp, zarr_format)
    except NodeNotFoundError as e:
        if mode == "a":
            if "shape" in kwargs:
                kwargs.setdefault("dtype", "float64")  # zarr-python's default here
                return await create_array(sp, zarr_format=zarr_format_for(zarr_format, sp), **kwargs)
            return await AsyncGroup.create(sp, zarr_format=zarr_format_for(zarr_format, sp))
        # zarr-python raises GroupNotFoundError here (a NodeNotFoundError too)
        raise GroupNotFoundError(str(e)) from None
    if isinstance(meta, ArrayMetadata):
        if kwargs.get("config") is not None:
            # as open_array: the config (write_empty_chunks, order) applies to it
            return await open_array(sp, mode=mode, zarr_format=zarr_format, **kwargs)
        node: AsyncArray | AsyncGroup = AsyncArray(meta, sp)
    else:
        node = AsyncGroup(meta, sp)
    node.set_prototype(kwargs.get("meta_array"))  # where the reads land
    return node


async def consolidate_metadata(
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Store the metadata of every node below the group at ``path`` in one place."""
    sp = make_store_path(store, path, mode="a", storage_options=storage_options)
    group = await AsyncGroup.open(sp, zarr_format, use_consolidated=False)
    return await group.consolidate()


async def open_consolidated(
    store: Any,
    path: str | None = None,
    *,
    mode: str = "r",
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    use_consolidated: bool | None = True,
    **kwargs: Any,
) -> AsyncGroup:
    """Open a group from its consolidated metadata (an error if there is none).

    As in zarr-python, this is :func:`open_group` with ``use_consolidated=True``: modes
    ``w``/``w-`` create a new group and ``a`` creates a missing one; other keyword
    arguments (``attributes``...) go to :func:`open_group`."""
    if use_consolidated is False:
        raise TypeError("open_consolidated needs use_consolidated=True (or None)")
    return await open_group(
        store,
        mode=mode,
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        use_consolidated=True,
        **kwargs,
    )


async def array(data: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data``."""
    data = await _materialize(data)
    data = np.asanyarray(data) if not hasattr(data, "__cuda_array_interface__") else data
    kwargs.setdefault("dtype", element_type(data.dtype, data))
    kwargs.setdefault("shape", data.shape)
    kwargs["zarr_format"] = zarr_format_for(kwargs.get("zarr_format"), store)
    a = await create_array(store, name_of(kwargs), **kwargs)
    await a.setitem(Ellipsis, data)
    return a


async def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array whose elements all read as ``fill_value`` (nothing is written);
    the async twin of :func:`cuzarr.full`."""
    return await create_like_zarr(shape, store, {**kwargs, "fill_value": fill_value})


async def zeros(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array reading as zeros; the async twin of :func:`cuzarr.zeros`."""
    return await full(shape, 0, store, **kwargs)


async def ones(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array reading as ones; the async twin of :func:`cuzarr.ones`."""
    return await full(shape, 1, store, **kwargs)


async def empty(shape: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array with nothing written; the async twin of :func:`cuzarr.empty`."""
    return await create_like_zarr(shape, store, kwargs)


async def full_like(a: Any, fill_value: Any = None, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array like ``a`` reading as ``fill_value``; see :func:`cuzarr.full_like`."""
    kw = like_kwargs(a, kwargs, keep_fill=fill_value is None)
    if fill_value is None:
        fill_value = kw.pop("fill_value", None)
    return await full(kw.pop("shape"), fill_value, store, **kw)


async def zeros_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array of zeros like ``a``."""
    return await full_like(a, 0, store, **kwargs)


async def ones_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array of ones like ``a``."""
    return await full_like(a, 1, store, **kwargs)


async def empty_like(a: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """An array like ``a`` with nothing written (``a``'s fill value)."""
    kw = like_kwargs(a, kwargs, keep_fill=True)
    return await empty(kw.pop("shape"), store, **kw)


# ----------------------------------------------------------------------------------
# zarr-python compatibility: group, create, from_array, save*, load, tree, open_like
# ----------------------------------------------------------------------------------


async def group(
    store: Any = None,
    *,
    overwrite: bool = False,
    chunk_store: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    path: str | None = None,
    zarr_format: int | None = None,
    meta_array: Any = None,
    attributes: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Open a group, creating it if missing (replacing any node if ``overwrite``);
    ``meta_array`` as in :func:`open_group`."""
    return await open_group(
        store,
        mode="w" if overwrite else "a",
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        attributes=attributes,
        meta_array=meta_array,
        cache_attrs=cache_attrs,
        synchronizer=synchronizer,
        chunk_store=chunk_store,
    )


async def save_array(
    store: Any,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save a NumPy array to a store; see :func:`cuzarr.save_array`."""
    if np.isscalar(arr):
        arr = np.array(arr)
    if not (hasattr(arr, "shape") and hasattr(arr, "dtype")):
        raise TypeError("arr argument must be numpy or other NDArrayLike array")
    mode = kwargs.pop("mode", "a")
    overwrite = bool(kwargs.pop("overwrite", None)) or mode == "w"
    await create(
        arr.shape,
        dtype=element_type(arr.dtype, arr),
        chunks=getattr(arr, "chunks", None),
        store=store,
        path=path,
        zarr_format=zarr_format,
        storage_options=storage_options,
        overwrite=overwrite,
        data=arr,
        **kwargs,
    )


async def save_group(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save several NumPy arrays in a new group; see :func:`cuzarr.save_group`."""
    for a in args:
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(
                "All arguments must be numpy or other NDArrayLike arrays (except store, "
                "path, storage_options, and zarr_format)"
            )
    for k, v in kwargs.items():
        if not (hasattr(v, "shape") and hasattr(v, "dtype")):
            raise TypeError(f"Keyword argument '{k}' must be a numpy or other NDArrayLike array")
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    fmt = zarr_format_for(zarr_format, store)
    sp = make_store_path(store, path, mode="w", storage_options=storage_options)
    await AsyncGroup.create(sp, zarr_format=fmt, overwrite=True)
    items = [(f"arr_{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    await asyncio.gather(
        *(save_array(sp, a, zarr_format=fmt, path=name) for name, a in items)
    )


async def save(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array (``save_array``) or several in a group (``save_group``)."""
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    if len(args) == 1 and not kwargs:
        await save_array(
            store, args[0], zarr_format=zarr_format, path=path, storage_options=storage_options
        )
    else:
        await save_group(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )


async def load(
    *,
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
) -> Any:
    """Read an array (or every array of a group) into memory; see :func:`cuzarr.load`."""
    node = await open(store, mode="r", path=path, zarr_format=zarr_format)
    if isinstance(node, AsyncArray):
        return await node.getitem(Ellipsis)
    out: dict[str, Any] = {}
    for name, child in await node.members():
        if isinstance(child, AsyncArray):
            out[name] = await child.getitem(Ellipsis)
    return out


async def create_hierarchy(
    *, store: Any, nodes: dict[str, Any], overwrite: bool = False
) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
    """Create a hierarchy from metadata alone, as zarr-python's ``create_hierarchy``.

    Parameters
    ----------
    store : store-like
        Where (a path, URL, dict or store).
    nodes : dict
        Path (relative to the store's root; ``''`` is the root) to metadata:
        cuzarr's or zarr-python's ``GroupMetadata`` / array metadata objects, or
        metadata documents as dicts. One Zarr format for all.
    overwrite : bool
        Replace existing nodes named in ``nodes``, each with everything below it
        (else ``ContainsArrayError`` / ``ContainsGroupError`` before anything is
        written). Existing groups where ``nodes`` only implies one are kept as
        they are.

    Yields
    ------
    (str, AsyncArray or AsyncGroup)
        Every node of the hierarchy, explicit or implied (missing ancestors are
        created as groups, up to the root).
    """
    sp = make_store_path(store, None, mode="a")
    async for path, meta, node_sp in make_hierarchy(sp, nodes, overwrite):
        if isinstance(meta, ArrayMetadata):
            yield path, AsyncArray(meta, node_sp)
        else:
            yield path, AsyncGroup(meta, node_sp)


def _sync_nodes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
    """The async handles among a copy's arguments as the sync ones the copy
    functions walk (their thread cannot await)."""
    def wrap(x: Any) -> Any:
        if isinstance(x, AsyncArray):
            return Array(x)
        return Group(x) if isinstance(x, AsyncGroup) else x

    return tuple(wrap(a) for a in args), {k: wrap(v) for k, v in kwargs.items()}


# cuzarr.copy, copy_all and copy_store: registered by the copying layer (above
# this one) when it is imported, so that the api imports no copying code.
_copy_functions: dict[str, Any] = {}


def register_copy_functions(copy: Any, copy_all: Any, copy_store: Any) -> None:
    """Register the sync copy functions the awaitable ``copy``, ``copy_all`` and
    ``copy_store`` run: done by :mod:`cuzarr.copying` on import."""
    _copy_functions.update(copy=copy, copy_all=copy_all, copy_store=copy_store)


def _copy_function(name: str) -> Any:
    fn = _copy_functions.get(name)
    if fn is None:  # pragma: no cover - cuzarr's __init__ imports copying
        raise RuntimeError(f"cuzarr.copying is not imported: no {name}")
    return fn


async def copy(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy`, awaitable (it runs in a worker thread); sources and
    destinations may be async or sync handles."""
    copy_nodes = _copy_function("copy")
    args, kwargs = _sync_nodes(args, kwargs)
    return await asyncio.to_thread(copy_nodes, *args, **kwargs)


async def copy_all(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy_all`, awaitable (it runs in a worker thread); sources
    and destinations may be async or sync handles."""
    copy_children = _copy_function("copy_all")
    args, kwargs = _sync_nodes(args, kwargs)
    return await asyncio.to_thread(copy_children, *args, **kwargs)


async def copy_store(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
    """:func:`cuzarr.copy_store`, awaitable (it runs in a worker thread)."""
    copy_keys = _copy_function("copy_store")
    return await asyncio.to_thread(copy_keys, *args, **kwargs)


async def tree(grp: AsyncGroup, expand: bool | None = None, level: int | None = None) -> Any:
    """The hierarchy below ``grp`` as text (zarr-python deprecates this for ``Group.tree``)."""
    warnings.warn("Use Group.tree instead.", DeprecationWarning, stacklevel=2)
    return await grp.tree(expand=expand, level=level)


async def open_like(
    a: Any, path: str, *, zarr_format: int | None = None, **kwargs: Any
) -> AsyncArray:
    """Open the array at ``path`` (the store is ``store=``), creating it like ``a``."""
    like = like_args(a, zarr_format_for(zarr_format, kwargs.get("store")))
    like.pop("zarr_format", None)
    kw = {**like, **kwargs}
    if kw.get("mode") is None:
        kw["mode"] = "a"
    store = kw.pop("store", None)
    return await open_array(store, path=path, zarr_format=zarr_format, **kw)


