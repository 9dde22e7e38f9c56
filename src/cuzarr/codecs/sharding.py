"""The v3 ``sharding_indexed`` codec.

A shard holds a grid of inner chunks, each encoded with the inner ``codecs``,
plus an index of ``(offset, nbytes)`` uint64 pairs (2^64-1 marks an empty inner
chunk), itself encoded with ``index_codecs`` and stored at the ``start`` or
``end`` of the shard. This module encodes and decodes whole shards and parses
indexes; partial reads (index first, then byte ranges of the needed inner
chunks) live in ``cuzarr.core.shards``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzarr.buffer.chunks import is_fill, merge_into
from cuzarr.buffer.concat import Concat
from cuzarr.codecs.base import ArrayBytesCodec, ChunkSpec, Codec, codec_from_json, register_codec
from cuzarr.errors import CodecError, MetadataError
from cuzarr.metadata.dtypes import parse_data_type
from cuzarr.runtime.workers import share

__all__ = ["EMPTY", "ShardingCodec", "morton_order", "sharding_codec"]

EMPTY = np.uint64(2**64 - 1)
# No shard is larger than the largest file offset (a signed 64-bit off_t).
_MAX_SHARD_NBYTES = 2**63 - 1
_U64 = parse_data_type("uint64", 3)
# Inner chunks at least this large are encoded and decoded in parallel by idle
# worker loops (``cuzarr.runtime.workers.share``); below it, the per-chunk Python
# work of two threads contends for the GIL and gains nothing.
SHARE_MIN_NBYTES = 32 << 10


def morton_order(shape: tuple[int, ...]) -> np.ndarray:
    """Coordinates of a grid of ``shape`` in Morton (Z-curve) order, as (n, ndim)."""
    coords = (
        np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"), -1).reshape(
            -1, len(shape)
        )
        if shape
        else np.zeros((1, 0), dtype=np.intp)
    )
    if not shape or coords.shape[0] <= 1:
        return coords
    bits = max(1, max(int(s - 1).bit_length() for s in shape))
    keys = np.zeros(coords.shape[0], dtype=np.uint64)
    nd = len(shape)
    for b in range(bits):
        for d in range(nd):
            keys |= ((coords[:, d].astype(np.uint64) >> np.uint64(b)) & np.uint64(1)) << np.uint64(
                b * nd + d
            )
    return coords[np.argsort(keys, kind="stable")]


_INDEX_CACHE_ITEM_MAX = 64 << 10


class _IndexCache:
    """Checked shard indexes of one codec by their encoded bytes: a random read
    of a few inner chunks re-reads its shard's index every time, and checking
    one of 256 entries cost ~22 us of a ~275 us read. Keyed by the exact bytes
    (and the shard's shape and size they were checked against), so a shard
    rewritten meanwhile is never answered from it."""

    def __init__(self, max_items: int = 128, max_bytes: int = 2 << 20) -> None:
        self._d: dict[Any, np.ndarray] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_items = max_items
        self.max_bytes = max_bytes

    def get(self, key: Any) -> np.ndarray | None:
        return self._d.get(key)

    def put(self, key: Any, index: np.ndarray) -> None:
        size = len(key[0]) + index.nbytes
        with self._lock:
            if key in self._d:
                return
            while self._d and (len(self._d) >= self.max_items or self._bytes + size > self.max_bytes):
                old_key = next(iter(self._d))  # the oldest first
                self._bytes -= len(old_key[0]) + self._d.pop(old_key).nbytes
            self._d[key] = index
            self._bytes += size


class ShardingCodec(ArrayBytesCodec):
    """Shards of inner chunks with an index (see module docstring)."""

    name = "sharding_indexed"

    def __init__(
        self,
        chunk_shape: Any,
        codecs: Any = None,
        index_codecs: Any = None,
        index_location: str = "end",
    ) -> None:
        from cuzarr.codecs.bytes_codec import BytesCodec
        from cuzarr.codecs.checksum import Crc32cCodec

        self.chunk_shape = tuple(int(c) for c in chunk_shape)
        if any(c < 1 for c in self.chunk_shape):
            raise MetadataError(f"sharding chunk_shape must be positive, got {self.chunk_shape}")
        self.codecs: tuple[Codec, ...] = tuple(
            c if isinstance(c, Codec) else codec_from_json(c) for c in (codecs or [BytesCodec()])
        )
        self.index_codecs: tuple[Codec, ...] = tuple(
            c if isinstance(c, Codec) else codec_from_json(c)
            for c in (index_codecs or [BytesCodec(), Crc32cCodec()])
        )
        if index_location not in ("start", "end"):
            raise MetadataError(f"index_location must be 'start' or 'end', got {index_location!r}")
        self.index_location = index_location
        self._cache: dict[Any, Any] = {}
        self._indexes = _IndexCache()

    def configuration(self) -> dict[str, Any]:
        return {
            "chunk_shape": list(self.chunk_shape),
            "codecs": [c.to_json() for c in self.codecs],
            "index_codecs": [c.to_json() for c in self.index_codecs],
            "index_location": self.index_location,
        }

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_indexes")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = {}
        self._indexes = _IndexCache()

    # -- derived pieces --------------------------------------------------------
    def chunks_per_shard(self, shard_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s // c for s, c in zip(shard_shape, self.chunk_shape, strict=True))

    def validate(self, spec: ChunkSpec) -> None:
        if len(spec.shape) != len(self.chunk_shape):
            raise MetadataError(
                f"sharding chunk_shape {self.chunk_shape} does not match the {len(spec.shape)}-d shard"
            )
        for s, c in zip(spec.shape, self.chunk_shape, strict=True):
            if s % c:
                raise MetadataError(
                    f"shard shape {spec.shape} is not divisible by the inner chunk shape {self.chunk_shape}"
                )
        self.inner_pipeline(spec)
        self.index_pipeline(spec.shape)

    def evolve(self, spec: ChunkSpec) -> ShardingCodec:
        inner = self.inner_pipeline(ChunkSpec(spec.shape, spec.dtype, spec.fill_value))
        idx = self.index_pipeline(spec.shape)
        codecs = tuple(inner.codecs)
        index_codecs = tuple(idx.codecs)
        if codecs == self.codecs and index_codecs == self.index_codecs:
            return self
        return ShardingCodec(self.chunk_shape, codecs, index_codecs, self.index_location)

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``, made once per ``key`` for this codec (pipelines and sizes
        that depend only on the codec and the key)."""
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = make()
        return value

    def inner_pipeline(self, spec: ChunkSpec) -> Any:
        from cuzarr.codecs.pipeline import V3Pipeline

        return self._cached(
            ("inner", spec.dtype, _fill_key(spec.fill_value)),
            lambda: V3Pipeline(self.codecs, spec.dtype, spec.fill_value, self.chunk_shape),
        )

    def index_pipeline(self, shard_shape: tuple[int, ...]) -> Any:
        from cuzarr.codecs.pipeline import V3Pipeline

        cps = self.chunks_per_shard(shard_shape)
        return self._cached(
            ("index", cps), lambda: V3Pipeline(self.index_codecs, _U64, EMPTY, (*cps, 2))
        )

    def index_nbytes(self, shard_shape: tuple[int, ...]) -> int:
        """Encoded size of the index (fixed for a given shard shape)."""

        def size() -> int:
            cps = self.chunks_per_shard(shard_shape)
            empty = np.full((*cps, 2), EMPTY, dtype=np.uint64)
            return len(self.index_pipeline(shard_shape).encode(empty, (*cps, 2)))

        # (asked once per shard read: keyed by the shard shape, one lookup
        # without working out the chunks per shard)
        return self._cached(("index_nbytes", tuple(shard_shape)), size)

    def max_encoded_nbytes(self, spec: ChunkSpec) -> int | None:
        """An upper bound on an encoded shard of ``spec``: every inner chunk at its
        largest, plus the index (None where inner chunks have no bound)."""
        per = self.inner_pipeline(spec).max_encoded_nbytes(self.chunk_shape)
        if per is None:
            return None
        return self.nchunks_per_shard(spec.shape) * per + self.index_nbytes(spec.shape)

    # -- index -------------------------------------------------------------------
    def decode_index(
        self, data: Any, shard_shape: tuple[int, ...], shard_nbytes: int | None = None
    ) -> np.ndarray:
        """Parse an encoded index into a (*chunks_per_shard, 2) uint64 array, checked
        (read-only: an index seen before, byte for byte, comes from a cache)."""
        small = len(data) <= _INDEX_CACHE_ITEM_MAX
        if small:
            key = (bytes(data), shard_shape, shard_nbytes)
            hit = self._indexes.get(key)
            if hit is not None:
                return hit
        index = self._decode_index(data, shard_shape, shard_nbytes)
        if small:
            # A copy: the decoded index is a view into ``data``, which may be a
            # thread's reused read buffer (overwritten later: stale, unchecked
            # offsets on a hit) or a whole shard (kept alive past the bound).
            index = index.copy()
        index.flags.writeable = False
        if small:
            self._indexes.put(key, index)
        return index

    def _decode_index(
        self, data: Any, shard_shape: tuple[int, ...], shard_nbytes: int | None
    ) -> np.ndarray:
        cps = self.chunks_per_shard(shard_shape)
        if len(data) != self.index_nbytes(shard_shape):
            raise CodecError(
                f"shard index has {len(data)} bytes, expected {self.index_nbytes(shard_shape)}"
            )
        index = self.index_pipeline(shard_shape).decode(data, (*cps, 2))
        # Checked whether or not the shard's size is known (a partial read does
        # not know it): a corrupt index must not send exabyte or negative-offset
        # ranges to the store (MemoryError, OverflowError), only raise CodecError.
        offs = index[..., 0]
        sizes = index[..., 1]
        present = offs != EMPTY
        if np.any((sizes == EMPTY) != ~present):
            raise CodecError("shard index marks an inner chunk half empty")
        if np.any(present):
            o = offs[present].astype(np.uint64)
            n = sizes[present].astype(np.uint64)
            end = o + n
            limit = _MAX_SHARD_NBYTES if shard_nbytes is None else shard_nbytes
            if np.any(end < o) or np.any(end > np.uint64(limit)):
                raise CodecError("shard index points past the end of the shard")
            idx_n = self.index_nbytes(shard_shape)
            lo = idx_n if self.index_location == "start" else 0
            if np.any(o < np.uint64(lo)):
                raise CodecError("shard index points into the index itself")
            if shard_nbytes is not None:
                hi = shard_nbytes if self.index_location == "start" else shard_nbytes - idx_n
                if np.any(end > np.uint64(hi)):
                    raise CodecError("shard index points into the index itself")
            # Overlap needs no size: checked on partial reads too (they had
            # returned one inner chunk's bytes as another's).
            order = np.argsort(o)
            os_, es = o[order], end[order]
            if np.any(os_[1:] < es[:-1]):
                raise CodecError("shard index has overlapping inner chunk ranges")
        return index

    def split(self, data: Any, shard_shape: tuple[int, ...]) -> tuple[np.ndarray, memoryview]:
        """Index and the whole shard's bytes, from a shard fetched in one piece."""
        mv = memoryview(data)
        n = self.index_nbytes(shard_shape)
        if len(mv) < n:
            raise CodecError(f"shard of {len(mv)} bytes is shorter than its {n}-byte index")
        raw = mv[:n] if self.index_location == "start" else mv[len(mv) - n :]
        return self.decode_index(raw, shard_shape, len(mv)), mv

    # -- whole-shard encode/decode -------------------------------------------------
    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        index, mv = self.split(data, spec.shape)
        out = spec.dtype.full(spec.shape, spec.fill_value)
        inner = self.inner_pipeline(spec)
        present = [(c, int(o), int(n)) for c, (o, n) in _stored(index)]

        def one(k: int) -> None:
            coords, off, n = present[k]
            out[self._inner_sel(coords)] = inner.decode(
                mv[off : off + n], self.chunk_shape, scratch=True
            )

        self._each(one, len(present), spec)
        return out

    def shares(self, item_size: int) -> bool:
        """Whether inner chunks of this item size are large enough to be coded
        in parallel (see ``SHARE_MIN_NBYTES``)."""
        return math.prod(self.chunk_shape) * max(1, item_size) >= SHARE_MIN_NBYTES

    def _each(self, fn: Any, n: int, spec: ChunkSpec) -> list[Any]:
        """``fn(k)`` for ``k`` in ``range(n)``: in parallel (see ``share``) when
        the inner chunks are large enough to gain from it."""
        if self.shares(spec.dtype.item_size):
            return share(fn, n)
        return [fn(k) for k in range(n)]

    def encode(self, arr: np.ndarray, spec: ChunkSpec, write_empty_chunks: bool = False) -> bytes:
        return bytes(self.encode_parts(arr, spec, write_empty_chunks))

    def encode_parts(
        self, arr: np.ndarray, spec: ChunkSpec, write_empty_chunks: bool = False
    ) -> Concat:
        """:meth:`encode`, the shard's parts not joined (see ``Concat``)."""

        inner = self.inner_pipeline(spec)
        fill = spec.fill_value
        order = self.inner_order(spec.shape)

        def one(k: int) -> bytes | None:
            part = arr[self._inner_sel(order[k])]
            if not write_empty_chunks and is_fill(part, fill, spec.dtype):
                return None
            return inner.encode(part, self.chunk_shape, write_empty_chunks)

        results = self._each(one, len(order), spec)
        encoded = {c: r for c, r in zip(order, results, strict=True) if r is not None}
        return self.assemble(encoded, spec.shape)

    def inner_order(self, shard_shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The inner chunks' coordinates in the order a shard stores them
        (Morton order), as the encode and the device writer
        (``cuzarr.gpu.shardwriter``) both lay them out."""
        cps = self.chunks_per_shard(shard_shape)
        return self._cached(("order", cps), lambda: list(map(tuple, morton_order(cps).tolist())))

    def assemble(self, encoded: dict[tuple[int, ...], Any], shard_shape: tuple[int, ...]) -> Concat:
        """Lay out encoded inner chunks (in the dict's order; those left out
        are empty) plus their index: the shard, or ``b""`` when no inner chunk
        is left (the shard is then deleted). The whole-shard encode and the
        device writer of whole shards (``cuzarr.gpu.shardwriter``, inner
        chunks encoded there) both end here."""
        cps = self.chunks_per_shard(shard_shape)
        index = np.full((*cps, 2), EMPTY, dtype=np.uint64)
        if not encoded:
            return b""
        n_index = self.index_nbytes(shard_shape)
        pos = n_index if self.index_location == "start" else 0
        for coords, data in encoded.items():
            index[coords] = (pos, len(data))
            pos += len(data)
        raw_index = self.index_pipeline(shard_shape).encode(index, (*cps, 2))
        parts = list(encoded.values())
        # not joined: a local store writes the parts with one writev (see Concat)
        if self.index_location == "start":
            return Concat([raw_index, *parts])
        return Concat([*parts, raw_index])

    def touched_chunks(
        self, sel: tuple[Any, ...], shard_shape: tuple[int, ...]
    ) -> set[tuple[int, ...]]:
        """Inner chunk coordinates a selection of the shard touches. Integer arrays
        index pointwise (broadcast together, as numpy does), so only the inner
        chunks of the points they select count, not every combination: with
        ``write_empty_chunks`` an untouched inner chunk must not be written."""
        import itertools

        per_dim: list[list[int]] = []
        arrays: list[int] = []
        for d, s in enumerate(sel):
            c = self.chunk_shape[d]
            if isinstance(s, slice):
                r = range(*s.indices(shard_shape[d]))
                if not r:
                    return set()
                lo, hi = min(r[0], r[-1]), max(r[0], r[-1])
                if abs(r.step) <= c:
                    per_dim.append(list(range(lo // c, hi // c + 1)))
                else:
                    per_dim.append(sorted({i // c for i in r}))
            else:
                arrays.append(d)
                per_dim.append([])
        arrs = [np.asarray(sel[d]) for d in arrays]
        if math.prod(a.size for a in arrs) == math.prod(
            np.broadcast_shapes(*[a.shape for a in arrs])
        ):
            # no two arrays share an axis (np.ix_ form, or one array): every
            # combination of their values is selected
            for d, a in zip(arrays, arrs, strict=True):
                per_dim[d] = np.unique(a.ravel() // self.chunk_shape[d]).tolist()
            return set(itertools.product(*per_dim))
        points = np.broadcast_arrays(*arrs)
        # one 1-d unique over linear chunk numbers (np.unique(axis=0) on a million
        # points took ~0.8 s; this ~30 ms)
        grid = tuple(-(-shard_shape[d] // self.chunk_shape[d]) for d in arrays)
        flat = np.unique(
            np.ravel_multi_index(
                [p.ravel() // self.chunk_shape[d] for p, d in zip(points, arrays, strict=True)],
                grid,
            )
        )
        combos = np.stack(np.unravel_index(flat, grid), axis=-1).tolist()
        others = [per_dim[d] for d in range(len(sel)) if d not in arrays]
        out: set[tuple[int, ...]] = set()
        for combo in combos:
            for rest in itertools.product(*others):
                it_a, it_r = iter(combo), iter(rest)
                out.add(tuple(next(it_a) if d in arrays else next(it_r) for d in range(len(sel))))
        return out

    def update(
        self,
        old: Any,
        sel: tuple[Any, ...],
        value: np.ndarray,
        spec: ChunkSpec,
        write_empty_chunks: bool = False,
        fields: str | list[str] | None = None,
        where: np.ndarray | None = None,
    ) -> Concat:
        """Write ``value`` into ``sel`` of an encoded shard (``None``: a shard not
        stored yet), re-encoding only the inner chunks the selection touches; the
        others keep their stored bytes. As in zarr-python, inner chunks the
        selection does not touch are never written, even with
        ``write_empty_chunks`` (which keeps only touched chunks equal to the fill).
        ``fields`` and ``where`` limit the write as in
        :func:`cuzarr.buffer.chunks.merge_into`."""

        if old is None:
            index = np.full((*self.chunks_per_shard(spec.shape), 2), EMPTY, dtype=np.uint64)
            mv = memoryview(b"")
        else:
            index, mv = self.split(old, spec.shape)
        inner = self.inner_pipeline(spec)
        touched = self.touched_chunks(sel, spec.shape)
        shard = spec.dtype.full(spec.shape, spec.fill_value)
        if old is not None:
            stored = [(c, int(index[c][0]), int(index[c][1])) for c in touched]
            stored = [t for t in stored if t[1] != int(EMPTY)]

            def decode_one(k: int) -> None:
                coords, off, n = stored[k]
                shard[self._inner_sel(coords)] = inner.decode(
                    mv[off : off + n], self.chunk_shape, scratch=True
                )

            self._each(decode_one, len(stored), spec)
        if fields is None and where is None:
            shard[sel] = value
        else:
            merge_into(shard, sel, value, fields, where)
        grid = index.shape[:-1]
        order = morton_order(grid)
        # plain lists: numpy scalar indexing per inner chunk cost ~1 us each
        lin = np.ravel_multi_index(tuple(order.T), grid).tolist() if order.shape[1] else [0]
        offs = index[..., 0].reshape(-1).tolist()
        sizes = index[..., 1].reshape(-1).tolist()
        empty = int(EMPTY)
        layout = list(zip(map(tuple, order.tolist()), lin, strict=True))
        redo = [c for c, _ in layout if c in touched]

        def encode_one(k: int) -> bytes | None:
            part = shard[self._inner_sel(redo[k])]
            if write_empty_chunks or not is_fill(part, spec.fill_value, spec.dtype):
                return inner.encode(part, self.chunk_shape, write_empty_chunks)
            return None

        fresh = dict(zip(redo, self._each(encode_one, len(redo), spec), strict=True))
        encoded: dict[tuple[int, ...], Any] = {}
        for coords, k in layout:
            if coords in touched:
                if fresh[coords] is not None:
                    encoded[coords] = fresh[coords]
            elif offs[k] != empty:
                encoded[coords] = mv[offs[k] : offs[k] + sizes[k]]
        return self.assemble(encoded, spec.shape)

    def _inner_sel(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(c * s, (c + 1) * s) for c, s in zip(coords, self.chunk_shape, strict=True)
        )

    def nchunks_per_shard(self, shard_shape: tuple[int, ...]) -> int:
        return math.prod(self.chunks_per_shard(shard_shape))


def _stored(index: np.ndarray) -> list[tuple[tuple[int, ...], tuple[int, int]]]:
    """(inner chunk coordinates, (offset, nbytes)) of the stored inner chunks."""
    cps = index.shape[:-1]
    flat = index.reshape(-1, 2)
    where = np.flatnonzero(flat[:, 0] != EMPTY)
    coords = np.stack(np.unravel_index(where, cps), axis=-1) if cps else np.zeros((len(where), 0))
    return [
        (tuple(c), (o, n))
        for c, (o, n) in zip(coords.astype(np.int64).tolist(), flat[where].tolist(), strict=True)
    ]


def sharding_codec(pipeline: Any) -> ShardingCodec | None:
    """The pipeline's sharding codec when it is the only codec (partial I/O possible)."""
    ab = getattr(pipeline, "array_bytes", None)
    if isinstance(ab, ShardingCodec) and not pipeline.array_array and not pipeline.bytes_bytes:
        return ab
    return None


def _fill_key(fill: Any) -> Any:
    try:
        return (type(fill).__name__, np.asarray(fill).tobytes())
    except Exception:
        return repr(fill)


register_codec(
    "sharding_indexed",
    lambda c: ShardingCodec(
        c["chunk_shape"], c.get("codecs"), c.get("index_codecs"), c.get("index_location", "end")
    ),
)
