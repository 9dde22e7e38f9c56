"""What every node handle (``AsyncArray``, ``AsyncGroup``) says about itself from
its ``metadata`` and ``store_path``: format, place, and zarr-python's equality."""

from __future__ import annotations

from typing import Any

from cuzarr.core.nodes import same_metadata

__all__ = ["NodeProperties"]


class NodeProperties:
    """The properties an array and a group handle share, and their equality.

    A subclass sets ``_node_type`` (``"array"`` or ``"group"``) and gives its
    handles ``metadata`` and ``store_path``.
    """

    _node_type: str
    metadata: Any
    store_path: Any

    def __eq__(self, other: object) -> bool:
        # zarr-python's value equality: the same node of the same store, with the
        # same metadata (two handles opened separately are equal)
        if not isinstance(other, NodeProperties) or other._node_type != self._node_type:
            return NotImplemented
        return self.store_path == other.store_path and same_metadata(self.metadata, other.metadata)

    def __hash__(self) -> int:
        return hash((self._node_type, self.store_path.path))

    @property
    def zarr_format(self) -> int:
        return self.metadata.zarr_format

    @property
    def store(self) -> Any:
        return self.store_path.store

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
    def read_only(self) -> bool:
        return self.store_path.store.read_only
