"""Errors of remote stores (fsspec, HTTP): each names the store and the key."""

from __future__ import annotations

from typing import Any

from cuzarr.errors import CodecError, CuzarrError, StoreTimeoutError

__all__ = [
    "ALLOWED_EXCEPTIONS",
    "BucketNotFoundError",
    "RangeMismatchError",
    "RemoteStoreError",
    "RemoteTimeoutError",
    "TransportEncodingError",
    "TruncatedRangeError",
]


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


# What fsspec-based stores treat as a missing key (zarr-python's default).
ALLOWED_EXCEPTIONS: tuple[type[Exception], ...] = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)
