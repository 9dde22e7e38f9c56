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

A ``ZipStore`` can also write into a caller's open binary file object; see
:class:`ZipStore` for which of these rules hold there.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import io
import os
import shutil
import struct
import tempfile
import threading
import warnings
import weakref
import zipfile
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import IO, Any, NoReturn

from cuzarr.errors import ChecksumError, CodecError, CuzarrError
from cuzarr.storage.base import (
    ByteRequest,
    Store,
    as_bytes_like,
    check_byte_range,
    normalize_key,
    range_bounds,
    slice_bytes,
)

__all__ = ["ZipStore", "ZipStoreError"]


class ZipStoreError(CuzarrError, zipfile.BadZipFile, OSError):
    """The zip file is not a readable archive (and could not be recovered)."""


_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIG = 0x04034B50

_BATCH = 64
# Compaction of a file-object archive builds the new one in memory up to this
# size, then in a temporary file.
_SPOOL = 64 << 20
_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


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
        kept = 0
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(4)
        if len(head) < 4 or struct.unpack("<I", head)[0] != _LOCAL_SIG:
            raise ZipStoreError(f"{self.path} is not a zip archive ({error})") from error
        with self._rewriting("rebuilding the torn zip archive") as tmp:
            with (
                open(self.path, "rb") as f,
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
            if kept == 0:  # (the temporary is removed on the way out)
                raise ZipStoreError(
                    f"{self.path} is not a readable zip archive ({error})"
                ) from error
            os.replace(tmp, self.path)
        self.duplicates = True  # the next close() compacts superseded entries

    @contextlib.contextmanager
    def _rewriting(self, doing: str) -> Iterator[str]:
        """The temporary path a new archive is built in before it replaces the
        old one. If the block fails (a full disk, a directory or permissions in
        the way, a damaged entry), the temporary is removed, the archive is left
        as it was, and the error names the archive, not the temporary: an
        ``OSError`` of the same class and errno, a damaged entry as a
        :class:`ZipStoreError`; others go on as they are."""
        tmp = f"{self.path}.cuzarr-tmp"
        try:
            yield tmp
        except BaseException as e:
            # a partial archive of ours, or nothing; a directory there (someone
            # else's) cannot be unlinked and is left alone
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, ZipStoreError):
                raise
            if isinstance(e, OSError) and e.errno is not None and type(e).__module__ == "builtins":
                raise type(e)(e.errno, f"{e.strerror} ({doing})", self.path) from e
            if isinstance(e, zipfile.BadZipFile):
                raise ZipStoreError(f"{self.path}: {doing} failed: {e}") from e
            raise

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
                try:
                    self.compact()
                except BaseException:
                    # the archive still holds them: a failed delete hides nothing
                    self.deleted.difference_update(present)
                    raise

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
            with self._rewriting("rewriting the zip archive") as tmp:
                with zipfile.ZipFile(tmp, mode="w", compression=self.compression) as out:
                    for name in live:
                        info = zf.getinfo(name)  # the last entry of that name
                        out.writestr(info, zf.read(info))
                try:
                    zf.close()
                finally:
                    self.zf = None  # closed even if its last write failed
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


def _probe(fileobj: Any, what: str) -> bool:
    """``fileobj.readable()`` / ``.seekable()``, False where it cannot say."""
    fn = getattr(fileobj, what, None)
    if not callable(fn):
        return False
    try:
        return bool(fn())
    except (OSError, ValueError):
        return False


class _RawReader(io.RawIOBase):
    """An object with only ``read``/``seek``/``tell`` (an obstore reader, say) seen
    as the ``io`` reader zipfile needs (it also asks ``seekable()``, and wants
    ``bytes`` where such a ``read`` may return another buffer)."""

    def __init__(self, fileobj: Any) -> None:
        self._f = fileobj

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, b: Any) -> int:
        data = memoryview(self._f.read(len(b))).cast("B")
        b[: len(data)] = data
        return len(data)


