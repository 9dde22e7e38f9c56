"""Per-key advisory write locks of a local store, shared by threads and
processes: the array engine holds them around the read-modify-write of partly
covered chunks, so concurrent partial writers never lose each other's updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import stat
import struct
import sys
import tempfile
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cuzarr.storage import keylocks
from cuzarr.storage.local.files import _NOFOLLOW, _try_lock_path, _unlock_path, fcntl

if TYPE_CHECKING:
    from cuzarr.storage.local.store import LocalStore


_OFD = fcntl is not None and hasattr(fcntl, "F_OFD_SETLK")


def _try_lock_range(fd: int, offset: int, length: int = 1) -> bool:
    """Open-file-description lock on ``length`` bytes of a lock file (all or none)."""
    flock = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, offset, length, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock)
    except BlockingIOError:
        return False
    return True


try:
    import msvcrt
except ImportError:  # not Windows
    msvcrt = None  # type: ignore[assignment]


def _lock_mode() -> str | None:
    """How key locks are taken here: byte-range locks ("ofd": Linux's
    open-file-description locks; "msvcrt": Windows), one ``flock``ed file per
    key ("flock": other POSIX systems), or, with no file locks at all,
    "process": a table in this process (its threads exclude each other, other
    processes are not coordinated)."""
    if _OFD:
        return "ofd"
    if msvcrt is not None:
        return "msvcrt"
    if fcntl is not None:
        return "flock"
    return "process"


_MODE = _lock_mode()
_LOCK_FLAGS = os.O_RDWR | _NOFOLLOW | getattr(os, "O_BINARY", 0)


# "process" mode: the (stripe, byte) locks held in this process
_local_held: set[tuple[int, int]] = set()
_local_guard = threading.Lock()


def _try_lock_local(stripe: int, start: int, length: int) -> bool:
    """Take bytes ``start`` .. ``start + length`` of ``stripe`` in this process's
    table, all or none."""
    want = [(stripe, b) for b in range(start, start + length)]
    with _local_guard:
        if any(w in _local_held for w in want):
            return False
        _local_held.update(want)
    return True


def _unlock_local(stripe: int, start: int, length: int) -> None:
    with _local_guard:
        _local_held.difference_update((stripe, b) for b in range(start, start + length))


def _try_lock_range_msvcrt(fd: int, offset: int, length: int) -> bool:
    """Windows byte-range lock (``LockFile`` through the C runtime's ``_locking``,
    which locks from the file position; per handle, as OFD locks; offsets past
    the end of the file are allowed)."""
    os.lseek(fd, offset, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, length)
    except OSError:
        return False
    return True


def _unlock_range_msvcrt(fd: int, offset: int, length: int) -> None:
    # Windows releases a closed handle's locks "when resources allow": unlocked
    # explicitly, before the close
    os.lseek(fd, offset, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_UNLCK, length)


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


# Lock files: a fixed set per user, whatever was written (lock files named per
# store root piled up, one for every root ever written, and were never removed).
# A run of bytes goes to the stripe its 2**24-byte block falls in (one chunk
# prefix's keys share a block), so holders of unrelated keys scan short lock
# lists in the kernel.
STRIPES = 64
LOCK_DIR_ENV = "CUZARR_LOCK_DIR"


def stripe_name(i: int) -> str:
    """The name of lock stripe ``i`` in :func:`lock_dir`."""
    return f"stripe-{i:02x}"


def _owned_dir(path: str) -> bool:
    """Whether ``path`` is (now) a directory of this user's own, not a symlink:
    a directory another user made first in a shared place is not used."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def _lock_dir_candidates() -> list[str]:
    """Where the lock directory may go, best first. Never under ``TMPDIR``: a
    batch scheduler gives each job its own, and writers with different ones
    did not exclude each other. ``/dev/shm`` (Linux): memory, emptied at boot
    as locks are, and not aged by temp cleaners (a lock file removed while held
    would let a second writer lock a new file); then ``/tmp`` (the fixed
    path, not ``TMPDIR``); on Windows the user's local application data."""
    env = os.environ.get(LOCK_DIR_ENV)
    if env:
        return [env]
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
        return [os.path.join(base, "cuzarr", "locks")]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    out = [os.path.join(b, f"cuzarr-locks-{uid}") for b in ("/dev/shm", "/tmp", "/var/tmp")]
    return [*out, os.path.join(os.path.expanduser("~"), ".cache", "cuzarr", "locks")]


