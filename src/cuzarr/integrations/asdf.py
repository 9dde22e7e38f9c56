"""cuzarr arrays inside ASDF files (an ``asdf`` extension).

With the ``asdf`` package installed, a :class:`cuzarr.Array` placed in an ASDF
tree is written either

- **embedded**: the Zarr metadata documents in the tree and each stored chunk
  (its encoded bytes, exactly as in the Zarr store) in its own ASDF block; or
- **by reference**: the URL or path of its Zarr store plus the array's path.

Reading the file gives back a :class:`cuzarr.Array` that is lazy: chunks are
read on access, from the ASDF blocks (byte ranges of the file, through
:class:`~cuzarr.storage.reference.ReferenceStore`) or from the external store.

Two tags are read and written:

- ``asdf://cuzarr.dev/cuzarr/tags/zarr_array-1.0.0`` (the default), for v2 and
  v3 arrays, any chunk grid, sharding and attributes;
- ``asdf://asdf-format.org/zarr/tags/zarr-1.0.0``, the tag of the
  ``asdf-zarr`` package (``tag="asdf-zarr"``; v2 arrays with a regular grid).
  Embedded arrays use its layout (``.zarray`` plus an int32 block holding the
  block index of each chunk, -1 for missing ones); references are its
  ``DirectoryStore`` form for local directories. Files that ``asdf-zarr``
  writes (embedded, ``DirectoryStore``, ``NestedDirectoryStore``, ``FSStore``,
  ``KVStore``) read back as cuzarr arrays.

The extension is registered through the ``asdf.extensions`` and
``asdf.resource_mappings`` entry points, so nothing needs to be imported.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from asdf.extension import Converter, Extension, TagDefinition

from cuzarr.errors import MetadataError
from cuzarr.storage.base import ByteRequest, slice_bytes
from cuzarr.storage.reference import ReferenceStore

__all__ = [
    "ASDF_ZARR_TAG",
    "CUZARR_TAG",
    "AsdfZarr",
    "CuzarrAsdfExtension",
    "ZarrArrayConverter",
    "embed",
    "get_extensions",
    "get_resource_mappings",
    "reference",
]

CUZARR_TAG = "asdf://cuzarr.dev/cuzarr/tags/zarr_array-1.0.0"
ASDF_ZARR_TAG = "asdf://asdf-format.org/zarr/tags/zarr-1.0.0"
EXTENSION_URI = "asdf://cuzarr.dev/cuzarr/extensions/cuzarr-1.0.0"
SCHEMA_URI = "asdf://cuzarr.dev/cuzarr/schemas/zarr_array-1.0.0"
MISSING_CHUNK = -1

_SCHEMA = f"""%YAML 1.1
---
$schema: http://stsci.edu/schemas/yaml-schema/draft-01
id: {SCHEMA_URI}
title: A Zarr array (v2 or v3), embedded in ASDF blocks or kept in an external store
description: |
  Embedded: `metadata` holds the Zarr metadata documents by key (`zarr.json`,
  or `.zarray` and `.zattrs`) and `chunks` maps each stored chunk key to the
  index of the ASDF block holding its encoded bytes. By reference: `store` is
  the URL or path of the Zarr store (relative paths are relative to the ASDF
  file) and `path` the array's path inside it.
type: object
properties:
  zarr_format:
    enum: [2, 3]
  metadata:
    type: object
  chunks:
    type: object
    additionalProperties:
      type: integer
      minimum: 0
  store:
    type: string
  path:
    type: string
  storage_options:
    type: object
required: [zarr_format]
oneOf:
  - required: [metadata, chunks]
  - required: [store]
