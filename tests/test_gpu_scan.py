"""The vectorised header checks of a batch (``gpu.scan``) against the per-chunk
parsers of ``gpu.formats``: every chunk the scan accepts is one the parser
accepts with the same raw stream and size, valid single-frame chunks are
accepted, and corrupt ones (every single-byte change of headers, truncations)
are never accepted where the parser would raise."""

from __future__ import annotations

import numpy as np
import pytest
import zstandard

import cuzarr
from cuzarr.codecs import libzstd
from cuzarr.errors import CodecError
from cuzarr.gpu import formats, scan
from cuzarr.runtime import native

MAX = 16 << 20


@pytest.fixture(params=["native", "libzstd", "numpy"])
def walk(request):
    """Each zstd test runs with every block walk: cuzarr's C loop
    (cuzarr.runtime.native), the system libzstd's and the numpy one (the only
    one where neither is there)."""
    with cuzarr.config.set({"storage.native_io": request.param == "native",
                            "codecs.zstd_system_library": request.param == "libzstd"}):
        if request.param == "native" and not native.available():
            pytest.fail("cuzarr.runtime._native is not built (setup.py)")
        if request.param == "libzstd" and not libzstd.available():
            pytest.skip("no system libzstd on this machine")
        yield request.param


def _batch(chunks):
    offs, p = [], 0
    for c in chunks:
        p += 3  # odd offsets: the scan takes chunks wherever they lie
        offs.append(p)
        p += len(c)
    buf = np.zeros(p + 5, np.uint8)
    for o, c in zip(offs, chunks, strict=True):
        buf[o : o + len(c)] = np.frombuffer(c, np.uint8)
    return buf, np.array(offs, np.int64), np.array([len(c) for c in chunks], np.int64)


def _zstd_chunks():
    rng = np.random.default_rng(1)
    raw = [np.cumsum(rng.standard_normal(n)).round(1).astype("<f4").tobytes()
           for n in (1, 100, 40000, 300000)] + [bytes(70000), b""]
    out = []
    for r in raw:
        for kw in ({"level": 1}, {"level": 3, "write_checksum": True}):
            out.append((zstandard.ZstdCompressor(**kw).compress(r), len(r)))
    # no content size in the header: not for nvCOMP
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    out.append((cctx.compress(raw[2]), len(raw[2])))
    # two frames in one chunk: valid zstd, decoded on the host
    two = zstandard.ZstdCompressor().compress(raw[1][:200]) + zstandard.ZstdCompressor().compress(
        raw[1][200:])
    out.append((two, len(raw[1])))
    return out


def _per_chunk_zstd(data, expect):
    try:
        st = formats.parse_zstd(data, expect)
    except CodecError:
        return None
    if formats.zstd_frame_info(data).content_size is None:
        return None
    return st


def _check(kind, chunks):
    buf, offs, lens = _batch([c for c, _ in chunks])
    expect = np.array([n for _, n in chunks], np.int64)
    if kind == "zstd":
        ok = scan.scan_zstd(buf, offs, lens, expect, MAX)
    else:
        ok = scan.scan_lz4(buf, offs, lens, expect, MAX)
    for (c, n), accepted in zip(chunks, ok.tolist(), strict=True):
        if kind == "zstd":
            st = _per_chunk_zstd(c, n)
        else:
            try:
                st = formats.parse_lz4(c, n)
            except CodecError:
                st = None
        if accepted:
            assert st is not None and st.decoded_size == n
    return ok


def test_scan_zstd_accepts_what_the_parser_takes(walk):
    chunks = _zstd_chunks()
    ok = _check("zstd", chunks)
    # single frames with a content size are all taken; the last two are not
    assert ok[:-2].all() and not ok[-2:].any()
    # a wrong expected size is refused
    buf, offs, lens = _batch([chunks[2][0]])
    assert not scan.scan_zstd(buf, offs, lens, np.array([chunks[2][1] + 4]), MAX).any()
    assert not scan.scan_zstd(buf, offs, lens, np.array([chunks[2][1]]), 16).any()


@pytest.mark.parametrize("which", [2, 5, 7])
def test_scan_zstd_corruptions(which, walk):
    """Every single-byte change in the first 64 bytes and the last 8, and every
    truncation: whatever the scan accepts, the parser accepts too."""
    data, n = _zstd_chunks()[which]
    variants = []
    for i in [*range(min(64, len(data))), *range(max(0, len(data) - 8), len(data))]:
        for v in (0, 0xFF, data[i] ^ 0x08, data[i] ^ 0x80):
            b = bytearray(data)
            b[i] = v
            variants.append((bytes(b), n))
    variants += [(data[:k], n) for k in range(0, len(data), max(1, len(data) // 50))]
    variants += [(data + b"\0", n), (data + data, n)]
    ok = _check("zstd", variants)
    assert not ok[-2:].any()


@pytest.mark.parametrize("which", [2, 5, 7])
def test_scan_zstd_native_and_numpy_agree(which):
    """The C walk (each frame header read once, in C) and the numpy scan take
    the same chunks of every corrupted variant."""
    data, n = _zstd_chunks()[which]
    variants = [data[:k] for k in range(0, len(data), max(1, len(data) // 50))]
    for i in [*range(min(64, len(data))), *range(max(0, len(data) - 8), len(data))]:
        for v in (0, 0xFF, data[i] ^ 0x08, data[i] ^ 0x80, data[i] ^ 0x20):
            b = bytearray(data)
            b[i] = v
            variants.append(bytes(b))
    buf, offs, lens = _batch(variants)
    expect = np.full(len(variants), n, np.int64)
    masks = {}
    for walker in ("native", "numpy"):
        with cuzarr.config.set({"storage.native_io": walker == "native",
                                "codecs.zstd_system_library": False}):
            masks[walker] = scan.scan_zstd(buf, offs, lens, expect, MAX)
    assert (masks["native"] == masks["numpy"]).all() and masks["numpy"].any()


def test_scan_lz4():
    import lz4.block

    rng = np.random.default_rng(2)
    chunks = []
    for size in (0, 1, 1000, 200000):
        raw = rng.integers(0, 4, size, np.uint8).tobytes()
        chunks.append((lz4.block.compress(raw, store_size=True), size))
    bad = [(c[:3], n) for c, n in chunks] + [(c, n + 1) for c, n in chunks]
    bad += [(c[:4], n) for c, n in chunks if n]
    ok = _check("lz4", chunks + bad)
    assert ok[: len(chunks)].all() and not ok[len(chunks):].any()


def test_scan_copy_and_empty_buffer(walk):
    assert scan.scan_copy(np.array([0, 8]), np.array([8, 7]), np.array([8, 8])).tolist() == [
        True, False]
    empty = np.zeros(0, np.uint8)
    z = np.zeros(1, np.int64)
    assert not scan.scan_zstd(empty, z, z, z, MAX).any()
    assert not scan.scan_lz4(empty, z, z, z + 1, MAX).any()
