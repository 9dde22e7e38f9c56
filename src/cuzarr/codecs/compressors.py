"""v3 compressors: ``zstd``, ``gzip``, ``blosc``.

zstd goes through python-zstandard (byte-compatible frames, about 3x less call
overhead than numcodecs on small chunks), large frames through numcodecs or the
system's libzstd (:mod:`cuzarr.codecs.libzstd`); gzip through the standard library's
zlib; blosc through numcodecs. All three release the GIL while they work.
"""

from __future__ import annotations

import threading
import zlib
from enum import Enum, StrEnum
from typing import Any

import numpy as np
import zstandard

from cuzarr.codecs import libzstd
from cuzarr.codecs.base import BytesBytesCodec, ChunkSpec, register_codec
from cuzarr.codecs.bounded import gunzip
from cuzarr.codecs.lazy_numcodecs import nc_zstd, numcodecs
from cuzarr.errors import CodecError, MetadataError

__all__ = [
    "BloscCname",
    "BloscCodec",
    "BloscShuffle",
    "GzipCodec",
    "ZstdCodec",
    "zstd_decompress",
    "zstd_decompress_into",
]

_tls = threading.local()
_LARGE = 64 << 10


def _dctx() -> zstandard.ZstdDecompressor:
    d = getattr(_tls, "dctx", None)
    if d is None:
        d = _tls.dctx = zstandard.ZstdDecompressor()
    return d


def zstd_decompress(data: Any, size_hint: int | None, limit: int | None = None) -> bytes:
    """Decompress a zstd frame.

    ``size_hint`` is the exact expected size, ``limit`` an upper bound. A frame
    that declares more (or, without a declared size, produces more) is refused
    before its output is allocated: no decompression bombs.
    """
    bound = size_hint if size_hint is not None else limit
    try:
        content = zstandard.get_frame_parameters(data).content_size
    except zstandard.ZstdError as e:
        raise CodecError(f"invalid zstd frame: {e}") from e
    known = content != zstandard.CONTENTSIZE_UNKNOWN
    if known and size_hint is not None and content != size_hint and content:
        if content < size_hint:
            # RFC 8878: a stream may hold several frames (pzstd writes them;
            # numcodecs and tensorstore read them). Their sizes add up.
            return _decompress_frames(data, size_hint, bound)
        raise CodecError(f"zstd frame holds {content} bytes, expected {size_hint}")
    if known and bound is not None and content > bound:
        raise CodecError(f"zstd frame declares {content} bytes, more than the {bound} allowed")
    try:
        if known and content >= _LARGE:
            # numcodecs decompresses large frames faster with several threads
            # (measured: 1 MiB chunks, 2 threads, ~20% less time).
            return nc_zstd().decode(data)
        if size_hint is None:
            if not (known and content > 0):
                return _decompress_frames(data, None, bound)
            # The declared size is within the bound (checked above); the frame
            # object tells whether more frames follow.
            d = _dctx().decompressobj()
            out = d.decompress(data)
            if not d.eof:
                raise CodecError("zstd frame is truncated")
            return _decompress_frames(data, None, bound) if d.unused_data else out
        if known and content > 0:
            out = _dctx().decompress(data)
        else:
            # No declared size: let zstd stop at the bound (it errors beyond it).
            out = _dctx().decompress(data, max_output_size=max(1, size_hint))
    except (zstandard.ZstdError, RuntimeError) as e:
        raise CodecError(f"zstd decompression failed: {e}") from e
    if len(out) < size_hint:
        # python-zstandard's one-shot call stops after the first frame
        return _decompress_frames(data, size_hint, bound)
    return out


def zstd_decompress_into(data: Any, out: np.ndarray) -> None:
    """Decompress ``data``, whose frame declares ``out.nbytes`` bytes, into the
    C-contiguous uint8 array ``out``: through the system's libzstd when there is
    one (see :mod:`cuzarr.codecs.libzstd`), else numcodecs."""
    if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
        # both write through a raw pointer (numcodecs even into read-only memory)
        raise CodecError("zstd output must be a writable, C-contiguous numpy array")
    if libzstd.available():
        n = libzstd.decompress_into(data, out)
        if n != out.nbytes:
            raise CodecError(f"zstd frame holds {n} bytes, expected {out.nbytes}")
        return
    try:
        nc_zstd().decode(data, out=out)
    except (RuntimeError, ValueError) as e:
        raise CodecError(f"zstd decompression failed: {e}") from e