...
"""

_META_KEYS = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


@dataclass
class AsdfZarr:
    """How a cuzarr array is written into an ASDF tree (see :func:`embed`, :func:`reference`).

    Parameters
    ----------
    array
        The :class:`cuzarr.Array`.
    mode
        ``"embed"``: chunks copied into ASDF blocks; ``"reference"``: the store's
        URL and the array path; ``"auto"``: embed arrays held in memory,
        reference the others.
    url
        The store URL or path to write (``reference`` mode); by default the
        store's own root.
    storage_options
        fsspec options written next to the URL (they end up in the file: never
        put credentials here).
    tag
        ``"cuzarr"`` or ``"asdf-zarr"`` (v2 arrays, regular grids only).
    """

    array: Any
    mode: str = "auto"
    url: str | None = None
    storage_options: dict[str, Any] | None = None
    tag: str = "cuzarr"
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "embed", "reference"):
            raise ValueError(f"mode must be 'auto', 'embed' or 'reference', got {self.mode!r}")
        if self.tag not in ("cuzarr", "asdf-zarr"):
            raise ValueError(f"tag must be 'cuzarr' or 'asdf-zarr', got {self.tag!r}")
        if self.tag == "asdf-zarr" and self.array.zarr_format != 2:
            raise ValueError("the asdf-zarr tag holds Zarr v2 arrays only")


def embed(array: Any, *, tag: str = "cuzarr") -> AsdfZarr:
    """Mark ``array`` to be written with its chunks in the ASDF file's blocks."""
    return AsdfZarr(array, mode="embed", tag=tag)


def reference(
    array: Any,
    url: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    tag: str = "cuzarr",
) -> AsdfZarr:
    """Mark ``array`` to be written as a reference to its Zarr store.

    ``url`` overrides the store location written (for example a relative path,
    or the public URL of a store written locally).
    """
    return AsdfZarr(array, mode="reference", url=url, storage_options=storage_options, tag=tag)


# -- helpers ---------------------------------------------------------------------------
def _store_url(store: Any) -> str | None:
    from cuzarr.storage import FsspecStore, LocalStore, ZipStore

    if isinstance(store, LocalStore):
        return str(store.root)
    if isinstance(store, ZipStore):
        return store.path
    if isinstance(store, FsspecStore):
        if "://" in store.path:
            return store.path
        if store.protocol in ("file", "local"):
            return store.path
        return f"{store.protocol}://{store.path}"
    return None


def _sync(coro: Any) -> Any:
    from cuzarr.runtime.sync import sync

    return sync(coro)


async def _list_prefix(store: Any, prefix: str) -> list[str]:
    return [k async for k in store.list_prefix(prefix)]


def _read_docs_and_keys(array: Any) -> tuple[dict[str, Any], list[str]]:
    import json

    store, path = array.store, array.path
    prefix = f"{path}/" if path else ""
    keys = sorted(_sync(_list_prefix(store, prefix)))
    docs: dict[str, Any] = {}
    chunk_keys = []
    for k in keys:
        rel = k[len(prefix) :]
        if rel in _META_KEYS:
            if rel in ("zarr.json", ".zarray", ".zattrs"):
                docs[rel] = json.loads(_sync(store.get(k)))
        elif not rel.startswith(".cuzarr"):
            chunk_keys.append(rel)
    return docs, chunk_keys


def _chunk_callback(store: Any, key: str) -> Callable[[], np.ndarray]:
    def cb() -> np.ndarray:
        data = _sync(store.get(key))
        return np.frombuffer(data, dtype=np.uint8)

    return cb


def _local_file(url: str | None) -> str | None:
    if not url:
        return None
    path = url[len("file://") :] if url.startswith("file://") else url
    if "://" in path:
        return None
    if os.path.isfile(path):
        return path
    if url.startswith("file://"):  # asdf percent-encodes file URLs ('my%20data.asdf')
        from urllib.parse import unquote

        path = unquote(path)
        if os.path.isfile(path):
            return path
    return None


class _BlockStore(ReferenceStore):
    """A ReferenceStore whose chunk keys may also be read through asdf block callbacks.

    Used when a block cannot be mapped to a byte range (the ASDF file is not a
    local file, or asdf compressed the block); the ASDF file must then stay open
    while chunks are read.
    """

    def __init__(self, refs: dict[str, Any], callbacks: dict[str, Callable[[], Any]]) -> None:
        super().__init__(refs)
        self._callbacks = callbacks

    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        cb = self._callbacks.get(key)
        if cb is None:
            return await super().get(key, prototype, byte_range)
        data = await asyncio.to_thread(lambda: bytes(memoryview(cb()).cast("B")))
        return slice_bytes(data, byte_range)

    async def exists(self, key: str) -> bool:
        return key in self._callbacks or await super().exists(key)

    def list(self) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            async for k in super(_BlockStore, self).list():
                yield k
            for k in list(self._callbacks):
                yield k

        return gen()


