"""The ``cuzarr`` command line: info, tree, copy (rechunk/convert), consolidate, bench.

One module per concern: :mod:`~cuzarr.cli.parser` (the arguments),
:mod:`~cuzarr.cli.describe` (``info``, ``tree``), :mod:`~cuzarr.cli.copy_command`
(``copy``; the copy's metadata and data come from :mod:`cuzarr.copying`),
:mod:`~cuzarr.cli.consolidate`,
:mod:`~cuzarr.cli.bench`, and their helpers :mod:`~cuzarr.cli.hierarchy`,
:mod:`~cuzarr.cli.options`, :mod:`~cuzarr.cli.display` and
:mod:`~cuzarr.cli.errors`. This module runs a command and turns its errors into
exit codes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from cuzarr.cli.bench import cmd_bench as cmd_bench
from cuzarr.cli.consolidate import cmd_consolidate as cmd_consolidate
from cuzarr.cli.copy_command import cmd_copy as cmd_copy
from cuzarr.cli.describe import cmd_info as cmd_info
from cuzarr.cli.describe import cmd_tree as cmd_tree
from cuzarr.cli.display import Progress as Progress
from cuzarr.cli.errors import CopyError as CopyError
from cuzarr.cli.errors import user_message
from cuzarr.cli.parser import build_parser as build_parser

# Names that were importable from the single-module ``cuzarr.cli`` stay so
# (tests and benchmarks import ``copy_array`` and ``main`` from here).
from cuzarr.copying.array_copy import copy_array as copy_array
from cuzarr.copying.metadata import destination_metadata as destination_metadata

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuzarr`` console script.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 1 for an error (printed as one
        ``cuzarr: error: ...`` line, no traceback), 130 when interrupted, 141
        when the reader of the output went away; argparse exits with 2 for
        bad arguments.
    """
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
        print(f"cuzarr: error: {user_message(e)}", file=sys.stderr)
        return 1
