"""Stores over fsspec filesystems: S3 (s3fs), HTTP(S), ``memory://`` and the rest.

Async filesystems (``fs.async_impl``: s3fs, gcsfs, HTTP) are driven through
their coroutine API (``_cat_file``, ``_pipe_file``, ...) on cuzarr's own event
loop: the filesystem object is built lazily, inside the first coroutine that
needs it, with ``asynchronous=True`` and ``loop=`` that running loop (one
instance per loop). Sync filesystems run in worker threads, several keys per
thread hop.

HTTP(S) gets its own subclass, :class:`HTTPStore`, that talks to the aiohttp
session directly so it works against plain static servers: a 404 is a missing
key, and a server that ignores ``Range`` (answers 200 with the whole body) is
handled by slicing locally. Listing an HTTP store parses the server's directory
index pages, which many servers do not serve; consolidated metadata makes
listing unnecessary.

Every request goes through one retry policy (:class:`RetryPolicy`): connection
errors, timeouts and HTTP 408/429/5xx are retried with exponential backoff;
anything else fails at once with a :class:`RemoteStoreError` naming the key.

Time limits (config keys, or ``storage_options`` keys of the same name, which
win): ``timeout`` (default 300 s) bounds one request in all, its retries and
their backoff included (writes excepted: an upload takes as long as it takes);
``read_timeout`` (default 30 s) is the longest an answer may stall (HTTP and
S3), after which the attempt fails and is retried. Either failing raises
:class:`RemoteTimeoutError` (a :class:`cuzarr.errors.StoreTimeoutError`) naming
the key and the limit. HTTP reads ask for ``Accept-Encoding: identity``; an
answer compressed anyway is inflated here, at most ``storage.max_inflated_bytes``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import re
import weakref
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote, unquote

from cuzarr.config import config
from cuzarr.errors import CodecError, CuzarrError, StoreKeyError, StoreTimeoutError
from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    as_bytes_like,
    check_byte_range,
    normalize_key,
    range_bounds,
    slice_bytes,
)
from cuzarr.storage.http_sessions import shared_http_fs

__all__ = [
    "ALLOWED_EXCEPTIONS",
    "BucketNotFoundError",
    "FsspecStore",
    "HTTPStore",
    "RangeMismatchError",
    "RemoteStoreError",
    "RemoteTimeoutError",
    "RetryPolicy",
    "TransportEncodingError",
    "TruncatedRangeError",
]

_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# Sync filesystems: keys per worker-thread hop.
_BATCH = 16
# Object names a DeleteObjects request (XML 1.0, which botocore writes unescaped)
# cannot carry as they are: control characters make it malformed, and AWS
# documents that a CR must be sent as &#13; since XML parsers read it as LF ("a\rb"
# would name "a\nb"). They are deleted one by one.
_XML_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")

# Keys in one S3 DeleteObjects request (the API's limit).
_DELETE_OBJECTS_MAX = 1000


def _inside_root(prefix: str) -> None:
    """Refuse a listing prefix with a ``..`` segment: on a file system it would
    list names outside the store's root (reads of such keys are refused too)."""
    if ".." in prefix.split("/"):
        raise StoreKeyError(f"prefix {prefix!r} leads outside the store root")


class RemoteStoreError(CuzarrError, OSError):
    """A remote store request failed permanently (or after every retry).

    The message names the store and the key; ``__cause__`` is the underlying error.
    """


class BucketNotFoundError(RemoteStoreError, FileNotFoundError):
    """The S3 bucket the store lives in does not exist (or that of another
    filesystem whose errors say so; gcsfs's do not).

    A ``FileNotFoundError``, so it is caught where a missing file is; its
    ``bucket`` attribute names the bucket. A missing key in a bucket that exists
    is no error (reads return ``None``).
    """

    def __init__(self, message: str, bucket: str = "") -> None:
        super().__init__(message)
        self.bucket = bucket

    def __reduce__(self) -> tuple[Any, ...]:
        # (pickled across processes by dask: keep the bucket)
        return (type(self), (str(self.args[0]), self.bucket))


