"""What ``Array`` and ``Group`` share as synchronous wrappers of an async node."""

from __future__ import annotations

from typing import Any, Self

from cuzarr.core.attributes import Attributes
from cuzarr.core.blocking import run_blocking

__all__ = ["SyncNode"]


class SyncNode:
    """Equality, hashing and attributes of a synchronous handle, through the async
    node it wraps: a subclass's ``_node`` (its ``AsyncArray`` or ``AsyncGroup``)."""

    _node: Any

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._node == other._node

    def __hash__(self) -> int:
        return hash(self._node)

    @property
    def attrs(self) -> Attributes:
        return Attributes(
            lambda: self._node.metadata.attributes,
            lambda attrs: run_blocking(lambda: self._node._replace_attributes(attrs)),
        )

    def update_attributes(self, new_attributes: dict[str, Any]) -> Self:
        """Merge ``new_attributes`` into the attributes (keys not in it are kept)."""
        run_blocking(lambda: self._node.update_attributes(new_attributes))
        return self
