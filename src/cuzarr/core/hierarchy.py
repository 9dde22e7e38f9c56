"""A whole hierarchy from metadata alone (zarr-python's ``create_hierarchy``):
every node's documents written concurrently, missing ancestors made groups."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from cuzarr.core.nodes import load_node_metadata, parse_documents, save_metadata
from cuzarr.errors import ContainsArrayError, ContainsGroupError, NodeNotFoundError
from cuzarr.metadata.array import ArrayMetadata
from cuzarr.metadata.group import GroupMetadata
from cuzarr.storage.common import StorePath, join_path, normalize_path

__all__ = ["as_node_metadata", "create_hierarchy"]

Meta = ArrayMetadata | GroupMetadata


def as_node_metadata(value: Any) -> Meta:
    """A node's metadata from cuzarr metadata, zarr-python metadata objects
    (``GroupMetadata``, ``ArrayV2Metadata``, ``ArrayV3Metadata``) or a metadata
    document as a dict (the ``zarr.json`` object; for v2 the ``.zarray`` or
    ``.zgroup`` object with the attributes under ``"attributes"``)."""
    if isinstance(value, (ArrayMetadata, GroupMetadata)):
        return value
    docs: dict[str, bytes]
    to_buffers = getattr(value, "to_buffer_dict", None)
    if callable(to_buffers):  # zarr-python's metadata: its own documents
        from zarr.core.buffer import default_buffer_prototype

        docs = {k: v.to_bytes() for k, v in to_buffers(default_buffer_prototype()).items()}
    elif isinstance(value, Mapping):
        docs = _documents_of(dict(value))
    else:
        raise TypeError(
            f"a hierarchy node is array or group metadata (or its document as a dict), "
            f"not {type(value).__name__}"
        )
    meta = parse_documents(docs)
    if meta is None:
        raise ValueError(f"not array or group metadata: {value!r}")
    return meta


def _documents_of(d: dict[str, Any]) -> dict[str, bytes]:
    fmt = d.get("zarr_format")
    if fmt == 3:
        return {"zarr.json": json.dumps(d).encode()}
    if fmt != 2:
        raise ValueError(f"a metadata document needs zarr_format 2 or 3, got {fmt!r}")
    attrs = d.pop("attributes", None)
    name = ".zarray" if "shape" in d else ".zgroup"
    docs = {name: json.dumps(d if name == ".zarray" else {"zarr_format": 2}).encode()}
    if attrs:
        docs[".zattrs"] = json.dumps(attrs).encode()
    return docs


def _plan(nodes: Mapping[str, Any]) -> tuple[dict[str, Meta], dict[str, GroupMetadata]]:
    """The explicit nodes by normalized path, and the implicit groups (every
    missing ancestor, the root included)."""
    explicit: dict[str, Meta] = {}
    for p, m in nodes.items():
        path = normalize_path(p)
        if path in explicit:
            raise ValueError(f"the paths {p!r} and another key name the same node {path!r}")
        explicit[path] = as_node_metadata(m)
    formats = {m.zarr_format for m in explicit.values()}
    if len(formats) > 1:
        raise ValueError(
            "a hierarchy holds one Zarr format: got nodes of formats " + str(sorted(formats))
        )
    implicit: dict[str, GroupMetadata] = {}
    for path, meta in explicit.items():
        parts = path.split("/") if path else []
        for i in range(len(parts)):
            parent = "/".join(parts[:i])
            if isinstance(explicit.get(parent), ArrayMetadata):
                raise ValueError(f"{path!r} cannot be a node inside the array {parent!r}")
            if parent not in explicit:
                implicit[parent] = GroupMetadata(meta.zarr_format)
    return explicit, implicit


async def _existing(sp: StorePath) -> Meta | None:
    try:
        return await load_node_metadata(sp)
    except NodeNotFoundError:
        return None


async def create_hierarchy(
    store_path: StorePath, nodes: Mapping[str, Any], overwrite: bool = False
) -> AsyncIterator[tuple[str, Meta, StorePath]]:
    """Create the nodes ``nodes`` (paths relative to ``store_path``) and every
    missing ancestor group; yields ``(path, metadata, store path)`` per node of
    the hierarchy, explicit and implicit.

    Without ``overwrite`` an explicit node where one exists raises
    ``ContainsArrayError`` / ``ContainsGroupError`` before anything is written.
    With it, the existing node goes with everything below it, as in zarr-python.
    An existing group where an implicit one is asked for is left as it is (one of
    the other Zarr format is refused: the new nodes would be invisible below it);
    an existing array there is an error (replaced with ``overwrite``)."""
    if store_path.store.read_only:
        from cuzarr.errors import ReadOnlyError

        raise ReadOnlyError(
            f"cannot create nodes in read-only {store_path.store!r} "
            "(open it with mode='r+' to write)"
        )
    explicit, implicit = _plan(nodes)
    paths = [*explicit, *implicit]
    sps = {p: StorePath(store_path.store, join_path(store_path.path, p)) for p in paths}
    found = dict(zip(paths, await asyncio.gather(*(_existing(sps[p]) for p in paths)), strict=True))
    clear: list[str] = []
    for path in paths:
        old = found[path]
        if old is None:
            continue
        if path not in explicit and isinstance(old, GroupMetadata):
            continue  # an implicit group already there: kept (checked below)
        if not overwrite:
            cls = ContainsArrayError if isinstance(old, ArrayMetadata) else ContainsGroupError
            kind = "an array" if isinstance(old, ArrayMetadata) else "a group"
            raise cls(f"{kind} already exists at {sps[path].store!r}, path {sps[path].path!r}")
        clear.append(path)

    def cleared(path: str) -> bool:
        return any(c == "" or path == c or path.startswith(c + "/") for c in clear)

    kept = {
        p: m
        for p, m in found.items()
        if p in implicit and isinstance(m, GroupMetadata) and not cleared(p)
    }
    for path, old in kept.items():
        fmt = implicit[path].zarr_format
        if old.zarr_format != fmt:
            # as Group.create_array: zarr-python would not see the new nodes there
            raise ValueError(
                f"the Zarr v{fmt} nodes cannot go below the existing v{old.zarr_format} "
                f"group at path {path!r}"
            )
    # deletions first, outermost first: the nodes are written after them all
    for path in sorted(clear, key=lambda p: p.count("/") if p else -1):
        sp = sps[path]
        await (sp.store.delete_dir(sp.path) if sp.path else sp.store.clear())
    writes = {p: m for p, m in explicit.items()}
    writes.update((p, m) for p, m in implicit.items() if p not in kept)
    await asyncio.gather(*(save_metadata(sps[p], m) for p, m in writes.items()))
    for path in paths:
        yield path, writes.get(path) or kept[path], sps[path]
