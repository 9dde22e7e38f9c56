"""The sync API: thin wrappers that run ``cuzarr.api.asynchronous`` on the loop thread."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from cuzarr.api import asynchronous as _async
from cuzarr.api.sync_create import (
    array,
    create,
    create_array,
    empty,
    empty_like,
    from_array,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.blocking import run_blocking
from cuzarr.core.group import Group
from cuzarr.core.open_inline import open_array_inline
from cuzarr.core.opening import open_group_inline
from cuzarr.runtime.sync import sync

__all__ = [
    "array",
    "consolidate_metadata",
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
    "save",
    "save_array",
    "save_group",
    "tree",
    "zeros",
    "zeros_like",
]


def open_array(
    store: Any = None,
    *,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    meta_array: Any = None,
    **kwargs: Any,
) -> Array:
    """Open an existing array (``mode`` r, r+, a) or create one (w, w-).

    Raises
    ------
    cuzarr.errors.ArrayNotFoundError
        If no array exists at the path and the mode does not create one.
    """
    arr, sp, mode = open_array_inline(
        store, mode, path, zarr_format, storage_options, meta_array, kwargs
    )
    if arr is not None:
        return Array(arr)
    return Array(
        sync(
            _async.open_array(
                sp,
                mode=mode,
                zarr_format=zarr_format,
                meta_array=meta_array,
                **kwargs,
            )
        )
    )


def create_group(
    store: Any = None,
    path: str | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Create a new group (and any missing parent groups); ``zarr_format`` None
    means the config's ``default_zarr_format`` (3), as in zarr-python."""
    return Group(
        run_blocking(
            lambda: _async.create_group(
                store,
                path=path,
                zarr_format=zarr_format,
                attributes=attributes,
                overwrite=overwrite,
                storage_options=storage_options,
            )
        )
    )


def open_group(
    store: Any = None,
    mode: str | None = "a",
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    use_consolidated: bool | None = None,
    *,
    meta_array: Any = None,
    cache_attrs: bool | None = None,
    synchronizer: Any = None,
    chunk_store: Any = None,
) -> Group:
    """Open a group; in mode ``a`` a missing group is created.

    ``use_consolidated``: None uses consolidated metadata when there is some, True
    requires it, False ignores it (as in zarr-python). ``meta_array`` (a numpy or
    CuPy array): where the reads of the arrays got through the group land.
    zarr-python's legacy ``cache_attrs``, ``synchronizer`` and ``chunk_store`` are
    accepted with zarr-python's warning; they have no effect."""
    if cache_attrs is None and synchronizer is None and chunk_store is None:
        group, sp, mode = open_group_inline(
            store, mode, path, zarr_format, storage_options, use_consolidated, meta_array
        )
        if group is not None:
            return Group(group)
        store, path, storage_options = sp, None, None
    return Group(
        sync(
            _async.open_group(
                store,
                mode=mode,
                path=path,
                zarr_format=zarr_format,
                storage_options=storage_options,
                attributes=attributes,
                use_consolidated=use_consolidated,
                meta_array=meta_array,
                cache_attrs=cache_attrs,
                synchronizer=synchronizer,
                chunk_store=chunk_store,
            )
        )
    )


def open(
    store: Any = None,
    mode: str | None = "a",
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_format: int | None = None,
    **kwargs: Any,
) -> Array | Group:
    """Open the node at ``path``: an ``Array`` or a ``Group``, whichever is there."""
    node = sync(
        _async.open(
            store,
            mode=mode,
            path=path,
            zarr_format=zarr_format,
            storage_options=storage_options,
            **kwargs,
        )
    )
    return Array(node) if isinstance(node, AsyncArray) else Group(node)


