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


def _lay_out(datas, head):
    """``datas`` (bytes, or None: missing) laid out in one host buffer as a
    device read's staging places them (each first raw stream, ``head`` bytes
    in, 16-byte aligned), items 5 and 9 at odd offsets: ``(base, offsets,
    views)``, offset -1 and view None for a missing one."""
    offs, p = [], 0
    for j, d in enumerate(datas):
        if d is None:
            offs.append(-1)
            continue
        p = -(-p // 16) * 16 + (16 - head) % 16 + (3 if j in (5, 9) else 0)  # 5, 9: odd
        offs.append(p)
        p += len(d)
    base = np.zeros(p, np.uint8)
    for o, d in zip(offs, datas, strict=True):
        if d is not None:
            base[o : o + len(d)] = np.frombuffer(d, np.uint8)
    views = [None if d is None else memoryview(base)[o : o + len(d)]
             for o, d in zip(offs, datas, strict=True)]
    return base, offs, views


def _cpu_decoder(kind):
    """The pipeline's host decode of float32 chunks of ``kind`` (zstd: any frames;
    a corrupt chunk raises ``CodecError``)."""
    import lz4.block

    def cpu(data, shape):
        if kind == "zstd":
            try:
                dec = zstandard.ZstdDecompressor().stream_reader(
                    bytes(data), read_across_frames=True).read()
            except zstandard.ZstdError as e:
                raise CodecError(str(e)) from e
            return np.frombuffer(dec, "<f4").reshape(shape)
        if kind == "lz4":
            return np.frombuffer(lz4.block.decompress(bytes(data)), "<f4").reshape(shape)
        return np.frombuffer(bytes(data), "<f4").reshape(shape)

    return cpu


def _in_place_batch(kind, native_io, out_ptr):
    """A batch of 12 chunks of a 1-D float32 array lying in one host buffer, two
    at odd offsets, one missing, two that zstd's scan leaves to the per-chunk
    parsers; prepared with or without the C check."""
    import lz4.block

    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.batch import STREAM_HEAD, prepare_batch
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    n, c = 12 * 500, 500
    full = np.cumsum(np.random.default_rng(3).standard_normal(n)).astype("<f4")
    raws = [full[i * c : (i + 1) * c].tobytes() for i in range(12)]
    if kind == "zstd":
        datas = [zstandard.ZstdCompressor().compress(r) for r in raws]
        datas[4] = zstandard.ZstdCompressor(write_content_size=False).compress(raws[4])
        datas[6] = (zstandard.ZstdCompressor().compress(raws[6][:100])
                    + zstandard.ZstdCompressor().compress(raws[6][100:]))
    elif kind == "lz4":
        datas = [lz4.block.compress(r, store_size=True) for r in raws]
    else:
        datas = list(raws)
    datas[2] = None
    base, offs, views = _lay_out(datas, STREAM_HEAD[kind])
    sizes = [-1 if d is None else len(d) for d in datas]
    p = normalize_numpy((slice(None),), (n,), [DimGrid(n, c)])
    items = chunk_items(p.projections)
    out = np.zeros(n, "<f4")
    with cuzarr.config.set({"storage.native_io": native_io}):
        batch = prepare_batch(items, views, RegularChunkGrid((c,)).stored_chunk_shape,
                              out.shape, out.strides, np.dtype("<f4"), kind,
                              _cpu_decoder(kind), base=base,
                              base_offsets=offs, base_sizes=sizes,
                              out_ptr=out_ptr)
    return batch, full


@pytest.mark.parametrize("kind", ["zstd", "lz4", "none"])
@pytest.mark.parametrize("out_ptr", [None, 1 << 20, (1 << 20) + 4])
def test_prepare_batch_native_and_numpy_agree(kind, out_ptr):
    """prepare_batch's in-place check in C (``native.stream_rows``) makes the same
    stream rows, owners, plan rows (counts zeroed where a chunk decodes into
    the output) and host decodes as the numpy scan, and the host twin's run of
    it gives the data."""
    from cuzarr.gpu.batch import OUTPUT_ALIGN
    from cuzarr.gpu.executor import HostExecutor

    got = {io: _in_place_batch(kind, io, out_ptr) for io in (True, False)}
    (a, full), (b, _) = got[True], got[False]
    assert a.streams.keys() == b.streams.keys() and a.in_place == b.in_place
    for codec in a.streams:
        assert (a.streams[codec] == b.streams[codec]).all()
        assert (a.owners[codec] == b.owners[codec]).all()
    assert (a.plan.table == b.plan.table).all()
    assert [s for s, _ in a.host_decoded] == [s for s, _ in b.host_decoded]
    assert a.in_place == 11 - 2 * (kind == "zstd")  # missing; host-decoded
    codec = {"none": "copy"}.get(kind, kind)
    # into the output where it is aligned for the codec (zstd 8 bytes, lz4 4)
    assert a.streams[codec]["out"].any() == (
        out_ptr is not None and out_ptr % OUTPUT_ALIGN[codec] == 0)
    out = np.zeros_like(full)
    if out_ptr is None:
        HostExecutor().run(a, out, -1.0)
        ref = full.copy()
        ref[1000:1500] = -1.0
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("kind", ["zstd", "lz4"])
def test_stream_rows_checks_as_the_scan_does(kind):
    """``native.stream_rows`` takes exactly the chunks the numpy scan takes, over
    every single-byte change of a chunk's first 64 bytes and last 8, and its
    truncations."""
    import lz4.block

    from cuzarr.gpu.batch import STREAM_DTYPE

    raw = np.cumsum(np.random.default_rng(4).standard_normal(30000)).astype("<f4").tobytes()
    data = (zstandard.ZstdCompressor().compress(raw) if kind == "zstd"
            else lz4.block.compress(raw, store_size=True))
    variants = [data[:k] for k in range(0, len(data), max(1, len(data) // 50))]
    for i in [*range(min(64, len(data))), *range(len(data) - 8, len(data))]:
        for v in (0, 0xFF, data[i] ^ 0x08, data[i] ^ 0x80, data[i] ^ 0x20):
            b = bytearray(data)
            b[i] = v
            variants.append(bytes(b))
    variants += [data, data + b"\0"]
    buf, offs, lens = _batch(variants)
    expect = np.full(len(variants), len(raw), np.int64)
    with cuzarr.config.set({"storage.native_io": False, "codecs.zstd_system_library": False}):
        want = (scan.scan_zstd(buf, offs, lens, expect, MAX) if kind == "zstd"
                else scan.scan_lz4(buf, offs, lens, expect, MAX))
    slots = np.arange(len(variants), dtype=np.int64) * len(raw)
    _rows, owners, done = native.stream_rows(
        1 if kind == "zstd" else 2, 0, 1, MAX, buf, offs, lens, None, slots, expect, None, None,
        -1, 8, STREAM_DTYPE)
    assert (done == want).all() and want.any() and not want.all()
    assert owners.tolist() == np.flatnonzero(want).tolist()


# the chunks of a subset batch (as a shard's inner chunks are): out of order
_SUBSET = [7, 3, 12, 19, 0, 5, 6, 8, 15, 1, 18, 10]


def _window_batch(kind, out_ptr, lo, read_dims, corrupt=False, missing=None):
    """Chunks ``lo:lo + 12`` (``lo`` "subset": chunks ``_SUBSET``) of a 1-D
    float32 read of 20 chunks, present but for the batch's items ``missing``,
    lying in one host buffer (items 5 and 9 at odd offsets), prepared with the
    read's plan rows (``read_dims``)
    or without them; returns the batch, the data, those rows and the buffer."""
    import lz4.block

    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.batch import STREAM_HEAD, prepare_batch
    from cuzarr.gpu.plan import plan_read
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    n, c = 20 * 500, 500
    full = np.cumsum(np.random.default_rng(5).standard_normal(n)).astype("<f4")
    ids = _SUBSET if lo == "subset" else list(range(lo, lo + 12))
    raws = [full[i * c : (i + 1) * c].tobytes() for i in ids]
    if kind == "zstd":
        datas = [zstandard.ZstdCompressor().compress(r) for r in raws]
        datas[4] = zstandard.ZstdCompressor(write_content_size=False).compress(raws[4])
        if corrupt:  # the per-chunk parser's error, named by the chunk's key
            datas[7] = b"\x28\xb5\x2f\xfd" + bytes(40)
    elif kind == "lz4":
        datas = [lz4.block.compress(r, store_size=True) for r in raws]
    else:
        datas = list(raws)
    for k in missing or ():
        datas[k] = None
    base, offs, views = _lay_out(datas, STREAM_HEAD[kind])
    proj = normalize_numpy((slice(None),), (n,), [DimGrid(n, c)])
    every = chunk_items(proj.projections)
    out = np.zeros(n, "<f4")
    shape = RegularChunkGrid((c,)).stored_chunk_shape
    table = plan_read(every, shape, out.shape, out.strides, 4)
    items = every.subset(ids) if lo == "subset" else every.window(lo, lo + 12)
    batch = prepare_batch(items, views, shape, out.shape, out.strides, np.dtype("<f4"), kind,
                          _cpu_decoder(kind), base=base, base_offsets=np.array(offs, np.int64),
                          base_sizes=np.array([-1 if d is None else len(d) for d in datas],
                                              np.int64),
                          out_ptr=out_ptr, read_dims=table if read_dims else None,
                          names=[f"c/{i}" for i in ids])
    return batch, full, table, base


@pytest.mark.parametrize("kind", ["zstd", "lz4", "none"])
@pytest.mark.parametrize("out_ptr", [None, 1 << 20, (1 << 20) + 4])
@pytest.mark.parametrize("lo", [0, 5, "subset"])
def test_prepare_window_agrees_with_the_general_path(kind, out_ptr, lo, monkeypatch):
    """A window (or a subset) of a read's items, all present in the host buffer,
    is planned and checked in one C call (``native.window_rows``, its rows
    filled from the read's per-dimension rows): the same plan rows, slots,
    stream rows, owners and host decodes as the general path (the numpy table
    of the whole read); the host twin's run of it gives the data."""
    from cuzarr.gpu.executor import HostExecutor

    calls = []
    real = native.window_rows
    monkeypatch.setattr(native, "window_rows", lambda *a: calls.append(1) or real(*a))
    if kind == "zstd":
        for read_dims in (True, False):
            with pytest.raises(CodecError, match="c/" + str(
                    _SUBSET[7] if lo == "subset" else lo + 7)):
                _window_batch(kind, out_ptr, lo, read_dims, corrupt=True)
        assert len(calls) == 1
        calls.clear()
    a, full, _dims, base = _window_batch(kind, out_ptr, lo, True)
    assert calls, "the window path was not taken"
    b, *_ = _window_batch(kind, out_ptr, lo, False)
    assert len(calls) == 1  # (the general path does not call it)
    assert a.streams.keys() == b.streams.keys() and a.in_place == b.in_place
    for codec in a.streams:
        assert (a.streams[codec] == b.streams[codec]).all()
        assert (a.owners[codec] == b.owners[codec]).all()
    assert (a.plan.table == b.plan.table).all()
    assert a.plan.slots.tolist() == b.plan.slots.tolist()
    assert a.plan.slot_nbytes.tolist() == b.plan.slot_nbytes.tolist()
    assert a.plan.staging_nbytes == b.plan.staging_nbytes
    assert (a.plan.whole == b.plan.whole).all()
    assert [s for s, _ in a.host_decoded] == [s for s, _ in b.host_decoded]
    assert a.packed is base and a.in_place == 12 - (kind == "zstd")  # 4: no content size
    if out_ptr is None:
        out = np.zeros_like(full)
        HostExecutor().run(a, out, -1.0)
        ref = np.zeros_like(full)
        for i in _SUBSET if lo == "subset" else range(lo, lo + 12):
            ref[i * 500 : (i + 1) * 500] = full[i * 500 : (i + 1) * 500]
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("lo", [0, "subset"])
@pytest.mark.parametrize("missing", [[3], [0, 3, 11], list(range(12))])
def test_a_batch_with_missing_chunks_is_planned_in_one_call(lo, missing, monkeypatch):
    """Chunks missing from the batch (offset and size -1, as a local store's
    fetch reports them): ``window_rows`` plans the batch in one call, the
    missing chunks flagged for the fill value with no staging slot, as the
    general path plans them; the host twin's run gives the data and the fill."""
    from cuzarr.gpu.executor import HostExecutor
    from cuzarr.gpu.plan import FLAG_MISSING

    calls = []
    real = native.window_rows
    monkeypatch.setattr(native, "window_rows", lambda *a: calls.append(real(*a)) or calls[-1])
    a, full, *_ = _window_batch("zstd", None, lo, True, missing=missing)
    assert calls and calls[0] is not None, "the window path was not taken"
    b, *_ = _window_batch("zstd", None, lo, False, missing=missing)
    assert len(calls) == 1
    assert (a.plan.table == b.plan.table).all()
    assert a.plan.slots.tolist() == b.plan.slots.tolist()
    assert a.plan.slot_nbytes.tolist() == b.plan.slot_nbytes.tolist()
    assert a.plan.staging_nbytes == b.plan.staging_nbytes
    assert all(a.plan.table["flags"][missing] & FLAG_MISSING) and (a.plan.slots[missing] == -1).all()
    assert a.streams.keys() == b.streams.keys() and a.in_place == b.in_place
    for codec in b.streams:
        assert (a.streams[codec] == b.streams[codec]).all()
    ids = _SUBSET if lo == "subset" else list(range(12))
    out = np.zeros_like(full)
    HostExecutor().run(a, out, -1.0)
    ref = np.zeros_like(full)
    for k, i in enumerate(ids):
        ref[i * 500 : (i + 1) * 500] = -1.0 if k in missing else full[i * 500 : (i + 1) * 500]
    np.testing.assert_array_equal(out, ref)


def test_a_chunk_read_apart_takes_the_general_path():
    """A chunk whose bytes lie outside the batch's buffer (offset -1, a size:
    read as its own bytes) makes ``window_rows`` refuse the batch."""
    from cuzarr.gpu.batch import STREAM_DTYPE
    from cuzarr.gpu.plan import PLAN_DTYPE

    _, _, table, base = _window_batch("none", None, 0, True)
    offs, sizes = np.zeros(4, np.int64), np.zeros(4, np.int64)
    offs[2] = -1
    assert native.window_rows(0, 0, 1, MAX, base, offs, sizes, None, 0, None, table, -1, 8,
                              STREAM_DTYPE, PLAN_DTYPE) is None
    sizes[2] = -1  # missing, not apart: planned
    assert native.window_rows(0, 0, 1, MAX, base, offs, sizes, None, 0, None, table, -1, 8,
                              STREAM_DTYPE, PLAN_DTYPE) is not None


def test_window_rows_refuses_a_window_outside_the_read():
    """``window_rows`` checks the window against the read (a ValueError, nothing
    written past its arrays)."""
    from cuzarr.gpu.batch import STREAM_DTYPE
    from cuzarr.gpu.plan import PLAN_DTYPE

    _, _, table, base = _window_batch("none", None, 0, True)
    n = 20
    offs = np.zeros(4, np.int64)
    for lo in (-1, n - 3, n + 1):
        with pytest.raises(ValueError, match="window_rows"):
            native.window_rows(0, 0, 1, MAX, base, offs, offs, None, lo, None, table, -1, 8,
                               STREAM_DTYPE, PLAN_DTYPE)
    for bad in (-1, n):
        with pytest.raises(ValueError, match="window_rows"):
            native.window_rows(0, 0, 1, MAX, base, offs, offs, None, 0,
                               np.array([0, 1, bad, 2], np.int64), table, -1, 8, STREAM_DTYPE,
                               PLAN_DTYPE)


def test_stream_rows_walks_many_multi_block_frames_in_lanes():
    """``native.stream_rows`` walks the frames of a batch together (in lanes of
    up to 64, prefetching each round's block headers): over 150 frames of 1 to
    9 blocks, some truncated or with a block size changed, it takes exactly the
    frames that one-by-one walks (``native.zstd_frames``) take."""
    from cuzarr.gpu.batch import STREAM_DTYPE

    rng = np.random.default_rng(9)
    chunks, sizes = [], []
    for k in range(150):
        # incompressible blocks: a frame of n floats has about n * 4 / 128 KiB blocks
        raw = rng.integers(0, 255, int(rng.integers(1, 9 * 32768)) * 4, np.uint8).tobytes()
        data = bytearray(zstandard.ZstdCompressor(level=1).compress(raw))
        if k % 7 == 3:
            data = data[: len(data) - int(rng.integers(1, len(data)))]
        elif k % 11 == 5 and len(data) > 20:
            data[int(rng.integers(6, len(data)))] ^= 0x40
        chunks.append(bytes(data))
        sizes.append(len(raw))
    buf, offs, lens = _batch(chunks)
    expect = np.array(sizes, np.int64)
    one_by_one = native.zstd_frames(buf, offs, lens)
    want = (one_by_one[:, 0] == lens.astype(np.uint64)) & (one_by_one[:, 1] == expect)
    slots = np.cumsum(np.r_[0, expect[:-1]])
    _rows, owners, done = native.stream_rows(1, 0, 1, MAX, buf, offs, lens, None, slots,
                                              expect, None, None, -1, 8, STREAM_DTYPE)
    assert want.sum() > 100 and not want.all()
    assert done.tolist() == want.tolist()
    assert owners.tolist() == np.flatnonzero(want).tolist()
