"""The system-libzstd decode path (``codecs.zstd_system_library``): same arrays as
the numcodecs path and as zarr-python, the same errors, safe across threads."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import zarr
import zstandard

import cuzarr
from cuzarr.codecs import libzstd
from cuzarr.codecs.compressors import zstd_decompress_into
from cuzarr.errors import CodecError

ZSTD1 = [{"name": "zstd", "configuration": {"level": 1}}]


class _Mode:
    """The path under test (truthy: the system library) and the calls it got."""

    def __init__(self, system: bool) -> None:
        self.system = system
        self.calls: list[int] = []

    def __bool__(self) -> bool:
        return self.system

    def check_taken(self) -> None:
        assert bool(self.calls) == (self.system and libzstd.available()), self.calls


@pytest.fixture(params=[True, False], ids=["system", "numcodecs"])
def system_lib(request, monkeypatch):
    mode = _Mode(request.param)
    real, real_to = libzstd.decompress_into, libzstd.decompress_to_address

    def spy(src, dst):
        mode.calls.append(dst.nbytes)
        return real(src, dst)

    def spy_to(src, address, capacity):
        mode.calls.append(capacity)
        return real_to(src, address, capacity)

    real_fn = libzstd.decompress_function

    def spy_fn():  # many frames decoded by cuzarr.runtime.native through libzstd
        mode.calls.append(-1)
        return real_fn()

    monkeypatch.setattr(libzstd, "decompress_into", spy)
    monkeypatch.setattr(libzstd, "decompress_to_address", spy_to)
    monkeypatch.setattr(libzstd, "decompress_function", spy_fn)
    with cuzarr.config.set({"codecs.zstd_system_library": request.param}):
        yield mode
    if not request.param:
        assert not mode.calls


def test_found_on_linux():
    # The CI machines (Debian) have libzstd.so.1; on them this path must run,
    # not silently fall back.
    if sys.platform != "linux":
        pytest.skip("the reference machines are Linux")
    assert libzstd.available()
    with cuzarr.config.set({"codecs.zstd_system_library": False}):
        assert not libzstd.available()


def _smooth(shape, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.integers(-3, 4, size=shape), axis=-1).astype(np.uint16)


@pytest.mark.parametrize("chunks", [(256, 512), (128, 256), (100, 350)])
def test_read_matches_numpy_and_zarr(tmp_path, system_lib, chunks):
    data = _smooth((512, 1200))
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(path, shape=data.shape, chunks=chunks, dtype="u2", compressors=ZSTD1)
    a[...] = data
    got = cuzarr.open_array(path, mode="r")[...]
    np.testing.assert_array_equal(got, data)
    # a strided selection decodes into the scratch buffer and copies out
    np.testing.assert_array_equal(cuzarr.open_array(path, mode="r")[7::3, ::-5], data[7::3, ::-5])
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], data)
    system_lib.check_taken()


def test_zarr_written_sharded_read(tmp_path, system_lib):
    data = _smooth((512, 1024), seed=1).astype(np.int32)
    path = tmp_path / "s.zarr"
    z = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=(128, 256),
        shards=(256, 512),
        dtype="i4",
        compressors=ZSTD1,
    )
    z[...] = data
    np.testing.assert_array_equal(cuzarr.open_array(path, mode="r")[...], data)
    system_lib.check_taken()


def test_whole_chunk_into_contiguous_output(tmp_path, system_lib):
    # rows of full width: each chunk lands in a contiguous part of the output and
    # is decoded straight into it (decode_into)
    data = _smooth((1024, 256), seed=2)
    path = tmp_path / "c.zarr"
    a = cuzarr.create_array(
        path, shape=data.shape, chunks=(512, 256), dtype="u2", compressors=ZSTD1
    )
    a[...] = data
    np.testing.assert_array_equal(cuzarr.open_array(path, mode="r")[...], data)
    system_lib.check_taken()


@pytest.mark.parametrize(
    "mangle",
    [
        lambda f: f[:-7],  # truncated
        lambda f: f + b"not a frame",  # trailing garbage
        lambda f: f + f,  # two frames: more than the chunk holds
        lambda f: b"\x00" * 4 + f[4:],  # bad magic
    ],
    ids=["truncated", "trailing", "two-frames", "magic"],
)
def test_bad_frames_raise_codec_error(tmp_path, system_lib, mangle):
    data = _smooth((256, 512), seed=3)
    path = tmp_path / "b.zarr"
    a = cuzarr.create_array(
        path, shape=data.shape, chunks=(256, 512), dtype="u2", compressors=ZSTD1
    )
    a[...] = data
    key = path / "c" / "0" / "0"
    key.write_bytes(mangle(key.read_bytes()))
    with pytest.raises(CodecError, match="c/0/0"):
        cuzarr.open_array(path, mode="r")[...]


def test_decompress_into_direct(system_lib):
    src = _smooth((300, 400), seed=4).tobytes()
    frame = zstandard.ZstdCompressor(level=3).compress(src)
    for kind in (bytes, bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8)):
        out = np.empty(len(src), np.uint8)
        zstd_decompress_into(kind(frame), out)
        assert out.tobytes() == src
    with pytest.raises(CodecError):
        zstd_decompress_into(frame, np.empty(len(src) - 1, np.uint8))
    system_lib.check_taken()


def test_threads_keep_their_own_context():
    if not libzstd.available():
        pytest.skip("no system libzstd")
    frames, srcs = [], []
    for seed in range(8):
        s = _smooth((200, 700), seed=seed).tobytes()
        srcs.append(s)
        frames.append(zstandard.ZstdCompressor(level=1).compress(s))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for r in range(40):
                i = (k + r) % len(frames)
                out = np.empty(len(srcs[i]), np.uint8)
                assert libzstd.decompress_into(frames[i], out) == len(srcs[i])
                assert out.tobytes() == srcs[i]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_random_frames_same_outcome_both_paths():
    """Frames written with assorted zstd parameters, some damaged: each binding
    returns the same bytes or both raise CodecError."""
    rng = np.random.default_rng(7)
    n = 96 << 10
    outcomes = 0
    for case in range(120):
        src = np.cumsum(rng.integers(-2, 3, size=n // 2)).astype(np.uint16).tobytes()
        params = zstandard.ZstdCompressionParameters.from_level(
            int(rng.integers(-5, 12)),
            source_size=n,
            write_checksum=int(rng.integers(0, 2)),
            window_log=int(rng.integers(10, 18)),
        )
        frame = zstandard.ZstdCompressor(compression_params=params).compress(src)
        b = bytearray(frame)
        kind = case % 4
        if kind == 1:
            b[int(rng.integers(4, len(b)))] ^= 1 << int(rng.integers(0, 8))
        elif kind == 2:
            del b[int(rng.integers(len(b) // 2, len(b))) :]
        elif kind == 3:
            # a skippable frame after the data frame (RFC 8878 3.1.2)
            b += (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
        results = []
        for flag in (True, False):
            out = np.empty(n, np.uint8)
            with cuzarr.config.set({"codecs.zstd_system_library": flag}):
                try:
                    zstd_decompress_into(bytes(b), out)
                    results.append(out.tobytes())
                except CodecError:
                    results.append("error")
        assert results[0] == results[1], case
        if kind in (0, 3):
            assert results[0] == src, case
        outcomes += results[0] == "error"
    assert outcomes > 0  # the damaged cases did reach the error paths


def test_buffers_it_cannot_use_are_refused(system_lib):
    src = _smooth((200, 400), seed=5).tobytes()
    frame = zstandard.ZstdCompressor(level=1).compress(src)
    strided = np.zeros(2 * len(src), np.uint8)[::2]
    readonly = np.frombuffer(bytes(len(src)), np.uint8)
    for dst in (strided, readonly):
        with pytest.raises(CodecError):
            zstd_decompress_into(frame, dst)
    assert not readonly.any() and not strided.base.any()
    if system_lib:  # the numcodecs path only takes what numcodecs takes
        gappy = np.frombuffer(frame + frame, np.uint8)[::2]
        with pytest.raises(CodecError):
            zstd_decompress_into(gappy, np.empty(len(src), np.uint8))


@pytest.mark.parametrize("word", ["false", "False", "no", "off", "0"])
def test_env_words_turn_it_off(word):
    with cuzarr.config.set({"codecs.zstd_system_library": word}):
        assert not libzstd.available()
    with cuzarr.config.set({"codecs.zstd_system_library": "true"}):
        assert libzstd.available() == (libzstd._load() is not None)


@pytest.mark.parametrize("word", ["false", "off", "0"])
def test_other_boolean_settings_read_environment_words(word):
    from cuzarr.core.array_config import parse_array_config
    from cuzarr.gpu.dispatch import emulating
    from cuzarr.gpu.reader import direct_reads
    from cuzarr.storage import LocalStore

    with cuzarr.config.set({"array.write_empty_chunks": word, "gpu.emulate": word, "gpu.gds": word}):
        assert parse_array_config(None).write_empty_chunks is False
        assert not emulating()
        assert not direct_reads(LocalStore("."), device=True)


@pytest.mark.skipif(not libzstd.available(), reason="no system libzstd on this machine")
def test_decompress_to_address():
    src = _smooth((64, 128), seed=5).tobytes()
    frame = zstandard.ZstdCompressor(level=1).compress(src)
    out = np.zeros(3 * len(src), np.uint8)
    n = len(src)
    assert libzstd.decompress_to_address(frame, out.ctypes.data + n, n) == n
    assert out[n : 2 * n].tobytes() == src
    assert not out[:n].any() and not out[2 * n :].any()  # nothing outside its place
    with pytest.raises(CodecError):
        libzstd.decompress_to_address(frame, out.ctypes.data, n - 1)  # does not fit
    with pytest.raises(CodecError):
        libzstd.decompress_to_address(frame[:-5], out.ctypes.data, n)  # truncated
    # any contiguous buffer of bytes, as the shard reader's memoryview slices
    for src_buf in (bytearray(frame), memoryview(b"xx" + frame)[2:], np.frombuffer(frame, "u1")):
        out[n : 2 * n] = 0
        assert libzstd.decompress_to_address(src_buf, out.ctypes.data + n, n) == n
        assert out[n : 2 * n].tobytes() == src
    with pytest.raises(CodecError):
        libzstd.decompress_to_address(memoryview(frame + frame)[::2], out.ctypes.data, n)
    with pytest.raises(CodecError):
        libzstd.decompress_to_address(12345, out.ctypes.data, n)  # not a buffer


@pytest.mark.parametrize("system", [True, False])
def test_batched_chunks_same_with_and_without_system_lib(tmp_path, system):
    """Chunks of 16-64 KiB go through the batch path, in place by libzstd when
    there is one: same values either way, and a frame declaring another size
    or a missing one falls back to the one-chunk path."""
    data = _smooth((300, 1000), seed=6)
    a = cuzarr.create_array(tmp_path / "a", shape=data.shape, dtype=data.dtype,
                            chunks=(64, 128), compressors=ZSTD1, fill_value=0)
    a[...] = data
    raw = a.dtype.itemsize * 64 * 128
    no_size = zstandard.ZstdCompressor(level=1, write_content_size=False)
    (tmp_path / "a" / "c" / "1" / "2").write_bytes(
        no_size.compress(np.ascontiguousarray(data[64:128, 256:384]).tobytes())
    )
    assert raw >= 16 << 10
    with cuzarr.config.set({"codecs.zstd_system_library": system}):
        np.testing.assert_array_equal(cuzarr.open_array(tmp_path / "a", mode="r")[...], data)


def test_first_frame_sizes():
    """libzstd's frame walk: a whole frame's stored size (checksum included), -1
    for a truncated one or a broken block header, the first frame's size where
    two follow each other, and ranges outside the buffer refused."""
    rng = np.random.default_rng(3)
    raw = np.cumsum(rng.standard_normal(100_000)).round(1).astype("<f4").tobytes()
    one = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(raw)
    small = zstandard.ZstdCompressor().compress(raw[:999])
    broken = bytearray(one)
    broken[6 + 4] |= 0x06  # the first block header's type made reserved (3)
    parts = [one, one[:-1], one + small, small, bytes(broken)]
    buf = np.frombuffer(b"".join(parts) + b"\0" * 3, np.uint8).copy()
    lens = np.array([len(p) for p in parts], np.int64)
    offs = np.cumsum(lens) - lens
    got = libzstd.first_frame_sizes(buf, offs, lens)
    assert got.tolist() == [len(one), -1, len(one), len(small), -1]
    with pytest.raises(ValueError):
        libzstd.first_frame_sizes(buf, np.array([len(buf) - 2]), np.array([4]))
    with pytest.raises(ValueError):
        libzstd.first_frame_sizes(buf[::2], np.array([0]), np.array([4]))
