"""The N5 block codec: an N5 block (big-endian header, then the elements, compressed)
to and from a big-endian array of the dataset's chunk shape.

A block's header holds its mode (0 default, 1 varlength), its number of
dimensions, its size per dimension (fastest-varying first) and, in mode 1, its
element count. The elements are compressed as the dataset's ``compression``
says (``raw``, ``gzip``, ``zstd``, ``bzip2``, ``xz``, ``blosc``) and decompressed
no further than the elements the header announces (as the N5 reference
implementation reads them: no decompression bombs). Truncated edge blocks are
padded to the full chunk on decoding. :class:`cuzarr.storage.n5.N5Store` maps N5
containers' keys and attributes onto a Zarr v2 view and uses this codec for the
blocks.

It lives beside the store, not in ``cuzarr.codecs``: codecs and storage are
layers independent of each other (#27), and the store is its only user. It
needs neither: numpy, the compressors and the errors only.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from math import prod
from typing import Any

import numpy as np
import zstandard

from cuzarr.errors import CodecError, MetadataError

__all__ = [
    "compression_from_numcodecs",
    "decode_block",
    "dtype_name",
    "encode_block",
    "n5_dtype",
]

_DTYPES = {
    "uint8": "u1",
    "uint16": "u2",
    "uint32": "u4",
    "uint64": "u8",
    "int8": "i1",
    "int16": "i2",
    "int32": "i4",
    "int64": "i8",
    "float32": "f4",
    "float64": "f8",
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def dtype_name(dtype: np.dtype) -> str | None:
    """The N5 ``dataType`` of a numpy dtype, or None where N5 has none."""
    return _NAMES.get(dtype.newbyteorder("=").str[1:]) if dtype.kind in "uif" else None


def n5_dtype(name: str) -> np.dtype:
    """The big-endian numpy dtype of an N5 ``dataType``."""
    try:
        return np.dtype(">" + _DTYPES[name])
    except KeyError:
        raise MetadataError(f"N5 dataType {name!r} is not supported") from None


def _compression(attrs: dict[str, Any]) -> dict[str, Any]:
    comp = attrs.get("compression")
    if comp is None:  # N5 < 1.0: "compressionType"
        comp = {"type": attrs.get("compressionType", "raw")}
    return comp


def _stream_decompress(make: Any, data: bytes, nbytes: int) -> bytes:
    """At most ``nbytes`` out of ``data`` through decompressor objects of the
    ``zlib``/``bz2``/``lzma`` kind, one per concatenated stream (gzip members,
    bzip2 streams, xz streams). Never more: the N5 reference implementation reads
    exactly the elements the header announces, so a stream that would expand to
    more (a decompression bomb) costs nothing beyond the block."""
    out = bytearray()
    rest = data
    while len(out) < nbytes and rest:
        d = make()
        out += d.decompress(rest, nbytes - len(out))
        if not d.eof:  # the block is full, or the stream ends early
            break
        rest = d.unused_data
    return bytes(out)


def _zstd_decompress(data: bytes, nbytes: int) -> bytes:
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
        while len(out) < nbytes:
            part = r.read(nbytes - len(out))
            if not part:
                break
            out += part
    return bytes(out)


def _blosc_decompress(data: bytes, nbytes: int) -> bytes:
    from numcodecs import Blosc

    if len(data) >= 16:
        (declared,) = struct.unpack_from("<I", data, 4)  # blosc header: uncompressed size
        if declared > nbytes:
            raise CodecError(
                f"blosc buffer declares {declared} bytes, more than the {nbytes} of the block"
            )
    return bytes(Blosc().decode(data))


def _decompress(comp: dict[str, Any], data: bytes, nbytes: int) -> bytes:
    """The first ``nbytes`` bytes that ``data`` decompresses to (fewer when it
    holds fewer); corrupt streams raise :class:`CodecError`."""
    kind = comp.get("type", "raw")
    try:
        if kind == "raw":
            return data[:nbytes]
        if kind == "gzip":
            # zlib or gzip header, auto-detected
            return _stream_decompress(lambda: zlib.decompressobj(47), data, nbytes)
        if kind == "zstd":
            return _zstd_decompress(data, nbytes)
        if kind == "bzip2":
            return _stream_decompress(bz2.BZ2Decompressor, data, nbytes)
        if kind == "xz":
            return _stream_decompress(lzma.LZMADecompressor, data, nbytes)
        if kind == "blosc":
            return _blosc_decompress(data, nbytes)
    except CodecError:
        raise
    except Exception as e:  # zlib.error, OSError (bz2), LZMAError, ZstdError, blosc's RuntimeError
        raise CodecError(f"N5 {kind} decompression failed: {type(e).__name__}: {e}") from e
    raise MetadataError(f"N5 compression {kind!r} is not supported")


def _compress(comp: dict[str, Any], data: bytes, itemsize: int) -> bytes:
    kind = comp.get("type", "raw")
    if kind == "raw":
        return data
    if kind == "gzip":
        level = int(comp.get("level", -1))
        wbits = 15 if comp.get("useZlib", False) else 31
        c = zlib.compressobj(level if level >= 0 else 6, zlib.DEFLATED, wbits)
        return c.compress(data) + c.flush()
    if kind == "zstd":
        return zstandard.ZstdCompressor(level=int(comp.get("level", 3))).compress(data)
    if kind == "bzip2":
        return bz2.compress(data, int(comp.get("blockSize", 9)))
    if kind == "xz":
        return lzma.compress(data, preset=int(comp.get("preset", 6)))
    if kind == "blosc":
        from numcodecs import Blosc

        codec = Blosc(
            cname=comp.get("cname", "lz4"),
            clevel=int(comp.get("clevel", 5)),
            shuffle=int(comp.get("shuffle", 1)),
            blocksize=int(comp.get("blocksize", 0)),
            typesize=itemsize,
        )
        return bytes(codec.encode(data))
    raise MetadataError(f"N5 compression {kind!r} is not supported")


def decode_block(data: bytes, attrs: dict[str, Any], key: str | None = None) -> np.ndarray:
    """An N5 block -> a big-endian array of the full chunk shape (C order, padded).

    Parameters
    ----------
    data
        The block as stored: header, then the compressed elements.
    attrs
        The dataset's ``attributes.json``.
    key
        The block's key, named in errors.

    Raises
    ------
    MetadataError
        A header that is cut short, names another number of dimensions or a
        block larger than ``blockSize``, a varlength block whose element count
        is not that of its size, an object block (mode 2) or an unknown mode, or
        data that holds fewer elements than the header says.
    CodecError
        Compressed data that does not decompress.
    """
    where = f"N5 block {key!r}" if key is not None else "N5 block"
    try:
        return _decode_block(data, attrs)
    except (MetadataError, CodecError) as e:
        raise type(e)(f"{where}: {e}") from e


def _decode_block(data: bytes, attrs: dict[str, Any]) -> np.ndarray:
    dtype = n5_dtype(attrs["dataType"])
    chunk = tuple(int(b) for b in reversed(attrs["blockSize"]))
    if len(data) < 2:
        raise MetadataError(f"{len(data)} bytes, shorter than the block header")
    (mode,) = struct.unpack_from(">H", data, 0)
    if mode == 2:
        raise MetadataError("mode 2 (an object block, not an array) is not supported")
    if mode not in (0, 1):
        raise MetadataError(f"unknown block mode {mode} (N5 defines 0 default, 1 varlength)")
    if len(data) < 4:
        raise MetadataError(f"{len(data)} bytes, shorter than the block header")
    (ndim,) = struct.unpack_from(">H", data, 2)
    if ndim != len(chunk):
        raise MetadataError(f"the header has {ndim} dimensions, the dataset {len(chunk)}")
    offset = 4 + 4 * ndim + (4 if mode == 1 else 0)
    if len(data) < offset:
        raise MetadataError(f"{len(data)} bytes, shorter than its {offset}-byte header")
    sizes = struct.unpack_from(f">{ndim}I", data, 4)
    shape = tuple(reversed(sizes))
    count = prod(shape)
    if mode == 1:
        (n,) = struct.unpack_from(">I", data, 4 + 4 * ndim)
        if n != count:
            raise MetadataError(
                f"varlength block of {n} elements for a block of size {list(sizes)} "
                f"({count} elements) is not supported"
            )
    if any(s > c for s, c in zip(shape, chunk)):
        raise MetadataError(
            f"block of size {list(sizes)} exceeds the block size {attrs['blockSize']}"
        )
    nbytes = count * dtype.itemsize
    raw = _decompress(_compression(attrs), data[offset:], nbytes)
    if len(raw) < nbytes:
        raise MetadataError(f"holds {len(raw)} bytes, expected {nbytes}")
    arr = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
    if shape == chunk:
        return arr
    out = np.zeros(chunk, dtype=dtype)
    out[tuple(slice(0, s) for s in shape)] = arr
    return out


def encode_block(arr: np.ndarray, attrs: dict[str, Any]) -> bytes:
    """A (possibly truncated) C-order array -> an N5 block (header + compressed data)."""
    dtype = n5_dtype(attrs["dataType"])
    a = np.ascontiguousarray(arr, dtype=dtype).reshape(np.shape(arr))  # keeps 0-d arrays 0-d
    sizes = tuple(reversed(a.shape))
    header = struct.pack(f">HH{len(sizes)}I", 0, len(sizes), *sizes)
    return header + _compress(_compression(attrs), a.tobytes(), dtype.itemsize)


def compression_from_numcodecs(
    compressor: dict[str, Any] | None, itemsize: int = 1
) -> dict[str, Any]:
    """The N5 ``compression`` of a numcodecs compressor's config (None: raw)."""
    if compressor is None:
        return {"type": "raw"}
    cid = compressor.get("id")
    if cid == "zstd":
        return {"type": "zstd", "level": int(compressor.get("level", 0) or 0)}
    if cid in ("gzip", "zlib"):
        return {
            "type": "gzip",
            "level": int(compressor.get("level", -1)),
            "useZlib": cid == "zlib",
        }
    if cid == "bz2":
        return {"type": "bzip2", "blockSize": int(compressor.get("level", 9))}
    if cid == "lzma":
        return {"type": "xz", "preset": int(compressor.get("preset") or 6)}
    if cid == "blosc":
        shuffle = int(compressor.get("shuffle", 1))
        if shuffle == -1:  # numcodecs AUTOSHUFFLE; N5 knows only 0, 1 and 2
            shuffle = 2 if itemsize == 1 else 1
        return {
            "type": "blosc",
            "cname": compressor.get("cname", "lz4"),
            "clevel": int(compressor.get("clevel", 5)),
            "shuffle": shuffle,
            "blocksize": int(compressor.get("blocksize", 0)),
        }
    raise MetadataError(
        f"N5 has no compression matching the numcodecs codec {cid!r} "
        "(use zstd, gzip, zlib, bz2, lzma, blosc or None)"
    )
