"""Codec pipelines: the chain of codecs that turns a chunk into stored bytes.

``V3Pipeline`` runs a v3 ``codecs`` list (array->array*, array->bytes,
bytes->bytes*). ``V2Pipeline`` runs v2 ``filters`` + ``compressor`` in C or F
order. Both expose ``encode(arr, shape)`` and ``decode(data, shape)`` for one
chunk; the array engine calls them from the codec thread pool.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import zstandard

from cuzarr.buffer.concat import Concat, joined
from cuzarr.codecs import libzstd
from cuzarr.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from cuzarr.codecs.bounded import BOUNDED_NUMCODECS, decode_numcodec
from cuzarr.codecs.bytes_codec import BytesCodec
from cuzarr.codecs.compressors import ZstdCodec, _dctx, zstd_decompress
from cuzarr.codecs.compressors import zstd_decompress_into as _zstd_into
from cuzarr.codecs.vlen import decode_vlen, encode_vlen
from cuzarr.errors import CodecError, MetadataError
from cuzarr.metadata.array import ArrayMetadata, check_sharded_edges
from cuzarr.metadata.dtypes import DataType
from cuzarr.runtime import native

__all__ = ["V2Pipeline", "V3Pipeline"]

_tls = threading.local()


# Chunks at most this large are decoded in batches by decode_many: for them the
# per-chunk Python wrapping costs about as much as the decompression.
BATCH_DECODE_MAX = 64 << 10
# Batched zstd chunks at least this large are decompressed straight into the
# batch's buffer by the system's libzstd (measured per chunk, against
# python-zstandard plus a copy: 2 KiB 6.7 vs 5.6 us, 8 KiB 16.6 vs 16.4,
# 16 KiB 28.2 vs 30.5, 64 KiB 79 vs 89).
_INTO_MIN = 16 << 10


def _plain_raws(datas: Sequence[Any], n: int, zstd: bool) -> np.ndarray | None:
    """The decoded bytes of every chunk, back to back (``n`` bytes each: raw
    chunks, or zstd frames declaring exactly ``n`` bytes), in the calling
    thread's reusable buffer: valid until its next call. ``None`` if any chunk
    is otherwise (the caller's one-chunk path reports it).

    Why a reused buffer: a fresh ``bytes`` per chunk and a ``join`` per batch
    (4 MiB for 64 KiB chunks) made the allocator map and fault in new pages on
    every batch, a quarter of a read's time on this VM."""
    if n > BATCH_DECODE_MAX or n == 0:
        return None
    size = n * len(datas)
    buf = getattr(_tls, "raws", None)
    if buf is None or len(buf) < size:
        buf = _tls.raws = memoryview(bytearray(size))
    if not zstd:
        try:
            for i, d in enumerate(datas):
                if type(d) is not bytes:
                    d = memoryview(d).cast("B")  # a store's typed or strided buffer
                if len(d) != n:
                    return None
                buf[i * n : (i + 1) * n] = d
        except (TypeError, ValueError):
            return None  # not a contiguous buffer: the one-chunk path copes or explains
        return np.frombuffer(buf, dtype=np.uint8, count=size)
    frame_params = zstandard.get_frame_parameters
    out = np.frombuffer(buf, dtype=np.uint8, count=size)
    if n >= _INTO_MIN and libzstd.available():
        # Large enough that the system libzstd, decoding in place (no bytes
        # object, no copy), beats python-zstandard. The output cannot outgrow its
        # n bytes (zstd stops with an error): no frame-size check needed first.
        base = out.ctypes.data
        into = libzstd.decompress_to_address
        try:
            for i, d in enumerate(datas):
                if type(d) is bytes:
                    got = into(d, base + i * n, n)
                elif frame_params(d).content_size == n:
                    _zstd_into(d, out[i * n : (i + 1) * n])
                    got = n
                else:
                    return None
                if got != n:
                    return None
        except (zstandard.ZstdError, CodecError):
            return None
        return out
    try:
        for d in datas:
            # A declared size is checked before any allocation: no bombs.
            if frame_params(d).content_size != n:
                return None
        # One call for the batch, the GIL released throughout: the other workers
        # run Python meanwhile instead of trading the GIL at every chunk.
        decoded = _dctx().multi_decompress_to_buffer(
            datas, decompressed_sizes=_sizes(n, len(datas)), threads=0
        )
        if len(decoded) != len(datas):
            return None
        for i in range(len(datas)):
            seg = decoded[i]
            if len(seg) != n:
                return None
            buf[i * n : (i + 1) * n] = seg
    except (zstandard.ZstdError, TypeError, ValueError):
        return None
    return out


def _sizes(n: int, k: int) -> bytes:
    """``k`` decompressed sizes of ``n`` bytes, as ``multi_decompress_to_buffer``
    takes them (native uint64)."""
    key = (n, k)
    got = _SIZES.get(key)
    if got is None:
        if len(_SIZES) > 64:
            _SIZES.clear()
        got = _SIZES[key] = np.full(k, n, dtype=np.uint64).tobytes()
    return got


_SIZES: dict[tuple[int, int], bytes] = {}


def _as_stored(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``a`` as the stored dtype ``dt``, C-contiguous. numpy keeps no byte order on
    generic datetime64/timedelta64 ('>M8' allocates and casts as native, unswapped),
    so big-endian generic ones swap through int64."""
    generic = dt.kind in "Mm" and np.datetime_data(dt)[0] == "generic"
    if generic and dt.byteorder == ">" and a.dtype.kind in "Mm":
        order = a.dtype.str[0] if a.dtype.str[0] in "<>" else "="
        return np.ascontiguousarray(a.view(order + "i8"), dtype=">i8")
    return np.ascontiguousarray(a, dtype=dt)


def _plain_encode(chunks: np.ndarray, zstd: Any) -> list[bytes]:
    """Each row of the C-contiguous ``chunks`` as raw bytes or a zstd frame."""
    if len(chunks) == 0:
        return []
    flat = chunks.reshape(len(chunks), -1).view(np.uint8)
    if zstd is None:
        return [row.tobytes() for row in flat]
    cctx = getattr(zstd, "_cctx", None)
    if cctx is not None and flat.shape[1] < (64 << 10):
        # Small chunks: python-zstandard, one call for the batch with the GIL
        # released throughout (the other workers run meanwhile instead of
        # trading the GIL at every chunk), reading the rows in place.
        n = flat.shape[1]
        if len(flat) > 1 and n:
            segments = np.empty((len(flat), 2), dtype=np.uint64)
            segments[:, 0] = np.arange(len(flat), dtype=np.uint64) * n
            segments[:, 1] = n
            rows = zstandard.BufferWithSegments(flat, segments.tobytes())
            done = cctx().multi_compress_to_buffer(rows, threads=0)
            return [done[i].tobytes() for i in range(len(done))]
        compress = cctx().compress
        return [compress(row) for row in flat]
    encode = zstd.encode
    return [encode(memoryview(row), None) for row in flat]


def _scratch(n: int) -> np.ndarray:
    """This thread's scratch buffer, at least ``n`` bytes (grown when smaller;
    ``_tls.buf_address`` is its address)."""
    buf = getattr(_tls, "buf", None)
    if buf is None or buf.nbytes < n:
        buf = _tls.buf = np.empty(max(n, 1), dtype=np.uint8)
        _tls.buf_address = buf.__array_interface__["data"][0]
    return buf


class V3Pipeline:
    """A v3 codec chain bound to an array's data type and fill value."""

    def __init__(
        self,
        codecs: Sequence[Codec],
        dtype: DataType,
        fill_value: Any,
        chunk_shape: tuple[int, ...],
    ) -> None:
        spec = ChunkSpec(tuple(chunk_shape), dtype, fill_value)
        aa: list[ArrayArrayCodec] = []
        ab: ArrayBytesCodec | None = None
        bb: list[BytesBytesCodec] = []
        for codec in codecs:
            if isinstance(codec, ArrayArrayCodec):
                if ab is not None:
                    raise MetadataError(
                        f"array->array codec {codec.name!r} after the array->bytes codec"
                    )
                codec = codec.evolve(spec)
                codec.validate(spec)
                aa.append(codec)
                spec = codec.resolve(spec)
            elif isinstance(codec, ArrayBytesCodec):
                if ab is not None:
                    raise MetadataError("more than one array->bytes codec in the pipeline")
                codec = codec.evolve(spec)
                codec.validate(spec)
                ab = codec
            elif isinstance(codec, BytesBytesCodec):
                if ab is None:
                    raise MetadataError(
                        f"bytes->bytes codec {codec.name!r} before the array->bytes codec"
                    )
                codec = codec.evolve(spec)
                codec.validate(spec)
                bb.append(codec)
            else:
                raise MetadataError(f"not a codec: {codec!r}")
        if ab is None:
            raise MetadataError("the codec pipeline needs an array->bytes codec (e.g. 'bytes')")
        self.array_array = aa
        self.array_bytes = ab
        self.bytes_bytes = bb
        self.dtype = dtype
        self.fill_value = fill_value
        # Fast path: plain bytes (+ zstd), the overwhelmingly common layout.
        self._plain = (
            not aa
            and isinstance(ab, BytesCodec)
            and not dtype.is_vlen
            and not ab.swaps_by_hand(ChunkSpec(tuple(chunk_shape), dtype, fill_value))
        )
        self._plain_zstd = self._plain and len(bb) == 1 and isinstance(bb[0], ZstdCodec)
        self._plain_none = self._plain and not bb
        self._stored_dtype = (
            ab.stored_dtype(ChunkSpec(tuple(chunk_shape), dtype, fill_value))
            if self._plain
            else None
        )
        self._specs: dict[tuple[int, ...], list[ChunkSpec]] = {}

    @property
    def codecs(self) -> list[Codec]:
        return [*self.array_array, self.array_bytes, *self.bytes_bytes]

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.codecs]

    def _spec_chain(self, shape: tuple[int, ...]) -> list[ChunkSpec]:
        chain = self._specs.get(shape)
        if chain is None:
            spec = ChunkSpec(shape, self.dtype, self.fill_value)
            chain = [spec]
            for codec in self.array_array:
                spec = codec.resolve(spec)
                chain.append(spec)
            self._specs[shape] = chain
        return chain

    def decode(self, data: Any, shape: tuple[int, ...], scratch: bool = False) -> np.ndarray:
        """Decode one stored chunk to an array of ``shape`` (read-only view possible).

        ``scratch=True`` lets the result live in a per-thread buffer that the
        next scratch decode on the same thread overwrites, for callers that copy
        it out at once: large chunks then reuse warm memory instead of fresh
        pages (measured: full reads of 1 MiB chunks ~15% faster).
        """
        if self._plain_zstd:
            n = self.dtype.item_size
            for s in shape:
                n *= s
            if scratch and n >= (64 << 10) and self._stored_dtype == self.dtype.dtype:
                return self._decode_scratch(data, n).view(self._stored_dtype).reshape(shape)
            raw = zstd_decompress(data, n)
            if len(raw) != n:
                raise CodecError(f"chunk decompresses to {len(raw)} bytes, expected {n}")
            arr = np.frombuffer(raw, dtype=self._stored_dtype).reshape(shape)
            return arr if self._stored_dtype == self.dtype.dtype else arr.astype(self.dtype.dtype)
        chain = self._spec_chain(shape)
        inner = chain[-1]
        hint = inner.nbytes if isinstance(self.array_bytes, BytesCodec) else None
        # Codecs further out decode to the encoded form of the ones inside: never
        # much larger than the chunk itself (compressors' worst-case expansion).
        limit = None
        if self.bytes_bytes:
            base = hint if hint is not None else self._max_serialized(inner)
            limit = None if base is None else _expanded(base, len(self.bytes_bytes))
        for i in range(len(self.bytes_bytes) - 1, -1, -1):
            if i == 0:
                data = self.bytes_bytes[i].decode(data, inner, hint, limit)
            else:
                data = self.bytes_bytes[i].decode(data, inner, None, limit)
        arr = self.array_bytes.decode(data, inner)
        for i in range(len(self.array_array) - 1, -1, -1):
            arr = self.array_array[i].decode(arr, chain[i])
        return arr

    def _max_serialized(self, spec: ChunkSpec) -> int | None:
        """An upper bound on what the array->bytes codec writes for ``spec``
        (known for ``bytes`` and for shards of such chunks; None otherwise)."""
        if isinstance(self.array_bytes, BytesCodec):
            return spec.nbytes
        bound = getattr(self.array_bytes, "max_encoded_nbytes", None)
        return bound(spec) if bound is not None else None

    def max_encoded_nbytes(self, shape: tuple[int, ...]) -> int | None:
        """An upper bound on a stored chunk of ``shape``: the serialized bytes plus
        each bytes->bytes codec's worst-case expansion; None where unknown
        (variable-length data)."""
        base = self._max_serialized(self._spec_chain(shape)[-1])
        return None if base is None else _expanded(base, len(self.bytes_bytes))

    def decode_many(self, datas: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray | None:
        """Decode several small chunks of one shape at once: an array of shape
        ``(len(datas), *shape)`` in the stored dtype, or ``None`` when this
        pipeline (or any of the chunks) needs the one-chunk path (which also
        explains errors). Saves the per-chunk array wrapping of :meth:`decode`.
        The array lies in the calling thread's reusable buffer: copy it out
        before the thread's next ``decode_many``."""
        if not (self._plain_zstd or self._plain_none) or self._stored_dtype is None:
            return None
        n = self.dtype.item_size
        for s in shape:
            n *= s
        raws = _plain_raws(datas, n, zstd=self._plain_zstd)
        if raws is None:
            return None
        return raws.view(self._stored_dtype).reshape((len(datas), *shape))

    def encode_many(self, chunks: np.ndarray, shape: tuple[int, ...]) -> list[bytes] | None:
        """Encode ``chunks`` (shape ``(k, *shape)``) to their stored bytes, or
        ``None`` when this pipeline needs the one-chunk path."""
        if not (self._plain_zstd or self._plain_none) or self._stored_dtype is None:
            return None
        if chunks.dtype != self._stored_dtype or not chunks.flags.c_contiguous:
            chunks = np.ascontiguousarray(chunks, dtype=self._stored_dtype)
        return _plain_encode(chunks, self.bytes_bytes[0] if self._plain_zstd else None)

    def decode_chunks_into(self, datas: list[Any], starts: np.ndarray,
                           shape: tuple[int, ...], target: np.ndarray) -> np.ndarray | None:
        """Decode whole chunks of ``shape`` into ``target`` (a writable array of
        the decoded dtype), chunk ``j`` to the block starting at element
        ``starts[j]``, in one C call without the GIL (``cuzarr.runtime.native``),
        where this pipeline is plain zstd of native-order data and both the C
        loops and the system's libzstd are there; returns which chunks were
        placed (the caller decodes the others one by one, which raises the
        precise error), or ``None``: not this way at all."""
        if not (self._plain_zstd and self._stored_dtype == self.dtype.dtype
                and target.dtype == self._stored_dtype and target.flags.writeable
                and native.available() and libzstd.available()):
            return None
        n = self.dtype.item_size
        for s in shape:
            n *= s
        return native.zstd_decode_into(libzstd.decompress_function(), datas, starts, target,
                                       shape, _scratch(n))

    @staticmethod
    def _decode_scratch(data: Any, n: int) -> np.ndarray:
        buf = _scratch(n)
        if libzstd.available():
            # straight into the buffer: libzstd stops at n bytes (an error), and
            # decodes several frames or ones without a content size as well
            got = libzstd.decompress_to_address(data, _tls.buf_address, n)
            if got != n:
                raise CodecError(f"chunk decompresses to {got} bytes, expected {n}")
            return buf[:n]
        try:
            content = zstandard.get_frame_parameters(data).content_size
        except zstandard.ZstdError as e:
            raise CodecError(f"invalid zstd frame: {e}") from e
        if content != n:
            # unknown, or several frames: the general path copes or explains
            raw = zstd_decompress(data, n)
            return np.frombuffer(raw, dtype=np.uint8)
        out = buf[:n]
        _zstd_into(data, out)
        return out

    def decode_into(self, data: Any, shape: tuple[int, ...], target: np.ndarray) -> bool:
        """Decode straight into ``target`` (C-contiguous, chunk-shaped) if the
        pipeline allows it without an intermediate buffer; False if it does not."""
        n = target.nbytes
        # numcodecs' per-call overhead (~20 us) only pays off on large chunks.
        if n < (256 << 10) or not (self._plain_zstd and self._stored_dtype == self.dtype.dtype):
            return False
        try:
            content = zstandard.get_frame_parameters(data).content_size
        except zstandard.ZstdError as e:
            raise CodecError(f"invalid zstd frame: {e}") from e
        if content != n:
            return False  # unknown or wrong size: let decode() explain or cope
        _zstd_into(data, target.reshape(-1).view(np.uint8))
        return True

    def encode(
        self, arr: np.ndarray, shape: tuple[int, ...], write_empty_chunks: bool = False
    ) -> bytes:
        """Encode one chunk (an array of ``shape``) to the bytes to store.

        ``write_empty_chunks`` reaches a sharding codec: inner chunks equal to the
        fill value are stored too (otherwise they are left out of the shard).
        """
        if self._plain_zstd:
            # bytes + zstd, the common layout: skip the generic codec walk.
            if arr.dtype != self._stored_dtype or not arr.flags.c_contiguous:
                if arr.nbytes >= (64 << 10):
                    # Into a warm per-thread buffer: a fresh one page-faults on
                    # every chunk (measured ~40% of the copy's cost at 1 MiB).
                    buf = getattr(_tls, "ebuf", None)
                    if buf is None or buf.nbytes < arr.nbytes:
                        buf = _tls.ebuf = np.empty(arr.nbytes, dtype=np.uint8)
                    dst = buf[: arr.nbytes].view(self._stored_dtype).reshape(arr.shape)
                    np.copyto(dst, arr, casting="unsafe")
                    arr = dst
                else:
                    arr = np.ascontiguousarray(arr, dtype=self._stored_dtype)
            return self.bytes_bytes[0].encode(memoryview(arr.reshape(-1).view(np.uint8)), None)  # type: ignore[arg-type]
        chain = self._spec_chain(shape)
        for i, codec in enumerate(self.array_array):
            arr = codec.encode(arr, chain[i])
        if self.array_bytes.name == "sharding_indexed":
            # the parts, not joined (storage.base.Concat)
            data = self.array_bytes.encode_parts(  # type: ignore[attr-defined]
                arr, chain[-1], write_empty_chunks=write_empty_chunks
            )
        else:
            data = self.array_bytes.encode(arr, chain[-1])
        if len(data) == 0 and self.array_bytes.name == "sharding_indexed":
            # A shard with no inner chunk stored is not stored at all (as in
            # zarr-python): compressed, its empty bytes became a value that
            # decodes to a shard too short for its index.
            return b""
        if self.bytes_bytes:
            data = joined(data)
        for codec in self.bytes_bytes:
            data = codec.encode(data, chain[-1])
        # a shard's parts stay unjoined (storage.base.Concat)
        return data if isinstance(data, bytes | Concat) else bytes(data)


# numcodecs compressors that use the chunk's shape (zfp compresses in N-d blocks)
_ARRAY_AWARE = frozenset({"zfpy"})


def _f_only(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.ndim > 1 and not a.flags.c_contiguous


def _memory_bytes(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a`` in memory order (C- or F-contiguous alike)."""
    return a.reshape(-1, order="A" if a.flags.f_contiguous else "C").view(np.uint8)


def _expanded(n: int, codecs: int) -> int:
    """A bound on ``n`` bytes after ``codecs`` compressors or checksums: none of
    zstd, gzip, zlib, bz2, lzma, LZ4 or blosc grows data by more than 1/64 + 4 KiB."""
    return n + n // 64 + 4096 * codecs


class V2Pipeline:
    """v2 chunk encoding: flatten in ``order``, apply ``filters``, then ``compressor``."""

    def __init__(
        self,
        dtype: DataType,
        order: str,
        filters: Sequence[Any] | None,
        compressor: Any | None,
    ) -> None:
        self.dtype = dtype
        self.order = order
        self.filters = list(filters or [])
        self.compressor = compressor
        self._zstd: ZstdCodec | None = None
        if compressor is not None and compressor.codec_id == "zstd":
            conf = compressor.get_config()
            self._zstd = ZstdCodec(conf.get("level", 0), conf.get("checksum", False))
        # Decoding goes through cuzarr's checked codecs where one exists (header and
        # size validation before decompressing); numcodecs otherwise.
        self._checked: BytesBytesCodec | None = None
        if compressor is not None and compressor.codec_id in ("zstd", "gzip", "blosc"):
            from cuzarr.codecs.numcodecs_bridge import as_v3_codec

            codec = as_v3_codec(compressor)
            if isinstance(codec, BytesBytesCodec):
                self._checked = codec
        self._vlen_filter = None
        if dtype.is_vlen:
            ids = [f.codec_id for f in self.filters]
            want = "vlen-utf8" if dtype.kind == "string" else "vlen-bytes"
            if want not in ids:
                raise MetadataError(f"object dtype arrays need a {want!r} filter")
            self._vlen_filter = ids.index(want)

    def _decompress(self, data: Any, nbytes: int | None, limit: int | None = None) -> Any:
        if self._checked is not None:
            return self._checked.decode(data, None, nbytes, limit)  # type: ignore[arg-type]
        if self.compressor is None:
            return data
        if self.compressor.codec_id in BOUNDED_NUMCODECS:
            # streaming decoders that stop at the bound (codecs/bounded.py)
            return decode_numcodec(
                self.compressor, data, nbytes, nbytes if nbytes is not None else limit
            )
        try:
            return self.compressor.decode(data)
        except Exception as e:
            raise CodecError(f"{self.compressor.codec_id} decode failed: {e}") from e

    def decode(self, data: Any, shape: tuple[int, ...], scratch: bool = False) -> np.ndarray:
        n = 1
        for s in shape:
            n *= s
        if self.dtype.is_vlen:
            buf = self._decompress(data, None)
            for f in reversed(self.filters[self._vlen_filter + 1 :]):
                buf = f.decode(buf)
            arr = decode_vlen(buf, self.dtype.kind, (n,), self.dtype.dtype)
            for f in reversed(self.filters[: self._vlen_filter]):
                arr = np.asarray(f.decode(arr))
            return arr.reshape(shape, order=self.order)
        nbytes = n * self.dtype.item_size
        # With filters in between, the compressed payload is the filters' output:
        # bounded, not exact (no decompression bombs either way).
        buf = self._decompress(
            data, nbytes if not self.filters else None, nbytes + nbytes // 64 + 4096
        )
        for f in reversed(self.filters):
            try:
                buf = f.decode(buf)
            except Exception as e:
                raise CodecError(f"filter {f.codec_id} decode failed: {e}") from e
        if isinstance(buf, np.ndarray):
            # an array-aware codec returns the chunk in its (C-order) shape:
            # memory order is the stored order (zarr-python reads it so too)
            buf = buf.reshape(-1, order="A")
            if buf.dtype.hasobject and not self.dtype.dtype.hasobject:
                buf = self._from_objects(buf, n)
            if buf.dtype != self.dtype.dtype:
                buf = buf.reshape(-1).view(np.uint8) if buf.dtype.itemsize else buf
                buf = buf.view(self.dtype.dtype) if buf.nbytes == nbytes else buf
        else:
            buf = np.frombuffer(buf, dtype=np.uint8)
            if buf.nbytes != nbytes:
                raise CodecError(f"chunk decodes to {buf.nbytes} bytes, expected {nbytes}")
            buf = buf.view(self.dtype.dtype)
        if buf.nbytes != nbytes:
            raise CodecError(f"chunk decodes to {buf.nbytes} bytes, expected {nbytes}")
        return buf.reshape(shape, order=self.order)

    def _from_objects(self, objs: np.ndarray, n: int) -> np.ndarray:
        """A filter's object output (``vlen-utf8`` under a fixed-width ``<U2``, as
        xarray writes string coordinates back) as the array's own dtype, refused
        where a value would not survive the cast (a longer string, say)."""
        dt = self.dtype.dtype
        flat = objs.reshape(-1)
        if flat.shape[0] != n:
            raise CodecError(f"chunk decodes to {flat.shape[0]} values, expected {n}")
        try:
            out = flat.astype(dt)
        except (TypeError, ValueError) as e:
            raise CodecError(f"the filters' values cannot be stored as {dt}: {e}") from e
        if dt.kind in "SU":
            # by length: numpy's fixed-width strings drop trailing NULs on reading,
            # so b"a\x00" fits "S2" although it does not read back equal
            width = dt.itemsize // (4 if dt.kind == "U" else 1)
            if any(v is not None and len(v) > width for v in flat.tolist()):
                raise CodecError(f"the filters' values do not fit the data type {dt}")
        return out

    def decode_many(self, datas: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray | None:
        """Several small chunks at once, as :meth:`V3Pipeline.decode_many` (F-order
        chunks come back as a transposed view)."""
        dt = self.dtype.dtype
        if self.filters or self.dtype.is_vlen or dt.fields or dt.hasobject:
            return None
        if self.compressor is not None and self._zstd is None:
            return None
        n = self.dtype.item_size
        for s in shape:
            n *= s
        raws = _plain_raws(datas, n, zstd=self._zstd is not None)
        if raws is None:
            return None
        flat = raws.view(dt)
        if self.order == "F":
            nd = len(shape)
            arr = flat.reshape((len(datas), *shape[::-1]))
            return arr.transpose(0, *range(nd, 0, -1))
        return flat.reshape((len(datas), *shape))

    def encode_many(self, chunks: np.ndarray, shape: tuple[int, ...]) -> list[bytes] | None:
        """As :meth:`V3Pipeline.encode_many`."""
        dt = self.dtype.dtype
        if self.filters or self.dtype.is_vlen or dt.fields or dt.hasobject:
            return None
        if self.compressor is not None and self._zstd is None:
            return None
        if self.order == "F":
            nd = chunks.ndim - 1
            chunks = chunks.transpose(0, *range(nd, 0, -1))
        chunks = _as_stored(chunks, dt)
        return _plain_encode(chunks, self._zstd)

    def encode(self, arr: np.ndarray, shape: tuple[int, ...]) -> bytes:
        flat = arr.ravel(order=self.order)
        if self.dtype.is_vlen:
            data: Any = flat
            for i, f in enumerate(self.filters):
                if i == self._vlen_filter:
                    data = encode_vlen(data, self.dtype.kind)
                else:
                    data = f.encode(data)
        else:
            if flat.dtype != self.dtype.dtype or flat.dtype.str != self.dtype.dtype.str:
                flat = _as_stored(flat, self.dtype.dtype)
            # Filters and compressor get the chunk in its shape, contiguous in the
            # array's order, as zarr-python hands it to them: array-aware codecs
            # (zfpy) compress in N-d and write the same bytes as numcodecs.
            data = flat.reshape(arr.shape, order=self.order)
            for f in self.filters:
                data = f.encode(data)
            if getattr(self.compressor, "codec_id", None) in _ARRAY_AWARE and _f_only(data):
                # zfpy takes C order only (numcodecs refuses F): the transposed
                # view is C-contiguous, and decoding reads it back in memory order
                data = data.T
        if self._zstd is not None:
            out = self._zstd.encode(
                _memory_bytes(data) if isinstance(data, np.ndarray) else data,
                None,
            )  # type: ignore[arg-type]
        elif self.compressor is not None:
            if isinstance(data, np.ndarray) and self.dtype.kind == "ml":
                # ml_dtypes (bfloat16, float8, int4) cannot export a buffer; an
                # unsigned view of the same item size keeps blosc's typesize.
                # (a view keeps an F-order chunk's memory order)
                data = data.view(f"u{data.dtype.itemsize}")
            out = self.compressor.encode(data)
        else:
            out = data
        if isinstance(out, np.ndarray):
            return out.tobytes(order="A")  # memory order: an F-order chunk stays so
        return bytes(out)


def pipeline_for(meta: ArrayMetadata) -> Any:
    """The codec pipeline of ``meta``: built once per metadata object and shared
    by every handle made from it (a consolidated group's members() made a second
    one per array). Pipelines hold no per-handle state: their caches are keyed
    by content. Cached on the object (not a field: eq, replace and pickles
    ignore it)."""
    pipe = meta.__dict__.get("_pipeline_cache")
    if pipe is None:
        if meta.zarr_format == 3:
            pipe = V3Pipeline(meta.codecs, meta.dtype, meta.read_fill, meta.chunk_shape)
        else:
            pipe = V2Pipeline(meta.dtype, meta.order, meta.filters, meta.compressor)
        object.__setattr__(meta, "_pipeline_cache", pipe)
    return pipe


def check_array_codecs(meta: ArrayMetadata) -> None:
    """Raise ``MetadataError`` where ``meta``'s codecs do not fit its data type
    and chunk grid (building the pipeline checks the former)."""
    check_sharded_edges(meta, pipeline_for(meta))
