"""Opening arrays (creating them in the modes that do), and the opens of an
existing array or group that run in the calling thread on stores with cheap
blocking I/O."""

from __future__ import annotations

from typing import Any

from cuzarr.core.array_config import config_dict, parse_array_config
from cuzarr.core.async_array import AsyncArray
from cuzarr.core.consolidated import ZMETADATA
from cuzarr.core.create import create_like_zarr
from cuzarr.core.group import AsyncGroup
from cuzarr.core.modes import resolve_mode, zarr_format_for
from cuzarr.core.nodes import load_node_metadata_sync
from cuzarr.errors import ArrayNotFoundError, GroupFoundError
from cuzarr.metadata.group import GroupMetadata
from cuzarr.storage.common import StorePath, make_store_path

__all__ = ["open_array", "open_group_inline"]


async def open_array(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    **kwargs: Any,
) -> AsyncArray:
    """Open an array (creating it in modes ``w``/``w-``, or ``a`` with ``shape=``)."""
    mode = resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    if mode in ("w", "w-"):
        if "shape" not in kwargs:
            raise ValueError(f"mode {mode!r} creates a new array and needs shape=")
        return await create_like_zarr(
            kwargs.pop("shape"),
            sp,
            {
                "zarr_format": zarr_format_for(zarr_format, sp),
                "overwrite": mode == "w",
                "meta_array": meta_array,
                **kwargs,
            },
        )
    try:
        arr = await AsyncArray.open(sp, zarr_format)
    except ArrayNotFoundError as e:
        if isinstance(e, GroupFoundError):
            raise  # a group is there: nothing to create (zarr-python: the same error)
        if mode == "a" and "shape" in kwargs:
            return await create_like_zarr(
                kwargs.pop("shape"),
                sp,
                {
                    "zarr_format": zarr_format_for(zarr_format, sp),
                    "meta_array": meta_array,
                    **kwargs,
                },
            )
        raise
    config = kwargs.get("config")
    if config is not None:
        # as zarr-python: ``config`` applies to an array opened, not only created
        # (a v2 array's order lies in its metadata; zarr-python ignores one given)
        given = config_dict(config)
        parse_array_config(dict(given))  # validate keys and values
        if arr.metadata.zarr_format == 2:
            given.pop("order", None)
        arr = arr.with_config(given)
    arr.set_prototype(meta_array)
    return arr


def open_group_inline(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    use_consolidated: bool | None,
    meta_array: Any,
) -> tuple[AsyncGroup | None, StorePath, str]:
    """:func:`open_group` of an existing group in the calling thread, as
    :func:`open_array_inline` (None: the async way)."""
    mode = resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    sio = sp.store.sync_io() if mode in ("r", "r+", "a") else None
    if sio is None:
        return None, sp, mode
    meta = load_node_metadata_sync(sp, zarr_format, sio)
    if not isinstance(meta, GroupMetadata):
        return None, sp, mode
    raw = None
    if use_consolidated is not False and meta.zarr_format == 2:
        raw = sio.get_ranges([(sp.key(ZMETADATA), None)])[0]
    group = AsyncGroup._opened(sp, meta, use_consolidated, raw)
    group.set_prototype(meta_array)
    return group, sp, mode
