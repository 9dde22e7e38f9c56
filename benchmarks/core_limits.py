"""bench_core.py's "limit" reference rows: raw codec throughput on all cores,
no Zarr machinery."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from core_common import (
    ASSEMBLE,
    CHUNKS,
    DTYPE,
    SHARD_INNER,
    TINY_CHUNKS,
    split_chunks,
    tiny_source,
)
from core_measure import Meter


def _codec_factories(kind: str):
    if kind == ASSEMBLE:
        # the fastest decode binding on hand (the one cuzarr uses by default)
        try:
            return _libzstd_factories()
        except (OSError, AttributeError):
            kind = "limit:numcodecs"
    if kind == "limit:numcodecs":
        import numcodecs

        def enc():
            return numcodecs.Zstd(level=1).encode

        def dec():
            return numcodecs.Zstd().decode

        return enc, dec, {"module": "numcodecs", "version": numcodecs.__version__}
    if kind == "limit:libzstd":
        return _libzstd_factories()
    import zstandard

    def enc():
        return zstandard.ZstdCompressor(level=1).compress

    def dec():
        d = zstandard.ZstdDecompressor()
        return d.decompress

    return enc, dec, {"module": "zstandard", "version": zstandard.__version__}


def _libzstd_factories():
    """The system's libzstd through ctypes, one context and one reused output
    buffer per thread: what a binding that decodes in place can reach."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.ZSTD_createDCtx.restype = vp
    lib.ZSTD_createCCtx.restype = vp
    lib.ZSTD_decompressDCtx.restype = sz
    lib.ZSTD_decompressDCtx.argtypes = [vp, vp, sz, vp, sz]
    lib.ZSTD_compressCCtx.restype = sz
    lib.ZSTD_compressCCtx.argtypes = [vp, vp, sz, vp, sz, ctypes.c_int]
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_getFrameContentSize.argtypes = [vp, sz]
    lib.ZSTD_compressBound.restype = sz
    lib.ZSTD_compressBound.argtypes = [sz]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [sz]
    lib.ZSTD_versionString.restype = ctypes.c_char_p

    def addr(b):
        a = b if isinstance(b, np.ndarray) else np.frombuffer(b, dtype=np.uint8)
        return a.ctypes.data, a.nbytes

    def enc():
        ctx = lib.ZSTD_createCCtx()
        buf = np.empty(0, np.uint8)

        def f(c):
            nonlocal buf
            p, n = addr(c)
            cap = lib.ZSTD_compressBound(n)
            if buf.nbytes < cap:
                buf = np.empty(cap, np.uint8)
            r = lib.ZSTD_compressCCtx(ctx, buf.ctypes.data, cap, p, n, 1)
            if lib.ZSTD_isError(r):
                raise RuntimeError("ZSTD_compressCCtx failed")
            return buf[:r].tobytes()  # callers keep them, as the others' bytes

        return f

    def dec():
        ctx = lib.ZSTD_createDCtx()
        buf = np.empty(0, np.uint8)

        def f(b, out=None):
            nonlocal buf
            p, n = addr(b)
            size = lib.ZSTD_getFrameContentSize(p, n)
            if out is not None:
                dst = out.reshape(-1).view(np.uint8)
            else:
                if buf.nbytes < size:
                    buf = np.empty(size, np.uint8)
                dst = buf[:size]
            r = lib.ZSTD_decompressDCtx(ctx, dst.ctypes.data, dst.nbytes, p, n)
            if lib.ZSTD_isError(r) or r != size:
                raise RuntimeError("ZSTD_decompressDCtx failed")
            return memoryview(dst)[:r]

        return f

    return enc, dec, {"module": "libzstd (ctypes)", "version": lib.ZSTD_versionString().decode()}


