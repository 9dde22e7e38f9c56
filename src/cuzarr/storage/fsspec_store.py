"""``FsspecStore``: a store over an fsspec filesystem (S3, GCS, ``memory://``...).

See :mod:`cuzarr.storage.fsspec` for how requests are driven, retried and
limited in time. The requests' retries and time limits are in
``remote_requests.py``, S3's bulk deletes in ``s3_requests.py``, and the HTTP
store in ``http.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import fsspec
from fsspec.core import split_protocol

from cuzarr.errors import ReadOnlyError, StoreKeyError
from cuzarr.runtime.sync import io_semaphore
from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    as_bytes_like,
    check_byte_range,
    key_directory,
    normalize_key,
)
from cuzarr.storage.remote_errors import ALLOWED_EXCEPTIONS
from cuzarr.storage.remote_requests import RemoteRequests
from cuzarr.storage.remote_retry import (
    _TIMEOUT_KEYS,
    RetryPolicy,
    _is_unsatisfiable,
    _missing_bucket,
    _seconds,
)
from cuzarr.storage.s3_requests import _has_delete_objects, _splits_whole_reads, delete_objects

__all__ = ["URL_STORES", "FsspecStore"]

# Sync filesystems: keys per worker-thread hop.
_BATCH = 16

# Stores that ``FsspecStore.from_url`` makes for a protocol other than fsspec's
# generic one, filled in by the module that defines them (storage/http.py puts
# HTTPStore here for http and https; cuzarr.storage.fsspec imports it).
URL_STORES: dict[str, Callable[..., FsspecStore]] = {}


def _inside_root(prefix: str) -> None:
    """Refuse a listing prefix with a ``..`` segment: on a file system it would
    list names outside the store's root (reads of such keys are refused too)."""
    if ".." in prefix.split("/"):
        raise StoreKeyError(f"prefix {prefix!r} leads outside the store root")


