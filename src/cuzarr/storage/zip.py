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
import errno
import io
import os
import zipfile
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

from cuzarr.storage.base import (
    ByteRequest,
    Store,
    as_bytes_like,
    check_byte_range,
    normalize_key,
)
from cuzarr.storage.zip_fileobj import _FileObjectHandle, _RawReader
from cuzarr.storage.zip_handle import ZipStoreError, _handle_for

__all__ = ["ZipStore", "ZipStoreError"]

# Keys read per worker-thread hop.
_BATCH = 64


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
