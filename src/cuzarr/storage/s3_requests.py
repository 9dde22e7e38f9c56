"""S3 (s3fs) specifics of fsspec stores: bulk deletes through ``DeleteObjects``,
and whole-object reads without s3fs's size lookup."""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import TYPE_CHECKING, Any

from cuzarr.runtime.sync import io_semaphore
from cuzarr.storage.base import Store
from cuzarr.storage.remote_retry import _http_status, _missing_bucket, is_transient

if TYPE_CHECKING:
    from cuzarr.storage.fsspec_store import FsspecStore

__all__ = ["delete_objects"]
# Object names a DeleteObjects request (XML 1.0, which botocore writes unescaped)
# cannot carry as they are: control characters make it malformed, and AWS
# documents that a CR must be sent as &#13; since XML parsers read it as LF ("a\rb"
# would name "a\nb"). They are deleted one by one.
_XML_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")

# Keys in one S3 DeleteObjects request (the API's limit).
_DELETE_OBJECTS_MAX = 1000


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


def _has_delete_objects(fs: Any) -> bool:
    """Whether ``fs`` is s3fs's filesystem (its ``_call_s3`` reaches DeleteObjects)."""
    return callable(getattr(fs, "_call_s3", None)) and any(
        c.__name__ == "S3FileSystem" for c in type(fs).__mro__
    )


async def delete_objects(store: FsspecStore, fs: Any, keys: list[str]) -> None:
    """Delete ``keys`` of ``store`` in S3 ``DeleteObjects`` requests of up to 1,000
    keys each; keys a request does not delete (or where the endpoint has no
    ``DeleteObjects``) one by one, through the store's own ``delete``."""
    sem = io_semaphore()
    buckets: dict[str, list[tuple[str, str]]] = {}
    alone: list[str] = []
    for key in keys:
        bucket, name, _ = fs.split_path(store._full(key))
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
                    raise store._no_bucket("delete", items[0][1], bucket) from e
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
            failed = await store._retrying("delete", items[0][1], request)
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
            await Store.delete_many(store, left)

    singles = [Store.delete_many(store, alone)] if alone else []
    await asyncio.gather(*singles, *(batch(b, items) for b, items in batches))
