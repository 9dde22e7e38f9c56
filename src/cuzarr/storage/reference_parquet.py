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
uses pyarrow where it is installed, else the small reader below (flat tables,
PLAIN and dictionary encodings, data pages v1 and v2), which checks every
length, count and index it reads and needs cramjam, installed with fastparquet,
for compressed pages. fastparquet's own decoder is not used: it trusts what a
page says, and a corrupt record file could crash the interpreter.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import json
import math
import os
import struct
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


def _engine() -> str:
    # pyarrow first where installed: its reader checks what it reads. Otherwise the
    # reader below (_decode_parquet), which needs cramjam (fastparquet's codecs) for
    # compressed pages. fastparquet's own decoder is not used: it trusts lengths,
    # counts and indices inside pages, and a corrupt page crashes the interpreter.
    try:
        import pyarrow.parquet  # noqa: F401

        return "pyarrow"
    except ImportError:
        pass
    try:
        import cramjam  # noqa: F401

        return "builtin"
    except ImportError:
        pass
    raise ImportError(
        "reading Parquet kerchunk references needs cramjam (or pyarrow): "
        "pip install 'cuzarr[kerchunk]'"
    )


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


class _Thrift:
    """A bounds-checked reader of Thrift's compact protocol, for a Parquet footer:
    structs as ``{field id: value}``, lists as lists, binaries as bytes."""

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("footer ends inside a value")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def value(self, kind: int, depth: int) -> Any:
        if kind in (1, 2):  # a boolean field: its value is its type
            return kind == 1
        if kind == 3:
            return self.byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            return self.take(8)
        if kind == 8:
            return self.take(self.varint())
        if depth > 16:
            raise ValueError("nested too deep")
        if kind in (9, 10):
            head = self.byte()
            n = head >> 4 if head >> 4 != 15 else self.varint()
            if n > self.end - self.pos:  # every element takes a byte at least
                raise ValueError(f"a list of {n} elements in {self.end - self.pos} bytes")
            elem = head & 0x0F
            return [
                self.byte() == 1 if elem in (1, 2) else self.value(elem, depth + 1)
                for _ in range(n)
            ]
        if kind == 11:
            n = self.varint()
            if n == 0:
                return {}
            if 2 * n > self.end - self.pos:
                raise ValueError(f"a map of {n} entries in {self.end - self.pos} bytes")
            head = self.byte()
            return {
                self.value(head >> 4, depth + 1): self.value(head & 0x0F, depth + 1)
                for _ in range(n)
            }
        if kind == 12:
            return self.struct(depth + 1)
        raise ValueError(f"unknown Thrift type {kind}")

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise ValueError("footer ends inside a value")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def struct(self, depth: int = 0) -> dict[int, Any]:
        out: dict[int, Any] = {}
        fid = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            fid = fid + (head >> 4) if head >> 4 else self.zigzag()
            out[fid] = self.value(head & 0x0F, depth)


# at most this many decompressed page bytes per record file (a page may claim up
# to 2 GiB, and a compressed page can expand that much from a few kilobytes)
_MAX_DECODED = 1 << 31


