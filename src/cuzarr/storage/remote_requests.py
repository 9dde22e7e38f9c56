"""Running one request of a remote store: its time limits, retries on
transient errors, and the check that tells a missing bucket from a missing key.

:class:`RemoteRequests` is a mixin of :class:`~cuzarr.storage.fsspec.FsspecStore`:
it uses the store's ``_timeouts``, ``retry``, ``protocol``, ``path``,
``storage_options``, ``_fs``, ``_async``, ``_afs()``, ``_canon()`` and
``_bucket_seen``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cuzarr.config import config
from cuzarr.storage.remote_errors import (
    BucketNotFoundError,
    RemoteStoreError,
    RemoteTimeoutError,
)
from cuzarr.storage.remote_retry import (
    _is_timeout,
    _missing_bucket,
    _seconds,
    is_transient,
)
from cuzarr.storage.s3_requests import _has_delete_objects

__all__ = ["RemoteRequests"]


class RemoteRequests:
    """Time limits, retries and missing-bucket checks of a remote store's requests."""

    _timeouts: dict[str, float | None]
    _bucket_seen: bool

    def _limit(self, name: str) -> float | None:
        """A time limit: the store's own (``storage_options``), else ``storage.<name>``."""
        if name in self._timeouts:
            return self._timeouts[name]
        default = 300.0 if name == "timeout" else 30.0
        return _seconds(config.get(f"storage.{name}", default), f"storage.{name}")

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
