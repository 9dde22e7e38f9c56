"""Kernels and the device executor against their numpy twins (needs a GPU)."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

cp = pytest.importorskip("cupy")

from cuzarr.buffer import gpu_prototype, pinned_prototype  # noqa: E402
from cuzarr.core.engine import chunk_items  # noqa: E402
from cuzarr.gpu.executor import GpuExecutor, prepare_batch, stream_kind  # noqa: E402
from cuzarr.gpu.plan import build_plan, execute_plan_numpy  # noqa: E402
from cuzarr.indexing.selection import normalize_numpy  # noqa: E402
from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid  # noqa: E402


def test_prototypes():
    a = gpu_prototype.full((3, 4), 7, "<i4")
    assert isinstance(a, cp.ndarray) and int(a.sum()) == 84
    h = pinned_prototype.empty((5,), "f8")
    assert isinstance(h, np.ndarray) and h.shape == (5,)


def _case(compressor, sel, dtype="<f8", shape=(37, 29), chunks=(8, 7)):
    full = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    grid = RegularChunkGrid(chunks)
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks)]
    p = normalize_numpy(sel, shape, dims)
    items = chunk_items(p.projections)
    datas = []
    for k, it in enumerate(items):
        region = tuple(slice(c * ch, (c + 1) * ch) for c, ch in zip(it[0], chunks))
        chunk = np.zeros(chunks, full.dtype)
        part = full[region]
        chunk[: part.shape[0], : part.shape[1]] = part
        raw = chunk.tobytes()
        datas.append(None if k == 2 else raw if compressor is None else compressor.encode(raw))
    return full, grid, p, items, datas


@pytest.mark.parametrize(
    "compressor",
    [None, numcodecs.Zstd(level=1), numcodecs.LZ4(), numcodecs.Zlib(1), numcodecs.GZip(1),
     numcodecs.Blosc("lz4", shuffle=1), numcodecs.Blosc("zstd", shuffle=1),
     numcodecs.Blosc("blosclz", shuffle=1), numcodecs.BZ2()],
)
@pytest.mark.parametrize("sel", [(slice(None), slice(None)), (slice(3, 30, 2), slice(None, None, -3))])
def test_executor_matches_numpy(compressor, sel):
    full, grid, p, items, datas = _case(compressor, sel)

    def cpu_decode(data, shape):
        raw = data if compressor is None else compressor.decode(data)
        return np.frombuffer(raw, full.dtype).reshape(shape)

    out = cp.zeros(p.buffer_shape, full.dtype)
    batch = prepare_batch(items, datas, grid.stored_chunk_shape, out.shape, out.strides,
                          full.dtype, stream_kind(compressor), cpu_decode)
    ex = GpuExecutor()
    ex.run(batch, out, -1.0).settle()  # the one wait, then the deferred size checks
    ref = full.copy()
    c = items[2][0]
    ref[tuple(slice(a * ch, (a + 1) * ch) for a, ch in zip(c, (8, 7)))] = -1.0
    np.testing.assert_array_equal(cp.asnumpy(out), ref[sel])


@pytest.mark.parametrize("dtype", ["u1", "<i2", "<f4", "<c16", "V3"])
def test_scatter_kernel_vs_numpy_executor(dtype):
    rng = np.random.default_rng(0)
    shape, chunks = (19, 11, 6), (4, 3, 5)
    dims = [DimGrid(s, c) for s, c in zip(shape, chunks)]
    sel = (slice(1, 18, 2), slice(None, None, -1), 3)
    p = normalize_numpy(sel, shape, dims)
    items = chunk_items(p.projections)
    dt = np.dtype(dtype)
    plan = build_plan(items, RegularChunkGrid(chunks).stored_chunk_shape, p.buffer_shape,
                      np.empty(p.buffer_shape, dt).strides, dt.itemsize,
                      present=[k % 5 != 1 for k in range(len(items))])
    staging = rng.integers(0, 256, plan.staging_nbytes, dtype=np.uint8)
    fill = np.zeros((), dt)
    host = np.zeros(p.buffer_shape, dt)
    execute_plan_numpy(plan.table, staging, host, fill)
    dev = cp.zeros(p.buffer_shape, dt) if dt.kind != "V" else cp.zeros(
        p.buffer_shape + (dt.itemsize,), cp.uint8)[..., 0]
    if dt.kind == "V":
        pytest.skip("void dtypes are not CuPy dtypes; covered through uint8 views")
    ex = GpuExecutor()
    with ex.stream:
        ex.scatter(plan, cp.asarray(staging), dev, fill)
    ex.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(dev), host)


def test_torch_dlpack():
    torch = pytest.importorskip("torch")
    x = cp.arange(10, dtype=cp.float32)
    t = torch.from_dlpack(x)
    assert t.device.type == "cuda" and float(t.sum()) == 45.0


_LIFETIME = r"""
import gc, sys, threading
import numcodecs, numpy as np, cupy as cp
import cuzarr
from cuzarr.gpu.executor import GpuExecutor
from cuzarr.gpu.writer import GpuEncoder

