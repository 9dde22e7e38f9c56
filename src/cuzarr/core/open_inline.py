"""The open of an existing array in the calling thread, on stores with cheap
blocking I/O (memory, local files): no trip through the event loop."""

from __future__ import annotations

from typing import Any

from cuzarr.core.async_array import AsyncArray
from cuzarr.core.modes import resolve_mode
from cuzarr.core.nodes import load_node_metadata_sync
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.storage.common import StorePath, make_store_path

__all__ = ["open_array_inline"]


def open_array_inline(
    store: Any,
    mode: str | None,
    path: str | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
    meta_array: Any,
    kwargs: dict[str, Any],
) -> tuple[AsyncArray | None, StorePath, str]:
    """:func:`open_array` of an existing array in the calling thread, for the sync
    API: on a store with cheap blocking I/O (memory, local files) the trip
    through the event loop cost more than the open. Returns (the array, or None
    when it takes the async way: another mode, extra arguments, another store,
    no array there; the store path and mode made, for that way to go on with)."""
    mode = resolve_mode(mode, store)
    sp = make_store_path(store, path, mode=mode, storage_options=storage_options)
    sio = sp.store.sync_io() if mode in ("r", "r+", "a") and not kwargs else None
    if sio is None:
        return None, sp, mode
    meta = load_node_metadata_sync(sp, zarr_format, sio)
    if not isinstance(meta, ArrayMetadata):
        return None, sp, mode
    arr = AsyncArray(meta, sp)
    arr.set_prototype(meta_array)
    return arr, sp, mode