class RangeMismatchError(RemoteStoreError):
    """An HTTP 206 answer does not hold the byte range that was asked for.

    Its ``Content-Range`` names other bytes (a caching proxy answering from another
    range, say), it is a multipart answer, or it has no ``Content-Range`` and a body
    of another length than asked. The message names the key, the range asked for and
    the one answered. Not retried.
    """


class TruncatedRangeError(RangeMismatchError, CodecError):
    """A 206 answer whose body is not as long as its own ``Content-Range`` says (cut,
    or padded, in transit). Also a :class:`~cuzarr.errors.CodecError`, as a cut value
    found only at decoding is."""


class RemoteTimeoutError(RemoteStoreError, StoreTimeoutError):
    """A remote request that ran past ``storage.timeout`` (all its attempts), or
    whose answers stalled past ``storage.read_timeout`` on every attempt."""


class TransportEncodingError(RemoteStoreError, CodecError):
    """An HTTP answer whose ``Content-Encoding`` cannot be taken: it inflates to
    more than ``storage.max_inflated_bytes``, is corrupt or of an unknown kind,
    or encodes a byte range (a range of compressed bytes is not the value's)."""


_TIMEOUT_KEYS = ("timeout", "read_timeout")


def _seconds(value: Any, name: str) -> float | None:
    """A time limit: a positive number of seconds, or None for no limit."""
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds or None, got {value!r}") from None
    if not seconds > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return seconds


def _is_timeout(exc: BaseException) -> bool:
    """A timeout of the transport (aiohttp, asyncio, botocore/urllib3 read timeouts)."""
    return isinstance(exc, TimeoutError) or any(
        c.__name__ in ("ReadTimeoutError", "ConnectTimeoutError") for c in type(exc).__mro__
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How transient errors of remote requests are retried.

    Parameters
    ----------
    retries
        Attempts after the first one (0 disables retrying). Default: config key
        ``storage.retries`` when set, else 3.
    backoff
        Delay before the first retry, in seconds; doubled after each retry, with
        up to 50% random jitter.
    max_backoff
        Upper bound on one delay, in seconds.
    """

    retries: int = 3
    backoff: float = 0.05
    max_backoff: float = 2.0

    @classmethod
    def default(cls) -> RetryPolicy:
        return cls(retries=int(config.get("storage.retries", 3)))

    def delay(self, attempt: int) -> float:
        d = min(self.max_backoff, self.backoff * (2**attempt))
        return d * (1 + 0.5 * random.random())


# What fsspec-based stores treat as a missing key (zarr-python's default).
ALLOWED_EXCEPTIONS: tuple[type[Exception], ...] = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)

# The S3 server's own words (for clients that keep the message but not the code),
# not a name a key could hold.
_NO_SUCH_BUCKET = re.compile(r"specified bucket does not exist", re.IGNORECASE)


def _missing_bucket(exc: BaseException) -> str | None:
    """The bucket name (``""`` when unnamed) if ``exc`` says its bucket does not
    exist, else None. s3fs turns botocore's ``NoSuchBucket`` into a plain
    ``FileNotFoundError``, as it does ``NoSuchKey``: the cause tells them apart."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 4:
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            err = response.get("Error") or {}
            if err.get("Code") == "NoSuchBucket":
                return str(err.get("BucketName") or "")
        if _NO_SUCH_BUCKET.search(str(e)):
            return ""
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return status
    code = getattr(exc, "code", None)
    if isinstance(code, int) and 100 <= code < 600:
        return code
    # botocore ClientError: the HTTP status is in the parsed response.
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int):
            return status
    return None


_SPLITS: dict[type, bool] = {}