def _run_sliced(items: list, make_fn, per_item, nthreads: int) -> int:
    """Split ``items`` into ``nthreads`` slices; one thread loops over each slice."""
    slices = [items[i::nthreads] for i in range(nthreads)]

    def work(sl):
        fn = make_fn()
        total = 0
        for it in sl:
            total += per_item(fn, it)
        return total

    with ThreadPoolExecutor(nthreads) as ex:
        return sum(ex.map(work, slices))


def _decode_len(fn, b) -> int:
    return len(fn(b))


def _read_decode_len(fn, path) -> int:
    with open(path, "rb") as f:
        return len(fn(f.read()))




def _read_shard_decode_len(fn, path, n_inner: int) -> int:
    """Read one shard file, parse its index (at the end: n x (offset, nbytes) uint64
    LE + crc32c), decode every stored inner chunk."""
    with open(path, "rb") as f:
        buf = f.read()
    idx = np.frombuffer(buf, "<u8", count=2 * n_inner, offset=len(buf) - 16 * n_inner - 4)
    mv = memoryview(buf)
    total = 0
    for off, nb in idx.reshape(n_inner, 2).tolist():
        if off != 2**64 - 1:
            total += len(fn(mv[off : off + nb]))
    return total


# --------------------------------------------------------------------------
# worker (one measurement -- or, with --isolation contender, all of one
# contender's workloads -- in one process)
# --------------------------------------------------------------------------