def _count(v: Any, what: str, most: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= most:
        raise ValueError(f"{what} {v!r} out of bounds (0 to {most})")
    return v


def _items(v: Any, what: str) -> list[Any]:
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ValueError(f"malformed {what}")
    return v


def _check_parquet(data: bytes, max_rows: int) -> dict[int, Any]:
    """The footer of a Parquet file, once its row counts are checked against
    ``max_rows`` (rows in all); :func:`_read_chunk` checks the pages it reads."""
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise ValueError("not a Parquet file (no PAR1 marks at both ends)")
    n = int.from_bytes(data[-8:-4], "little")
    body = len(data) - 8 - n  # where the footer starts
    if n == 0 or body < 4:
        raise ValueError(f"footer length {n} does not fit a {len(data)}-byte file")
    reader = _Thrift(data, body, len(data) - 8)
    meta = reader.struct()
    if reader.pos != reader.end:
        raise ValueError("footer has bytes after its metadata")

    _count(meta.get(3), "row count", max_rows)
    _items(meta.get(2), "schema")
    rows = 0
    for rg in _items(meta.get(4, []), "row groups"):
        # (readers size their output by the row groups' counts, not the file's)
        rows += _count(rg.get(3), "row group row count", max_rows - rows)
        for cc in _items(rg.get(1), "column chunks"):
            if 1 in cc:
                raise ValueError("a column chunk in another file")
            (cmd,) = _items([cc.get(3)], "column metadata")
            _count(cmd.get(5), "value count", max_rows)
    return meta


def _chunk_span(cmd: dict[int, Any], body: int) -> tuple[int, int]:
    """Where the pages of a column chunk lie: [first, stop)."""
    first = _count(cmd.get(9), "page offset", body)
    for f in (10, 11):  # index, dictionary page offsets
        if f in cmd:
            first = min(first, _count(cmd[f], "page offset", body))
    return first, first + _count(cmd.get(7), "column chunk size", body - first)


# -- a Parquet reader for reference tables -----------------------------------------
# Flat tables of BYTE_ARRAY, INT32/INT64 and FLOAT/DOUBLE columns, required or
# optional; PLAIN and dictionary encodings; data pages v1 and v2; every codec
# cramjam reads. Every length, count and index is checked before it is used.

_NUMERIC = {1: "<i4", 2: "<i8", 4: "<f4", 5: "<f8"}  # Parquet physical type -> dtype
_BYTE_ARRAY = 6
_LENGTH = struct.Struct("<I")


def _decompress(codec: int, data: bytes, size: int) -> bytes:
    if codec == 0:
        return data
    import cramjam

    if codec in (5, 7):  # LZ4 (as fastparquet reads it), LZ4_RAW
        return bytes(cramjam.lz4.decompress_block(data, output_len=size))
    into = {
        1: cramjam.snappy.decompress_raw_into,
        2: cramjam.gzip.decompress_into,
        4: cramjam.brotli.decompress_into,
        6: cramjam.zstd.decompress_into,
    }.get(codec)
    if into is None:
        raise ValueError(f"compression codec {codec} is not supported (pyarrow reads more)")
    out = np.empty(size, dtype=np.uint8)
    # (fails, without writing past it, when the data decompress to more than size)
    n = into(data, out)
    return out[:n].tobytes()


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise ValueError("page ends inside a run header")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("run header too long")


def _hybrid(data: bytes, pos: int, end: int, width: int, count: int) -> np.ndarray:
    """``count`` values of the RLE / bit-packed hybrid encoding in data[pos:end]."""
    if not 0 <= width <= 32:
        raise ValueError(f"bit width {width} out of bounds")
    parts: list[np.ndarray] = []
    got = 0
    nbytes = (width + 7) // 8
    while got < count:
        header, pos = _varint(data, pos, end)
        if header & 1:  # bit-packed groups of 8 values
            size = (header >> 1) * width
            if size > end - pos:
                raise ValueError("bit-packed run longer than its page")
            bits = np.unpackbits(np.frombuffer(data, np.uint8, size, pos), bitorder="little")
            pos += size
            take = min((header >> 1) * 8, count - got)
            if width:
                vals = bits.reshape(-1, width)[:take].astype(np.int64) @ (
                    np.int64(1) << np.arange(width, dtype=np.int64)
                )
            else:
                vals = np.zeros(take, dtype=np.int64)
        else:  # one value repeated
            if nbytes > end - pos:
                raise ValueError("run longer than its page")
            value = int.from_bytes(data[pos : pos + nbytes], "little")
            pos += nbytes
            take = min(header >> 1, count - got)
            vals = np.full(take, value, dtype=np.int64)
        parts.append(vals)
        got += take
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _plain(data: bytes, pos: int, ptype: int, count: int) -> Any:
    """``count`` PLAIN values from data[pos:]: an array, or a list of bytes."""
    if ptype in _NUMERIC:
        dtype = np.dtype(_NUMERIC[ptype])
        if count * dtype.itemsize > len(data) - pos:
            raise ValueError(f"{count} values do not fit the page")
        return np.frombuffer(data, dtype, count, pos)
    out = []
    end = len(data)
    length = _LENGTH.unpack_from
    for _ in range(count):
        if end - pos < 4:
            raise ValueError("page ends inside a value")
        (n,) = length(data, pos)
        pos += 4
        if n > end - pos:
            raise ValueError("value longer than its page")
        out.append(data[pos : pos + n])
        pos += n
    return out


def _take(values: Any, dictionary: Any) -> Any:
    if dictionary is None:
        raise ValueError("dictionary-encoded page without a dictionary page")
    if len(values) and int(values.max()) >= len(dictionary):
        raise ValueError("dictionary index out of bounds")
    if isinstance(dictionary, list):
        return [dictionary[i] for i in values.tolist()]
    return dictionary[values]


def _schema(meta: dict[int, Any]) -> list[tuple[str, int, bool]]:
    """(name, physical type, optional) of each column of a flat schema."""
    schema = meta[2]
    if not schema or schema[0].get(5) != len(schema) - 1:
        raise ValueError("not a flat table (nested columns)")
    out = []
    for el in schema[1:]:
        name, ptype, rep = el.get(4), el.get(1), el.get(3, 0)
        if not isinstance(name, bytes) or not isinstance(ptype, int) or el.get(5):
            raise ValueError("not a flat table (nested columns)")
        if rep not in (0, 1):
            raise ValueError(f"column {name!r}: repeated columns are not supported")
        out.append((name.decode("utf-8"), ptype, rep == 1))
    return out


def _read_chunk(
    data: bytes,
    cmd: dict[int, Any],
    body: int,
    ptype: int,
    optional: bool,
    rows: int,
    budget: list[int],
) -> Any:
    """The ``rows`` values of one column chunk, None for nulls."""
    if ptype not in _NUMERIC and ptype != _BYTE_ARRAY:
        raise ValueError(f"a column of Parquet type {ptype!r}, not numbers or bytes")
    if cmd.get(1) != ptype:
        raise ValueError("column chunk type differs from the schema's")
    codec = cmd.get(4)
    pos, stop = _chunk_span(cmd, body)
    dictionary: Any = None
    levels_parts: list[np.ndarray] = []
    value_parts: list[Any] = []
    got = 0
    while pos < stop:
        page = _Thrift(data, pos, stop)
        head = page.struct()
        size = _count(head.get(2), "uncompressed page size", 2**31 - 1)
        start = page.pos
        pos = start + _count(head.get(3), "page size", stop - start)
        budget[0] -= size
        if budget[0] < 0:
            raise ValueError(f"pages decompress to more than {_MAX_DECODED} bytes")
        kind = head.get(1)
        if kind == 2:  # dictionary page
            (dph,) = _items([head.get(7)], "dictionary page header")
            if dph.get(2, 0) not in (0, 2):
                raise ValueError(f"dictionary encoding {dph.get(2)!r} is not supported")
            if dictionary is not None or got:
                raise ValueError("a second dictionary page, or one after data pages")
            payload = _decompress(codec, data[start:pos], size)
            dictionary = _plain(payload, 0, ptype, _count(dph.get(1), "values", len(payload)))
            continue
        if kind == 0:
            (dph,) = _items([head.get(5)], "data page header")
            n = _count(dph.get(1), "page value count", rows - got)
            payload = _decompress(codec, data[start:pos], size)
            vpos = 0
            if optional:
                if dph.get(3) != 3:
                    raise ValueError(f"definition level encoding {dph.get(3)!r} is not RLE")
                if len(payload) < 4:
                    raise ValueError("page ends inside its definition levels")
                length = int.from_bytes(payload[:4], "little")
                if length > len(payload) - 4:
                    raise ValueError("definition levels longer than their page")
                levels = _hybrid(payload, 4, 4 + length, 1, n)
                vpos = 4 + length
            encoding = dph.get(2)
        elif kind == 3:
            (dph,) = _items([head.get(8)], "data page v2 header")
            n = _count(dph.get(1), "page value count", rows - got)
            rl = _count(dph.get(6, 0), "repetition levels length", pos - start)
            dl = _count(dph.get(5, 0), "definition levels length", pos - start - rl)
            if rl:
                raise ValueError("repetition levels in a flat column")
            if optional:
                levels = _hybrid(data, start + rl, start + rl + dl, 1, n)
            values = data[start + rl + dl : pos]
            if dph.get(7, True):
                values = _decompress(codec, values, _count(size - rl - dl, "page size", size))
            payload, vpos, encoding = values, 0, dph.get(4)
        else:  # an index page, or unknown
            continue
        if optional:
            if len(levels) and int(levels.max()) > 1:
                raise ValueError("definition level out of bounds")
            defined = int(np.count_nonzero(levels))
        else:
            levels, defined = np.ones(n, dtype=np.int64), n
        if encoding == 0:
            vals = _plain(payload, vpos, ptype, defined)
        elif encoding in (2, 8):  # PLAIN_DICTIONARY, RLE_DICTIONARY
            if vpos >= len(payload):
                raise ValueError("page ends before its dictionary indices")
            idx = _hybrid(payload, vpos + 1, len(payload), payload[vpos], defined)
            vals = _take(idx, dictionary)
        else:
            raise ValueError(f"encoding {encoding!r} is not supported (pyarrow reads more)")
        levels_parts.append(levels)
        value_parts.append(vals)
        got += n
    if got != rows:
        raise ValueError(f"column chunk holds {got} values for {rows} rows")
    numeric = ptype in _NUMERIC
    if not optional and numeric:
        return np.concatenate(value_parts) if value_parts else np.zeros(0, _NUMERIC[ptype])
    out = np.full(rows, None, dtype=object)
    values = np.empty(sum(len(v) for v in value_parts), dtype=object)
    values[:] = [x for v in value_parts for x in (v.tolist() if numeric else v)]
    out[np.concatenate(levels_parts).astype(bool) if levels_parts else []] = values
    return out


def _decode_parquet(data: bytes, max_rows: int) -> tuple[dict[str, Any], list[str]]:
    meta = _check_parquet(data, max_rows)
    body = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    columns = _schema(meta)
    wanted = {name: i for i, (name, *_) in enumerate(columns) if name in _COLUMNS}
    parts: dict[str, list[Any]] = {name: [] for name in wanted}
    budget = [_MAX_DECODED]
    for rg in meta.get(4, []):
        chunks = rg[1]
        if len(chunks) != len(columns):
            raise ValueError("a row group without a chunk for every column")
        for name, i in wanted.items():
            (cmd,) = _items([chunks[i].get(3)], "column metadata")
            if cmd.get(3) != [name.encode()]:
                raise ValueError("column chunks out of the schema's order")
            _, ptype, optional = columns[i]
            parts[name].append(_read_chunk(data, cmd, body, ptype, optional, rg[3], budget))
    cols = {
        name: np.concatenate(chunks) if chunks else np.zeros(0, dtype=object)
        for name, chunks in parts.items()
    }
    return cols, [name for name, *_ in columns]


_COLUMNS = ("path", "offset", "size", "raw")


def _read_columns(data: bytes, engine: str, max_rows: int) -> tuple[dict[str, Any], list[str]]:
    """The reference columns of a Parquet file, and the names of all its columns."""
    if engine == "builtin":
        return _decode_parquet(data, max_rows)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(data))
    # (lists hold None for nulls and decode a dictionary-encoded path column)
    cols = {c: table.column(c).to_pylist() for c in _COLUMNS if c in table.column_names}
    return cols, list(table.column_names)


def _decode_record(data: bytes, engine: str, max_rows: int) -> _Record:
    cols, columns = _read_columns(data, engine, max_rows)
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
        self._engine = _engine()
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
                return await in_thread(_decode_record, data, self._engine, self.record_size)
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
    except ValueError as e:  # (also an int past Python's digit limit, a bare ValueError)
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
