"""Groups: ``AsyncGroup`` (async core) and ``Group`` (sync twin)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.attributes import Attributes
from cuzarr.core.build import build_array_metadata
from cuzarr.core.consolidated import (
    ZMETADATA,
    build_consolidated,
    parse_consolidated_v2,
    parse_consolidated_v3,
)
from cuzarr.core.nodes import ensure_parents, ensure_vacant, load_node_metadata, save_metadata
from cuzarr.core.sync import sync
from cuzarr.errors import (
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyError,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.group import GroupMetadata
from cuzarr.storage.common import StorePath, join_path, normalize_path

__all__ = ["AsyncGroup", "Group"]


class _Tree(str):
    """``Group.tree()``'s text; its repr is the text itself, so the tree shows at the prompt."""

    def __repr__(self) -> str:
        return str(self)


class AsyncGroup:
    """A group in a store; every operation is a coroutine."""

    def __init__(
        self,
        metadata: GroupMetadata,
        store_path: StorePath,
        consolidated: dict[str, ArrayMetadata | GroupMetadata] | None = None,
    ) -> None:
        self.metadata = metadata
        self.store_path = store_path
        # Metadata of every descendant, by relative path, when the group was opened
        # with consolidated metadata: lookups and listings then need no requests.
        self.consolidated = consolidated

    @classmethod
    async def open(
        cls,
        store_path: StorePath,
        zarr_format: int | None = None,
        use_consolidated: bool | None = None,
    ) -> AsyncGroup:
        meta = await load_node_metadata(store_path, zarr_format, want="group")
        if isinstance(meta, ArrayMetadata):
            raise GroupNotFoundError(
                f"an array, not a group, exists at {store_path.store!r}, path {store_path.path!r}"
            )
        consolidated = None
        if use_consolidated is not False:
            if meta.zarr_format == 3:
                consolidated = parse_consolidated_v3(meta)
            else:
                raw = await store_path.store.get(store_path.key(ZMETADATA))
                consolidated = parse_consolidated_v2(raw) if raw is not None else None
            if use_consolidated and consolidated is None:
                raise MetadataError(
                    f"no consolidated metadata at {store_path.store!r}, path {store_path.path!r}"
                )
        return cls(meta, store_path, consolidated)

    async def consolidate(self) -> AsyncGroup:
        """Write consolidated metadata for every node below this group."""
        members = await AsyncGroup(self.metadata, self.store_path).members(max_depth=None)
        metas = [(path, node.metadata) for path, node in members]
        root = await build_consolidated(self.store_path, self.metadata, metas)
        return AsyncGroup(root, self.store_path, {p: m for p, m in metas})

    @classmethod
    async def create(
        cls,
        store_path: StorePath,
        *,
        zarr_format: int = 3,
        attributes: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> AsyncGroup:
        if store_path.store.read_only:
            raise ReadOnlyError(f"cannot create a group in read-only {store_path.store!r}")
        if zarr_format not in (2, 3):
            raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
        await ensure_vacant(store_path, overwrite)
        await ensure_parents(store_path, zarr_format)
        meta = GroupMetadata(zarr_format, dict(attributes or {}))
        await save_metadata(store_path, meta)
        return cls(meta, store_path)

    @property
    def zarr_format(self) -> int:
        return self.metadata.zarr_format

    @property
    def path(self) -> str:
        return self.store_path.path

    @property
    def name(self) -> str:
        return "/" + self.store_path.path

    @property
    def basename(self) -> str:
        return self.store_path.path.rsplit("/", 1)[-1]

    @property
    def store(self) -> Any:
        return self.store_path.store

    @property
    def read_only(self) -> bool:
        return self.store_path.store.read_only

    def _child(self, name: str) -> StorePath:
        return StorePath(
            self.store_path.store, join_path(self.store_path.path, normalize_path(name))
        )

    def _sub_consolidated(self, name: str) -> dict[str, ArrayMetadata | GroupMetadata] | None:
        if self.consolidated is None:
            return None
        prefix = normalize_path(name) + "/"
        return {k[len(prefix) :]: v for k, v in self.consolidated.items() if k.startswith(prefix)}

    async def getitem(self, name: str) -> AsyncArray | AsyncGroup:
        sp = self._child(name)
        if self.consolidated is not None:
            cmeta = self.consolidated.get(normalize_path(name))
            if cmeta is None:
                raise KeyError(name)
            if isinstance(cmeta, ArrayMetadata):
                return AsyncArray(cmeta, sp)
            return AsyncGroup(cmeta, sp, self._sub_consolidated(name))
        try:
            meta = await load_node_metadata(sp)
        except NodeNotFoundError:
            raise KeyError(name) from None
        if isinstance(meta, ArrayMetadata):
            return AsyncArray(meta, sp)
        return AsyncGroup(meta, sp)

    async def contains(self, name: str) -> bool:
        try:
            await self.getitem(name)
        except KeyError:
            return False
        return True

    async def _child_names(self) -> list[str]:
        names = [n async for n in self.store_path.store.list_dir(self.store_path.path)]
        return sorted(
            n
            for n in names
            if n not in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")
            and not n.startswith(".cuzarr-tmp-")
        )

    async def members(self, max_depth: int | None = 0) -> list[tuple[str, AsyncArray | AsyncGroup]]:
        """Child nodes as (relative path, node); ``max_depth=None`` recurses fully."""
        if self.consolidated is not None:
            out_c: list[tuple[str, AsyncArray | AsyncGroup]] = []
            for path in sorted(self.consolidated):
                depth = path.count("/")
                if max_depth is not None and depth > max_depth:
                    continue
                out_c.append((path, await self.getitem(path)))
            return out_c
        names = await self._child_names()
        sps = [self._child(n) for n in names]

        async def load(sp: StorePath) -> Any:
            try:
                return await load_node_metadata(sp)
            except NodeNotFoundError:
                return None

        metas = await asyncio.gather(*(load(sp) for sp in sps))
        out: list[tuple[str, AsyncArray | AsyncGroup]] = []
        for name, sp, meta in zip(names, sps, metas, strict=True):
            if meta is None:
                continue
            if isinstance(meta, ArrayMetadata):
                out.append((name, AsyncArray(meta, sp)))
            else:
                g = AsyncGroup(meta, sp)
                out.append((name, g))
                if max_depth is None or max_depth > 0:
                    sub = await g.members(None if max_depth is None else max_depth - 1)
                    out.extend((f"{name}/{k}", v) for k, v in sub)
        return out

    async def create_array(self, name: str, **kwargs: Any) -> AsyncArray:
        self.consolidated = None  # a new node makes the consolidated view stale
        if self.read_only:
            raise ReadOnlyError(f"group {self.name!r} is read-only")
        overwrite = kwargs.pop("overwrite", False)
        write_empty = kwargs.pop("write_empty_chunks", None)
        kwargs.pop("storage_options", None)
        meta_array = kwargs.pop("meta_array", None)
        kwargs.setdefault("zarr_format", self.zarr_format)
        meta = build_array_metadata(**kwargs)
        arr = await AsyncArray.create(
            self._child(name), meta, overwrite=overwrite, write_empty_chunks=write_empty
        )
        arr.set_prototype(meta_array)
        return arr

    async def create_group(
        self, name: str, *, attributes: dict[str, Any] | None = None, overwrite: bool = False
    ) -> AsyncGroup:
        self.consolidated = None
        if self.read_only:
            raise ReadOnlyError(f"group {self.name!r} is read-only")
        return await AsyncGroup.create(
            self._child(name),
            zarr_format=self.zarr_format,
            attributes=attributes,
            overwrite=overwrite,
        )

    async def require_group(
        self, name: str, *, attributes: dict[str, Any] | None = None, overwrite: bool = False
    ) -> AsyncGroup:
        if overwrite:
            return await self.create_group(name, attributes=attributes, overwrite=True)
        try:
            node = await self.getitem(name)
        except KeyError:
            return await self.create_group(name, attributes=attributes)
        if isinstance(node, AsyncArray):
            raise ContainsArrayError(f"an array exists at {node.path!r}, not a group")
        return node

    async def require_array(
        self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False, **kwargs: Any
    ) -> AsyncArray:
        import numpy as np

        try:
            node = await self.getitem(name)
        except KeyError:
            return await self.create_array(
                name, shape=shape, dtype=dtype if dtype is not None else "float64", **kwargs
            )
        if isinstance(node, AsyncGroup):
            raise ContainsGroupError(f"a group exists at {node.path!r}, not an array")
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
                node.dtype != want if exact else not np.can_cast(want, node.dtype)
            ):
                raise TypeError(f"array {name!r} exists with dtype {node.dtype}, not {want}")
        return node

    async def update_attributes(self, attrs: dict[str, Any]) -> AsyncGroup:
        if self.read_only:
            raise ReadOnlyError(f"group {self.name!r} is read-only")
        json.dumps(attrs, allow_nan=False)
        meta = GroupMetadata(self.zarr_format, dict(attrs), self.metadata.extra)
        await save_metadata(self.store_path, meta)
        self.metadata = meta
        return self

    async def delitem(self, name: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"group {self.name!r} is read-only")
        sp = self._child(name)
        if not await self.contains(name):
            raise KeyError(name)
        await sp.store.delete_dir(sp.path)

    async def iter_keys(self) -> AsyncIterator[str]:
        for name, _ in await self.members():
            yield name