def _open_embedded(docs: dict[str, Any], chunk_blocks: dict[str, int], ctx: Any) -> Any:
    from cuzarr.api.synchronous import open_array
    from cuzarr.storage.asdf import read_asdf_blocks

    refs: dict[str, Any] = {k: v for k, v in docs.items() if v is not None}
    callbacks: dict[str, Callable[[], Any]] = {}
    path = _local_file(getattr(ctx, "url", None))
    blocks = read_asdf_blocks(path) if path and chunk_blocks else []
    for key, index in chunk_blocks.items():
        cb = ctx.get_block_data_callback(int(index), ctx.generate_block_key())
        if index < len(blocks) and blocks[index].compression is None:
            b = blocks[index]
            refs[key] = [path, b.data_offset, b.used_size]
        else:
            callbacks[key] = cb
    store = _BlockStore(refs, callbacks) if callbacks else ReferenceStore(refs)
    zarr_format = 3 if "zarr.json" in docs else 2
    return open_array(store, mode="r", zarr_format=zarr_format)


def _resolve(url: str, ctx: Any) -> str:
    if "://" in url or os.path.isabs(url):
        return url
    base = _local_file(getattr(ctx, "url", None))
    return os.path.join(os.path.dirname(os.path.abspath(base)), url) if base else url


