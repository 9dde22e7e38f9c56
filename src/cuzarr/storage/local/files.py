"""The system calls of a local store: temporaries written whole and moved into
place, positioned reads into fresh or reused buffers, and the ``flock`` that
marks a live writer's temporary (see ``cleanup_dir``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from cuzarr.buffer.aligned import ThreadBuffer
from cuzarr.buffer.concat import Concat

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; locking is a no-op there
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "TEMP_PREFIX"]

TEMP_PREFIX = ".cuzarr-tmp-"
LOCK_NAME = ".cuzarr-lock"
LOCK_PREFIX = LOCK_NAME + "-"
_RESERVED = (TEMP_PREFIX, LOCK_NAME)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_RDONLY_NOFOLLOW = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0)
# Without flock (Windows), temporaries older than this are taken as abandoned.
_STALE_AGE_S = 600.0


# Temporaries are named from a random token per process and a counter: unique
# without a uuid4 per write (an os.urandom call, ~4% of a small-chunk write).
# O_EXCL still refuses any name that exists; a forked child draws a new token.
_tmp_token = secrets.token_hex(8)
_tmp_count = itertools.count()


def _new_token() -> None:
    global _tmp_token
    _tmp_token = secrets.token_hex(8)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_token)


def _temp_name(name: str) -> str:
    return f"{TEMP_PREFIX}{_tmp_token}{next(_tmp_count):x}-{name}"


# A temporary's name carries the key's name after ~45 bytes of prefix, token and
# counter: for a name near the file system's limit (255 bytes) that is too long
# although the name itself is not. Such a write retries with the name cut to
# this many characters (at most 4 bytes each in UTF-8).
_SHORT_NAME = 32


def _raise_for_key(e: OSError, key: str, path: str) -> NoReturn:
    """Raise ``e`` as an error of writing ``key``: the same class and errno,
    naming ``path`` (where the key's value goes), not the temporary the error
    came from, chained from ``e``. Errors without an errno (or of classes
    other than the built-in ones) go on as they are."""
    if e.errno is None or type(e).__module__ != "builtins":
        raise e
    raise type(e)(e.errno, f"{e.strerror} (writing key {key!r})", path) from e


# O_EXCL: a fresh name, never an existing file or a symlink planted there.
_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _iov_max() -> int:
    try:
        n = os.sysconf("SC_IOV_MAX")
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or unknown
        n = -1
    return n if n > 0 else 1024


# Buffers one os.writev call takes at most.
_IOV_MAX = _iov_max()


def _lseek_read(fd: int, n: int, offset: int) -> bytes:
    """``os.pread`` where the platform has none (Windows): a seek, then a read.
    Safe here: a descriptor is read by one thread at a time (each read opens
    its own; pinned ones are per thread)."""
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, n)


def _pread_copy(fd: int, views: list[memoryview], offset: int) -> int:
    """``os.preadv`` of one buffer where the platform has none: a positioned
    read, copied into place (one copy more, the same bytes)."""
    view = views[0]
    data = _pread_os(fd, len(view), offset)
    view[: len(data)] = data
    return len(data)


def _writev_each(fd: int, parts: list[memoryview]) -> int:
    """``os.writev`` where the platform has none (Windows): the first part,
    which ``_write_all`` continues from, as after a short writev."""
    return os.write(fd, parts[0]) if parts else 0


# The positioned and vectored calls, or their fallbacks where the platform lacks
# them (``tests/test_local_fallbacks.py`` runs the store with each one removed).
_pread_os = getattr(os, "pread", None) or _lseek_read
_preadv_os = getattr(os, "preadv", None) or _pread_copy
_writev_os = getattr(os, "writev", None) or _writev_each


def _write_all(fd: int, value: Any) -> None:
    """All of ``value`` (bytes-like, or a :class:`Concat`, written with
    ``os.writev``): the calls may write less than asked (signals, full disks),
    so they are continued."""
    if isinstance(value, Concat):
        parts = [memoryview(p).cast("B") for p in value.parts]
        i = 0
        while i < len(parts):
            n = _writev_os(fd, parts[i : i + _IOV_MAX])
            while n:
                if n >= len(parts[i]):
                    n -= len(parts[i])
                    i += 1
                else:
                    parts[i] = parts[i][n:]
                    n = 0
        return
    view = memoryview(value).cast("B")
    while view:
        view = view[os.write(fd, view) :]


def _write_file(path: str, value: bytes) -> None:
    fd = os.open(path, _CREATE_NEW, 0o666)
    try:
        if fcntl is not None:
            # Held until the file is renamed into place (or the writer dies): marks
            # the temporary as live for cleanup_temporaries in other processes.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:  # a cleaner removed it before we locked
                raise FileNotFoundError(path)
        _write_all(fd, value)
    except BaseException:
        os.close(fd)
        raise
    return fd  # type: ignore[return-value]


# Windows refuses to replace a file another process has open without
# FILE_SHARE_DELETE (a reader of the old chunk, a virus scanner, an indexer):
# ERROR_ACCESS_DENIED (5) or ERROR_SHARING_VIOLATION (32), for as long as the
# other handle lives. Such a replace is retried for up to ~2 s, then raised.
_SHARING_ERRORS = frozenset({5, 32})
_REPLACE_TRIES = 12
_WINDOWS = sys.platform == "win32"


def replace(src: str, dst: str) -> None:
    """``os.replace(src, dst)``: atomic where the platform allows, retried
    while Windows reports the destination (or source) in use by another
    handle. POSIX renames never fail that way, so this is ``os.replace``
    there."""
    if not _WINDOWS:
        os.replace(src, dst)
        return
    replace_retrying(src, dst)


def replace_retrying(src: str, dst: str, tries: int = _REPLACE_TRIES) -> None:
    """``os.replace`` retried with growing pauses (1 ms doubling to 0.5 s) on
    sharing violations (``PermissionError`` with Windows error 5 or 32)."""
    delay = 0.001
    for attempt in range(tries):
        try:
            os.replace(src, dst)
            return
        except PermissionError as e:
            if getattr(e, "winerror", None) not in _SHARING_ERRORS or attempt == tries - 1:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _pread(fd: int, n: int, offset: int) -> bytes:
    """``n`` bytes at ``offset`` (fewer only at the end of the file)."""
    if n > REUSE_MAX:
        # os.pread allocates ``n`` bytes first: a range from a corrupt shard index
        # (exabytes) raised MemoryError instead of reading short, to the end.
        n = max(0, min(n, os.fstat(fd).st_size - offset))
    data = _pread_os(fd, n, offset)
    if len(data) < n:  # rare short read: keep going until EOF
        parts = [data]
        got = len(data)
        while got < n:
            more = _pread_os(fd, n - got, offset + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        data = b"".join(parts)
    return data


def _read_all(fd: int) -> bytes:
    return _pread(fd, os.fstat(fd).st_size, 0)


# The first read of a file in a batch asks for this much; a file that fills it is
# read to its end (see _read_to_end), and later files of the batch ask for about
# its size. Most chunk files of a batch are alike in size.
_GUESS = 64 << 10


def _read_rest(fd: int, data: bytes, guess: int, confirm: bool) -> bytes:
    """The whole file, given ``data`` from a first ``read`` of ``guess`` bytes:
    read calls only, no ``fstat`` for a file shorter than ``guess``. On this
    2-core VM the ``fstat`` (and its result object) cost ~1 us of a ~6 us
    small-file read and kept two threads reading small files from scaling. With
    ``confirm``, a short read is followed by one more, which must come back
    empty: a short read need not be the end (FUSE file systems with
    ``direct_io``, for one, return less than asked before it). Without it (file
    systems in ``_FULL_READ_FS``) that read is saved, which took 8-12% off a read
    of 20,000 small chunk files, as it is also one more hand-over of the GIL per
    file."""
    if len(data) < guess:
        if not confirm:
            return data
        more = os.read(fd, 1)
        if not more:
            return data
        data += more
    return _read_to_end(fd, data)



def _read_to_end(fd: int, head: bytes) -> bytes:
    """``head``, read from the start of the file, and the rest of the file up to
    its ``fstat`` size (``_pread`` keeps reading where the file system reads
    short). A file much longer than ``head`` is read again from the start in
    one piece: copying the head twice costs less than joining the pieces. A
    file that is not a regular file (a device planted as a key) reads as
    ``_read_all`` reads it: its ``fstat`` size from the start."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > 4 * len(head):
        return _pread(fd, st.st_size, 0)
    rest = _pread(fd, max(0, st.st_size - len(head)), len(head))
    return head + rest if rest else head


# Files up to this size are read by ``SyncIO.get_reused`` into one buffer per
# thread: no fresh allocation (and page faults) per chunk, and a read of many
# chunks holds one compressed chunk per worker, not one per allocator arena.
REUSE_MAX = 16 << 20
# each thread's reusable read buffer: page-aligned, as a read into a bytearray
# (16 bytes into a page) copied at a fifth of the speed on AMD hosts (see
# cuzarr.buffer.aligned)
_READS = ThreadBuffer()
# per-thread state of the local store (its pinned block's descriptors)
_tls = threading.local()


def _thread_buffer(size: int) -> memoryview:
    """This thread's reusable read buffer, at least ``size`` bytes."""
    return memoryview(_READS.get(size))


def _pread_into(fd: int, view: memoryview, offset: int) -> memoryview:
    """Fill ``view`` from ``offset``; the part filled (short only at EOF)."""
    got = 0
    while got < len(view):
        n = _preadv_os(fd, [view[got:]], offset + got)
        if n == 0:  # the file ends (or shrank under us): what is there
            break
        got += n
    return view[:got]


def _read_all_reused(fd: int) -> memoryview | bytes:
    size = os.fstat(fd).st_size
    if size > REUSE_MAX:
        return _pread(fd, size, 0)
    return _pread_into(fd, _thread_buffer(size)[:size], 0)


def _try_lock_path(path: str) -> int | None:
    """flock ``path`` (created if missing) without blocking; the fd, or None if busy.

    The lock is on the file that is at ``path`` now: a file unlinked by its
    previous holder between our open and our flock is detected and retried.
    """
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o666)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _unlock_path(path: str, fd: int) -> None:
    # Unlink while still holding the lock, then release: waiters that opened the
    # old file see it is gone (inode check in _try_lock_path) and retry.
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


