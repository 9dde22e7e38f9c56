"""The ``cuzarr`` command line: info, tree, copy (rechunk/convert), consolidate, bench."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["main"]


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n}"  # pragma: no cover


class Progress:
    """A small stderr progress bar (no dependency); silent when not a terminal
    unless ``force`` is set."""

    def __init__(self, total: int, label: str, force: bool = False) -> None:
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self.enabled = force or sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            frac = self.done / self.total
            bar = "#" * int(30 * frac)
            rate = self.done / max(1e-9, now - self.t0)
            sys.stderr.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total} ({rate:.1f}/s)")
            if self.done >= self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _stored_bytes(node: Any) -> int:
    """Bytes stored under a node (files on disk, or values in other stores)."""
    from cuzarr.core.sync import sync
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


class _Hierarchy:
    """The members below a group, as the store lists them, next to what the
    group's consolidated metadata (a snapshot, possibly stale) says.

    Parameters
    ----------
    members : list of (str, node)
        Every node below the group (relative path, ``Array`` or ``Group``).
    consolidated : dict or None
        The group's own consolidated metadata (relative path -> metadata), if any.
    from_consolidated : bool
        The store could not be listed (an HTTP server without index pages), so
        ``members`` come from the consolidated metadata instead.
    """

    def __init__(
        self,
        members: list[tuple[str, Any]],
        consolidated: dict[str, Any] | None,
        from_consolidated: bool,
    ) -> None:
        self.members = members
        self.consolidated = consolidated
        self.from_consolidated = from_consolidated

    def differences(self) -> tuple[list[str], list[str], list[str]]:
        """Paths the consolidated metadata lists but the store lacks, paths it
        lacks, and paths whose metadata changed since it was written."""
        if self.consolidated is None or self.from_consolidated:
            return [], [], []
        live = {p: _documents(n.metadata) for p, n in self.members}
        snap = {p: _documents(m) for p, m in self.consolidated.items()}
        gone = sorted(set(snap) - set(live))
        new = sorted(set(live) - set(snap))
        changed = sorted(p for p in set(live) & set(snap) if live[p] != snap[p])
        return gone, new, changed

    def status(self) -> str | None:
        """``None`` (no consolidated metadata), ``"current"``, ``"stale"``, or
        ``"unverified"`` (the store cannot be listed to compare it with)."""
        if self.consolidated is None:
            return None
        if self.from_consolidated:
            return "unverified"
        return "stale" if any(self.differences()) else "current"

    def notes(self, where: str, done: str = "shown") -> list[str]:
        """Lines for stderr saying where the members came from, and what is stale
        (``done``: what the command did with the store's members)."""
        if self.from_consolidated:
            return [
                f"note: the store cannot be listed: the members of {where} come from its "
                "consolidated metadata, which may be stale"
            ]
        gone, new, changed = self.differences()
        if not (gone or new or changed):
            return []
        parts = [
            f"{label}: {_some(paths)}"
            for label, paths in (("gone", gone), ("new", new), ("changed", changed))
            if paths
        ]
        return [
            f"note: the consolidated metadata of {where} is stale ({'; '.join(parts)}); "
            f"{done} is what the store holds (`cuzarr consolidate` rewrites it)"
        ]


def _some(paths: list[str], n: int = 3) -> str:
    shown = ", ".join(paths[:n])
    return shown + (f" and {len(paths) - n} more" if len(paths) > n else "")


def _documents(meta: Any) -> dict[str, Any]:
    """A node's metadata documents as JSON values, for comparing a stored node
    with its entry in consolidated metadata. Entries there leave out a group's
    own consolidated metadata, so it is left out of both sides."""
    docs = {name: json.loads(raw) for name, raw in meta.to_documents().items()}
    for doc in docs.values():
        if isinstance(doc, dict):
            doc.pop("consolidated_metadata", None)
    return docs


def _hierarchy(group: Any) -> _Hierarchy:
    """What is below ``group`` (a ``Group``): the store listing is the truth, since
    consolidated metadata is a snapshot nothing keeps up to date; only a store
    that cannot be listed is read through its consolidated metadata."""
    from cuzarr.core.group import AsyncGroup, Group
    from cuzarr.core.sync import sync

    ag = group.async_group
    snapshot = sync(AsyncGroup.open(ag.store_path, ag.zarr_format)).consolidated
    try:
        listed = Group(AsyncGroup(ag.metadata, ag.store_path)).members(max_depth=None)
    except (OSError, NotImplementedError):
        if snapshot is None:
            raise
        listed = ()
    if snapshot is not None and not listed and not _lists_itself(ag):
        cons = Group(AsyncGroup(ag.metadata, ag.store_path, snapshot))
        return _Hierarchy(list(cons.members(max_depth=None)), snapshot, True)
    return _Hierarchy(list(listed), snapshot, False)


def _lists_itself(ag: Any) -> bool:
    """Whether listing the group's directory shows its own metadata document (a
    store that cannot list, such as a plain HTTP server, shows nothing)."""
    from cuzarr.core.sync import sync

    async def names() -> list[str]:
        return [n async for n in ag.store.list_dir(ag.path)]

    try:
        found = sync(names())
    except (OSError, NotImplementedError):
        return False
    return ("zarr.json" if ag.zarr_format == 3 else ".zgroup") in found


def _node_name(node: Any) -> str:
    return f"/{node.path}" if node.path else "/"


def cmd_info(args: argparse.Namespace) -> int:
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
            # JSON: the fill value as the metadata encodes it ("NaN", base64 bytes...)
            "fill_value": node.metadata.to_dict().get("fill_value")
            if args.json
            else repr(node.fill_value),
            "nchunks": node.nchunks,
            "nchunks_initialized": node.nchunks_initialized,
            "nbytes": node.nbytes,
            "stored_bytes": stored,
            "compression_ratio": round(node.nbytes / stored, 3) if stored else None,
            "codecs": json.loads(node.info.codecs),
            "attributes": dict(node.attrs),
        }
    else:
        h = _hierarchy(node)
        members = h.members
        notes = h.notes(_node_name(node))
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
            if k == "stored_bytes" or k == "nbytes":
                v = f"{v} ({_human(v)})"
            print(f"{k:<{width}} : {v}")
    for line in notes:
        print(line, file=sys.stderr)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    import cuzarr
    from cuzarr.core.group import AsyncGroup, Group

    group = cuzarr.open_group(args.store, mode="r", path=args.path, use_consolidated=False)
    h = _hierarchy(group)
    ag = group.async_group
    # rendered from the members found (no second listing of the store)
    view = Group(AsyncGroup(ag.metadata, ag.store_path, {p: n.metadata for p, n in h.members}))
    print(view.tree())
    for line in h.notes(_node_name(group)):
        print(line, file=sys.stderr)
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    import cuzarr

    g = cuzarr.consolidate_metadata(args.store, path=args.path)
    print(f"consolidated metadata of {len(g.members(max_depth=None))} nodes")
    g.store.close()  # a zip file: compacted to one entry per key
    return 0


