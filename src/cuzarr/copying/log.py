"""The ``log`` argument of the copy functions: a callable, a file path or a
file-like object, as zarr-python 2 took it."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["log_writer", "summary"]


@contextlib.contextmanager
def log_writer(log: Any) -> Iterator[Callable[[str], None]]:
    """A function taking one message per call, writing to ``log``: ``None``
    (nothing), a callable, a file path (appended to) or an object with
    ``write``."""
    if log is None:
        yield lambda message: None
    elif callable(log):
        yield log
    elif isinstance(log, (str, os.PathLike)):
        with open(log, "a", encoding="utf-8") as f:
            yield lambda message: print(message, file=f)
    elif isinstance(log, io.IOBase) or hasattr(log, "write"):
        yield lambda message: print(message, file=log)
    else:
        raise TypeError(f"log must be a callable, a path or a file, not {type(log).__name__}")


def summary(dry_run: bool, n_copied: int, n_skipped: int, n_bytes: int) -> str:
    """The last message of a copy."""
    if dry_run:
        return f"dry run: {n_copied:,} copied, {n_skipped:,} skipped"
    return f"all done: {n_copied:,} copied, {n_skipped:,} skipped, {n_bytes:,} bytes copied"
