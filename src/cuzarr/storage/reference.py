"""A read-only store over kerchunk references.

A reference set maps Zarr keys to where their bytes live, so an HDF5, netCDF,
TIFF or GRIB archive described by kerchunk reads as a Zarr hierarchy without
conversion. Two JSON layouts are read:

- version 0: ``{"key": value, ...}``
- version 1: ``{"version": 1, "templates": {"u": "https://..."}, "refs": {...}}``

Each value is one of: a ``str`` (the literal content, UTF-8 encoded), a
``"base64:..."`` string (decoded bytes), ``[url]`` (the whole target file) or
``[url, offset, length]`` (a byte range of it). ``{{name}}`` in a URL is
replaced by the template of that name. Targets are local paths or any URL that
fsspec reads (``s3://``, ``https://``...); requests to one target run
concurrently under the global I/O limit, and the store itself never lists a
target. Not supported: the ``gen`` generator section and Parquet references.

A malformed reference raises :class:`~cuzarr.errors.MetadataError` naming its
key when the store is made. Reading a key whose target is gone raises
``FileNotFoundError``; one whose target ends before the referenced range raises
``MetadataError`` (a short read would decode as other values); both name the key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from cuzarr.errors import CuzarrError, MetadataError
from cuzarr.storage.base import (
    ByteRequest,
    RangeByteRequest,
    Store,
    range_bounds,
    slice_bytes,
)

__all__ = ["ReferenceStore"]

_TEMPLATE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4")  # read through fsspec's codecs


def _load_refs(fo: Any, target_options: dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(fo, Mapping):
        return dict(fo)
    if isinstance(fo, (bytes, bytearray)):
        return _parse_refs(fo, "references")
    s = os.fspath(fo)
    options = dict(target_options or {})
    if s.lower().endswith(_COMPRESSED):
        # a compressed reference file (refs.json.gz, .zst...): as fsspec's
        # ReferenceFileSystem reads it with target_options={"compression": "infer"}
        options.setdefault("compression", "infer")
    if ("://" in s and not s.startswith("file://")) or options:
        import fsspec

        with fsspec.open(s, "rb", **options) as f:
            return _parse_refs(f.read(), s)
    if s.startswith("file://"):
        s = s[len("file://") :]
    if os.path.isdir(s):
        raise MetadataError(
            f"{s} is a directory (Parquet references?): only JSON reference files are supported"
        )
    with open(s, "rb") as f:
        return _parse_refs(f.read(), s)


def _parse_refs(raw: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataError(f"{where}: not a JSON reference file ({e})") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: references must be a JSON object")
    return doc


def _parse_ref(key: str, value: Any, templates: dict[str, str]) -> Any:
    """One reference -> bytes (inline data) or ``(url, offset, length)``."""
    if isinstance(value, dict):
        # Some writers keep metadata documents as JSON objects.
        return json.dumps(value).encode()
    if isinstance(value, list):
        if len(value) not in (1, 3) or not (value[0] is None or isinstance(value[0], str)):
            raise MetadataError(
                f"reference {key!r}: expected [url] or [url, offset, length], got {value!r}"
            )
        url = value[0]
        if url is not None:
            url = _TEMPLATE.sub(lambda m: templates.get(m.group(1), m.group(0)), url)
        if len(value) == 1:
            return (url, None, None)
        offset, length = (_nonnegative_int(key, v) for v in value[1:])
        return (url, offset, length)
    if isinstance(value, str):
        if value.startswith("base64:"):
            text = "".join(value[len("base64:") :].split())
            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as e:
                raise MetadataError(f"reference {key!r}: invalid base64 data ({e})") from None
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise MetadataError(f"reference {key!r}: unsupported value {value!r}")


def _nonnegative_int(key: str, v: Any) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise MetadataError(
            f"reference {key!r}: offset and length must be non-negative integers, got {v!r}"
        )
    return v


class ReferenceStore(Store):
    """Zarr keys resolved through kerchunk references (read-only).

    Parameters
    ----------
    fo
        The references: a dict (v0 or v1 layout), or a path / URL of a JSON file.
    target_options
        fsspec options to read ``fo`` when it is a URL.
    remote_protocol, remote_options
        Options for the filesystem that holds the targets (``storage_options``
        of the :class:`~cuzarr.storage.fsspec.FsspecStore` built for remote URLs).
        Relative target paths resolve against the directory of ``fo`` when it is
        a local file.
    """

    supports_writes = False
    supports_deletes = False

    def __init__(
        self,
        fo: Any,
        *,
        target_options: dict[str, Any] | None = None,
        remote_protocol: str | None = None,
        remote_options: dict[str, Any] | None = None,
        read_only: bool = True,
    ) -> None:
        super().__init__(read_only=True)
        raw = _load_refs(fo, target_options)
        self._base = None
        if isinstance(fo, (str, os.PathLike)):
            local = os.fspath(fo)
            local = local[len("file://") :] if local.startswith("file://") else local
            if "://" not in local:
                self._base = os.path.dirname(os.path.abspath(local))
        self.remote_protocol = remote_protocol
        self.remote_options = dict(remote_options or {})
        if "version" in raw and "refs" in raw:
            if raw["version"] != 1:
                raise MetadataError(f"unsupported kerchunk reference version {raw['version']!r}")
            refs = raw["refs"]
            templates = {k: str(v) for k, v in (raw.get("templates") or {}).items()}
            if raw.get("gen"):
                raise MetadataError("kerchunk 'gen' references are not supported")
        else:
            refs, templates = raw, {}
        if not isinstance(refs, Mapping):
            raise MetadataError(f"kerchunk 'refs' must be a JSON object, got {type(refs).__name__}")
        self._refs: dict[str, Any] = {}
        for key, value in refs.items():
            self._refs[key] = _parse_ref(key, value, templates)
        self._remote: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"ReferenceStore(<{len(self._refs)} refs>)"

    def with_read_only(self, read_only: bool = False) -> Store:
        return self

    # -- target access -------------------------------------------------------------
    def _remote_store(self, url: str) -> Any:
        from cuzarr.storage.fsspec import FsspecStore

        protocol = url.split("://", 1)[0]
        store = self._remote.get(protocol)
        if store is None:
            store = FsspecStore.from_url(f"{protocol}://", storage_options=self.remote_options)
            self._remote[protocol] = store
        return store

    def _local_path(self, url: str) -> str:
        if url.startswith("file://"):
            url = url[len("file://") :]
        if not os.path.isabs(url) and self._base is not None:
            url = os.path.join(self._base, url)
        return url

    @staticmethod
    def _read_local(path: str, offset: int | None, length: int | None) -> bytes:
        with open(path, "rb") as f:
            if offset is None:
                return f.read()
            f.seek(offset)
            return f.read(length)

    async def _read_target(self, url: str, offset: int | None, length: int | None) -> bytes:
        if url is None:
            raise MetadataError("reference with a null URL and no default target")
        is_url = "://" in url and not url.startswith("file://")
        if is_url or self.remote_protocol not in (None, "file"):
            if "://" not in url and self.remote_protocol:
                url = f"{self.remote_protocol}://{url}"
            store = self._remote_store(url)
            rng = None if offset is None else RangeByteRequest(offset, offset + (length or 0))
            data = await store._retrying("read", url, store._fetch, url, rng)
            if data is None:
                raise FileNotFoundError("not found")
            return data
        return await asyncio.to_thread(self._read_local, self._local_path(url), offset, length)

    # -- store interface -----------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        ref = self._refs.get(key)
        if ref is None:
            return None
        if isinstance(ref, bytes):
            return slice_bytes(ref, byte_range)
        url, offset, length = ref
        try:
            if byte_range is not None and offset is not None and length is not None:
                # Narrow the request instead of fetching the whole referenced range.
                start, stop = range_bounds(byte_range, length)
                if stop <= start:
                    return b""
                return await self._read_checked(key, url, offset + start, stop - start)
            data = await self._read_checked(key, url, offset, length)
        except FileNotFoundError as e:
            # a listed key whose bytes are gone is an error, not a missing chunk
            # (which would read as the fill value): say which key
            raise FileNotFoundError(f"key {key!r}: reference target {url} is missing ({e})") from e
        except CuzarrError as e:
            if isinstance(e, MetadataError):
                raise
            raise type(e)(f"key {key!r}: reference target {url}: {e}") from e
        except OSError as e:
            # (errno picks the subclass again: IsADirectoryError, PermissionError...)
            raise OSError(
                e.errno, f"key {key!r}: reading reference target {url} failed: {e.strerror or e}"
            ) from e
        return slice_bytes(data, byte_range)

    async def _read_checked(
        self, key: str, url: str, offset: int | None, length: int | None
    ) -> bytes:
        """The referenced bytes; a target that ends before them is an error (a
        short read would decode as another chunk, or as garbage)."""
        data = await self._read_target(url, offset, length)
        if length is not None and len(data) != length:
            raise MetadataError(
                f"key {key!r}: the reference asks for bytes {offset}-{offset + length} of "
                f"{url}, which ends before them (got {len(data)} of {length} bytes): "
                "the reference or its target is out of date"
            )
        return data

    async def exists(self, key: str) -> bool:
        return key in self._refs

    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()

    async def delete(self, key: str) -> None:
        self._check_writable()

    def list(self) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            for key in list(self._refs):
                yield key

        return gen()
