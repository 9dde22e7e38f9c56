"""``AsyncGroup``: a group in a store; every operation is a coroutine."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from cuzarr.buffer import prototype_for
from cuzarr.core.array import AsyncArray
from cuzarr.core.blocking import on_blocking_io
from cuzarr.core.consolidated import (
    ZMETADATA,
    build_consolidated,
    parse_consolidated_v2,
    parse_consolidated_v3,
    patch_consolidated_attrs_v2,
)
from cuzarr.core.group_create import ArrayInTheWay, GroupCreation, read_only_message
from cuzarr.core.group_info import GroupInfo
from cuzarr.core.group_members import GroupMembers
from cuzarr.core.hierarchy import as_node_metadata
from cuzarr.core.move import move_member
from cuzarr.core.node_props import NodeProperties
from cuzarr.core.nodes import (
    load_node_metadata,
    load_node_metadata_sync,
    open_node_metadata,
    publish_metadata,
    save_metadata,
    write_new_node,
)
from cuzarr.errors import (
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
from cuzarr.storage.common import StorePath, join_path, make_store_path, normalize_path

__all__ = ["AsyncGroup"]


class AsyncGroup(GroupMembers, GroupCreation, NodeProperties):
    """A group in a store; every operation is a coroutine."""

    _node_type = "group"

    def __repr__(self) -> str:
        return f"<AsyncGroup {self.store_path}>"

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
        store_path, meta = await open_node_metadata(store, zarr_format, "group")
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
        data = dict(data)
        data.setdefault("node_type", "group")  # zarr-python's documents may leave it out
        if data.get("zarr_format") == 2:
            data.pop("node_type")
        meta = as_node_metadata(data)
        if isinstance(meta, ArrayMetadata):
            raise ArrayInTheWay(
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

    def _child(self, name: str) -> StorePath:
        return StorePath(
            self.store_path.store, join_path(self.store_path.path, normalize_path(name))
        )

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
        self._prototype = None if prototype is None else prototype_for(prototype)

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

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes (a dict, as zarr-python's ``AsyncGroup.attrs``; change
        them with :meth:`update_attributes`)."""
        return self.metadata.attributes

    async def update_attributes(self, new_attributes: dict[str, Any]) -> AsyncGroup:
        """Merge ``new_attributes`` into the attributes (as zarr-python: keys not
        in it are kept) and save the metadata."""
        return await self._replace_attributes({**self.metadata.attributes, **new_attributes})

    async def _replace_attributes(self, attrs: dict[str, Any]) -> AsyncGroup:
        if self.read_only:
            raise ReadOnlyError(read_only_message(self))
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
            raise ReadOnlyError(read_only_message(self))
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
        return await self._get_kind(path, AsyncArray)

    async def get_group(self, path: str) -> AsyncGroup:
        """The group at ``path`` (``GroupNotFoundError`` if nothing is there,
        ``ContainsArrayError`` if an array is)."""
        return await self._get_kind(path, AsyncGroup)

    async def _get_kind(self, path: str, kind: type[Any]) -> Any:
        """The node at ``path`` if it is a ``kind`` (``AsyncArray`` or ``AsyncGroup``),
        with zarr-python's errors for nothing there and for the other kind there."""
        sp = self._child(path)
        where = f"in store {sp.store!r} at path {sp.path!r}"
        is_array = kind is AsyncArray
        try:
            node = await self.getitem(path)
        except KeyError:
            missing = ArrayNotFoundError if is_array else GroupNotFoundError
            raise missing(f"No {'array' if is_array else 'group'} found {where}") from None
        if not isinstance(node, kind):
            other = ContainsGroupError if is_array else ContainsArrayError
            raise other(f"{'A group' if is_array else 'An array'} exists {where}.")
        return node

    async def move(self, source: str, dest: str) -> None:
        """Move the member ``source`` (with everything below it) to ``dest``; see
        :func:`cuzarr.core.move.move_member` (zarr-python 3.4 has the method but
        raises ``NotImplementedError``)."""
        await move_member(self, source, dest)

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
