"""Loading and saving node metadata (arrays and groups, v2 and v3)."""

from __future__ import annotations

from typing import Any

from cuzarr.core.blocking import on_blocking_io
from cuzarr.errors import (
    ArrayFoundError,
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupFoundError,
    GroupNotFoundError,
    MetadataError,
    NodeNotFoundError,
)
from cuzarr.metadata.array import (
    ArrayMetadata,
    json_loads,
    parse_array_metadata_v2,
    parse_array_metadata_v3,
)
from cuzarr.metadata.group import GroupMetadata, parse_group_metadata_v2, parse_group_metadata_v3
from cuzarr.storage.common import StorePath, make_store_path

__all__ = [
    "load_node_metadata",
    "load_node_metadata_sync",
    "load_nodes_metadata",
    "node_kind",
    "open_node_metadata",
    "parse_documents",
    "save_metadata",
    "write_new_node",
]

_V3 = "zarr.json"
_V2_ARRAY, _V2_GROUP, _V2_ATTRS = ".zarray", ".zgroup", ".zattrs"


_DOC_NAMES: dict[int | None, list[str]] = {
    3: [_V3],
    2: [_V2_ARRAY, _V2_GROUP, _V2_ATTRS],
    None: [_V3, _V2_ARRAY, _V2_GROUP, _V2_ATTRS],
}


# what tells whether a node is there, and which kind (no ``.zattrs``)
_KIND_NAMES: dict[int | None, list[str]] = {
    k: [n for n in v if n != _V2_ATTRS] for k, v in _DOC_NAMES.items()
}


async def _fetch_docs(
    sp: StorePath, zarr_format: int | None, names: list[str] | None = None
) -> dict[str, Any]:
    names = _DOC_NAMES[zarr_format] if names is None else names
    datas = await sp.store.get_many([sp.key(n) for n in names])
    return {n: d for n, d in zip(names, datas, strict=True) if d is not None}


def load_node_metadata_sync(
    sp: StorePath, zarr_format: int | None, sio: Any
) -> ArrayMetadata | GroupMetadata | None:
    """:func:`load_node_metadata` through a store's blocking I/O (``sio``, its
    ``sync_io()``), in the calling thread; None when no node is there (the caller
    goes the async way, which raises the error)."""
    if zarr_format is None:
        # zarr.json first: where it is, parse_documents reads it alone
        v3 = sio.get_ranges([(sp.key(_V3), None)])[0]
        if v3 is not None:
            return parse_documents({_V3: v3}, sp.key)
        zarr_format = 2
    if zarr_format == 3:
        names = _DOC_NAMES[3]
    else:
        # .zarray and .zattrs; .zgroup only where there is no .zarray (which
        # parse_documents prefers): one file less to look for in an array
        names = [_V2_ARRAY, _V2_ATTRS]
    datas = sio.get_ranges([(sp.key(n), None) for n in names])
    docs = {n: d for n, d in zip(names, datas, strict=True) if d is not None}
    if zarr_format == 2 and _V2_ARRAY not in docs:
        group = sio.get_ranges([(sp.key(_V2_GROUP), None)])[0]
        if group is not None:
            docs[_V2_GROUP] = group
    return parse_documents(docs, sp.key)


async def load_node_metadata(
    sp: StorePath, zarr_format: int | None = None, want: str | None = None
) -> ArrayMetadata | GroupMetadata:
    """Read the metadata of the node at ``sp`` (one round trip for all candidates).

    ``want`` ('array' or 'group') narrows the error raised when nothing is there.
    """
    docs = await _fetch_docs(sp, zarr_format)
    meta = parse_documents(docs, sp.key)
    if meta is not None:
        return meta
    # "does not exist", as zarr-python's and xarray's messages say (what users
    # and xarray's own tests match on), naming the store and the path in it
    where = f"at path {sp.path!r} in {sp.store!r}" if sp.path else f"at the root of {sp.store!r}"
    if want == "array":
        raise ArrayNotFoundError(f"array {where} does not exist")
    if want == "group":
        raise GroupNotFoundError(f"group {where} does not exist")
    raise NodeNotFoundError(f"array or group {where} does not exist")


async def open_node_metadata(
    store: Any, zarr_format: int | None, want: str
) -> tuple[StorePath, Any]:
    """``store`` (a ``StorePath`` or anything ``open_array`` takes as a store) as a
    ``StorePath``, and the metadata of the ``want`` node (``"array"`` or ``"group"``)
    there: zarr-python's ``GroupFoundError`` / ``ArrayFoundError`` where the other
    kind is, the ``*NotFoundError`` of :func:`load_node_metadata` where none is."""
    sp = store if isinstance(store, StorePath) else make_store_path(store)
    meta = await load_node_metadata(sp, zarr_format, want=want)
    where = f"{sp.store!r}, path {sp.path!r}"
    if want == "array" and isinstance(meta, GroupMetadata):
        raise GroupFoundError(f"a group, not an array, exists at {where}")
    if want == "group" and isinstance(meta, ArrayMetadata):
        raise ArrayFoundError(f"an array, not a group, exists at {where}")
    return sp, meta


async def load_nodes_metadata(
    sps: list[StorePath],
) -> list[ArrayMetadata | GroupMetadata | None]:
    """:func:`load_node_metadata` of many nodes of one store, None where no node
    is: every ``zarr.json`` in one batched request, then the v2 documents of the
    nodes that have none in another (``parse_documents`` reads ``zarr.json``
    alone when there is one). A listing of 1,000 members made 1,000 requests of
    four documents each, every one a task and a thread hop."""
    if not sps:
        return []
    store = sps[0].store
    docs: list[dict[str, Any]] = [
        {} if d is None else {_V3: d} for d in await store.get_many([sp.key(_V3) for sp in sps])
    ]
    need = [i for i, d in enumerate(docs) if not d]
    if need:
        names = (_V2_ARRAY, _V2_GROUP, _V2_ATTRS)
        datas = await store.get_many([sps[i].key(n) for i in need for n in names])
        for k, i in enumerate(need):
            for j, n in enumerate(names):
                d = datas[3 * k + j]
                if d is not None:
                    docs[i][n] = d
    return [parse_documents(d, sp.key) for d, sp in zip(docs, sps, strict=True)]