# -- converter ---------------------------------------------------------------------------
class ZarrArrayConverter(Converter):
    """Converts :class:`cuzarr.Array` (and :class:`AsdfZarr`) to and from ASDF tags."""

    tags = [CUZARR_TAG, ASDF_ZARR_TAG]
    types = ["cuzarr.core.array.Array", "cuzarr.integrations.asdf.AsdfZarr"]

    @staticmethod
    def _spec(obj: Any) -> AsdfZarr:
        spec = obj if isinstance(obj, AsdfZarr) else AsdfZarr(obj)
        if spec.mode == "auto":
            spec = AsdfZarr(
                spec.array,
                mode="reference" if _store_url(spec.array.store) else "embed",
                url=spec.url,
                storage_options=spec.storage_options,
                tag=spec.tag,
            )
        return spec

    def select_tag(self, obj: Any, tags: list[str], ctx: Any) -> str:
        want = ASDF_ZARR_TAG if self._spec(obj).tag == "asdf-zarr" else CUZARR_TAG
        return want if want in tags else tags[0]

    # -- write ---------------------------------------------------------------------
    def to_yaml_tree(self, obj: Any, tag: str, ctx: Any) -> dict[str, Any]:
        spec = self._spec(obj)
        array = spec.array
        if spec.mode == "reference":
            url = spec.url or _store_url(array.store)
            if url is None:
                raise ValueError(
                    f"{array!r}: its store has no URL to reference; embed it or pass url="
                )
            if tag == ASDF_ZARR_TAG:
                if "://" in url:
                    raise ValueError("the asdf-zarr tag references local directory stores only")
                directory = os.path.join(url, array.path) if array.path else url
                return {
                    "store": {
                        "type_string": "DirectoryStore",
                        "normalize_keys": False,
                        "path": directory,
                    }
                }
            node: dict[str, Any] = {
                "zarr_format": array.zarr_format,
                "store": url,
                "path": array.path,
            }
            if spec.storage_options:
                node["storage_options"] = dict(spec.storage_options)
            return node
        docs, chunk_keys = _read_docs_and_keys(array)
        store, prefix = array.store, f"{array.path}/" if array.path else ""
        index = {
            k: ctx.find_available_block_index(
                _chunk_callback(store, prefix + k), ctx.generate_block_key()
            )
            for k in chunk_keys
        }
        if tag == ASDF_ZARR_TAG:
            zarray = docs[".zarray"]
            if any(isinstance(c, list) for c in zarray["chunks"]):
                raise ValueError("the asdf-zarr tag holds regular chunk grids only")
            sep = zarray.get("dimension_separator") or "."
            grid = tuple(math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"])) or ()
            block_map = np.full(grid, MISSING_CHUNK, dtype="<i4")
            for k, i in index.items():
                block_map[tuple(int(c) for c in k.split(sep)) if grid else ()] = i

            def map_cb(block_map: np.ndarray = block_map) -> np.ndarray:
                return block_map.reshape(-1).view(np.uint8)

            out = {
                ".zarray": zarray,
                "chunk_block_map": ctx.find_available_block_index(map_cb, ctx.generate_block_key()),
            }
            if docs.get(".zattrs"):
                out[".zattrs"] = docs[".zattrs"]
            return out
        return {"zarr_format": array.zarr_format, "metadata": docs, "chunks": index}

    # -- read ----------------------------------------------------------------------
    def from_yaml_tree(self, node: Any, tag: str, ctx: Any) -> Any:
        from cuzarr.api.synchronous import open_array

        node = dict(node)
        if "metadata" in node and "chunks" in node:  # cuzarr, embedded
            docs = {k: _plain(v) for k, v in dict(node["metadata"]).items()}
            return _open_embedded(docs, {str(k): int(v) for k, v in node["chunks"].items()}, ctx)
        if ".zarray" in node and "chunk_block_map" in node:  # asdf-zarr, embedded
            zarray = _plain(node[".zarray"])
            docs = {".zarray": zarray}
            if node.get(".zattrs"):
                docs[".zattrs"] = _plain(node[".zattrs"])
            grid = tuple(math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"]))
            raw = ctx.get_block_data_callback(
                int(node["chunk_block_map"]), ctx.generate_block_key()
            )()
            block_map = np.frombuffer(bytes(raw), dtype="<i4").reshape(grid)
            sep = zarray.get("dimension_separator") or "."
            if grid:
                chunk_blocks = {
                    sep.join(str(int(c)) for c in coords): int(block_map[coords])
                    for coords in zip(*np.nonzero(block_map != MISSING_CHUNK))
                }
            else:  # 0-d: one chunk, key "0"
                first = int(block_map.reshape(-1)[0])
                chunk_blocks = {"0": first} if first != MISSING_CHUNK else {}
            return _open_embedded(docs, chunk_blocks, ctx)
        store = node.get("store")
        if isinstance(store, str):  # cuzarr, by reference
            return open_array(
                _resolve(store, ctx),
                mode="r",
                path=node.get("path") or None,
                zarr_format=node.get("zarr_format"),
                storage_options=_plain(node.get("storage_options")) or None,
            )
        if isinstance(store, dict):  # asdf-zarr, by reference
            if "meta_store" in node:
                raise MetadataError(
                    "asdf-zarr arrays with a separate meta_store are not supported by cuzarr"
                )
            return open_array(_asdf_zarr_store(_plain(store), ctx), mode="r", zarr_format=2)
        raise ValueError(f"unrecognized Zarr array node under tag {tag!r}: {sorted(node)}")


def _plain(value: Any) -> Any:
    """Tree nodes (tagged or lazy containers) as plain dicts and lists."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _asdf_zarr_store(store: dict[str, Any], ctx: Any) -> Any:
    from cuzarr.storage import FsspecStore, LocalStore, MemoryStore

    kind = store.get("type_string")
    if kind in ("DirectoryStore", "NestedDirectoryStore", "TempStore"):
        return LocalStore(_resolve(store["path"], ctx), read_only=True)
    if kind == "FSStore":
        import fsspec

        fs = fsspec.AbstractFileSystem.from_json(store["fs"])
        return FsspecStore(fs, store["path"], read_only=True)
    if kind == "KVStore":
        mapping = {
            k: (v.encode() if isinstance(v, str) else bytes(v)) for k, v in store["map"].items()
        }
        return MemoryStore(mapping, read_only=True)
    raise MetadataError(f"asdf-zarr store type {kind!r} is not supported by cuzarr")


class CuzarrAsdfExtension(Extension):
    """The asdf extension: the cuzarr Zarr array tag plus asdf-zarr's tag."""

    extension_uri = EXTENSION_URI
    tags = [TagDefinition(CUZARR_TAG, schema_uris=[SCHEMA_URI]), ASDF_ZARR_TAG]
    converters = [ZarrArrayConverter()]


def get_extensions() -> list[Extension]:
    """Entry point for ``asdf.extensions``."""
    return [CuzarrAsdfExtension()]


def get_resource_mappings() -> list[dict[str, bytes]]:
    """Entry point for ``asdf.resource_mappings``: the schema of the cuzarr tag."""
    return [{SCHEMA_URI: _SCHEMA.encode()}]
