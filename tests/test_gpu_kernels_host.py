"""The CUDA kernels' own source, run on the CPU.

``kernels/scatter.cu`` and ``kernels/unshuffle.cu`` are compiled by the host C++
compiler behind a small shim (``__global__``/``__device__`` dropped, ``blockIdx``,
``threadIdx``, ``gridDim``, ``blockDim`` made host variables) and launched by a
driver that runs every thread of the grid in turn. The rows contain no shared
memory, barriers or atomics, so this runs exactly the index arithmetic a GPU
runs; undefined behaviour sanitizers turn a misaligned copy word (a ``uint4``
or ``uint64`` access at an address it does not divide) or a signed overflow
into a failure.

What it shows without a device:

- the kernels give what their numpy twins (``execute_plan_numpy``,
  ``execute_gather_numpy``, ``unshuffle_numpy``, ``shuffle_numpy``) give, for
  random plans, with the copy word ``copy_word`` picks for the buffers'
  addresses, under the launch grid ``kernels.row_grid`` gives and under tiny
  grids that make every grid-stride loop go round;
- byte offsets past 2**31 and 2**32 (staging slots and outputs of several GiB)
  are computed in 64 bits: the buffers are passed with pointers biased down by
  the offset and the rows' offsets raised by it, so a truncated offset reads or
  writes the wrong place.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _gpu_helpers import draw_grid_selection
from cuzarr.core.engine import chunk_items
from cuzarr.gpu import formats, kernels
from cuzarr.gpu.executor import copy_word
from cuzarr.gpu.plan import (
    build_plan,
    execute_gather_numpy,
    execute_plan_numpy,
    fill_bytes,
)
from cuzarr.indexing.selection import normalize_numpy
from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

_HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
struct cuzarr_host_dim3 { unsigned int x, y, z; };
static cuzarr_host_dim3 blockIdx, threadIdx, gridDim, blockDim;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#include "scatter.cu"
#include "unshuffle.cu"

template <typename F>
static void launch(unsigned gx, unsigned gy, unsigned bx, F body) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x)
            for (unsigned t = 0; t < bx; ++t) {
                blockIdx = {x, y, 0};
                threadIdx = {t, 0, 0};
                body();
            }
}

// n bytes from f at byte `mis` past a 64-byte boundary
static unsigned char* load(FILE* f, long long n, long long mis) {
    unsigned char* p = (unsigned char*)std::aligned_alloc(64, ((n + mis) / 64 + 2) * 64);
    if (n && std::fread(p + mis, 1, n, f) != (size_t)n) std::exit(3);
    return p + mis;
}

// argv[1]: header (14 x int64: mode, word, nrows, grid x, grid y, block x,
// bytes of a, b, fill, misalignment of a, b, fill, pointer offset of a, b),
// rows, a, b, fill; writes b after the launch to argv[2].
// mode 0: scatter(a -> b), 1: gather(a -> b), 2: unshuffle(a -> b), 3: shuffle(a -> b)
int main(int argc, char** argv) {
    FILE* f = std::fopen(argv[1], "rb");
    long long h[14];
    if (!f || std::fread(h, 8, 14, f) != 14) return 2;
    const long long mode = h[0], w = h[1], nrows = h[2];
    const unsigned gx = (unsigned)h[3], gy = (unsigned)h[4], bx = (unsigned)h[5];
    const long long row_bytes = mode < 2 ? (long long)sizeof(cuzarr_plan_row)
                                         : (long long)sizeof(cuzarr_unshuffle_row);
    unsigned char* rows = load(f, nrows * row_bytes, 0);
    unsigned char* a = load(f, h[6], h[9]);
    unsigned char* b = load(f, h[7], h[10]);
    unsigned char* fill = load(f, h[8], h[11]);
    std::fclose(f);
    const unsigned char* ap = a + h[12];  // biased pointers (see the test)
    unsigned char* bp = b + h[13];
    const cuzarr_plan_row* pr = (const cuzarr_plan_row*)rows;
    const cuzarr_unshuffle_row* ur = (const cuzarr_unshuffle_row*)rows;
#define CUZARR_CASE(W, T)                                                              \
    case W:                                                                            \
        if (mode == 0)                                                                 \
            launch(gx, gy, bx, [&] { cuzarr_scatter<T>(pr, nrows, ap, bp, fill); });   \
        else                                                                           \
            launch(gx, gy, bx, [&] { cuzarr_gather<T>(pr, nrows, bp, ap, fill); });    \
        break;
    if (mode < 2) {
        switch (w) {
            CUZARR_CASE(1, unsigned char)
            CUZARR_CASE(2, unsigned short)
            CUZARR_CASE(4, unsigned int)
            CUZARR_CASE(8, unsigned long long)
            CUZARR_CASE(16, cuzarr_w16)
            default: return 4;
        }
    } else if (mode == 2) {
        launch(gx, gy, bx, [&] { cuzarr_unshuffle(ur, nrows, ap, bp); });
    } else {
        launch(gx, gy, bx, [&] { cuzarr_shuffle(ur, nrows, ap, bp); });
    }
    FILE* o = std::fopen(argv[2], "wb");
    if (!o || (h[7] && std::fwrite(b, 1, h[7], o) != (size_t)h[7])) return 5;
    std::fclose(o);
    return 0;
}
"""