def _decompress_frames(data: Any, size_hint: int | None, bound: int | None) -> bytes:
    """Decompress every frame of ``data`` in turn, refusing more than ``bound``
    bytes in all (when given) and anything that is not a frame after the last."""
    try:
        with _dctx().stream_reader(data, read_across_frames=True) as reader:
            out = reader.read(bound + 1) if bound is not None else reader.readall()
    except (zstandard.ZstdError, RuntimeError) as e:
        raise CodecError(f"zstd decompression failed: {e}") from e
    if bound is not None and len(out) > bound:
        raise CodecError(f"zstd frames hold more than the {bound} bytes allowed")
    if size_hint is not None and len(out) != size_hint:
        raise CodecError(f"zstd frames hold {len(out)} bytes, expected {size_hint}")
    return out


# per thread, one python-zstandard compressor per (level, checksum), shared by
# every ZstdCodec: each keeps its context's workspace (~1.4 MB at level 1 once it
# has compressed 512 KiB, ~2 MB at level 3), so one per codec instance would
# grow with the arrays a long process has open
_compressors = threading.local()


def _zstd_compressor(level: int, checksum: bool) -> zstandard.ZstdCompressor:
    by_params = getattr(_compressors, "by_params", None)
    if by_params is None:
        by_params = _compressors.by_params = {}
    c = by_params.get((level, checksum))
    if c is None:
        c = by_params[(level, checksum)] = zstandard.ZstdCompressor(
            level=level, write_checksum=checksum, write_content_size=True
        )
    return c


class ZstdCodec(BytesBytesCodec):
    """Zstandard frames; ``level`` 0 means zstd's default level."""

    name = "zstd"

    def __init__(self, level: int = 0, checksum: bool = False) -> None:
        if not isinstance(level, int) or isinstance(level, bool):
            raise MetadataError(f"zstd level must be an integer, got {level!r}")
        self.level = level
        self.checksum = bool(checksum)
        self._local = threading.local()

    def configuration(self) -> dict[str, Any]:
        return {"level": self.level, "checksum": self.checksum}

    def _cctx(self) -> zstandard.ZstdCompressor:
        return _zstd_compressor(self.level, self.checksum)

    def encode(self, data: Any, spec: ChunkSpec) -> bytes:
        # Below 512 KiB python-zstandard's per-thread compressor (its context
        # reused) beats numcodecs, which makes a context per call: 128 KiB
        # inner chunks of zarr-python's shard-write 139 -> 127 ms, CPU 260 ->
        # 238 (2026-12-03; the cut was 64 KiB). 1 MiB chunks stay with
        # numcodecs, ~1.5% less CPU in the write workload once large buffers
        # stay off mmap (raise_mmap_threshold). (numcodecs' own libzstd through
        # ctypes with a per-thread context saved nothing measurable there.)
        if len(data) >= (512 << 10):
            return self._numcodec().encode(data)
        return self._cctx().compress(data)

    def _numcodec(self) -> Any:
        nc = getattr(self._local, "nc", None)
        if nc is None:
            nc = self._local.nc = numcodecs().Zstd(level=self.level, checksum=self.checksum)
        return nc

    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        return zstd_decompress(data, size_hint, limit)

    def __getstate__(self) -> dict[str, Any]:
        return {"level": self.level, "checksum": self.checksum}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


