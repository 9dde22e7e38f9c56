"""N5 containers, presented as Zarr v2 hierarchies.

:class:`N5Store` wraps the store that holds an N5 container (a directory by
default) and shows it to cuzarr as a Zarr **v2** store, so no other part of the
library knows about N5:

- ``<path>/attributes.json`` with ``dimensions`` reads as ``<path>/.zarray``:
  shape and chunks reversed (N5 lists the fastest-varying dimension first),
  big-endian dtype, ``order: "C"``, ``compressor: null``, ``fill_value: 0``,
  ``dimension_separator: "."``; without ``dimensions`` it reads as ``.zgroup``.
  ``dimension_order="n5"`` keeps N5's order instead (``order: "F"``, as
  tensorstore shows N5 data) and ``byte_order="native"`` gives native dtypes.
  The other attributes read as ``.zattrs``.
- Chunk key ``i.j.k`` is the N5 block ``k/j/i``. Reading a block parses its
  big-endian header (mode, number of dimensions, block size per dimension, the
  element count in mode 1), decompresses it (``raw``, ``gzip``, ``zstd``,
  ``bzip2``, ``xz``, ``blosc``) no further than the elements the header
  announces (as the N5 reference implementation reads them: no decompression
  bombs) and pads a truncated edge block to the full chunk, handing cuzarr raw
  big-endian bytes. A bad header raises ``MetadataError``, undecodable data
  ``CodecError``, both naming the block's key. The block format is
  ``n5_codec.py``'s; this module maps keys and attributes.

Writing goes the other way: a ``.zarray`` written through the store becomes
``attributes.json`` (its numcodecs compressor picks the N5 compression: zstd,
gzip, zlib, bz2, lzma, blosc or none; a ``.zarray`` without a compressor over an
existing dataset, which is the store's own view of it coming back from an
attribute update or a resize, keeps the dataset's compression), ``.zattrs``
merges into it, and each
chunk is written as an N5 block with the right header, edge blocks truncated as
the N5 reference implementation writes them. While an array created through
this store object is open, its chunks arrive encoded as that array's metadata
says (its compressor, byte order and memory order); the store decodes them with
numcodecs before writing the N5 block and encodes blocks that way on reads, so
the writer's own view stays consistent. Arrays must be Zarr v2
(``zarr_format=2``), use a dtype N5 has (integers up to 64 bits, float32,
float64) and a fill value of 0.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np

from cuzarr.errors import MetadataError
from cuzarr.metadata.array import json_loads
from cuzarr.storage.base import ByteRequest, Store, as_bytes_like, key_directory, slice_bytes
from cuzarr.storage.local import LocalStore
from cuzarr.storage.n5_codec import (
    compression_from_numcodecs,
    decode_block,
    dtype_name,
    encode_block,
    n5_dtype,
)

__all__ = ["N5Store", "decode_block", "encode_block"]

_ATTRS = "attributes.json"
_RESERVED = ("dimensions", "blockSize", "dataType", "compression", "compressionType", "n5")
_N5_VERSION = "4.0.0"
def _synth_zarray(
    attrs: dict[str, Any], dimension_order: str = "zarr", byte_order: str = "big"
) -> dict[str, Any]:
    dtype = n5_dtype(attrs["dataType"])
    if byte_order == "native":
        dtype = dtype.newbyteorder("=")
    keep = dimension_order == "n5"
    return {
        "zarr_format": 2,
        "shape": [int(d) for d in _ordered(attrs["dimensions"], keep)],
        "chunks": [int(b) for b in _ordered(attrs["blockSize"], keep)],
        "dtype": dtype.str,
        "compressor": None,
        "fill_value": 0,
        # N5 blocks hold the first listed dimension fastest: in N5's order the
        # same bytes are an F-order chunk
        "order": "F" if keep else "C",
        "filters": None,
        "dimension_separator": ".",
    }


def _ordered(seq: Sequence[Any], keep: bool) -> list[Any]:
    """N5's dimension list in the store's order: as listed, or reversed."""
    return list(seq) if keep else list(reversed(seq))


def _split(key: str) -> tuple[str, str]:
    if "/" in key:
        head, name = key.rsplit("/", 1)
        return head, name
    return "", key


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


class N5Store(Store):
    """An N5 container shown as a Zarr v2 store.

    Parameters
    ----------
    store
        The container: a path (a directory, as a ``LocalStore``) or any cuzarr
        ``Store`` holding the N5 files.
    read_only
        Refuse writes when true.
    dimension_order : {"zarr", "n5"}
        ``"zarr"`` (the default) reverses N5's dimension list, which names the
        fastest-varying dimension first, so arrays read in C order with the
        fastest dimension last, as z5py and zarr-python 2's ``N5Store`` show
        them. ``"n5"`` keeps N5's own order, as tensorstore's ``n5`` driver and
        the N5 Java library do: shapes match theirs, and the arrays are F order.
    byte_order : {"big", "native"}
        N5 stores big-endian values; ``"native"`` presents (and accepts) them in
        the machine's byte order, as CuPy and torch need.

    Examples
    --------
    >>> a = cuzarr.open_array("data/volume.n5", path="raw", mode="r")  # doctest: +SKIP
    >>> cuzarr.create_array("out.n5", name="x", shape=(64, 64), dtype="uint16",
    ...                     chunks=(32, 32), zarr_format=2)  # doctest: +SKIP
    """

    only_zarr_format = 2

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        read_only: bool = False,
        dimension_order: str = "zarr",
        byte_order: str = "big",
    ) -> None:
        if dimension_order not in ("zarr", "n5"):
            raise ValueError(f"dimension_order must be 'zarr' or 'n5', not {dimension_order!r}")
        if byte_order not in ("big", "native"):
            raise ValueError(f"byte_order must be 'big' or 'native', not {byte_order!r}")
        super().__init__(read_only=read_only)
        self.dimension_order = dimension_order
        self.byte_order = byte_order
        if not isinstance(store, Store):
            store = LocalStore(store, read_only=read_only)
        self.inner = store
        self._attrs_cache: dict[str, dict[str, Any] | None] = {}
        self._client: dict[str, dict[str, Any]] = {}
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        opts = "".join(
            f", {k}={v!r}"
            for k, v, d in (
                ("dimension_order", self.dimension_order, "zarr"),
                ("byte_order", self.byte_order, "big"),
            )
            if v != d
        )
        return f"N5Store({self.inner!r}{opts})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, N5Store)
            and other.inner == self.inner
            and (other.dimension_order, other.byte_order)
            == (self.dimension_order, self.byte_order)
        )

    def _synth(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return _synth_zarray(attrs, self.dimension_order, self.byte_order)

    def _order(self, seq: Sequence[Any]) -> list[Any]:
        """Between N5's dimension list and this store's (the same mapping both ways)."""
        return _ordered(seq, self.dimension_order == "n5")

    def _flip(self, arr: np.ndarray) -> np.ndarray:
        """Between a chunk in this store's dimension order and one as
        :func:`decode_block` gives and :func:`encode_block` takes it (C order
        over N5's list reversed): a transposed view in N5 order, else itself."""
        return arr.T if self.dimension_order == "n5" else arr

    def __hash__(self) -> int:  # equal stores hash alike
        return hash(self.inner)

    def with_read_only(self, read_only: bool = False) -> Store:
        other = super().with_read_only(read_only)
        assert isinstance(other, N5Store)
        other.inner = self.inner.with_read_only(read_only)
        other._attrs_cache = {}
        other._client = {}
        return other

    def _meta_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # -- attributes ----------------------------------------------------------------
    async def _attrs(self, path: str, *, fresh: bool = False) -> dict[str, Any] | None:
        if not fresh and path in self._attrs_cache:
            return self._attrs_cache[path]
        raw = await self.inner.get(_join(path, _ATTRS))
        attrs = None
        if raw is not None:
            attrs = json_loads(raw, _join(path, _ATTRS))
            if not isinstance(attrs, dict):
                raise MetadataError(f"{_join(path, _ATTRS)}: must hold a JSON object")
        self._attrs_cache[path] = attrs
        return attrs

    async def _write_attrs(self, path: str, attrs: dict[str, Any] | None) -> None:
        key = _join(path, _ATTRS)
        if attrs is None:
            await self.inner.delete(key)
        else:
            await self.inner.set(key, json.dumps(attrs, indent=2).encode())
        self._attrs_cache[path] = attrs

    @staticmethod
    def _is_array(attrs: dict[str, Any] | None) -> bool:
        return attrs is not None and "dimensions" in attrs and "dataType" in attrs

    async def _chunk_location(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """(array path, chunk coordinates) when ``key`` names a chunk of an array."""
        parts = key.split("/")
        # Common case: '.'-separated chunk key right below the array.
        path = "/".join(parts[:-1])
        attrs = await self._attrs(path)
        if self._is_array(attrs):
            if not attrs["dimensions"]:  # 0-d: one block, key "0" in both layouts
                return (path, ()) if parts[-1] == "0" else None
            sep = self._client.get(path, {}).get("dimension_separator") or "."
            if sep == ".":
                try:
                    coords = tuple(int(c) for c in parts[-1].split("."))
                except ValueError:
                    return None
                return (path, coords) if len(coords) == len(attrs["dimensions"]) else None
        for k in range(1, len(parts) + 1):  # '/'-separated keys (k=1: 1-D arrays)
            path = "/".join(parts[:-k])
            attrs = await self._attrs(path)
            if self._is_array(attrs) and len(attrs["dimensions"]) == k:
                try:
                    return path, tuple(int(c) for c in parts[-k:])
                except ValueError:
                    return None
        return None

    async def _implicit_group(self, path: str) -> bool:
        """N5 groups need no ``attributes.json``: any non-empty directory outside an array."""
        parts = path.split("/") if path else []
        for i in range(len(parts)):
            if self._is_array(await self._attrs("/".join(parts[:i]))):
                return False
        async for _ in self.inner.list_dir(path):
            return True
        return False

    def _block_key(self, path: str, coords: tuple[int, ...]) -> str:
        return _join(path, "/".join(str(c) for c in self._order(coords)) or "0")

    # -- client view -----------------------------------------------------------------
    def _client_doc(self, path: str, attrs: dict[str, Any]) -> dict[str, Any] | None:
        """The writer's ``.zarray`` when it differs from the synthesized one."""
        doc = self._client.get(path)
        if doc is None:
            return None
        synth = self._synth(attrs)
        plain = (
            doc.get("compressor") is None
            and not doc.get("filters")
            and doc.get("order", "C") == synth["order"]
            and np.dtype(doc["dtype"]) == np.dtype(synth["dtype"])
            and np.dtype(doc["dtype"]).str == synth["dtype"]
        )
        return None if plain else doc

    @staticmethod
    def _decode_client(data: bytes, doc: dict[str, Any]) -> np.ndarray:
        import numcodecs

        buf: Any = data
        if doc.get("compressor"):
            buf = numcodecs.get_codec(dict(doc["compressor"])).decode(buf)
        for f in reversed(doc.get("filters") or []):
            buf = numcodecs.get_codec(dict(f)).decode(buf)
        arr = np.frombuffer(bytes(buf), dtype=np.dtype(doc["dtype"]))
        return arr.reshape(tuple(doc["chunks"]), order=doc.get("order", "C"))

    @staticmethod
    def _encode_client(arr: np.ndarray, doc: dict[str, Any]) -> bytes:
        import numcodecs

        a = np.asarray(arr, dtype=np.dtype(doc["dtype"]))
        buf: Any = a.tobytes(order=doc.get("order", "C"))
        for f in doc.get("filters") or []:
            buf = numcodecs.get_codec(dict(f)).encode(buf)
        if doc.get("compressor"):
            buf = numcodecs.get_codec(dict(doc["compressor"])).encode(buf)
        return bytes(buf)

    # -- reads -------------------------------------------------------------------------
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        value = await self._get_full(key)
        return None if value is None else slice_bytes(value, byte_range)

    async def _get_full(self, key: str) -> bytes | None:
        path, name = _split(key)
        if name == ".zarray":
            attrs = await self._attrs(path, fresh=True)
            if not self._is_array(attrs):
                return None
            doc = self._client.get(path) or self._synth(attrs)
            return json.dumps(doc).encode()
        if name == ".zgroup":
            attrs = await self._attrs(path, fresh=True)
            if self._is_array(attrs):
                return None
            if attrs is None and not await self._implicit_group(path):
                return None
            return b'{"zarr_format": 2}'
        if name == ".zattrs":
            attrs = await self._attrs(path)
            if attrs is None:
                return None
            user = {k: v for k, v in attrs.items() if k not in _RESERVED}
            return json.dumps(user).encode() if user else None
        if name in ("zarr.json", ".zmetadata", _ATTRS):
            return None
        loc = await self._chunk_location(key)
        if loc is None:
            return None
        path, coords = loc
        raw = await self.inner.get(self._block_key(path, coords))
        if raw is None:
            return None
        attrs = await self._attrs(path)
        assert attrs is not None
        return await asyncio.to_thread(
            self._decode_for_client, raw, path, attrs, self._block_key(path, coords)
        )

    def _decode_for_client(
        self, raw: bytes, path: str, attrs: dict[str, Any], block_key: str
    ) -> bytes:
        arr = self._flip(decode_block(raw, attrs, block_key))
        doc = self._client_doc(path, attrs)
        if doc is None:
            synth = self._synth(attrs)
            return arr.astype(synth["dtype"], copy=False).tobytes(order=synth["order"])
        return self._encode_client(arr, doc)

    async def exists(self, key: str) -> bool:
        return await self._get_full(key) is not None

    # -- writes ------------------------------------------------------------------------
    async def set(self, key: str, value: bytes) -> None:
        self._check_writable()
        value = as_bytes_like(value)
        path, name = _split(key)
        if name in ("zarr.json", ".zmetadata"):
            raise MetadataError(
                f"N5Store holds Zarr v2-style nodes only: cannot write {key!r} "
                "(create arrays and groups with zarr_format=2; consolidated metadata "
                "is not stored in N5 containers)"
            )
        if name == ".zarray":
            await self._set_zarray(path, json_loads(value, key))
            return
        if name == ".zgroup":
            async with self._meta_lock():
                attrs = await self._attrs(path, fresh=True) or {}
                if self._is_array(attrs):
                    attrs = {k: v for k, v in attrs.items() if k not in _RESERVED}
                if not path:
                    attrs.setdefault("n5", _N5_VERSION)
                await self._write_attrs(path, attrs)
            return
        if name == ".zattrs":
            user = json_loads(value, key)
            if not isinstance(user, dict):
                raise MetadataError(f"{key}: attributes must be a JSON object")
            clash = [k for k in user if k in _RESERVED and k != "n5"]
            if clash:
                raise MetadataError(f"N5 reserves the attribute names {clash}")
            async with self._meta_lock():
                attrs = await self._attrs(path, fresh=True) or {}
                kept = {k: v for k, v in attrs.items() if k in _RESERVED}
                await self._write_attrs(path, {**kept, **user})
            return
        loc = await self._chunk_location(key)
        if loc is None:
            raise MetadataError(f"N5Store: {key!r} is not metadata or a chunk of a known array")
        path, coords = loc
        attrs = await self._attrs(path)
        assert attrs is not None
        block = await asyncio.to_thread(self._encode_from_client, bytes(value), path, coords, attrs)
        await self.inner.set(self._block_key(path, coords), block)

    def _encode_from_client(
        self, value: bytes, path: str, coords: tuple[int, ...], attrs: dict[str, Any]
    ) -> bytes:
        synth = self._synth(attrs)
        doc = self._client_doc(path, attrs)
        if doc is None:
            arr = np.frombuffer(value, dtype=np.dtype(synth["dtype"]))
            arr = arr.reshape(synth["chunks"], order=synth["order"])
        else:
            arr = self._decode_client(value, doc)
        edge = tuple(
            slice(0, max(0, min(c, s - i * c)))
            for i, c, s in zip(coords, synth["chunks"], synth["shape"])
        )
        return encode_block(self._flip(arr[edge]), attrs)

    async def _set_zarray(self, path: str, doc: dict[str, Any]) -> None:
        dtype = np.dtype(doc["dtype"])
        name = dtype_name(dtype)
        if name is None:
            raise MetadataError(
                f"N5 has no data type for {doc['dtype']!r} (integers and float32/float64 only)"
            )
        if doc.get("fill_value") not in (0, 0.0, None, False):
            raise MetadataError(
                f"N5 arrays read missing blocks as 0; fill_value {doc['fill_value']!r} cannot be stored"
            )
        if any(not isinstance(c, int) for c in doc["chunks"]):
            raise MetadataError("N5 needs a regular chunk grid")
        comp = compression_from_numcodecs(doc.get("compressor"), dtype.itemsize)
        async with self._meta_lock():
            attrs = await self._attrs(path, fresh=True) or {}
            user = {k: v for k, v in attrs.items() if k not in _RESERVED}
            kept = {k: attrs[k] for k in ("n5",) if k in attrs}
            # The store's own view of a dataset says ``compressor: null`` (it hands
            # out decompressed blocks): such a ``.zarray`` coming back (an attribute
            # update, a resize through a handle opened on the container) keeps the
            # dataset's N5 compression, or its blocks would no longer read.
            old_comp = {k: attrs[k] for k in ("compression", "compressionType") if k in attrs}
            if doc.get("compressor") is not None or not self._is_array(attrs) or not old_comp:
                old_comp = {"compression": comp}
            new = {
                **user,
                **kept,
                "dimensions": [int(d) for d in self._order(doc["shape"])],
                "blockSize": [int(c) for c in self._order(doc["chunks"])],
                "dataType": name,
                **old_comp,
            }
            await self._write_attrs(path, new)
            self._client[path] = dict(doc)
        if path:
            root = await self._attrs("", fresh=True)
            if root is None:
                await self._write_attrs("", {"n5": _N5_VERSION})

    async def delete(self, key: str) -> None:
        self._check_writable()
        path, name = _split(key)
        if name in (".zarray", ".zgroup"):
            async with self._meta_lock():
                attrs = await self._attrs(path, fresh=True)
                if attrs is None:
                    return
                is_arr = self._is_array(attrs)
                if (name == ".zarray") == is_arr:
                    await self._write_attrs(path, None)
                    self._client.pop(path, None)
            return
        if name == ".zattrs":
            async with self._meta_lock():
                attrs = await self._attrs(path, fresh=True)
                if attrs is not None:
                    await self._write_attrs(
                        path, {k: v for k, v in attrs.items() if k in _RESERVED}
                    )
            return
        if name in ("zarr.json", ".zmetadata"):
            return
        loc = await self._chunk_location(key)
        if loc is not None:
            await self.inner.delete(self._block_key(*loc))

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await self.inner.delete_dir(prefix)
        p = prefix.strip("/")
        for cache in (self._attrs_cache, self._client):
            for k in [k for k in cache if k == p or k.startswith(p + "/") or not p]:
                cache.pop(k)

    async def clear(self) -> None:
        self._check_writable()
        await self.inner.clear()
        self._attrs_cache.clear()
        self._client.clear()

    def close(self) -> None:
        self.inner.close()

    # -- listing -------------------------------------------------------------------------
    async def _translate(self, keys: Sequence[str]) -> list[str]:
        out: list[str] = []
        for key in keys:
            path, name = _split(key)
            if name == _ATTRS:
                attrs = await self._attrs(path, fresh=True)
                if attrs is None:
                    continue
                out.append(_join(path, ".zarray" if self._is_array(attrs) else ".zgroup"))
                if any(k not in _RESERVED for k in attrs):
                    out.append(_join(path, ".zattrs"))
                continue
            parts = key.split("/")
            for k in range(1, len(parts) + 1):  # k == len(parts): an array at the root
                apath = "/".join(parts[:-k])
                attrs = await self._attrs(apath)
                if self._is_array(attrs):
                    if not attrs["dimensions"] and k == 1 and parts[-1] == "0":
                        out.append(_join(apath, "0"))
                    elif len(attrs["dimensions"]) == k:
                        try:
                            coords = [int(c) for c in self._order(parts[-k:])]
                        except ValueError:
                            break
                        sep = self._client.get(apath, {}).get("dimension_separator") or "."
                        out.append(_join(apath, sep.join(str(c) for c in coords)))
                    break
        return out

    def list(self) -> AsyncIterator[str]:
        return self.list_prefix("")

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async def gen() -> AsyncIterator[str]:
            directory = key_directory(prefix)
            keys = [k async for k in self.inner.list_prefix(directory)]
            for key in await self._translate(keys):
                if key.startswith(prefix):
                    yield key

        return gen()

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        p = prefix.strip("/")
        # inside an array: the names of its translated keys, as any store lists them
        below_array = super().list_dir(p)

        async def gen() -> AsyncIterator[str]:
            attrs = await self._attrs(p, fresh=True)
            if self._is_array(attrs):
                async for name in below_array:
                    yield name
                return
            names = [n async for n in self.inner.list_dir(p)]
            if attrs is not None:
                yield ".zgroup"
                if any(k not in _RESERVED for k in attrs):
                    yield ".zattrs"
            for n in names:
                if n != _ATTRS:
                    yield n

        return gen()