class FsspecStore(RemoteRequests, Store):
    """A store over an fsspec filesystem, below a root path.

    The signature is zarr-python's, ``FsspecStore(fs, read_only=False, path="/",
    allowed_exceptions=...)``, plus cuzarr's keywords; cuzarr's older positional
    form ``FsspecStore(fs, path, read_only=...)`` (a ``str`` or path-like second
    argument) still works.

    Parameters
    ----------
    fs
        An fsspec filesystem instance (async or not), or ``None`` to build one
        lazily from ``protocol`` and ``storage_options`` (what :meth:`from_url`
        does; async filesystems are then built on cuzarr's event loop).
    read_only
        Refuse writes when true.
    path
        Root path inside the filesystem, without the scheme (for HTTP: the root
        URL); ``"/"`` or ``""`` is the filesystem's root.
    allowed_exceptions
        Exceptions of a read that mean "this key is missing" (``get`` returns
        ``None``). A missing bucket is never one of them: reads, listings and
        existence checks raise :class:`BucketNotFoundError`.
    protocol, storage_options
        How to build the filesystem when ``fs`` is ``None``.
    retry
        Retry policy for transient errors; :meth:`RetryPolicy.default` if omitted.

    Examples
    --------
    >>> store = FsspecStore.from_url("memory://demo.zarr")  # doctest: +SKIP
    >>> cuzarr.create_array(store, shape=(4,), dtype="i4")  # doctest: +SKIP
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) >= 2 and isinstance(args[1], (str, os.PathLike)):
            # cuzarr's older FsspecStore(fs, path, ...): a path where zarr-python
            # has read_only cannot be mistaken for a flag
            if len(args) > 2 or "path" in kwargs:
                raise TypeError(
                    "FsspecStore(fs, path) takes no more positional arguments and no "
                    "path= keyword; zarr-python's order is (fs, read_only, path, "
                    "allowed_exceptions)"
                )
            kwargs["path"] = os.fspath(args[1])
            args = args[:1]
        self._setup(*args, **kwargs)

    def _setup(
        self,
        fs: Any = None,
        read_only: bool = False,
        path: str = "/",
        allowed_exceptions: tuple[type[Exception], ...] = ALLOWED_EXCEPTIONS,
        *,
        protocol: str | None = None,
        storage_options: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(read_only=bool(read_only))
        if fs is None and protocol is None:
            raise TypeError("FsspecStore needs a filesystem or a protocol")
        self._fs = fs
        self.protocol = protocol if protocol is not None else _protocol_of(fs)
        opts = dict(storage_options or {})
        # cuzarr's time limits (numbers; an aiohttp ClientTimeout is the client's)
        self._timeouts = {
            k: _seconds(opts.pop(k), f"storage_options[{k!r}]")
            for k in _TIMEOUT_KEYS
            if k in opts and (opts[k] is None or isinstance(opts[k], (int, float, str)))
        }
        self.storage_options = opts
        self.path = path.rstrip("/")
        self.allowed_exceptions = tuple(allowed_exceptions)
        self.retry = retry if retry is not None else RetryPolicy.default()
        self._loop_fs: _FsCache = _FsCache()
        # Set once the bucket is known to exist (see _check_bucket).
        self._bucket_seen = False
        if fs is not None:
            self._async = bool(getattr(fs, "async_impl", False)) and bool(
                getattr(fs, "asynchronous", False)
            )
        else:
            cls = fsspec.get_filesystem_class(self.protocol)
            self._async = bool(getattr(cls, "async_impl", False))
        if fs is None and not self._async:
            self._fs = fsspec.filesystem(self.protocol, **self._fs_options())
        if self._fs is not None and not self._async:
            self.supports_writes = not getattr(self._fs, "read_only", False)

    _setup.__qualname__ = "FsspecStore.__init__"  # argument errors name the constructor
    # inspect.signature(FsspecStore) shows the real parameters, not (*args, **kwargs)
    __init__.__signature__ = inspect.signature(_setup)  # type: ignore[attr-defined]

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (as zarr-python's ``FsspecStore.fs``).

        A store built from a URL makes its async filesystem lazily, one per event
        loop; this then returns an instance usable from synchronous code, built
        from the same protocol and ``storage_options``.
        """
        if self._fs is not None:
            return self._fs
        return fsspec.filesystem(self.protocol, **self._fs_options())

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_url(
        cls,
        url: str,
        storage_options: dict[str, Any] | None = None,
        read_only: bool = False,
        allowed_exceptions: tuple[type[Exception], ...] = ALLOWED_EXCEPTIONS,
        *,
        retry: RetryPolicy | None = None,
    ) -> FsspecStore:
        """A store for ``url`` (``s3://bucket/x.zarr``, ``https://host/x.zarr``, ``memory://x``).

        Parameters
        ----------
        url
            The URL of the store's root; chained URLs (``a::b``) go through fsspec.
        storage_options
            Arguments of the fsspec filesystem (``endpoint_url``, ``key``, ``anon``...).
        read_only
            Refuse writes. HTTP(S) URLs give an :class:`~cuzarr.storage.fsspec.HTTPStore`,
            always read-only.
        allowed_exceptions
            Read errors that mean a missing key (see :class:`FsspecStore`).
        retry
            Retry policy for transient errors.

        Returns
        -------
        FsspecStore
        """
        options = dict(storage_options or {})
        if "::" in url:  # chained URLs: let fsspec build the whole chain
            fs, path = fsspec.core.url_to_fs(url, **options)
            return cls(fs, read_only, path, allowed_exceptions, retry=retry)
        protocol, _ = split_protocol(url)
        protocol = protocol or "file"
        fs_cls = fsspec.get_filesystem_class(protocol)
        if protocol in URL_STORES:  # HTTP(S): HTTPStore (storage/http.py)
            return URL_STORES[protocol](url, storage_options=options, retry=retry)
        path = fs_cls._strip_protocol(url)
        if isinstance(path, list):  # pragma: no cover - defensive
            path = path[0]
        return cls(
            None,
            read_only,
            path,
            allowed_exceptions,
            protocol=protocol,
            storage_options=options,
            retry=retry,
        )

    @classmethod
    def _from_fs(
        cls,
        fs: Any,
        path: str,
        read_only: bool,
        allowed_exceptions: tuple[type[Exception], ...],
        retry: RetryPolicy | None,
    ) -> FsspecStore:
        if getattr(fs, "async_impl", False) and not getattr(fs, "asynchronous", False):
            # A sync instance of an async filesystem (what get_mapper and UPath
            # make): rebuilt from its own arguments, lazily on cuzarr's loop, as
            # zarr-python re-creates it with asynchronous=True.
            options = {
                k: v
                for k, v in (getattr(fs, "storage_options", None) or {}).items()
                if k not in ("asynchronous", "loop")
            }
            return cls(
                None,
                read_only,
                path,
                allowed_exceptions,
                protocol=_protocol_of(fs),
                storage_options=options,
                retry=retry,
            )
        return cls(fs, read_only, path, allowed_exceptions, retry=retry)

    @classmethod
    def from_upath(
        cls,
        upath: Any,
        read_only: bool = False,
        allowed_exceptions: tuple[type[Exception], ...] = ALLOWED_EXCEPTIONS,
        *,
        retry: RetryPolicy | None = None,
    ) -> FsspecStore:
        """A store at a ``upath.UPath`` (its filesystem and path), as zarr-python's.

        Parameters
        ----------
        upath
            The root of the store.
        read_only, allowed_exceptions, retry
            As for :class:`FsspecStore`.

        Returns
        -------
        FsspecStore
        """
        path = upath.path.rstrip("/")
        return cls._from_fs(upath.fs, path, read_only, allowed_exceptions, retry)

    @classmethod
    def from_mapper(
        cls,
        fs_map: Any,
        read_only: bool = False,
        allowed_exceptions: tuple[type[Exception], ...] = ALLOWED_EXCEPTIONS,
        *,
        retry: RetryPolicy | None = None,
    ) -> FsspecStore:
        """A store over an ``fsspec.FSMap`` (``fsspec.get_mapper(url)``), as zarr-python's.

        Parameters
        ----------
        fs_map
            The mapping; its filesystem and root become the store's.
        read_only, allowed_exceptions, retry
            As for :class:`FsspecStore`.

        Returns
        -------
        FsspecStore
        """
        return cls._from_fs(fs_map.fs, fs_map.root, read_only, allowed_exceptions, retry)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.protocol}://{self.path.split('://')[-1]})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FsspecStore)
            and other.protocol == self.protocol
            and other.path == self.path
            and other.storage_options == self.storage_options
            and other._timeouts == self._timeouts
            and (other._fs is self._fs or self._fs is None or other._fs is None)
        )

    def __hash__(self) -> int:  # equal stores hash alike
        return hash((self.protocol, self.path))

    def __str__(self) -> str:
        return f"{self.protocol}://{self.path.split('://')[-1]}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loop_fs"] = _FsCache()
        if self._async and state.get("_fs") is not None and self.protocol is not None:
            state["_fs"] = None
        return state

    async def _afs(self) -> Any:
        """The async filesystem bound to the running loop (built on first use)."""
        if self._fs is not None:
            return self._fs
        loop = asyncio.get_running_loop()
        fs = self._loop_fs.get(id(loop))
        if fs is None:
            cls = fsspec.get_filesystem_class(self.protocol)
            fs = cls(asynchronous=True, loop=loop, skip_instance_cache=True, **self._fs_options())
            self._loop_fs[id(loop)] = fs
            weakref.finalize(self._loop_fs, _close_fs, loop, fs)
        return fs

    def _fs_options(self) -> dict[str, Any]:
        """``storage_options`` for building the filesystem, with the read timeout
        given to botocore (under s3fs) unless the caller set one."""
        opts = dict(self.storage_options)
        read = self._limit("read_timeout")
        if read is not None and self.protocol in ("s3", "s3a"):
            ck = dict(opts.get("config_kwargs") or {})
            ck.setdefault("read_timeout", read)
            opts["config_kwargs"] = ck
        return opts

    def _full(self, key: str) -> str:
        normalize_key(key)
        return f"{self.path}/{key}" if self.path else key

    # -- reads -------------------------------------------------------------------
    async def _fetch(self, path: str, byte_range: ByteRequest | None) -> bytes | None:
        """Read ``path`` (full filesystem path); None when missing."""
        start, end = _range_args(byte_range)
        try:
            if self._async:
                fs = await self._afs()
                if _is_empty_range(byte_range):
                    # (S3 ignores a range that ends before it starts: all of it)
                    await fs._size(path)  # raises if missing
                    return b""
                # A suffix is start=-N: fsspec's contract for negative starts, sent
                # by HTTP, S3 and GCS as one "Range: bytes=-N" request (no size lookup).
                if start is None and end is None and _splits_whole_reads(fs):
                    # s3fs looks a whole object's size up (a HEAD) to split big
                    # ones into parallel parts: a second request per chunk.
                    return bytes(await fs._cat_file(path, max_concurrency=1))
                try:
                    return bytes(await fs._cat_file(path, start=start, end=end))
                except OSError as e:
                    # 416: the range starts at or past the end (or the value is
                    # empty); a missing key is a 404. Slice semantics: empty.
                    if start is not None and start >= 0 and _is_unsatisfiable(e):
                        return b""
                    raise
            return await asyncio.to_thread(self._fetch_sync, path, byte_range)
        except self.allowed_exceptions as e:
            if _missing_bucket(e) is not None:
                raise  # not a missing key: _retrying names the bucket
            return None

    def _fetch_sync(self, path: str, byte_range: ByteRequest | None) -> bytes | None:
        try:
            if _is_empty_range(byte_range):  # (a file:// read of a negative length fails)
                self._fs.size(path)  # raises if missing
                return b""
            start, end = _range_args(byte_range)
            return bytes(self._fs.cat_file(path, start=start, end=end))
        except self.allowed_exceptions as e:
            if _missing_bucket(e) is not None:
                raise
            return None

    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        check_byte_range(byte_range)
        path = self._full(key)
        value = await self._retrying("read", key, self._fetch, path, byte_range)
        if value is None and not self._bucket_seen and self._gcs():
            await self._check_bucket("read", key)  # gcsfs: a missing bucket reads as "missing"
        return value

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key``, asked of the filesystem (a HEAD over HTTP and
        S3), not read; ``FileNotFoundError`` if it holds nothing."""
        n = await self.told_size(key)
        if n is None:  # a server that does not tell: read it
            return await super().getsize(key)
        return n

    async def told_size(self, key: str) -> int | None:
        """:meth:`getsize` as the filesystem tells it, never by reading the value:
        None where it does not tell (a sharded read asks it beside a shard's
        index, where reading the whole shard would defeat the partial read)."""
        path = self._full(key)

        async def size() -> int | None:
            if self._async:
                fs = await self._afs()
                if self.protocol in ("http", "https"):
                    return await _http_head_size(fs, path)
                n = await fs._size(path)
            else:
                n = await asyncio.to_thread(self._fs.size, path)
            return None if n is None else int(n)

        return await self._retrying("size", key, size)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[bytes | None]:
        reqs = list(key_ranges)
        for _, r in reqs:
            check_byte_range(r)
        if self._async or type(self).get is not FsspecStore.get or len(reqs) <= 1:
            return await super().get_partial_values(prototype, reqs)
        # Sync filesystem: a few keys per thread hop, under the global limit.
        sem = io_semaphore()
        paths = [(self._full(k), r) for k, r in reqs]

        def batch_sync(part: list[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
            return [self._fetch_sync(p, r) for p, r in part]

        async def batch(lo: int) -> list[bytes | None]:
            async with sem:
                part = paths[lo : lo + _BATCH]
                return await self._retrying(
                    "read", reqs[lo][0], asyncio.to_thread, batch_sync, part
                )

        parts = await asyncio.gather(*(batch(i) for i in range(0, len(paths), _BATCH)))
        return [v for p in parts for v in p]

    async def exists(self, key: str) -> bool:
        path = self._full(key)

        async def check() -> bool:
            if self._async:
                fs = await self._afs()
                return bool(await fs._isfile(path))
            return bool(await asyncio.to_thread(self._fs.isfile, path))

        found = await self._retrying("exists", key, check)
        if not found:
            await self._check_bucket("exists", key)
        return found

    # -- writes ------------------------------------------------------------------
    def _check_fs_writable(self) -> None:
        self._check_writable()
        if not self.supports_writes:
            raise ReadOnlyError(f"{self!r}: the filesystem does not support writes")

    async def set(self, key: str, value: bytes) -> None:
        self._check_fs_writable()
        path = self._full(key)
        data = bytes(as_bytes_like(value))

        async def put() -> None:
            if self._async:
                fs = await self._afs()
                await fs._pipe_file(path, data)
            else:
                await asyncio.to_thread(self._pipe_sync, path, data)

        await self._retrying("write", key, put)

    def _pipe_sync(self, path: str, data: bytes) -> None:
        try:
            self._fs.pipe_file(path, data)
        except FileNotFoundError:
            # Directory-based filesystems (file://) need the parent directory first.
            self._fs.makedirs(self._fs._parent(path), exist_ok=True)
            self._fs.pipe_file(path, data)

    async def delete(self, key: str) -> None:
        self._check_fs_writable()
        path = self._full(key)

        async def rm() -> None:
            try:
                if self._async:
                    fs = await self._afs()
                    await fs._rm_file(path)
                else:
                    await asyncio.to_thread(self._fs.rm_file, path)
            except FileNotFoundError as e:
                if _missing_bucket(e) is not None:
                    raise  # not an absent key: _retrying names the bucket

        await self._retrying("delete", key, rm)

    async def delete_many(self, keys: Sequence[str]) -> None:
        """Remove many keys; absent ones are not an error.

        On S3 (s3fs) this is one ``DeleteObjects`` request per 1,000 keys instead
        of one ``DeleteObject`` per key; keys that request reports as not deleted
        (and every key, where the endpoint does not offer ``DeleteObjects``) are
        deleted one by one, so their errors name them. Elsewhere key by key.
        """
        self._check_fs_writable()
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
        if self._async and type(self).delete is FsspecStore.delete:
            fs = await self._afs()
            if _has_delete_objects(fs):
                await delete_objects(self, fs, keys)
                return
        await super().delete_many(keys)

    async def delete_dir(self, prefix: str) -> None:
        self._check_fs_writable()
        keys = [k async for k in self.list_prefix(prefix.strip("/") + "/" if prefix else "")]
        await self.delete_many(keys)

    # -- listing -----------------------------------------------------------------
    def _dir_path(self, sub: str) -> str:
        """The filesystem path of directory ``sub`` (a key prefix) below the root."""
        return f"{self.path}/{sub}" if sub and self.path else (sub or self.path)

    def _canon(self, full: str) -> str:
        """A listed path without its protocol, comparable with the root's."""
        return full.split("://", 1)[-1] if "://" in full else full

    def _rel(self, full: str) -> str | None:
        root = self._canon(self.path)
        full = self._canon(full)
        if not root:
            return full.lstrip("/")
        if full.startswith(root + "/"):
            return full[len(root) + 1 :]
        return None

    async def _find(self, sub: str) -> list[str]:
        path = self._dir_path(sub)
        try:
            if self._async:
                fs = await self._afs()
                fs.invalidate_cache()
                found = await fs._find(path)
            else:
                self._fs.invalidate_cache()
                found = await asyncio.to_thread(self._fs.find, path)
        except FileNotFoundError as e:
            if _missing_bucket(e) is not None:
                raise  # _retrying names the bucket
            found = []
        if not found and not self._bucket_seen and self._gcs():
            await self._check_bucket("list", sub)
        out = []
        for f in found:
            rel = self._rel(f)
            if rel:
                out.append(rel)
        return sorted(out)

    def list(self) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            for key in await self._retrying("list", "", self._find, ""):
                yield key

        return gen()

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        _inside_root(prefix)

        async def gen() -> AsyncIterator[str]:
            directory = key_directory(prefix)[:-1]
            for key in await self._retrying("list", prefix, self._find, directory):
                if key.startswith(prefix):
                    yield key

        return gen()

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        _inside_root(prefix)

        async def gen() -> AsyncIterator[str]:
            p = prefix.strip("/")
            path = self._dir_path(p)

            async def ls() -> list[str]:
                try:
                    if self._async:
                        fs = await self._afs()
                        fs.invalidate_cache()
                        return list(await fs._ls(path, detail=False))
                    self._fs.invalidate_cache()
                    return list(await asyncio.to_thread(self._fs.ls, path, detail=False))
                except (FileNotFoundError, NotADirectoryError) as e:
                    if _missing_bucket(e) is not None:
                        raise
                    return []

            names: set[str] = set()
            base = self._canon(path).rstrip("/")
            entries = await self._retrying("list", prefix, ls)
            if not entries and not self._bucket_seen and self._gcs():
                await self._check_bucket("list", prefix)
            for entry in entries:
                e = self._canon(entry).rstrip("/")
                if e.startswith(base + "/") or not base:
                    name = e[len(base) + 1 :] if base else e.lstrip("/")
                    name = name.split("/", 1)[0]
                    if name:
                        names.add(name)
            for name in sorted(names):
                yield name

        return gen()


