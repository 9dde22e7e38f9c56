"""Which file system a directory is on, from Linux's mount table: reads of
regular files on some local file systems come back short only at the end, and a
store may save the read that would confirm it.
"""

from __future__ import annotations

import os

# Local file systems whose reads of regular files come back short only at the
# end (they loop over the page cache until the request is served). On others
# (FUSE, NFS, CIFS, anything not listed or not found) a short read is confirmed.
_FULL_READ_FS = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "zfs", "f2fs",
        "overlay", "jfs", "reiserfs", "bcachefs", "squashfs", "erofs",
    }
)
_fs_full: dict[int, bool] = {}


def _reads_full(directory: str) -> bool | None:
    """Whether regular files in ``directory`` read short only at their end: its
    file system (from /proc/self/mountinfo, by device number) is in
    ``_FULL_READ_FS``. False where that cannot be told; None if ``directory``
    cannot be looked at (yet)."""
    try:
        dev = os.stat(directory).st_dev
    except OSError:
        return None
    known = _fs_full.get(dev)
    if known is None:
        known = _fs_full[dev] = _fs_type(dev) in _FULL_READ_FS
    return known


# Linux's mount table. Where it cannot be read (macOS, Windows, a /proc not
# mounted), every file system counts as unknown: short reads are confirmed,
# which costs one read per file and gives the same bytes.
MOUNTINFO = "/proc/self/mountinfo"


def _fs_type(dev: int) -> str | None:
    """The type of the file system on device ``dev`` as Linux's mount table
    names it; None elsewhere, or when it is not found."""
    if not hasattr(os, "major"):
        return None  # Windows
    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                fields = left.split()
                if sep and len(fields) > 2 and fields[2] == want:
                    kind = right.split()
                    return kind[0] if kind else None
    except OSError:
        pass
    return None