def parse_documents(
    docs: dict[str, Any], key: Any = lambda name: name
) -> ArrayMetadata | GroupMetadata | None:
    """The node the metadata documents ``docs`` (by name: ``zarr.json``, ``.zarray``,
    ``.zgroup``, ``.zattrs``; JSON bytes) describe, or None when they name none;
    ``key(name)`` names a document in errors."""
    if _V3 in docs:
        d = json_loads(docs[_V3], key(_V3))
        if not isinstance(d, dict):
            raise MetadataError(f"{key(_V3)}: must hold a JSON object")
        kind = d.get("node_type")
        if kind == "array":
            return parse_array_metadata_v3(d)
        if kind == "group":
            return parse_group_metadata_v3(d)
        raise MetadataError(f"{key(_V3)}: node_type must be 'array' or 'group', got {kind!r}")
    attrs = json_loads(docs[_V2_ATTRS], key(_V2_ATTRS)) if _V2_ATTRS in docs else None
    if _V2_ARRAY in docs:
        return parse_array_metadata_v2(json_loads(docs[_V2_ARRAY], key(_V2_ARRAY)), attrs)
    if _V2_GROUP in docs:
        return parse_group_metadata_v2(json_loads(docs[_V2_GROUP], key(_V2_GROUP)), attrs)
    return None


def same_metadata(a: ArrayMetadata | GroupMetadata, b: ArrayMetadata | GroupMetadata) -> bool:
    """Whether two nodes' metadata say the same: equal, or equal as stored (a NaN
    or NaT fill value is not equal to itself, its stored form is)."""
    return a is b or a == b or (type(a) is type(b) and a.to_documents() == b.to_documents())


async def node_kind(sp: StorePath, zarr_format: int | None = None) -> str | None:
    """'array', 'group' or None, for whatever sits at ``sp``."""
    meta = parse_documents(await _fetch_docs(sp, zarr_format, _KIND_NAMES[zarr_format]), sp.key)
    if meta is None:
        return None
    return "array" if isinstance(meta, ArrayMetadata) else "group"


def publish_metadata(sinks: Any, meta: ArrayMetadata | GroupMetadata) -> None:
    """Put a node's new metadata into the consolidated dicts of the group handles
    it was got through (``(dict, key)`` pairs), where they still list it."""
    for d, key in sinks:
        if key in d:
            d[key] = meta


async def ensure_vacant(sp: StorePath, overwrite: bool) -> None:
    """Refuse to create over an existing node unless ``overwrite``; then clear it."""
    if overwrite:
        if sp.path:
            await sp.store.delete_dir(sp.path)
        else:
            await sp.store.clear()
        return
    kind = await node_kind(sp)
    if kind == "array":
        raise ContainsArrayError(f"an array already exists at {sp.store!r}, path {sp.path!r}")
    if kind == "group":
        raise ContainsGroupError(f"a group already exists at {sp.store!r}, path {sp.path!r}")


async def save_metadata(sp: StorePath, meta: ArrayMetadata | GroupMetadata) -> None:
    """Write a node's metadata documents (and drop a stale v2 ``.zattrs``)."""
    docs = meta.to_documents()
    await sp.store.set_many([(sp.key(k), v) for k, v in docs.items()])
    if meta.zarr_format == 2 and _V2_ATTRS not in docs:
        await sp.store.delete(sp.key(_V2_ATTRS))


class _NodeInsideArrayError(ContainsArrayError, ValueError):
    """A node asked for below an array: cuzarr's error, and the ``ValueError``
    zarr-python raises there ("only groups may have child nodes")."""


async def ensure_parents(sp: StorePath, zarr_format: int) -> None:
    """Write group metadata for missing ancestors of ``sp`` (implicit groups).

    An existing group of either format ends the walk. zarr-python instead writes a
    group document of the new node's format next to it: a v3 array made in a v2
    hierarchy then puts a ``zarr.json`` at the root, which both libraries read
    first, hiding the v2 root's attributes and members. cuzarr leaves it alone."""
    if not sp.path:
        return
    parts = sp.path.split("/")
    missing = []
    for i in range(len(parts) - 1, -1, -1):
        parent = StorePath(sp.store, "/".join(parts[:i]))
        kind = await node_kind(parent)
        if kind == "array":
            # before anything is written: no stray groups left inside the array
            raise _NodeInsideArrayError(f"cannot create a node inside the array at {parent.path!r}")
        if kind == "group":
            break
        missing.append(parent)
    for parent in reversed(missing):  # top down: an interrupted walk leaves a hierarchy
        await save_metadata(parent, GroupMetadata(zarr_format))


async def write_new_node(
    sp: StorePath, meta: ArrayMetadata | GroupMetadata, overwrite: bool
) -> None:
    """Create a node: refuse (or, with ``overwrite``, clear) what is at ``sp``,
    write the missing ancestor groups, then ``meta``'s documents. Under
    :func:`~cuzarr.core.blocking.run_blocking` this runs in the calling thread."""
    sp = await on_blocking_io(sp, overwrite=overwrite)
    await ensure_vacant(sp, overwrite)
    await ensure_parents(sp, meta.zarr_format)
    await save_metadata(sp, meta)
