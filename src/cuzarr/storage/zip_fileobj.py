"""A zip archive inside a caller's open binary file object (``ZipStore(fileobj)``).

Unlike a path, a file object cannot be replaced: rewrites happen in place, and an
object that is not seekable gets its entries streamed and its central directory
written only at ``close()``. See :class:`cuzarr.storage.zip.ZipStore` for the rules.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any, NoReturn

from cuzarr.storage.base import ByteRequest, slice_bytes
from cuzarr.storage.zip_handle import ZipStoreError, _ZipHandle

# Compaction of a file-object archive builds the new one in memory up to this
# size, then in a temporary file.
_SPOOL = 64 << 20
_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


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