def consolidate_metadata(
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> Group:
    """Store the metadata of every node below a group in one place.

    v2 writes ``.zmetadata``; v3 writes it inline in the group's ``zarr.json``.
    Groups opened later use it automatically (one request for the hierarchy).
    ``storage_options`` go to the filesystem when ``store`` is a URL.
    """
    return Group(
        sync(_async.consolidate_metadata(store, path, zarr_format, storage_options=storage_options))
    )


def open_consolidated(
    store: Any,
    path: str | None = None,
    mode: str = "r",
    zarr_format: int | None = None,
    storage_options: dict[str, Any] | None = None,
    use_consolidated: bool | None = True,
    **kwargs: Any,
) -> Group:
    """Open a group from its consolidated metadata; an error if it has none
    (``use_consolidated`` is accepted for zarr-python's signature: it must not be
    ``False`` here). Other keyword arguments go to :func:`open_group`."""
    return Group(
        sync(
            _async.open_consolidated(
                store,
                path,
                mode=mode,
                zarr_format=zarr_format,
                storage_options=storage_options,
                use_consolidated=use_consolidated,
                **kwargs,
            )
        )
    )


# ----------------------------------------------------------------------------------
# zarr-python compatibility: group, create, from_array, save*, load, tree, open_like
# ----------------------------------------------------------------------------------


def group(
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
) -> Group:
    """Open a group, creating it when missing (zarr-python's ``zarr.group``).

    Parameters
    ----------
    store : str, pathlib.Path, dict, Store or None
        Where the group lives (``None``: a new in-memory store).
    overwrite : bool
        Replace whatever is stored at ``path`` with a new, empty group (mode ``w``);
        otherwise an existing group is opened as it is (mode ``a``).
    chunk_store, cache_attrs, synchronizer, meta_array
        Accepted for compatibility; a value other than None warns and has no effect.
    path : str, optional
        Path of the group inside the store.
    zarr_format : {2, 3}, optional
        Format of a new group (default 3); an existing group of either format opens.
    attributes : dict, optional
        Attributes of a new group (ignored when the group exists).
    storage_options : dict, optional
        Options for URL stores (fsspec).

    Returns
    -------
    Group
    """
    return Group(
        sync(
            _async.group(
                store,
                overwrite=overwrite,
                chunk_store=chunk_store,
                cache_attrs=cache_attrs,
                synchronizer=synchronizer,
                path=path,
                zarr_format=zarr_format,
                meta_array=meta_array,
                attributes=attributes,
                storage_options=storage_options,
            )
        )
    )


def save(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array, or several in a group (like ``numpy.save`` / ``numpy.savez``).

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    *args : ndarray
        Arrays to save; one array alone is saved with :func:`save_array`.
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs : ndarray
        Arrays saved under these names (with :func:`save_group`).
    """
    sync(
        _async.save(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def save_array(
    store: Any,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save a NumPy array to a store (like ``numpy.save``).

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    arr : ndarray
        The data.
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path of the array inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs
        Passed to :func:`create` (``compressor``, ``fill_value``, ``mode``,
        ``overwrite``...); an existing node at ``path`` is an error unless ``mode="w"``
        or ``overwrite=True``.
    """
    sync(
        _async.save_array(
            store,
            arr,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def save_group(
    store: Any,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save several NumPy arrays in a new group (like ``numpy.savez``).

    Whatever is stored at ``path`` is replaced by the group.

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to save.
    *args : ndarray
        Arrays saved as ``arr_0``, ``arr_1``...
    zarr_format : {2, 3}, optional
        Format (default 3).
    path : str, optional
        Path of the group inside the store.
    storage_options : dict, optional
        Options for URL stores (fsspec).
    **kwargs : ndarray
        Arrays saved under these names.
    """
    sync(
        _async.save_group(
            store,
            *args,
            zarr_format=zarr_format,
            path=path,
            storage_options=storage_options,
            **kwargs,
        )
    )


def load(store: Any, path: str | None = None, zarr_format: int | None = None) -> Any:
    """Read the array at ``path`` into memory.

    Parameters
    ----------
    store : str, pathlib.Path, dict or Store
        Where to read.
    path : str, optional
        Path of the node inside the store.
    zarr_format : {2, 3}, optional
        Only look for this format.

    Returns
    -------
    ndarray or dict
        The array's data; for a group, a ``dict`` of its child arrays' data
        (zarr-python 3.4 raises ``NotImplementedError`` for groups).

    Raises
    ------
    cuzarr.errors.NodeNotFoundError
        If nothing is stored at ``path`` (nothing is created).
    """
    return sync(_async.load(store=store, path=path, zarr_format=zarr_format))


def create_hierarchy(
    *, store: Any, nodes: dict[str, Any], overwrite: bool = False
) -> Iterator[tuple[str, Array | Group]]:
    """Create a hierarchy from metadata alone (zarr-python's ``create_hierarchy``):
    every node of ``nodes`` (path to metadata) and every missing ancestor group,
    written concurrently; yields ``(path, Array | Group)`` for each. As in
    zarr-python this is a generator: the nodes are made when it is iterated.
    See :func:`cuzarr.api.asynchronous.create_hierarchy`."""

    async def collect() -> list[tuple[str, Any]]:
        return [
            x async for x in _async.create_hierarchy(store=store, nodes=nodes, overwrite=overwrite)
        ]

    for path, node in sync(collect()):
        yield path, Array(node) if isinstance(node, AsyncArray) else Group(node)


def tree(grp: Group, expand: bool | None = None, level: int | None = None) -> Any:
    """The hierarchy below ``grp`` as text (deprecated in zarr-python: use ``Group.tree``).

    Parameters
    ----------
    grp : Group
        The group.
    expand : bool, optional
        Ignored (zarr-python uses it for the HTML rendering).
    level : int, optional
        Depth to descend to.

    Returns
    -------
    str
    """
    warnings.warn("Use Group.tree instead.", DeprecationWarning, stacklevel=2)
    return grp.tree(expand=expand, level=level)


def open_like(a: Any, path: str, *, zarr_format: int | None = None, **kwargs: Any) -> Array:
    """Open the array at ``path``, creating it with the shape, dtype and chunks of ``a``.

    Parameters
    ----------
    a : array-like
        Gives shape, dtype and chunks (and, for a cuzarr or zarr-python array of the
        same format, fill value, order and codecs).
    path : str
        Path of the array; the store is ``store=`` (default: a new in-memory store).
    zarr_format : {2, 3}, optional
        Format of a new array (default 3; the format of ``a`` is not inherited).
    **kwargs
        Passed to :func:`open_array` (``store``, ``mode``...).

    Returns
    -------
    Array
    """
    return Array(sync(_async.open_like(a, path, zarr_format=zarr_format, **kwargs)))