def _splits_whole_reads(fs: Any) -> bool:
    """Whether ``fs._cat_file`` takes ``max_concurrency`` (s3fs: with more than
    one, a read of a whole object first asks for its size)."""
    cls = type(fs)
    if cls not in _SPLITS:
        try:
            params = inspect.signature(fs._cat_file).parameters
        except (TypeError, ValueError):
            params = {}
        _SPLITS[cls] = "max_concurrency" in params
    return _SPLITS[cls]


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` looks like an error that a retry may cure."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    # s3fs translates a botocore ClientError into a plain OSError (a 503 becomes
    # OSError(EBUSY)) with the ClientError as its cause: judge by the cause.
    cause = exc.__cause__
    if type(exc) is OSError and cause is not None and _status_of(exc) is None:
        status = _status_of(cause)
        if status is not None:
            return status in _TRANSIENT_STATUS
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = _status_of(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS
    try:
        import aiohttp
    except ImportError:  # pragma: no cover
        aiohttp = None  # type: ignore[assignment]
    if aiohttp is not None and isinstance(
        exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)
    ):
        return True
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError, ReadTimeoutError
    except ImportError:
        return False
    return isinstance(exc, (BotoConnectionError, HTTPClientError, ReadTimeoutError))


class FsspecStore(Store):
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
            import fsspec

            cls = fsspec.get_filesystem_class(self.protocol)
            self._async = bool(getattr(cls, "async_impl", False))
        if fs is None and not self._async:
            import fsspec

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
        import fsspec

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
            Refuse writes. HTTP(S) URLs give a :class:`HTTPStore`, always read-only.
        allowed_exceptions
            Read errors that mean a missing key (see :class:`FsspecStore`).
        retry
            Retry policy for transient errors.

        Returns
        -------
        FsspecStore
        """
        import fsspec
        from fsspec.core import split_protocol

        options = dict(storage_options or {})
        if "::" in url:  # chained URLs: let fsspec build the whole chain
            fs, path = fsspec.core.url_to_fs(url, **options)
            return cls(fs, read_only, path, allowed_exceptions, retry=retry)
        protocol, _ = split_protocol(url)
        protocol = protocol or "file"
        fs_cls = fsspec.get_filesystem_class(protocol)
        if protocol in ("http", "https"):
            return HTTPStore(url, storage_options=options, retry=retry)
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
            import fsspec

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

    def _limit(self, name: str) -> float | None:
        """A time limit: the store's own (``storage_options``), else ``storage.<name>``."""
        if name in self._timeouts:
            return self._timeouts[name]
        default = 300.0 if name == "timeout" else 30.0
        return _seconds(config.get(f"storage.{name}", default), f"storage.{name}")

    def _full(self, key: str) -> str:
        normalize_key(key)
        return f"{self.path}/{key}" if self.path else key

    # -- a missing bucket --------------------------------------------------------
    def _bucket(self) -> str:
        """The bucket (first path segment) the store's root is in."""
        return self._canon(self.path).lstrip("/").split("/", 1)[0]

    def _no_bucket(self, what: str, key: str, bucket: str) -> BucketNotFoundError:
        bucket = bucket or self._bucket()
        return BucketNotFoundError(
            f"{what} of key {key!r} in {self!r} failed: bucket {bucket!r} does not exist",
            bucket,
        )

    def _gcs(self) -> bool:
        return self.protocol in ("gs", "gcs") or (
            isinstance(self.protocol, (list, tuple)) and "gs" in self.protocol
        )

    async def _check_bucket(self, what: str, key: str) -> None:
        """Raise :class:`BucketNotFoundError` if the store's S3 or GCS bucket is
        missing.

        For answers that cannot tell a missing bucket from a missing key: on S3 a
        HEAD's bare 404 (``exists``; reads and listings need no check, S3 names
        the missing bucket in their errors); on GCS every "not found" (gcsfs
        reports both alike). One bucket request per store object, on its first
        such answer; any answer but "not found" (a 403 for credentials without
        list rights, say) counts as "exists".
        """
        if self._bucket_seen:
            return
        bucket = self._bucket()
        fs = await self._afs() if self._async else self._fs
        gcs = self._gcs()
        if not bucket or not (gcs or _has_delete_objects(fs)):
            self._bucket_seen = True
            return
        try:
            if gcs:
                if self._async:
                    await fs._info(bucket)
                else:
                    await asyncio.to_thread(fs.info, bucket)
            elif self._async:
                await fs._call_s3("head_bucket", Bucket=bucket)
            else:
                await asyncio.to_thread(fs.call_s3, "head_bucket", Bucket=bucket)
        except FileNotFoundError as e:
            raise self._no_bucket(what, key, bucket) from e
        except Exception:
            pass  # unknown: the store's own requests will say what is wrong
        self._bucket_seen = True

    # -- retries -----------------------------------------------------------------
    def _client_retried_connect(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a failure to connect that the filesystem's own client
        has already retried: botocore (under s3fs) retries those several times over
        ~4 s, and retrying each of its attempts again made a wrong or dead endpoint
        take ~20 s to report. Other transient errors (5xx, resets, timeouts) are
        still retried here on top of the client's retries."""
        if not any(c.__name__ == "EndpointConnectionError" for c in type(exc).__mro__):
            return False
        ck = getattr(self._fs, "config_kwargs", None) if self._fs is not None else None
        if ck is None:
            ck = self.storage_options.get("config_kwargs") or {}
        retries = ck.get("retries") or {}
        return not (retries.get("total_max_attempts") == 1 or retries.get("max_attempts") == 0)

    async def _retrying(self, what: str, key: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` with retries, within the total time limit (``timeout``)."""
        total = None if what == "write" else self._limit("timeout")
        if total is None:
            return await self._attempts(what, key, fn, *args)
        deadline = asyncio.timeout(total)
        try:
            async with deadline:
                return await self._attempts(what, key, fn, *args)
        except TimeoutError as e:
            if not deadline.expired():
                raise
            raise RemoteTimeoutError(
                f"{what} of key {key!r} in {self!r} did not finish within {total:g} s "
                f"(the total time limit per request, storage.timeout)"
            ) from e

    async def _attempts(self, what: str, key: str, fn: Any, *args: Any) -> Any:
        attempt = 0
        while True:
            try:
                return await fn(*args)
            except RemoteStoreError:
                raise  # already names the key (a 206 with the wrong range, ...)
            except FileNotFoundError as e:
                bucket = _missing_bucket(e)
                if bucket is not None:
                    raise self._no_bucket(what, key, bucket) from e
                if what != "write":
                    raise  # reads, listings and checks: the key is absent
                # A write has nothing to find but its bucket (or container).
                raise RemoteStoreError(
                    f"write of key {key!r} in {self!r} failed: the bucket or path does not "
                    f"exist: {e}"
                ) from e
            except Exception as e:
                if (
                    attempt < self.retry.retries
                    and is_transient(e)
                    and not self._client_retried_connect(e)
                ):
                    await asyncio.sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                tries = f" after {attempt + 1} attempts" if attempt else ""
                if _is_timeout(e):
                    read = self._limit("read_timeout")
                    limit = "no read timeout" if read is None else f"read timeout {read:g} s"
                    raise RemoteTimeoutError(
                        f"{what} of key {key!r} in {self!r} timed out{tries} ({limit}, "
                        f"storage.read_timeout, or the client's own): {type(e).__name__}: {e}"
                    ) from e
                raise RemoteStoreError(
                    f"{what} of key {key!r} in {self!r} failed{tries}: {type(e).__name__}: {e}"
                ) from e

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
        from cuzarr.runtime.sync import io_semaphore

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
            from cuzarr.errors import ReadOnlyError

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
                await self._delete_objects(fs, keys)
                return
        await super().delete_many(keys)

    async def _delete_objects(self, fs: Any, keys: list[str]) -> None:
        """``keys`` in S3 ``DeleteObjects`` requests of up to 1,000 keys each."""
        from cuzarr.runtime.sync import io_semaphore

        sem = io_semaphore()
        buckets: dict[str, list[tuple[str, str]]] = {}
        alone: list[str] = []
        for key in keys:
            bucket, name, _ = fs.split_path(self._full(key))
            if _XML_UNSAFE.search(name):
                alone.append(key)
            else:
                buckets.setdefault(bucket, []).append((name, key))
        batches = [
            (bucket, items[i : i + _DELETE_OBJECTS_MAX])
            for bucket, items in buckets.items()
            for i in range(0, len(items), _DELETE_OBJECTS_MAX)
        ]

        async def batch(bucket: str, items: list[tuple[str, str]]) -> None:
            async def request() -> list[str] | None:
                """Names S3 did not delete; None: no DeleteObjects there."""
                try:
                    out = await fs._call_s3(
                        "delete_objects",
                        Bucket=bucket,
                        Delete={"Objects": [{"Key": n} for n, _ in items], "Quiet": True},
                    )
                except FileNotFoundError as e:
                    if _missing_bucket(e) is not None:
                        raise self._no_bucket("delete", items[0][1], bucket) from e
                    return []
                except OSError as e:
                    if not is_transient(e) and _http_status(e) in (400, 405, 501):
                        # S3-compatible endpoints without DeleteObjects (or that want
                        # a Content-MD5 botocore no longer sends)
                        return None
                    raise
                finally:
                    fs.invalidate_cache()
                return [err.get("Key") for err in out.get("Errors") or ()]

            async with sem:
                failed = await self._retrying("delete", items[0][1], request)
            if failed is None:
                left = [key for _, key in items]
            else:
                not_deleted = set(failed)
                left = [key for name, key in items if name in not_deleted]
                if len(left) < len(not_deleted):  # names that are not ours: all
                    left = [key for _, key in items]
            if left:
                # One DeleteObject per key: the same retries, and an error that
                # names its key (AccessDenied, ...).
                await super(FsspecStore, self).delete_many(left)

        singles = [super().delete_many(alone)] if alone else []
        await asyncio.gather(*singles, *(batch(b, items) for b, items in batches))

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
            directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
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


def _range_header(byte_range: ByteRequest) -> str:
    """The ``Range`` header value of a (non-empty) byte request."""
    if isinstance(byte_range, SuffixByteRequest):
        return f"bytes=-{byte_range.suffix}"
    if isinstance(byte_range, RangeByteRequest):
        return f"bytes={byte_range.start}-{byte_range.end - 1}"
    if isinstance(byte_range, OffsetByteRequest):
        return f"bytes={byte_range.offset}-"
    raise TypeError(f"unsupported byte range {byte_range!r}")


def _request_len(byte_range: ByteRequest) -> int | None:
    """How many bytes a request asks for, when the value is long enough (an offset:
    unknown without the size)."""
    if isinstance(byte_range, SuffixByteRequest):
        return byte_range.suffix
    if isinstance(byte_range, RangeByteRequest):
        return max(0, byte_range.end - byte_range.start)
    return None


# A single-part 206's Content-Range (RFC 9110 14.4): "bytes first-last/complete"
_CONTENT_RANGE = re.compile(r"\s*bytes\s+(\d+)\s*-\s*(\d+)\s*/\s*(\d+|\*)\s*", re.IGNORECASE)


def _is_empty_range(byte_range: ByteRequest | None) -> bool:
    if isinstance(byte_range, SuffixByteRequest):
        return byte_range.suffix == 0
    return isinstance(byte_range, RangeByteRequest) and byte_range.end <= byte_range.start


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of ``exc``, or of the client error s3fs translated it from."""
    status = _status_of(exc)
    if status is None and exc.__cause__ is not None:
        status = _status_of(exc.__cause__)
    return status


