"""Decoding of large zstd frames into a caller's buffer through the system's
libzstd, when one is found (ctypes, no build step).

Why: on the reference machine Debian's libzstd 1.5.4 decodes the benchmark's
1 MiB chunks ~5% faster than the copy numcodecs bundles (1.5.7), and lets each
thread keep one decompression context. numcodecs stays the fallback, and the
only path when ``codecs.zstd_system_library`` is off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import flag
from ..errors import CodecError

__all__ = [
    "available",
    "decompress_function",
    "decompress_into",
    "decompress_to_address",
    "first_frame_sizes",
    "frame_size_at",
]

_MIN_VERSION = 10500  # 1.5.0: the oldest release this binding was checked against
_tls = threading.local()
_lib: Any = None
_loaded = False
_lock = threading.Lock()


def _candidates() -> list[str]:
    if sys.platform == "darwin":
        return ["libzstd.1.dylib", "libzstd.dylib"]
    if sys.platform == "win32":
        return ["zstd.dll", "libzstd.dll"]
    return ["libzstd.so.1", "libzstd.so"]


def _load() -> Any:
    global _lib, _loaded
    with _lock:
        if _loaded:
            return _lib
        lib = None
        for name in _candidates():
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            found = ctypes.util.find_library("zstd")
            if found:
                try:
                    lib = ctypes.CDLL(found)
                except OSError:
                    lib = None
        if lib is not None:
            try:
                lib.ZSTD_versionNumber.restype = ctypes.c_uint
                if lib.ZSTD_versionNumber() < _MIN_VERSION:
                    lib = None
                else:
                    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
                    lib.ZSTD_createDCtx.argtypes = []
                    lib.ZSTD_freeDCtx.restype = ctypes.c_size_t
                    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
                    lib.ZSTD_decompressDCtx.restype = ctypes.c_size_t
                    lib.ZSTD_decompressDCtx.argtypes = [
                        ctypes.c_void_p,
                        ctypes.c_void_p,
                        ctypes.c_size_t,
                        ctypes.c_void_p,
                        ctypes.c_size_t,
                    ]
                    lib.ZSTD_isError.restype = ctypes.c_uint
                    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
                    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
                    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
                    lib.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
                    lib.ZSTD_findFrameCompressedSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            except AttributeError:
                lib = None
        _lib = lib
        _loaded = True
        return lib


class _DCtx:
    """One thread's decompression context, freed with the thread's locals."""

    __slots__ = ("lib", "ptr")

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.ptr = lib.ZSTD_createDCtx()
        if not self.ptr:
            raise MemoryError("ZSTD_createDCtx failed")

    def __del__(self) -> None:
        if self.ptr:
            self.lib.ZSTD_freeDCtx(self.ptr)
            self.ptr = None


def _context(lib: Any) -> _DCtx:
    """The calling thread's decompression context (made on first use)."""
    ctx = getattr(_tls, "dctx", None)
    if ctx is None:
        ctx = _tls.dctx = _DCtx(lib)
    return ctx


def available() -> bool:
    """Whether a usable system libzstd was found (and the config allows it)."""
    if not flag("codecs.zstd_system_library", True):
        return False
    return (_lib if _loaded else _load()) is not None  # no lock once loaded


def decompress_into(src: Any, dst: np.ndarray) -> int:
    """Decompress the zstd frame(s) in ``src`` into the C-contiguous, writable
    ``dst``; the number of bytes written. Raises ``CodecError`` on corrupt input
    or when the output does not fit."""
    lib = _lib if _loaded else _load()
    ctx = _context(lib)
    # Raw pointers go to C: only contiguous memory, and a destination we may write.
    if not (isinstance(dst, np.ndarray) and dst.flags.c_contiguous and dst.flags.writeable):
        raise CodecError("zstd output must be a writable, C-contiguous numpy array")
    try:
        mv = memoryview(src)
    except (TypeError, ValueError) as e:
        raise CodecError(f"zstd input is not a buffer: {e}") from e
    if not mv.c_contiguous:
        raise CodecError("zstd input must be contiguous memory")
    # The array keeps the buffer exported (a bytearray cannot be resized, an
    # mmap not closed) while the call runs without the GIL. Addresses through
    # __array_interface__: ndarray.ctypes builds a Python object per call.
    s = np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv, dtype=np.uint8)
    ret = lib.ZSTD_decompressDCtx(ctx.ptr, dst.__array_interface__["data"][0], dst.nbytes,
                                  s.__array_interface__["data"][0], s.nbytes)
    if lib.ZSTD_isError(ret):
        name = lib.ZSTD_getErrorName(ret).decode("ascii", "replace")
        raise CodecError(f"zstd decompression failed: {name}")
    return int(ret)