_STRIPE_NAMES = [stripe_name(i) for i in range(STRIPES)]
# the lock directory and the paths of its stripes, found once per process
_lock_state: tuple[str, list[str]] | None = None


def lock_dir() -> str:
    """The directory of this user's lock files (made if missing), the same for
    every process of the user (``CUZARR_LOCK_DIR`` sets it)."""
    return _lock_paths()[0]


def _lock_paths() -> tuple[str, list[str]]:
    global _lock_state
    if _lock_state is None:
        cands = _lock_dir_candidates()
        chosen = next((c for c in cands if _owned_dir(c)), None)
        if chosen is None:
            raise OSError(f"no usable directory for cuzarr's lock files among {cands}")
        if _MODE == "flock":
            sweep(chosen)
        if fcntl is not None:
            sweep_legacy()
        _lock_state = (chosen, [os.path.join(chosen, stripe_name(i)) for i in range(STRIPES)])
    return _lock_state


_lock_dir = lock_dir  # the name tests and older code use


def sweep(directory: str) -> int:
    """Remove the one-byte lock files (``flock`` mode, off Linux) that killed
    holders left in ``directory``; held ones stay. Returns how many went."""
    n = 0
    try:
        names = [e for e in os.listdir(directory) if e.startswith("stripe-") and e.count("-") == 2]
    except OSError:
        return 0
    for name in names:
        path = os.path.join(directory, name)
        try:
            fd = _try_lock_path(path)
        except OSError:
            continue
        if fd is not None:
            _unlock_path(path, fd)
            n += 1
    return n


# Lock files of cuzarr before the fixed stripes: one per store root (24 hex
# digits, a hash of the root's path), and in flock mode one per key's byte.
_LEGACY_NAME = re.compile(r"[0-9a-f]{24}(?:-[0-9a-f]{16})?")


def sweep_legacy() -> int:
    """Remove the lock files earlier cuzarr versions left, one per store root
    ever written, in ``<tempdir>/cuzarr-locks-<uid>/`` (never cleaned there):
    those no process holds, then the directory if that empties it. Returns how
    many went. (Writers of one array must run versions that lock alike, so no
    current writer needs them.)"""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    d = os.path.join(tempfile.gettempdir(), f"cuzarr-locks-{uid}")
    try:
        names = [n for n in os.listdir(d) if _LEGACY_NAME.fullmatch(n)]
    except OSError:
        return 0
    n = sum(_remove_if_free(os.path.join(d, name)) for name in names)
    with contextlib.suppress(OSError):
        os.rmdir(d)  # only if empty: the new stripes may live there too
    return n


def _remove_if_free(path: str) -> bool:
    """Unlink ``path`` if no lock (range or ``flock``) is held on it."""
    try:
        fd = os.open(path, os.O_RDWR | _NOFOLLOW)
    except OSError:
        return False
    try:
        if _OFD and not _try_lock_range(fd, 0, 0):  # length 0: the whole file, on
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _lock_base(store: LocalStore) -> str:
    """The prefix of the identities of ``store``'s keys: the real path of its
    root, with a separator. A key's identity is then the real path of its file
    as far as the root resolves, the same for every spelling of the root
    (``g.zarr/u`` as the root and ``g.zarr`` with keys under ``u/`` name one
    file alike). Computed once per store object: every batch of writes asks."""
    base = store._lock_base
    if base is None:
        real = os.path.normcase(os.path.realpath(store._root_str))
        base = store._lock_base = os.path.join(real, "")
    return base


def lock_runs(store: LocalStore, keys: Iterable[str]) -> list[tuple[int, int, int]]:
    """The locks of ``keys`` of ``store``: ``(stripe, start, length)`` byte runs,
    in the one order every locker takes them (so two never deadlock)."""
    base = _lock_base(store)
    sep = os.sep
    idents = [base + (k if sep == "/" else k.replace("/", sep)) for k in keys]
    out: list[tuple[int, int, int]] = []
    for start, length in _lock_runs(idents):
        while length:
            # a run split where it crosses into another prefix's block
            block = start >> _TAIL_BITS
            n = min(length, ((block + 1) << _TAIL_BITS) - start)
            out.append((block % STRIPES, start, n))
            start, length = start + n, length - n
    out.sort()
    return out


