"""Decompression that never produces more than a chunk can hold.

A chunk's expected size is known before it is decoded (its shape times its item
size, or a bound on a codec's encoded form further in). Each decoder here stops
once its output would pass that bound and raises :class:`~cuzarr.errors.CodecError`,
so a few hundred hostile bytes cannot make a read allocate gigabytes:

- deflate streams (zlib, gzip) and bzip2 / xz / lzma streams go through the
  standard library's streaming decompressors with ``max_length``: at most
  ``bound + 1`` bytes are ever produced;
- LZ4 (numcodecs' block format) and blosc carry the decompressed size in a
  header, checked before anything is allocated;
- zstd frames declare their size, or are decoded with a maximum output
  (:func:`cuzarr.codecs.compressors.zstd_decompress`).

The stream formats read several concatenated streams (members) one after
another, as the standard library's one-shot functions, and so numcodecs, do.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from typing import Any

from cuzarr.errors import CodecError

__all__ = [
    "BOUNDED_NUMCODECS",
    "bunzip2",
    "check_lz4_header",
    "decode_numcodec",
    "gunzip",
    "inflate",
    "unxz",
]

# numcodecs compressors this module decodes itself (zstd and blosc go through
# cuzarr's own codecs, see codecs/compressors.py).
BOUNDED_NUMCODECS = frozenset({"zlib", "gzip", "bz2", "lzma", "lz4"})

# liblzma sizes its dictionary from the stream header (up to 1.5 GiB for a
# hostile one); a real dictionary larger than the output is never needed, so
# decoders get this much on top of the bound.
_LZMA_MEMLIMIT_SLACK = 256 << 20


def _too_big(name: str, bound: int) -> CodecError:
    return CodecError(f"{name} data decompresses to more than the {bound} bytes allowed")


def _cap(bound: int | None, total: int) -> int:
    """``max_length`` for the next piece: one byte past the bound tells "too big"."""
    return -1 if bound is None else bound - total + 1


def inflate(data: Any, bound: int | None) -> bytes:
    """One zlib stream (RFC 1950), as ``zlib.decompress``: bytes after its end
    are ignored. More than ``bound`` bytes of output is a :class:`CodecError`."""
    try:
        d = zlib.decompressobj(15)
        out = d.decompress(data, 0 if bound is None else bound + 1)
    except zlib.error as e:
        raise CodecError(f"zlib decompression failed: {e}") from e
    return _whole(out, d, bound, "zlib")


def _whole(out: bytes, d: Any, bound: int | None, name: str) -> bytes:
    """``out``, the output of the ``name`` stream ``d``: at most ``bound`` bytes, and
    ``d`` read to its end (``CodecError`` otherwise)."""
    if bound is not None and len(out) > bound:
        raise _too_big(name, bound)
    if not d.eof:
        raise CodecError(f"{name} stream is truncated")
    return out


def gunzip(data: Any, bound: int | None) -> bytes:
    """gzip members (RFC 1952, a zlib stream is accepted too), read one after
    another and followed by nothing but zero padding, as Python's gzip module
    (and so numcodecs) reads them. More than ``bound`` bytes is a :class:`CodecError`."""
    try:
        d = zlib.decompressobj(47)  # 32 + 15: gzip or zlib header, auto-detected
        out = d.decompress(data, 0 if bound is None else bound + 1)
        if d.eof and d.unused_data and d.unused_data.strip(b"\0"):
            out = _more_gzip_members(out, d.unused_data, bound)
    except zlib.error as e:
        raise CodecError(f"gzip decompression failed: {e}") from e
    return _whole(out, d, bound, "gzip")


def _more_gzip_members(out: bytes, rest: bytes, bound: int | None) -> bytes:
    """``out`` followed by the members in ``rest``; anything but zero padding
    after the last is an error."""
    parts = [out]
    total = len(out)
    while rest.strip(b"\0"):
        if bound is not None and total > bound:
            # already past the bound (the caller refuses it): a max_length of 0
            # below would mean no limit at all
            break
        if rest[:2] != b"\x1f\x8b":
            raise CodecError("gzip data is followed by bytes that are not a gzip member")
        d = zlib.decompressobj(31)
        part = d.decompress(rest, 0 if bound is None else bound - total + 1)
        parts.append(part)
        total += len(part)
        if bound is not None and total > bound:
            break
        if not d.eof:
            raise CodecError("gzip stream is truncated")
        rest = d.unused_data
    return b"".join(parts)


def bunzip2(data: Any, bound: int | None) -> bytes:
    """bzip2 streams, one after another, as ``bz2.decompress`` reads them
    (bytes after the last stream that are not one are ignored)."""
    rest = bytes(data)
    return _streams(rest, bound, "bz2", bz2.BZ2Decompressor, OSError) if rest else b""


def unxz(data: Any, bound: int | None, fmt: int = lzma.FORMAT_AUTO, filters: Any = None) -> bytes:
    """xz / lzma streams, one after another, as ``lzma.decompress`` reads them.
    The decoder's dictionary is limited too (its size comes from the header)."""
    memlimit = None
    if bound is not None and fmt != lzma.FORMAT_RAW:  # raw streams take no limit
        memlimit = bound + _LZMA_MEMLIMIT_SLACK
    return _streams(
        bytes(data),
        bound,
        "lzma",
        lambda: lzma.LZMADecompressor(fmt, memlimit, filters),
        lzma.LZMAError,
    )


