"""Group metadata for Zarr v3 (``zarr.json``) and v2 (``.zgroup`` + ``.zattrs``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuzarr.errors import MetadataError
from cuzarr.metadata.array import _check_extension, json_dumps

__all__ = ["GroupMetadata", "parse_group_metadata_v2", "parse_group_metadata_v3"]


@dataclass(frozen=True)
class GroupMetadata:
    zarr_format: int = 3
    attributes: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

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
    if not isinstance(d, dict):
        raise MetadataError("zarr.json must hold a JSON object")
    if d.get("zarr_format") != 3:
        raise MetadataError(f"zarr.json: zarr_format must be 3, got {d.get('zarr_format')!r}")
    if d.get("node_type") != "group":
        raise MetadataError(f"zarr.json: node_type is {d.get('node_type')!r}, not 'group'")
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
