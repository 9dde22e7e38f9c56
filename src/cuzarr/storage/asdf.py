"""ASDF files read as Zarr hierarchies (read-only, no conversion).

An ASDF file is a YAML tree followed by binary blocks. :class:`AsdfStore`
walks the tree, and for every ``ndarray`` in it writes a Zarr array document
whose chunks are references to byte ranges of the file (kerchunk style, through
:class:`~cuzarr.storage.reference.ReferenceStore`): nothing is copied, and a
read touches only the blocks (or the row ranges of a block) it needs.

Layout of the hierarchy:

- every mapping (or list) of the tree that holds an ndarray is a group, named
  by its key (list items by their index); the root of the tree is the root group;
- every ndarray is an array at its path in the tree (``{"a": {"b": arr}}`` ->
  array ``a/b``);
- the JSON-compatible members of a mapping that are not arrays (numbers,
  strings, booleans, null, and lists / mappings of them) are the attributes of
  the group it forms and of the arrays directly inside it. Tagged ASDF objects,
  dates, NaN and binary data stay in the ASDF file.

Block storage:

- uncompressed blocks (internal, streamed or exploded into external files) are
  one chunk per array, or row chunks of ``chunk_rows`` rows (C-ordered arrays);
- ``zlib`` and ``bzp2`` blocks are one stream each, which numcodecs' ``zlib`` /
  ``bz2`` codecs decode, so they map to one chunk with that compressor;
- ``lz4`` blocks use ASDF's own framing (a 4-byte big-endian length before each
  LZ4 block of up to 4 MiB), which no Zarr codec reads: they are refused with a
  :class:`~cuzarr.errors.MetadataError` naming the array and the compression,
  as are other compressions (``on_unsupported="skip"`` leaves those arrays out);
- inline arrays (``data:`` lists in the YAML) become one literal chunk.
"""

from __future__ import annotations

import base64
import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from cuzarr.errors import MetadataError
from cuzarr.metadata.dtypes import CORE_NUMERIC_NAMES, parse_data_type
from cuzarr.storage.reference import ReferenceStore

__all__ = ["AsdfBlock", "AsdfStore", "read_asdf_blocks"]

BLOCK_MAGIC = b"\xd3BLK"
_HEADER = struct.Struct(">I4sQQQ16s")  # flags, compression, allocated, used, data size, md5
_STREAMED = 0x1
NDARRAY_TAG_PREFIX = "tag:stsci.edu:asdf/core/ndarray-"

# ASDF's numeric datatype names are Zarr v3's core names, but for its boolean.
_ASDF_NUMERIC = {("bool8" if n == "bool" else n): n for n in CORE_NUMERIC_NAMES}

# ASDF compression label -> (v2 numcodecs config, v3 codec document)
_CODECS = {
    "zlib": ({"id": "zlib", "level": 1}, {"name": "numcodecs.zlib", "configuration": {"level": 1}}),
    "bzp2": ({"id": "bz2", "level": 1}, {"name": "numcodecs.bz2", "configuration": {"level": 1}}),
}


@dataclass(frozen=True)
class AsdfBlock:
    """Where one ASDF block lies in its file.

    Attributes
    ----------
    offset
        Byte offset of the block magic.
    data_offset
        Byte offset of the (possibly compressed) data.
    used_size
        Bytes of data stored (compressed size).
    data_size
        Bytes of data once decompressed.
    compression
        The 4-letter compression label (``"zlib"``, ``"bzp2"``, ``"lz4"``...) or
        ``None``.
    streamed
        Whether this is a streamed block (data runs to the end of the file).
    """

    offset: int
    data_offset: int
    used_size: int
    data_size: int
    compression: str | None
    streamed: bool


def _open(path: str, storage_options: dict[str, Any] | None) -> BinaryIO:
    if "://" in path and not path.startswith("file://"):
        import fsspec

        return fsspec.open(path, "rb", **(storage_options or {})).open()
    if path.startswith("file://"):
        path = path[len("file://") :]
    return open(path, "rb")


def _find_first_block(f: BinaryIO) -> int | None:
    # The tree is UTF-8 text, in which b"\xd3BLK" cannot occur (0xd3 must be
    # followed by a continuation byte), so the first match is the first block.
    f.seek(0)
    pos, tail = 0, b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return None
        buf = tail + chunk
        i = buf.find(BLOCK_MAGIC)
        if i >= 0:
            return pos - len(tail) + i
        tail = buf[-3:]
        pos += len(chunk)


