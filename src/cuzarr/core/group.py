"""Groups: ``AsyncGroup`` (async core) and ``Group`` (sync twin)."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.attributes import Attributes
from cuzarr.core.blocking import on_blocking_io, run_blocking
from cuzarr.core.build import DEFAULT_FILL
from cuzarr.core.consolidated import (
    ZMETADATA,
    build_consolidated,
    parse_consolidated_v2,
    parse_consolidated_v3,
    patch_consolidated_attrs_v2,
    split_consolidated,
)
from cuzarr.core.create import create, create_array
from cuzarr.core.create_args import like_create_args
from cuzarr.core.move import move_member
from cuzarr.core.nodes import (
    load_node_metadata,
    load_node_metadata_sync,
    load_nodes_metadata,
    publish_metadata,
    same_metadata,
    save_metadata,
    write_new_node,
)
from cuzarr.errors import (
    ArrayFoundError,
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyError,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.group import ConsolidatedMetadata, GroupMetadata
from cuzarr.runtime.sync import sync
from cuzarr.storage.common import StorePath, join_path, make_store_path, normalize_path

__all__ = ["AsyncGroup", "Group"]


_MISSING = object()


class _ArrayInTheWay(ContainsArrayError, TypeError):
    """``require_group`` over an array: cuzarr's error, and the ``TypeError``
    zarr-python raises there."""


class _GroupInTheWay(ContainsGroupError, TypeError):
    """``require_array`` over a group: cuzarr's error, and zarr-python's ``TypeError``."""


class _Tree(str):
    """``Group.tree()``'s text; its repr is the text itself, so the tree shows at the prompt."""

    def __repr__(self) -> str:
        return str(self)


class _Members:
    """What ``AsyncGroup.members()`` returns: ``await`` it for the list of
    (path, node), or ``async for`` over it as over zarr-python's async generator."""

    __slots__ = ("_make",)

    def __init__(self, make: Any) -> None:
        self._make = make  # a coroutine function: no coroutine left un-awaited

    def __await__(self) -> Any:
        return self._make().__await__()

    def close(self) -> None:
        """Nothing to close (no coroutine exists until awaited); ``sync()`` calls
        this on an operation that never started, as on a coroutine."""

    async def __aiter__(self) -> AsyncIterator[tuple[str, Any]]:
        for item in await self._make():
            yield item


def _render_tree(root: str, members: list[tuple[str, Any]]) -> _Tree:
    """The text tree of ``members`` ((relative path, node) pairs) below ``root``."""
    children: dict[str, list[tuple[str, Any]]] = {}
    for path, node in members:
        parent, _, base = path.rpartition("/")
        children.setdefault(parent, []).append((base, node))
    lines = [root]

    def walk(parent: str, indent: str) -> None:
        kids = sorted(children.get(parent, []), key=lambda kv: kv[0])
        for i, (base, node) in enumerate(kids):
            last = i == len(kids) - 1
            branch = "└── " if last else "├── "
            if isinstance(node, (Array, AsyncArray)):
                lines.append(f"{indent}{branch}{base} {node.shape} {node.dtype}")
            else:
                lines.append(f"{indent}{branch}{base}")
                walk(f"{parent}/{base}" if parent else base, indent + ("    " if last else "│   "))

    walk("", "")
    return _Tree("\n".join(lines))


def _read_only_message(group: Any) -> str:
    """A read-only group's error: which store, and how to write."""
    return (
        f"group {group.name!r} is read-only: its store {group.store_path.store!r} was "
        "opened read-only (open it with mode='r+' to write)"
    )


