"""One open zip archive over a path, shared by every ``ZipStore`` over that file.

:class:`_ZipHandle` reads entries (checked against their CRC), appends new ones,
rewrites the central directory after every write call, hides and compacts away
deleted or superseded entries, and recovers an archive whose central directory
a crash left unwritten. The registry below gives each path one handle per
process. The store itself is in :mod:`cuzarr.storage.zip`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import struct
import threading
import warnings
import weakref
import zipfile
import zlib
from collections.abc import Iterator, Sequence

from cuzarr.errors import ChecksumError, CodecError, CuzarrError
from cuzarr.storage.base import ByteRequest, range_bounds
from cuzarr.storage.local.files import replace

__all__ = ["ZipStoreError"]


class ZipStoreError(CuzarrError, zipfile.BadZipFile, OSError):
    """The zip file is not a readable archive (and could not be recovered)."""


_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIG = 0x04034B50


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
            replace(tmp, self.path)
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
                replace(tmp, self.path)
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

