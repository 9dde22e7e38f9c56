"""``cuzarr consolidate``: write a group's consolidated metadata."""

from __future__ import annotations

import argparse
from typing import Any

from cuzarr.cli.display import Progress

__all__ = ["cmd_consolidate"]


async def _walk(group: Any, bar: Progress) -> list[tuple[str, Any]]:
    """(relative path, metadata) of every node below ``group``, one group's
    children at a time (as ``consolidate_metadata`` reads them), counted on
    ``bar`` as they are read."""
    from cuzarr.core.group import AsyncGroup

    out: list[tuple[str, Any]] = []
    todo: list[tuple[str, Any]] = [("", group)]
    while todo:
        prefix, g = todo.pop()
        children = await g.members(max_depth=0)
        bar.update(len(children))
        for name, node in children:
            rel = f"{prefix}/{name}" if prefix else name
            out.append((rel, node.metadata))
            if isinstance(node, AsyncGroup):
                todo.append((rel, node))
    return sorted(out, key=lambda kv: kv[0])


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Write consolidated metadata for the group ``args.path`` of ``args.store``
    (the arguments as for :func:`~cuzarr.cli.describe.cmd_tree`) and return the exit
    status (0); on a terminal, the nodes read so far are counted while it works."""
    import cuzarr
    from cuzarr.core.consolidated import build_consolidated
    from cuzarr.runtime.sync import sync

    g = cuzarr.open_group(args.store, path=args.path, mode="r+", use_consolidated=False)
    ag = g.async_group
    bar = Progress(None, "read metadata:", unit="nodes")
    metas = sync(_walk(ag, bar))
    bar.close()
    sync(build_consolidated(ag.store_path, ag.metadata, metas))
    print(f"consolidated metadata of {len(metas)} nodes")
    g.store.close()  # a zip file: compacted to one entry per key
    return 0
