"""What is below a group, for the commands that walk one (``info``, ``tree``,
``copy``): the store's listing, compared with the group's consolidated metadata.

Consolidated metadata is a snapshot that nothing keeps up to date, so the
commands trust the listing and only report where the snapshot differs; a store
that cannot be listed (an HTTP server without index pages) is the exception.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Hierarchy", "list_hierarchy", "node_name"]


class Hierarchy:
    """The members below a group, as the store lists them, next to what the
    group's consolidated metadata (a snapshot, possibly stale) says.

    Parameters
    ----------
    members : list of (str, node)
        Every node below the group (relative path, ``Array`` or ``Group``).
    consolidated : dict or None
        The group's own consolidated metadata (relative path -> metadata), if any.
    from_consolidated : bool
        The store could not be listed (an HTTP server without index pages), so
        ``members`` come from the consolidated metadata instead.
    """

    def __init__(
        self,
        members: list[tuple[str, Any]],
        consolidated: dict[str, Any] | None,
        from_consolidated: bool,
    ) -> None:
        self.members = members
        self.consolidated = consolidated
        self.from_consolidated = from_consolidated

    def differences(self) -> tuple[list[str], list[str], list[str]]:
        """Paths the consolidated metadata lists but the store lacks, paths it
        lacks, and paths whose metadata changed since it was written."""
        if self.consolidated is None or self.from_consolidated:
            return [], [], []
        live = {p: _documents(n.metadata) for p, n in self.members}
        snap = {p: _documents(m) for p, m in self.consolidated.items()}
        gone = sorted(set(snap) - set(live))
        new = sorted(set(live) - set(snap))
        changed = sorted(p for p in set(live) & set(snap) if live[p] != snap[p])
        return gone, new, changed

    def status(self) -> str | None:
        """``None`` (no consolidated metadata), ``"current"``, ``"stale"``, or
        ``"unverified"`` (the store cannot be listed to compare it with)."""
        if self.consolidated is None:
            return None
        if self.from_consolidated:
            return "unverified"
        return "stale" if any(self.differences()) else "current"

    def notes(self, where: str, done: str = "shown") -> list[str]:
        """Lines for stderr saying where the members came from, and what is stale
        (``done``: what the command did with the store's members)."""
        if self.from_consolidated:
            return [
                f"note: the store cannot be listed: the members of {where} come from its "
                "consolidated metadata, which may be stale"
            ]
        gone, new, changed = self.differences()
        if not (gone or new or changed):
            return []
        parts = [
            f"{label}: {_some(paths)}"
            for label, paths in (("gone", gone), ("new", new), ("changed", changed))
            if paths
        ]
        return [
            f"note: the consolidated metadata of {where} is stale ({'; '.join(parts)}); "
            f"{done} is what the store holds (`cuzarr consolidate` rewrites it)"
        ]


def _some(paths: list[str], n: int = 3) -> str:
    shown = ", ".join(paths[:n])
    return shown + (f" and {len(paths) - n} more" if len(paths) > n else "")


def _documents(meta: Any) -> dict[str, Any]:
    """A node's metadata documents as JSON values, for comparing a stored node
    with its entry in consolidated metadata. Entries there leave out a group's
    own consolidated metadata, so it is left out of both sides."""
    docs = {name: json.loads(raw) for name, raw in meta.to_documents().items()}
    for doc in docs.values():
        if isinstance(doc, dict):
            doc.pop("consolidated_metadata", None)
    return docs


def list_hierarchy(group: Any) -> Hierarchy:
    """What is below ``group``, with its consolidated metadata beside it.

    The store listing is the truth, since consolidated metadata is a snapshot
    nothing keeps up to date; only a store that cannot be listed is read through
    its consolidated metadata.

    Parameters
    ----------
    group : Group
        The group to walk.

    Returns
    -------
    Hierarchy
        Every node below it, and its consolidated metadata (if any).
    """
    from cuzarr.core.group import AsyncGroup, Group
    from cuzarr.runtime.sync import sync

    ag = group.async_group
    snapshot = sync(AsyncGroup.open(ag.store_path, ag.zarr_format)).consolidated
    try:
        listed = Group(AsyncGroup(ag.metadata, ag.store_path)).members(max_depth=None)
    except (OSError, NotImplementedError):
        if snapshot is None:
            raise
        listed = ()
    if snapshot is not None and not listed and not _lists_itself(ag):
        cons = Group(AsyncGroup(ag.metadata, ag.store_path, snapshot))
        return Hierarchy(list(cons.members(max_depth=None)), snapshot, True)
    return Hierarchy(list(listed), snapshot, False)


def _lists_itself(ag: Any) -> bool:
    """Whether listing the group's directory shows its own metadata document (a
    store that cannot list, such as a plain HTTP server, shows nothing)."""
    from cuzarr.runtime.sync import sync

    async def names() -> list[str]:
        return [n async for n in ag.store.list_dir(ag.path)]

    try:
        found = sync(names())
    except (OSError, NotImplementedError):
        return False
    return ("zarr.json" if ag.zarr_format == 3 else ".zgroup") in found


def node_name(node: Any) -> str:
    """A node's path as messages show it: ``/`` for the root, else ``/a/b``.

    Parameters
    ----------
    node : Array or Group
        The node.

    Returns
    -------
    str
    """
    return f"/{node.path}" if node.path else "/"
