"""Group metadata for Zarr v3 (``zarr.json``) and v2 (``.zgroup`` + ``.zattrs``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cuzarr.errors import MetadataError
from cuzarr.metadata.array import _check_extension, check_v3_document, json_dumps

__all__ = [
    "ConsolidatedMetadata",
    "GroupMetadata",
    "parse_group_metadata_v2",
    "parse_group_metadata_v3",
]


@dataclass(frozen=True)
class GroupMetadata:
    zarr_format: int = 3
    attributes: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # What the group handle knows of its descendants from consolidated metadata
    # (zarr-python's ``GroupMetadata.consolidated_metadata``); not compared, and
    # written only through ``extra`` (v3) or ``.zmetadata`` (v2).
    consolidated_metadata: ConsolidatedMetadata | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def node_type(self) -> str:
        return "group"

    def to_dict(self) -> dict[str, Any]:
        """The group's metadata as one JSON object (zarr-python's
        ``GroupMetadata.to_dict``: for v2 the attributes are in it too)."""
        if self.zarr_format == 3:
            return {
                "attributes": self.attributes,
                "zarr_format": 3,
                "node_type": "group",
                **self.extra,
            }
        return {"zarr_format": 2, "attributes": self.attributes}

    def to_documents(self) -> dict[str, bytes]:
        if self.zarr_format == 3:
            d = {"attributes": self.attributes, "zarr_format": 3, "node_type": "group"}
            d.update(self.extra)
            return {"zarr.json": json_dumps(d)}
        docs = {".zgroup": json_dumps({"zarr_format": 2})}
        if self.attributes:
            docs[".zattrs"] = json_dumps(self.attributes)
        return docs


def parse_group_metadata_v3(d: Any) -> GroupMetadata:
    check_v3_document(d, "group")
    extra = {}
    for key, value in d.items():
        if key in ("zarr_format", "node_type", "attributes"):
            continue
        if key == "consolidated_metadata":
            extra[key] = value
            continue
        _check_extension(key, value)
        extra[key] = value
    attrs = d.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise MetadataError("zarr.json: attributes must be an object")
    return GroupMetadata(3, attrs, extra)


def parse_group_metadata_v2(d: Any, attrs: Any = None) -> GroupMetadata:
    if not isinstance(d, dict) or d.get("zarr_format") != 2:
        raise MetadataError(".zgroup: zarr_format must be 2")
    attrs = attrs or {}
    if not isinstance(attrs, dict):
        raise MetadataError(".zattrs must hold a JSON object")
    return GroupMetadata(2, attrs)


class ConsolidatedMetadata:
    """The metadata of a group's descendants, as consolidated metadata holds it
    (zarr-python's ``ConsolidatedMetadata``).

    ``metadata`` maps each child's name to its metadata; a child group's own
    ``consolidated_metadata`` holds its children in turn. ``flattened_metadata``
    maps every descendant's path (``"sub/b"``) to its metadata.
    """

    def __init__(
        self,
        metadata: Mapping[str, Any] | None = None,
        kind: str = "inline",
        must_understand: bool = False,
        *,
        flat: Mapping[str, Any] | None = None,
    ) -> None:
        if (metadata is None) == (flat is None):
            raise TypeError("ConsolidatedMetadata takes metadata (nested) or flat, not both")
        self.kind = kind
        self.must_understand = must_understand
        self._nested = None if metadata is None else dict(metadata)
        # a group handle's own dict, not a copy: what it learns later shows here
        self._flat = flat

    @property
    def metadata(self) -> dict[str, Any]:
        """Each child's metadata, by name (child groups carry their children)."""
        if self._nested is not None:
            return self._nested
        return _nest(self._flat or {})

    @property
    def flattened_metadata(self) -> dict[str, Any]:
        """Every descendant's metadata, by path relative to the group."""
        if self._flat is not None:
            return dict(self._flat)
        return _flatten(self._nested or {})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (v3 ``consolidated_metadata``): documents by path."""
        return {
            "kind": self.kind,
            "must_understand": self.must_understand,
            "metadata": {k: m.to_dict() for k, m in self.flattened_metadata.items()},
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsolidatedMetadata):
            return NotImplemented
        return (self.kind, self.must_understand, self.flattened_metadata) == (
            other.kind,
            other.must_understand,
            other.flattened_metadata,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConsolidatedMetadata(metadata={self.metadata!r}, kind={self.kind!r}, "
            f"must_understand={self.must_understand!r})"
        )


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    subs: dict[str, dict[str, Any]] = {}
    for key, meta in flat.items():
        head, sep, rest = key.partition("/")
        if sep:
            subs.setdefault(head, {})[rest] = meta
    out: dict[str, Any] = {}
    for key, meta in flat.items():
        if "/" in key:
            continue
        if isinstance(meta, GroupMetadata):
            meta = replace(meta, consolidated_metadata=ConsolidatedMetadata(flat=subs.get(key, {})))
        out[key] = meta
    return out


def _flatten(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, meta in nested.items():
        out[prefix + key] = meta
        cm = getattr(meta, "consolidated_metadata", None)
        if cm is not None:
            out.update(_flatten(cm.metadata, f"{prefix}{key}/"))
    return out
