"""``HTTPStore``: a read-only store over plain HTTP(S) servers, and its transport.

It talks to the aiohttp session of fsspec's ``HTTPFileSystem`` directly: a 404 is
a missing key, a server that ignores ``Range`` is sliced locally, a 206 is checked
against its ``Content-Range``, and a body sent with a ``Content-Encoding`` is
inflated here, at most ``storage.max_inflated_bytes``. Retries and time limits are
:class:`~cuzarr.storage.fsspec.FsspecStore`'s.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Sequence
from typing import Any, NoReturn
from urllib.parse import quote, unquote

from cuzarr.config import config
from cuzarr.storage.base import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
    normalize_key,
    range_bounds,
    slice_bytes,
)
from cuzarr.storage.fsspec_store import URL_STORES, FsspecStore, _is_empty_range
from cuzarr.storage.http_sessions import shared_http_fs
from cuzarr.storage.remote_errors import (
    RangeMismatchError,
    TransportEncodingError,
    TruncatedRangeError,
)
from cuzarr.storage.remote_retry import RetryPolicy

__all__ = ["HTTPStore"]


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


URL_STORES["http"] = URL_STORES["https"] = HTTPStore