def _skip_missing(exc: BaseException) -> None:
    if not isinstance(exc, FileNotFoundError):
        raise exc


def _rmtree(path: str) -> None:
    """``shutil.rmtree`` that goes on past entries already gone (a concurrent
    deleter, a temporary renamed away) instead of stopping there, and raises
    every other error."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, _p, e: _skip_missing(e))
    else:  # pragma: no cover - Python 3.11
        shutil.rmtree(path, onerror=lambda _f, _p, ei: _skip_missing(ei[1]))


def link_if_absent(tmp: str, path: str) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as e:
        if e.errno not in (
            errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS
        ):
            raise
        # no hard links on this file system: a check, then the move (not atomic
        # against another writer of the same key in that window)
        if not os.path.lexists(path):
            replace(tmp, path)


def empty_dir(path: str) -> None:
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                _rmtree(e.path)
            else:
                os.unlink(e.path)
        except FileNotFoundError:
            pass


def cleanup_dir(directory: str) -> int:
    """Remove abandoned temporaries and lock files in one directory."""
    try:
        entries = [
            e.name
            for e in os.scandir(directory)
            if e.name.startswith((TEMP_PREFIX, LOCK_PREFIX))
        ]
    except OSError:
        return 0
    n = 0
    for name in entries:
        path = os.path.join(directory, name)
        if fcntl is None:
            try:
                if time.time() - os.stat(path).st_mtime > _STALE_AGE_S:
                    os.unlink(path)
                    n += 1
            except OSError:
                pass
            continue
        try:
            fd = _try_lock_path(path) if os.path.lexists(path) else None
        except OSError:
            continue
        if fd is None:
            continue  # a live writer (or lock holder) owns it
        # Unlocked: its writer died (or just renamed it away, in which case the
        # inode check in _try_lock_path made us lock a fresh empty file).
        _unlock_path(path, fd)
        n += 1
    return n


def _is_missing(e: OSError) -> bool:
    """Whether a read's ``OSError`` means the key holds no value."""
    return isinstance(e, (FileNotFoundError, NotADirectoryError, IsADirectoryError)) or (
        e.errno == errno.ENAMETOOLONG
    )


