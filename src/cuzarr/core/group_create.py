"""Making a group's members: arrays, groups, hierarchies, ``require_*``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzarr.core.array import AsyncArray
from cuzarr.core.build import DEFAULT_FILL
from cuzarr.core.create import create, create_array
from cuzarr.core.create_args import like_create_args
from cuzarr.core.hierarchy import create_hierarchy
from cuzarr.errors import (
    ContainsArrayError,
    ContainsGroupError,
    ReadOnlyError,
)
from cuzarr.storage.common import normalize_path

if TYPE_CHECKING:
    from cuzarr.core.async_group import AsyncGroup


__all__ = ["ArrayInTheWay", "GroupCreation", "GroupInTheWay", "read_only_message"]


class ArrayInTheWay(ContainsArrayError, TypeError):
    """``require_group`` over an array: cuzarr's error, and the ``TypeError``
    zarr-python raises there."""


class GroupInTheWay(ContainsGroupError, TypeError):
    """``require_array`` over a group: cuzarr's error, and zarr-python's ``TypeError``."""


def read_only_message(group: Any) -> str:
    """A read-only group's error: which store, and how to write."""
    return (
        f"group {group.name!r} is read-only: its store {group.store_path.store!r} was "
        "opened read-only (open it with mode='r+' to write)"
    )