def _streams(
    rest: bytes, bound: int | None, name: str, decompressor: Any, error: type[Exception]
) -> bytes:
    """Streams of the module ``name`` (bz2, lzma), one after another, each read by a
    new ``decompressor()``, as that module's ``decompress`` reads them: bytes after
    the last stream that are not one are ignored; more than ``bound`` bytes out
    raise ``CodecError``, and so do a first stream that fails and a truncated one."""
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            d = decompressor()
            part = d.decompress(rest, _cap(bound, total))
        except error as e:
            if parts:
                break  # trailing bytes that are not a stream: ignored, as the module does
            raise CodecError(f"{name} decompression failed: {e}") from e
        total += len(part)
        if bound is not None and total > bound:
            raise _too_big(name, bound)
        parts.append(part)
        if not d.eof:
            raise CodecError(f"{name} stream is truncated")
        rest = d.unused_data
        if not rest:
            break
    return b"".join(parts)


def check_lz4_header(data: Any, size_hint: int | None, bound: int | None) -> None:
    """numcodecs' LZ4 chunks start with the decompressed size (4 bytes, little
    endian), which numcodecs allocates before decoding: refuse a size other than
    ``size_hint`` or above ``bound``."""
    mv = memoryview(data).cast("B")
    if len(mv) < 4:
        raise CodecError(f"lz4 chunk of {len(mv)} bytes is shorter than its header")
    n = int.from_bytes(mv[:4], "little", signed=True)
    if size_hint is not None and n != size_hint:
        raise CodecError(f"lz4 chunk holds {n} bytes, expected {size_hint}")
    if bound is not None and n > bound:
        raise CodecError(f"lz4 chunk declares {n} bytes, more than the {bound} allowed")


def decode_numcodec(codec: Any, data: Any, size_hint: int | None, bound: int | None) -> Any:
    """Decode ``data`` with the numcodecs compressor ``codec`` (its id in
    :data:`BOUNDED_NUMCODECS`) producing at most ``bound`` bytes."""
    cid = codec.codec_id
    if cid == "zlib":
        return inflate(data, bound)
    if cid == "gzip":
        return gunzip(data, bound)
    if cid == "bz2":
        return bunzip2(data, bound)
    if cid == "lzma":
        return unxz(data, bound, codec.format, codec.filters)
    if cid == "lz4":
        check_lz4_header(data, size_hint, bound)
        try:
            return codec.decode(data)
        except Exception as e:
            raise CodecError(f"lz4 decompression failed: {e}") from e
    raise ValueError(f"no bounded decoder for numcodecs {cid!r}")
