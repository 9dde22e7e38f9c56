"""Consolidated metadata: every node's metadata stored once, at the root.

v2 keeps it in ``.zmetadata`` (``{"zarr_consolidated_format": 1, "metadata":
{key: document}}``); v3 inline in the root group's ``zarr.json`` under
``consolidated_metadata`` (``kind: inline``, ``must_understand: false``). Opening
a group that has it needs one request for the whole hierarchy.
"""

from __future__ import annotations

import json
from typing import Any

from cuzarr.core.nodes import save_metadata
from cuzarr.errors import MetadataError
from cuzarr.metadata.array import (
    ArrayMetadata,
    json_dumps,
    json_loads,
    parse_array_metadata_v2,
    parse_array_metadata_v3,
)
from cuzarr.metadata.group import GroupMetadata, parse_group_metadata_v2, parse_group_metadata_v3
from cuzarr.storage.common import StorePath

__all__ = [
    "ZMETADATA",
    "build_consolidated",
    "parse_consolidated_v2",
    "parse_consolidated_v3",
    "patch_consolidated_attrs_v2",
    "split_consolidated",
]

ZMETADATA = ".zmetadata"
NodeMeta = ArrayMetadata | GroupMetadata


def split_consolidated(
    cons: dict[str, NodeMeta], max_depth: int | None = None
) -> dict[str, dict[str, NodeMeta]]:
    """Each group's part of ``cons`` (its descendants, keyed relative to it), for
    the groups at most ``max_depth`` levels down (``None``: all), in one pass:
    work in proportion to the keys' total depth, not to keys times groups."""
    subs: dict[str, dict[str, NodeMeta]] = {}
    for key, meta in cons.items():
        parts = key.split("/")
        last = len(parts) - 1 if max_depth is None else min(len(parts) - 1, max_depth + 1)
        for j in range(1, last + 1):
            subs.setdefault("/".join(parts[:j]), {})["/".join(parts[j:])] = meta
    return subs


def _v3_doc(meta: NodeMeta) -> dict[str, Any]:
    return json.loads(meta.to_documents()["zarr.json"])


async def build_consolidated(
    sp: StorePath, root: GroupMetadata, members: list[tuple[str, NodeMeta]]
) -> GroupMetadata:
    """Write consolidated metadata for ``members`` (relative path, metadata) of ``sp``."""
    if root.zarr_format == 2:
        docs: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
        if root.attributes:
            docs[".zattrs"] = root.attributes
        for path, meta in members:
            for name, raw in meta.to_documents().items():
                docs[f"{path}/{name}"] = json.loads(raw)
        body = {"zarr_consolidated_format": 1, "metadata": docs}
        await sp.store.set(sp.key(ZMETADATA), json_dumps(body))
        return root
    inline = {path: _v3_doc(meta) for path, meta in members}
    for doc in inline.values():
        doc.pop("consolidated_metadata", None)
    extra = dict(root.extra)
    extra["consolidated_metadata"] = {
        "kind": "inline",
        "must_understand": False,
        "metadata": inline,
    }
    new_root = GroupMetadata(3, root.attributes, extra)
    await save_metadata(sp, new_root)
    return new_root


async def patch_consolidated_attrs_v2(sp: StorePath, attributes: dict[str, Any]) -> None:
    """Set the group's own ``.zattrs`` entry in its ``.zmetadata``, if it has one."""
    raw = await sp.store.get(sp.key(ZMETADATA))
    if raw is None:
        return
    body = json_loads(raw, ZMETADATA)
    docs = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(docs, dict):
        return
    if attributes:
        docs[".zattrs"] = attributes
    else:
        docs.pop(".zattrs", None)
    await sp.store.set(sp.key(ZMETADATA), json_dumps(body))


def parse_consolidated_v3(root: GroupMetadata) -> dict[str, NodeMeta] | None:
    """Member metadata from a v3 root's inline ``consolidated_metadata``, if any."""
    cm = root.extra.get("consolidated_metadata")
    if not cm:
        return None
    if not isinstance(cm, dict) or cm.get("kind", "inline") != "inline":
        raise MetadataError(f"unsupported consolidated_metadata {cm!r}")
    out: dict[str, NodeMeta] = {}
    for path, doc in (cm.get("metadata") or {}).items():
        if not isinstance(doc, dict):
            raise MetadataError(f"consolidated metadata for {path!r} is not an object")
        if doc.get("node_type") == "array":
            out[path] = parse_array_metadata_v3(doc)
        else:
            d = dict(doc)
            d.setdefault("zarr_format", 3)
            out[path] = parse_group_metadata_v3(d)
    return out


def parse_consolidated_v2(raw: bytes) -> dict[str, NodeMeta]:
    """Member metadata from a v2 ``.zmetadata`` document (root excluded)."""
    body = json_loads(raw, ZMETADATA)
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise MetadataError(".zmetadata must hold an object with a 'metadata' object")
    docs = body["metadata"]
    out: dict[str, NodeMeta] = {}
    for key, doc in docs.items():
        node, _, name = key.rpartition("/")
        if not node:
            continue
        attrs = docs.get(f"{node}/.zattrs")
        if name == ".zarray":
            out[node] = parse_array_metadata_v2(doc, attrs)
        elif name == ".zgroup":
            out[node] = parse_group_metadata_v2(doc, attrs)
    return out
