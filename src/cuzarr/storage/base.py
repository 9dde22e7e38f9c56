"""The async store interface shared by every storage backend.

Method names follow zarr-python 3's ``Store`` so code can move between the two.
Values are bytes-like on the way in and ``bytes`` (or ``None`` for a missing key)
on the way out. The ``*_many`` methods are cuzarr's batch entry points: the array
engine calls them so a backend can serve many keys with one thread hop; their
default implementations go through ``get``/``set``/``delete``, so a subclass that
overrides ``get`` still sees every read.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cuzarr.buffer.concat import Concat
from cuzarr.errors import ByteRangeError, ReadOnlyError, StoreKeyError
from cuzarr.runtime.sync import io_semaphore, sync
from cuzarr.runtime.tasks import gather_or_cancel, in_thread, run_job

__all__ = [
    "ByteRequest",
    "Concat",
    "OffsetByteRequest",
    "RangeByteRequest",
    "Store",
    "SuffixByteRequest",
    "SyncIO",
    "gather_or_cancel",
    "in_thread",
    "key_directory",
    "normalize_key",
    "run_job",
]


def key_directory(prefix: str) -> str:
    """The directory a key prefix lies in, with its trailing ``/`` (``""`` at the
    root): what a store lists to find the keys that start with ``prefix``."""
    return prefix[: prefix.rfind("/") + 1]


class _ByteRequestMeta(type):
    """Lets ``isinstance`` accept zarr-python's byte requests (``zarr.abc.store.
    RangeByteRequest`` ...: same names, same fields) wherever cuzarr checks for
    its own, so every store takes either. ``isinstance`` tests an exact type
    match before calling this: a matching check costs nothing; a failed one (an
    offset request tested against ``RangeByteRequest``) ~0.3 us."""

    def __instancecheck__(cls, inst: object) -> bool:
        t = type(inst)
        if t.__name__ == cls.__name__ and t.__module__.startswith("zarr."):
            return True
        return type.__instancecheck__(cls, inst)


@dataclass(frozen=True)
class RangeByteRequest(metaclass=_ByteRequestMeta):
    """Bytes ``start`` (inclusive) to ``end`` (exclusive)."""

    start: int
    end: int


@dataclass(frozen=True)
class OffsetByteRequest(metaclass=_ByteRequestMeta):
    """Every byte from ``offset`` to the end."""

    offset: int


@dataclass(frozen=True)
class SuffixByteRequest(metaclass=_ByteRequestMeta):
    """The last ``suffix`` bytes."""

    suffix: int


ByteRequest = RangeByteRequest | OffsetByteRequest | SuffixByteRequest


def as_bytes_like(value: Any) -> Any:
    """``value`` as something the stores can write: objects with the buffer
    protocol (bytes, bytearray, memoryview, numpy arrays) as they are,
    zarr-python ``Buffer`` objects (``to_bytes()``) as their bytes."""
    if isinstance(value, (bytes, bytearray)):
        return value
    try:
        view = memoryview(value)
    except TypeError:
        to_bytes = getattr(value, "to_bytes", None)
        if callable(to_bytes):
            return to_bytes()
        raise TypeError(
            f"a store value must be bytes-like (or a zarr-python Buffer), not "
            f"{type(value).__name__}"
        ) from None
    # a strided view (a numpy slice) as its bytes in C order: the stores write
    # contiguous memory
    return value if view.c_contiguous else view.tobytes()



@dataclass(frozen=True)
class SyncIO:
    """Blocking batch operations of a store (see ``Store.sync_io``)."""

    get_many: Any  # (keys) -> list[bytes | None]
    set_many: Any  # (items) -> None
    delete_many: Any  # (keys) -> None
    get_ranges: Any  # ([(key, ByteRequest | None)]) -> list[bytes | None]
    # (key) -> bytes-like | None: one whole value, possibly in a buffer of the
    # calling thread's that its next get_reused call overwrites (None: not offered)
    get_reused: Any = None
    # ([(key, ByteRequest | None)]) -> list[bytes-like | None]: get_ranges, the
    # values possibly in the calling thread's buffer, as get_reused
    get_ranges_reused: Any = None
    # () -> context manager: within it, the calling thread's reads of one key all
    # see the same stored value (one open file per key), even if it is replaced
    # meanwhile; for a shard's index and inner chunks read separately (None: not offered)
    pinned: Any = None
    # (keys, place) -> (values, offsets): whole values read straight into one
    # buffer the caller lays out; ``place(sizes)`` gets each key's size (None:
    # missing; or an int64 array, -1: missing) and returns (buffer, offsets). ``offsets[i]`` is where value i
    # lies in the buffer, or -1 when it came back as separate bytes (it changed
    # size meanwhile) or is missing (None: not offered). An optional third
    # argument ``each(i, offset, n)`` is called as soon as value i lies whole in
    # the buffer (its bytes still in the CPU's cache: the device path walks zstd
    # frames there). An optional fourth, ``frames`` (a uint64 array or None):
    # where the store reads through the C loops (cuzarr.runtime.native), it
    # fills frames[i] with the zstd walk of value i there instead of calling
    # ``each`` for it
    get_into: Any = None
    # (keys) -> list[int | None]: each value's size in bytes (None: missing), of
    # the value a ``pinned`` block's reads see; for a shard whose index was read
    # alone, as the end of its last inner chunk (None: not offered)
    get_sizes: Any = None
    # (keys, starts, sizes, place) -> (offsets, sizes, got): byte ranges read
    # straight into one buffer the caller lays out: range j, sizes[j] bytes of
    # key j's value from starts[j] on (int64 arrays; a key may repeat; sizes[j]
    # -1: to the value's end), placed by ``place(sizes)`` -> (buffer, int64
    # offsets) as ``get_into`` places, the sizes then known (-1: the key is
    # missing). In a ``pinned`` block, the values its other reads see.
    # ``got[j]`` (bool): range j was read whole there (False: the key is
    # missing, or its value ends before the range does) (None: not offered)
    get_ranges_into: Any = None


def check_byte_range(byte_range: Any) -> None:
    """Refuse a byte request with a negative field (``ByteRangeError``). Stores
    had answered ``RangeByteRequest(0, -1)`` differently: Python slicing in
    memory, nothing from files and archives. Requests of no known type are left
    to the store (a ``TypeError`` there)."""
    if byte_range is None:
        return
    if isinstance(byte_range, RangeByteRequest):
        bad = byte_range.start < 0 or byte_range.end < 0
    elif isinstance(byte_range, OffsetByteRequest):
        bad = byte_range.offset < 0
    elif isinstance(byte_range, SuffixByteRequest):
        bad = byte_range.suffix < 0
    else:
        return
    if bad:
        raise ByteRangeError(
            f"invalid byte request {byte_range!r}: offsets, ends and lengths are >= 0"
        )


def slice_bytes(data: bytes, byte_range: ByteRequest | None) -> bytes:
    """Apply a byte request to an in-memory value."""
    if byte_range is None:
        return data
    check_byte_range(byte_range)
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(0, len(data) - byte_range.suffix) :] if byte_range.suffix else b""
    raise TypeError(f"unsupported byte range {byte_range!r}")


def range_bounds(byte_range: ByteRequest, size: int) -> tuple[int, int]:
    """``(start, stop)`` of a byte request on a value of ``size`` bytes, as slicing
    would give them (``stop <= start``: nothing)."""
    check_byte_range(byte_range)
    if isinstance(byte_range, RangeByteRequest):
        return byte_range.start, min(byte_range.end, size)
    if isinstance(byte_range, OffsetByteRequest):
        return byte_range.offset, size
    if isinstance(byte_range, SuffixByteRequest):
        return max(0, size - byte_range.suffix), size
    raise TypeError(f"unsupported byte range {byte_range!r}")


def normalize_key(key: str) -> str:
    """Validate a store key: relative, '/'-separated, no '.' or '..' components.

    Raises
    ------
    StoreKeyError
        If the key is absolute, empty in a component, or would escape the root.
    """
    if not isinstance(key, str):
        raise StoreKeyError(f"store keys are str, got {type(key).__name__}")
    if key.startswith("/") or "\\" in key or "\x00" in key:
        raise StoreKeyError(f"invalid store key {key!r}: must be relative and '/'-separated")
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise StoreKeyError(f"invalid store key {key!r}: empty, '.' or '..' component")
    return key


def store_token(store: Any) -> tuple[Any, ...]:
    """What names a store in dask graphs (``__dask_tokenize__``): its type, its
    text, its hash and options, not a pickle of its contents (for a memory
    store, every byte in it)."""
    try:
        h = hash(store)
    except TypeError:  # an unhashable wrapped store: this very object
        h = id(store)
    # What else decides what a store reads: two fsspec stores of one path on
    # different endpoints (or credentials) are different stores, as == says.
    options = getattr(store, "storage_options", None)
    inner = getattr(store, "inner", None) or getattr(store, "_store", None)
    return (
        "cuzarr.Store",
        type(store).__module__,
        type(store).__qualname__,
        str(store),
        h,
        json.dumps(options, sort_keys=True, default=repr) if options else None,
        store_token(inner) if inner is not None and inner is not store else None,
    )


class Store(ABC):
    """Abstract async key-value store."""

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return store_token(self)

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True
    supports_partial_writes: bool = False
    #: The one Zarr format a store can hold, where it cannot hold both (N5: 2):
    #: creation without ``zarr_format`` uses it.
    only_zarr_format: int | None = None

    def __init__(self, *, read_only: bool = False) -> None:
        self._read_only = read_only

    @property
    def read_only(self) -> bool:
        """Whether writes through this store object are refused."""
        return self._read_only

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(
                f"{self!r} is read-only (open it with mode='r+' to write, or "
                "with_read_only(False))"
            )

    def with_read_only(self, read_only: bool = False) -> Store:
        """Return a store over the same data with a different ``read_only`` flag."""
        import copy

        other = copy.copy(self)
        other._read_only = read_only
        return other

    # -- reads ---------------------------------------------------------------
    @abstractmethod
    async def get(
        self, key: str, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        """Return the value at ``key`` (or a byte range of it), ``None`` if absent."""

    async def get_partial_values(
        self, prototype: Any, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[bytes | None]:
        """Fetch several (key, byte range) pairs concurrently."""

        sem = io_semaphore()

        async def one(key: str, rng: ByteRequest | None) -> bytes | None:
            async with sem:
                return await self.get(key, prototype, rng)

        return await gather_or_cancel(*(one(k, r) for k, r in key_ranges))

    async def get_many(self, keys: Sequence[str], prototype: Any = None) -> list[bytes | None]:
        """Fetch whole values for many keys; ``None`` where a key is absent."""
        return await self.get_partial_values(prototype, [(k, None) for k in keys])

    @abstractmethod
    async def exists(self, key: str) -> bool:
        """Whether ``key`` holds a value."""

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key`` (``FileNotFoundError`` if it holds nothing).

        This default reads the value; stores that can ask for a size override it.
        """
        value = await self.get(key)
        if value is None:
            raise FileNotFoundError(key)
        return len(value)

    async def getsize_prefix(self, prefix: str) -> int:
        """Total bytes stored under the directory ``prefix`` (a '/' is added to a
        prefix that lacks one, as zarr-python does: ``"a"`` does not count ``"ab"``)."""

        if prefix and not prefix.endswith("/"):
            prefix += "/"

        sem = io_semaphore()

        async def one(key: str) -> int:
            async with sem:
                try:
                    return await self.getsize(key)
                except FileNotFoundError:  # deleted since it was listed
                    return 0

        keys = [k async for k in self.list_prefix(prefix)]
        return sum(await asyncio.gather(*(one(k) for k in keys)))

    # -- writes --------------------------------------------------------------
    @abstractmethod
    async def set(self, key: str, value: bytes) -> None:
        """Store ``value`` at ``key`` (atomically where the backend allows)."""

    async def set_if_not_exists(self, key: str, value: bytes) -> None:
        """Store ``value`` unless ``key`` already holds one."""
        self._check_writable()  # refused on a read-only store even if the key exists
        if not await self.exists(key):
            await self.set(key, value)

    async def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store many values concurrently."""

        sem = io_semaphore()

        async def one(key: str, value: bytes) -> None:
            async with sem:
                await self.set(key, value)

        await gather_or_cancel(*(one(k, v) for k, v in items))

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key``; removing an absent key is not an error."""

    async def delete_many(self, keys: Sequence[str]) -> None:
        """Remove many keys concurrently."""

        sem = io_semaphore()

        async def one(key: str) -> None:
            async with sem:
                await self.delete(key)

        await gather_or_cancel(*(one(k) for k in keys))

    async def rename_dir(self, source: str, dest: str) -> bool:
        """Move every key under ``source`` to ``dest`` in one atomic step where
        the store can (a local directory: one rename); False, with nothing
        done, where it cannot: the caller then copies the keys. This base
        store cannot."""
        return False

    async def delete_dir(self, prefix: str) -> None:
        """Remove every key under ``prefix`` (a '/'-terminated directory)."""
        self._check_writable()
        if prefix.startswith("/"):
            return  # no key starts with "/": "/" names no directory (as zarr-python)
        prefix = prefix.rstrip("/")
        keys = [k async for k in self.list_prefix(prefix + "/" if prefix else "")]
        await self.delete_many(keys)

    # -- listing -------------------------------------------------------------
    @abstractmethod
    def list(self) -> AsyncIterator[str]:
        """Every key in the store."""

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key that starts with ``prefix``."""

        async def gen() -> AsyncIterator[str]:
            async for key in self.list():
                if key.startswith(prefix):
                    yield key

        return gen()

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Names directly below ``prefix`` (keys and sub-directories, no duplicates)."""

        async def gen() -> AsyncIterator[str]:
            p = prefix.rstrip("/")
            p = p + "/" if p else ""
            seen: set[str] = set()
            async for key in self.list_prefix(p):
                name = key[len(p) :].split("/", 1)[0]
                if name and name not in seen:
                    seen.add(name)
                    yield name

        return gen()

    async def is_empty(self, prefix: str = "") -> bool:
        """Whether the directory ``prefix`` holds no key (a '/' is added to a prefix
        that lacks one, as zarr-python does: ``"a"`` is empty even if ``"ab"`` exists)."""
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        async for _ in self.list_prefix(prefix):
            return False
        return True

    async def clear(self) -> None:
        """Remove every key."""
        self._check_writable()
        await self.delete_many([k async for k in self.list()])

    def _keeps(self, owner: type, *names: str) -> bool:
        """Whether this store's class leaves the methods ``names`` as ``owner``
        defines them: a subclass that overrides one must see every call, so the
        shortcuts that bypass it (``sync_io``, inline paths) are off."""
        cls = type(self)
        if cls is owner:  # the common case, on every small read: nothing to compare
            return True
        return all(getattr(cls, n) is getattr(owner, n) for n in names)

    def sync_io(self) -> SyncIO | None:
        """Blocking batch I/O the engine may call from its worker threads, or None.

        Stores whose I/O is local and cheap (memory, local files) return one so a
        worker can fetch, decode and scatter (or encode and store) a batch in one
        hop; the engine still uses the async methods otherwise. Subclasses that
        override ``get``/``set``/``delete`` get None, so they see every call.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources held by the store."""

    # -- zarr-python's conveniences ----------------------------------------------
    @property
    def supports_consolidated_metadata(self) -> bool:
        """Whether consolidated metadata may be written to this store (it may)."""
        return True

    def get_sync(
        self, key: str, *, prototype: Any = None, byte_range: ByteRequest | None = None
    ) -> bytes | None:
        """:meth:`get`, blocking (on cuzarr's event-loop thread)."""

        return sync(self.get(key, prototype, byte_range))

    def set_sync(self, key: str, value: Any) -> None:
        """:meth:`set`, blocking."""

        sync(self.set(key, value))

    def delete_sync(self, key: str) -> None:
        """:meth:`delete`, blocking."""

        sync(self.delete(key))

    async def get_ranges(
        self,
        key: str,
        byte_ranges: Sequence[ByteRequest | None],
        *,
        prototype: Any = None,
        max_concurrency: int = 10,
        max_gap_bytes: int = 1 << 20,
        max_coalesced_bytes: int = 16 << 20,
    ) -> AsyncIterator[list[tuple[int, bytes | None]]]:
        """Many byte ranges of ``key`` (``None``: the whole value), as zarr-python's
        ``Store.get_ranges``: batches of ``(input index, bytes)``; here one batch,
        fetched by :meth:`get_partial_values` (which merges nearby ranges where the
        store can). A missing ``key`` raises ``FileNotFoundError`` inside an
        ``ExceptionGroup``, as zarr-python reports it. The tuning arguments are
        accepted for compatibility; the store's own settings apply."""
        del max_concurrency, max_gap_bytes, max_coalesced_bytes
        values = await self.get_partial_values(prototype, [(key, r) for r in byte_ranges])
        if any(v is None for v in values):
            raise ExceptionGroup(
                f"reading ranges of {key!r}", [FileNotFoundError(f"no value at key {key!r}")]
            )
        yield list(enumerate(values))

    def get_ranges_sync(
        self,
        key: str,
        byte_ranges: Sequence[ByteRequest | None],
        *,
        prototype: Any = None,
        max_gap_bytes: int = 1 << 20,
        max_coalesced_bytes: int = 16 << 20,
    ) -> list[tuple[int, bytes | None]]:
        """:meth:`get_ranges`, blocking: every ``(input index, bytes)`` pair."""

        async def collect() -> list[tuple[int, bytes | None]]:
            out: list[tuple[int, bytes | None]] = []
            async for batch in self.get_ranges(key, byte_ranges, prototype=prototype):
                out.extend(batch)
            return out

        return sync(collect())

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> Store:
        """Create a store (zarr-python's ``await Store.open(...)``); stores here
        open their resources on first use, so this is the constructor."""
        return cls(*args, **kwargs)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