def _read_placed(fd: int, view: memoryview, n: int | None, at: int) -> memoryview | bytes:
    """A file of ``n`` bytes (as sized) read into ``view[at:]``; where it does not
    fit there (or its size is unknown or changed), its bytes on their own."""
    if n is None or at < 0 or at + n > len(view):
        return _pread(fd, os.fstat(fd).st_size, 0)
    return _pread_into(fd, view[at : at + n], 0)


def _read_placed_changed(fd: int, view: memoryview, n: int, at: int) -> memoryview | bytes:
    """``_read_placed`` for a file sized by ``stat`` before it was opened: one whose
    size changed since is read on its own."""
    size = os.fstat(fd).st_size
    return _read_placed(fd, view, n if size == n else None, at)


def _read_placed_all(store: Any, keys: Sequence[str], held: list[int | None],
                     sizes: list[int | None], where: list[int], view: memoryview,
                     each: Callable[[int, int, int], Any] | None = None,
                     ) -> tuple[list[memoryview | bytes | None], list[int]]:
    """The second pass of ``get_into``: each value read into its place (a held
    descriptor, or the file opened now), with its offset there (-1: separate).
    ``each(j, offset, n)`` is called right after value ``j`` is read whole into
    its place, while its bytes are still in the CPU's cache."""
    values: list[memoryview | bytes | None] = []
    offsets: list[int] = []
    end = len(view)
    preadv = os.preadv if hasattr(os, "preadv") else None
    for j, (key, fd, n, at) in enumerate(zip(keys, held, sizes, where, strict=True)):
        if preadv is not None and fd is not None and n is not None and 0 <= at <= end - n:
            # the common case, one call: a held file read whole into its place
            part = view[at : at + n]
            if preadv(fd, [part], 0) == n:
                values.append(part)
                offsets.append(at)
                if each is not None:
                    each(j, at, n)
                continue
        if fd is not None:
            try:
                value = _read_placed(fd, view, n, at)
            except OSError as e:
                if not _is_missing(e):
                    raise
                value = None
        elif n is not None:
            value = store._read_fd(key, lambda fd, n=n, at=at: _read_placed_changed(fd, view, n, at))
        else:
            value = None
        inside = isinstance(value, memoryview) and n is not None and len(value) == n
        offsets.append(at if inside else -1)
        values.append(value if inside or not isinstance(value, memoryview) else bytes(value))
    return values, offsets


# Sizes from lseek (an int, where fstat builds a 20-field result): above this,
# fstat says whether the file is a regular one (directories seek to 2**63 - 1,
# block devices to their size); below it, nothing is worth telling apart (a
# character device reads as its fstat size, 0, either way).
_TYPE_CHECK_ABOVE = 1 << 30


def _file_size(fd: int) -> int | None:
    """The size of the open file ``fd`` (``None``: not a regular file)."""
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
    except OSError:  # a pipe
        size = _TYPE_CHECK_ABOVE
    if size >= _TYPE_CHECK_ABOVE:
        st = os.fstat(fd)
        return st.st_size if stat.S_ISREG(st.st_mode) else None
    return size
