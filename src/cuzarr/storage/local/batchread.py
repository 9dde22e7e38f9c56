"""``SyncIO.get_into`` and ``get_ranges_into`` of a local store: values and
byte ranges read straight into a buffer the caller lays out. Through the C
loops of :mod:`cuzarr.runtime.native` where built: a batch's files opened and
sized in one call, placed by the caller, then read into their places (and
their zstd frames walked) in another, without the GIL.

What the C loops do not do (a key whose path is not known safe yet, an open
that failed, a short read, a value that does not fit its place) goes through
``LocalStore``'s Python path for that key, which answers or raises exactly as a
batch read without the C loops does; so does a batch of more than
``HOLD_MAX`` keys, or one in a pinned block that holds descriptors already.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cuzarr.buffer.placed import PlacedViews
from cuzarr.runtime import native
from cuzarr.storage.local.files import (
    _RDONLY_NOFOLLOW,
    _TYPE_CHECK_ABOVE,
    _file_size,
    _pread_into,
    _read_placed_all,
)

__all__ = ["HOLD_MAX", "get_into", "read_into", "read_ranges", "read_ranges_into"]

# (values, offsets): offsets a list, or the caller's int64 array from ``place``
Placed = tuple[Sequence[Any], list[int] | np.ndarray]


# Descriptors ``get_into`` holds open between sizing and reading a batch of
# keys; beyond, sizes come from ``stat`` (see :func:`get_into`)
HOLD_MAX = 256


def get_into(store: Any, keys: Sequence[str], place: Callable[[Any], tuple[Any, Any]],
             each: Callable[[int, int, int], Any] | None, frames: Any,
             pins: dict[str, int] | None) -> Placed:
    """``SyncIO.get_into`` of ``store`` (a ``LocalStore``; ``pins``: the calling
    thread's pinned block, if any): each file opened and sized with ``fstat``
    (no ``stat`` walking the path a second time), placed, then read into its
    place through the descriptor it was sized by (``each(j, offset, n)`` right
    after, see ``_read_placed_all``). Beyond ``HOLD_MAX`` keys, sizes come from
    ``stat`` and a file whose size changed in between (or a symlink) is read as
    separate bytes instead. Batches of up to ``HOLD_MAX`` keys outside a pinned
    block go through the C loops where built (:func:`read_into`: ``frames``
    filled there)."""
    if not pins and len(keys) <= HOLD_MAX and native.available():
        # (a pinned block that has opened nothing yet: whole shards read
        # first thing in it; their descriptors are then kept in it)
        return read_into(store, keys, place, each, frames, pins)
    held: list[int | None] = []
    sizes: list[int | None] = []
    try:
        _open_all(store, keys, pins, held, sizes)
        buf, where = place(sizes)
        return _read_placed_all(store, keys, held, sizes, where, memoryview(buf).cast("B"), each)
    finally:
        if pins is None:
            for fd in held:
                if fd is not None:
                    os.close(fd)


def _open_all(store: Any, keys: Sequence[str], pins: dict[str, int] | None,
              held: list[int | None], sizes: list[int | None]) -> None:
    """``get_into``'s first pass in Python: a descriptor (or ``None``) and a
    size per key, appended to ``held`` and ``sizes``. A key whose path is known
    safe is opened and sized right here (the common case: two system calls and
    no other Python call); the others, and any failure, take the store's
    ``_open_sized``."""
    known = store._paths.get
    open_, lseek, SEEK_END = os.open, os.lseek, os.SEEK_END
    hold, size_of = held.append, sizes.append
    for j, key in enumerate(keys):
        path = known(key) if pins is None and type(key) is str else None
        if path is not None and j < HOLD_MAX:
            try:
                fd = open_(path, _RDONLY_NOFOLLOW)
            except OSError:
                fd = None
            if fd is not None:
                hold(fd)
                size = lseek(fd, 0, SEEK_END)
                size_of(size if size < _TYPE_CHECK_ABOVE else _file_size(fd))
                continue
        if j < HOLD_MAX or pins is not None:
            fd, size = store._open_sized(key, pins)
        else:
            fd, size = None, store._stat_size(key)
        hold(fd)
        size_of(size)


def read_into(store: Any, keys: Sequence[str],
              place: Callable[[Any], tuple[Any, list[int] | np.ndarray]],
              each: Callable[[int, int, int], Any] | None,
              frames: np.ndarray | None, pins: dict[str, int] | None = None) -> Placed:
    """``get_into(keys, place, each, frames)`` of ``store`` (a ``LocalStore``):
    see ``SyncIO.get_into``. ``frames`` (``uint64``) is filled for every value
    the C loop read (the compressed size of the zstd frame it starts with);
    ``each`` is called for the others, and for all of them when ``frames`` is
    None. ``pins``: the calling thread's pinned block (path -> descriptor),
    empty so far: the descriptors opened here are kept in it, for the block's
    later reads of the same keys, instead of closed."""
    # keys whose paths the store checked already, looked up in C
    keys = keys if type(keys) is list else list(keys)
    fds, sizes, flags = native.open_sized(keys, store._paths)
    try:
        if flags & native.OPEN_SKIPPED:  # keys not checked yet (a store's first read of them)
            _check_new(store, keys, fds, sizes)
        held: list[int | None] | None = None
        told: list[int | None] | None = None
        gone = 0  # keys with no file (as LocalStore's Python path counts them missing)
        bad = int(np.count_nonzero((fds | sizes) < 0)) if flags else 0
        if bad:  # a failed open, or no regular file's size
            lost = np.isin(fds, _GONE)
            gone = int(np.count_nonzero(lost))
            if gone != bad:  # (not only keys with no file)
                held, told, gone = *_slow_opens(store, keys, fds, sizes), 0
        if told is not None:
            buf, where = place(told)
        else:  # (an int64 array, -1 where missing: no list to convert back)
            buf, where = place(sizes)
        at = np.asarray(where, np.int64)  # (the C placement's array as it is)
        if gone:  # (missing values lie nowhere, whatever the caller placed)
            at = np.where(lost, -1, at)
        got, count = native.read_placed(fds, sizes, at, buf, frames)
        view = memoryview(buf).cast("B")
        if frames is None and each is not None:
            for j in np.flatnonzero(got).tolist():
                each(j, int(at[j]), int(sizes[j]))
        if count + gone == len(keys):
            return PlacedViews(view, at, sizes, complete=not gone), at
        where = at.tolist()
        if held is None:  # (keys with no file: no descriptor, no size, as _slow_opens says)
            held = [None if fd < 0 else fd for fd in fds.tolist()]
            told = [None if n < 0 else n for n in sizes.tolist()]
        return _finish(store, keys, held, told, where, view, got, each)  # type: ignore[arg-type]
    finally:
        if pins is not None:
            _keep_pinned(store, keys, fds, pins)
        native.close_fds(fds)


def read_ranges_into(store: Any, keys: Sequence[str], starts: np.ndarray, sizes: np.ndarray,
                     place: Callable[[np.ndarray], tuple[Any, Any]], pins: dict[str, int] | None,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``SyncIO.get_ranges_into`` of ``store`` (a ``LocalStore``): each key's
    file opened and sized once (``LocalStore._open_sized``; in the pinned block
    ``pins``: the block's descriptor, opened there if not yet), a range to the
    value's end (size -1) sized by it, the ranges read into their places."""
    held = pins if pins is not None else {}
    try:
        by_key: dict[str, tuple[int | None, int | None]] = {}  # (a shard's ranges: one open)
        opened = [by_key[k] if k in by_key else by_key.setdefault(k, store._open_sized(k, held))
                  for k in keys]
        fds = np.fromiter((-1 if fd is None else fd for fd, _ in opened), np.int64, len(keys))
        sizes = np.array(sizes, np.int64)  # (the caller's stays as it was)
        for j in np.flatnonzero(sizes < 0).tolist():  # to the value's end
            sizes[j] = max(0, (opened[j][1] or 0) - int(starts[j]))
        sizes[fds < 0] = -1  # missing: placed nowhere
        buf, where = place(sizes)
        at = np.asarray(where, np.int64)
        return at, sizes, read_ranges(fds, starts, sizes, at, buf)
    finally:
        if pins is None:
            for fd in held.values():
                os.close(fd)


def read_ranges(fds: np.ndarray, starts: np.ndarray, sizes: np.ndarray, at: np.ndarray,
                buf: Any) -> np.ndarray:
    """Range ``j`` (``sizes[j]`` bytes of descriptor ``fds[j]`` from
    ``starts[j]`` on) read into ``buf[at[j]:]``: through the C loops where
    built, else one ``preadv`` each. Returns where it was read whole (bool)."""
    if native.available():
        return native.read_placed(fds, sizes, at, buf, None, starts)[0]
    view = memoryview(buf).cast("B")
    got = np.zeros(len(fds), bool)
    for j, (fd, start, n, to) in enumerate(zip(fds.tolist(), starts.tolist(), sizes.tolist(),
                                               at.tolist(), strict=True)):
        if fd >= 0 and n >= 0 and start >= 0 and 0 <= to <= len(view) - n:
            got[j] = len(_pread_into(fd, view[to : to + n], start)) == n
    return got


# open(2)'s answers for a key with no file (as ``files._is_missing`` counts them),
# negated as ``native.open_sized`` reports them
_GONE = np.array([-errno.ENOENT, -errno.ENOTDIR, -errno.EISDIR, -errno.ENAMETOOLONG],
                 np.int64)


def _keep_pinned(store: Any, keys: list[str], fds: np.ndarray, pins: dict[str, int]) -> None:
    """The descriptors of ``fds`` handed to a pinned block (``fds[j]`` set to -1),
    each under its key's path, where the block has none for that path yet."""
    known = store._paths
    # (a plain loop: a pinned block reads a few shards, and numpy's calls cost
    # more than the loop right after their copies)
    for j, fd in enumerate(fds.tolist()):
        if fd < 0:
            continue
        path = known.get(keys[j]) if type(keys[j]) is str else None
        if path is not None and path not in pins:
            pins[path] = fd
            fds[j] = -1


def _check_new(store: Any, keys: list[str], fds: np.ndarray, sizes: np.ndarray) -> None:
    """Keys the C loop skipped as not checked yet: their paths checked (and
    kept by the store) in one pass, then opened in C too. A key whose check
    fails stays skipped: ``_slow_opens`` raises its error. (Checked one by one
    in ``_slow_opens`` instead, a first read of 1,024 chunk files cost ~12 us
    more per chunk than a later one.)"""
    skipped = np.flatnonzero(fds == -1).tolist()
    for j in skipped:
        key = keys[j]
        if type(key) is str:
            with contextlib.suppress(Exception):
                store._path(key)  # cached where the key and its directory are safe
    again, more, _ = native.open_sized([keys[j] for j in skipped], store._paths)
    fds[skipped] = again
    sizes[skipped] = more


def _slow_opens(store: Any, keys: Sequence[str], fds: np.ndarray,
                sizes: np.ndarray) -> tuple[list[int | None], list[int | None]]:
    """Descriptors and sizes where the C loop opened or sized a file not as the
    common case: keys it did not open go through the store's Python path (which
    checks the key and raises what it should), and a file with no regular size
    is sized ``None``. Returns them as lists (``fds`` and ``sizes`` follow)."""
    held: list[int | None] = fds.tolist()
    told: list[int | None] = sizes.tolist()
    for j in np.flatnonzero(fds < 0).tolist():
        # not opened here (path not known safe yet, or the open failed)
        fd, size = store._open_sized(keys[j], None)
        if fd is not None:
            fds[j] = fd  # closed with the others
        held[j] = fd
        told[j] = size
        sizes[j] = -1 if size is None else size
    for j in np.flatnonzero((fds >= 0) & (sizes < 0)).tolist():
        told[j] = None  # open, but no regular file's size
    return held, told


def _finish(store: Any, keys: Sequence[str], held: list[int | None], told: list[int | None],
            where: list[int], view: memoryview, got: np.ndarray,
            each: Callable[[int, int, int], Any] | None) -> Placed:
    """The values of a batch some of which the C loop did not read: those read
    by ``_read_placed_all`` (its answers, and errors, for them)."""
    values: list[Any] = [None] * len(keys)
    offsets = list(where)
    for j in np.flatnonzero(got).tolist():
        values[j] = view[where[j] : where[j] + told[j]]  # type: ignore[operator]
    rest = np.flatnonzero(~got).tolist()
    sub_each = None if each is None else (lambda i, at, n: each(rest[i], at, n))
    vals, offs = _read_placed_all(store, [keys[j] for j in rest], [held[j] for j in rest],
                                  [told[j] for j in rest], [where[j] for j in rest], view,
                                  sub_each)
    for j, v, o in zip(rest, vals, offs, strict=True):
        values[j] = v
        offsets[j] = o
    return values, offsets