# an executor and an encoder that made nvCOMP codecs, dropped in this thread
ex = GpuExecutor()
ex._codec("zstd"); ex._codec("lz4")
enc = GpuEncoder()
enc._codec("zstd")
del ex, enc
gc.collect()

# reads and writes through the shared executors and encoders while the pool
# threads change (the pool is rebuilt when its size changes); at exit the
# pooled ones release their codecs before their streams
a = cuzarr.create_array(store=sys.argv[1], shape=(64, 4096), chunks=(8, 4096), dtype="f4",
                        compressors=[{"name": "zstd", "configuration": {"level": 1}}])
ref = np.arange(64 * 4096, dtype="f4").reshape(64, 4096)
for workers in (4, 2, 3):
    with cuzarr.config.set({"threading.max_workers": workers}):
        with cuzarr.config.enable_gpu():
            a[...] = cp.asarray(ref)
            got = a[...]
        assert (cp.asnumpy(got) == ref).all()
t = threading.Thread(target=lambda: GpuExecutor()._codec("zstd"))
t.start(); t.join()
gc.collect()
print("ok")
"""


def test_codecs_and_streams_released_safely(tmp_path):
    # An nvCOMP codec outliving its CUDA stream crashed the process when an
    # executor was dropped (end of a test, a pool thread's exit); a subprocess
    # turns such a crash into a failure instead of ending the test run.
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _LIFETIME, str(tmp_path / "a.zarr")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-3000:])


# --- sizes and addresses only a device shows (tests/test_gpu_kernels_host.py runs the
# same kernel source on the CPU with biased pointers; these run it on the GPU) ------


def _need_free(nbytes: int) -> None:
    free = cp.cuda.runtime.memGetInfo()[0]
    if free < nbytes:
        pytest.skip(f"needs {nbytes >> 30} GiB of free device memory, {free >> 30} free")


def _shifted(plan, shift: int):
    """``plan`` with its staging slots moved ``shift`` bytes further on."""
    from cuzarr.gpu.plan import ScatterPlan

    table = plan.table.copy()
    table["src_offset"] += np.where(table["flags"] & 1, 0, shift)
    return ScatterPlan(table, plan.staging_nbytes + shift, plan.slots + shift,
                       plan.slot_nbytes, plan.itemsize)


@pytest.mark.parametrize("stored", ["<c16", ">f8"])  # a 16-byte copy word; a swapping one
def test_scatter_and_gather_past_4_gib(stored):
    """A staging slot and an output region that start beyond 2**32 bytes: the
    kernels' offsets are 64-bit (a 32-bit one lands 4 GiB early)."""
    from cuzarr.gpu.writer import GpuEncoder

    _need_free(12 << 30)
    dt = np.dtype(stored)
    native = dt.newbyteorder("=")
    isz = dt.itemsize
    n = 1000
    k0 = (1 << 32) // isz + 3  # first output element, past 4 GiB
    swap = isz if dt.byteorder == ">" else 0
    items = [((0,), (slice(0, n),), (slice(k0, k0 + n),), True)]
    out = cp.zeros(k0 + n + 5, native)
    plan = _shifted(build_plan(items, [(n,)], out.shape, out.strides, isz, swap=swap),
                    (1 << 32) + 16)
    ref = (np.arange(n) * 1.5 - 7).astype(native)
    staging = cp.zeros(plan.staging_nbytes, cp.uint8)
    staging[-plan.slot_nbytes[0]:] = cp.asarray(ref.astype(dt).view(np.uint8))
    ex = GpuExecutor()
    with ex.stream:
        ex.scatter(plan, staging, out, 0)
    ex.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out[k0 - 3 : k0 + n + 3]),
                                  np.concatenate([np.zeros(3, native), ref, np.zeros(3, native)]))
    assert int(cp.count_nonzero(out[:k0])) == 0
    del staging
    cp.get_default_memory_pool().free_all_blocks()
    # the reverse: the value's region past 4 GiB into a slot past 4 GiB (padded)
    gplan = _shifted(build_plan(items, [(n + 2,)], out.shape, out.strides, isz, swap=swap,
                                pad=True), (1 << 32) + 32)
    gstaging = cp.zeros(gplan.staging_nbytes, cp.uint8)
    enc = GpuEncoder()
    with enc.stream:
        enc._gather(gplan, gstaging, out, 9, native)
    enc.stream.synchronize()
    got = cp.asnumpy(gstaging[-gplan.slot_nbytes[0]:]).view(dt)
    np.testing.assert_array_equal(got.astype(native), np.concatenate([ref, [9, 9]]).astype(native))


