"""A store over a directory of the local filesystem.

Writes go to a temporary file in the destination directory and are renamed into
place, so a writer killed mid-write never leaves a torn value under a real key;
such temporaries carry a reserved prefix and are never listed or read as data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from cuzarr.errors import StoreKeyError
from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    normalize_key,
)

__all__ = ["TEMP_PREFIX", "LocalStore"]

TEMP_PREFIX = ".cuzarr-tmp-"
# Batching file I/O amortizes the thread hop; a few dozen small files per hop.
_BATCH = 32


def _write_file(path: str, value: bytes) -> None:
    with open(path, "wb") as f:
        f.write(value)


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

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other._root_str == self._root_str

    __hash__ = object.__hash__

    def _path(self, key: str) -> str:
        normalize_key(key)
        path = os.path.join(self._root_str, key)
        # normalize_key already rejects '..'; this also catches symlink-free tricks.
        if os.path.commonpath([self._root_str, os.path.normpath(path)]) != self._root_str:
            raise StoreKeyError(f"key {key!r} resolves outside the store root")
        return path

    # -- blocking helpers (run in threads) --------------------------------------
    def _read(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                if byte_range is None:
                    return f.read()
                if isinstance(byte_range, RangeByteRequest):
                    f.seek(byte_range.start)
                    return f.read(max(0, byte_range.end - byte_range.start))
                if isinstance(byte_range, OffsetByteRequest):
                    f.seek(byte_range.offset)
                    return f.read()
                if isinstance(byte_range, SuffixByteRequest):
                    size = os.fstat(f.fileno()).st_size
                    f.seek(max(0, size - byte_range.suffix))
                    return f.read()
                raise TypeError(f"unsupported byte range {byte_range!r}")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            return None

    def _read_batch(self, reqs: Sequence[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        return [self._read(k, r) for k, r in reqs]

    def _write(self, key: str, value: bytes) -> None:
        path = self._path(key)
        directory, name = os.path.split(path)
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name}")
        try:
            try:
                _write_file(tmp, value)
            except FileNotFoundError:
                os.makedirs(directory, exist_ok=True)
                _write_file(tmp, value)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _write_batch(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, value in items:
            self._write(key, value)

    def _remove(self, key: str) -> None:
        path = self._path(key)
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
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

    async def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()
        await asyncio.to_thread(self._write, key, value)

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
                await asyncio.to_thread(self._write_batch, part)

        # Big values get their own thread hop so large writes overlap.
        size = _BATCH if sum(len(v) for _, v in items[:8]) < (1 << 20) else 1
        await asyncio.gather(*(batch(items[i : i + size]) for i in range(0, len(items), size)))

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
        prefix = prefix.strip("/")
        path = self._path(prefix) if prefix else self._root_str
        await asyncio.to_thread(shutil.rmtree, path, True)

    def _walk(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self._root_str
        out: list[str] = []
        if not os.path.isdir(base):
            return out
        root_len = len(self._root_str) + 1
        for dirpath, _dirnames, filenames in os.walk(base):
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
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
            p = prefix.strip("/")
            base = self._path(p) if p else self._root_str
            try:
                names = await asyncio.to_thread(os.listdir, base)
            except (FileNotFoundError, NotADirectoryError):
                return
            for name in sorted(names):
                if not name.startswith(TEMP_PREFIX):
                    yield name

        return gen()

    async def clear(self) -> None:
        self._check_writable()
        if os.path.isdir(self._root_str):
            await asyncio.to_thread(shutil.rmtree, self._root_str)

    def cleanup_temporaries(self) -> int:
        """Remove temp files left by killed writers; returns how many were removed."""
        n = 0
        for dirpath, _dirs, files in os.walk(self._root_str):
            for name in files:
                if name.startswith(TEMP_PREFIX):
                    try:
                        os.unlink(os.path.join(dirpath, name))
                        n += 1
                    except OSError:
                        pass
        return n
