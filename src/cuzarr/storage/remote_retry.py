"""How remote requests are retried: the policy, the time limits, and which
errors a retry may cure (transient) or that say a bucket is missing."""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass
from typing import Any

from cuzarr.config import config

__all__ = ["RetryPolicy", "is_transient"]

_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})

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


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of ``exc``, or of the client error s3fs translated it from."""
    status = _status_of(exc)
    if status is None and exc.__cause__ is not None:
        status = _status_of(exc.__cause__)
    return status


def _is_unsatisfiable(exc: BaseException) -> bool:
    """Whether ``exc`` (or the client error it was translated from) is an HTTP 416."""
    if isinstance(exc, FileNotFoundError):
        return False
    return 416 in (_status_of(exc), exc.__cause__ and _status_of(exc.__cause__))
