"""Parquet ("lazy") kerchunk references, as fsspec's ``LazyReferenceMapper`` writes them.

A reference directory holds ``.zmetadata``, a JSON object
``{"metadata": {key: document}, "record_size": N}`` with every metadata key
(``.zgroup``, ``x/.zarray``, ``x/.zattrs``...), and for each Zarr v2 array ``x``
the record files ``x/refs.<i>.parq``: tables with the columns ``path``,
``offset``, ``size`` and ``raw``. Chunk ``k`` of ``x`` (its C-order index over
the chunk grid of ``x/.zarray``) is row ``k % N`` of record ``k // N``: inline
bytes when ``raw`` is set, else ``[path]`` when offset and size are both 0
(the whole file), else ``[path, offset, size]``; a row with neither, or a
record file that does not exist, means no chunk (fsspec writes no file for a
record without references). Paths are used as written: fsspec expands no
templates in Parquet references.

Record files are read when a lookup first needs them and kept, decoded, in a
bounded LRU cache; concurrent lookups in one record share one read. Decoding
uses pyarrow (the ``kerchunk`` extra), which checks what it reads: 9,000
mutated record files (bytes flipped, lengths set to 2**31 - 1) raised errors or
decoded, none crashed, each within 5 ms, under a 1 GiB address-space cap.
fastparquet's decoder is not used: it trusts the lengths, counts and indices
inside a page, and a corrupt record file crashed the interpreter. Any decoding
error becomes a :class:`MetadataError` naming the record and the key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.errors import CuzarrError, MetadataError
from cuzarr.storage.base import gather_or_cancel, in_thread

__all__ = ["ParquetReferences", "parquet_root"]

ZMETADATA = ".zmetadata"
_JSON_SUFFIXES = (".json", ".gz", ".bz2", ".xz", ".zst", ".lz4")
# record files loaded at once while listing (a listing reads every record)
_LIST_WINDOW = 8


def parquet_root(fo: Any, options: dict[str, Any] | None) -> str | None:
    """The root of the Parquet reference directory ``fo`` names, or None when ``fo``
    is not one (a JSON reference file, a dict...). Local directories always are
    (a missing ``.zmetadata`` is then an error); for a URL this follows fsspec's
    ``ReferenceFileSystem``: a name ending in ``parq``, ``parquet`` or ``/``, or
    one with a ``.zmetadata`` below it."""
    if not isinstance(fo, (str, os.PathLike)):
        return None
    s = os.fspath(fo)
    if "://" not in s or s.startswith("file://"):
        path = s.removeprefix("file://")
        return (path.rstrip("/") or "/") if os.path.isdir(path) else None
    name = s.rstrip("/")
    last = name.rsplit("/", 1)[-1].lower()
    if ".json" in last or last.endswith(_JSON_SUFFIXES):
        return None
    if s.endswith(("parq", "parquet", "/")):
        return name
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(name, **(options or {}))
        # one small request, where isdir() would download a file over HTTP
        return name if fs.exists(f"{path}/{ZMETADATA}") else None
    except Exception:  # not reachable as a directory: the JSON path reports it
        return None


@dataclass(frozen=True)
class _Var:
    """A Zarr v2 array whose chunk references lie in record files."""

    name: str
    grid: tuple[int, ...]  # chunks per dimension; (1,) for a 0-d array, as fsspec
    nchunks: int

    def index(self, chunk: str) -> int | None:
        """The C-order number of chunk key ``chunk``, None if it names no chunk."""
        parts = chunk.split(".")
        if len(parts) != len(self.grid):
            return None
        k = 0
        for p, g in zip(parts, self.grid):
            # canonical decimal only: "01" would alias chunk 1 outside the listing
            if not (p.isascii() and p.isdigit()) or (len(p) > 1 and p[0] == "0"):
                return None
            if len(p) > len(str(g)):  # past the grid (and int() refuses 4300+ digits)
                return None
            i = int(p)
            if i >= g:  # fsspec would wrap it onto another chunk
                return None
            k = k * g + i
        return k

    def key(self, k: int) -> str:
        parts = []
        for g in reversed(self.grid):
            k, i = divmod(k, g)
            parts.append(str(i))
        return f"{self.name}/{'.'.join(reversed(parts))}"


@dataclass(frozen=True)
class _Record:
    """One decoded record file: its columns (None when absent) and which rows
    hold a reference."""

    path: Any
    offset: Any
    size: Any
    raw: Any
    present: np.ndarray

    def __len__(self) -> int:
        return len(self.present)


_EMPTY = _Record(None, None, None, None, np.zeros(0, dtype=bool))


def _missing(v: Any) -> bool:
    # nulls come back as None or NaN depending on the engine and the column's
    # encoding (a categorical path column has NaN)
    return v is None or (isinstance(v, float) and math.isnan(v))


_COLUMNS = ("path", "offset", "size", "raw")


def _pyarrow() -> tuple[Any, Any]:
    # imported on first use: an optional extra, and a slow import (~0.2 s) that
    # reading JSON references, or no references at all, should not pay
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ImportError(
            "reading Parquet kerchunk references needs pyarrow: pip install 'cuzarr[kerchunk]'"
        ) from None
    return pyarrow, pyarrow.parquet


def _read_columns(data: bytes, max_rows: int) -> tuple[dict[str, Any], list[str]]:
    """The reference columns of a Parquet file, and the names of all its columns.

    The footer is checked before any page is read: a record holds at most
    ``max_rows`` rows (the directory's record size), so a corrupt or hostile row
    count is refused before pyarrow sizes anything by it."""
    pa, pq = _pyarrow()
    pf = pq.ParquetFile(pa.BufferReader(data))
    meta = pf.metadata
    if meta.num_rows > max_rows or meta.num_rows < 0:
        raise ValueError(f"{meta.num_rows} rows, more than the record size {max_rows}")
    names = list(pf.schema_arrow.names)
    table = pf.read(columns=[c for c in _COLUMNS if c in names])
    if table.num_rows > max_rows:  # the footer's count is only the footer's word
        raise ValueError(f"{table.num_rows} rows, more than the record size {max_rows}")
    # (lists hold None for nulls and decode a dictionary-encoded path column)
    cols = {c: table.column(c).to_pylist() for c in table.column_names}
    return cols, names


def _decode_record(data: bytes, max_rows: int) -> _Record:
    cols, columns = _read_columns(data, max_rows)
    if "path" not in cols and "raw" not in cols:
        raise MetadataError(f"no 'path' or 'raw' column (columns: {columns})")
    path, raw = cols.get("path"), cols.get("raw")
    n = len(path if path is not None else raw)
    present = np.zeros(n, dtype=bool)
    for i in range(n):
        present[i] = (raw is not None and not _missing(raw[i])) or (
            path is not None and isinstance(path[i], (str, bytes))
        )
    return _Record(path, cols.get("offset"), cols.get("size"), raw, present)


def _row(rec: _Record, ri: int, key: str) -> Any:
    """Row ``ri`` as a reference: bytes, ``(url, offset, length)`` or None."""
    from cuzarr.storage.reference import _nonnegative_int

    if ri >= len(rec) or not rec.present[ri]:
        return None
    if rec.raw is not None and not _missing(rec.raw[ri]):
        raw = rec.raw[ri]
        if not isinstance(raw, (str, bytes)):
            raise MetadataError(f"reference {key!r}: 'raw' holds {raw!r}, not bytes")
        raw = raw.encode() if isinstance(raw, str) else raw
        if raw.startswith(b"base64:"):  # as fsspec's ReferenceFileSystem decodes it
            try:
                return base64.b64decode(b"".join(raw[len("base64:") :].split()), validate=True)
            except (binascii.Error, ValueError) as e:
                raise MetadataError(f"reference {key!r}: invalid base64 data ({e})") from None
        return raw
    url = rec.path[ri]
    if isinstance(url, bytes):
        try:
            url = url.decode()
        except UnicodeDecodeError as e:
            raise MetadataError(f"reference {key!r}: path is not UTF-8 ({e})") from None
    offset, size = (_nonnegative_int(key, _cell(col, ri)) for col in (rec.offset, rec.size))
    if offset == 0 and size == 0:  # fsspec's encoding of [url]
        return (url, None, None)
    return (url, offset, size)


def _cell(col: Any, ri: int) -> Any:
    if col is None:  # no offset/size column: every path is a whole file
        return 0
    v = col[ri]
    return v.item() if isinstance(v, np.generic) else v


class _RecordCache:
    """Decoded records by (variable, record number), least recently used first
    out; a record being read is read once for every lookup that needs it.
    Thread-safe: the store may be used from several event loops."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._done: OrderedDict[tuple[str, int], _Record] = OrderedDict()
        self._pending: dict[tuple[str, int], concurrent.futures.Future[_Record]] = {}

    def __len__(self) -> int:
        return len(self._done)

    async def get(self, rk: tuple[str, int], load: Any) -> _Record:
        while True:
            with self._lock:
                rec = self._done.get(rk)
                if rec is not None:
                    self._done.move_to_end(rk)
                    return rec
                fut = self._pending.get(rk)
                owner = fut is None
                if owner:
                    fut = self._pending[rk] = concurrent.futures.Future()
            if owner:
                return await self._load(rk, fut, load)
            inner = asyncio.wrap_future(fut)
            # retrieved even when this waiter has gone: no "never retrieved" log
            inner.add_done_callback(lambda f: f.cancelled() or f.exception())
            try:
                # shielded: a waiter that is cancelled leaves the read to the others
                return await asyncio.shield(inner)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not fut.cancelled() or (task is not None and task.cancelling()):
                    raise
                # the reader was cancelled, not this task: read it here instead

    async def _load(
        self, rk: tuple[str, int], fut: concurrent.futures.Future[_Record], load: Any
    ) -> _Record:
        try:
            rec = await load()
        except BaseException as e:
            with self._lock:
                self._pending.pop(rk, None)
            if isinstance(e, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(e)
                fut.exception()  # retrieved: no "never retrieved" log without waiters
            raise
        with self._lock:
            self._pending.pop(rk, None)
            self._done[rk] = rec
            while len(self._done) > self.maxsize:
                self._done.popitem(last=False)
        fut.set_result(rec)
        return rec


class ParquetReferences:
    """The references of a Parquet reference directory (see the module notes).

    Parameters
    ----------
    root
        The directory: a local path or an fsspec URL, without a trailing ``/``.
    options
        fsspec storage options for a URL ``root``.
    cache_size
        How many decoded record files stay in memory.
    """

    def __init__(self, root: str, options: dict[str, Any] | None, cache_size: int) -> None:
        if int(cache_size) < 1:
            raise ValueError(f"cache_size must be a positive int, got {cache_size!r}")
        self.root = root
        self.options = dict(options or {})
        self.cache_size = int(cache_size)
        self._local = "://" not in root
        raw = self._read_zmetadata()
        self.metadata, self.record_size, self._vars = _parse_zmetadata(raw, root)
        self.metadata[ZMETADATA] = raw  # fsspec serves the file itself (consolidated metadata)
        _pyarrow()  # a missing extra is reported when the store opens, not at the first read
        self._setup()

    def _setup(self) -> None:
        self._cache = _RecordCache(self.cache_size)
        self._remote: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_cache"], state["_remote"]  # a lock; rebuilt where unpickled
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    # -- reading the directory -------------------------------------------------------
    def _read_zmetadata(self) -> bytes:
        where = f"{self.root}/{ZMETADATA}"
        missing = MetadataError(
            f"{self.root}: no {ZMETADATA}, so neither a Parquet reference directory nor a "
            "JSON reference file"
        )
        if self._local:
            try:
                with open(where, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                raise missing from None
        import fsspec

        try:
            with fsspec.open(where, "rb", **self.options) as f:
                return f.read()
        except FileNotFoundError:
            raise missing from None

    async def _read(self, rel: str) -> bytes | None:
        if self._local:

            def read() -> bytes | None:
                try:
                    with open(f"{self.root}/{rel}", "rb") as f:
                        return f.read()
                except FileNotFoundError:
                    return None

            return await in_thread(read)
        if self._remote is None:
            from cuzarr.storage.fsspec import FsspecStore

            self._remote = FsspecStore.from_url(
                self.root, storage_options=self.options, read_only=True
            )
        return await self._remote.get(rel)

    async def _record(self, var: _Var, record: int, key: str) -> _Record:
        """Record ``record`` of ``var``; errors name ``key``, a key it holds."""

        async def load() -> _Record:
            rel = f"{var.name}/refs.{record}.parq"
            where = f"{self.root}/{rel}"
            try:
                data = await self._read(rel)
            except CuzarrError as e:
                raise type(e)(f"key {key!r}: Parquet reference record {where}: {e}") from e
            except OSError as e:
                raise OSError(
                    e.errno,
                    f"key {key!r}: reading Parquet reference record {where} failed: "
                    f"{e.strerror or e}",
                ) from e
            if data is None:
                # fsspec writes no file for a record without references
                return _EMPTY
            try:
                return await in_thread(_decode_record, data, self.record_size)
            except Exception as e:
                raise MetadataError(
                    f"key {key!r}: Parquet reference record {where} is unreadable "
                    f"({type(e).__name__}: {e})"
                ) from e

        return await self._cache.get((var.name, record), load)

    # -- lookups -----------------------------------------------------------------------
    def _locate(self, key: str) -> tuple[_Var, int] | None:
        field, _, chunk = key.rpartition("/")
        var = self._vars.get(field)
        if var is None:
            return None
        k = var.index(chunk)
        return None if k is None else (var, k)

    async def resolve(self, key: str) -> Any:
        """The reference at ``key``: bytes, ``(url, offset, length)`` or None."""
        return (await self.resolve_many([key]))[0]

    async def resolve_many(self, keys: Sequence[str]) -> list[Any]:
        """``resolve`` for many keys, with one lookup per record file they fall in."""
        out: list[Any] = [None] * len(keys)
        groups: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        vars_: dict[str, _Var] = {}
        for i, key in enumerate(keys):
            doc = self.metadata.get(key)
            if doc is not None:
                out[i] = doc
                continue
            loc = self._locate(key)
            if loc is None:
                continue
            var, k = loc
            record, ri = divmod(k, self.record_size)
            vars_[var.name] = var
            groups.setdefault((var.name, record), []).append((i, ri, key))

        async def one(name: str, record: int, items: list[tuple[int, int, str]]) -> None:
            rec = await self._record(vars_[name], record, items[0][2])
            for i, ri, key in items:
                out[i] = _row(rec, ri, key)

        await gather_or_cancel(*(one(n, r, items) for (n, r), items in groups.items()))
        return out

    # -- listing -------------------------------------------------------------------------
    async def _chunk_keys(self, var: _Var) -> AsyncIterator[str]:
        nrec = -(-var.nchunks // self.record_size)
        for lo in range(0, nrec, _LIST_WINDOW):
            window = range(lo, min(nrec, lo + _LIST_WINDOW))
            recs = await gather_or_cancel(
                *(self._record(var, r, var.key(r * self.record_size)) for r in window)
            )
            for r, rec in zip(window, recs):
                base = r * self.record_size
                stop = min(len(rec), var.nchunks - base)
                for ri in np.flatnonzero(rec.present[:stop]):
                    yield var.key(base + int(ri))

    def _vars_under(self, prefix: str) -> list[_Var]:
        return [
            v
            for v in self._vars.values()
            if (v.name + "/").startswith(prefix) or prefix.startswith(v.name + "/")
        ]

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key that exists and starts with ``prefix``."""
        for key in list(self.metadata):
            if key.startswith(prefix):
                yield key
        for var in self._vars_under(prefix):
            async for key in self._chunk_keys(var):
                if key.startswith(prefix):
                    yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Names directly below the directory ``prefix``; only the record files of
        an array listed itself are read."""
        p = prefix.rstrip("/")
        p = p + "/" if p else ""
        seen: set[str] = set()
        for key in list(self.metadata):
            if key.startswith(p):
                name = key[len(p) :].split("/", 1)[0]
                if name and name not in seen:
                    seen.add(name)
                    yield name
        var = self._vars.get(p[:-1]) if p else None
        if var is not None:
            async for key in self._chunk_keys(var):
                yield key[len(p) :]


def _parse_zmetadata(raw: bytes, root: str) -> tuple[dict[str, bytes], int, dict[str, _Var]]:
    where = f"{root}/{ZMETADATA}"
    try:
        doc = json.loads(raw)
    # ValueError: also an int past Python's digit limit; RecursionError: nesting
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise MetadataError(f"{where}: must be a JSON object with a 'metadata' object")
    rs = doc.get("record_size")
    if not isinstance(rs, int) or isinstance(rs, bool) or rs < 1:
        raise MetadataError(f"{where}: 'record_size' must be a positive integer, got {rs!r}")
    metadata: dict[str, bytes] = {}
    variables: dict[str, _Var] = {}
    for key, value in doc["metadata"].items():
        # documents are kept as JSON values and served re-encoded, as fsspec does
        metadata[key] = json.dumps(value).encode()
        name, _, leaf = key.rpartition("/")
        if leaf == ".zarray" and name:
            variables[name] = _variable(name, key, value)
    return metadata, rs, variables


def _variable(name: str, key: str, doc: Any) -> _Var:
    if not isinstance(doc, dict):
        raise MetadataError(f"reference {key!r}: must be a JSON object, got {doc!r}")
    shape, chunks = doc.get("shape"), doc.get("chunks")

    def ints(v: Any, least: int) -> bool:
        return isinstance(v, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= least for i in v
        )

    if not ints(shape, 0) or not ints(chunks, 1) or len(shape) != len(chunks):
        raise MetadataError(
            f"reference {key!r}: 'shape' and 'chunks' must be lists of as many "
            f"non-negative (chunks: positive) integers, got {shape!r} and {chunks!r}"
        )
    if doc.get("dimension_separator") not in (None, "."):
        raise MetadataError(
            f"reference {key!r}: dimension_separator {doc['dimension_separator']!r} is not "
            "supported in Parquet references (their chunk keys are '.'-separated)"
        )
    grid = tuple(-(-s // c) for s, c in zip(shape, chunks)) or (1,)
    return _Var(name, grid, math.prod(grid))
