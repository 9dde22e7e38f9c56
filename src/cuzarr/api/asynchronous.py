"""The async API: every function here is a coroutine (the sync API wraps them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.core.array import AsyncArray
from cuzarr.core.build import build_array_metadata
from cuzarr.core.group import AsyncGroup
from cuzarr.core.lazy import LazyArray
from cuzarr.core.lazy import read_many_async as read_many
from cuzarr.core.nodes import load_node_metadata
from cuzarr.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    GroupNotFoundError,
    NodeNotFoundError,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.storage.common import make_store_path

__all__ = [
    "AsyncArray",
    "AsyncGroup",
    "LazyArray",
    "consolidate_metadata",
    "create_array",
    "create_group",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "read_many",
]

_MODES = ("r", "r+", "a", "w", "w-")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


async def create_array(
    store: Any = None,
    name: str | None = None,
    *,
    shape: Any,
    dtype: Any = "float64",
    chunks: Any = "auto",
    shards: Any = None,
    fill_value: Any = None,
    order: str | None = None,
    zarr_format: int | None = 3,
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    attributes: dict[str, Any] | None = None,
    dimension_names: Any = None,
    overwrite: bool = False,
    write_empty_chunks: bool | None = None,
    chunk_key_encoding: Any = None,
    dimension_separator: str | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    compressor: Any = "unset",
) -> AsyncArray:
    """Create an array; see :func:`cuzarr.create_array`."""
    meta = build_array_metadata(
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        shards=shards,
        fill_value=fill_value,
        order=order,
        zarr_format=3 if zarr_format is None else zarr_format,
        compressors=compressors,
        filters=filters,
        serializer=serializer,
        attributes=attributes,
        dimension_names=dimension_names,
        chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator,
        compressor=compressor,
    )
    sp = make_store_path(
        store, name, mode="w" if overwrite else "a", storage_options=storage_options
    )
    arr = await AsyncArray.create(
        sp, meta, overwrite=overwrite, write_empty_chunks=write_empty_chunks
    )
    arr.set_prototype(meta_array)
    return arr


async def open_array(
    store: Any = None,
    *,
    mode: str = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    **kwargs: Any,
) -> AsyncArray:
    """Open an array (creating it in modes ``w``/``w-``, or ``a`` with ``shape=``)."""
    _check_mode(mode)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" not in kwargs:
            raise ValueError(f"mode {mode!r} creates a new array and needs shape=")
        return await create_array(
            sp, zarr_format=zarr_format or 3, overwrite=mode == "w", meta_array=meta_array,
            **kwargs,
        )
    try:
        arr = await AsyncArray.open(sp, zarr_format)
    except ArrayNotFoundError:
        if mode == "a" and "shape" in kwargs:
            return await create_array(
                sp, zarr_format=zarr_format or 3, meta_array=meta_array, **kwargs
            )
        raise
    arr.set_prototype(meta_array)
    return arr


async def create_group(
    store: Any = None,
    *,
    path: str | None = None,
    zarr_format: int | None = 3,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Create a group; see :func:`cuzarr.create_group`."""
    sp = make_store_path(store, path, mode="a", storage_options=storage_options)
    return await AsyncGroup.create(
        sp, zarr_format=zarr_format or 3, attributes=attributes, overwrite=overwrite
    )


async def open_group(
    store: Any = None,
    *,
    mode: str = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
) -> AsyncGroup:
    """Open a group; modes ``a``/``w``/``w-`` create it when missing or asked to.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python)."""
    _check_mode(mode)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode == "w":
        return await AsyncGroup.create(
            sp, zarr_format=zarr_format or 3, attributes=attributes, overwrite=True
        )
    if mode == "w-":
        return await AsyncGroup.create(sp, zarr_format=zarr_format or 3, attributes=attributes)
    try:
        return await AsyncGroup.open(sp, zarr_format, use_consolidated=use_consolidated)
    except GroupNotFoundError:
        if mode == "a":
            try:
                await load_node_metadata(sp, zarr_format)
            except NodeNotFoundError:
                return await AsyncGroup.create(
                    sp, zarr_format=zarr_format or 3, attributes=attributes
                )
            raise ContainsArrayError(f"an array, not a group, exists at path {sp.path!r}") from None
        raise


async def open(
    store: Any = None,
    *,
    mode: str = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open whatever node is at ``path``: an array or a group."""
    _check_mode(mode)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" in kwargs:
            return await open_array(sp, mode=mode, zarr_format=zarr_format, **kwargs)
        return await open_group(sp, mode=mode, zarr_format=zarr_format)
    try:
        meta = await load_node_metadata(sp, zarr_format)
    except NodeNotFoundError:
        if mode == "a":
            if "shape" in kwargs:
                return await create_array(sp, zarr_format=zarr_format or 3, **kwargs)
            return await AsyncGroup.create(sp, zarr_format=zarr_format or 3)
        raise
    if isinstance(meta, ArrayMetadata):
        return AsyncArray(meta, sp)
    return AsyncGroup(meta, sp)


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
) -> AsyncGroup:
    """Open a group from its consolidated metadata (an error if there is none)."""
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    return await AsyncGroup.open(sp, zarr_format, use_consolidated=True)


async def array(data: Any, store: Any = None, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data``."""
    from cuzarr.core.array import _materialize

    data = await _materialize(data)
    data = np.asanyarray(data) if not hasattr(data, "__cuda_array_interface__") else data
    kwargs.setdefault("dtype", data.dtype)
    kwargs.setdefault("shape", data.shape)
    name = kwargs.pop("name", None)
    a = await create_array(store, name, **kwargs)
    await a.setitem(Ellipsis, data)
    return a
