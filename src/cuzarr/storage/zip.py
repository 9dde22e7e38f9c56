"""A store inside one zip file, compatible with zarr-python's ``ZipStore``.

Entries are stored uncompressed by default (``ZIP_STORED``, as zarr-python
does: chunks are already compressed). The archive on disk is a valid zip after
every write call (``set``/``set_many``/``delete``): the central directory is
rewritten at the end of the file after each call, so another process (or
zarr-python) can open it while this store is still open.

Writing a key twice appends a second entry; readers (cuzarr, Python's
``zipfile``, zarr-python) take the last one. Deleting a key hides it at once in
this process; because a zip file cannot drop an entry in place, the archive is
then rewritten without it at the end of that write call. ``close()`` also
compacts away superseded duplicate entries, so a closed archive holds exactly
one entry per key. Every ``ZipStore`` over the same file in one process shares
one open handle, so they see each other's writes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import struct
import threading
import warnings
import weakref
import zipfile
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

from cuzarr.errors import ChecksumError, CodecError, CuzarrError
from cuzarr.storage.base import (
    ByteRequest,
    Store,
    check_byte_range,
    normalize_key,
    range_bounds,
)

__all__ = ["ZipStore", "ZipStoreError"]


class ZipStoreError(CuzarrError, zipfile.BadZipFile, OSError):
    """The zip file is not a readable archive (and could not be recovered)."""


_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIG = 0x04034B50

_BATCH = 64


class _ZipHandle:
    """One open zip file, shared by every ZipStore over the same path."""

    def __init__(self, path: str, compression: int) -> None:
        self.path = path
        self.compression = compression
        self.lock = threading.RLock()
        self.zf: zipfile.ZipFile | None = None
        self.writable = False
        self.deleted: set[str] = set()
        self.duplicates = False

    # -- opening -----------------------------------------------------------------
    def _open(self, write: bool) -> zipfile.ZipFile | None:
        if self.zf is not None and (self.writable or not write):
            return self.zf
        if self.zf is not None:
            self.zf.close()
            self.zf = None
        # An empty file (e.g. from tempfile) is an empty archive.
        present = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if write:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            if present:
                # zipfile's mode "a" would start a new archive after a damaged one,
                # hiding every entry of it: check first, and recover what a writer
                # killed mid-write left.
                try:
                    zipfile.ZipFile(self.path, mode="r").close()
                except zipfile.BadZipFile as e:
                    self._recover(e)
            self.zf = zipfile.ZipFile(self.path, mode="a", compression=self.compression)
            self.writable = True
        else:
            if not present:
                return None
            try:
                self.zf = zipfile.ZipFile(self.path, mode="r")
            except zipfile.BadZipFile as e:
                raise ZipStoreError(
                    f"{self.path} is not a readable zip archive ({e}); if a writer was killed"
                    " while writing it, a ZipStore opened on it in mode 'a' (not read-only)"
                    " recovers the entries written before"
                ) from e
            self.writable = False
        return self.zf

    def recover_if_damaged(self) -> None:
        """Recover a torn archive now (a store opened for writing does this)."""
        with self.lock:
            if self.zf is None and os.path.exists(self.path) and os.path.getsize(self.path):
                try:
                    zipfile.ZipFile(self.path, mode="r").close()
                except zipfile.BadZipFile as e:
                    self._recover(e)

    def _recover(self, error: Exception) -> None:
        """Rebuild a torn archive from its entries' local headers.

        A writer killed mid-write leaves whole entries, then a torn entry (or a
        torn central directory) where the central directory was. Complete entries
        (sizes in range, CRC matching) are kept, in order; the torn tail is
        dropped. A file that does not start with an entry is refused untouched.
        """
        tmp = f"{self.path}.cuzarr-tmp"
        kept = 0
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(4)
            if len(head) < 4 or struct.unpack("<I", head)[0] != _LOCAL_SIG:
                raise ZipStoreError(f"{self.path} is not a zip archive ({error})") from error
            with (
                zipfile.ZipFile(tmp, mode="w", compression=self.compression) as out,
                warnings.catch_warnings(),
            ):
                warnings.filterwarnings("ignore", message="Duplicate name", category=UserWarning)
                pos = 0
                while pos + _LOCAL_HEADER.size <= size:
                    f.seek(pos)
                    fields = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
                    sig, _v, flags, method, _t, _d, crc, csize, usize, nlen, elen = fields
                    start = pos + _LOCAL_HEADER.size + nlen + elen
                    if (
                        sig != _LOCAL_SIG
                        or flags & 0x08  # sizes in a data descriptor: not written by us
                        or method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
                        or start + csize > size
                    ):
                        break
                    name = f.read(nlen).decode("utf-8" if flags & 0x800 else "cp437")
                    f.seek(start)
                    raw = f.read(csize)
                    try:
                        data = raw if method == zipfile.ZIP_STORED else zlib.decompress(raw, -15)
                    except zlib.error:
                        break
                    if len(data) != usize or zlib.crc32(data) != crc:
                        break  # the torn entry (its header is completed last)
                    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = self.compression
                    info.external_attr = 0o644 << 16
                    out.writestr(info, data)
                    kept += 1
                    pos = start + csize
        if kept == 0:
            os.unlink(tmp)
            raise ZipStoreError(f"{self.path} is not a readable zip archive ({error})") from error
        os.replace(tmp, self.path)
        self.duplicates = True  # the next close() compacts superseded entries

    # -- reads -------------------------------------------------------------------
    def read(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        with self.lock:
            if key in self.deleted:
                return None
            zf = self._open(False)
            if zf is None:
                return None
            try:
                info = zf.getinfo(key)
            except KeyError:
                return None
            try:
                return self._read_entry(zf, info, byte_range)
            except zipfile.BadZipFile as e:
                cls = ChecksumError if "CRC" in str(e) else CodecError
                raise cls(f"{key!r} in {self.path}: damaged zip entry ({e})") from e
            except (zlib.error, EOFError) as e:
                raise CodecError(f"{key!r} in {self.path}: damaged zip entry ({e})") from e

    @staticmethod
    def _read_entry(
        zf: zipfile.ZipFile, info: zipfile.ZipInfo, byte_range: ByteRequest | None
    ) -> bytes:
        if byte_range is None:
            return zf.read(info)
        start, stop = range_bounds(byte_range, info.file_size)
        if stop <= start:
            return b""
        with zf.open(info) as f:
            f.seek(start)
            return f.read(stop - start)

    def read_many(self, reqs: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        with self.lock:
            return [self.read(k, r) for k, r in reqs]

    def names(self) -> list[str]:
        with self.lock:
            zf = self._open(False)
            if zf is None:
                return []
            seen = dict.fromkeys(n for n in zf.namelist() if not n.endswith("/"))
            return [n for n in seen if n not in self.deleted]

    # -- writes ------------------------------------------------------------------
    def write_if_absent(self, key: str, value: bytes) -> None:
        with self.lock:  # the check and the write as one step for every store object
            if key not in self.names():
                self.write_many([(key, value)])

    def write_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        with self.lock:
            zf = self._open(True)
            assert zf is not None
            existing = set(zf.NameToInfo)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Duplicate name", category=UserWarning)
                for key, value in items:
                    if key in existing:
                        self.duplicates = True
                    info = zipfile.ZipInfo(key, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = self.compression
                    info.external_attr = 0o644 << 16
                    zf.writestr(info, bytes(value))
                    existing.add(key)
                    self.deleted.discard(key)
            self.flush()

    def delete_many(self, keys: Sequence[str]) -> None:
        with self.lock:
            zf = self._open(False)
            if zf is None:
                return
            present = [k for k in keys if k in zf.NameToInfo and k not in self.deleted]
            if present:
                self.deleted.update(present)
                self.compact()

    def flush(self) -> None:
        """Write the central directory so the file on disk is a complete zip."""
        zf = self.zf
        if zf is None or not self.writable:
            return
        write_end = getattr(zf, "_write_end_record", None)
        if write_end is None or not getattr(zf, "_seekable", False):  # pragma: no cover
            zf.close()
            self.zf = None
            return
        zf.fp.seek(zf.start_dir)
        write_end()
        zf.fp.truncate()
        zf.fp.flush()
        # Make a later close() (or the next write) start from the same place again.
        zf._didModify = True

    def compact(self) -> None:
        """Rewrite the archive with one entry per live key (drops deleted/superseded)."""
        with self.lock:
            zf = self._open(False)
            if zf is None:
                return
            live = [n for n in dict.fromkeys(zf.namelist()) if n not in self.deleted]
            tmp = f"{self.path}.cuzarr-tmp"
            with zipfile.ZipFile(tmp, mode="w", compression=self.compression) as out:
                for name in live:
                    info = zf.getinfo(name)  # the last entry of that name
                    out.writestr(info, zf.read(info))
            zf.close()
            self.zf = None
            os.replace(tmp, self.path)
            self.deleted.clear()
            self.duplicates = False

    def clear(self) -> None:
        with self.lock:
            if self.zf is not None:
                self.zf.close()
                self.zf = None
            self.deleted.clear()
            self.duplicates = False
            if os.path.exists(self.path):
                os.unlink(self.path)

    def close(self) -> None:
        with self.lock:
            if self.zf is None:
                return
            if self.duplicates or self.deleted:
                self.compact()
            if self.zf is not None:
                self.zf.close()
                self.zf = None


class _FileObjectHandle(_ZipHandle):
    """A zip archive in a caller's open binary file object, read-only: the caller
    owns the object (closing the store does not close it)."""

    def __init__(self, fileobj: Any) -> None:
        super().__init__(f"<{type(fileobj).__name__}>", zipfile.ZIP_STORED)
        self.fileobj = fileobj

    def _open(self, write: bool) -> zipfile.ZipFile | None:
        if write:  # the store is read-only: nothing should ask
            raise ZipStoreError("a ZipStore over a file object is read-only")
        if self.zf is None:
            try:
                self.zf = zipfile.ZipFile(self.fileobj, mode="r")
            except zipfile.BadZipFile as e:
                raise ZipStoreError(f"{self.path} is not a readable zip archive ({e})") from e
        return self.zf

    def recover_if_damaged(self) -> None:
        pass

    def _refuse(self, *args: Any) -> None:
        raise ZipStoreError(f"{self.path}: a ZipStore over a file object is read-only")

    write_many = delete_many = write_if_absent = compact = clear = _refuse  # type: ignore[assignment]

    def close(self) -> None:
        with self.lock:
            if self.zf is not None:
                self.zf.close()  # leaves the caller's file object open
                self.zf = None


_handles: weakref.WeakValueDictionary[str, _ZipHandle] = weakref.WeakValueDictionary()
_handles_lock = threading.Lock()
_all_handles: weakref.WeakSet[_ZipHandle] = weakref.WeakSet()


def _handle_for(path: str, compression: int) -> _ZipHandle:
    with _handles_lock:
        h = _handles.get(path)
        if h is None:
            h = _ZipHandle(path, compression)
            _handles[path] = h
            _all_handles.add(h)
        return h


@atexit.register
def _close_all() -> None:  # pragma: no cover - runs at interpreter exit
    for h in list(_all_handles):
        with contextlib.suppress(Exception):
            h.close()


class ZipStore(Store):
    """Keys stored as entries of one zip file.

    Parameters
    ----------
    path
        The zip file; created on the first write when missing. Or an open binary
        file object (``read``, ``seek``, ``tell``; an ``io.BytesIO``, an opened
        file) holding an archive, read in mode ``"r"`` only; the caller keeps it
        open while the store is in use and closes it.
    mode
        ``"r"`` (read-only, the default, as in zarr-python), ``"a"`` (read and write), ``"w"``
        (start a new, empty archive) or ``"x"`` (like ``"w"``, but the file must
        not exist).
    compression
        ``zipfile.ZIP_STORED`` (default) or ``zipfile.ZIP_DEFLATED`` for new entries.
    read_only
        Refuse writes (``None``: only in mode ``"r"``; mode ``"r"`` is read-only
        whatever this says).

    Notes
    -----
    Writing a key again appends a new entry that supersedes the old one (last
    entry wins, as in zarr-python and ``zipfile``); ``close()`` rewrites the
    archive without superseded entries. Deleting a key rewrites the archive.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        mode: str = "r",
        compression: int = zipfile.ZIP_STORED,
        read_only: bool | None = None,
    ) -> None:
        if mode not in ("r", "a", "w", "x"):
            raise ValueError(f"mode must be 'r', 'a', 'w' or 'x', got {mode!r}")
        if read_only and mode in ("w", "x"):
            # mode 'w' empties the archive: not something a read-only store may do
            raise ValueError(f"mode {mode!r} starts a new archive and cannot be read-only")
        # as zarr-python: mode "r" (the default) is read-only whatever read_only says
        super().__init__(read_only=bool(read_only) or mode == "r")
        if not isinstance(path, (str, os.PathLike)):
            if not all(callable(getattr(path, a, None)) for a in ("read", "seek", "tell")):
                raise TypeError(
                    "expected a path or an open binary file object supporting "
                    f"read/seek/tell, got {type(path).__name__}"
                )
            if mode != "r":
                raise TypeError(f"a file object opens only for reading (mode 'r'), not {mode!r}")
            self.path = None
            self.mode = mode
            self.compression = compression
            self._h = _FileObjectHandle(path)
            self.supports_deletes = False
            return
        self.path = os.path.abspath(os.fspath(path))
        self.mode = mode
        self.compression = compression
        if mode == "x" and os.path.exists(self.path):
            raise FileExistsError(f"{self.path} already exists")
        self._h = _handle_for(self.path, compression)
        if mode in ("w", "x"):
            self._h.clear()
        elif not self.read_only:
            self._h.recover_if_damaged()
        self.supports_deletes = not self.read_only

    def __repr__(self) -> str:
        return f"ZipStore({self.path if self.path is not None else self._h.path!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ZipStore):
            return False
        if self.path is None or other.path is None:
            return self._h is other._h
        return other.path == self.path

    __hash__ = object.__hash__

    def __copy__(self) -> ZipStore:
        # a copy (with_read_only) shares the open handle: no pickling round trip,
        # which a store over a file object refuses
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def with_read_only(self, read_only: bool = False) -> ZipStore:
        if self.path is None and not read_only:
            raise ZipStoreError("a ZipStore over a file object is read-only")
        return super().with_read_only(read_only)  # type: ignore[return-value]

    def __getstate__(self) -> dict[str, Any]:
        if self.path is None:
            raise TypeError("a ZipStore over a file object cannot be pickled; open it by path")
        state = self.__dict__.copy()
        state.pop("_h", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._h = _handle_for(self.path, state.get("compression", zipfile.ZIP_STORED))

    def close(self) -> None:
        """Flush, compact away superseded entries, and close the file."""
        self._h.close()

    def __enter__(self) -> ZipStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads -------------------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        check_byte_range(byte_range)
        return await asyncio.to_thread(self._h.read, key, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[bytes | None]:
        reqs = list(key_ranges)
        for _, r in reqs:
            check_byte_range(r)
        if type(self).get is not ZipStore.get:
            return await super().get_partial_values(prototype, reqs)
        if not reqs:
            return []
        parts = [reqs[i : i + _BATCH] for i in range(0, len(reqs), _BATCH)]
        # One file handle: concurrency would only contend on its lock.
        out: list[bytes | None] = []
        for part in parts:
            out.extend(await asyncio.to_thread(self._h.read_many, part))
        return out

    async def exists(self, key: str) -> bool:
        return key in await asyncio.to_thread(self._h.names)

    # -- writes ------------------------------------------------------------------
    async def set(self, key: str, value: bytes) -> None:
        await self.set_many([(key, value)])

    async def set_if_not_exists(self, key: str, value: bytes) -> None:
        if type(self).set is not ZipStore.set:
            return await super().set_if_not_exists(key, value)  # through the override
        self._check_writable()
        await asyncio.to_thread(self._h.write_if_absent, normalize_key(key), value)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._check_writable()
        items = [(normalize_key(k), v) for k, v in items]
        if items:
            await asyncio.to_thread(self._h.write_many, items)

    async def delete(self, key: str) -> None:
        await self.delete_many([key])

    async def delete_many(self, keys: Sequence[str]) -> None:
        self._check_writable()
        keys = list(keys)
        if keys:
            await asyncio.to_thread(self._h.delete_many, keys)

    async def clear(self) -> None:
        self._check_writable()
        await asyncio.to_thread(self._h.clear)

    # -- listing -----------------------------------------------------------------
    def list(self) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            for name in await asyncio.to_thread(self._h.names):
                yield name

        return gen()