def _has_delete_objects(fs: Any) -> bool:
    """Whether ``fs`` is s3fs's filesystem (its ``_call_s3`` reaches DeleteObjects)."""
    return callable(getattr(fs, "_call_s3", None)) and any(
        c.__name__ == "S3FileSystem" for c in type(fs).__mro__
    )


def _is_unsatisfiable(exc: BaseException) -> bool:
    """Whether ``exc`` (or the client error it was translated from) is an HTTP 416."""
    if isinstance(exc, FileNotFoundError):
        return False
    return 416 in (_status_of(exc), exc.__cause__ and _status_of(exc.__cause__))


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


def _protocol_of(fs: Any) -> str:
    p = getattr(fs, "protocol", "file")
    return p[0] if isinstance(p, (tuple, list)) else str(p)


class _HTTPStatusError(OSError):
    def __init__(self, status: int, url: str) -> None:
        super().__init__(f"HTTP {status} for {url}")
        self.status = status


async def _http_client(**kwargs: Any) -> Any:
    """An aiohttp session whose connection pool does not cap concurrency (the
    global ``async.concurrency`` limit does)."""
    import aiohttp

    kwargs.setdefault("connector", aiohttp.TCPConnector(limit=0))
    return aiohttp.ClientSession(**kwargs)


class HTTPStore(FsspecStore):
    """A read-only store over HTTP(S), for plain static file servers.

    Keys are URLs below ``url``. A 404 (or 403 from object stores that hide
    missing keys, when ``forbidden_is_missing``) reads as a missing key. Byte
    ranges use ``Range`` requests; a server that ignores them and answers with
    the whole body is sliced locally. Listing parses directory index pages, so
    prefer consolidated metadata (``cuzarr.consolidate_metadata``) for groups.

    Parameters
    ----------
    url
        Root URL of the hierarchy.
    storage_options
        Passed to fsspec's ``HTTPFileSystem`` (``client_kwargs``, ``headers`` in
        ``client_kwargs``...); its aiohttp session serves every request.
    retry
        Retry policy for transient errors.
    forbidden_is_missing
        Treat 403 as a missing key (S3-style public buckets answer 403).
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        forbidden_is_missing: bool = False,
        read_only: bool = True,
    ) -> None:
        protocol = url.split("://", 1)[0]
        opts = dict(storage_options or {})
        # aiohttp's default pool holds 100 connections: async.concurrency above
        # that would queue inside aiohttp. cuzarr's own limit bounds requests.
        opts.setdefault("get_client", _http_client)
        super().__init__(
            None,
            read_only=True,
            path=url.rstrip("/"),
            protocol=protocol,
            storage_options=opts,
            retry=retry,
        )
        self.forbidden_is_missing = forbidden_is_missing
        self.supports_writes = False
        self.supports_deletes = False

    def with_read_only(self, read_only: bool = False) -> Store:
        return self  # always read-only

    def __repr__(self) -> str:
        return f"HTTPStore({self.path!r})"

    async def _afs(self) -> Any:
        # On cuzarr's loop, stores of the same plain options share one
        # filesystem, whose connection pool stays warm between them
        # (storage/http_sessions.py); elsewhere, one per store and loop.
        if self._fs is None:
            loop_id = id(asyncio.get_running_loop())
            fs = self._loop_fs.get(loop_id)
            if fs is None:
                fs = shared_http_fs(self.protocol, self.storage_options, (_http_client,))
                if fs is not None:
                    self._loop_fs[loop_id] = fs
            if fs is not None:
                return fs
        return await super()._afs()

    def _full(self, key: str) -> str:
        # Keys are percent-encoded: a '#', '?' or '%' in a key is part of the
        # name, not a fragment, query or escape.
        normalize_key(key)
        return f"{self.path}/{quote(key, safe='/')}"

    def _dir_path(self, sub: str) -> str:
        return f"{self.path}/{quote(sub, safe='/')}" if sub else self.path

    def _canon(self, full: str) -> str:
        # Index pages link percent-encoded names: keys are the decoded ones.
        return unquote(super()._canon(full))

    async def _fetch(self, path: str, byte_range: ByteRequest | None) -> bytes | None:
        fs = await self._afs()
        session = await fs.set_session()
        headers: dict[str, str] = {}
        sent: ByteRequest | None = None  # what the Range header asks for
        if byte_range is not None:
            if _is_empty_range(byte_range):
                return b""
            sent = byte_range
            headers["Range"] = _range_header(byte_range)
        kw = dict(getattr(fs, "kwargs", {}))

        async def get(extra: dict[str, str]) -> tuple[int, bytes | None, Any]:
            args = self._request_args(session, kw)
            # Values as stored: a transport encoding is inflated here, bounded
            # (aiohttp would inflate any amount); servers should not send one.
            args["headers"] = {"Accept-Encoding": "identity", **args.get("headers", {}), **extra}
            args["auto_decompress"] = False
            async with session.get(path, **args) as r:
                if r.status == 404 or (r.status == 403 and self.forbidden_is_missing):
                    return r.status, None, r.headers
                if r.status == 416:
                    return r.status, b"", r.headers
                if r.status >= 400:
                    raise _HTTPStatusError(r.status, path)
                return r.status, await self._read_body(r, path), r.headers

        status, data, resp_headers = await get(headers)
        if data is None:
            return None
        if status == 416 and isinstance(byte_range, SuffixByteRequest):
            # A server that refuses suffix ranges (or ones longer than the value):
            # the value's size from the answer or a HEAD, then a plain range.
            size = await self._size_of(session, kw, path, resp_headers)
            if size == 0:
                return b""
            sent = None if size is None else OffsetByteRequest(max(0, size - byte_range.suffix))
            extra = {} if sent is None else {"Range": _range_header(sent)}
            status, data, resp_headers = await get(extra)
            if data is None:
                return None
        if status == 206:
            # Exactly the bytes of ``sent``, or RangeMismatchError: a 206 whose
            # Content-Range is not what was asked for used to be returned as is.
            data = await self._partial_body(
                session, kw, path, sent or OffsetByteRequest(0), data, resp_headers
            )
            if sent is not None:
                return data
        if byte_range is not None:
            data = slice_bytes(data, byte_range)  # the server ignored Range
        return data

    def _request_args(self, session: Any, kw: dict[str, Any]) -> dict[str, Any]:
        """aiohttp request arguments: the filesystem's, with the session's timeout
        given a read (stall) limit of ``read_timeout`` when it has none as short."""
        args = dict(kw)
        read = self._limit("read_timeout")
        base = args.get("timeout") or getattr(session, "timeout", None)
        stalls = getattr(base, "sock_read", 0)
        if read is not None and base is not None and (stalls is None or stalls > read):
            args["timeout"] = type(base)(
                total=base.total,
                connect=base.connect,
                sock_read=read,
                sock_connect=base.sock_connect,
                ceil_threshold=base.ceil_threshold,
            )
        return args

    async def _read_body(self, r: Any, path: str) -> bytes:
        """The answer's body as stored: a ``Content-Encoding`` of gzip or deflate
        is inflated in pieces as it arrives, at most ``storage.max_inflated_bytes``."""
        enc = (r.headers.get("Content-Encoding") or "").strip().lower()
        if enc in ("", "identity"):
            return await r.read()
        key = unquote(path[len(self.path) + 1 :])
        if r.status == 206:
            raise TransportEncodingError(
                f"read of key {key!r} in {self!r}: the server answered a byte range with "
                f"Content-Encoding: {enc}; a range of encoded bytes is not the value's"
            )
        if enc not in ("gzip", "x-gzip", "deflate"):
            raise TransportEncodingError(
                f"read of key {key!r} in {self!r}: the server answered with "
                f"Content-Encoding: {enc}, which cuzarr does not decode (it asks for identity)"
            )
        cap = config.get("storage.max_inflated_bytes", 128 << 20)
        cap = None if cap is None else int(cap)
        # 32 + 15: a gzip or zlib header; raw deflate (sent by some servers as
        # "deflate") is tried when neither is there
        d = zlib.decompressobj(47)
        parts: list[bytes] = []
        total = 0
        first = True
        try:
            async for piece in r.content.iter_chunked(1 << 16):
                if first and enc == "deflate" and piece[:1] and (piece[0] & 0x0F) != 8:
                    d = zlib.decompressobj(-15)
                first = False
                if d.eof:
                    break  # bytes after the stream's end are ignored, as aiohttp does
                out = d.decompress(piece, 0 if cap is None else cap - total + 1)
                total += len(out)
                parts.append(out)
                if cap is not None and total > cap:
                    raise TransportEncodingError(
                        f"read of key {key!r} in {self!r}: the answer's Content-Encoding: "
                        f"{enc} inflates to more than {cap} bytes "
                        f"(storage.max_inflated_bytes); refused"
                    )
        except zlib.error as e:
            raise TransportEncodingError(
                f"read of key {key!r} in {self!r}: corrupt Content-Encoding: {enc} body ({e})"
            ) from e
        if not d.eof:
            raise TransportEncodingError(
                f"read of key {key!r} in {self!r}: the Content-Encoding: {enc} body is truncated"
            )
        return b"".join(parts)

    async def _partial_body(
        self,
        session: Any,
        kw: dict[str, Any],
        path: str,
        req: ByteRequest,
        body: bytes,
        headers: Any,
    ) -> bytes:
        """The bytes ``req`` asks for out of a 206 answer, checked against its
        ``Content-Range``; :class:`RangeMismatchError` when they are not in it."""
        key = unquote(path[len(self.path) + 1 :])
        asked = _range_header(req)

        def fail(why: str, cls: type[RangeMismatchError] = RangeMismatchError) -> NoReturn:
            enc = headers.get("Content-Encoding")
            note = f" (Content-Encoding: {enc})" if enc else ""
            raise cls(
                f"read of key {key!r} in {self!r}: asked for {asked}, the server "
                f"answered 206 with {why}{note}; refusing bytes that may be other ones"
            )

        ctype = headers.get("Content-Type") or ""
        if ctype.lower().startswith("multipart/"):
            fail(f"a multipart body ({ctype}), not the single range asked for")
        cr = headers.get("Content-Range")
        if cr is None:
            # Only the length can be checked. A request that may run past the end
            # (an offset, a suffix longer than the value, a range past its end):
            # the value's size (a HEAD) says how long the answer has to be.
            n = _request_len(req)
            if n is not None and len(body) == n:
                return body
            size = await self._size_of(session, kw, path, {})
            if size is not None:
                lo, hi = range_bounds(req, size)
                if len(body) == max(0, hi - lo):
                    return body
            of = "an unknown size" if size is None else f"{size} bytes"
            fail(f"no Content-Range and {len(body)} bytes (the value has {of})")
        m = _CONTENT_RANGE.fullmatch(cr)
        if m is None:
            fail(f"an unreadable Content-Range {cr!r}")
        first, last = int(m[1]), int(m[2])
        total = None if m[3] == "*" else int(m[3])
        if last < first or (total is not None and last >= total):
            fail(f"an invalid Content-Range {cr!r}")
        if len(body) != last - first + 1:
            fail(
                f"Content-Range {cr!r} ({last - first + 1} bytes) and a body of {len(body)} bytes",
                TruncatedRangeError,
            )
        if total is not None:
            lo, hi = range_bounds(req, total)
            if hi <= lo:
                return b""  # starts at or past the end: empty, as a slice
        elif isinstance(req, RangeByteRequest):
            lo, hi = req.start, req.end
        elif isinstance(req, OffsetByteRequest) and req.offset <= last:
            lo, hi = req.offset, last + 1  # an answer to "bytes=N-" runs to the end
        else:
            fail(f"Content-Range {cr!r}, without the value's size to place it")
        if first <= lo and hi <= last + 1:
            return body[lo - first : hi - first]
        fail(f"Content-Range {cr!r}")

    async def _size_of(
        self, session: Any, kw: dict[str, Any], path: str, headers: Any
    ) -> int | None:
        """The size of ``path`` from a 416's ``Content-Range: bytes */N``, else a HEAD."""
        total = (headers.get("Content-Range") or "").rpartition("/")[2].strip()
        if total.isdigit():
            return int(total)
        async with session.head(path, allow_redirects=True, **self._request_args(session, kw)) as r:
            length = r.headers.get("Content-Length", "")
            if r.status < 300 and length.isdigit() and not r.headers.get("Content-Encoding"):
                return int(length)
        return None

    async def exists(self, key: str) -> bool:
        path = self._full(key)

        async def head() -> bool:
            fs = await self._afs()
            session = await fs.set_session()
            args = self._request_args(session, fs.kwargs)
            async with session.head(path, allow_redirects=True, **args) as r:
                if r.status == 404 or (r.status == 403 and self.forbidden_is_missing):
                    return False
                if r.status >= 400:
                    raise _HTTPStatusError(r.status, path)
                return True

        return await self._retrying("exists", key, head)

    async def set(self, key: str, value: bytes) -> None:
        self._check_fs_writable()

    async def delete(self, key: str) -> None:
        self._check_fs_writable()

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._check_fs_writable()

    async def delete_many(self, keys: Sequence[str]) -> None:
        self._check_fs_writable()