def _open_created(path: str, flags: int) -> int:
    """``os.open`` with ``O_CREAT``; recreates the lock directory once if a
    cleaner removed it since :func:`lock_dir` made it."""
    try:
        return os.open(path, flags | os.O_CREAT, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return os.open(path, flags | os.O_CREAT, 0o600)


class _KeyLocks:
    """Async context manager holding exclusive locks on a set of keys.

    A key's lock is one byte (see ``_lock_runs``) of one of the ``STRIPES``
    files in :func:`lock_dir`, at a place given by the real path of the key's
    file. Linux: open-file-description locks on byte ranges, which conflict
    between threads as well as processes; neighbouring bytes go in one call.
    Windows: ``msvcrt.locking`` byte ranges (per handle, as those). Elsewhere
    (macOS, BSD) ``flock`` on one file per key's byte, removed on release.
    Runs are locked in one global order, so two lockers never deadlock.
    """

    def __init__(self, store: LocalStore, keys: Iterable[str]) -> None:
        keys = list(keys)  # walked twice below: a generator would lock nothing
        for k in keys:
            # the key's syntax only: its directory is checked when it is written
            if type(k) is not str or k not in store._paths:
                store._key_path(k)
        # the stripes' files (their names alone in "process" mode)
        self.paths = _lock_paths()[1] if _MODE != "process" else _STRIPE_NAMES
        self.keys = keys
        self.wanted = lock_runs(store, keys)
        self.noted: list[tuple[int, int, int]] = []
        self.fds: dict[int, int] = {}
        self.ranges: list[tuple[int, int, int]] = []  # msvcrt: unlocked one by one
        self.local: list[tuple[int, int, int]] = []  # "process" mode
        self.held: list[tuple[str, int]] = []

    def _space(self, stripe: int) -> str:
        return self.paths[stripe]

    def _try(self, run: tuple[int, int, int]) -> bool:
        stripe, start, length = run
        if _MODE == "process":
            if not _try_lock_local(stripe, start, length):
                return False
            self.local.append(run)
            return True
        if _MODE == "ofd" or _MODE == "msvcrt":
            fd = self.fds.get(stripe)
            if fd is None:
                fd = self.fds[stripe] = _open_created(self._space(stripe), _LOCK_FLAGS)
            if _MODE == "ofd":
                return _try_lock_range(fd, start, length)
            if not _try_lock_range_msvcrt(fd, start, length):
                return False
            self.ranges.append((fd, start, length))
            return True
        # one lock file per key's byte; a run is taken whole or not at all
        taken = len(self.held)
        for h in range(start, start + length):
            path = f"{self._space(stripe)}-{h:016x}"
            fd = _try_lock_path(path)
            if fd is None:
                while len(self.held) > taken:
                    _unlock_path(*self.held.pop())
                return False
            self.held.append((path, fd))
        return True

    async def __aenter__(self) -> _KeyLocks:
        try:
            for run in self.wanted:
                stripe, start, length = run
                delay = 0.0005
                # Non-blocking tries polled from the loop: a blocked lock call in a
                # worker thread could starve the threads the holder needs.
                while not self._try(run):
                    keylocks.check_waiter(
                        self._space(stripe), range(start, start + length), self.keys
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.02)
                # noted run by run: a holder of some runs that waits for the next
                # one holds those already
                keylocks.held_by_running_loop(self._space(stripe), range(start, start + length))
                self.noted.append(run)
        except BaseException:
            self._forget_owners()
            self._release()
            raise
        return self

    def _forget_owners(self) -> None:
        # only the runs this object took: another task may hold the others
        for stripe, start, length in self.noted:
            keylocks.released(self._space(stripe), range(start, start + length))
        self.noted.clear()

    def try_acquire(self) -> bool:
        """Take every lock now without waiting (for worker threads, which must
        not block on a holder that may need them); False, holding none, if any
        is busy."""
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
        while self.ranges:
            _unlock_range_msvcrt(*self.ranges.pop())
        while self.local:
            _unlock_local(*self.local.pop())
        while self.fds:
            os.close(self.fds.popitem()[1])  # releases every range this description holds

    async def __aexit__(self, *exc: object) -> None:
        self._forget_owners()
        self._release()