def read_asdf_blocks(
    path_or_file: str | os.PathLike[str] | BinaryIO,
    *,
    storage_options: dict[str, Any] | None = None,
) -> list[AsdfBlock]:
    """The blocks of an ASDF file, in order (block ``i`` is ``source: i``).

    Only block headers are read: one seek and 54 bytes per block.

    Parameters
    ----------
    path_or_file
        A local path, an fsspec URL, or a binary file object.
    storage_options
        fsspec options for URLs.
    """
    own = not hasattr(path_or_file, "read")
    f = _open(os.fspath(path_or_file), storage_options) if own else path_or_file  # type: ignore[arg-type]
    try:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        pos = _find_first_block(f)
        blocks: list[AsdfBlock] = []
        while pos is not None and pos + 6 <= size:
            f.seek(pos)
            head = f.read(6)
            if head[:4] != BLOCK_MAGIC:
                break  # the block index (or padding) follows the last block
            (header_size,) = struct.unpack(">H", head[4:6])
            if header_size < _HEADER.size:
                raise MetadataError(f"ASDF block at {pos}: header of {header_size} bytes")
            header = f.read(header_size)
            flags, comp, allocated, used, data_size, _ = _HEADER.unpack(header[: _HEADER.size])
            data_offset = pos + 6 + header_size
            streamed = bool(flags & _STREAMED)
            label = comp.rstrip(b"\0").decode("ascii", "replace") or None
            if streamed:
                used = data_size = size - data_offset
            blocks.append(AsdfBlock(pos, data_offset, used, data_size, label, streamed))
            if streamed:
                break
            pos = data_offset + allocated
        return blocks
    finally:
        if own:
            f.close()


# -- tree -> attributes ---------------------------------------------------------------
_DROP = object()


def _is_tagged(node: Any) -> bool:
    return getattr(node, "_tag", None) is not None


def is_ndarray_node(node: Any) -> bool:
    """Whether a raw tree node is an ASDF ``core/ndarray``."""
    tag = getattr(node, "_tag", None)
    return isinstance(tag, str) and tag.startswith(NDARRAY_TAG_PREFIX)


def _holds_array(node: Any) -> bool:
    if is_ndarray_node(node):
        return True
    if isinstance(node, Mapping):
        return any(_holds_array(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(_holds_array(v) for v in node)
    return False


def json_compatible(node: Any) -> Any:
    """``node`` as plain JSON values, or ``_DROP`` where it is not JSON-compatible.

    Mappings keep their compatible members; a list with any incompatible item is
    dropped whole (so positions keep their meaning).
    """
    if _is_tagged(node):
        return _DROP
    if node is None or isinstance(node, (bool, str)):
        return node
    if isinstance(node, (int, np.integer)):
        return int(node)
    if isinstance(node, (float, np.floating)):
        return float(node) if math.isfinite(node) else _DROP
    if isinstance(node, Mapping):
        out = {}
        for k, v in node.items():
            if not isinstance(k, str):
                continue
            c = json_compatible(v)
            if c is not _DROP:
                out[k] = c
        return _DROP if node and not out else out
    if isinstance(node, (list, tuple)):
        items = [json_compatible(v) for v in node]
        return _DROP if any(i is _DROP for i in items) else items
    return _DROP


def tree_attributes(node: Any) -> dict[str, Any]:
    """The JSON-compatible members of a mapping that hold no arrays."""
    if not isinstance(node, Mapping):
        return {}
    out = {}
    for k, v in node.items():
        if not isinstance(k, str) or _holds_array(v):
            continue
        c = json_compatible(v)
        if c is not _DROP:
            out[k] = c
    return out


# -- metadata documents ------------------------------------------------------------
def _ndarray_dtype(node: Mapping[str, Any], where: str) -> np.dtype:
    datatype = node.get("datatype")
    order = ">" if node.get("byteorder", "little") == "big" else "<"
    if isinstance(datatype, str) and datatype in _ASDF_NUMERIC:
        dt = parse_data_type(_ASDF_NUMERIC[datatype], 3).dtype
    elif (
        isinstance(datatype, (list, tuple))
        and len(datatype) == 2
        and datatype[0]
        in (
            "ascii",
            "ucs4",
        )
    ):
        dt = np.dtype(f"{'S' if datatype[0] == 'ascii' else 'U'}{int(datatype[1])}")
    else:
        raise MetadataError(f"ASDF array {where!r}: data type {datatype!r} is not supported")
    return dt.newbyteorder(order) if dt.itemsize > 1 and dt.kind != "S" else dt


def _fill(dt: np.dtype, zarr_format: int) -> Any:
    """The default fill value (zero, False) in the format's JSON form."""
    data_type = parse_data_type(dt, zarr_format)
    return data_type.fill_to_json(data_type.default_fill(), zarr_format)


def _v3_data_type(dt: np.dtype, where: str) -> str:
    if dt.kind in "SU":
        raise MetadataError(
            f"ASDF array {where!r}: fixed-length string data types need zarr_format=2"
        )
    return parse_data_type(dt, 3).to_json_v3()


def _array_docs(
    zarr_format: int,
    dt: np.dtype,
    shape: tuple[int, ...],
    chunks: tuple[Any, ...],
    order: str,
    compressor: str | None,
    attrs: dict[str, Any],
    where: str,
) -> dict[str, Any]:
    rect = any(isinstance(c, list) for c in chunks)
    if zarr_format == 2:
        zarray = {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": [c if isinstance(c, list) else int(c) for c in chunks],
            "dtype": parse_data_type(dt, 2).to_json_v2(),
            "fill_value": None if dt.kind in "SU" else _fill(dt, 2),
            "order": order,
            "filters": None,
            "compressor": _CODECS[compressor][0] if compressor else None,
            "dimension_separator": ".",
        }
        docs: dict[str, Any] = {".zarray": zarray}
        if attrs:
            docs[".zattrs"] = attrs
        return docs
    if rect:
        grid = {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": list(chunks)},
        }
    else:
        grid = {"name": "regular", "configuration": {"chunk_shape": [int(c) for c in chunks]}}
    codecs: list[dict[str, Any]] = []
    if order == "F" and len(shape) > 1:
        codecs.append(
            {"name": "transpose", "configuration": {"order": list(range(len(shape)))[::-1]}}
        )
    bytes_codec: dict[str, Any] = {"name": "bytes"}
    if dt.itemsize > 1:
        bytes_codec["configuration"] = {"endian": "big" if dt.byteorder == ">" else "little"}
    codecs.append(bytes_codec)
    if compressor:
        codecs.append(_CODECS[compressor][1])
    zarr_json = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": _v3_data_type(dt, where),
        "chunk_grid": grid,
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _fill(dt, 3),
        "codecs": codecs,
        "attributes": attrs,
    }
    return {"zarr.json": zarr_json}


def _group_docs(zarr_format: int, attrs: dict[str, Any]) -> dict[str, Any]:
    if zarr_format == 2:
        docs: dict[str, Any] = {".zgroup": {"zarr_format": 2}}
        if attrs:
            docs[".zattrs"] = attrs
        return docs
    return {"zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": attrs}}


