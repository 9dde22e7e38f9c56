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
    ex.run(batch, out, -1.0)
    ex.synchronize()
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