class Group:
    """A Zarr group with a synchronous, dict-like interface."""

    def __init__(self, async_group: AsyncGroup) -> None:
        self._async_group = async_group

    def __repr__(self) -> str:
        return f"<cuzarr.Group {self.store!r}{self.name}>"

    @property
    def async_group(self) -> AsyncGroup:
        return self._async_group

    zarr_format = property(lambda self: self._async_group.zarr_format)
    path = property(lambda self: self._async_group.path)
    name = property(lambda self: self._async_group.name)
    basename = property(lambda self: self._async_group.basename)
    store = property(lambda self: self._async_group.store)
    store_path = property(lambda self: self._async_group.store_path)
    metadata = property(lambda self: self._async_group.metadata)
    read_only = property(lambda self: self._async_group.read_only)

    @property
    def attrs(self) -> Attributes:
        return Attributes(lambda: self._async_group.metadata.attributes, self.update_attributes)

    def update_attributes(self, attrs: dict[str, Any]) -> Group:
        sync(self._async_group.update_attributes(attrs))
        return self

    @staticmethod
    def _wrap(node: AsyncArray | AsyncGroup) -> Array | Group:
        return Array(node) if isinstance(node, AsyncArray) else Group(node)

    def __getitem__(self, name: str) -> Array | Group:
        return self._wrap(sync(self._async_group.getitem(name)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and sync(self._async_group.contains(name))

    def __delitem__(self, name: str) -> None:
        sync(self._async_group.delitem(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        """Names of the direct children, sorted."""
        return [k for k, _ in sync(self._async_group.members())]

    def members(self, max_depth: int | None = 0) -> tuple[tuple[str, Array | Group], ...]:
        return tuple((k, self._wrap(v)) for k, v in sync(self._async_group.members(max_depth)))

    def arrays(self) -> Iterator[tuple[str, Array]]:
        for k, v in self.members():
            if isinstance(v, Array):
                yield k, v

    def groups(self) -> Iterator[tuple[str, Group]]:
        for k, v in self.members():
            if isinstance(v, Group):
                yield k, v

    def array_keys(self) -> Iterator[str]:
        for k, _ in self.arrays():
            yield k

    def group_keys(self) -> Iterator[str]:
        for k, _ in self.groups():
            yield k

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create an array named ``name`` in this group (``create_array`` arguments)."""
        return Array(sync(self._async_group.create_array(name, **kwargs)))

    def create_group(self, name: str, **kwargs: Any) -> Group:
        return Group(sync(self._async_group.create_group(name, **kwargs)))

    def require_group(self, name: str, **kwargs: Any) -> Group:
        return Group(sync(self._async_group.require_group(name, **kwargs)))

    def require_array(self, name: str, **kwargs: Any) -> Array:
        return Array(sync(self._async_group.require_array(name, **kwargs)))

    def tree(self, level: int | None = None) -> str:
        """A text rendering of the hierarchy below this group (a ``str`` that also
        shows as the tree at the prompt). ``level`` is the ``max_depth`` of
        ``members``: 0 shows only the children, as in zarr-python."""
        members = self.members(max_depth=None if level is None else max(0, level))
        children: dict[str, list[tuple[str, Any]]] = {}
        for path, node in members:
            parent, _, base = path.rpartition("/")
            children.setdefault(parent, []).append((base, node))
        lines = [self.name if self.path else "/"]

        def walk(parent: str, indent: str) -> None:
            kids = sorted(children.get(parent, []), key=lambda kv: kv[0])
            for i, (base, node) in enumerate(kids):
                last = i == len(kids) - 1
                branch = "└── " if last else "├── "
                if isinstance(node, Array):
                    lines.append(f"{indent}{branch}{base} {node.shape} {node.dtype}")
                else:
                    lines.append(f"{indent}{branch}{base}")
                    walk(f"{parent}/{base}" if parent else base, indent + ("    " if last else "│   "))

        walk("", "")
        return _Tree("\n".join(lines))