def test_scatter_row_of_more_than_2_31_elements():
    """One row of 2**31 + 77 one-byte elements, reversed into the output."""
    _need_free(9 << 30)
    n = (1 << 31) + 77
    items = [((0,), (slice(None, None, -1),), (slice(0, n),), True)]
    out = cp.zeros(n, cp.uint8)
    plan = build_plan(items, [(n,)], out.shape, out.strides, 1)
    staging = cp.empty(plan.staging_nbytes, cp.uint8)
    pattern = (cp.arange(4093, dtype=cp.int32) % 251).astype(cp.uint8)  # 4093: prime
    reps = -(-plan.staging_nbytes // 4093)
    staging[:] = cp.tile(pattern, reps)[: plan.staging_nbytes]
    ex = GpuExecutor()
    with ex.stream:
        ex.scatter(plan, staging, out, 0)
    ex.synchronize()
    assert bool((out[::-1] == staging[:n]).all())


def test_unshuffle_and_checksums_past_4_gib():
    import zlib

    from cuzarr.gpu import formats
    from cuzarr.gpu.checksums import device_chunk_checksums

    _need_free(10 << 30)
    base = (1 << 32) + 48
    rows = np.zeros(2, formats.UNSHUFFLE_DTYPE)
    rows[0] = (base, base + 16, 100_003, 4, 0)
    rows[1] = (base + 100_016, base + 100_032, 8192, 8, 0)
    span = 100_032 + 8192 + 64
    src_host = np.random.default_rng(0).integers(0, 256, span, dtype=np.uint8)
    scratch = cp.zeros(base + span, cp.uint8)
    scratch[base:] = cp.asarray(src_host)
    staging = cp.zeros(base + span, cp.uint8)
    ex = GpuExecutor()
    with ex.stream:
        ex._unshuffle(rows, scratch, staging)
    ex.synchronize()
    local = rows.copy()
    local["src_offset"] -= base
    local["dst_offset"] -= base
    expect = np.zeros(span, np.uint8)
    formats.unshuffle_numpy(local, src_host, expect)
    got = cp.asnumpy(staging[base:])
    np.testing.assert_array_equal(got, expect)
    del staging
    crc, adler = (device_chunk_checksums(scratch, [base + 3, base + 70_001], [70_000, 30_000],
                                         kind) for kind in ("crc32", "adler32"))
    for j, (o, n) in enumerate([(3, 70_000), (70_001, 30_000)]):
        assert int(crc[j]) == zlib.crc32(src_host[o : o + n].tobytes())
        assert int(adler[j]) == zlib.adler32(src_host[o : o + n].tobytes())


@pytest.mark.parametrize("shift", [1, 2, 4, 8])
def test_scatter_into_a_misaligned_output(shift):
    """An ``out=`` whose data pointer is only ``shift``-byte aligned: the copy word
    (``copy_word``) shrinks to what the addresses allow; a wider one would fault
    with a misaligned address."""
    full, grid, _p, items, datas = _case(None, (slice(None), slice(None)), dtype="<c16")
    nbytes = full.nbytes
    buf = cp.zeros(nbytes + 64, cp.uint8)
    try:
        out = buf[shift : shift + nbytes].view(cp.complex128).reshape(full.shape)
    except Exception as e:  # CuPy refusing a misaligned view
        pytest.skip(f"CuPy makes no misaligned view: {e}")
    batch = prepare_batch(items, datas, grid.stored_chunk_shape, out.shape, out.strides,
                          full.dtype, "none", lambda d, s: None)
    ex = GpuExecutor()
    ex.run(batch, out, -1.0).settle()  # the one wait, then the deferred size checks
    host = np.zeros(nbytes + 64, np.uint8)
    ref = full.copy()
    c = items[2][0]
    ref[tuple(slice(a * ch, (a + 1) * ch) for a, ch in zip(c, (8, 7)))] = -1.0
    host[shift : shift + nbytes] = ref.view(np.uint8).reshape(-1)
    np.testing.assert_array_equal(cp.asnumpy(buf), host)
