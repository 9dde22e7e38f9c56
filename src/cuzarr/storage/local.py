"""A store over a directory of the local filesystem.

Writes go to a temporary file in the destination directory and are renamed into
place, so a writer killed mid-write never leaves a torn value under a real key;
such temporaries carry a reserved prefix and are never listed or read as data.
A writer holds an ``flock`` on its temporary while it lives, so the next writer
into the same directory can tell a killed writer's leftovers (unlocked) from a
live writer's (locked) and removes only the former (see ``cleanup_temporaries``).

``lock_keys`` takes per-key advisory locks (fcntl locks on files in
``<tempdir>/cuzarr-locks-<uid>/``, outside the store); the array engine holds them around the read-modify-write of
partly covered chunks, so concurrent partial writers, in threads or processes,
never lose each other's updates. Keys are checked to stay below the root: '..',
absolute paths, NUL bytes, backslashes and reserved names are refused, and a
directory that is (or passes through) a symlink leading out of the root is never
read, written or deleted through.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import itertools
import os
import re
import secrets
import shutil
import stat
import struct
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from cuzarr.errors import StoreKeyError
from cuzarr.storage import keylocks
from cuzarr.storage.base import (
    ByteRequest,
    Concat,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    SyncIO,
    as_bytes_like,
    check_byte_range,
    gather_or_cancel,
    in_thread,
    normalize_key,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; locking is a no-op there
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "TEMP_PREFIX", "LocalFile", "LocalStore"]


class LocalFile(NamedTuple):
    """A stored value as a file: its path and size in bytes."""

    path: str
    size: int


TEMP_PREFIX = ".cuzarr-tmp-"
LOCK_NAME = ".cuzarr-lock"
LOCK_PREFIX = LOCK_NAME + "-"
_RESERVED = (TEMP_PREFIX, LOCK_NAME)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_RDONLY_NOFOLLOW = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0)
# Without flock (Windows), temporaries older than this are taken as abandoned.
_STALE_AGE_S = 600.0
# Batching file I/O amortizes the thread hop; a few dozen small files per hop.
_BATCH = 32


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


def _write_all(fd: int, value: Any) -> None:
    """All of ``value`` (bytes-like, or a :class:`Concat`, written with
    ``os.writev``): the calls may write less than asked (signals, full disks),
    so they are continued."""
    if isinstance(value, Concat):
        parts = [memoryview(p).cast("B") for p in value.parts]
        i = 0
        while i < len(parts):
            n = os.writev(fd, parts[i : i + _IOV_MAX])
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


def _pread(fd: int, n: int, offset: int) -> bytes:
    """``n`` bytes at ``offset`` (fewer only at the end of the file)."""
    if n > REUSE_MAX:
        # os.pread allocates ``n`` bytes first: a range from a corrupt shard index
        # (exabytes) raised MemoryError instead of reading short, to the end.
        n = max(0, min(n, os.fstat(fd).st_size - offset))
    data = os.pread(fd, n, offset)
    if len(data) < n:  # rare short read: keep going until EOF
        parts = [data]
        got = len(data)
        while got < n:
            more = os.pread(fd, n - got, offset + got)
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


def _fs_type(dev: int) -> str | None:
    """The type of the file system on device ``dev`` as Linux's mount table
    names it; None elsewhere, or when it is not found."""
    if not hasattr(os, "major"):
        return None  # Windows
    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                fields = left.split()
                if sep and len(fields) > 2 and fields[2] == want:
                    kind = right.split()
                    return kind[0] if kind else None
    except OSError:
        pass
    return None


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
# Keys made of plain names (chunk keys, most metadata keys) pass every check of
# ``LocalStore._key_path`` by construction: ASCII letters, digits, '_', '-' and
# inner '.', no component starting with '.' (so no '.', '..' or reserved name),
# none empty or longer than 255, no ':' (drive letters) or backslashes. One
# regex match instead of the general checks (~2 us a key, twice per written key).
_PLAIN_KEY = re.compile(r"[\w\-][\w.\-]{0,254}(?:/[\w\-][\w.\-]{0,254})*", re.ASCII)
# Keys whose checked paths a LocalStore keeps (then it starts over).
_PATHS_MAX = 1 << 16
_tls = threading.local()


def _thread_buffer(size: int) -> memoryview:
    """This thread's reusable read buffer, at least ``size`` bytes."""
    buf = getattr(_tls, "buf", None)
    if buf is None or len(buf) < size:
        buf = _tls.buf = bytearray(max(size + size // 4, 64 << 10))
    return memoryview(buf)


def _pread_into(fd: int, view: memoryview, offset: int) -> memoryview:
    """Fill ``view`` from ``offset``; the part filled (short only at EOF)."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
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


_OFD = fcntl is not None and hasattr(fcntl, "F_OFD_SETLK")


def _try_lock_range(fd: int, offset: int, length: int = 1) -> bool:
    """Open-file-description lock on ``length`` bytes of a lock file (all or none)."""
    flock = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, offset, length, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock)
    except BlockingIOError:
        return False
    return True


# A key's lock is one byte of its store's lock file. Keys whose last name is a
# number (chunk keys: 'c/5/70', '5.70') lie at that number past a hash of the rest
# (38 bits), so a batch of neighbouring chunks locks one range with one call, and
# the kernel keeps it as one lock: one lock per key cost a call each, and every
# call scanned all the locks held on the file (~6% of a small-chunk write with two
# writer threads, 256 locks each). Other keys lie at a 56-bit hash, above 2**62.
_TAIL_BITS = 24
_HASHED = 1 << 62


def _hash_bits(text: str, bits: int) -> int:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> (64 - bits)


def _lock_runs(keys: Iterable[str]) -> list[tuple[int, int]]:
    """The sorted, merged byte ranges ``(start, length)`` locking ``keys``. Two keys
    may share a byte (a hash collision): they then exclude each other, which is
    safe; a key always maps to the same byte."""
    offsets = set()
    prefixes: dict[str, int] = {}
    for key in keys:
        cut = max(key.rfind("/"), key.rfind(".")) + 1
        tail = key[cut:]
        if 0 < len(tail) <= 8 and tail.isascii() and tail.isdigit():
            n = int(tail)
            if n < (1 << _TAIL_BITS):
                prefix = key[:cut]
                base = prefixes.get(prefix)
                if base is None:
                    base = prefixes[prefix] = _hash_bits(prefix, 38) << _TAIL_BITS
                offsets.add(base | n)
                continue
        offsets.add(_HASHED | _hash_bits(key, 56))
    runs: list[tuple[int, int]] = []
    for off in sorted(offsets):
        if runs and runs[-1][0] + runs[-1][1] == off:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((off, 1))
    return runs


def _lock_dir() -> str:
    # Lock files live outside the store, so the store holds only data (other
    # tools list its files); one directory per user under the system temp dir.
    uid = os.getuid() if hasattr(os, "getuid") else 0
    d = os.path.join(tempfile.gettempdir(), f"cuzarr-locks-{uid}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def _lock_base(store: LocalStore) -> str:
    """Where ``store``'s lock files are named from (computed once per store
    object: every batch of writes asks)."""
    base = store._lock_base
    if base is None:
        if store._real_root is None:
            store._real_root = os.path.realpath(store._root_str)
        root_id = hashlib.blake2b(store._real_root.encode("utf-8", "surrogatepass"), digest_size=12)
        base = store._lock_base = os.path.join(_lock_dir(), root_id.hexdigest())
    return base


def _open_created(path: str, flags: int) -> int:
    """``os.open`` with ``O_CREAT``; recreates the lock directory once if a
    temp cleaner removed it since ``_lock_base`` made it."""
    try:
        return os.open(path, flags | os.O_CREAT, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return os.open(path, flags | os.O_CREAT, 0o600)


class _KeyLocks:
    """Async context manager holding exclusive locks on a set of keys.

    The locks live in ``<tempdir>/cuzarr-locks-<uid>/``, named after the store
    root's real path. Linux: one lock file per store root, one byte of it per key
    (see ``_lock_runs``), locked with open-file-description locks, which conflict
    between threads as well as processes; neighbouring bytes go in one call.
    Elsewhere with ``flock``: one file per key's byte, removed on release. Bytes
    are locked in ascending order, so two lockers never deadlock.
    """

    def __init__(self, store: LocalStore, keys: Iterable[str]) -> None:
        keys = list(keys)  # walked twice below: a generator would lock nothing
        for k in keys:
            # the key's syntax only: its directory is checked when it is written
            if type(k) is not str or k not in store._paths:
                store._key_path(k)
        self.base = _lock_base(store)
        self.keys = keys
        self.wanted = _lock_runs(keys)
        self.noted: list[tuple[int, int]] = []
        self.fd: int | None = None
        self.held: list[tuple[str, int]] = []

    def _try(self, run: tuple[int, int]) -> bool:
        start, length = run
        if _OFD:
            if self.fd is None:
                self.fd = _open_created(self.base, os.O_RDWR | _NOFOLLOW)
            return _try_lock_range(self.fd, start, length)
        # one lock file per key's byte; a run is taken whole or not at all
        taken = len(self.held)
        for h in range(start, start + length):
            path = f"{self.base}-{h:016x}"
            fd = _try_lock_path(path)
            if fd is None:
                while len(self.held) > taken:
                    _unlock_path(*self.held.pop())
                return False
            self.held.append((path, fd))
        return True

    async def __aenter__(self) -> _KeyLocks:
        if fcntl is None:
            return self
        try:
            for start, length in self.wanted:
                delay = 0.0005
                # Non-blocking tries polled from the loop: a blocked lock call in a
                # worker thread could starve the threads the holder needs.
                while not self._try((start, length)):
                    keylocks.check_waiter(self.base, range(start, start + length), self.keys)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.02)
                # noted run by run: a holder of some runs that waits for the next
                # one holds those already
                keylocks.held_by_running_loop(self.base, range(start, start + length))
                self.noted.append((start, length))
        except BaseException:
            self._forget_owners()
            self._release()
            raise
        return self

    def _forget_owners(self) -> None:
        # only the runs this object took: another task may hold the others
        for start, length in self.noted:
            keylocks.released(self.base, range(start, start + length))
        self.noted.clear()

    def try_acquire(self) -> bool:
        """Take every lock now without waiting (for worker threads, which must
        not block on a holder that may need them); False, holding none, if any
        is busy."""
        if fcntl is None:
            return True
        try:
            for run in self.wanted:
                if not self._try(run):
                    self._release()
                    return False
        except BaseException:
            self._release()
            raise
        return True

    def release(self) -> None:
        """Drop the locks taken by :meth:`try_acquire`."""
        self._release()

    def _release(self) -> None:
        while self.held:
            path, fd = self.held.pop()
            _unlock_path(path, fd)
        if self.fd is not None:
            os.close(self.fd)  # releases every range this description holds
            self.fd = None

    async def __aexit__(self, *exc: object) -> None:
        self._forget_owners()
        self._release()


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


class LocalStore(Store):
    """Keys map to files below ``root`` ('/' in a key is a directory level).

    Parameters
    ----------
    root
        Directory holding the store; created on first write.
    read_only
        Refuse writes when true.
    """

    def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self.root = Path(root).expanduser().absolute()
        self._root_str = os.path.normpath(str(self.root))
        self._root_prefix = os.path.join(self._root_str, "")  # with one trailing separator
        self._real_root: str | None = None
        self._lock_base: str | None = None
        # per directory: whether a short read must be confirmed as the end
        # (see _read_rest)
        self._confirm_dirs: dict[str, bool] = {}
        # Directories checked to resolve inside the root; and those whose stale
        # temporaries this store object has already cleaned up.
        self._safe_dirs: set[str] = set()
        self._cleaned_dirs: set[str] = set()
        # Paths of keys checked already, in directories that are checked too: a
        # key's checks depend on the key alone once its directory is known safe
        # (a small read resolves two keys, ~4 us each).
        self._paths: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_safe_dirs"] = set()
        state["_paths"] = {}
        state["_cleaned_dirs"] = set()
        state["_lock_base"] = None  # under the temp dir of the process using it
        state["_confirm_dirs"] = {}  # file systems as the unpickling machine sees them
        return state

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def __str__(self) -> str:
        return f"file://{self._root_str}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other._root_str == self._root_str

    def __hash__(self) -> int:
        return hash(self._root_str)

    def _path(self, key: str) -> str:
        path = self._paths.get(key) if type(key) is str else None
        if path is not None:
            return path
        path = self._key_path(key)
        directory = os.path.dirname(path)
        if directory not in self._safe_dirs:
            self._check_dir(key, directory)
        if directory in self._safe_dirs:
            if len(self._paths) >= _PATHS_MAX:
                self._paths.clear()
            self._paths[key] = path
        return path

    def _key_path(self, key: str) -> str:
        """``key``'s path below the root, from the key alone (no symlink checks):
        refuses keys that are malformed, reserved, or lead outside the root."""
        if type(key) is str and _PLAIN_KEY.fullmatch(key):
            return self._root_prefix + key
        normalize_key(key)
        for part in key.split("/"):
            if part.startswith(_RESERVED):
                raise StoreKeyError(f"key {key!r} uses a name reserved for cuzarr's temporaries")
            if len(part) > 255 or (len(part) >= 2 and part[1] == ":" and part[0].isalpha()):
                # Too long for any filesystem; or a Windows drive ('C:') component.
                raise StoreKeyError(f"invalid store key {key!r}")
        path = os.path.join(self._root_str, key)
        # normalize_key already rejects '..', '.', empty parts, backslashes and
        # absolute keys, so the join stays below the root; checked again here as
        # a plain prefix test (os.path.commonpath cost ~3 us a key).
        if not path.startswith(self._root_prefix):
            raise StoreKeyError(f"key {key!r} resolves outside the store root")
        return path

    def _check_dir(self, key: str, directory: str) -> None:
        """Refuse a key whose directory resolves (through symlinks) outside the root."""
        if self._real_root is None:
            self._real_root = os.path.realpath(self._root_str)
        # Only existing components can be symlinks: check the deepest existing
        # ancestor (a new array's chunk directories do not exist yet, and a full
        # realpath of them on every write cost ~8% of a write's CPU time).
        existing = directory
        while (
            existing not in self._safe_dirs
            and len(existing) > len(self._root_str)
            and not os.path.lexists(existing)
        ):
            existing = os.path.dirname(existing)
        if existing in self._safe_dirs:
            return
        real = self._realpath_below_root(existing)
        if real != self._real_root and not real.startswith(os.path.join(self._real_root, "")):
            raise StoreKeyError(f"key {key!r} resolves outside the store root (symlink)")
        if os.path.isdir(existing):
            # Cache only what exists. A directory swapped for a symlink later, while
            # this store object is in use, goes unnoticed (docs/reliability.md).
            self._safe_dirs.add(existing)

    def _realpath_below_root(self, path: str) -> str:
        """``os.path.realpath(path)`` of an existing ``path`` inside the root (no
        '..' parts), resolved from the root's real path already known: only the
        parts below the root are looked at (a store opened by path name, as every
        ``open_array(str)`` does, resolved the root's parts twice)."""
        assert self._real_root is not None
        rel = path[len(self._root_prefix) :] if path.startswith(self._root_prefix) else None
        if rel is None or path == self._root_str:
            return os.path.realpath(path)
        real = self._real_root
        for part in rel.split("/") if os.sep == "/" else rel.replace("\\", "/").split("/"):
            if not part:
                continue
            candidate = os.path.join(real, part)
            # a symlink is resolved whole (its target may lie anywhere); its
            # parent is a real path already
            real = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
        return real

    def _check_file(self, key: str, path: str) -> None:
        """A symlinked file is followed only if it stays below the root."""
        if self._real_root is None:
            self._real_root = os.path.realpath(self._root_str)
        real = os.path.realpath(path)
        if not real.startswith(os.path.join(self._real_root, "")):
            raise StoreKeyError(f"key {key!r} is a symlink leading outside the store root")

    def lock_keys(self, keys: Iterable[str]) -> _KeyLocks:
        """Exclusive advisory locks on ``keys``, for ``async with``.

        Other processes and threads that take the same locks wait; plain ``set``
        does not take them. A no-op where ``fcntl.flock`` is missing (Windows).
        """
        return _KeyLocks(self, keys)

    # -- blocking helpers (run in threads) --------------------------------------
    def _open_checked(self, key: str, path: str) -> int:
        """A read descriptor for ``path``; a symlink is followed only inside the root."""
        try:
            return os.open(path, _RDONLY_NOFOLLOW)
        except OSError as e:
            if not _NOFOLLOW or e.errno != errno.ELOOP:
                raise
        self._check_file(key, path)
        return os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    @contextlib.contextmanager
    def _pinned(self) -> Iterator[None]:
        """Within the block, this thread's reads of a key use one descriptor,
        opened on its first read: a shard's index and the inner chunks it
        points to come from the same file even if a writer replaces it meanwhile
        (the replaced file stays readable through the open descriptor)."""
        prev = getattr(_tls, "pins", None)
        pins: dict[str, int] = {}
        _tls.pins = pins
        try:
            yield
        finally:
            _tls.pins = prev
            for fd in pins.values():
                os.close(fd)

    def _read_fd(self, key: str, read: Callable[[int], Any]) -> Any:
        """``read(fd)`` on ``key``'s file; ``None`` when the key is missing."""
        path = self._path(key)
        pins = getattr(_tls, "pins", None)
        try:
            if pins is not None:  # kept open for the rest of the pinned plan
                fd = pins.get(path)
                if fd is None:
                    fd = pins[path] = self._open_checked(key, path)
                return read(fd)
            fd = self._open_checked(key, path)
            try:
                return read(fd)
            finally:
                os.close(fd)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            if e.errno == errno.ENAMETOOLONG:
                return None
            raise

    def _read(
        self, key: str, byte_range: ByteRequest | None, reuse: bool = False
    ) -> bytes | memoryview | None:
        check_byte_range(byte_range)
        def read(fd: int) -> bytes | memoryview:
            # pread on the raw descriptor: no buffered-reader object, no seeks.
            if byte_range is None:
                return _read_all_reused(fd) if reuse else _read_all(fd)
            if isinstance(byte_range, RangeByteRequest):
                return _pread(fd, max(0, byte_range.end - byte_range.start), byte_range.start)
            if isinstance(byte_range, OffsetByteRequest):
                size = os.fstat(fd).st_size
                return _pread(fd, max(0, size - byte_range.offset), byte_range.offset)
            if isinstance(byte_range, SuffixByteRequest):
                size = os.fstat(fd).st_size
                start = max(0, size - byte_range.suffix)
                return _pread(fd, size - start, start)
            raise TypeError(f"unsupported byte range {byte_range!r}")

        return self._read_fd(key, read)

    def _read_whole_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """Whole values of ``keys`` (``None`` where missing): ``_read`` with the
        per-file work cut to open, read, close, for batches of small chunks."""
        if getattr(_tls, "pins", None) is not None:
            return [self._read(k, None) for k in keys]
        out: list[bytes | None] = []
        guess = _GUESS
        # Paths first, then the system calls with little Python between them
        # (see _write_batch): two threads reading 20,000 small files from tmpfs
        # took 0.18-0.21 s with the path lookup between the calls, against
        # 0.14 s for one thread.
        paths = [self._path(key) for key in keys]
        # Whether a short read must be confirmed as the end, per directory (a
        # mount point may lie anywhere in the store's tree): its file system's
        # type, looked up once per directory and store object.
        if os.sep == "/":
            known = self._confirm_dirs
            confirms = []
            last, c = None, True
            for path in paths:
                directory = path[: path.rfind("/")]
                if directory != last:  # the files of a batch share a few directories
                    last = directory
                    c = known.get(directory)
                    if c is None:
                        c = self._confirm_in(directory)
                confirms.append(c)
        else:
            confirms = [True] * len(paths)
        open_, read, close = os.open, os.read, os.close
        for key, path, confirm in zip(keys, paths, confirms):
            try:
                fd = open_(path, _RDONLY_NOFOLLOW)
            except (FileNotFoundError, NotADirectoryError):
                out.append(None)
                continue
            except OSError:
                # a symlink (followed only inside the root), a name too long, ...:
                # the general path decides
                out.append(self._read(key, None))
                continue
            try:
                data = read(fd, guess)
                if len(data) >= guess or confirm:
                    data = _read_rest(fd, data, guess, confirm)
            except IsADirectoryError:
                out.append(None)
                continue
            finally:
                close(fd)
            if len(data) >= guess:
                guess = min(REUSE_MAX, len(data) + (len(data) >> 3) + 1)
            out.append(data)
        return out

    def _confirm_in(self, directory: str) -> bool:
        """Whether a short read of a file in ``directory`` must be confirmed by
        one more read (its file system is not known to read in full); cached
        once the directory could be looked at."""
        full = _reads_full(directory)
        if full is None:
            return True  # not there (yet): the files in it are missing too
        if len(self._confirm_dirs) >= _PATHS_MAX:
            self._confirm_dirs.clear()
        self._confirm_dirs[directory] = not full
        return not full

    def _read_ranges_reused(
        self, reqs: Sequence[tuple[str, ByteRequest | None]]
    ) -> list[bytes | memoryview | None]:
        """Like ``_read_batch``, with the values of explicit ranges in this
        thread's reusable buffer (see ``SyncIO.get_ranges_reused``)."""
        sizes = [
            max(0, r.end - r.start) if isinstance(r, RangeByteRequest) else -1 for _, r in reqs
        ]
        if min(sizes, default=0) < 0 or sum(sizes) > REUSE_MAX:
            return self._read_batch(reqs)
        view = _thread_buffer(sum(sizes))
        out: list[bytes | memoryview | None] = []
        pos = 0
        for (key, r), n in zip(reqs, sizes, strict=True):
            part = view[pos : pos + n]
            out.append(
                self._read_fd(key, lambda fd, part=part, r=r: _pread_into(fd, part, r.start))
            )
            pos += n
        return out

    def file_ref(self, key: str) -> LocalFile | None:
        """Where ``key``'s bytes lie on disk (path and size), for readers that read
        files themselves (GPUDirect Storage); ``None`` when the key is missing. The
        same key checks as a read apply (no escaping the root, no symlinks out)."""
        path = self._path(key)
        try:
            fd = self._open_checked(key, path)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return LocalFile(path, st.st_size)

    def _read_into(
        self, keys: Sequence[str], place: Callable[[list[int | None]], tuple[Any, list[int]]]
    ) -> tuple[list[memoryview | bytes | None], list[int]]:
        """``SyncIO.get_into``: sizes from ``stat`` (no descriptor held between the
        passes), then each file read into its place. A file whose size changed
        in between (or a symlink) is read as separate bytes instead."""
        sizes: list[int | None] = []
        for key in keys:
            try:
                st = os.stat(self._path(key), follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                sizes.append(None)
                continue
            except OSError as e:
                if e.errno != errno.ENAMETOOLONG:
                    raise
                sizes.append(None)
                continue
            sizes.append(st.st_size if stat.S_ISREG(st.st_mode) else None)
        buf, where = place(sizes)
        view = memoryview(buf).cast("B")
        values: list[memoryview | bytes | None] = []
        offsets: list[int] = []
        for key, n, at in zip(keys, sizes, where, strict=True):

            def read(fd: int, n: int | None = n, at: int = at) -> memoryview | bytes:
                size = os.fstat(fd).st_size
                if n is None or at < 0 or size != n or at + n > len(view):
                    return _pread(fd, size, 0)
                return _pread_into(fd, view[at : at + n], 0)

            value = self._read_fd(key, read)
            inside = isinstance(value, memoryview) and n is not None and len(value) == n
            offsets.append(at if inside else -1)
            values.append(value if inside or not isinstance(value, memoryview) else bytes(value))
        return values, offsets

    def _read_batch(self, reqs: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        return [self._read(k, r) for k, r in reqs]

    @property
    def takes_parts(self) -> bool:
        """Whether values may be :class:`~cuzarr.storage.base.Concat` (written with
        ``os.writev``): not when a subclass overrides ``set``, which gets bytes."""
        return type(self).set is LocalStore.set and hasattr(os, "writev")

    def sync_io(self) -> SyncIO | None:
        cls = type(self)
        if (
            cls.get is not LocalStore.get
            or cls.set is not LocalStore.set
            or cls.delete is not LocalStore.delete
        ):
            return None
        return SyncIO(
            self._read_whole_many,
            self._set_many_sync,
            self._delete_many_sync,
            self._read_batch,
            lambda key: self._read(key, None, reuse=True),
            self._read_ranges_reused,
            self._pinned,
            self._read_into,
        )

    def _set_many_sync(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._check_writable()
        self._write_batch(items)

    def _delete_many_sync(self, keys: Sequence[str]) -> None:
        self._check_writable()
        self._remove_batch(keys)

    def _write(self, key: str, value: bytes, exclusive: bool = False) -> None:
        """Write ``value`` to a temporary file, then move it into place; with
        ``exclusive``, only if ``key`` holds nothing yet (a hard link, which fails
        if the name exists: atomic against other writers doing the same)."""
        path = self._path(key)
        directory, name = os.path.split(path)
        if directory not in self._cleaned_dirs:
            # The first write into a directory through this store object removes
            # what killed writers left there (one scandir per directory).
            self._cleaned_dirs.add(directory)
            self._cleanup_dir(directory)
        short = False
        for _attempt in range(8):
            tmp = os.path.join(directory, _temp_name(name[:_SHORT_NAME] if short else name))
            fd = None
            try:
                try:
                    fd = _write_file(tmp, value)
                except FileExistsError:
                    continue  # another writer's temporary by that name: not ours to remove
                except FileNotFoundError:
                    if not os.path.isdir(directory):
                        os.makedirs(directory, exist_ok=True)
                        self._check_dir(key, directory)
                    # made now; or our temporary was removed by a cleaner (another
                    # writer's first write there) between its creation and our
                    # lock on it: a new name
                    continue
                except OSError as e:
                    if e.errno != errno.ENAMETOOLONG or short:
                        raise
                    short = True  # the temporary's name, not the key's, may be too long
                    continue
                if exclusive:
                    self._link_if_absent(tmp, path)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)  # gone if it was moved into place instead
                else:
                    os.replace(tmp, path)
                return
            except BaseException as e:
                if fd is not None or not isinstance(e, FileExistsError):
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                if isinstance(e, OSError):
                    _raise_for_key(e, key, path)
                raise
            finally:
                if fd is not None:
                    os.close(fd)
        raise OSError(
            f"could not write {key!r}: its temporary kept disappearing, or its "
            "temporary names were taken by other files"
        )

    @staticmethod
    def _link_if_absent(tmp: str, path: str) -> None:
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
                os.replace(tmp, path)

    def _write_batch(self, items: Sequence[tuple[str, bytes]]) -> None:
        if fcntl is None or os.sep != "/" or len(items) < 2:
            for key, value in items:
                self._write(key, value)
            return
        # The Python work of the whole batch first (paths, temporary names), then
        # the system calls with as little Python between them as can be: each
        # call hands the GIL over, and two threads writing small files only scale
        # while neither is busy in Python when the other returns from a call.
        # Measured on 2 cores (tmpfs, 20,000 files): two threads took 0.38 s with
        # a path split and join between the calls, 0.22 s without (one: 0.37 s).
        plan = []
        cleaned, safe = self._cleaned_dirs, self._safe_dirs
        known, key_path = self._paths, self._key_path
        for key, value in items:
            # directories are checked below (the general way), once each
            path = (known.get(key) if type(key) is str else None) or key_path(key)
            directory, _, name = path.rpartition("/")
            # Only a directory checked already: one that is a symlink out of the
            # root must be refused before anything in it is removed (_write
            # checks the others first, then cleans them).
            if directory in safe and directory not in cleaned:
                # The first write into a directory through this store object
                # removes what killed writers left there (one scandir per directory).
                cleaned.add(directory)
                self._cleanup_dir(directory)
            if isinstance(value, Concat):
                # a shard's parts: the general way writes them with writev
                # (large and few: the tight loop below gains nothing on them)
                self._write(key, value)
                continue
            if type(value) is not bytes:
                value = memoryview(value).cast("B")  # len() counts bytes
            plan.append((key, value, path, directory, f"{directory}/{_temp_name(name)}"))
        flock, lock_ex, fstat = fcntl.flock, fcntl.LOCK_EX, os.fstat
        open_, write, replace, close = os.open, os.write, os.replace, os.close
        for key, value, path, directory, tmp in plan:
            if directory not in safe:
                # not checked yet (not made yet, say): the general way makes and
                # checks it, and the batch's later files there come this way
                self._write(key, value)
                continue
            try:
                fd = open_(tmp, _CREATE_NEW, 0o666)
            except OSError:
                self._write(key, value)  # a missing directory, a name taken, ...
                continue
            try:
                flock(fd, lock_ex)  # marks it live, as _write_file does
                # not linked: a cleaner removed it before we locked it
                done = fstat(fd).st_nlink != 0 and write(fd, value) == len(value)
                if done:
                    replace(tmp, path)
            except BaseException as e:
                close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                if isinstance(e, OSError):
                    _raise_for_key(e, key, path)
                raise
            close(fd)
            if not done:  # or a short write: the general way, which loops
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                self._write(key, value)

    def _remove(self, key: str) -> None:
        path = self._path(key)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                _rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass

    def _remove_batch(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._remove(key)

    # -- async interface ---------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        return await asyncio.to_thread(self._read, key, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[bytes | None]:
        if type(self).get is not LocalStore.get:
            return await super().get_partial_values(prototype, key_ranges)
        reqs = list(key_ranges)
        if len(reqs) <= 1:
            return self._read_batch(reqs) if reqs else []
        from cuzarr.core.sync import io_semaphore

        sem = io_semaphore()

        async def batch(part: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
            async with sem:
                return await asyncio.to_thread(self._read_batch, part)

        parts = [reqs[i : i + _BATCH] for i in range(0, len(reqs), _BATCH)]
        results = await asyncio.gather(*(batch(p) for p in parts))
        return [v for part in results for v in part]

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key`` (``FileNotFoundError`` if it holds nothing)."""
        path = self._path(key)
        if os.path.islink(path):
            self._check_file(key, path)  # as get: no symlinks out of the root
        if not os.path.isfile(path):
            raise FileNotFoundError(key)
        return os.path.getsize(path)

    async def exists(self, key: str) -> bool:
        path = self._path(key)
        if not os.path.isfile(path):
            return False
        if os.path.islink(path):
            self._check_file(key, path)  # as get: no symlinks out of the root
        return True

    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()
        await asyncio.to_thread(self._write, key, as_bytes_like(value))

    async def set_if_not_exists(self, key: str, value: bytes) -> None:
        if type(self).set is not LocalStore.set:
            return await super().set_if_not_exists(key, value)  # through the override
        self._check_writable()
        await asyncio.to_thread(self._write, key, as_bytes_like(value), True)

    async def move(self, dest_root: str | os.PathLike[str]) -> None:
        """Move the store's directory to ``dest_root`` (which must not exist) and
        use it from now on, as zarr-python's ``LocalStore.move``."""
        self._check_writable()
        dest = Path(dest_root).expanduser().absolute()

        def move() -> None:
            if dest.exists():
                raise FileExistsError(f"Destination root {dest} already exists.")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(self._root_str, dest)

        await asyncio.to_thread(move)
        # every cached path and check was made for the old root
        LocalStore.__init__(self, dest, read_only=self.read_only)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if type(self).set is not LocalStore.set:
            return await super().set_many(items)
        self._check_writable()
        items = list(items)
        for key, _ in items:
            self._path(key)
        from cuzarr.core.sync import io_semaphore

        sem = io_semaphore()

        async def batch(part: Sequence[tuple[str, bytes]]) -> None:
            async with sem:
                await in_thread(self._write_batch, part)

        # Big values get their own thread hop so large writes overlap.
        size = _BATCH if sum(len(v) for _, v in items[:8]) < (1 << 20) else 1
        await gather_or_cancel(
            *(batch(items[i : i + size]) for i in range(0, len(items), size))
        )

    async def delete(self, key: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._remove, key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        if type(self).delete is not LocalStore.delete:
            return await super().delete_many(keys)
        self._check_writable()
        keys = list(keys)
        if keys:
            await asyncio.to_thread(self._remove_batch, keys)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        if prefix.startswith("/"):
            return  # no key starts with "/": "/" names no directory (as zarr-python)
        prefix = prefix.strip("/")
        await asyncio.to_thread(self._delete_dir_sync, prefix)

    def _delete_dir_sync(self, prefix: str) -> None:
        """Remove the directory ``prefix`` ("" = the root, which stays, empty). A
        symlinked directory (inside the root) keeps its link and target, emptied.
        Errors other than entries already gone propagate: a failed delete must not
        pass for a done one (an overwrite would then show old chunks)."""
        if not prefix:
            self._empty_dir(self._root_str)
            return
        path = self._path(prefix)
        # Resolved afresh, not from the cache of checked directories: a directory
        # swapped for a symlink since would otherwise lead a delete out of the root.
        real = os.path.realpath(path)
        root = os.path.realpath(self._root_str)
        if not real.startswith(os.path.join(root, "")):
            raise StoreKeyError(f"directory {prefix!r} resolves outside the store root (symlink)")
        if os.path.islink(path):
            if os.path.join(os.path.realpath(os.path.dirname(path)), "").startswith(
                os.path.join(real, "")
            ):
                # a link to an ancestor of itself: emptying it would delete siblings
                raise StoreKeyError(f"directory {prefix!r} is a symlink to one of its parents")
            if os.path.isdir(real):
                self._empty_dir(real)
            return
        if os.path.isdir(path):
            _rmtree(path)

    @staticmethod
    def _empty_dir(path: str) -> None:
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

    def _dir_path(self, prefix: str) -> str:
        """The directory ``prefix`` names, refused (``StoreKeyError``) if it is, or
        passes through, a symlink leading out of the root."""
        prefix = prefix.strip("/")
        if not prefix:
            return self._root_str
        base = self._path(prefix)
        self._check_dir(prefix, base)
        return base

    def _walk(self, prefix: str) -> list[str]:
        base = self._dir_path(prefix)
        out: list[str] = []
        if not os.path.isdir(base):
            return out
        root_len = len(self._root_str) + 1
        for dirpath, _dirnames, filenames in os.walk(base):
            for name in filenames:
                if name.startswith(_RESERVED):
                    continue
                out.append(os.path.join(dirpath, name)[root_len:].replace(os.sep, "/"))
        return out

    def list(self) -> AsyncIterator[str]:
        return self.list_prefix("")

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            # Walk only the directory the prefix names, then filter.
            directory = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
            for key in await asyncio.to_thread(self._walk, directory):
                if key.startswith(prefix):
                    yield key

        return gen()

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            base = self._dir_path(prefix)
            try:
                names = await asyncio.to_thread(os.listdir, base)
            except (FileNotFoundError, NotADirectoryError):
                return
            for name in sorted(names):
                if not name.startswith(_RESERVED):
                    yield name

        return gen()

    async def clear(self) -> None:
        self._check_writable()
        # the root stays (empty), as in zarr-python: it may be a mount point or a
        # directory with permissions of its own
        await asyncio.to_thread(self._empty_dir, self._root_str)

    @staticmethod
    def _cleanup_dir(directory: str) -> int:
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

    def cleanup_temporaries(self, prefix: str = "") -> int:
        """Remove temporaries and lock files left by killed writers below ``prefix``.

        Files a live writer holds (``flock``) are kept, so this is safe to run while
        other processes write. Returns how many files were removed. Writers call
        the per-directory part of this on their first write into each directory.
        """
        base = self._dir_path(prefix)
        n = 0
        for dirpath, _dirs, _files in os.walk(base):
            n += self._cleanup_dir(dirpath)
        return n