class _FsCache(dict):
    """Async filesystems by loop id (a dict subclass, so it can be weakly referenced)."""


def _close_fs(loop: asyncio.AbstractEventLoop, fs: Any) -> None:
    """Close the aiohttp session / aiobotocore client of an async filesystem."""
    session = getattr(fs, "_session", None) or getattr(fs, "_s3", None)
    close = getattr(type(fs), "close_session", None)
    if session is None or close is None or loop.is_closed():
        return
    try:
        if loop.is_running():
            closer = getattr(session, "close", None) or getattr(session, "__aexit__", None)
            if getattr(session, "close", None) is not None:
                asyncio.run_coroutine_threadsafe(session.close(), loop)
            elif closer is not None:
                asyncio.run_coroutine_threadsafe(closer(None, None, None), loop)
        else:
            close(loop, session)
    except Exception:  # pragma: no cover - best effort at teardown
        pass


def _range_args(byte_range: ByteRequest | None) -> tuple[int | None, int | None]:
    if byte_range is None:
        return None, None
    if isinstance(byte_range, RangeByteRequest):
        return byte_range.start, byte_range.end
    if isinstance(byte_range, OffsetByteRequest):
        return byte_range.offset, None
    if isinstance(byte_range, SuffixByteRequest):
        return -byte_range.suffix, None
    raise TypeError(f"unsupported byte range {byte_range!r}")


