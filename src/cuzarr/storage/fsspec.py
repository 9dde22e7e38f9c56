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

The code is in several modules, one concern each (this one gathers their public
names): ``fsspec_store.py`` (:class:`FsspecStore`), ``http.py``
(:class:`HTTPStore` and its transport: ranges, ``Content-Range`` checks, bounded
inflation), ``remote_requests.py`` (time limits, the retry loop, missing
buckets), ``remote_retry.py`` (:class:`RetryPolicy`, which errors are
transient), ``remote_errors.py`` (the errors), ``s3_requests.py`` (S3 bulk
deletes) and ``http_sessions.py`` (HTTP connection pools shared between stores).
"""

from __future__ import annotations

from cuzarr.storage.fsspec_store import FsspecStore
from cuzarr.storage.http import HTTPStore
from cuzarr.storage.remote_errors import (
    ALLOWED_EXCEPTIONS,
    BucketNotFoundError,
    RangeMismatchError,
    RemoteStoreError,
    RemoteTimeoutError,
    TransportEncodingError,
    TruncatedRangeError,
)
from cuzarr.storage.remote_retry import RetryPolicy, is_transient

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
    "is_transient",
]