def decompress_to_address(src: Any, address: int, capacity: int) -> int:
    """Decompress the zstd frame(s) in ``src`` (``bytes``, or any contiguous
    buffer of bytes) into the ``capacity`` bytes of writable memory at
    ``address``, which the caller keeps alive; the number of bytes written.
    The short call path of :func:`decompress_into`, for chunks decoded into a
    buffer the caller reuses (about 4 us less a call: 6.7 against 11.0 us for a
    2 KiB chunk; no ``ZSTD_isError`` call unless the result exceeds
    ``capacity``, which every error code does). Raises ``CodecError`` on
    corrupt input or when the output does not fit."""
    lib = _lib if _loaded else _load()
    ctx = _context(lib)
    if type(src) is bytes:
        ret = lib.ZSTD_decompressDCtx(ctx.ptr, address, capacity, src, len(src))
    else:
        try:
            s = np.frombuffer(src, dtype=np.uint8)  # keeps the buffer exported
        except (TypeError, ValueError, BufferError) as e:
            raise CodecError(f"zstd input is not a contiguous buffer: {e}") from e
        ret = lib.ZSTD_decompressDCtx(ctx.ptr, address, capacity,
                                      s.__array_interface__["data"][0], s.nbytes)
    if ret > capacity and lib.ZSTD_isError(ret):
        name = lib.ZSTD_getErrorName(ret).decode("ascii", "replace")
        raise CodecError(f"zstd decompression failed: {name}")
    return int(ret)


def decompress_function() -> tuple[int, int]:
    """The addresses of libzstd's ``ZSTD_decompressDCtx`` and of the calling
    thread's decompression context, for C code that decodes many frames
    without the GIL (``cuzarr.runtime.native.zstd_decode_into``); the context
    lives as long as the thread. Call only when :func:`available`."""
    lib = _lib if _loaded else _load()
    ctx = _context(lib)
    fn = ctypes.cast(lib.ZSTD_decompressDCtx, ctypes.c_void_p).value
    return int(fn or 0), int(ctx.ptr)


def first_frame_sizes(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The stored size of the first zstd frame of each of the byte ranges
    ``buf[offs[i] : offs[i] + lens[i]]`` (``int64``; -1 where libzstd finds no
    whole frame there): libzstd walks the frame's block headers (reserved block
    types, blocks overrunning the range, the last block and the checksum), in C
    and without the GIL, one call per range (~0.5 us for a 1 MiB chunk).

    ``buf`` is a C-contiguous ``uint8`` array, every range inside it (checked:
    ``ValueError`` otherwise); call only when :func:`available`."""
    lib = _lib if _loaded else _load()
    if not (isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and buf.flags.c_contiguous):
        raise ValueError("zstd frames must lie in a C-contiguous uint8 array")
    offs = np.asarray(offs, np.int64)
    lens = np.asarray(lens, np.int64)
    if len(offs) and (offs.min() < 0 or lens.min() < 0 or (offs + lens).max() > len(buf)):
        raise ValueError("zstd frame range outside its buffer")
    find = lib.ZSTD_findFrameCompressedSize
    base = buf.__array_interface__["data"][0]
    sizes = [find(base + o, n) for o, n in zip(offs.tolist(), lens.tolist(), strict=True)]
    out = np.array(sizes, np.uint64)
    # errors are the largest size_t values: any size beyond its range is one,
    # so no ZSTD_isError call per range is needed
    bad = out > lens.astype(np.uint64)
    res = out.astype(np.int64)
    res[bad] = -1
    return res


def frame_size_at() -> Callable[[int, int], int]:
    """libzstd's ``ZSTD_findFrameCompressedSize`` as ``find(address, n)``: the
    stored size of the first zstd frame in the ``n`` bytes at ``address``
    (memory the caller keeps alive), an error code (larger than any ``n``)
    where there is no whole frame; for callers that walk each chunk as it is
    read (:func:`first_frame_sizes` walks a batch). Call only when
    :func:`available`."""
    lib = _lib if _loaded else _load()
    return lib.ZSTD_findFrameCompressedSize  # type: ignore[no-any-return]
