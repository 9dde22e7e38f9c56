"""One ``os.rename`` for a directory of keys (``LocalStore.rename_dir``).

Moving a member of a group by copying every key and deleting the old ones
costs the member's size in I/O and leaves both copies behind a crash. A local
directory moves with one rename instead: atomic, whatever its size, as long as
it stays on one file system. Where that cannot be (the source is a symlink,
the destination exists, another file system, a platform's refusal) nothing is
done and the caller copies.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["rename_dir"]


def _inside(path: str, root: str) -> bool:
    return os.path.realpath(path).startswith(os.path.join(root, ""))


def rename_dir(store: Any, source: str, dest: str) -> bool:
    """Rename the directory holding the keys under ``source`` to ``dest`` (key
    prefixes without leading or trailing '/') in the local ``store``; whether
    it was done. Both must resolve inside the store's root; the source must be a
    real directory (not a symlink) and nothing may be at the destination. The
    store's caches of checked paths are dropped afterwards: they name the old
    places."""
    if not source or not dest:
        return False
    src, dst = store._path(source), store._path(dest)  # refuses malformed keys
    root = os.path.realpath(store._root_str)
    if os.path.islink(src) or not os.path.isdir(src) or not _inside(src, root):
        return False
    parent = os.path.dirname(dst)
    if os.path.lexists(dst) or not os.path.isdir(parent) or not _inside(parent, root):
        return False
    try:
        os.rename(src, dst)
    except OSError:
        return False  # another file system, a destination made meanwhile, ...
    store._paths.clear()
    store._safe_dirs.clear()
    return True
