"""``cuzarr copy``: copy, rechunk or convert an array or a group.

Everything that can be checked is checked before anything is written (the
options against every array, the destination against the source and against the
hierarchy it joins), so a copy that is refused leaves nothing behind.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from dataclasses import dataclass
from typing import Any

import cuzarr
from cuzarr.cli.errors import CopyError, user_message
from cuzarr.cli.hierarchy import Hierarchy, list_hierarchy, node_name
from cuzarr.cli.options import parse_compressor, parse_ints, parse_per_array, parse_shards
from cuzarr.copying.array_copy import copy_data, create_copy
from cuzarr.copying.metadata import destination_metadata
from cuzarr.errors import ContainsArrayError, ContainsGroupError, CuzarrError
from cuzarr.storage.common import join_path, make_store, normalize_path, only_zarr_format

__all__ = ["cmd_copy"]


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


def _consolidated_groups(h: Hierarchy) -> list[str]:
    """Relative paths of the copied groups (``""``: the copied group itself) that
    have consolidated metadata of their own, deepest first: the copy writes
    theirs once all data is there."""
    import cuzarr
    from cuzarr.runtime.sync import sync

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


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy, rechunk or convert an array or a group, with its attributes and
    consolidated metadata.

    Parameters
    ----------
    args : argparse.Namespace
        ``src``, ``dst``, ``src_path``, ``dst_path``, ``zarr_format``, ``chunks``,
        ``shards``, ``compressor``, ``overwrite``, ``max_block_mib`` and ``quiet``,
        as :func:`~cuzarr.cli.parser.build_parser` parses them.

    Returns
    -------
    int
        The exit status (0).

    Raises
    ------
    ValueError
        If an option does not fit an array, or the destination overlaps the
        source or joins a hierarchy of the other Zarr format; nothing is written.
    CopyError
        If the copy fails after it began writing.
    """
    src = cuzarr.open(args.src, mode="r", path=args.src_path)
    if _overlaps(src, args.dst, args.dst_path):
        raise ValueError(
            "the destination overlaps the source (same node, or one inside the other); "
            "copy to another path or store"
        )
    plan = _plan_copy(src, args)
    store = make_store(args.dst, mode="a")
    started = [False]
    try:
        _write_copy(src, store, plan, args, started)
        for parent in plan.ancestors:
            cuzarr.consolidate_metadata(store, path=parent or None)
            if not args.quiet:
                print(f"updated the consolidated metadata of /{parent}", file=sys.stderr)
        store.close()  # a zip file: compacted to one entry per key
    except (CuzarrError, OSError, ValueError, IndexError) as e:
        if not started[0]:
            if isinstance(e, ContainsArrayError | ContainsGroupError):
                raise type(e)(f"{user_message(e)} (--overwrite replaces it)") from e
            raise
        raise CopyError(
            f"the copy into {args.dst} stopped: {user_message(e)} (what was copied so "
            "far stays; run it again with --overwrite)"
        ) from e
    return 0


@dataclass
class _CopyPlan:
    """What a copy writes, every option checked before anything is written."""

    fmt: int
    members: list[tuple[str, Any]]
    planned: dict[str, Any]  # relative path -> destination metadata, per array
    consolidate: list[str]  # groups whose consolidated metadata is rewritten
    ancestors: list[str]  # consolidated groups above the destination
    base: str


def _plan_copy(src: Any, args: argparse.Namespace) -> _CopyPlan:
    # the destination's format: asked for, the only one it can hold (N5: 2), or the source's
    fmt = args.zarr_format or only_zarr_format(args.dst) or src.zarr_format
    # Every option checked before anything is written: a failed copy leaves nothing.
    chunks = parse_per_array(args.chunks, "--chunks", parse_ints)
    shards = parse_per_array(args.shards, "--shards", parse_shards)
    compressor = parse_compressor(args.compressor, fmt)
    if any(v not in (None, "none") for v in shards.values()) and fmt != 3:
        raise ValueError("--shards needs a Zarr v3 destination (v2 has no sharding)")
    single = isinstance(src, cuzarr.Array)
    h = None
    if single:
        members: list[tuple[str, Any]] = [("", src)]
    else:
        h = list_hierarchy(src)
        members = h.members
        if not args.quiet:
            for line in h.notes(node_name(src), "copied"):
                print(line, file=sys.stderr)
    arrays = [(rel, n) for rel, n in members if isinstance(n, cuzarr.Array)]
    # an array copied alone is named by its own name in NAME=... values
    names = {rel: rel or (src.basename if single else "") for rel, _ in arrays}
    ranks = [(names[rel], a.ndim) for rel, a in arrays]
    for rule in (chunks, shards):
        rule.check(ranks, single=single)
    _check_destination_format(args.dst, args.dst_path, fmt)
    planned = {}
    for rel, a in arrays:
        try:
            planned[rel] = destination_metadata(
                a,
                zarr_format=fmt,
                chunks=chunks.for_array(names[rel], a.ndim),
                shards=shards.for_array(names[rel], a.ndim),
                compressor=compressor,
            )
        except ValueError as e:
            raise ValueError(f"{a.path or args.src}: {e}") from e
    consolidate = _consolidated_groups(h) if h is not None else []
    if h is not None and "" not in consolidate and _consolidated_ancestors(args.src, args.src_path):
        consolidate.append("")  # a group read through an ancestor's consolidated metadata
    ancestors = _consolidated_ancestors(args.dst, args.dst_path)
    return _CopyPlan(fmt, members, planned, consolidate, ancestors, normalize_path(args.dst_path))


def _write_copy(
    src: Any, store: Any, plan: _CopyPlan, args: argparse.Namespace, started: list[bool]
) -> None:
    """Write the planned copy; ``started[0]`` is set once something is written."""
    block = args.max_block_mib << 20
    base = plan.base
    if isinstance(src, cuzarr.Array):
        dst = create_copy(src, store, base or None, plan.planned[""], args.overwrite)
        started[0] = True
        copy_data(src, dst, block, not args.quiet)
        return
    cuzarr.create_group(
        store,
        path=base or None,
        zarr_format=plan.fmt,
        attributes=copy.deepcopy(dict(src.attrs)),
        overwrite=args.overwrite,
    )
    started[0] = True
    for name, node in plan.members:
        target = join_path(base, name)
        if isinstance(node, cuzarr.Group):
            cuzarr.create_group(
                store,
                path=target,
                zarr_format=plan.fmt,
                attributes=copy.deepcopy(dict(node.attrs)),
                overwrite=True,
            )
            continue
        if not args.quiet:
            print(f"{name}: {node.shape} {node.dtype}", file=sys.stderr)
        dst = create_copy(node, store, target, plan.planned[name], True)
        copy_data(node, dst, block, not args.quiet)
    # after all data: consolidated metadata describes what was written
    for rel in plan.consolidate:
        cuzarr.consolidate_metadata(store, path=join_path(base, rel) or None)
