"""cuzarr.runtime.native (the C loops of a batch read) against Python's own
answers: os.open/os.pread on real files, the numpy zstd walk of gpu.scan, and
LocalStore's get_into with the C loops off (storage.native_io)."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import zstandard

import cuzarr
from cuzarr.gpu import scan
from cuzarr.runtime import native
from cuzarr.storage import LocalStore

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the C loops are POSIX only")


@pytest.fixture(autouse=True)
def built():
    if native._c is None:
        pytest.fail("cuzarr.runtime._native is not built (setup.py)")


def _files(tmp_path, sizes):
    rng = np.random.default_rng(0)
    paths, blobs = [], []
    for i, n in enumerate(sizes):
        p = tmp_path / f"f{i}"
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        p.write_bytes(b)
        paths.append(str(p))
        blobs.append(b)
    return paths, blobs


def test_open_sized_answers_like_os(tmp_path):
    paths, _ = _files(tmp_path, [0, 1, 5000])
    (tmp_path / "dir").mkdir()
    os.symlink(paths[2], tmp_path / "link")
    asked = [*paths, None, str(tmp_path / "missing"), str(tmp_path / "link"),
             str(tmp_path / "dir")]
    fds, sizes, flags = native.open_sized(asked)
    try:
        assert flags == native.OPEN_SKIPPED | native.OPEN_UNSIZED
        assert sizes[:3].tolist() == [0, 1, 5000] and (fds[:3] >= 0).all()
        assert fds[3] == -1 and sizes[3] == -1  # skipped
        assert fds[4] == -errno.ENOENT and sizes[4] == -1
        assert fds[5] == -errno.ELOOP  # a final symlink is not followed
        assert fds[6] >= 0 and sizes[6] == -1  # opened, but no regular file's size
    finally:
        native.close_fds(fds)
    assert (fds < 0).all() and fds[:3].tolist() == [-1, -1, -1]  # closed and forgotten
    # the flags say what the arrays hold, whichever item it is
    for one, expect in ((paths, 0), ([*paths, None], 3), ([None, *paths], 3),
                        ([str(tmp_path / "missing"), *paths], native.OPEN_UNSIZED),
                        ([*paths, str(tmp_path / "dir")], native.OPEN_UNSIZED), ([], 0)):
        fds, sizes, flags = native.open_sized(one)
        native.close_fds(fds)
        assert flags == expect, one


def test_open_sized_with_known_paths(tmp_path):
    """With a dict of checked paths, items are its keys: a key found stands for
    its path, anything else (unknown, not a str, a str subclass) is skipped."""

    class Key(str):
        pass

    paths, _ = _files(tmp_path, [3, 4])
    known = {"a/0": paths[0], "a/1": paths[1], "odd": 7}
    fds, sizes, flags = native.open_sized(["a/1", "a/9", None, Key("a/0"), "odd", "a/0"],
                                          known)
    try:
        assert flags == native.OPEN_SKIPPED | native.OPEN_UNSIZED
        assert sizes.tolist() == [4, -1, -1, -1, -1, 3]
        assert fds.tolist()[1:5] == [-1] * 4 and fds[0] >= 0 and fds[5] >= 0
    finally:
        native.close_fds(fds)
    with pytest.raises(TypeError):
        native.open_sized(["a/0"], known=["not", "a", "dict"])


def test_read_placed_reads_each_file_into_its_place(tmp_path):
    paths, blobs = _files(tmp_path, [10, 0, 3000, 7])
    fds, sizes, flags = native.open_sized(paths)
    assert flags == 0
    buf = np.zeros(4000, np.uint8)
    offs = np.array([0, 16, 32, 3995], np.int64)  # the last does not fit
    try:
        got, count = native.read_placed(fds, sizes, offs, buf)
    finally:
        native.close_fds(fds)
    assert got.tolist() == [True, True, True, False] and count == 3
    for b, at, ok in zip(blobs, offs.tolist(), got.tolist(), strict=True):
        if ok:
            assert buf[at : at + len(b)].tobytes() == b
    assert not buf[3995:].any()


def test_read_placed_reports_a_short_read(tmp_path):
    """A file that shrank between its sizing and its read is not taken."""
    paths, _ = _files(tmp_path, [100, 100])
    fds, sizes, _ = native.open_sized(paths)
    try:
        os.truncate(paths[1], 50)
        got, count = native.read_placed(fds, sizes, np.array([0, 128], np.int64),
                                        np.zeros(256, np.uint8))
    finally:
        native.close_fds(fds)
    assert got.tolist() == [True, False] and count == 1


def _frames():
    rng = np.random.default_rng(3)
    raw = [np.cumsum(rng.standard_normal(n)).round(1).astype("<f4").tobytes()
           for n in (0, 1, 100, 40000, 300000)] + [bytes(300000)]
    out = []
    for r in raw:
        for kw in ({"level": 1}, {"level": 5, "write_checksum": True},
                   {"write_content_size": False}, {"level": -5}):
            out.append(zstandard.ZstdCompressor(**kw).compress(r))
    return out


def _numpy_walk(data: bytes) -> int:
    """gpu.scan's numpy walk of one frame: its end, or -1."""
    buf = np.frombuffer(data + b"\0" * 8, np.uint8)
    fhd = data[4] if len(data) > 4 else 0
    single = (fhd >> 5) & 1
    fcs = [single, 2, 4, 8][fhd >> 6]
    first = 5 + (1 - single) + [0, 1, 2, 4][fhd & 3] + fcs
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd" or first > len(data):
        return -1
    ok = np.ones(1, bool)
    end = scan._walk_blocks(scan._words(buf, "<u4"), np.array([first]),
                            np.array([len(data)]), ok)
    if not ok[0]:
        return -1
    end = int(end[0]) + 4 * ((fhd >> 2) & 1)
    return end if end <= len(data) else -1