def _limit_unit(kind: str, unit: str, spec: dict[str, Any], meter: Meter, res: dict) -> None:
    mk_enc, mk_dec, _ = _codec_factories(kind)
    shape = tuple(spec["shape"])
    nthreads = os.cpu_count() or 1
    if unit == "write" and kind == ASSEMBLE:
        data = np.load(spec["source"])
        store = Path(spec["store"])  # set aside before this process, as for the libraries
        with meter.measure("write"):
            nbytes = _store_chunks(data, store, mk_enc, nthreads)
        res["stored_bytes"]["write"] = nbytes
    elif unit == "write":
        chunks = split_chunks(np.load(spec["source"]), CHUNKS)
        with meter.measure("write"):
            nbytes = _run_sliced(chunks, mk_enc, _decode_len, nthreads)
        res["stored_bytes"]["write"] = nbytes
    elif unit == "read" and kind == ASSEMBLE:
        cdir = Path(spec["chunk_dir"])
        files = sorted(
            (p, tuple(int(x) for x in p.relative_to(cdir).parts))
            for p in cdir.rglob("*")
            if p.is_file()
        )
        with meter.measure("read"):
            out = _assemble(files, shape, mk_dec, nthreads)
        if spec.get("verify"):
            res["verified"]["read"] = bool(
                np.array_equal(out, np.load(spec["source"], mmap_mode="r"))
            )
        res["info"]["chunk_dir"] = spec["chunk_dir"]
        del out
        res["info"]["first_touch_s"] = _first_touch(shape, nthreads)
    elif unit == "read":
        files = sorted(p for p in Path(spec["chunk_dir"]).rglob("*") if p.is_file())
        with meter.measure("read"):
            nbytes = _run_sliced(files, mk_dec, _read_decode_len, nthreads)
        # edge chunks are stored whole (padded): every chunk decodes to CHUNKS
        n_chunks = int(np.prod([-(-n // c) for n, c in zip(shape, CHUNKS)]))
        res["verified"]["read"] = nbytes == n_chunks * int(np.prod(CHUNKS)) * 2
        res["info"]["chunk_dir"] = spec["chunk_dir"]
    elif unit == "shard-read":
        files = sorted(p for p in Path(spec["shard_dir"]).rglob("*") if p.is_file())
        n_inner = int(np.prod([s // c for s, c in zip(spec["shard_shape"], SHARD_INNER)]))

        def per_file(fn, path):
            return _read_shard_decode_len(fn, path, n_inner)

        with meter.measure("shard-read"):
            nbytes = _run_sliced(files, mk_dec, per_file, nthreads)
        # inner chunks are padded at the array edge, and all-fill ones may be absent
        res["verified"]["shard-read"] = nbytes >= int(np.prod(shape)) * 2 * 0.99
        res["info"]["shard_dir"] = spec["shard_dir"]
    elif unit == "tiny":  # encode then decode, chunks held in memory
        tshape = tuple(spec["tiny_shape"])
        chunks = split_chunks(tiny_source(tshape), TINY_CHUNKS)
        out: list[Any] = [None] * nthreads

        def enc_slice(k):
            fn = mk_enc()
            out[k] = [fn(c) for c in chunks[k::nthreads]]

        with meter.measure("tiny-write"), ThreadPoolExecutor(nthreads) as ex:
            list(ex.map(enc_slice, range(nthreads)))
        comp = [c for part in out for c in part]
        with meter.measure("tiny-read"):
            nbytes = _run_sliced(comp, mk_dec, _decode_len, nthreads)
        res["verified"]["tiny-read"] = nbytes == int(np.prod(tshape)) * 2
        res["stored_bytes"]["tiny-write"] = sum(len(c) for c in comp)
    else:
        raise ValueError(f"no limit row for {unit}")


def _store_chunks(data: np.ndarray, store: Path, mk_enc, nthreads: int) -> int:
    """What any writer of the big array must do, on all cores, with no Zarr machinery:
    copy each chunk out of the source, encode it (as limit:libzstd), and write it to
    its own file under ``store`` (a temporary file renamed into place, as cuzarr's
    LocalStore writes; no fsync, as nobody fsyncs here)."""
    c0, c1 = CHUNKS
    keys = [(i, j) for i in range(-(-data.shape[0] // c0)) for j in range(-(-data.shape[1] // c1))]
    for i in {i for i, _ in keys}:
        (store / "c" / str(i)).mkdir(parents=True, exist_ok=True)

    def work(sl):
        enc = mk_enc()
        total = 0
        for i, j in sl:
            blob = enc(np.ascontiguousarray(data[i * c0 : (i + 1) * c0, j * c1 : (j + 1) * c1]))
            path = store / "c" / str(i) / str(j)
            tmp = path.with_name(f".{j}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, path)
            total += len(blob)
        return total

    with ThreadPoolExecutor(nthreads) as ex:
        return sum(ex.map(work, [keys[k::nthreads] for k in range(nthreads)]))


def _first_touch(shape: tuple[int, ...], nthreads: int) -> float:
    """Seconds to write zeros into a fresh array of ``shape`` on all cores: the kernel's
    zeroing of its new pages, which no full read into fresh memory escapes."""
    warm = np.ones(int(np.prod(shape)) * 2 * 5 // 4, dtype=np.uint8)  # as Meter does
    del warm
    t0 = time.perf_counter()
    flat = np.empty(shape, dtype=DTYPE).reshape(-1)
    n = flat.size

    def touch(k):
        flat[k * n // nthreads : (k + 1) * n // nthreads] = 0

    with ThreadPoolExecutor(nthreads) as ex:
        list(ex.map(touch, range(nthreads)))
    return time.perf_counter() - t0


def _assemble(files: list, shape: tuple[int, ...], mk_dec, nthreads: int) -> np.ndarray:
    """Read and decode every chunk file on all cores (as limit:libzstd does), each
    into a per-thread buffer, and copy it into its place in a fresh output array."""
    out = np.empty(shape, dtype=DTYPE)
    c0, c1 = CHUNKS

    def work(sl):
        dec = mk_dec()
        tmp = np.empty(CHUNKS, dtype=DTYPE)
        for path, (i, j) in sl:
            with open(path, "rb") as f:
                dec(f.read(), out=tmp)
            dst = out[i * c0 : (i + 1) * c0, j * c1 : (j + 1) * c1]
            dst[...] = tmp[: dst.shape[0], : dst.shape[1]]

    with ThreadPoolExecutor(nthreads) as ex:
        list(ex.map(work, [files[k::nthreads] for k in range(nthreads)]))
    return out
