"""``cuzarr info`` and ``cuzarr tree``: describe what a store holds, reading only."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from cuzarr.cli.display import human
from cuzarr.cli.hierarchy import list_hierarchy, node_name

__all__ = ["cmd_info", "cmd_tree"]


def _stored_bytes(node: Any) -> int:
    """Bytes stored under a node (files on disk, or values in other stores)."""
    from cuzarr.runtime.sync import sync
    from cuzarr.storage.local import LocalStore

    store = node.store
    prefix = node.path + "/" if node.path else ""

    async def total() -> int:
        n = 0
        keys = [k async for k in store.list_prefix(prefix)]
        if isinstance(store, LocalStore):
            return sum(os.path.getsize(os.path.join(store.root, k)) for k in keys)
        for v in await store.get_many(keys):
            n += len(v) if v is not None else 0
        return n

    return sync(total())


def _dimension_names(node: Any) -> list[str | None] | None:
    """v3 ``dimension_names``, or the ``_ARRAY_DIMENSIONS`` that xarray gives v2 arrays."""
    names = node.metadata.dimension_names
    if names is None and node.zarr_format == 2:
        names = node.attrs.get("_ARRAY_DIMENSIONS")
    return list(names) if names is not None else None


def _plain(key: str, value: Any) -> str:
    """One value of ``info`` as text: sizes with their unit, strings as they are,
    everything else as JSON (``null``, ``[100, 100]``, codecs as their JSON)."""
    if key in ("stored_bytes", "nbytes"):
        return f"{value} ({human(value)})"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def cmd_info(args: argparse.Namespace) -> int:
    """Describe an array or a group: metadata, chunking, stored bytes and
    compression ratio (an array), members and consolidated metadata (a group).

    Parameters
    ----------
    args : argparse.Namespace
        ``store``, ``path`` and ``json``, as :func:`~cuzarr.cli.parser.build_parser`
        parses them.

    Returns
    -------
    int
        The exit status (0). Notes on stale consolidated metadata go to stderr.
    """
    import cuzarr

    node = cuzarr.open(args.store, mode="r", path=args.path)
    stored = _stored_bytes(node)
    notes: list[str] = []
    if isinstance(node, cuzarr.Array):
        info = {
            "type": "array",
            "zarr_format": node.zarr_format,
            "shape": list(node.shape),
            "dtype": str(node.dtype),
            "chunks": list(node.chunks),
            "shards": list(node.shards) if node.shards else None,
            # as the metadata encodes it (0.0, "NaN", base64 bytes...), not a numpy repr
            "fill_value": node.metadata.to_dict().get("fill_value"),
            "dimension_names": _dimension_names(node),
            "nchunks": node.nchunks,
            "nchunks_initialized": node.nchunks_initialized,
            "nbytes": node.nbytes,
            "stored_bytes": stored,
            "compression_ratio": round(node.nbytes / stored, 3) if stored else None,
            "codecs": json.loads(node.info.codecs),
            "attributes": dict(node.attrs),
        }
    else:
        h = list_hierarchy(node)
        members = h.members
        notes = h.notes(node_name(node))
        info = {
            "type": "group",
            "zarr_format": node.zarr_format,
            "members": len(members),
            "arrays": sum(isinstance(m, cuzarr.Array) for _, m in members),
            "stored_bytes": stored,
            # None, "current", "stale", or "unverified" (a store that cannot list)
            "consolidated_metadata": h.status(),
            "attributes": dict(node.attrs),
        }
    if args.json:
        print(json.dumps(info, default=str, ensure_ascii=False))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            print(f"{k:<{width}} : {_plain(k, v)}")
    for line in notes:
        print(line, file=sys.stderr)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    """Print the hierarchy below a group as the store lists it now; for an array,
    the array as a group's tree shows it.

    Parameters
    ----------
    args : argparse.Namespace
        ``store`` and ``path``, as :func:`~cuzarr.cli.parser.build_parser` parses them.

    Returns
    -------
    int
        The exit status (0). Notes on stale consolidated metadata go to stderr.
    """
    import cuzarr
    from cuzarr.core.group import AsyncGroup, Group

    node = cuzarr.open(args.store, mode="r", path=args.path)
    if isinstance(node, cuzarr.Array):
        print(f"{node.basename or '/'} {node.shape} {node.dtype}")
        return 0
    group = cuzarr.open_group(args.store, mode="r", path=args.path, use_consolidated=False)
    h = list_hierarchy(group)
    ag = group.async_group
    # rendered from the members found (no second listing of the store)
    view = Group(AsyncGroup(ag.metadata, ag.store_path, {p: n.metadata for p, n in h.members}))
    print(view.tree())
    for line in h.notes(node_name(group)):
        print(line, file=sys.stderr)
    return 0
