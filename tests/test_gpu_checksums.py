"""Chunk checksums for device-compressed zlib/gzip (cuzarr.gpu.checksums), on the host.

The per-block values come from the kernel's numpy twin and are combined into whole
chunk checksums, compared with zlib.crc32 / zlib.adler32. The kernel itself is
compiled with NVRTC and nvcc, and its per-block routine (``__host__ __device__``)
is run on the CPU through nvcc's host compiler against the twin.
"""

from __future__ import annotations

import shutil
import subprocess
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _gpu_helpers import require_nvrtc, skip_or_fail
from cuzarr.gpu import checksums as cs
from cuzarr.gpu import kernels

SIZES = [0, 1, 3, 7, 8, 9, 16383, 16384, 16385, 3 * 16384, 1 << 20, (1 << 20) + 5]


def _zlib(kind):
    return zlib.crc32 if kind == "crc32" else zlib.adler32


def _batch(data, lengths, gap=0, start=0):
    offs = start + np.concatenate([[0], np.cumsum(np.asarray(lengths) + gap)[:-1]]).astype(
        np.int64
    )
    return offs[: len(lengths)], np.asarray(lengths, np.int64)


def _check_batch(data, offs, lens, block=cs.DEFAULT_BLOCK):
    b = cs.split_blocks(offs, lens, block)
    vals = cs.block_checksums_numpy(data, b.offsets, b.lengths)
    for kind in ("crc32", "adler32"):
        got = cs.chunk_checksums(kind, vals, b.lengths, b.owners, len(lens))
        assert got.dtype == np.uint32 and got.shape == (len(lens),)
        want = [_zlib(kind)(data[o : o + n]) for o, n in zip(offs.tolist(), lens.tolist())]
        assert got.tolist() == want, kind


def _data(kind, n, rng):
    if kind == "random":
        return rng.integers(0, 256, n, dtype=np.uint8)
    return np.full(n, 0 if kind == "zeros" else 0xFF, np.uint8)


@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
@pytest.mark.parametrize("size", SIZES)
def test_single_chunk(size, fill, rng):
    data = _data(fill, size, rng)
    b = cs.split_blocks([0], [size])
    vals = cs.block_checksums_numpy(data, b.offsets, b.lengths)
    assert cs.combine_crc32(vals.crc, b.lengths) == zlib.crc32(data)
    assert cs.combine_adler32(vals.adler_a, vals.adler_b, b.lengths) == zlib.adler32(data)
    _check_batch(data, np.zeros(1, np.int64), np.array([size], np.int64))


@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
def test_batch_of_chunks(fill, rng):
    lengths = SIZES + rng.integers(0, 200_000, 20).tolist() + [1 << 20] * 5
    rng.shuffle(lengths)
    data = _data(fill, int(sum(lengths)) + 17 * len(lengths) + 3, rng)
    offs, lens = _batch(data, lengths, gap=17, start=3)  # unaligned offsets, gaps
    _check_batch(data, offs, lens)


def test_many_equal_chunks(rng):
    # the vectorized path as a write batch uses it: many 1 MiB chunks
    lengths = [1 << 20] * 40 + [123_456]
    data = rng.integers(0, 256, sum(lengths), dtype=np.uint8)
    _check_batch(data, *_batch(data, lengths))


@pytest.mark.parametrize("block", [1, 7, 8, 4096, 65536])
def test_block_sizes(block, rng):
    lengths = [0, 1, 5, 4096, 70_000, 65537]
    data = rng.integers(0, 256, sum(lengths) + 1, dtype=np.uint8)
    _check_batch(data, *_batch(data, lengths, start=1), block=block)


def test_empty_batch():
    b = cs.split_blocks([], [])
    assert len(b.offsets) == len(b.lengths) == len(b.owners) == 0
    vals = cs.block_checksums_numpy(np.zeros(0, np.uint8), b.offsets, b.lengths)
    for kind in ("crc32", "adler32"):
        assert cs.chunk_checksums(kind, vals, b.lengths, b.owners, 0).shape == (0,)
    # empty chunks: no blocks, the checksum of b""
    b = cs.split_blocks([0, 0], [0, 0])
    vals = cs.block_checksums_numpy(np.zeros(0, np.uint8), b.offsets, b.lengths)
    assert cs.chunk_checksums("crc32", vals, b.lengths, b.owners, 2).tolist() == [0, 0]
    assert cs.chunk_checksums("adler32", vals, b.lengths, b.owners, 2).tolist() == [1, 1]


def test_split_blocks():
    b = cs.split_blocks([10, 100, 500], [5, 0, 9], block=4)
    assert b.offsets.tolist() == [10, 14, 500, 504, 508]
    assert b.lengths.tolist() == [4, 1, 4, 4, 1]
    assert b.owners.tolist() == [0, 0, 2, 2, 2]
    with pytest.raises(ValueError):
        cs.split_blocks([0], [1], block=0)
    with pytest.raises(ValueError):
        cs.split_blocks([0, 1], [1])