def _chunk_key(zarr_format: int, coords: tuple[int, ...]) -> str:
    if zarr_format == 2:
        return ".".join(map(str, coords)) if coords else "0"
    return "c/" + "/".join(map(str, coords)) if coords else "c"


def _layout(shape: tuple[int, ...], strides: Any, itemsize: int, where: str) -> str:
    if strides is None or len(shape) <= 1:
        return "C"
    strides = tuple(int(s) for s in strides)
    c_strides, f_strides = [], []
    acc = itemsize
    for n in reversed(shape):
        c_strides.insert(0, acc)
        acc *= n
    acc = itemsize
    for n in shape:
        f_strides.append(acc)
        acc *= n
    if strides == tuple(c_strides):
        return "C"
    if strides == tuple(f_strides):
        return "F"
    raise MetadataError(
        f"ASDF array {where!r}: strides {list(strides)} are neither C- nor F-contiguous"
    )


class AsdfStore(ReferenceStore):
    """An ASDF file's ndarrays as a read-only Zarr hierarchy.

    Each ndarray of the tree is a Zarr array at its path in the tree, whose
    chunks are byte ranges of the file (see the module notes for the layout,
    attributes and the compressions that map to Zarr codecs). Reads go through
    :class:`~cuzarr.storage.reference.ReferenceStore`: local files with
    ``pread``-style range reads, URLs through fsspec.

    Parameters
    ----------
    path
        The ASDF file: a local path or an fsspec URL.
    zarr_format
        Present the hierarchy as Zarr v3 (default) or v2 metadata.
    chunk_rows
        Split each uncompressed, C-ordered block into chunks of this many rows
        along the first axis (a rectilinear grid when it does not divide the
        first dimension). ``None``: one chunk per array.
    on_unsupported
        ``"raise"`` (default): an array this store cannot present (an lz4 block,
        a structured data type, odd strides) raises :class:`MetadataError`;
        ``"skip"``: such arrays are left out (listed in :attr:`skipped`).
    storage_options
        fsspec options when ``path`` is a URL.

    Attributes
    ----------
    arrays
        Tree path -> Zarr array path of every array presented.
    skipped
        Tree path -> reason, for arrays left out with ``on_unsupported="skip"``.

    Examples
    --------
    >>> store = AsdfStore("data.asdf")  # doctest: +SKIP
    >>> cuzarr.open_array(store, path="x", mode="r")[:5]  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        zarr_format: int = 3,
        chunk_rows: int | None = None,
        on_unsupported: str = "raise",
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        if zarr_format not in (2, 3):
            raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
        if on_unsupported not in ("raise", "skip"):
            raise ValueError(f"on_unsupported must be 'raise' or 'skip', got {on_unsupported!r}")
        if chunk_rows is not None and int(chunk_rows) < 1:
            raise ValueError(f"chunk_rows must be a positive int, got {chunk_rows!r}")
        try:
            import asdf.util
        except ImportError as e:  # pragma: no cover - asdf is an optional dependency
            raise ImportError("AsdfStore needs the 'asdf' package (pip install asdf)") from e
        self.asdf_path = os.fspath(path)
        is_url = "://" in self.asdf_path and not self.asdf_path.startswith("file://")
        self._target = (
            self.asdf_path if is_url else os.path.abspath(self.asdf_path.removeprefix("file://"))
        )
        self.zarr_format = zarr_format
        self.chunk_rows = None if chunk_rows is None else int(chunk_rows)
        self.on_unsupported = on_unsupported
        self._storage_options = dict(storage_options or {})
        with _open(self._target, self._storage_options) as f:
            tree = asdf.util.load_yaml(f, tagged=True)
            self._blocks = read_asdf_blocks(f)
        self._external_blocks: dict[str, list[AsdfBlock]] = {}
        self.arrays: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        refs: dict[str, Any] = {}
        self._walk(tree, "", refs)
        self._references = refs
        remote = self._target.split("://", 1)[0] if is_url else None
        super().__init__(refs, remote_protocol=remote, remote_options=self._storage_options)

    def __repr__(self) -> str:
        return f"AsdfStore({self.asdf_path!r})"

    def to_references(self) -> dict[str, Any]:
        """The key map as a kerchunk version-1 reference set (JSON-serializable)."""
        refs: dict[str, Any] = {}
        for k, v in self._references.items():
            if isinstance(v, bytes):
                refs[k] = "base64:" + base64.b64encode(v).decode()
            elif isinstance(v, dict):
                refs[k] = json.dumps(v)
            else:
                refs[k] = v
        return {"version": 1, "refs": refs}

    # -- tree walk ---------------------------------------------------------------
    def _walk(self, node: Any, path: str, refs: dict[str, Any]) -> None:
        prefix = f"{path}/" if path else ""
        attrs = tree_attributes(node)
        for k, v in _doc_items(_group_docs(self.zarr_format, attrs)):
            refs[prefix + k] = v
        items = node.items() if isinstance(node, Mapping) else enumerate(node)
        for key, child in items:
            name = str(key)
            if not name or "/" in name or name in (".", "..") or not _holds_array(child):
                continue
            child_path = prefix + name
            if is_ndarray_node(child):
                try:
                    self._add_array(child, child_path, attrs, refs)
                except MetadataError as e:
                    if self.on_unsupported == "raise":
                        raise
                    self.skipped[child_path] = str(e)
            else:
                self._walk(child, child_path, refs)

    def _block_for(self, source: Any, where: str) -> tuple[str, AsdfBlock]:
        if isinstance(source, int):
            if source < 0:  # counted from the end (the streamed block is -1)
                source += len(self._blocks)
            if not 0 <= source < len(self._blocks):
                raise MetadataError(f"ASDF array {where!r}: block {source} is not in the file")
            return self._target, self._blocks[source]
        if isinstance(source, str):  # an exploded block in a file next to this one
            if "://" in source and not source.startswith("file://"):
                target = source
            elif "://" in self._target:
                target = self._target.rsplit("/", 1)[0] + "/" + source
            else:
                target = os.path.join(os.path.dirname(self._target), source.removeprefix("file://"))
            blocks = self._external_blocks.get(target)
            if blocks is None:
                blocks = read_asdf_blocks(target, storage_options=self._storage_options)
                self._external_blocks[target] = blocks
            if not blocks:
                raise MetadataError(f"ASDF array {where!r}: {source!r} holds no block")
            return target, blocks[0]
        raise MetadataError(f"ASDF array {where!r}: unsupported source {source!r}")

    def _add_array(
        self, node: Mapping[str, Any], path: str, attrs: dict[str, Any], refs: dict[str, Any]
    ) -> None:
        dt = _ndarray_dtype(node, path)
        if "data" in node and "source" not in node:
            self._add_inline(node, dt, path, attrs, refs)
            return
        zf = self.zarr_format
        target, block = self._block_for(node.get("source"), path)
        raw_shape = list(node.get("shape", []))
        offset = int(node.get("offset", 0))
        if raw_shape and raw_shape[0] == "*":
            rest = int(np.prod([int(n) for n in raw_shape[1:]], dtype=np.int64)) * dt.itemsize
            raw_shape[0] = (block.data_size - offset) // rest if rest else 0
        shape = tuple(int(n) for n in raw_shape)
        order = _layout(shape, node.get("strides"), dt.itemsize, path)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        comp = block.compression
        _check_block(path, block, offset, nbytes)
        edges, chunks = _row_chunks(shape, self.chunk_rows if comp is None else None, order)
        docs = _array_docs(zf, dt, shape, chunks, order, comp, attrs, path)
        for k, v in _doc_items(docs):
            refs[f"{path}/{k}"] = v
        self.arrays[path] = path
        if nbytes == 0:
            return
        ndim = len(shape)
        if comp is not None:
            refs[f"{path}/{_chunk_key(zf, (0,) * ndim)}"] = [
                target,
                block.data_offset,
                block.used_size,
            ]
            return
        row_bytes = nbytes // shape[0] if ndim else nbytes
        start = block.data_offset + offset
        if not ndim:
            refs[f"{path}/{_chunk_key(zf, ())}"] = [target, start, nbytes]
            return
        for i, n in enumerate(edges):
            key = _chunk_key(zf, (i,) + (0,) * (ndim - 1))
            refs[f"{path}/{key}"] = [target, start, n * row_bytes]
            start += n * row_bytes

    def _add_inline(
        self,
        node: Mapping[str, Any],
        dt: np.dtype,
        path: str,
        attrs: dict[str, Any],
        refs: dict[str, Any],
    ) -> None:
        """An array whose values are in the tree itself: one chunk of its bytes."""
        zf = self.zarr_format
        data = np.asarray(node["data"], dtype=dt)
        shape = tuple(int(n) for n in node.get("shape", data.shape))
        data = data.reshape(shape)
        chunks = tuple(max(1, n) for n in shape)
        docs = _array_docs(zf, dt, shape, chunks, "C", None, attrs, path)
        for k, v in _doc_items(docs):
            refs[f"{path}/{k}"] = v
        if data.size:
            refs[f"{path}/{_chunk_key(zf, (0,) * len(shape))}"] = np.ascontiguousarray(
                data
            ).tobytes()
        self.arrays[path] = path


def _check_block(path: str, block: AsdfBlock, offset: int, nbytes: int) -> None:
    """Refuse an array its block cannot serve as Zarr chunks: a compression no
    codec reads, a compressed block shared with other bytes, a block too short."""
    comp = block.compression
    if comp is not None:
        if comp not in _CODECS:
            raise MetadataError(
                f"ASDF array {path!r}: block compression {comp!r} has no matching Zarr "
                f"codec (supported: uncompressed, {', '.join(sorted(_CODECS))}); "
                + (
                    "asdf frames lz4 as 4-byte big-endian lengths before each LZ4 block, "
                    "which numcodecs' LZ4 cannot read"
                    if comp == "lz4"
                    else "read it with asdf"
                )
            )
        if offset or block.data_size != nbytes:
            raise MetadataError(
                f"ASDF array {path!r}: the {comp} block holds {block.data_size} bytes, not "
                f"just this array's {nbytes}; a compressed block can only map whole"
            )
    elif offset + nbytes > block.used_size:
        raise MetadataError(
            f"ASDF array {path!r}: needs {offset + nbytes} bytes, block has {block.used_size}"
        )


def _row_chunks(
    shape: tuple[int, ...], rows: int | None, order: str
) -> tuple[list[int], tuple[Any, ...]]:
    """The first dimension's chunk edges and the chunk shape: chunks of ``rows``
    rows (a C-order uncompressed block, ``rows`` set), else one chunk."""
    ndim = len(shape)
    if rows is not None and order == "C" and ndim >= 1 and shape[0] > rows:
        edges = [rows] * (shape[0] // rows) + ([shape[0] % rows] if shape[0] % rows else [])
        first: Any = rows if shape[0] % rows == 0 else edges
        return edges, (first, *(max(1, n) for n in shape[1:]))
    return ([shape[0]] if ndim else []), tuple(max(1, n) for n in shape)


def _doc_items(docs: dict[str, Any]) -> list[tuple[str, Any]]:
    return list(docs.items())
