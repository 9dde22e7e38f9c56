"""What a group shows of itself: ``GroupInfo`` (``Group.info``) and the text
tree of its hierarchy (``Group.tree()``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuzarr.core.array import Array, AsyncArray

__all__ = ["GroupInfo", "Tree", "render_tree"]


class Tree(str):
    """``Group.tree()``'s text; its repr is the text itself, so the tree shows at the prompt."""

    def __repr__(self) -> str:
        return str(self)


def render_tree(root: str, members: list[tuple[str, Any]]) -> Tree:
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
    return Tree("\n".join(lines))


@dataclass(eq=False, repr=False)
class GroupInfo:
    """Summary of a group (``Group.info`` / ``Group.info_complete()``), printed as
    zarr-python prints its ``GroupInfo``."""

    name: str
    zarr_format: int
    read_only: bool
    store_type: str
    count_members: int | None = None
    count_arrays: int | None = None
    count_groups: int | None = None
    type: str = field(default="Group", init=False)

    def __repr__(self) -> str:
        rows = [
            ("Name", self.name),
            ("Type", self.type),
            ("Zarr format", self.zarr_format),
            ("Read-only", self.read_only),
            ("Store type", self.store_type),
        ]
        counts = [
            ("No. members", self.count_members),
            ("No. arrays", self.count_arrays),
            ("No. groups", self.count_groups),
        ]
        rows += [(label, n) for label, n in counts if n is not None]  # known after info_complete
        return "\n".join(f"{k:<12}: {v}" for k, v in rows)

    __str__ = __repr__
