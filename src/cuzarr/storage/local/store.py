"""A store over a directory of the local filesystem.

Writes go to a temporary file in the destination directory and are renamed into
place, so a writer killed mid-write never leaves a torn value under a real key;
such temporaries carry a reserved prefix and are never listed or read as data.
A writer holds an ``flock`` on its temporary while it lives, so the next writer
into the same directory can tell a killed writer's leftovers (unlocked) from a
live writer's (locked) and removes only the former (see ``cleanup_temporaries``).

``lock_keys`` takes per-key advisory locks (byte-range locks on a fixed set of
files outside the store, one lock per chunk file's real path; see ``locks``); the
array engine holds them around the read-modify-write of partly covered chunks,
so concurrent partial writers, in threads or processes, never lose each other's
updates. Keys are checked to stay below the root: '..',
absolute paths, NUL bytes, backslashes and reserved names are refused, and a
directory that is (or passes through) a symlink leading out of the root is never
read, written or deleted through.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import stat
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cuzarr.errors import StoreKeyError
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
    key_directory,
)
from cuzarr.storage.local import batchread, files, mounts
from cuzarr.storage.local.files import (
    _CREATE_NEW,
    _GUESS,
    _NOFOLLOW,
    _RDONLY_NOFOLLOW,
    _RESERVED,
    _SHORT_NAME,
    _file_size,
    _is_missing,
    _pread,
    _pread_into,
    _raise_for_key,
    _read_all,
    _read_all_reused,
    _read_rest,
    _rmtree,
    _temp_name,
    _thread_buffer,
    _tls,
    _write_file,
    cleanup_dir,
    empty_dir,
    link_if_absent,
)
from cuzarr.storage.local.locks import _KeyLocks
from cuzarr.storage.local.paths import _PATHS_MAX, KeyPaths
from cuzarr.storage.local.rename import rename_dir

__all__ = ["LocalFile", "LocalStore"]


class LocalFile(NamedTuple):
    """A stored value as a file: its path and size in bytes (a byte range of the
    file, from ``offset``: an inner chunk of a shard)."""

    path: str
    size: int
    offset: int = 0


# Batching file I/O amortizes the thread hop; a few dozen small files per hop.
_BATCH = 32


class LocalStore(KeyPaths, Store):
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
        state["_lock_base"] = None  # the root's real path, as the unpickling machine sees it
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

    def lock_keys(self, keys: Iterable[str]) -> _KeyLocks:
        """Exclusive advisory locks on ``keys``, for ``async with``.

        Other processes and threads that take the same locks wait; plain ``set``
        does not take them. The lock of a key is that of its file: stores that
        spell the root differently (``g.zarr/u``, or ``g.zarr`` with keys under
        ``u/``) lock alike. A no-op only where the platform has no file locks
        (neither ``fcntl`` nor ``msvcrt``).
        """
        return _KeyLocks(self, keys)

    # -- blocking helpers (run in threads) --------------------------------------
    _link_if_absent = staticmethod(link_if_absent)
    _empty_dir = staticmethod(empty_dir)
    _cleanup_dir = staticmethod(cleanup_dir)

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
        except OSError as e:
            if _is_missing(e):
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
                guess = min(files.REUSE_MAX, len(data) + (len(data) >> 3) + 1)
            out.append(data)
        return out

    def _confirm_in(self, directory: str) -> bool:
        """Whether a short read of a file in ``directory`` must be confirmed by
        one more read (its file system is not known to read in full); cached
        once the directory could be looked at."""
        full = mounts._reads_full(directory)
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
        if min(sizes, default=0) < 0 or sum(sizes) > files.REUSE_MAX:
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

    def _read_into(self, keys: Sequence[str], place: Callable[[Any], tuple[Any, Any]],
                   each: Callable[[int, int, int], Any] | None = None,
                   frames: Any = None) -> tuple[Any, Any]:
        """``SyncIO.get_into`` (``batchread.get_into``)."""
        return batchread.get_into(self, keys, place, each, frames, getattr(_tls, "pins", None))

    def _open_sized(self, key: str, pins: dict[str, int] | None) -> tuple[int | None, int | None]:
        """A read descriptor of ``key``'s file and its size (``None``: not a
        regular file), kept in ``pins`` within a pinned block; ``(None, None)``
        when the key is missing."""
        path = self._path(key)
        fd = pins.get(path) if pins is not None else None
        if fd is None:
            try:
                fd = self._open_checked(key, path)
            except OSError as e:
                if _is_missing(e):
                    return None, None
                raise
            if pins is not None:
                pins[path] = fd
        return fd, _file_size(fd)

    def _stat_size(self, key: str) -> int | None:
        """``key``'s file size from ``stat`` (``None``: missing, or not a regular file)."""
        try:
            st = os.stat(self._path(key), follow_symlinks=False)
        except OSError as e:
            if _is_missing(e):
                return None
            raise
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _read_batch(self, reqs: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        return [self._read(k, r) for k, r in reqs]

    @property
    def takes_parts(self) -> bool:
        """Whether values may be :class:`~cuzarr.storage.base.Concat` (written with
        ``os.writev``): not when a subclass overrides ``set``, which gets bytes."""
        return type(self).set is LocalStore.set and hasattr(os, "writev")

    def sync_io(self) -> SyncIO | None:
        if not self._keeps(LocalStore, "get", "set", "delete"):
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
            self._sizes,
            self._read_ranges_into,
        )

    def _read_ranges_into(self, keys: Sequence[str], starts: Any, sizes: Any,
                          place: Callable[[Any], tuple[Any, Any]]) -> tuple[Any, Any, Any]:
        """``SyncIO.get_ranges_into`` (``batchread.read_ranges_into``)."""
        return batchread.read_ranges_into(self, keys, starts, sizes, place,
                                          getattr(_tls, "pins", None))

    def _sizes(self, keys: Sequence[str]) -> list[int | None]:
        # through _read_fd: in a pinned block, the size of the file its reads see
        return [self._read_fd(k, lambda fd: os.fstat(fd).st_size) for k in keys]

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
                if files.fcntl is None:
                    # No flock marks it live, so nothing is lost by closing it
                    # now; and Windows renames or unlinks no file open here.
                    os.close(fd)
                    fd = None
                if exclusive:
                    self._link_if_absent(tmp, path)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)  # gone if it was moved into place instead
                else:
                    files.replace(tmp, path)
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

    def _write_batch(self, items: Sequence[tuple[str, bytes]]) -> None:
        if files.fcntl is None or os.sep != "/" or len(items) < 2:
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
        flock, lock_ex, fstat = files.fcntl.flock, files.fcntl.LOCK_EX, os.fstat
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
        from cuzarr.runtime.sync import io_semaphore

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
        from cuzarr.runtime.sync import io_semaphore

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

    async def rename_dir(self, source: str, dest: str) -> bool:
        """Move every key under ``source`` to ``dest`` with one directory rename
        (atomic on one file system); False, with nothing done, where one rename
        cannot (see :func:`cuzarr.storage.local.rename.rename_dir`)."""
        self._check_writable()
        return await asyncio.to_thread(rename_dir, self, source.strip("/"), dest.strip("/"))

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
            directory = key_directory(prefix)
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


