"""Per-key advisory write locks of a local store, shared by threads and
processes: the array engine holds them around the read-modify-write of partly
covered chunks, so concurrent partial writers never lose each other's updates.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
import tempfile
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