class GroupCreation:
    """How :class:`~cuzarr.core.async_group.AsyncGroup` makes members: arrays
    (``create_array``, zarr-python's legacy ``zeros`` & co., ``*_like``), groups,
    hierarchies, and the ``require_*`` that open what exists."""

    async def create_array(
        self,
        name: str,
        *,
        shape: Any = None,
        dtype: Any = None,
        data: Any = None,
        chunks: Any = "auto",
        shards: Any = None,
        filters: Any = "auto",
        compressors: Any = "auto",
        compressor: Any = "unset",
        serializer: Any = "auto",
        fill_value: Any = DEFAULT_FILL,
        order: str | None = None,
        attributes: dict[str, Any] | None = None,
        chunk_key_encoding: Any = None,
        dimension_names: Any = None,
        storage_options: dict[str, Any] | None = None,
        overwrite: bool = False,
        config: Any = None,
        write_data: bool = True,
        zarr_format: int | None = None,
        write_empty_chunks: bool | None = None,
        dimension_separator: str | None = None,
        meta_array: Any = None,
    ) -> AsyncArray:
        """Create the array ``name`` in this group; the arguments are those of
        :func:`cuzarr.create_array` (zarr-python's ``AsyncGroup.create_array``).
        ``zarr_format`` defaults to the group's, and no other is accepted;
        ``storage_options`` are ignored (the group's store is already open)."""
        self.consolidated = None  # a new node makes the consolidated view stale
        if self.read_only:
            raise ReadOnlyError(read_only_message(self))
        del storage_options
        return await create_array(
            self.store_path,
            name,
            shape=shape,
            dtype=dtype,
            data=data,
            chunks=chunks,
            shards=shards,
            filters=filters,
            compressors=compressors,
            compressor=compressor,
            serializer=serializer,
            fill_value=fill_value,
            order=order,
            attributes=attributes,
            chunk_key_encoding=chunk_key_encoding,
            dimension_names=dimension_names,
            overwrite=overwrite,
            config=config,
            write_data=write_data,
            # a member of another format than its group's is invisible to zarr-python
            zarr_format=self._member_zarr_format(zarr_format),
            write_empty_chunks=write_empty_chunks,
            dimension_separator=dimension_separator,
            meta_array=meta_array if meta_array is not None else self._prototype,
        )

    async def create_hierarchy(
        self, nodes: dict[str, Any], *, overwrite: bool = False
    ) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """Create the nodes ``nodes`` (paths relative to this group, to metadata)
        and every missing group between them and this group; yields ``(path,
        node)`` for each. See :func:`cuzarr.api.asynchronous.create_hierarchy`."""
        self.consolidated = None  # new nodes make the consolidated view stale
        if self.read_only:
            raise ReadOnlyError(read_only_message(self))
        if any(normalize_path(p) == "" for p in nodes):
            raise ValueError("a group's hierarchy cannot name the group itself ('')")
        made = create_hierarchy(self.store_path, nodes, overwrite)
        async for path, meta, sp in made:
            if path:  # this group itself is the caller's handle, not a member
                yield path, self._node(meta, sp)

    async def setitem(self, key: str, value: Any) -> None:
        """Store the array-like ``value`` as the array ``key`` with default
        settings, replacing any node there (zarr-python's ``group[key] = data``)."""
        if not (hasattr(value, "shape") and hasattr(value, "dtype")):
            value = np.asarray(value)
        await self.create_array(key, data=value, overwrite=True)

    async def create_group(
        self, name: str, *, attributes: dict[str, Any] | None = None, overwrite: bool = False
    ) -> AsyncGroup:
        self.consolidated = None
        if self.read_only:
            raise ReadOnlyError(read_only_message(self))
        group = await type(self).create(
            self._child(name),
            zarr_format=self.zarr_format,
            attributes=attributes,
            overwrite=overwrite,
        )
        group._prototype = self._prototype
        return group

    async def require_group(
        self, name: str, overwrite: bool = False, *, attributes: dict[str, Any] | None = None
    ) -> AsyncGroup:
        if overwrite:
            return await self.create_group(name, attributes=attributes, overwrite=True)
        try:
            node = await self._getitem_live(name)
        except KeyError:
            return await self.create_group(name, attributes=attributes)
        if isinstance(node, AsyncArray):
            raise ArrayInTheWay(f"an array exists at {node.path!r}, not a group")
        return node

    async def require_array(
        self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False, **kwargs: Any
    ) -> AsyncArray:
        try:
            node = await self._getitem_live(name)
        except KeyError:
            return await self.create_array(name, shape=shape, dtype=dtype, **kwargs)
        if not isinstance(node, AsyncArray):
            raise GroupInTheWay(f"a group exists at {node.path!r}, not an array")
        shape_t = (shape,) if isinstance(shape, int) else tuple(shape)
        if node.shape != shape_t:
            raise TypeError(f"array {name!r} exists with shape {node.shape}, not {shape_t}")
        if dtype is not None:
            want = (
                np.dtype(dtype)
                if not isinstance(dtype, type) or dtype not in (str, bytes)
                else None
            )
            if want is not None and (
                # as zarr-python: the existing dtype must cast safely to the one asked for
                node.dtype != want if exact else not np.can_cast(node.dtype, want)
            ):
                raise TypeError(f"array {name!r} exists with dtype {node.dtype}, not {want}")
        return node

    async def require_groups(self, *names: str) -> tuple[AsyncGroup, ...]:
        """``require_group`` for each name."""
        if not names:
            return ()
        return tuple(await asyncio.gather(*(self.require_group(n) for n in names)))

    def _member_zarr_format(self, zarr_format: int | None) -> int:
        if zarr_format is not None and zarr_format != self.zarr_format:
            raise ValueError(
                f"Cannot create a zarr_format={zarr_format} array in a "
                f"zarr_format={self.zarr_format} group."
            )
        return self.zarr_format

    async def _create_legacy(self, name: str, shape: Any, **kwargs: Any) -> AsyncArray:
        self.consolidated = None
        fmt = self._member_zarr_format(kwargs.pop("zarr_format", None))
        return await create(shape, store=self.store_path, path=name, zarr_format=fmt, **kwargs)

    async def zeros(self, *, name: str, shape: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` reading as zeros (:func:`cuzarr.create` arguments)."""
        return await self._create_legacy(name, shape, fill_value=0, **kwargs)

    async def ones(self, *, name: str, shape: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` reading as ones (:func:`cuzarr.create` arguments)."""
        return await self._create_legacy(name, shape, fill_value=1, **kwargs)

    async def full(self, *, name: str, shape: Any, fill_value: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` reading as ``fill_value`` (:func:`cuzarr.create` arguments)."""
        return await self._create_legacy(name, shape, fill_value=fill_value, **kwargs)

    async def empty(self, *, name: str, shape: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` with no data written (:func:`cuzarr.create` arguments)."""
        return await self._create_legacy(name, shape, **kwargs)

    async def _like(
        self, name: str, data: Any, kwargs: dict[str, Any], fill: Any = None, drop: bool = False
    ) -> AsyncArray:
        fmt = self._member_zarr_format(kwargs.pop("zarr_format", None))
        like = like_create_args(data, fmt)
        like.pop("zarr_format", None)
        if drop:
            like.pop("fill_value", None)
        kw = {**like, **kwargs}
        if fill is not None:
            kw["fill_value"] = fill
        shape = kw.pop("shape")
        return await self._create_legacy(name, shape, zarr_format=fmt, **kw)

    async def zeros_like(self, *, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` of zeros shaped (and chunked, typed...) like ``data``."""
        return await self._like(name, data, kwargs, fill=0, drop=True)

    async def ones_like(self, *, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` of ones shaped (and chunked, typed...) like ``data``."""
        return await self._like(name, data, kwargs, fill=1, drop=True)

    async def full_like(self, *, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` like ``data``, filled with ``fill_value`` (default: the
        fill value of ``data``)."""
        return await self._like(name, data, kwargs)

    async def empty_like(self, *, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """A new array ``name`` like ``data``, with no data written."""
        return await self._like(name, data, kwargs)