class AsyncGroup:
    """A group in a store; every operation is a coroutine."""

    def __repr__(self) -> str:
        return f"<AsyncGroup {self.store_path}>"

    def __eq__(self, other: object) -> bool:
        # zarr-python's value equality: the same node, with the same metadata
        if not isinstance(other, AsyncGroup):
            return NotImplemented
        return self.store_path == other.store_path and same_metadata(self.metadata, other.metadata)

    def __hash__(self) -> int:
        return hash(("group", self.store_path.path))

    def __init__(
        self,
        metadata: GroupMetadata,
        store_path: StorePath,
        consolidated: dict[str, ArrayMetadata | GroupMetadata] | None = None,
    ) -> None:
        self._metadata = metadata
        self._metadata_view: tuple[Any, Any, GroupMetadata] | None = None
        self.store_path = store_path
        # Metadata of every descendant, by relative path, when the group was opened
        # with consolidated metadata: lookups and listings then need no requests.
        self.consolidated = consolidated
        # True when ``consolidated`` was read from (or written at) this group's own
        # node, not handed down from a consolidated ancestor.
        self._owns_consolidated = False
        # (dict, prefix) pairs: the consolidated dicts of the handles this group
        # came from, which hold this group's members under ``prefix/member``. A
        # member's metadata change is written through to them, so that the next
        # lookup through any of those handles sees it (it used to see the old
        # attributes or shape, and write them back over the new ones).
        self._mirrors: list[tuple[dict[str, Any], str]] = []
        # (dict, key) pairs where this group's own metadata lives in such dicts.
        self._meta_sinks: list[tuple[dict[str, Any], str]] = []

    @property
    def metadata(self) -> GroupMetadata:
        """The group's metadata; its ``consolidated_metadata`` holds what this handle
        knows of its descendants from consolidated metadata (``None`` without)."""
        meta, cons = self._metadata, self.consolidated
        if cons is None:
            return meta
        view = self._metadata_view
        if view is None or view[0] is not meta or view[1] is not cons:
            # built once per (metadata, dict): a lookup pays nothing for it
            cm = ConsolidatedMetadata(flat=cons)
            view = (meta, cons, replace(meta, consolidated_metadata=cm))
            self._metadata_view = view
        return view[2]

    @metadata.setter
    def metadata(self, value: GroupMetadata) -> None:
        if value.consolidated_metadata is not None:
            value = replace(value, consolidated_metadata=None)
        self._metadata = value

    def __getstate__(self) -> dict[str, Any]:
        # As AsyncArray's: a pickled copy keeps its own snapshot, not the dicts of
        # the handles it came from (the whole hierarchy's metadata each).
        state = self.__dict__.copy()
        state["_mirrors"] = []
        state["_meta_sinks"] = []
        return state

    @classmethod
    async def open(
        cls,
        store: Any,
        zarr_format: int | None = None,
        use_consolidated: bool | None = None,
    ) -> AsyncGroup:
        """Open the group at ``store`` (a ``StorePath`` or anything ``open_group``
        takes as a store), as zarr-python's ``AsyncGroup.open``."""
        store_path = store if isinstance(store, StorePath) else make_store_path(store)
        meta = await load_node_metadata(store_path, zarr_format, want="group")
        if isinstance(meta, ArrayMetadata):
            raise ArrayFoundError(
                f"an array, not a group, exists at {store_path.store!r}, path {store_path.path!r}"
            )
        raw = None
        if use_consolidated is not False and meta.zarr_format == 2:
            raw = await store_path.store.get(store_path.key(ZMETADATA))
        return cls._opened(store_path, meta, use_consolidated, raw)

    @classmethod
    def _opened(
        cls,
        store_path: StorePath,
        meta: GroupMetadata,
        use_consolidated: bool | None,
        zmetadata: bytes | None,
    ) -> AsyncGroup:
        """The group ``open`` gives for ``meta`` (and, for v2, the ``.zmetadata``
        document read, ``None`` if missing or not read): with its consolidated
        metadata unless ``use_consolidated`` is False."""
        consolidated = None
        if use_consolidated is not False:
            if meta.zarr_format == 3:
                consolidated = parse_consolidated_v3(meta)
            else:
                consolidated = parse_consolidated_v2(zmetadata) if zmetadata is not None else None
            if use_consolidated and consolidated is None:
                raise MetadataError(
                    f"no consolidated metadata at {store_path.store!r}, path {store_path.path!r}"
                )
        group = cls(meta, store_path, consolidated)
        group._owns_consolidated = consolidated is not None
        return group

    @classmethod
    async def from_store(
        cls,
        store: Any,
        *,
        attributes: dict[str, Any] | None = None,
        overwrite: bool = False,
        zarr_format: int = 3,
    ) -> AsyncGroup:
        """Create a group at the root of ``store`` (any store-like), as
        zarr-python's ``AsyncGroup.from_store``."""
        sp = store if isinstance(store, StorePath) else make_store_path(store)
        return await cls.create(
            sp, zarr_format=zarr_format, attributes=attributes, overwrite=overwrite
        )

    @classmethod
    def from_dict(cls, store_path: StorePath, data: dict[str, Any]) -> AsyncGroup:
        """The group at ``store_path`` described by the metadata document ``data``
        (nothing is read or written), as zarr-python's ``AsyncGroup.from_dict``."""
        from cuzarr.core.hierarchy import as_node_metadata

        data = dict(data)
        data.setdefault("node_type", "group")  # zarr-python's documents may leave it out
        if data.get("zarr_format") == 2:
            data.pop("node_type")
        meta = as_node_metadata(data)
        if isinstance(meta, ArrayMetadata):
            raise _ArrayInTheWay(
                f"an array, not a group, is described for {store_path.store!r}, "
                f"path {store_path.path!r}"
            )
        return cls(meta, store_path)

    @property
    def synchronizer(self) -> None:
        """Always None (zarr-python's legacy attribute)."""
        return None

    async def consolidate(self) -> AsyncGroup:
        """Write consolidated metadata for every node below this group."""
        members = await self._live().members(max_depth=None)
        metas = [(path, node.metadata) for path, node in members]
        root = await build_consolidated(self.store_path, self.metadata, metas)
        group = AsyncGroup(root, self.store_path, {p: m for p, m in metas})
        group._owns_consolidated = True
        group._prototype = self._prototype
        return group

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
            raise ReadOnlyError(
                f"cannot create a group in read-only {store_path.store!r} "
                "(open it with mode='r+' to write)"
            )
        if zarr_format not in (2, 3):
            raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
        meta = GroupMetadata(zarr_format, dict(attributes or {}))
        await write_new_node(store_path, meta, overwrite)
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

    def _member_sinks(
        self, name: str, normalized: bool = False
    ) -> list[tuple[dict[str, Any], str]]:
        """Where member ``name``'s metadata lives in this handle's consolidated
        dict and in those of the handles it came from (``normalized``: ``name``
        is a ``normalize_path`` result already)."""
        key = name if normalized else normalize_path(name)
        sinks = [(d, f"{p}/{key}") for d, p in self._mirrors]
        if self.consolidated is not None:
            sinks.insert(0, (self.consolidated, key))
        return sinks

    # Where the reads of member arrays land by default (``open_group(meta_array=)``):
    # handed to every array and group got through this one.
    _prototype: Any = None

    def _node(
        self,
        meta: ArrayMetadata | GroupMetadata,
        sp: StorePath,
        consolidated: dict[str, ArrayMetadata | GroupMetadata] | None = None,
    ) -> AsyncArray | AsyncGroup:
        """The member handle for ``meta`` at ``sp``, with this group's prototype."""
        node: AsyncArray | AsyncGroup
        if isinstance(meta, ArrayMetadata):
            node = AsyncArray(meta, sp)
            if self._prototype is not None:
                node.set_prototype(self._prototype)
        else:
            node = AsyncGroup(meta, sp, consolidated)
            node._prototype = self._prototype
        return node

    def _live(self) -> AsyncGroup:
        """This group without its consolidated metadata: lookups ask the store."""
        group = AsyncGroup(self.metadata, self.store_path)
        group._prototype = self._prototype
        return group

    def set_prototype(self, prototype: Any) -> None:
        """Make ``prototype`` (a buffer prototype, its name, or an array like the
        outputs wanted: ``meta_array``) where the reads of the arrays got through
        this group land by default."""
        from cuzarr.buffer import prototype_for

        self._prototype = None if prototype is None else prototype_for(prototype)

    def _adopt(self, node: Any, name: str, normalized: bool = False) -> Any:
        """Link a member got from consolidated metadata to the dicts that hold it."""
        node._meta_sinks = self._member_sinks(name, normalized)
        if isinstance(node, AsyncGroup):
            node._mirrors = node._meta_sinks  # its members live below the same keys
        return node

    def _sub_consolidated(self, name: str) -> dict[str, ArrayMetadata | GroupMetadata] | None:
        if self.consolidated is None:
            return None
        prefix = normalize_path(name) + "/"
        return {k[len(prefix) :]: v for k, v in self.consolidated.items() if k.startswith(prefix)}

    def _consolidated_node(
        self,
        key: str,
        cons: dict[str, Any],
        subs: dict[str, dict[str, ArrayMetadata | GroupMetadata]] | None = None,
    ) -> AsyncArray | AsyncGroup:
        """``getitem`` answered from ``cons``, this group's consolidated metadata:
        no request, so callable from any thread without the event loop. ``subs``:
        the group members' parts of ``cons`` (``split_consolidated``), if made."""
        norm = normalize_path(key)  # as _child, _sub_consolidated and _adopt have it
        sp = StorePath(self.store_path.store, join_path(self.store_path.path, norm))
        cmeta = cons.get(norm)
        if cmeta is None:
            raise KeyError(key)
        sub = None
        if not isinstance(cmeta, ArrayMetadata):
            sub = self._sub_consolidated(norm) if subs is None else subs.get(norm, {})
        return self._adopt(self._node(cmeta, sp, sub), norm, normalized=True)

    def _consolidated_members(
        self, max_depth: int | None, cons: dict[str, Any]
    ) -> list[tuple[str, AsyncArray | AsyncGroup]]:
        """``_members`` answered from ``cons``, this group's consolidated metadata."""
        # Every group member's part of ``cons`` is made in one pass over its keys:
        # one scan of all keys per group member was quadratic (8,000 member
        # groups took 4.8 s).
        subs = split_consolidated(cons, max_depth)
        out: list[tuple[str, AsyncArray | AsyncGroup]] = []
        for path in sorted(cons):
            if max_depth is not None and path.count("/") > max_depth:
                continue
            out.append((path, self._consolidated_node(path, cons, subs)))
        return out

    def _consolidated_keys(self, cons: dict[str, Any]) -> list[str]:
        """The names ``_consolidated_members(0, cons)`` gives, without making the nodes."""
        names = sorted(p for p in cons if "/" not in p)
        for n in names:
            if n in (".", ".."):
                self._child(n)  # refused there, as when the node is made
        return names

    def _getitem_inline(self, key: str) -> AsyncArray | AsyncGroup | None:
        """``getitem`` in the calling thread where it needs no event loop: from
        the consolidated metadata, or through a store's cheap blocking I/O
        (memory, local files); None when it takes the async way (another store,
        or no node there: that way raises the KeyError)."""
        cons = self.consolidated
        if cons is not None:
            return self._consolidated_node(key, cons)
        sio = self.store_path.store.sync_io()
        if sio is None:
            return None
        sp = self._child(key)
        meta = load_node_metadata_sync(sp, None, sio)
        return None if meta is None else self._node(meta, sp)

    async def getitem(self, key: str) -> AsyncArray | AsyncGroup:
        cons = self.consolidated
        if cons is not None:
            return self._consolidated_node(key, cons)
        sp = self._child(key)
        try:
            meta = await load_node_metadata(await on_blocking_io(sp))
        except NodeNotFoundError:
            raise KeyError(key) from None
        return self._node(meta, sp)

    async def _getitem_live(self, name: str) -> AsyncArray | AsyncGroup:
        """``getitem`` from the store itself, not from consolidated metadata (a
        snapshot): ``require_*`` must neither try to create a node made since, nor
        hand back one deleted since, nor check an array replaced since by its old
        shape and dtype. One metadata read; a group found keeps its part of the
        snapshot for lookups below it."""
        if self.consolidated is None:
            return await self.getitem(name)
        node = await self._live().getitem(name)
        if isinstance(node, AsyncGroup) and isinstance(
            self.consolidated.get(normalize_path(name)), GroupMetadata
        ):
            node.consolidated = self._sub_consolidated(name)
        self._adopt(node, name)
        for d, k in node._meta_sinks:  # the store's word replaces the snapshot's
            if k in d:
                if isinstance(node, AsyncArray) and isinstance(d[k], GroupMetadata):
                    # a group replaced by an array since: its members went with it
                    for sub in [s for s in d if s.startswith(k + "/")]:
                        del d[sub]
                d[k] = node.metadata
        return node

    async def contains(self, member: str) -> bool:
        try:
            await self.getitem(member)
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

    def members(
        self, max_depth: int | None = 0, *, use_consolidated_for_children: bool = True
    ) -> _Members:
        """Child nodes as (relative path, node); ``max_depth=None`` recurses fully.

        ``await g.members()`` gives a list; ``async for name, node in g.members()``
        iterates, as over zarr-python's async generator."""
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0. Got '{max_depth}' instead")
        return _Members(lambda: self._members(max_depth))

    async def keys(self) -> AsyncIterator[str]:
        """Names of the children (an async generator, as in zarr-python)."""
        cons = self.consolidated
        if cons is not None:
            for name in self._consolidated_keys(cons):
                yield name
            return
        for name, _ in await self._members(0):
            yield name

    async def arrays(self) -> AsyncIterator[tuple[str, AsyncArray]]:
        """(name, array) for each child array."""
        for name, node in await self._members(0):
            if isinstance(node, AsyncArray):
                yield name, node

    async def groups(self) -> AsyncIterator[tuple[str, AsyncGroup]]:
        """(name, group) for each child group."""
        for name, node in await self._members(0):
            if isinstance(node, AsyncGroup):
                yield name, node

    async def array_keys(self) -> AsyncIterator[str]:
        async for name, _ in self.arrays():
            yield name

    async def group_keys(self) -> AsyncIterator[str]:
        async for name, _ in self.groups():
            yield name

    async def array_values(self) -> AsyncIterator[AsyncArray]:
        async for _, node in self.arrays():
            yield node

    async def group_values(self) -> AsyncIterator[AsyncGroup]:
        async for _, node in self.groups():
            yield node

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes (a dict, as zarr-python's ``AsyncGroup.attrs``; change
        them with :meth:`update_attributes`)."""
        return self.metadata.attributes

    async def tree(
        self,
        expand: bool | None = None,
        level: int | None = None,
        *,
        max_nodes: int = 500,
        plain: bool = False,
    ) -> _Tree:
        """The hierarchy below this group as text (see ``Group.tree``)."""
        if max_nodes < 0:
            raise ValueError(f"max_nodes must be >= 0, got {max_nodes}")
        members = await self._members(None if level is None else max(0, level))
        members.sort(key=lambda kv: kv[0])
        note = ""
        if len(members) > max_nodes:
            members = members[:max_nodes]
            note = (
                f"Truncated at max_nodes={max_nodes}, some nodes and their children "
                "may be missing\n"
            )
        tree = _render_tree(self.name if self.path else "/", members)
        return _Tree(note + tree) if note else tree

    async def _members(
        self, max_depth: int | None = 0
    ) -> list[tuple[str, AsyncArray | AsyncGroup]]:
        cons = self.consolidated
        if cons is not None:
            return self._consolidated_members(max_depth, cons)
        names = await self._child_names()
        sps = [self._child(n) for n in names]
        metas = await load_nodes_metadata(sps)
        out: list[tuple[str, AsyncArray | AsyncGroup]] = []
        for name, sp, meta in zip(names, sps, metas, strict=True):
            if meta is None:
                continue
            node = self._node(meta, sp)
            out.append((name, node))
            if isinstance(node, AsyncGroup) and (max_depth is None or max_depth > 0):
                sub = await node._members(None if max_depth is None else max_depth - 1)
                out.extend((f"{name}/{k}", v) for k, v in sub)
        return out

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
            raise ReadOnlyError(_read_only_message(self))
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
        from cuzarr.core.hierarchy import create_hierarchy

        self.consolidated = None  # new nodes make the consolidated view stale
        if self.read_only:
            raise ReadOnlyError(_read_only_message(self))
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
            raise ReadOnlyError(_read_only_message(self))
        group = await AsyncGroup.create(
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
            raise _ArrayInTheWay(f"an array exists at {node.path!r}, not a group")
        return node

    async def require_array(
        self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False, **kwargs: Any
    ) -> AsyncArray:
        import numpy as np

        try:
            node = await self._getitem_live(name)
        except KeyError:
            return await self.create_array(name, shape=shape, dtype=dtype, **kwargs)
        if isinstance(node, AsyncGroup):
            raise _GroupInTheWay(f"a group exists at {node.path!r}, not an array")
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

    async def update_attributes(self, new_attributes: dict[str, Any]) -> AsyncGroup:
        """Merge ``new_attributes`` into the attributes (as zarr-python: keys not
        in it are kept) and save the metadata."""
        return await self._replace_attributes({**self.metadata.attributes, **new_attributes})

    async def _replace_attributes(self, attrs: dict[str, Any]) -> AsyncGroup:
        if self.read_only:
            raise ReadOnlyError(_read_only_message(self))
        json.dumps(attrs, allow_nan=False)
        extra = self.metadata.extra
        if not self._owns_consolidated and "consolidated_metadata" in extra:
            # As zarr-python: a handle opened without the consolidated metadata
            # (use_consolidated=False) does not keep it up to date (members it
            # added are missing from it), so it does not write it back either.
            extra = {k: v for k, v in extra.items() if k != "consolidated_metadata"}
        meta = GroupMetadata(self.zarr_format, dict(attrs), extra)
        sp = await on_blocking_io(self.store_path)
        await save_metadata(sp, meta)
        self.metadata = meta
        publish_metadata(self._meta_sinks, meta)
        if self.zarr_format == 2 and self._owns_consolidated:
            # As v3 (where they share zarr.json) and zarr-python: the group's own
            # entry in its .zmetadata follows its attributes.
            await patch_consolidated_attrs_v2(sp, meta.attributes)
        return self

    async def delitem(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyError(_read_only_message(self))
        sp = self._child(key)
        if not await self.contains(key) and not (
            # consolidated metadata may predate the member: ask the store
            self.consolidated is not None and await self._live().contains(key)
        ):
            raise KeyError(key)
        if self.consolidated is None:
            await sp.store.delete_dir(sp.path)
            return
        # As zarr-python: the member (and everything below it) leaves the
        # consolidated metadata too, else listings keep showing a deleted node.
        key = normalize_path(key)
        remaining = [
            (p, m) for p, m in self.consolidated.items() if p != key and not p.startswith(key + "/")
        ]
        await sp.store.delete_dir(sp.path)
        if self._owns_consolidated:
            self.metadata = await build_consolidated(self.store_path, self.metadata, remaining)
        # in place: members got through this handle publish their changes to this
        # dict (a new one would leave them writing to one nobody reads)
        self.consolidated.clear()
        self.consolidated.update(remaining)
        for d, p in self._mirrors:  # gone from the handles this group came from too
            gone = f"{p}/{key}"
            for k in [k for k in d if k == gone or k.startswith(gone + "/")]:
                del d[k]

    async def iter_keys(self) -> AsyncIterator[str]:
        for name, _ in await self.members():
            yield name

    # -- zarr-python compatibility --------------------------------------------------
    async def get(self, key: str, default: Any = None) -> AsyncArray | AsyncGroup | Any:
        """The member at ``key`` (may contain ``/``), or ``default`` if there is none."""
        try:
            return await self.getitem(key)
        except KeyError:
            return default

    async def get_array(self, path: str) -> AsyncArray:
        """The array at ``path``.

        Raises
        ------
        cuzarr.errors.ArrayNotFoundError
            If nothing is there.
        cuzarr.errors.ContainsGroupError
            If a group is there.
        """
        sp = self._child(path)
        try:
            node = await self.getitem(path)
        except KeyError:
            raise ArrayNotFoundError(
                f"No array found in store {sp.store!r} at path {sp.path!r}"
            ) from None
        if isinstance(node, AsyncGroup):
            raise ContainsGroupError(f"A group exists in store {sp.store!r} at path {sp.path!r}.")
        return node

    async def get_group(self, path: str) -> AsyncGroup:
        """The group at ``path``.

        Raises
        ------
        cuzarr.errors.GroupNotFoundError
            If nothing is there.
        cuzarr.errors.ContainsArrayError
            If an array is there.
        """
        sp = self._child(path)
        try:
            node = await self.getitem(path)
        except KeyError:
            raise GroupNotFoundError(
                f"No group found in store {sp.store!r} at path {sp.path!r}"
            ) from None
        if isinstance(node, AsyncArray):
            raise ContainsArrayError(f"An array exists in store {sp.store!r} at path {sp.path!r}.")
        return node

    async def move(self, source: str, dest: str) -> None:
        """Move the member ``source`` (with everything below it) to ``dest``; see
        :func:`cuzarr.core.move.move_member` (zarr-python 3.4 has the method but
        raises ``NotImplementedError``)."""
        await move_member(self, source, dest)

    async def nmembers(self, max_depth: int | None = 0) -> int:
        """Number of members down to ``max_depth`` levels (None: all)."""
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0. Got '{max_depth}' instead")
        return len(await self.members(max_depth))

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

    def _info(self, members: list[Any] | None) -> GroupInfo:
        counts: dict[str, int] = {}
        if members is not None:
            n_groups = sum(isinstance(m, AsyncGroup) for m in members)
            counts = {
                "count_members": len(members),
                "count_arrays": len(members) - n_groups,
                "count_groups": n_groups,
            }
        return GroupInfo(
            self.store_path.path,
            self.zarr_format,
            self.read_only,
            type(self.store).__name__,
            **counts,
        )

    @property
    def info(self) -> GroupInfo:
        """What is known without store requests (member counts only when the group was
        opened with consolidated metadata)."""
        if self.consolidated is None:
            return self._info(None)
        return self._info(
            [
                AsyncGroup(m, self.store_path) if isinstance(m, GroupMetadata) else m
                for m in self.consolidated.values()
            ]
        )

    async def info_complete(self) -> GroupInfo:
        """``info`` with member counts (lists the hierarchy)."""
        return self._info([node for _, node in await self.members(max_depth=None)])


class Group:
    """A Zarr group with a synchronous, dict-like interface."""

    def __init__(self, async_group: AsyncGroup) -> None:
        self._async_group = async_group

    def __repr__(self) -> str:
        return f"<Group {self._async_group.store_path}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        return self._async_group == other._async_group

    def __hash__(self) -> int:
        return hash(self._async_group)

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
        return Attributes(
            lambda: self._async_group.metadata.attributes,
            lambda attrs: run_blocking(lambda: self._async_group._replace_attributes(attrs)),
        )

    def update_attributes(self, new_attributes: dict[str, Any]) -> Group:
        """Merge ``new_attributes`` into the attributes (keys not in it are kept)."""
        run_blocking(lambda: self._async_group.update_attributes(new_attributes))
        return self

    async def update_attributes_async(self, new_attributes: dict[str, Any]) -> Group:
        """:meth:`update_attributes` for a caller on an event loop: awaited there,
        it runs on that loop (zarr-python's ``Group.update_attributes_async``)."""
        await self._async_group.update_attributes(new_attributes)
        return self

    @property
    def synchronizer(self) -> None:
        """Always None (zarr-python's legacy attribute)."""
        return None

    @staticmethod
    def from_store(
        store: Any,
        *,
        attributes: dict[str, Any] | None = None,
        zarr_format: int = 3,
        overwrite: bool = False,
    ) -> Group:
        """Create a group at the root of ``store``, as zarr-python's
        ``Group.from_store``."""
        made = AsyncGroup.from_store(
            store, attributes=attributes, zarr_format=zarr_format, overwrite=overwrite
        )
        return Group(sync(made))

    @staticmethod
    def open(store: Any, zarr_format: int | None = None) -> Group:
        """Open the group at the root of ``store`` (any store-like; ``zarr_format``
        None finds either format), as zarr-python's ``Group.open``."""
        return Group(sync(AsyncGroup.open(store, zarr_format)))

    @staticmethod
    def _wrap(node: AsyncArray | AsyncGroup) -> Array | Group:
        return Array(node) if isinstance(node, AsyncArray) else Group(node)

    def __getitem__(self, path: str) -> Array | Group:
        ag = self._async_group
        node = ag._getitem_inline(path)  # no trip through the event loop
        return self._wrap(node if node is not None else sync(ag.getitem(path)))

    def __contains__(self, member: object) -> bool:
        if not isinstance(member, str):
            return False
        ag = self._async_group
        try:
            if ag._getitem_inline(member) is not None:
                return True
        except KeyError:
            return False
        return sync(ag.contains(member))

    def __delitem__(self, key: str) -> None:
        sync(self._async_group.delitem(key))

    def move(self, source: str, dest: str) -> None:
        """Move the member ``source`` (an array or a group, with everything below
        it) to the path ``dest`` of this group, creating the groups above ``dest``.

        Parameters
        ----------
        source, dest : str
            Paths relative to this group.

        Raises
        ------
        NodeNotFoundError
            Nothing is at ``source``.
        ContainsArrayError, ContainsGroupError
            A node is at ``dest`` already.
        """
        sync(self._async_group.move(source, dest))

    def __setitem__(self, key: str, value: Any) -> None:
        """``group[key] = data``: a new array ``key`` holding ``data``, with default
        settings (use :meth:`create_array` for others); replaces any node there."""
        sync(self._async_group.setitem(key, value))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        """Names of the direct children, sorted."""
        ag = self._async_group
        cons = ag.consolidated
        if cons is not None:
            return ag._consolidated_keys(cons)
        return [k for k, _ in sync(ag.members())]

    def members(
        self, max_depth: int | None = 0, *, use_consolidated_for_children: bool = True
    ) -> tuple[tuple[str, Array | Group], ...]:
        """Child nodes as (relative path, node); ``max_depth=None`` recurses fully.
        ``use_consolidated_for_children`` is accepted as in zarr-python (child
        groups are listed from the store either way)."""
        del use_consolidated_for_children
        ag = self._async_group
        cons = ag.consolidated
        if cons is not None:
            if max_depth is not None and max_depth < 0:
                ag.members(max_depth)  # raises the ValueError
            found = ag._consolidated_members(max_depth, cons)
        else:
            found = sync(ag.members(max_depth))
        wrap = self._wrap
        return tuple((k, wrap(v)) for k, v in found)

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
        """Create an array named ``name`` in this group: the keyword arguments of
        :meth:`AsyncGroup.create_array` (those of :func:`cuzarr.create_array`;
        ``dtype`` is required unless ``data`` is given)."""

        def make() -> Any:
            return self._async_group.create_array(name, **kwargs)

        # without data, only metadata is written: in this thread where the store allows
        return Array(sync(make()) if kwargs.get("data") is not None else run_blocking(make))

    def create_group(self, name: str, **kwargs: Any) -> Group:
        return Group(run_blocking(lambda: self._async_group.create_group(name, **kwargs)))

    def require_group(self, name: str, **kwargs: Any) -> Group:
        return Group(run_blocking(lambda: self._async_group.require_group(name, **kwargs)))

    def require_array(self, name: str, **kwargs: Any) -> Array:
        def make() -> Any:
            return self._async_group.require_array(name, **kwargs)

        # without data, only metadata is read or written: in this thread where it can
        return Array(sync(make()) if kwargs.get("data") is not None else run_blocking(make))

    def create_hierarchy(
        self, nodes: dict[str, Any], *, overwrite: bool = False
    ) -> Iterator[tuple[str, Array | Group]]:
        """Create the nodes ``nodes`` (paths relative to this group, to metadata)
        and the missing groups between; yields ``(path, Array | Group)`` for each
        (a generator, as zarr-python's: the nodes are made when it is iterated).
        See :func:`cuzarr.create_hierarchy`."""

        async def collect() -> list[tuple[str, Any]]:
            made = self._async_group.create_hierarchy(nodes, overwrite=overwrite)
            return [x async for x in made]

        for path, node in sync(collect()):
            yield path, self._wrap(node)

    # -- zarr-python compatibility --------------------------------------------------
    def get(self, path: str, default: Any = None) -> Array | Group | Any:
        """The member at ``path`` (may contain ``/``), or ``default`` if there is none.

        Parameters
        ----------
        path : str
            Path relative to this group.
        default : object, optional
            Returned when nothing is at ``path``.

        Returns
        -------
        Array, Group or ``default``
        """
        node = sync(self._async_group.get(path, _MISSING))
        return default if node is _MISSING else self._wrap(node)

    def get_array(self, path: str) -> Array:
        """The array at ``path`` (``ArrayNotFoundError`` / ``ContainsGroupError`` otherwise).

        Parameters
        ----------
        path : str
            Path relative to this group.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.get_array(path)))

    def get_group(self, path: str) -> Group:
        """The group at ``path`` (``GroupNotFoundError`` / ``ContainsArrayError`` otherwise).

        Parameters
        ----------
        path : str
            Path relative to this group.

        Returns
        -------
        Group
        """
        return Group(sync(self._async_group.get_group(path)))

    def nmembers(self, max_depth: int | None = 0) -> int:
        """Number of members.

        Parameters
        ----------
        max_depth : int or None
            0 (default) counts the children, None the whole hierarchy below.

        Returns
        -------
        int
        """
        return sync(self._async_group.nmembers(max_depth))

    def array_values(self) -> Iterator[Array]:
        """The child arrays.

        Yields
        ------
        Array
        """
        for _, v in self.arrays():
            yield v

    def group_values(self) -> Iterator[Group]:
        """The child groups.

        Yields
        ------
        Group
        """
        for _, v in self.groups():
            yield v

    def require_groups(self, *names: str) -> tuple[Group, ...]:
        """Open or create a child group for each name.

        Parameters
        ----------
        *names : str
            Group names.

        Returns
        -------
        tuple of Group
        """
        return tuple(Group(g) for g in sync(self._async_group.require_groups(*names)))

    def create(self, name: str, **kwargs: Any) -> Array:
        """Alias of :meth:`create_array` (zarr-python's legacy name).

        Parameters
        ----------
        name : str
            Name of the array.
        **kwargs
            :func:`cuzarr.create_array` arguments (``compressor=`` is accepted too).

        Returns
        -------
        Array
        """
        return self.create_array(name, **kwargs)

    def zeros(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array ``name`` that reads as zeros.

        Parameters
        ----------
        name : str
            Name of the array.
        shape : int or tuple of int
            Shape.
        **kwargs
            :func:`cuzarr.create` arguments (the zarr format is the group's).

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.zeros(name=name, shape=shape, **kwargs)))

    def ones(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array ``name`` that reads as ones (see :meth:`zeros`).

        Parameters
        ----------
        name : str
            Name of the array.
        shape : int or tuple of int
            Shape.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.ones(name=name, shape=shape, **kwargs)))

    def full(self, *, name: str, shape: Any, fill_value: Any, **kwargs: Any) -> Array:
        """A new array ``name`` that reads as ``fill_value`` (see :meth:`zeros`).

        Parameters
        ----------
        name : str
            Name of the array.
        shape : int or tuple of int
            Shape.
        fill_value : scalar
            The fill value.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(
            sync(self._async_group.full(name=name, shape=shape, fill_value=fill_value, **kwargs))
        )

    def empty(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array ``name`` with nothing written (see :meth:`zeros`).

        Parameters
        ----------
        name : str
            Name of the array.
        shape : int or tuple of int
            Shape.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.empty(name=name, shape=shape, **kwargs)))

    def zeros_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """A new array ``name`` of zeros like ``data`` (shape, dtype, chunks; for an
        array of the group's format also its codecs and order).

        Parameters
        ----------
        name : str
            Name of the array.
        data : array-like
            The model.
        **kwargs
            :func:`cuzarr.create` arguments, overriding those taken from ``data``.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.zeros_like(name=name, data=data, **kwargs)))

    def ones_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """A new array ``name`` of ones like ``data`` (see :meth:`zeros_like`).

        Parameters
        ----------
        name : str
            Name of the array.
        data : array-like
            The model.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.ones_like(name=name, data=data, **kwargs)))

    def full_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """A new array ``name`` like ``data`` reading as ``fill_value`` (default: the
        fill value of ``data``; see :meth:`zeros_like`).

        Parameters
        ----------
        name : str
            Name of the array.
        data : array-like
            The model.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.full_like(name=name, data=data, **kwargs)))

    def empty_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """A new array ``name`` like ``data`` with nothing written (see :meth:`zeros_like`).

        Parameters
        ----------
        name : str
            Name of the array.
        data : array-like
            The model.
        **kwargs
            :func:`cuzarr.create` arguments.

        Returns
        -------
        Array
        """
        return Array(sync(self._async_group.empty_like(name=name, data=data, **kwargs)))

    @property
    def info(self) -> GroupInfo:
        """Summary of the group without store requests (see :meth:`info_complete`)."""
        return self._async_group.info

    def info_complete(self) -> GroupInfo:
        """Summary of the group with its member counts (lists the hierarchy).

        Returns
        -------
        GroupInfo
        """
        return sync(self._async_group.info_complete())

    def tree(
        self,
        expand: bool | None = None,
        level: int | None = None,
        *,
        max_nodes: int = 500,
        plain: bool = False,
    ) -> str:
        """A text rendering of the hierarchy below this group (a ``str`` that also
        shows as the tree at the prompt).

        Parameters
        ----------
        expand
            Accepted for zarr-python compatibility (it only affects its HTML rendering).
        level
            The ``max_depth`` of ``members``: 0 shows only the children, as in zarr-python.
        max_nodes
            Show at most this many nodes (the first in path order), under a line
            saying the tree was truncated, as zarr-python does.
        plain
            Accepted for zarr-python compatibility: the text never has ANSI styling.
        """
        return sync(self._async_group.tree(expand, level, max_nodes=max_nodes, plain=plain))


class GroupInfo:
    """Summary of a group (``Group.info`` / ``Group.info_complete()``), printed as
    zarr-python prints its ``GroupInfo``."""

    def __init__(
        self,
        name: str,
        zarr_format: int,
        read_only: bool,
        store_type: str,
        count_members: int | None = None,
        count_arrays: int | None = None,
        count_groups: int | None = None,
    ) -> None:
        self.name = name
        self.type = "Group"
        self.zarr_format = zarr_format
        self.read_only = read_only
        self.store_type = store_type
        self.count_members = count_members
        self.count_arrays = count_arrays
        self.count_groups = count_groups

    def __repr__(self) -> str:
        rows = [
            ("Name", self.name),
            ("Type", self.type),
            ("Zarr format", self.zarr_format),
            ("Read-only", self.read_only),
            ("Store type", self.store_type),
        ]
        if self.count_members is not None:
            rows.append(("No. members", self.count_members))
        if self.count_arrays is not None:
            rows.append(("No. arrays", self.count_arrays))
        if self.count_groups is not None:
            rows.append(("No. groups", self.count_groups))
        return "\n".join(f"{k:<12}: {v}" for k, v in rows)

    __str__ = __repr__


# help() and signature-reading tools see the keywords the sync method forwards
Group.create_array.__signature__ = inspect.signature(AsyncGroup.create_array).replace(  # type: ignore[attr-defined]
    return_annotation="Array"
)
