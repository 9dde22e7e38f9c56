"""The ``cuzarr`` argument parser: the subcommands, their options and help."""

from __future__ import annotations

import argparse
from typing import Any

from cuzarr import __version__
from cuzarr.cli.bench import cmd_bench
from cuzarr.cli.consolidate import cmd_consolidate
from cuzarr.cli.copy_command import cmd_copy
from cuzarr.cli.describe import cmd_info, cmd_tree

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``cuzarr`` command line.

    Returns
    -------
    argparse.ArgumentParser
        One subcommand each for ``info``, ``tree``, ``copy``, ``consolidate`` and
        ``bench``; the parsed namespace's ``func`` runs the subcommand.
    """
    p = argparse.ArgumentParser(prog="cuzarr", description="Inspect, copy and benchmark Zarr data.")
    p.add_argument("--version", action="version", version=f"cuzarr {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _add_info_and_tree(sub)
    _add_copy(sub)
    s = sub.add_parser("consolidate", help="write consolidated metadata for a group")
    s.add_argument("store", help="a path or URL")
    s.add_argument("--path", default=None, help="the group inside the store (default: its root)")
    s.set_defaults(func=cmd_consolidate)
    s = sub.add_parser("bench", help="quick local write/read throughput check")
    s.add_argument(
        "--size-mib", type=int, default=64, help="array size, at least 1 (default 64 MiB)"
    )
    s.set_defaults(func=cmd_bench)
    return p


def _add_info_and_tree(sub: Any) -> None:
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
    _add_node_args(s, "a path or URL (a .zip file, s3://, http(s)://, ...)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser(
        "tree",
        help="the hierarchy below a group, as the store lists it",
        description=(
            "Print the hierarchy below a group as the store lists it now (an array: "
            "the array, as a group's tree shows its members). Consolidated "
            "metadata is a snapshot that goes stale when nodes are added, removed or "
            "changed without reconsolidating: it is not what the tree shows, but a note "
            "on stderr says when it differs (what it lacks, lists in excess, or has "
            "older metadata for). Only a store that cannot be listed (an HTTP server "
            "without index pages) is shown from its consolidated metadata, with a note."
        ),
    )
    _add_node_args(s, "a path or URL")
    s.set_defaults(func=cmd_tree)


def _add_node_args(s: Any, store_help: str) -> None:
    """The node a command reads: its store (``store_help`` says what it takes) and
    ``--path`` inside it."""
    s.add_argument("store", help=store_help)
    s.add_argument("--path", default=None, help="the node inside the store (default: its root)")


def _add_copy(sub: Any) -> None:
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
        "--zarr-format",
        type=int,
        choices=(2, 3),
        default=None,
        help="the destination's format (default: the source's)",
    )
    s.add_argument(
        "--chunks",
        action="append",
        metavar="[NAME=]SHAPE",
        help="e.g. 256,256; -1 for a whole dimension (--chunks=-1,256). A SHAPE applies "
        "to every array of its rank (others keep theirs), NAME=SHAPE to the array NAME "
        "(its path below the copied group); repeat for more (--chunks 512,512 "
        "--chunks temperature=64,256,256)",
    )
    s.add_argument(
        "--shards",
        action="append",
        metavar="[NAME=]SHAPE",
        help="e.g. 4096,4096 (v3 only; -1: one shard along a dimension), or none for no "
        "sharding (default: keep the source's, which must hold whole new chunks); per "
        "array or rank as --chunks",
    )
    s.add_argument(
        "--compressor",
        help="zstd[:level], gzip[:level], blosc[:cname] or none: replaces the compressors, "
        "checksums stay (default: keep the source's)",
    )
    s.add_argument("--overwrite", action="store_true", help="replace what is at the destination")
    s.add_argument(
        "--max-block-mib",
        type=int,
        default=64,
        help="memory per copy step (at least one destination shard or chunk; default 64)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar, no member list")
    s.set_defaults(func=cmd_copy)