class GzipCodec(BytesBytesCodec):
    """gzip (RFC 1952) streams, as numcodecs' GZip writes them."""

    name = "gzip"

    def __init__(self, level: int = 5) -> None:
        if not isinstance(level, int) or not 0 <= level <= 9:
            raise MetadataError(f"gzip level must be 0-9, got {level!r}")
        self.level = level

    def configuration(self) -> dict[str, Any]:
        return {"level": self.level}

    def encode(self, data: Any, spec: ChunkSpec) -> bytes:
        c = zlib.compressobj(self.level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()

    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        # the shared bounded decoder (codecs/bounded.py), as numcodecs' gzip reads
        return gunzip(data, size_hint if size_hint is not None else limit)


_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_SHUFFLE_NAMES = {v: k for k, v in _SHUFFLE.items()}


class BloscShuffle(StrEnum):
    """Blosc's shuffle modes (zarr-python's enum; plain strings work too)."""

    noshuffle = "noshuffle"
    shuffle = "shuffle"
    bitshuffle = "bitshuffle"


class BloscCname(StrEnum):
    """Blosc's compressors (zarr-python's enum; plain strings work too)."""

    lz4 = "lz4"
    lz4hc = "lz4hc"
    blosclz = "blosclz"
    zstd = "zstd"
    snappy = "snappy"
    zlib = "zlib"


class BloscCodec(BytesBytesCodec):
    """Blosc via numcodecs. ``typesize`` is taken from the data type when unset,
    and so is ``shuffle`` (as zarr-python: byte shuffle for items of several
    bytes, bit shuffle for single bytes)."""

    name = "blosc"

    def __init__(
        self,
        cname: str = "zstd",
        clevel: int = 5,
        shuffle: str | int | None = None,
        typesize: int | None = None,
        blocksize: int = 0,
    ) -> None:
        if isinstance(shuffle, Enum):
            shuffle = shuffle.value
        if isinstance(cname, Enum):
            cname = cname.value
        if isinstance(shuffle, int) and not isinstance(shuffle, bool):
            shuffle = _SHUFFLE_NAMES.get(shuffle, "shuffle")
        if shuffle is not None and shuffle not in _SHUFFLE:
            raise MetadataError(f"blosc shuffle must be one of {sorted(_SHUFFLE)}, got {shuffle!r}")
        if cname not in ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"):
            raise MetadataError(f"unknown blosc cname {cname!r}")
        self.cname = cname
        self.clevel = int(clevel)
        self.shuffle = shuffle
        self.typesize = typesize
        self.blocksize = int(blocksize)

    def configuration(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "cname": self.cname,
            "clevel": self.clevel,
            "shuffle": self._shuffle(),
            "blocksize": self.blocksize,
        }
        if self.typesize is not None:
            conf["typesize"] = self.typesize
        return conf

    def _shuffle(self) -> str:
        # not evolved against a data type (typesize unknown too): no shuffle
        return self.shuffle if self.shuffle is not None else "noshuffle"

    def evolve(self, spec: ChunkSpec) -> BloscCodec:
        if self.typesize is None or self.shuffle is None:
            item = 1 if spec.dtype.is_vlen else spec.dtype.item_size
            ts = item if self.typesize is None else self.typesize
            shuffle = self.shuffle
            if shuffle is None:
                shuffle = "bitshuffle" if item == 1 else "shuffle"
            return BloscCodec(self.cname, self.clevel, shuffle, ts, self.blocksize)
        return self

    def _numcodec(self) -> Any:
        nc = getattr(self, "_nc", None)
        if nc is None:
            nc = self._nc = numcodecs().Blosc(
                cname=self.cname,
                clevel=self.clevel,
                shuffle=_SHUFFLE[self._shuffle()],
                blocksize=self.blocksize,
                typesize=self.typesize,
            )
        return nc

    def encode(self, data: Any, spec: ChunkSpec) -> bytes:
        return self._numcodec().encode(data)

    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        mv = memoryview(data)
        if len(mv) < 16:
            raise CodecError(f"blosc chunk of {len(mv)} bytes is shorter than its header")
        nbytes = int.from_bytes(mv[4:8], "little")
        cbytes = int.from_bytes(mv[12:16], "little")
        if cbytes != len(mv):
            raise CodecError(f"blosc header says {cbytes} compressed bytes, chunk has {len(mv)}")
        if size_hint is not None and nbytes != size_hint:
            raise CodecError(f"blosc chunk holds {nbytes} bytes, expected {size_hint}")
        if limit is not None and nbytes > limit:
            raise CodecError(f"blosc chunk declares {nbytes} bytes, more than the {limit} allowed")
        try:
            return self._numcodec().decode(mv)
        except Exception as e:
            raise CodecError(f"blosc decompression failed: {e}") from e

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_nc"}


register_codec("zstd", lambda c: ZstdCodec(c.get("level", 0), c.get("checksum", False)))
register_codec("gzip", lambda c: GzipCodec(c.get("level", 5)))
register_codec(
    "blosc",
    lambda c: BloscCodec(
        c.get("cname", "zstd"),
        c.get("clevel", 5),
        c.get("shuffle"),
        c.get("typesize"),
        c.get("blocksize", 0),
    ),
)