def _is_empty_range(byte_range: ByteRequest | None) -> bool:
    if isinstance(byte_range, SuffixByteRequest):
        return byte_range.suffix == 0
    return isinstance(byte_range, RangeByteRequest) and byte_range.end <= byte_range.start


def _protocol_of(fs: Any) -> str:
    p = getattr(fs, "protocol", "file")
    return p[0] if isinstance(p, (tuple, list)) else str(p)


async def _http_head_size(fs: Any, url: str) -> int | None:
    """The size a HEAD request tells, or None: fsspec's ``_size`` over HTTP
    falls back to a GET when HEAD does not tell, and the server then sends the
    whole value."""
    import fsspec.implementations.http as fsspec_http  # the optional dependency

    file_info = getattr(fsspec_http, "_file_info", None)
    if file_info is None or not hasattr(fs, "encode_url"):
        # another fsspec: its own way, GET fallback included
        n = await fs._size(url)
        return None if n is None else int(n)
    session = await fs.set_session()
    try:
        info = await file_info(fs.encode_url(url), session=session, size_policy="head", **fs.kwargs)
    except FileNotFoundError:
        raise
    except Exception as e:
        status = getattr(e, "status", None)
        if status == 404:
            raise FileNotFoundError(url) from e
        return None  # HEAD refused (405), or another answer without a size
    n = info.get("size")
    return None if n is None else int(n)