def _content(data: bytes) -> int:
    """The content size of the frame header at ``data`` where nvCOMP may take
    it, read here in Python (-1: bad magic, cut short, no content size field,
    a dictionary id or the reserved bit)."""
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd":
        return -1
    fhd = data[4]
    single = (fhd >> 5) & 1
    fcs = [single, 2, 4, 8][fhd >> 6]
    start = 5 + (1 - single) + [0, 1, 2, 4][fhd & 3]
    if start + fcs > len(data) or fcs == 0 or fhd & 0x08 or fhd & 3:
        return -1
    return int.from_bytes(data[start : start + fcs], "little") + (256 if fcs == 2 else 0)


def test_zstd_walk_agrees_with_numpy_and_libzstd():
    """Valid frames (raw, RLE and compressed blocks, checksums, no content
    size, several frames) and every corruption of their headers: the C walk
    gives the numpy walk's frame size, and the content size a Python parse of
    the frame header gives."""
    cases = []
    for f in _frames():
        cases.append(f)
        cases.append(f + f)  # the first frame's size
        cases += [f[:k] for k in range(0, len(f), max(1, len(f) // 20))]
        for i in range(min(len(f), 24)):
            for v in (0, 0xFF, f[i] ^ 0x06, f[i] ^ 0x80):
                b = bytearray(f)
                b[i] = v
                cases.append(bytes(b))
    blob = b"".join(cases)
    offs = np.cumsum([0] + [len(c) for c in cases[:-1]]).astype(np.int64)
    lens = np.array([len(c) for c in cases], np.int64)
    walked = native.zstd_frames(np.frombuffer(blob, np.uint8), offs, lens).view(np.int64)
    got = walked[:, 0]
    assert got.tolist() == [_numpy_walk(c) for c in cases]
    assert walked[:, 1].tolist() == [_content(c) for c in cases]
    from cuzarr.codecs import libzstd

    if libzstd.available():  # the same frame sizes where both walk through
        ref = libzstd.first_frame_sizes(np.frombuffer(blob, np.uint8), offs, lens)
        both = (got >= 0) & (ref >= 0)
        assert (got[both] == ref[both]).all() and both.sum() > len(cases) // 4


def test_zstd_walk_refuses_a_block_over_128k_and_items_outside():
    """A block header claiming more than 128 KiB (which libzstd's own walk
    lets through) is refused, and an item outside the buffer is not read."""
    head = b"\x28\xb5\x2f\xfd" + bytes([0x20])  # single segment, 1-byte content size
    block = ((200000 << 3) | 1).to_bytes(3, "little")  # last, raw, 200,000 bytes
    data = head + b"\x10" + block + bytes(200000)
    buf = np.frombuffer(data, np.uint8)
    out = native.zstd_frames(buf, np.array([0, 0], np.int64),
                             np.array([len(data), len(data) + 1], np.int64))
    assert (out[:, 0] == native.WALK_ERROR).all()
    assert out[0, 1] == 0x10 and out[1, 1] == native.NO_CONTENT  # the header holds


def _mixed_store(tmp_path):
    store = LocalStore(tmp_path)
    keys = [f"k/{i}" for i in range(6)]
    rng = np.random.default_rng(5)
    values = {k: rng.integers(0, 256, 100 * i, dtype=np.uint8).tobytes()
              for i, k in enumerate(keys)}
    for k, v in values.items():
        (tmp_path / k).parent.mkdir(exist_ok=True)
        (tmp_path / k).write_bytes(v)
    os.remove(tmp_path / "k" / "2")  # missing
    os.symlink(tmp_path / "k" / "3", tmp_path / "k" / "link")  # not followed
    return store, [*keys, "k/link", "k/nothere"], values


@pytest.mark.parametrize("room", [1 << 20, 700])
def test_get_into_through_c_loops_as_in_python(tmp_path, room):
    """LocalStore.get_into answers the same with the C loops and without,
    for present, empty, missing and symlinked keys, and for values that do not
    fit the buffer the caller laid out (read as separate bytes)."""
    store, keys, values = _mixed_store(tmp_path)

    def place(sizes):
        offs, p = [], 0
        for n in sizes:
            offs.append(p if n is not None else -1)
            p += -(-(n or 0) // 16) * 16
        return np.zeros(room, np.uint8), offs

    answers = {}
    for on in (True, False):
        with cuzarr.config.set({"storage.native_io": on}):
            sio = store.sync_io()
            walked: list[int] = []
            vals, offs = sio.get_into(keys, place, lambda j, at, n, w=walked: w.append(j))
            answers[on] = ([None if v is None else bytes(v) for v in vals], offs,
                           sorted(walked))
    assert answers[True] == answers[False]
    vals = answers[True][0]
    assert vals[:2] == [values["k/0"], values["k/1"]] and vals[2] is None
    assert vals[-1] is None


def test_get_into_a_whole_batch_answers_views_made_when_asked(tmp_path):
    """A batch the C loops read whole answers a sequence that knows every value
    is there (``complete``) and makes each value's view of the buffer only when
    asked; a batch with missing keys knows which (``missing``), the others as
    views too, as the Python path answers."""
    store = LocalStore(tmp_path)
    for i in range(5):
        (tmp_path / f"v{i}").write_bytes(bytes([i]) * (10 + i))

    def place(sizes):
        return np.zeros(1 << 12, np.uint8), np.arange(len(sizes), dtype=np.int64) * 64

    with cuzarr.config.set({"storage.native_io": True}):
        vals, offs = store.sync_io().get_into([f"v{i}" for i in range(5)], place)
        assert offs.tolist() == [0, 64, 128, 192, 256]
        assert getattr(vals, "complete", False) and len(vals) == 5
        assert [bytes(v) for v in vals] == [bytes([i]) * (10 + i) for i in range(5)]
        assert bytes(vals[-1]) == bytes([4]) * 14 and [bytes(v) for v in vals[1:3]] == [
            b"\x01" * 11, b"\x02" * 12]
        # keys with no file: missing, known without a value made, their offsets
        # -1 in the placement's array (a key under no directory, or under a
        # file, is not known safe: the Python path answers it, as before)
        (tmp_path / "f").write_bytes(b"x")
        answers = {}
        for keys in (["v0", "nothere", "v2", "v3"], ["v0", "nothere", "f/0", "d/nothere"]):
            vals, offs = store.sync_io().get_into(keys, place)
            answers[tuple(keys)] = ([None if v is None else bytes(v) for v in vals], list(offs))
        vals, offs = store.sync_io().get_into(["v0", "nothere", "v2", "v3"], place)
        assert not getattr(vals, "complete", False) and vals.missing() == [1]
        assert offs.tolist() == [0, -1, 128, 192]
        assert bytes(vals[2]) == b"\x02" * 12 and vals[1] is None
    with cuzarr.config.set({"storage.native_io": False}):
        for keys, want in answers.items():
            vals, offs = store.sync_io().get_into(list(keys), place)
            assert ([None if v is None else bytes(v) for v in vals], list(offs)) == want
            assert want[0][1] is None and want[1][1] == -1


def test_get_into_fills_frames_in_the_c_loop(tmp_path):
    store = LocalStore(tmp_path)
    frames_in = _frames()[:6]
    keys = []
    for i, f in enumerate(frames_in):
        (tmp_path / f"z{i}").write_bytes(f)
        keys.append(f"z{i}")
    frames = native.frames_array(len(keys))
    called = []
    with cuzarr.config.set({"storage.native_io": True}):
        store.sync_io().get_into(
            keys, lambda s: (np.zeros(1 << 20, np.uint8), list(np.cumsum([0, *s[:-1]]))),
            lambda j, at, n: called.append(j), frames)
    assert not called  # the C loop walked them all
    walked = frames.view(np.int64)
    assert walked[:, 0].tolist() == [_numpy_walk(f) for f in frames_in]
    assert walked[:, 1].tolist() == [_content(f) for f in frames_in]


def _decoder():
    from cuzarr.codecs import libzstd

    if not libzstd.available():
        pytest.skip("no system libzstd on this machine")
    return libzstd.decompress_function()


@pytest.mark.parametrize("layout", ["c", "f", "reversed", "strided", "contiguous-rows"])
def test_zstd_decode_into_places_each_chunk_as_numpy_would(layout):
    """Chunks decoded into blocks of targets of every layout (a contiguous
    block, rows, Fortran order, negative and stepped strides): the target ends
    as numpy's assignment leaves it; a block outside the target, a corrupt
    chunk and one of the wrong size are not placed and leave it untouched."""
    rng = np.random.default_rng(7)
    shape = (3, 4, 5)
    base = {
        "c": np.zeros((6, 8, 5), "<i4"),
        "f": np.zeros((6, 8, 10), "<i4", order="F"),
        "reversed": np.zeros((6, 8, 10), "<i4")[::-1, :, ::-1],
        "strided": np.zeros((12, 8, 20), "<i4")[::2, :, ::2],
        "contiguous-rows": np.zeros((3, 4, 5), "<i4"),
    }[layout]
    target = base
    want = target.copy()
    starts, srcs = [], []
    for at in [(0, 0, 0), (3, 4, 0), (3, 0, 0), (0, 4, 0)]:
        if any(a + s > t for a, s, t in zip(at, shape, target.shape, strict=True)):
            continue
        chunk = rng.integers(-9, 9, shape).astype("<i4")
        want[tuple(slice(a, a + s) for a, s in zip(at, shape, strict=True))] = chunk
        starts.append(at)
        srcs.append(zstandard.ZstdCompressor().compress(chunk.tobytes()))
    scratch = np.empty(4 * 60, np.uint8)
    done = native.zstd_decode_into(_decoder(), srcs, np.array(starts), target, shape, scratch)
    assert done.all() and len(done) == len(srcs)
    np.testing.assert_array_equal(target, want)
    # not placed: cut short, the wrong size, a block outside the target (a
    # block decoded in place may hold part of a bad chunk: its caller raises)
    bad = [srcs[0][:-3], zstandard.ZstdCompressor().compress(b"x" * 12), srcs[0]]
    at = np.array([(0, 0, 0), (0, 0, 0), (target.shape[0], 0, 0)])
    done = native.zstd_decode_into(_decoder(), bad, at, target, shape, scratch)
    assert not done.any()
    if layout != "contiguous-rows":  # decoded into scratch: the target untouched
        np.testing.assert_array_equal(target, want)


def test_c_loops_refuse_misuse_without_crashing(tmp_path):
    """A path whose __fspath__ empties the list being read, and starts or a
    chunk shape of another number of dimensions than the target's: an answer
    or a ValueError, never a crash or a chunk in the wrong place."""
    paths: list = []

    class Emptying:
        def __fspath__(self):
            paths.clear()
            return str(tmp_path / "none")

    paths.extend([Emptying(), str(tmp_path / "none2")])
    fds, _, _ = native.open_sized(paths)
    native.close_fds(fds)
    assert fds.tolist() == [-errno.ENOENT, -errno.ENOENT]
    target = np.zeros((4, 4), "<i4")
    chunk = zstandard.ZstdCompressor().compress(np.ones((2, 2), "<i4").tobytes())
    with pytest.raises(ValueError, match="ndim"):
        native.zstd_decode_into(_decoder(), [chunk], np.array([[0, 0, 0]]), target,
                                (2, 2, 1), np.empty(64, np.uint8))
    assert not target.any()


def test_place_agrees_with_numpy():
    """``native.place`` (behind ``gpu.batch.place_chunks``) lays chunks out as the
    numpy version does: same offsets, same buffer size, missing ones at -1,
    every first raw stream 16-byte aligned."""
    from cuzarr.gpu.batch import STREAM_HEAD, place_chunks

    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = [None if rng.random() < 0.2 else int(rng.integers(0, 5000))
                 for _ in range(int(rng.integers(0, 40)))]
        for kind in ("zstd", "lz4", "gzip", None):
            got = {}
            for io in (True, False):
                with cuzarr.config.set({"storage.native_io": io}):
                    buf, offs = place_chunks(sizes, kind)
                    offs = np.asarray(offs, np.int64).tolist()
                    arr = np.array([-1 if s is None else s for s in sizes], np.int64)
                    assert np.asarray(place_chunks(arr, kind)[1], np.int64).tolist() == offs
                got[io] = (len(buf), offs)
            assert got[True] == got[False]
            head = STREAM_HEAD.get(kind or "", 0)
            assert all((o + head) % 16 == 0 for o in got[True][1] if o >= 0)
            assert [o < 0 for o in got[True][1]] == [s is None for s in sizes]


def test_index_rows_picks_a_shards_rows():
    """``index_rows``: a shard index's rows for some inner chunks (any order),
    -1 where one is not stored, their places after the shard's offset in a
    buffer (none when it lies elsewhere); positions outside the index refused."""
    EMPTY = 2**64 - 1
    index = np.array([[0, 10], [EMPTY, EMPTY], [10, 5], [15, 0]], np.uint64)
    flat = np.array([2, 1, 0, 3, 2], np.int64)
    offs, sizes, where, empty = native.index_rows(index, flat, 100)
    assert offs.tolist() == [10, -1, 0, 15, 10] and sizes.tolist() == [5, -1, 10, 0, 5]
    assert where.tolist() == [110, -1, 100, 115, 110] and empty == 1
    assert native.index_rows(index, flat, -1)[2].tolist() == [-1] * 5
    assert native.index_rows(index, np.zeros(0, np.int64), 0)[3] == 0
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="index_rows"):
            native.index_rows(index, np.array([0, bad], np.int64), 0)


@pytest.mark.parametrize("native_io", [True, False])
def test_get_ranges_into_reads_byte_ranges_in_place(tmp_path, native_io):
    """``SyncIO.get_ranges_into`` reads byte ranges (a key repeated, a range to
    the value's end) into the caller's places, with or without the C loops; a
    missing key and a range past the value's end are not read (``got``
    False), and in a pinned block a file replaced after its first read is
    read as it was."""
    store = LocalStore(tmp_path)
    (tmp_path / "a").write_bytes(bytes(range(100)))
    (tmp_path / "b").write_bytes(b"x" * 10)
    keys = ["a", "a", "b", "a", "nothere", "b"]
    starts = np.array([0, 50, 2, 90, 0, 5], np.int64)
    sizes = np.array([10, 20, -1, -1, 4, 20], np.int64)
    laid: list[list[int]] = []

    def place(n):
        laid.append(np.asarray(n).tolist())
        return np.zeros(512, np.uint8), np.arange(len(n), dtype=np.int64) * 64

    with cuzarr.config.set({"storage.native_io": native_io}):
        sio = store.sync_io()
        at, got_sizes, got = sio.get_ranges_into(keys, starts, sizes, place)
    assert laid == [[10, 20, 8, 10, -1, 20]] and got_sizes.tolist() == laid[0]
    assert got.tolist() == [True, True, True, True, False, False]
    assert at.tolist() == [0, 64, 128, 192, 256, 320]  # (the caller placed them)
    assert sizes.tolist() == [10, 20, -1, -1, 4, 20]  # the caller's array is left as it was
    # the bytes, in a buffer kept this time; and a pinned block's view of "a"
    kept = np.zeros(512, np.uint8)
    with cuzarr.config.set({"storage.native_io": native_io}):
        sio = store.sync_io()
        with sio.pinned():
            assert bytes(sio.get_ranges([("a", None)])[0])[:3] == bytes([0, 1, 2])
            (tmp_path / "a.new").write_bytes(b"y" * 100)
            os.replace(tmp_path / "a.new", tmp_path / "a")
            at, _, got = sio.get_ranges_into(
                ["a", "b"], np.array([50, 2], np.int64), np.array([20, -1], np.int64),
                lambda n: (kept, np.array([0, 64], np.int64)))
    assert got.all() and bytes(kept[:20]) == bytes(range(50, 70))
    assert bytes(kept[64:72]) == b"x" * 8
