"""A group's members: listings from the store or from consolidated metadata."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from cuzarr.core.array import AsyncArray
from cuzarr.core.consolidated import (
    split_consolidated,
)
from cuzarr.core.group_info import Tree, render_tree
from cuzarr.core.nodes import (
    load_nodes_metadata,
)
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.group import GroupMetadata
from cuzarr.storage.common import StorePath, join_path, normalize_path

if TYPE_CHECKING:
    from cuzarr.core.async_group import AsyncGroup


__all__ = ["GroupMembers", "Members"]


class Members:
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


class GroupMembers:
    """The members of :class:`~cuzarr.core.async_group.AsyncGroup`: listed from
    the store, or looked up and listed from its consolidated metadata, and
    the dicts of the handles they came from that hold their metadata."""

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

    def _adopt(self, node: Any, name: str, normalized: bool = False) -> Any:
        """Link a member got from consolidated metadata to the dicts that hold it."""
        node._meta_sinks = self._member_sinks(name, normalized)
        if not isinstance(node, AsyncArray):
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
    ) -> Members:
        """Child nodes as (relative path, node); ``max_depth=None`` recurses fully.

        ``await g.members()`` gives a list; ``async for name, node in g.members()``
        iterates, as over zarr-python's async generator."""
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0. Got '{max_depth}' instead")
        return Members(lambda: self._members(max_depth))

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
            if not isinstance(node, AsyncArray):
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

    async def tree(
        self,
        expand: bool | None = None,
        level: int | None = None,
        *,
        max_nodes: int = 500,
        plain: bool = False,
    ) -> Tree:
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
        tree = render_tree(self.name if self.path else "/", members)
        return Tree(note + tree) if note else tree

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
            if not isinstance(node, AsyncArray) and (max_depth is None or max_depth > 0):
                sub = await node._members(None if max_depth is None else max_depth - 1)
                out.extend((f"{name}/{k}", v) for k, v in sub)
        return out

    async def iter_keys(self) -> AsyncIterator[str]:
        for name, _ in await self.members():
            yield name

    async def nmembers(self, max_depth: int | None = 0) -> int:
        """Number of members down to ``max_depth`` levels (None: all)."""
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0. Got '{max_depth}' instead")
        return len(await self.members(max_depth))
