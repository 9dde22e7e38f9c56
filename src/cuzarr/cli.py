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


def cmd_info(args: argparse.Namespace) -> int:
    import cuzarr

    node = cuzarr.open(args.store, mode="r", path=args.path)
    stored = _stored_bytes(node)
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
        members = node.members(max_depth=None)
        info = {
            "type": "group",
            "zarr_format": node.zarr_format,
            "members": len(members),
            "arrays": sum(isinstance(m, cuzarr.Array) for _, m in members),
            "stored_bytes": stored,
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
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    import cuzarr

    print(cuzarr.open_group(args.store, mode="r", path=args.path).tree())
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


def source_compressors(src: Any) -> Any:
    """The compressor(s) of ``src``, to keep them when copying (``None``: none)."""
    from cuzarr.codecs.base import ChunkSpec
    from cuzarr.codecs.sharding import ShardingCodec

    meta = src.metadata
    if meta.zarr_format == 2:
        return [meta.compressor] if meta.compressor is not None else None
    pipe = src.async_array._pipeline
    if isinstance(pipe.array_bytes, ShardingCodec):
        pipe = pipe.array_bytes.inner_pipeline(ChunkSpec(meta.chunk_shape, meta.dtype, meta.read_fill))
    return list(pipe.bytes_bytes) or None


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


def copy_array(
    src: Any,
    dst_store: Any,
    *,
    path: str | None = None,
    zarr_format: int | None = None,
    chunks: Sequence[int] | None = None,
    shards: Sequence[int] | None = None,
    compressor: Any = "source",
    overwrite: bool = False,
    max_block_bytes: int = 64 << 20,
    progress: bool = False,
) -> Any:
    """Copy (and rechunk/convert) ``src`` into a new array, block by block.

    ``compressor="source"`` (the default) keeps the source's compressor(s).
    Memory stays bounded: each step reads one block of whole destination
    shards/chunks (about ``max_block_bytes``) and writes it. Metadata is written
    first, and each chunk atomically, so an interrupted copy leaves a readable
    destination whose finished chunks are valid.
    """
    import cuzarr

    fmt = zarr_format or src.zarr_format
    if shards and fmt != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    attrs = dict(src.attrs)
    fill = src.fill_value
    if fmt != src.zarr_format:
        fill, attrs = _convert_xarray_fill(src, fmt, fill, attrs)
    kw: dict[str, Any] = {
        "shape": src.shape,
        "dtype": src.dtype,
        "chunks": tuple(chunks) if chunks else src.chunks,
        "fill_value": fill,
        "zarr_format": fmt,
        "attributes": attrs,
        "overwrite": overwrite,
        "compressors": source_compressors(src) if compressor == "source" else compressor,
    }
    if shards and fmt == 3:
        kw["shards"] = tuple(shards)
    elif src.shards and fmt == 3 and not chunks:
        kw["shards"] = src.shards
    if src.metadata.dimension_names is not None:
        # v3 dimension_names, v2 _ARRAY_DIMENSIONS (which names them in v2)
        kw["dimension_names"] = src.metadata.dimension_names
        if fmt == 3:
            attrs.pop("_ARRAY_DIMENSIONS", None)
    dst = cuzarr.create_array(dst_store, path, **kw)
    blocks = _copy_blocks(dst, max_block_bytes)
    bar = Progress(len(blocks), "copy") if progress else None
    for sel in blocks:
        dst[sel] = src[sel]
        if bar is not None:
            bar.update()
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


def cmd_copy(args: argparse.Namespace) -> int:
    import cuzarr

    src = cuzarr.open(args.src, mode="r", path=args.src_path)
    if _overlaps(src, args.dst, args.dst_path):
        raise ValueError(
            "the destination overlaps the source (same node, or one inside the other); "
            "copy to another path or store"
        )
    fmt = args.zarr_format
    # Every option checked before anything is written: a failed copy leaves nothing.
    chunks, shards = _parse_ints(args.chunks), _parse_ints(args.shards)
    compressor = _parse_compressor(args.compressor, fmt or src.zarr_format)
    if shards and (fmt or src.zarr_format) != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    arrays = [src] if isinstance(src, cuzarr.Array) else [
        n for _, n in src.members(max_depth=None) if isinstance(n, cuzarr.Array)
    ]
    for a in arrays:
        for opt, v in (("--chunks", chunks), ("--shards", shards)):
            if v is not None and len(v) != a.ndim:
                raise ValueError(
                    f"{opt} has {len(v)} value(s), but {a.path or 'the array'} has "
                    f"{a.ndim} dimension(s)"
                )
    _check_destination_format(args.dst, args.dst_path, fmt or src.zarr_format)
    if isinstance(src, cuzarr.Array):
        dst = copy_array(
            src,
            args.dst,
            path=args.dst_path,
            zarr_format=fmt,
            chunks=chunks,
            shards=shards,
            compressor=compressor,
            overwrite=args.overwrite,
            max_block_bytes=args.max_block_mib << 20,
            progress=not args.quiet,
        )
        dst.store.close()  # a zip file: compacted to one entry per key
        return 0
    dst_root = cuzarr.create_group(
        args.dst,
        path=args.dst_path,
        zarr_format=fmt or src.zarr_format,
        attributes=dict(src.attrs),
        overwrite=args.overwrite,
    )
    for name, node in src.members(max_depth=None):
        target = f"{dst_root.path}/{name}" if dst_root.path else name
        if isinstance(node, cuzarr.Group):
            cuzarr.create_group(
                args.dst,
                path=target,
                zarr_format=dst_root.zarr_format,
                attributes=dict(node.attrs),
                overwrite=True,
            )
        else:
            if not args.quiet:
                print(f"{name}: {node.shape} {node.dtype}", file=sys.stderr)
            copy_array(
                node,
                args.dst,
                path=target,
                zarr_format=dst_root.zarr_format,
                chunks=chunks,
                shards=shards,
                compressor=compressor,
                overwrite=True,
                max_block_bytes=args.max_block_mib << 20,
                progress=not args.quiet,
            )
    dst_root.store.close()  # a zip file: compacted to one entry per key
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
    s = sub.add_parser("info", help="metadata, chunking, stored bytes and compression ratio")
    s.add_argument("store", help="a path or URL (a .zip file, s3://, http(s)://, ...)")
    s.add_argument("--path", default=None, help="the node inside the store (default: its root)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("tree", help="the hierarchy below a group")
    s.add_argument("store", help="a path or URL")
    s.add_argument("--path", default=None, help="the group inside the store (default: its root)")
    s.set_defaults(func=cmd_tree)
    s = sub.add_parser("copy", help="copy, rechunk or convert an array or group")
    s.add_argument("src", help="the source store (path or URL)")
    s.add_argument("dst", help="the destination store (path or URL)")
    s.add_argument("--src-path", default=None, help="the node to copy (default: the root)")
    s.add_argument("--dst-path", default=None, help="where to put it (default: the root)")
    s.add_argument(
        "--zarr-format", type=int, choices=(2, 3), default=None,
        help="the destination's format (default: the source's)",
    )
    s.add_argument("--chunks", help="e.g. 256,256; -1 for a whole dimension (--chunks=-1,256)")
    s.add_argument("--shards", help="e.g. 4096,4096 (v3 only)")
    s.add_argument("--compressor", help="zstd[:level], gzip[:level], blosc[:cname] or none (default: keep the source's)")
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
    except (CuzarrError, OSError, ValueError, IndexError) as e:
        print(f"cuzarr: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