def test_block_values_match_zlib(rng):
    # the Adler partial sums are what zlib.adler32 of the block alone implies
    data = rng.integers(0, 256, 50_000, dtype=np.uint8)
    b = cs.split_blocks([0, 7], [0, 49_000], block=5000)
    vals = cs.block_checksums_numpy(data, b.offsets, b.lengths)
    for o, n, c, a, bb in zip(b.offsets, b.lengths, vals.crc, vals.adler_a, vals.adler_b):
        z = zlib.adler32(data[o : o + n])
        assert int(c) == zlib.crc32(data[o : o + n])
        assert z & 0xFFFF == (int(a) + 1) % cs.ADLER_MOD
        assert z >> 16 == (int(bb) + int(n)) % cs.ADLER_MOD


def test_uneven_blocks_fall_back(rng):
    # blocks not from split_blocks (body blocks of different sizes), incl. empty ones
    data = rng.integers(0, 256, 30_000, dtype=np.uint8)
    lens = np.array([100, 0, 5000, 3, 0, 9000, 15_897], np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
    owners = np.array([0, 0, 0, 1, 1, 1, 1])
    vals = cs.block_checksums_numpy(data, offs, lens)
    want = [data[: 5100], data[5100:]]
    assert cs.chunk_checksums("crc32", vals, lens, owners, 2).tolist() == [
        zlib.crc32(w) for w in want
    ]
    assert cs.chunk_checksums("adler32", vals, lens, owners, 2).tolist() == [
        zlib.adler32(w) for w in want
    ]
    assert cs.combine_crc32(vals.crc[:3], lens[:3]) == zlib.crc32(want[0])


def test_crc32_shift():
    a, b = b"hello, ", b"world" * 1000
    assert cs.crc32_shift(zlib.crc32(a), len(b)) ^ zlib.crc32(b) == zlib.crc32(a + b)
    assert cs.crc32_shift(0x12345678, 0) == 0x12345678


def test_bad_input():
    vals = cs.BlockChecksums(*(np.zeros(2, np.uint32) for _ in range(3)))
    with pytest.raises(ValueError):
        cs.chunk_checksums("md5", vals, [1, 1], [0, 0], 1)
    with pytest.raises(ValueError):
        cs.chunk_checksums("crc32", vals, [1, 1], [1, 0], 2)  # out of order
    with pytest.raises(ValueError):
        cs.block_checksums_numpy(np.zeros(4, np.uint8), [2], [3])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 70_000), max_size=8),
    block=st.sampled_from([1, 3, 8, 1000, 4096, 16384]),
    start=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_batches(lengths, block, start, seed):
    if block < 8:
        lengths = [n % 3000 for n in lengths]  # keep the python loop short
    data = np.random.default_rng(seed).integers(0, 256, sum(lengths) + start, dtype=np.uint8)
    _check_batch(data, *_batch(data, lengths, start=start), block=block)


# --- the kernel ---------------------------------------------------------------


@pytest.mark.parametrize("arch", ["80", "90"])
def test_kernel_compiles_with_nvrtc(arch):
    require_nvrtc()
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # pragma: no cover - depends on the environment
        skip_or_fail(f"NVRTC library not found ({e}); pip install nvidia-cuda-nvrtc")
    assert "checksum.cu" in kernels.SOURCES
    sizes = kernels.compile_check(arch, names=("checksum.cu",))
    assert sizes["checksum.cu"] > 0


def _nvcc():
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if shutil.which("/usr/local/cuda/bin/nvcc") else None
    )
    if nvcc is None:
        pytest.skip("nvcc not found")
    return nvcc


def test_kernel_compiles_with_nvcc(tmp_path):
    nvcc = _nvcc()
    src = kernels.kernel_dir() / "checksum.cu"
    r = subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_80", "-c", str(src), "-o", str(tmp_path / "c.o")],
        capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr


# Runs the kernel's per-block routine (cuzarr_checksum_range, __host__ __device__)
# on the CPU, dispatching on `kinds` like the kernel does.
_HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "checksum.cu"

