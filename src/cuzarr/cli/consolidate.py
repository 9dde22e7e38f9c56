"""``cuzarr consolidate``: write a group's consolidated metadata."""

from __future__ import annotations

import argparse

__all__ = ["cmd_consolidate"]


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Write consolidated metadata for the group ``args.path`` of ``args.store``.

    Parameters
    ----------
    args : argparse.Namespace
        ``store`` and ``path``, as :func:`~cuzarr.cli.parser.build_parser` parses them.

    Returns
    -------
    int
        The exit status (0).
    """
    import cuzarr

    g = cuzarr.consolidate_metadata(args.store, path=args.path)
    print(f"consolidated metadata of {len(g.members(max_depth=None))} nodes")
    g.store.close()  # a zip file: compacted to one entry per key
    return 0