SANITIZE = ["-fsanitize=alignment,signed-integer-overflow,shift,bounds",
            "-fno-sanitize-recover=all"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    cxx = shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("kernel_host")
    (d / "harness.cpp").write_text(_HARNESS)
    exe = d / "harness"
    cmd = [cxx, "-std=c++17", "-O1", "-g", *SANITIZE, "-I", str(kernels.kernel_dir()),
           str(d / "harness.cpp"), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if r.returncode != 0 and "sanitize" in r.stderr:  # a compiler without UBSan
        cmd = [c for c in cmd if c not in SANITIZE]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


MODES = {"scatter": 0, "gather": 1, "unshuffle": 2, "shuffle": 3}


def _launch(exe: Path, mode: str, rows: np.ndarray, a: np.ndarray, b: np.ndarray, *,
            word: int = 1, grid: tuple[int, int] = (1, 1), block: int = 1,
            fill: np.ndarray | None = None, mis: tuple[int, int, int] = (0, 0, 0),
            ptr: tuple[int, int] = (0, 0), expect_fail: bool = False) -> np.ndarray:
    """``b`` after the kernel ran over ``rows`` reading ``a``. The kernel gets
    ``a + ptr[0]`` and ``b + ptr[1]`` (the host buffers lie ``mis`` bytes past
    a 64-byte boundary)."""
    fill_b = np.zeros(16, np.uint8) if fill is None else np.concatenate(
        [np.asarray(fill, np.uint8).reshape(-1), np.zeros(16, np.uint8)])
    header = np.array([MODES[mode], word, len(rows), grid[0], grid[1], block,
                       a.nbytes, b.nbytes, fill_b.nbytes, *mis, *ptr], "<i8")
    d = exe.parent
    tag = f"{np.random.default_rng().integers(1 << 62):x}"  # unique per call (xdist)
    src, dst = d / f"in_{tag}", d / f"out_{tag}"
    src.write_bytes(b"".join(x.tobytes() for x in (header, rows, a, b, fill_b)))
    try:
        r = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True,
                           timeout=300)
        if expect_fail:
            assert r.returncode != 0
            return np.zeros(0, np.uint8), r.stderr
        assert r.returncode == 0, r.stderr[-3000:]
        return np.frombuffer(dst.read_bytes(), np.uint8)
    finally:
        src.unlink(missing_ok=True)
        dst.unlink(missing_ok=True)


def _ptr_mod(mis: int, delta: int) -> int:
    """A stand-in address with the alignment of ``buffer + delta`` in the harness."""
    return 64 * 1024 + mis + delta


# --- scatter and gather ---------------------------------------------------------


@st.composite
def scatter_cases(draw):
    shape, chunks, sel = draw_grid_selection(draw, 0, 4)
    return dict(
        shape=shape, chunks=chunks, sel=sel,
        seed=draw(st.integers(0, 2**16)),
        order=draw(st.sampled_from(["C", "F"])),
        dtype=draw(st.sampled_from(["u1", "<i2", "<i4", "<f8", "<c8", "<c16", "V3", "V12"])),
        swap=draw(st.booleans()),
        out_step=draw(st.sampled_from([1, 2, -1, -2])),
        mis=tuple(draw(st.sampled_from([0, 0, 1, 2, 4, 8])) for _ in range(3)),
        tiny_grid=draw(st.booleans()),
    )


def _scatter_setup(c):
    rng = np.random.default_rng(c["seed"])
    dt = np.dtype(c["dtype"])
    shape, chunks = c["shape"], c["chunks"]
    dims = [DimGrid(s, ch) for s, ch in zip(shape, chunks)]
    p = normalize_numpy(c["sel"], shape, dims)
    items = chunk_items(p.projections)
    present = [bool(rng.random() > 0.2) for _ in items]
    bshape = p.buffer_shape
    # the output: a view (strided, maybe reversed) of a bigger buffer
    step = c["out_step"]
    big = np.zeros(tuple(abs(step) * b + 1 for b in bshape), dt)
    out = big[...]
    if bshape:
        out = out[tuple(slice(None, None, step) if step < 0 else slice(1, None, step)
                        for _ in bshape)][tuple(slice(0, b) for b in bshape)]
    swap = 0
    if c["swap"] and dt.kind in "iufc" and dt.itemsize > 1:
        swap = dt.itemsize // 2 if dt.kind == "c" else dt.itemsize
    plan = build_plan(items, RegularChunkGrid(chunks).stored_chunk_shape, out.shape,
                      out.strides, dt.itemsize, present=present, chunk_order=c["order"],
                      swap=swap)
    staging = rng.integers(0, 256, plan.staging_nbytes, dtype=np.uint8)
    fill = np.zeros((), dt) if dt.kind == "V" else np.array(253, np.int64).astype(dt)
    return dt, items, plan, staging, big, out, fill


def _origin(big: np.ndarray, view: np.ndarray) -> int:
    return int(view.__array_interface__["data"][0]) - int(big.__array_interface__["data"][0])


def _grid(c, plan, work):
    if c["tiny_grid"]:
        return (1, 2), 3  # every grid-stride loop goes round
    return kernels.row_grid(work, len(plan.table), 256), 256


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatter_cases())
def test_scatter_kernel_matches_numpy_twin(harness, c):
    dt, _items, plan, staging, big, out, fill = _scatter_setup(c)
    if len(plan.table) == 0 or out.size == 0:
        return
    expect = big.copy()
    execute_plan_numpy(plan.table, staging, _window(expect, big, out), fill)
    origin = _origin(big, out)
    ma, mb, mf = c["mis"]
    w = copy_word(plan.table, plan.itemsize,
                  [_ptr_mod(mb, origin), _ptr_mod(ma, 0), _ptr_mod(mf, 0)])
    grid, block = _grid(c, plan, max(1, plan.max_count * plan.itemsize // w))
    got = _launch(harness, "scatter", plan.table, staging, big.reshape(-1).view(np.uint8),
                  word=w, grid=grid, block=block, fill=fill_bytes(fill, dt),
                  mis=c["mis"], ptr=(0, origin))
    np.testing.assert_array_equal(got, expect.reshape(-1).view(np.uint8))


def _window(copy: np.ndarray, big: np.ndarray, view: np.ndarray) -> np.ndarray:
    """``view``'s window into ``copy`` (a copy of ``big``, the array it views)."""
    return np.ndarray(view.shape, view.dtype, copy.reshape(-1).view(np.uint8),
                      _origin(big, view), view.strides)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatter_cases())
def test_gather_kernel_matches_numpy_twin(harness, c):
    dt, items, splan, _staging, big, value, fill = _scatter_setup(c)
    big[...] = np.random.default_rng(c["seed"] + 1).integers(
        0, 256, big.nbytes, dtype=np.uint8).view(dt).reshape(big.shape)
    swap = int(splan.table["swap"][0]) if len(splan.table) else 0
    plan = build_plan(items, RegularChunkGrid(c["chunks"]).stored_chunk_shape, value.shape,
                      value.strides, dt.itemsize, chunk_order=c["order"], swap=swap, pad=True)
    if len(plan.table) == 0:
        return
    # read-modify-write rows keep the slot outside the region
    plan.table["flags"][::2] &= ~np.int32(2)
    initial = np.random.default_rng(c["seed"] + 2).integers(0, 256, plan.staging_nbytes,
                                                            dtype=np.uint8)
    expect = initial.copy()
    execute_gather_numpy(plan.table, expect, value, fill)
    origin = _origin(big, value)
    ma, mb, mf = c["mis"]
    w = copy_word(plan.table, plan.itemsize,
                  [_ptr_mod(ma, origin), _ptr_mod(mb, 0), _ptr_mod(mf, 0)])
    work = max(1, int(plan.table["chunk_count"].max()) * plan.itemsize // w)
    grid, block = _grid(c, plan, work)
    got = _launch(harness, "gather", plan.table, big.reshape(-1).view(np.uint8), initial,
                  word=w, grid=grid, block=block, fill=fill_bytes(fill, dt),
                  mis=c["mis"], ptr=(origin, 0))
    np.testing.assert_array_equal(got, expect)


def _simple_plan(itemsize: int = 8):
    """A 2-d read of 3 x 2 chunks with a reversed, strided selection."""
    shape, chunks = (11, 7), (4, 5)
    dims = [DimGrid(s, ch) for s, ch in zip(shape, chunks)]
    p = normalize_numpy((slice(None, None, -2), slice(1, None)), shape, dims)
    items = chunk_items(p.projections)
    out = np.zeros(p.buffer_shape, f"V{itemsize}")
    plan = build_plan(items, RegularChunkGrid(chunks).stored_chunk_shape, out.shape,
                      out.strides, itemsize, present=[k != 1 for k in range(len(items))])
    staging = np.random.default_rng(5).integers(0, 256, plan.staging_nbytes, dtype=np.uint8)
    return items, plan, staging, out


@pytest.mark.parametrize("bias", [2**31 - 16, 2**31, 2**32, 2**32 + 2**31 + 16, 2**40])
@pytest.mark.parametrize("word", [1, 8, 16])
def test_offsets_past_4_gib_use_64_bits(harness, bias, word):
    """Staging slots and output positions beyond 2**31 / 2**32 bytes: the same
    copy with the buffers' pointers lowered by ``bias`` and every row's offsets
    raised by it gives the same bytes (a 32-bit offset would land elsewhere)."""
    _items, plan, staging, out = _simple_plan(16)
    fill = np.arange(16, dtype=np.uint8)
    expect = out.copy()
    execute_plan_numpy(plan.table, staging, expect, fill.view("V16")[0])
    table = plan.table.copy()
    table["src_offset"] += np.where(table["flags"] & 1, 0, bias)
    table["dst_offset"] += bias
    got = _launch(harness, "scatter", table, staging, out.reshape(-1).view(np.uint8),
                  word=word, grid=(2, 2), block=8, fill=fill, ptr=(-bias, -bias))
    np.testing.assert_array_equal(got, expect.reshape(-1).view(np.uint8))
    # and the reverse: value -> slots of a staging buffer past 4 GiB
    gplan = build_plan(_items, RegularChunkGrid((4, 5)).stored_chunk_shape, out.shape,
                       out.strides, 16, pad=True)
    initial = np.zeros(gplan.staging_nbytes, np.uint8)
    gexpect = initial.copy()
    execute_gather_numpy(gplan.table, gexpect, expect, fill.view("V16")[0])
    gtable = gplan.table.copy()
    gtable["src_offset"] += bias
    gtable["dst_offset"] += bias
    got = _launch(harness, "gather", gtable, expect.reshape(-1).view(np.uint8), initial,
                  word=word, grid=(2, 2), block=8, fill=fill, ptr=(-bias, -bias))
    np.testing.assert_array_equal(got, gexpect)


@pytest.mark.parametrize("word,off", [(8, 4), (16, 8)])
def test_sanitizer_catches_a_misaligned_word(harness, word, off):
    """The harness does see misalignment: ``word``-byte words on an output
    ``off`` bytes off (16: cuzarr_w16 is 16-byte aligned, one 128-bit access)."""
    _items, plan, staging, out = _simple_plan(word)
    _out, err = _launch(harness, "scatter", plan.table, staging,
                        out.reshape(-1).view(np.uint8), word=word, grid=(1, 1), block=4,
                        fill=np.zeros(word, np.uint8), mis=(0, off, 0), expect_fail=True)
    if "runtime error" not in err:
        pytest.skip("the host compiler has no alignment sanitizer")
    assert "misaligned" in err


# --- shuffle and unshuffle ---------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    blocks=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3000)), min_size=1,
                    max_size=6),
    mis=st.tuples(st.integers(0, 15), st.integers(0, 15)),
    tiny=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_shuffle_kernels_match_numpy_twins(harness, blocks, mis, tiny, seed):
    rng = np.random.default_rng(seed)
    rows = np.zeros(len(blocks), formats.UNSHUFFLE_DTYPE)
    pos = 0
    for k, (ts, nb) in enumerate(blocks):
        rows[k] = (pos, pos + 7, nb, ts, 0)  # the output lies 7 bytes further on
        pos += nb + 3
    src = rng.integers(0, 256, pos + 16, dtype=np.uint8)
    grid = (1, 2) if tiny else kernels.row_grid(int(rows["nbytes"].max()), len(rows), 256)
    block = 3 if tiny else 256
    for mode, twin in (("unshuffle", formats.unshuffle_numpy),
                       ("shuffle", formats.shuffle_numpy)):
        initial = rng.integers(0, 256, pos + 16, dtype=np.uint8)
        expect = initial.copy()
        twin(rows, src, expect)
        got = _launch(harness, mode, rows, src, initial, grid=grid, block=block,
                      mis=(*mis, 0))
        np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("bias", [2**31, 2**32 + 8, 2**40])
def test_unshuffle_offsets_past_4_gib(harness, bias):
    rows = np.zeros(2, formats.UNSHUFFLE_DTYPE)
    rows[0] = (0, 0, 1003, 4, 0)
    rows[1] = (1008, 1008, 96, 8, 0)
    src = np.random.default_rng(1).integers(0, 256, 1104, dtype=np.uint8)
    expect = np.zeros(1104, np.uint8)
    formats.unshuffle_numpy(rows, src, expect)
    biased = rows.copy()
    biased["src_offset"] += bias
    biased["dst_offset"] += bias
    got = _launch(harness, "unshuffle", biased, src, np.zeros(1104, np.uint8), grid=(2, 2),
                  block=16, ptr=(-bias, -bias))
    np.testing.assert_array_equal(got, expect)