class _FileObjectHandle(_ZipHandle):
    """A zip archive in a caller's open binary file object.

    The caller owns the object: closing the store closes the archive (writes its
    central directory) but leaves the object open. In mode ``"r"`` the archive is
    only read. In modes ``"w"``/``"x"``/``"a"`` it is written through zipfile:

    - on a seekable object the central directory is rewritten after every write
      call, as for a path, so the bytes in the object are a complete archive
      between calls;
    - on a readable and seekable one, deletes and ``close()``'s compaction of
      superseded entries rewrite the archive in place (built aside in a
      temporary file first, then copied over and truncated): unlike the path
      store's ``os.replace`` this is not atomic, a crash during the copy leaves
      a damaged archive;
    - on a non-seekable stream (a pipe, a socket, an upload) entries are
      streamed out and the central directory is written by ``close()`` only;
      values already written cannot be read back, deleted, or compacted.
    """

    def __init__(self, fileobj: Any, mode: str, compression: int) -> None:
        super().__init__(f"<{type(fileobj).__name__}>", compression)
        self.fileobj = fileobj
        # "w"/"x" start a new archive on the first open only: reopening after
        # close() appends, keeping what was written (as zarr-python does)
        self.mode = mode
        self.opened = False
        self.kept: dict[str, bytes] = {}
        self.seekable = _probe(fileobj, "seekable")
        self.readable = _probe(fileobj, "readable")
        if mode == "a" and not (self.seekable and self.readable):
            raise io.UnsupportedOperation(
                "mode 'a' reads the archive already in the file object, which needs an "
                "object that is readable and seekable; use mode 'w' to start a new archive"
            )

    @property
    def readable_back(self) -> bool:
        """Whether entries already written can be read again (and rewritten)."""
        return self.mode == "r" or (self.seekable and self.readable)

    def _open(self, write: bool) -> zipfile.ZipFile | None:
        if self.zf is not None:
            return self.zf
        if self.mode == "r":
            if write:  # the store is read-only: nothing should ask
                raise ZipStoreError(f"{self.path}: a ZipStore over a file object is read-only")
            try:
                self.zf = zipfile.ZipFile(self.fileobj, mode="r")
            except zipfile.BadZipFile as e:
                raise ZipStoreError(f"{self.path} is not a readable zip archive ({e})") from e
            return self.zf
        if self.opened and not self.readable_back:
            raise io.UnsupportedOperation(
                f"{self.path}: a ZipStore writing to a file object that is not readable and "
                "seekable cannot be used again after close(): the archive it wrote cannot "
                "be read back"
            )
        mode = "a" if self.opened else self.mode
        if mode == "a":
            self._check_appendable()
        elif self.seekable:
            # "w" starts a new archive here: bytes of an older content beyond it
            # would otherwise trail the new archive's end record
            with contextlib.suppress(OSError):
                self.fileobj.truncate(self.fileobj.tell())
        # zipfile's "x" refuses an existing *path*; an object has nothing to refuse
        self.zf = zipfile.ZipFile(
            self.fileobj, mode="a" if mode == "a" else "w", compression=self.compression
        )
        self.writable = True
        self.opened = True
        return self.zf

    def _check_appendable(self) -> None:
        """Refuse to append to an object that holds bytes but no readable archive:
        zipfile's mode "a" would start a new archive after them, hiding whatever
        entries a torn archive there still has (a path is recovered instead; an
        object cannot be rewritten safely)."""
        f = self.fileobj
        pos = f.tell()
        size = f.seek(0, os.SEEK_END)
        f.seek(pos)
        if size == 0:
            return
        try:
            zipfile.ZipFile(f, mode="r").close()
        except zipfile.BadZipFile as e:
            raise ZipStoreError(
                f"{self.path} holds data that is not a readable zip archive ({e}); "
                "refusing to append a new archive after it"
            ) from e
        finally:
            f.seek(pos)

    def recover_if_damaged(self) -> None:
        pass

    def _refuse(self, *args: Any) -> None:
        raise ZipStoreError(f"{self.path}: a ZipStore over a file object is read-only")

    def _cannot(self, what: str) -> NoReturn:
        raise io.UnsupportedOperation(
            f"{self.path}: cannot {what}: the archive is written to a file object that is "
            "not readable and seekable, so entries already written cannot be read back"
        )

    def read(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        with self.lock:
            if not self.readable_back and key not in self.deleted:
                zf = self._open(False)
                if zf is not None and key in zf.NameToInfo:
                    if key in self.kept:
                        return slice_bytes(self.kept[key], byte_range)
                    self._cannot(f"read {key!r}")
            return super().read(key, byte_range)

    def write_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if self.mode == "r":
            self._refuse()
        with self.lock:
            super().write_many(items)
            if not self.readable_back:
                # Metadata documents are small and read back while a hierarchy is
                # built (a group's, when an array is created in it): keep a copy.
                # Chunks stay write-only.
                for key, value in items:
                    if key.rsplit("/", 1)[-1] in _METADATA_NAMES:
                        self.kept[key] = bytes(value)

    def write_if_absent(self, key: str, value: bytes) -> None:
        if self.mode == "r":
            self._refuse()
        super().write_if_absent(key, value)

    def delete_many(self, keys: Sequence[str]) -> None:
        if self.mode == "r":
            self._refuse()
        with self.lock:
            if not self.readable_back:
                zf = self._open(False)
                present = [k for k in keys if zf is not None and k in zf.NameToInfo]
                if present:
                    self._cannot(f"delete {present[0]!r}")
                return
            super().delete_many(keys)

    def flush(self) -> None:
        zf = self.zf
        if zf is None or not self.writable:
            return
        if not getattr(zf, "_seekable", False):
            # a stream: the central directory can only follow the last entry
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.fileobj.flush()
            return
        zf.fp.seek(zf.start_dir)
        zf._write_end_record()
        with contextlib.suppress(OSError):
            zf.fp.truncate()
        zf.fp.flush()
        # The end record is current: zipfile's close() (or its __del__, perhaps
        # after the caller closed the object) need not write it again; the next
        # write sets the flag itself.
        zf._didModify = False

    def _archive_start(self, zf: zipfile.ZipFile) -> int:
        return min((i.header_offset for i in zf.filelist), default=zf.start_dir)

    def _discard(self, zf: zipfile.ZipFile) -> None:
        """Close ``zf`` without writing anything to the object."""
        zf._didModify = False
        zf.close()
        self.zf = None

    def compact(self) -> None:
        with self.lock:
            if self.mode == "r":
                self._refuse()
            if not self.readable_back:
                self._cannot("rewrite the archive")
            zf = self._open(False)
            assert zf is not None
            live = [n for n in dict.fromkeys(zf.namelist()) if n not in self.deleted]
            base = self._archive_start(zf)
            # Built aside first: the entries are read from the object being replaced.
            with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as tmp:
                with zipfile.ZipFile(tmp, mode="w", compression=self.compression) as out:
                    for name in live:
                        info = zf.getinfo(name)  # the last entry of that name
                        out.writestr(info, zf.read(info))
                self._discard(zf)
                tmp.seek(0)
                self.fileobj.seek(base)
                shutil.copyfileobj(tmp, self.fileobj)
            self.fileobj.truncate()
            self.fileobj.flush()
            self.deleted.clear()
            self.duplicates = False

    def clear(self) -> None:
        with self.lock:
            if self.mode == "r":
                self._refuse()
            zf = self._open(True)
            assert zf is not None
            if not zf.filelist:
                return
            if not self.seekable:
                self._cannot("clear the archive")
            base = self._archive_start(zf)
            self._discard(zf)
            self.fileobj.seek(base)
            self.fileobj.truncate()
            self.deleted.clear()
            self.duplicates = False
            self.zf = zipfile.ZipFile(self.fileobj, mode="w", compression=self.compression)
            self.flush()

    def close(self) -> None:
        with self.lock:
            if self.zf is None:
                return
            if (self.duplicates or self.deleted) and self.writable and self.readable_back:
                self.compact()  # leaves a complete archive in the object
                return
            if self.zf is not None:
                self.zf.close()  # writes the central directory; leaves the object open
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
        The zip file: in mode ``"r"`` (or with ``read_only=True``) it must exist
        (``FileNotFoundError`` otherwise, as ``zipfile`` and zarr-python raise);
        in the other modes it is created on the first write. Or an open binary
        file object (an ``io.BytesIO``, an opened file, a pipe): in mode ``"r"``
        it needs ``read``, ``seek`` and ``tell``; in modes ``"w"`` and ``"x"``
        (both start a new archive at the object's current position) ``write``;
        in mode ``"a"`` it must be readable and seekable. The caller keeps the
        object open while the store is in use, and closes it after the store.
    mode
        ``"r"`` (read-only, the default, as in zarr-python), ``"a"`` (read and write), ``"w"``
        (start a new, empty archive) or ``"x"`` (like ``"w"``, but the file must
        not exist).
    compression
        ``zipfile.ZIP_STORED`` (default) or ``zipfile.ZIP_DEFLATED`` for new entries.
    read_only
        Refuse writes (``None``: only in mode ``"r"``; mode ``"r"`` is read-only
        whatever this says).

    Raises
    ------
    FileNotFoundError
        A read-only store over a path where no file is.
    io.UnsupportedOperation
        Mode ``"a"`` over a file object that is not readable and seekable.

    Notes
    -----
    Writing a key again appends a new entry that supersedes the old one (last
    entry wins, as in zarr-python and ``zipfile``); ``close()`` rewrites the
    archive without superseded entries. Deleting a key rewrites the archive.

    Over a path, those rewrites go through a temporary file and ``os.replace``.
    A file object cannot be replaced, so for one opened for writing:

    - seekable: the central directory is rewritten after every write call, so
      the object holds a complete archive between calls, as a file does;
    - readable and seekable too: deletes and ``close()``'s compaction rewrite the
      archive in place (built aside first, then copied over), which is *not*
      atomic: a crash during the copy leaves a damaged archive;
    - not seekable (a pipe, a socket, an upload stream): entries stream out as
      they are written and the central directory only at ``close()``, which must
      be called; values already written cannot be read back, deleted, or
      compacted away (``io.UnsupportedOperation``), so only whole-chunk writes
      work, and a key written twice keeps both entries (readers take the last).

    ``close()`` never closes the caller's object. Using the store after
    ``close()`` reopens the archive in mode ``"a"``, which needs a readable,
    seekable object.
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
            self._init_fileobj(path, mode, compression)
            return
        self.path = os.path.abspath(os.fspath(path))
        self.mode = mode
        self.compression = compression
        if mode == "x" and os.path.exists(self.path):
            raise FileExistsError(f"{self.path} already exists")
        if self.read_only and not os.path.isfile(self.path):
            # as zipfile's (and so zarr-python's) mode "r": a read-only store over
            # nothing would only ever say "not found" about every node in it
            if os.path.isdir(self.path):
                raise IsADirectoryError(errno.EISDIR, "Is a directory, not a zip file", self.path)
            raise FileNotFoundError(
                errno.ENOENT,
                "No such zip file (a read-only ZipStore opens an existing archive; "
                "mode 'a' or 'w' creates one)",
                self.path,
            )
        self._h = _handle_for(self.path, compression)
        if mode in ("w", "x"):
            self._h.clear()
        elif not self.read_only:
            self._h.recover_if_damaged()
        self.supports_deletes = not self.read_only

    def _init_fileobj(self, fileobj: Any, mode: str, compression: int) -> None:
        if mode == "r" or self.read_only:
            if not all(callable(getattr(fileobj, a, None)) for a in ("read", "seek", "tell")):
                raise TypeError(
                    "expected a path or an open binary file object supporting "
                    f"read/seek/tell, got {type(fileobj).__name__}"
                )
            mode = "r"  # mode "a" with read_only=True: nothing is written
        elif not callable(getattr(fileobj, "write", None)):
            raise TypeError(
                f"a ZipStore in mode {mode!r} writes to its file object, and "
                f"{type(fileobj).__name__} has no write()"
            )
        if mode == "r" and not isinstance(fileobj, io.IOBase):
            fileobj = io.BufferedReader(_RawReader(fileobj))
        self.path = None
        self.mode = mode
        self.compression = compression
        h = _FileObjectHandle(fileobj, mode, compression)
        if mode != "r":
            h._open(True)  # "w" starts the new archive now, "a" checks the old one
        self._h = h
        self.supports_deletes = mode != "r" and h.readable_back

    def __repr__(self) -> str:
        return f"ZipStore({self.path if self.path is not None else self._h.path!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ZipStore):
            return False
        if self.path is None or other.path is None:
            return self._h is other._h
        return other.path == self.path

    def __hash__(self) -> int:  # equal stores hash alike
        return hash(self.path) if self.path is not None else id(self._h)

    def __str__(self) -> str:
        return f"zip://{self.path}" if self.path is not None else repr(self)

    def __copy__(self) -> ZipStore:
        # a copy (with_read_only) shares the open handle: no pickling round trip,
        # which a store over a file object refuses
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def with_read_only(self, read_only: bool = False) -> ZipStore:
        if self.path is None and not read_only and self._h.mode == "r":
            raise ZipStoreError("a ZipStore over a file object opened in mode 'r' is read-only")
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
        await asyncio.to_thread(
            self._h.write_if_absent, normalize_key(key), as_bytes_like(value)
        )

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._check_writable()
        items = [(normalize_key(k), as_bytes_like(v)) for k, v in items]
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