def _parse_ints(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        out = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or any(v == 0 or v < -1 for v in out):
        raise ValueError(
            f"expected positive integers like 256,256 (-1: the whole extent), got {text!r}"
        )
    return out


def _parse_shards(text: str | None) -> tuple[int, ...] | str | None:
    """``--shards``: ``None`` (keep the source's), ``"none"`` (no sharding) or a shape."""
    if text is not None and text.strip().lower() in ("none", "null"):
        return "none"
    try:
        return _parse_ints(text)
    except ValueError:
        raise ValueError(
            f"--shards takes positive integers like 4096,4096 (-1: one shard along the "
            f"dimension) or none (no sharding), got {text!r}"
        ) from None


def _parse_compressor(text: str | None, zarr_format: int) -> Any:
    if text is None:
        return "source"
    name, _, arg = text.partition(":")
    name = name.lower()
    if name in ("none", "null", ""):
        return None
    import numcodecs

    try:
        if name == "zstd":
            level = int(arg or 1)
            if not -131072 <= level <= 22:
                raise ValueError
            return numcodecs.Zstd(level=level)
        if name == "gzip":
            level = int(arg or 5)
            if not 0 <= level <= 9:
                raise ValueError
            return numcodecs.GZip(level=level)
    except ValueError:
        raise ValueError(
            f"compressor {text!r}: the level must be an integer (zstd -131072..22, gzip 0..9)"
        ) from None
    if name == "blosc":
        from numcodecs import blosc

        cname = arg or "lz4"
        if cname not in blosc.list_compressors():
            raise ValueError(
                f"compressor {text!r}: blosc compressors are {', '.join(blosc.list_compressors())}"
            )
        return numcodecs.Blosc(cname=cname, clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    raise ValueError(
        f"unknown compressor {text!r} (zstd[:level], gzip[:level], blosc[:cname], none)"
    )


# Checksums are no compression: ``--compressor`` replaces the compressors and
# keeps these, so a copy stays as well guarded as its source.
_CHECKSUMS = frozenset(
    {
        "crc32c",
        "numcodecs.crc32",
        "numcodecs.crc32c",
        "numcodecs.adler32",
        "numcodecs.fletcher32",
        "numcodecs.jenkins_lookup3",
    }
)
# Configuration keys of numcodecs filters that hold a data type.
_DTYPE_KEYS = ("dtype", "astype", "encode_dtype", "decode_dtype")
# v2 filters that encode objects: in v3 the serializer does that, chosen by the data type.
_OBJECT_CODEC_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle"})


class _SourceCodecs:
    """A v3 array's codecs, split around its array->bytes codec.

    ``aa``/``ab``/``bb`` encode one chunk (one inner chunk when sharded);
    ``wrap_aa``/``wrap_bb`` are the codecs outside a sharding codec (whole shards);
    ``sharding`` is that codec, or ``None``.
    """

    def __init__(self, codecs: Sequence[Any]) -> None:
        from cuzarr.codecs.base import ArrayBytesCodec
        from cuzarr.codecs.sharding import ShardingCodec

        def split(cs: Sequence[Any]) -> tuple[tuple[Any, ...], Any, tuple[Any, ...]]:
            i = next(i for i, c in enumerate(cs) if isinstance(c, ArrayBytesCodec))
            return tuple(cs[:i]), cs[i], tuple(cs[i + 1 :])

        aa, ab, bb = split(codecs)
        self.sharding = ab if isinstance(ab, ShardingCodec) else None
        if self.sharding is not None:
            self.wrap_aa, self.wrap_bb = aa, bb
            self.aa, self.ab, self.bb = split(self.sharding.codecs)
        else:
            self.wrap_aa, self.wrap_bb = (), ()
            self.aa, self.ab, self.bb = aa, ab, bb


def _grid_spec(grid: Any) -> tuple[Any, ...]:
    """A chunk grid as ``create_array`` takes it: sizes, or per-dimension edges."""
    from cuzarr.metadata.chunk_grid import RegularChunkGrid

    return tuple(grid.chunk_shape if isinstance(grid, RegularChunkGrid) else grid.chunk_shapes)


def _fmt_shape(spec: Sequence[Any]) -> str:
    return ",".join(str(list(s)) if isinstance(s, tuple) else str(s) for s in spec)


def _holds_whole_chunks(shards: Sequence[Any], chunks: Sequence[Any]) -> bool:
    """Whether every shard edge is a multiple of the (regular) chunk size."""
    for s, c in zip(shards, chunks, strict=True):
        if isinstance(c, tuple):
            return False  # variable inner chunks: sharding needs regular ones
        if any(e % c for e in (s if isinstance(s, tuple) else (s,))):
            return False
    return True


def _v2_filters_as_v3(meta: Any) -> tuple[list[Any], list[Any]]:
    """A v2 array's memory order and filters as v3 codecs: (array->array codecs,
    bytes->bytes codecs to run before the compressor)."""
    from cuzarr.codecs.base import ArrayArrayCodec, BytesBytesCodec
    from cuzarr.codecs.lazy_numcodecs import numcodecs
    from cuzarr.codecs.numcodecs_bridge import as_v3_codec
    from cuzarr.codecs.transpose import TransposeCodec

    aa: list[Any] = []
    bb: list[Any] = []
    if meta.order == "F" and meta.ndim > 1:
        # v2 "F" stores each chunk in Fortran order: v3 says it with a transpose
        aa.append(TransposeCodec(tuple(range(meta.ndim - 1, -1, -1))))
    for f in meta.filters or ():
        if f.codec_id in _OBJECT_CODEC_IDS:
            continue
        conf = f.get_config()
        if any(isinstance(conf.get(k), str) and conf[k].startswith(">") for k in _DTYPE_KEYS):
            # A numcodecs filter on big-endian values reads back wrong in v3 (in
            # zarr-python as in cuzarr): the same filter on the values in little
            # endian; the serializer keeps the stored byte order.
            conf.update(
                {k: "<" + conf[k][1:] for k in _DTYPE_KEYS if str(conf.get(k, "")).startswith(">")}
            )
            f = numcodecs().get_codec(conf)
        c = as_v3_codec(f)
        if isinstance(c, ArrayArrayCodec):
            aa.append(c)
        elif isinstance(c, BytesBytesCodec):
            bb.append(c)
    return aa, bb


def _v3_codecs_as_v2(meta: Any, parts: _SourceCodecs) -> tuple[str, list[Any], list[Any]]:
    """A v3 array's chunk codecs as v2 (order, filters, compressors).

    A leading transpose that reverses the axes is v2's order "F"; numcodecs
    filters stay filters. Other array->array codecs (another transpose,
    scale_offset, cast_value) have no v2 form: the values are stored as they read.
    Checksums have no place after a v2 compressor and are left out, and so is a
    serializer other than ``bytes`` or vlen (v2 has the data type's own).
    """
    from cuzarr.codecs.numcodecs_bridge import _NumcodecsMixin, as_numcodec
    from cuzarr.codecs.transpose import TransposeCodec

    aa = list(parts.aa)
    order = "C"
    if (
        aa
        and meta.ndim > 1
        and isinstance(aa[0], TransposeCodec)
        and tuple(aa[0].order) == tuple(range(meta.ndim - 1, -1, -1))
    ):
        order, aa = "F", aa[1:]
    filters = [as_numcodec(c) for c in aa if isinstance(c, _NumcodecsMixin)]
    compressors = [as_numcodec(c) for c in parts.bb if c.name not in _CHECKSUMS]
    return order, filters, compressors


def destination_metadata(
    src: Any,
    *,
    zarr_format: int | None = None,
    chunks: Sequence[int] | None = None,
    shards: Sequence[int] | str | None = None,
    compressor: Any = "source",
) -> Any:
    """The metadata of a copy of ``src``, checked, without writing anything.

    Everything the options do not change is kept: filters, serializer, memory
    order (v2 ``order``; a reversing ``transpose`` across formats), byte order,
    chunk key encoding / dimension separator, fill value, attributes, dimension
    names, compressors and checksums, and the sharding layout with its index
    codecs and the codecs around it. A copy that changes nothing takes the
    source's metadata as it is. Across formats, what the other format cannot say
    is left out where the data reads the same without it (see
    ``_v3_codecs_as_v2``), and xarray's missing-data value is converted
    (``_convert_xarray_fill``).

    Parameters
    ----------
    src : Array
        The source array.
    zarr_format : {2, 3}, optional
        The destination's format (default: the source's).
    chunks : sequence of int, optional
        New (inner) chunk shape; ``-1`` spans a whole dimension. Default: the source's.
    shards : sequence of int or "none", optional
        New shard shape (``-1``: one shard along the dimension), or ``"none"`` for
        no sharding. Default: the source's sharding, which must then hold whole
        chunks of ``chunks``.
    compressor : codec, None or "source"
        Replaces the source's compressors (checksums stay); ``None``: no
        compression; ``"source"``: keep them.

    Returns
    -------
    ArrayMetadata

    Raises
    ------
    ValueError
        If the options do not fit the array (``--shards`` for v2, shards that do
        not hold whole chunks, more compressors than v2 takes, ...).
    """
    import copy

    from cuzarr.codecs.bytes_codec import BytesCodec
    from cuzarr.codecs.numcodecs_bridge import as_v3_codec
    from cuzarr.codecs.sharding import ShardingCodec
    from cuzarr.core.build import build_array_metadata
    from cuzarr.metadata.array import check_sharded_edges
    from cuzarr.metadata.dtypes import DataType

    meta = src.metadata
    fmt = zarr_format or meta.zarr_format
    if shards not in (None, "none") and fmt != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    parts = _SourceCodecs(meta.codecs) if meta.zarr_format == 3 else None
    sharding = parts.sharding if parts is not None else None
    src_chunks = tuple(sharding.chunk_shape) if sharding else _grid_spec(meta.chunk_grid)
    src_shards = _grid_spec(meta.chunk_grid) if sharding else None

    new_chunks = src_chunks
    if chunks is not None:  # -1: the whole dimension
        new_chunks = tuple(
            max(1, n) if c == -1 else c for c, n in zip(chunks, meta.shape, strict=True)
        )
    if fmt == 2 or shards == "none":
        new_shards = None
    elif shards is not None:
        new_shards = tuple(shards)  # type: ignore[arg-type]
    elif src_shards is not None:
        new_shards = src_shards
        if not _holds_whole_chunks(src_shards, new_chunks):
            raise ValueError(
                f"its shards ({_fmt_shape(src_shards)}) do not hold whole chunks of "
                f"{_fmt_shape(new_chunks)}: give --shards a multiple of the chunks, or "
                "--shards none for no sharding"
            )
    else:
        new_shards = None

    same_format = fmt == meta.zarr_format
    unchanged = (new_chunks, new_shards) == (src_chunks, src_shards)
    if same_format and compressor == "source" and unchanged:
        # The source's own metadata, verbatim: also extension fields cuzarr does
        # not know, which may describe the layout (so they go when it changes).
        return meta.evolve(attributes=copy.deepcopy(dict(meta.attributes)))
    if parts is not None and parts.wrap_aa:
        raise ValueError(
            "it has array->array codecs outside its sharding codec, which a copy "
            "keeps only as they are: copy it without --chunks, --shards, --compressor "
            "and --zarr-format"
        )

    attrs = copy.deepcopy(dict(meta.attributes))
    fill = meta.fill_value
    if not same_format:
        fill, attrs = _convert_xarray_fill(src, fmt, fill, attrs)
    dtype = meta.dtype
    kw: dict[str, Any] = {}
    if fmt == 3:
        if parts is not None:
            aa, ab, bb = list(parts.aa), parts.ab, list(parts.bb)
            cke: Any = meta.chunk_key_encoding
        else:
            aa, bb = _v2_filters_as_v3(meta)
            ab = "auto"
            if meta.compressor is not None:
                bb.append(as_v3_codec(meta.compressor))
            if dtype.dtype.byteorder == ">" and dtype.has_endianness and dtype.dtype.fields is None:
                ab = BytesCodec("big")  # the byte order the v2 data type kept
            cke = {"name": "default", "separator": meta.chunk_key_encoding.separator}
        if compressor != "source":
            checksums = [c for c in bb if c.name in _CHECKSUMS]
            bb = [*([] if compressor is None else [compressor]), *checksums]
        if new_shards is None and parts is not None:
            bb.extend(parts.wrap_bb)  # whole-shard codecs now see whole chunks
        kw.update(filters=aa or None, serializer=ab, compressors=bb or None, chunk_key_encoding=cke)
    else:
        if parts is None:
            order, filters = meta.order, list(meta.filters or ())
            comps = [meta.compressor] if meta.compressor is not None else []
        else:
            order, filters, comps = _v3_codecs_as_v2(meta, parts)
            if (
                isinstance(parts.ab, BytesCodec)
                and parts.ab.endian == "big"
                and dtype.has_endianness
                and dtype.dtype.fields is None
            ):
                dtype = DataType(dtype.kind, dtype.dtype.newbyteorder(">"), dtype.v3_name)
        if compressor != "source":
            comps = [] if compressor is None else [compressor]
        if len(comps) > 1:
            raise ValueError(
                f"a Zarr v2 array takes one compressor, and it has {len(comps)} "
                f"({', '.join(c.codec_id for c in comps)}): choose one with --compressor"
            )
        kw.update(
            filters=filters or None,
            compressors=comps or None,
            order=order,
            dimension_separator=meta.chunk_key_encoding.separator,
        )
    names = meta.dimension_names
    if names is not None and fmt == 3:
        attrs.pop("_ARRAY_DIMENSIONS", None)  # v2's way of naming them: v3 has its own
    new = build_array_metadata(
        shape=meta.shape,
        dtype=dtype,
        chunks=new_chunks,
        shards=new_shards,
        fill_value=fill,
        zarr_format=fmt,
        attributes=attrs,
        dimension_names=names,
        **kw,
    )
    if new_shards is not None and sharding is not None:
        # create_array makes the default index (bytes + crc32c, at the end):
        # the source's index codecs and place, and its whole-shard codecs, stay.
        made = new.codecs[0]
        resharded = ShardingCodec(
            made.chunk_shape, made.codecs, sharding.index_codecs, sharding.index_location
        )
        new = new.evolve(codecs=(resharded, *parts.wrap_bb))  # type: ignore[union-attr]
        pipeline = new.make_pipeline()
        check_sharded_edges(new, pipeline)
        new = new.evolve(codecs=tuple(pipeline.codecs))
    return new


def copy_array(
    src: Any,
    dst_store: Any,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    chunks: Sequence[int] | None = None,
    shards: Sequence[int] | str | None = None,
    compressor: Any = "source",
    overwrite: bool = False,
    max_block_bytes: int = 64 << 20,
    progress: bool = False,
    metadata: Any = None,
) -> Any:
    """Copy (and rechunk/convert) ``src`` into a new array, block by block.

    Parameters
    ----------
    src : Array
        The source array.
    dst_store : store-like
        Where the copy goes (a path, URL or ``Store``).
    path : str, optional
        The copy's path inside ``dst_store``.
    zarr_format, chunks, shards, compressor
        As :func:`destination_metadata`, which decides the copy's metadata
        (everything they do not change is kept).
    overwrite : bool
        Replace what is at the destination.
    max_block_bytes : int
        Memory per copy step (at least one destination shard or chunk).
    progress : bool
        Show a progress bar on a terminal.
    metadata : ArrayMetadata, optional
        The copy's metadata, made (and checked) beforehand by
        :func:`destination_metadata`; the options above are then not used.

    Returns
    -------
    Array
        The copy.

    Notes
    -----
    Memory stays bounded: each step reads one block of whole destination
    shards/chunks (about ``max_block_bytes``) and writes it. Metadata is written
    first, and each chunk atomically, so an interrupted copy leaves a readable
    destination whose finished chunks are valid. The copy stores chunks equal to
    the fill value as the source's handle does (``write_empty_chunks``, which
    follows ``cuzarr.config`` unless set on it).
    """
    if metadata is None:
        metadata = destination_metadata(
            src, zarr_format=zarr_format, chunks=chunks, shards=shards, compressor=compressor
        )
    dst = _create_copy(src, dst_store, path, metadata, overwrite)
    _copy_data(src, dst, max_block_bytes, progress)
    return dst


def _copy_blocks(dst: Any, max_block_bytes: int) -> list[tuple[slice, ...]]:
    """Blocks of whole destination shards/chunks (regular or rectilinear), grown
    along leading axes while a block stays under the memory budget."""
    unit = dst.shards or dst.chunks
    # per dimension: where its shards/chunks start (their edges, for rectilinear)
    starts: list[list[int]] = []
    for n, u in zip(dst.shape, unit, strict=True):
        if isinstance(u, tuple):
            cuts = [0, *itertools.accumulate(u)]
            starts.append([c for c in cuts if c < n] or [0])
        else:
            starts.append(list(range(0, max(n, 1), u)))
    widest = [
        max(max(u) if isinstance(u, tuple) else u, 1) for u in unit
    ]  # bytes of a block are bounded with each dimension's widest unit
    group = [1] * len(starts)
    itemsize = max(1, dst.dtype.itemsize)
    for d in range(len(group)):
        while (
            group[d] < len(starts[d])
            and math.prod(w * g for w, g in zip(widest, group, strict=True)) * 2 * itemsize
            <= max_block_bytes
        ):
            group[d] = min(group[d] * 2, len(starts[d]))
    if not dst.shape:
        return [()]
    axes = []
    for d, n in enumerate(dst.shape):
        st = starts[d]
        edges = [*st[:: group[d]], n]
        axes.append([slice(a, b) for a, b in itertools.pairwise(edges) if a < b] or [slice(0, 0)])
    return list(itertools.product(*axes))


def _convert_xarray_fill(src: Any, fmt: int, fill: Any, attrs: dict[str, Any]) -> tuple[Any, dict]:
    """Keep what xarray masks across a format conversion: it takes a v2 array's
    ``fill_value`` as the missing-data value, and in v3 a ``_FillValue``
    attribute instead (:mod:`cuzarr.integrations.xarray_fill`). Only arrays xarray
    wrote (named dimensions) are converted; others keep fill value and attributes."""
    from cuzarr.integrations.xarray_fill import decode_fill_attr, encode_fill_attr

    if src.metadata.dimension_names is None:
        return fill, attrs
    dtype = np.dtype(src.dtype)
    if fmt == 2:
        if "_FillValue" not in attrs:
            # no missing-data value: a v2 fill value would become one (xarray
            # writes null there itself)
            return None, attrs
        value = decode_fill_attr(attrs["_FillValue"], dtype)
        try:
            np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            return None, attrs  # not xarray's encoding: the attribute stays as it was
        if isinstance(value, str) and dtype.kind not in "US":
            return None, attrs
        del attrs["_FillValue"]
        return value, attrs
    if fmt == 3 and fill is not None and "_FillValue" not in attrs:
        coded = encode_fill_attr(fill, dtype)
        if coded is not None:
            attrs["_FillValue"] = coded
    return fill, attrs


def _overlaps(src: Any, dst: Any, dst_path: str | None) -> bool:
    """Whether the destination is the source node, inside it, or holds it: in the
    same store, or (local directories) on the same files, however spelled
    (``a.zarr`` and ``a.zarr/inner``, a symlink)."""
    from cuzarr.storage import LocalStore
    from cuzarr.storage.common import make_store_path

    try:
        sp = make_store_path(dst, dst_path, mode="r")
    except Exception:
        return False
    if isinstance(sp.store, LocalStore) and isinstance(src.store, LocalStore):
        a = os.path.realpath(os.path.join(str(src.store.root), src.path))
        b = os.path.realpath(os.path.join(str(sp.store.root), sp.path))
        return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)
    if sp.store != src.store:
        return False
    a, b = src.path, sp.path
    return not a or not b or a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _check_destination_format(dst: Any, dst_path: str | None, fmt: int) -> None:
    """Refuse a node of one Zarr format inside a hierarchy of the other (readers
    of that hierarchy could not see it)."""
    import cuzarr
    from cuzarr.errors import NodeNotFoundError

    parts = [p for p in (dst_path or "").split("/") if p]
    for i in range(len(parts) - 1, -1, -1):
        parent = "/".join(parts[:i]) or None
        try:
            g = cuzarr.open_group(dst, path=parent, mode="r")
        except (NodeNotFoundError, FileNotFoundError):
            continue
        if g.zarr_format != fmt:
            raise ValueError(
                f"the destination {parent or '/'!r} is a Zarr v{g.zarr_format} group: a "
                f"v{fmt} node inside it would be invisible to its readers (use "
                f"--zarr-format {g.zarr_format})"
            )
        return


class CopyError(Exception):
    """A copy that failed after it began writing; the message names the destination."""


def _consolidated_groups(h: _Hierarchy) -> list[str]:
    """Relative paths of the copied groups (``""``: the copied group itself) that
    have consolidated metadata of their own, deepest first: the copy writes
    theirs once all data is there."""
    import cuzarr
    from cuzarr.core.sync import sync

    out = [""] if h.consolidated is not None else []
    for rel, node in h.members:
        if not isinstance(node, cuzarr.Group):
            continue
        if node.zarr_format == 3:
            has = bool(node.metadata.extra.get("consolidated_metadata"))
        else:
            has = sync(node.store.exists(node.store_path.key(".zmetadata")))
        if has:
            out.append(rel)
    return sorted(out, key=lambda p: (p == "", -p.count("/")))


def _consolidated_ancestors(store: Any, path: str | None) -> list[str]:
    """The groups above ``path`` that have consolidated metadata, deepest first.
    Above the destination, it would not list the copy (readers that trust it
    would not see it), so the copy brings it up to date."""
    import cuzarr
    from cuzarr.errors import NodeNotFoundError

    parts = [p for p in (path or "").split("/") if p]
    out = []
    for i in range(len(parts) - 1, -1, -1):
        parent = "/".join(parts[:i])
        try:
            g = cuzarr.open_group(store, path=parent or None, mode="r")
        except (NodeNotFoundError, FileNotFoundError):
            continue
        if g.async_group.consolidated is not None:
            out.append(parent)
    return out


def _create_copy(src: Any, store: Any, path: str | None, metadata: Any, overwrite: bool) -> Any:
    """Write the copy's metadata; the returned array stores chunks equal to the
    fill value as the source handle does (``write_empty_chunks``)."""
    from cuzarr.core.array import Array, AsyncArray
    from cuzarr.core.sync import sync
    from cuzarr.storage.common import make_store_path

    sp = make_store_path(store, path, mode="a")
    wec = getattr(src.async_array, "_write_empty_chunks", None)
    return Array(sync(AsyncArray.create(sp, metadata, overwrite=overwrite, write_empty_chunks=wec)))


def _copy_data(src: Any, dst: Any, max_block_bytes: int, progress: bool) -> None:
    # A copy that stores chunks equal to the fill value (write_empty_chunks)
    # would store regions the source never wrote too: it goes one destination
    # shard or chunk at a time, and skips those that meet no chunk of the source.
    holds = _source_chunks_test(src) if dst.async_array.write_empty_chunks else None
    if holds is None:
        blocks = _copy_blocks(dst, max_block_bytes)
    else:
        blocks = [b for b in _copy_blocks(dst, 0) if holds(b)]
    bar = Progress(len(blocks), "copy") if progress else None
    for sel in blocks:
        dst[sel] = src[sel]
        if bar is not None:
            bar.update()


def _source_chunks_test(src: Any) -> Any:
    """A test of whether a block (slices) meets a chunk (shard) that ``src``
    stores, or ``None`` where its store cannot be listed (then nothing is skipped)."""
    from cuzarr.core.sync import sync

    prefix = f"{src.path}/" if src.path else ""

    async def listed() -> set[str]:
        return {k[len(prefix) :] async for k in src.store.list_prefix(prefix)}

    stored = sync(listed())
    if ("zarr.json" if src.zarr_format == 3 else ".zarray") not in stored:
        return None
    edges = [np.cumsum([0, *sizes]) for sizes in src.write_chunk_sizes]
    key = src.metadata.chunk_key

    def holds(sel: tuple[slice, ...]) -> bool:
        spans = [
            range(
                int(np.searchsorted(e, s.start, side="right")) - 1,
                int(np.searchsorted(e, s.stop, side="left")),
            )
            for e, s in zip(edges, sel, strict=True)
        ]
        return any(key(c) in stored for c in itertools.product(*spans))

    return holds


def cmd_copy(args: argparse.Namespace) -> int:
    import copy

    import cuzarr
    from cuzarr.errors import CuzarrError
    from cuzarr.storage.common import join_path, make_store, normalize_path

    src = cuzarr.open(args.src, mode="r", path=args.src_path)
    if _overlaps(src, args.dst, args.dst_path):
        raise ValueError(
            "the destination overlaps the source (same node, or one inside the other); "
            "copy to another path or store"
        )
    fmt = args.zarr_format or src.zarr_format
    # Every option checked before anything is written: a failed copy leaves nothing.
    chunks, shards = _parse_ints(args.chunks), _parse_shards(args.shards)
    compressor = _parse_compressor(args.compressor, fmt)
    if shards not in (None, "none") and fmt != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    h = None
    if isinstance(src, cuzarr.Array):
        members: list[tuple[str, Any]] = [("", src)]
    else:
        h = _hierarchy(src)
        members = h.members
        if not args.quiet:
            for line in h.notes(_node_name(src), "copied"):
                print(line, file=sys.stderr)
    arrays = [(rel, n) for rel, n in members if isinstance(n, cuzarr.Array)]
    for _, a in arrays:
        for opt, v in (("--chunks", chunks), ("--shards", shards)):
            if isinstance(v, tuple) and len(v) != a.ndim:
                raise ValueError(
                    f"{opt} has {len(v)} value(s), but {a.path or 'the array'} has "
                    f"{a.ndim} dimension(s)"
                )
    _check_destination_format(args.dst, args.dst_path, fmt)
    planned = {}
    for rel, a in arrays:
        try:
            planned[rel] = destination_metadata(
                a, zarr_format=fmt, chunks=chunks, shards=shards, compressor=compressor
            )
        except ValueError as e:
            raise ValueError(f"{a.path or args.src}: {e}") from e
    consolidate = _consolidated_groups(h) if h is not None else []
    if h is not None and "" not in consolidate and _consolidated_ancestors(args.src, args.src_path):
        consolidate.append("")  # a group read through an ancestor's consolidated metadata
    ancestors = _consolidated_ancestors(args.dst, args.dst_path)
    base = normalize_path(args.dst_path)
    block = args.max_block_mib << 20
    store = make_store(args.dst, mode="a")
    started = False
    try:
        if isinstance(src, cuzarr.Array):
            dst = _create_copy(src, store, base or None, planned[""], args.overwrite)
            started = True
            _copy_data(src, dst, block, not args.quiet)
        else:
            cuzarr.create_group(
                store,
                path=base or None,
                zarr_format=fmt,
                attributes=copy.deepcopy(dict(src.attrs)),
                overwrite=args.overwrite,
            )
            started = True
            for name, node in members:
                target = join_path(base, name)
                if isinstance(node, cuzarr.Group):
                    cuzarr.create_group(
                        store,
                        path=target,
                        zarr_format=fmt,
                        attributes=copy.deepcopy(dict(node.attrs)),
                        overwrite=True,
                    )
                    continue
                if not args.quiet:
                    print(f"{name}: {node.shape} {node.dtype}", file=sys.stderr)
                dst = _create_copy(node, store, target, planned[name], True)
                _copy_data(node, dst, block, not args.quiet)
            # after all data: consolidated metadata describes what was written
            for rel in consolidate:
                cuzarr.consolidate_metadata(store, path=join_path(base, rel) or None)
        for parent in ancestors:
            cuzarr.consolidate_metadata(store, path=parent or None)
            if not args.quiet:
                print(f"updated the consolidated metadata of /{parent}", file=sys.stderr)
        store.close()  # a zip file: compacted to one entry per key
    except (CuzarrError, OSError, ValueError, IndexError) as e:
        if not started:
            raise
        raise CopyError(
            f"the copy into {args.dst} stopped: {_user_message(e)} (what was copied so "
            "far stays; run it again with --overwrite)"
        ) from e
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import tempfile

    import cuzarr

    shape = (args.size_mib * 512, 1024)  # uint16 rows of 2 KiB: 512 a MiB
    rng = np.random.default_rng(0)
    data = np.cumsum(rng.integers(-2, 3, size=shape, dtype=np.int16), axis=1).astype(np.uint16)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        a = cuzarr.create_array(
            d,
            shape=shape,
            chunks=(512, 1024),
            dtype="u2",
            compressors=[{"name": "zstd", "configuration": {"level": 1}}],
        )
        a[...] = data
        tw = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = a[...]
        tr = time.perf_counter() - t0
        ok = np.array_equal(back, data)
    print(
        f"write {data.nbytes / tw / 1e9:.2f} GB/s, read {data.nbytes / tr / 1e9:.2f} GB/s "
        f"({_human(data.nbytes)}, {a.nchunks} chunks, verified={ok})"
    )
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cuzarr", description="Inspect, copy and benchmark Zarr data.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "info",
        help="metadata, chunking, stored bytes and compression ratio",
        description=(
            "Describe an array or group. A group's members are counted as the store "
            "lists them; consolidated_metadata says whether the group has consolidated "
            "metadata and whether it still matches the store (current, stale; "
            "unverified where the store cannot be listed)."
        ),
    )
    s.add_argument("store", help="a path or URL (a .zip file, s3://, http(s)://, ...)")
    s.add_argument("--path", default=None, help="the node inside the store (default: its root)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser(
        "tree",
        help="the hierarchy below a group, as the store lists it",
        description=(
            "Print the hierarchy below a group as the store lists it now. Consolidated "
            "metadata is a snapshot that goes stale when nodes are added, removed or "
            "changed without reconsolidating: it is not what the tree shows, but a note "
            "on stderr says when it differs (what it lacks, lists in excess, or has "
            "older metadata for). Only a store that cannot be listed (an HTTP server "
            "without index pages) is shown from its consolidated metadata, with a note."
        ),
    )
    s.add_argument("store", help="a path or URL")
    s.add_argument("--path", default=None, help="the group inside the store (default: its root)")
    s.set_defaults(func=cmd_tree)
    s = sub.add_parser(
        "copy",
        help="copy, rechunk or convert an array or group",
        description=(
            "Copy an array or a group, block by block. What the options do not change "
            "is kept: filters, serializer, memory order, chunk key encoding, fill "
            "value, attributes, dimension names, compressors and checksums, sharding "
            "(with its index codecs), and consolidated metadata (written again after "
            "all data). Every option is checked against every array before anything "
            "is written."
        ),
    )
    s.add_argument("src", help="the source store (path or URL)")
    s.add_argument("dst", help="the destination store (path or URL)")
    s.add_argument("--src-path", default=None, help="the node to copy (default: the root)")
    s.add_argument("--dst-path", default=None, help="where to put it (default: the root)")
    s.add_argument(
        "--zarr-format", type=int, choices=(2, 3), default=None,
        help="the destination's format (default: the source's)",
    )
    s.add_argument("--chunks", help="e.g. 256,256; -1 for a whole dimension (--chunks=-1,256)")
    s.add_argument(
        "--shards",
        help="e.g. 4096,4096 (v3 only; -1: one shard along a dimension), or none for no "
        "sharding (default: keep the source's, which must hold whole new chunks)",
    )
    s.add_argument(
        "--compressor",
        help="zstd[:level], gzip[:level], blosc[:cname] or none: replaces the compressors, "
        "checksums stay (default: keep the source's)",
    )
    s.add_argument("--overwrite", action="store_true", help="replace what is at the destination")
    s.add_argument(
        "--max-block-mib", type=int, default=64,
        help="memory per copy step (at least one destination shard or chunk; default 64)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar, no member list")
    s.set_defaults(func=cmd_copy)
    s = sub.add_parser("consolidate", help="write consolidated metadata for a group")
    s.add_argument("store", help="a path or URL")
    s.add_argument("--path", default=None, help="the group inside the store (default: its root)")
    s.set_defaults(func=cmd_consolidate)
    s = sub.add_parser("bench", help="quick local write/read throughput check")
    s.add_argument("--size-mib", type=int, default=64, help="array size (default 64 MiB)")
    s.set_defaults(func=cmd_bench)
    return p


def _user_message(e: BaseException) -> str:
    """``str(e)`` with the stores' temporary files named as the paths they stand
    for: a local store writes ``dir/.cuzarr-tmp-<hex>-name`` and renames it to
    ``dir/name``; a zip store rewrites ``x.zip`` through ``x.zip.cuzarr-tmp``.
    The user knows their destination path, not our temporaries."""
    import re

    from cuzarr.storage.local import TEMP_PREFIX

    text = str(e)
    if ".cuzarr-tmp" not in text:
        return text
    text = re.sub(re.escape(TEMP_PREFIX) + r"[0-9a-f]+-", "", text)
    text = re.sub(r"\.cuzarr-tmp(?=['\"\s]|$)", "", text)
    # a failed rename of a temporary onto its path now reads "'p' -> 'p'"
    return re.sub(r"""('[^']*'|"[^"]*") -> \1""", r"\1", text)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuzarr`` console script."""
    from cuzarr.errors import CuzarrError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted: the destination holds the chunks finished so far", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (``cuzarr info x | head -2``): quietly,
        # and no second error when Python flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (CuzarrError, CopyError, OSError, ValueError, IndexError) as e:
        print(f"cuzarr: error: {_user_message(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