int main(int argc, char** argv) {
    FILE* f = std::fopen(argv[1], "rb");
    long long nbytes, nblocks;
    if (std::fread(&nbytes, 8, 1, f) != 1 || std::fread(&nblocks, 8, 1, f) != 1) return 2;
    // over-allocate and read at offset 0 of a malloc'd buffer: offsets set alignment
    unsigned char* data = (unsigned char*)std::malloc(nbytes + 16);
    std::vector<long long> offs(nblocks), lens(nblocks);
    if (std::fread(data, 1, nbytes, f) != (size_t)nbytes) return 3;
    if (std::fread(offs.data(), 8, nblocks, f) != (size_t)nblocks) return 4;
    if (std::fread(lens.data(), 8, nblocks, f) != (size_t)nblocks) return 5;
    std::fclose(f);
    static unsigned int t[8 * 256];
    cuzarr_crc_tables(t, 0, 0, 1);
    cuzarr_crc_tables(t, 1, 0, 1);
    for (long long i = 0; i < nblocks; ++i) {
        unsigned int c, a, b, c1, a1, b1, c2, a2, b2;
        cuzarr_checksum_range<true, true>(data + offs[i], lens[i], t, c, a, b);
        cuzarr_checksum_range<true, false>(data + offs[i], lens[i], t, c1, a1, b1);
        cuzarr_checksum_range<false, true>(data + offs[i], lens[i], t, c2, a2, b2);
        std::printf("%u %u %u %u %u %u\n", c, a, b, c1, a2, b2);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    nvcc = _nvcc()
    d = tmp_path_factory.mktemp("checksum_harness")
    (d / "h.cu").write_text(_HARNESS)
    r = subprocess.run(
        [nvcc, "-std=c++17", "-O2", "-arch=sm_80", "-I", str(kernels.kernel_dir()),
         str(d / "h.cu"), "-o", str(d / "h")],
        capture_output=True, text=True, timeout=240,
    )
    if r.returncode != 0 and ("gcc" in r.stderr or "host compiler" in r.stderr):
        pytest.skip(f"nvcc has no usable host compiler: {r.stderr[-500:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return d


@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
def test_kernel_routine_on_host(harness, fill, rng):
    lengths = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 5551, 5552, 5553, 5560, 11104, 11111,
               16383, 16384, 16385, 65536, 200_003]
    data = _data(fill, sum(lengths) + 40 * len(lengths), rng)
    # every start alignment mod 8, and every remainder of the length
    offs, lens = [], []
    pos = 0
    for i, n in enumerate(lengths):
        for shift in (0, 3, 5, 6):
            offs.append(pos + (i + shift) % 8)
            lens.append(n)
        pos += n + 8
    offs = np.array(offs, np.int64)
    lens = np.array(lens, np.int64)
    inp = harness / f"in_{fill}.bin"
    inp.write_bytes(np.array([data.size, len(offs)], "<i8").tobytes() + data.tobytes()
                    + offs.astype("<i8").tobytes() + lens.astype("<i8").tobytes())
    r = subprocess.run([str(harness / "h"), str(inp)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    got = np.array([line.split() for line in r.stdout.splitlines()], np.uint64)
    want = cs.block_checksums_numpy(data, offs, lens)
    assert got.shape == (len(offs), 6)
    assert got[:, 0].tolist() == want.crc.tolist()
    assert got[:, 1].tolist() == want.adler_a.tolist()
    assert got[:, 2].tolist() == want.adler_b.tolist()
    assert got[:, 3].tolist() == want.crc.tolist()  # crc only
    assert got[:, 4].tolist() == want.adler_a.tolist()  # adler only
    assert got[:, 5].tolist() == want.adler_b.tolist()


class _FakeDeviceArray(np.ndarray):
    def get(self):
        return np.asarray(self)


class _FakeCupy:
    """Enough of CuPy for device_chunk_checksums' plumbing, on numpy."""

    uint8 = np.uint8
    uint32 = np.uint32

    @staticmethod
    def asarray(a):
        return np.asarray(a).view(_FakeDeviceArray)

    @staticmethod
    def zeros(shape, dtype):
        return np.zeros(shape, dtype).view(_FakeDeviceArray)


@pytest.mark.parametrize("kind", ["crc32", "adler32"])
def test_device_path_plumbing(monkeypatch, kind, rng):
    """device_chunk_checksums with the launch replaced by the numpy twin: argument
    order and types, output rows, empty batches."""
    import cuzarr.buffer.gpu

    launches = []

    def kernel(grid, block, args):
        data, offs, lens, n, kinds, crc, a, b = args
        assert isinstance(n, np.int64) and isinstance(kinds, np.int32)
        assert int(kinds) == cs.KINDS[kind] and grid[0] * block[0] >= n == len(offs)
        v = cs.block_checksums_numpy(np.asarray(data), offs, lens)
        if kinds & 1:
            crc[:] = v.crc
        if kinds & 2:
            a[:], b[:] = v.adler_a, v.adler_b
        launches.append(int(n))

    def get_function(name, fn_name):
        assert (name, fn_name) == ("checksum.cu", kernels.CHECKSUMS)
        return kernel

    monkeypatch.setattr(cuzarr.buffer.gpu, "import_cupy", lambda: _FakeCupy)
    monkeypatch.setattr(kernels, "get_function", get_function)
    lengths = [0, 5, 70_000, 16384]
    host = rng.integers(0, 256, 106_387, dtype=np.uint8)
    offs = [7, 7, 20, 90_000]
    buf = host.view(_FakeDeviceArray)
    got = cs.device_chunk_checksums(buf, offs, lengths, kind, block=4096)
    assert got.tolist() == [_zlib(kind)(host[o : o + n]) for o, n in zip(offs, lengths)]
    assert launches == [1 + 18 + 4]
    assert cs.device_chunk_checksums(buf, [0], [0], kind).tolist() == [_zlib(kind)(b"")]
    assert launches == [23]
    with pytest.raises(ValueError):
        cs.device_chunk_checksums(buf, [106_384], [4], kind)
