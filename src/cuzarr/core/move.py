"""``Group.move``: a member (with everything below it) to another path of the group.

Groups missing above the new path are created. Where the store can move a
directory of keys in one step (``Store.rename_dir``: a local directory, one
rename on one file system) the member moves so: atomic, whatever its size.
Elsewhere the stored keys are copied under the new path, a batch at a time,
then deleted under the old one: not atomic, a crash in between leaves both
copies (the old one whole), never neither. A group handle that owns
consolidated metadata rewrites it; other handles' views rename the moved
entries.
"""

from __future__ import annotations

from typing import Any

from cuzarr.core.consolidated import build_consolidated
from cuzarr.core.nodes import node_kind
from cuzarr.errors import (
    ContainsArrayError,
    ContainsGroupError,
    NodeNotFoundError,
    ReadOnlyError,
)
from cuzarr.storage.common import StorePath, normalize_path

__all__ = ["move_member"]

# keys whose values are held in memory at once while copying
_BATCH = 64


async def move_member(group: Any, source: str, dest: str) -> None:
    """Move ``group``'s member ``source`` to ``dest`` (both relative to ``group``).

    Raises the errors :meth:`cuzarr.Group.move` lists, and ``ValueError`` where
    ``dest`` lies inside ``source`` or either is the group itself.
    """
    if group.read_only:
        raise ReadOnlyError(f"group {group.name!r} is read-only")
    src, dst = normalize_path(source), normalize_path(dest)
    if not src or not dst:
        raise ValueError("move needs a member path for source and dest, not the group itself")
    if dst == src or dst.startswith(src + "/"):
        raise ValueError(f"cannot move {src!r} to {dst!r}: inside itself")
    sp_src, sp_dst = group._child(src), group._child(dst)
    if await node_kind(sp_src) is None:
        raise NodeNotFoundError(f"nothing to move: no array or group at {src!r}")
    kind = await node_kind(sp_dst)
    if kind == "array":
        raise ContainsArrayError(f"an array exists at {dst!r}: cannot move {src!r} there")
    if kind == "group":
        raise ContainsGroupError(f"a group exists at {dst!r}: cannot move {src!r} there")
    parent = dst.rpartition("/")[0]
    if parent:
        await group._live().require_group(parent)
    if not await sp_src.store.rename_dir(sp_src.path, sp_dst.path):
        await _copy_keys(sp_src, sp_dst)
        await sp_src.store.delete_dir(sp_src.path)
    await _update_consolidated(group, src, dst)


async def _copy_keys(sp_src: StorePath, sp_dst: StorePath) -> None:
    store = sp_src.store
    prefix = sp_src.path + "/" if sp_src.path else ""
    target = sp_dst.path + "/" if sp_dst.path else ""
    keys = [k async for k in store.list_prefix(prefix)]
    for lo in range(0, len(keys), _BATCH):
        batch = keys[lo : lo + _BATCH]
        values = await store.get_many(batch)
        items = [
            (target + k[len(prefix) :], v)
            for k, v in zip(batch, values, strict=True)
            if v is not None
        ]
        await store.set_many(items)


def _rename(d: dict[str, Any], src: str, dst: str) -> None:
    for k in [k for k in d if k == src or k.startswith(src + "/")]:
        d[dst + k[len(src) :]] = d.pop(k)


async def _update_consolidated(group: Any, src: str, dst: str) -> None:
    for d, p in group._mirrors:  # the handles this group came from
        _rename(d, f"{p}/{src}", f"{p}/{dst}")
    cons = group.consolidated
    if cons is None:
        return
    if group._owns_consolidated:
        # stored consolidated metadata must not name a node that moved away
        members = await group._live().members(max_depth=None)
        metas = [(path, node.metadata) for path, node in members]
        group.metadata = await build_consolidated(group.store_path, group.metadata, metas)
        cons.clear()
        cons.update(metas)
    else:
        _rename(cons, src, dst)
