"""Device-free checks of the code only a GPU runs: the kernel launches in
``gpu/executor.py``, ``gpu/writer.py`` and ``gpu/checksums.py`` against the kernels'
parameter lists, the descriptor structs' field offsets (nvcc's host compiler)
against the numpy dtypes, and ``GpuExecutor``'s handling of nvCOMP errors (with a
stand-in nvCOMP module)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from cuzarr.errors import CodecError
from cuzarr.gpu import kernels
from cuzarr.gpu.formats import UNSHUFFLE_DTYPE
from cuzarr.gpu.plan import PLAN_DTYPE

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "src" / "cuzarr" / "gpu"


# --- kernel signatures vs launch sites ------------------------------------------------


def _kernel_params() -> dict[str, list[str]]:
    """kernel name -> parameter types ("ptr" or the scalar C type)."""
    out = {}
    for cu in sorted(kernels.kernel_dir().glob("*.cu")):
        text = re.sub(r"//[^\n]*", "", cu.read_text())
        text = re.sub(r"#ifdef CUZARR_NVCC_CHECK.*?#endif", "", text, flags=re.S)
        for m in re.finditer(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", text):
            params = []
            for p in m.group(2).split(","):
                p = " ".join(p.split())
                if "*" in p:
                    params.append("ptr")
                else:
                    params.append(" ".join(p.split()[:-1]))  # drop the name
            out[m.group(1)] = params
    return out


_CONST = {
    "SCATTER": "cuzarr_scatter",
    "GATHER": "cuzarr_gather",
    "UNSHUFFLE": kernels.UNSHUFFLE,
    "SHUFFLE": kernels.SHUFFLE,
    "CHECKSUMS": kernels.CHECKSUMS,
}
_SCALARS = {"int64": "long long", "int32": "int", "uint32": "unsigned int",
            "uint64": "unsigned long long"}


def _launches() -> list[tuple[str, str, list[ast.expr]]]:
    """(where, kernel name, argument nodes) of every ``fn(grid, block, (...))``
    whose ``fn`` comes from ``kernels.get_function`` in the same function."""
    found = []
    for path in (GPU / "executor.py", GPU / "writer.py", GPU / "checksums.py"):
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            kernel_of: dict[str, str] = {}
            for node in ast.walk(func):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and getattr(node.value.func, "attr", None) == "get_function"):
                    names = [n.attr for n in ast.walk(node.value.args[1])
                             if isinstance(n, ast.Attribute) and n.attr in _CONST]
                    assert len(names) == 1, ast.dump(node.value)
                    kernel_of[node.targets[0].id] = _CONST[names[0]]
            for node in ast.walk(func):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in kernel_of):
                    assert len(node.args) == 3 and isinstance(node.args[2], ast.Tuple), (
                        f"{path.name}:{node.lineno}: launch as fn(grid, block, (args...))")
                    found.append((f"{path.name}:{node.lineno}", kernel_of[node.func.id],
                                  list(node.args[2].elts)))
    return found


def test_every_kernel_launch_matches_its_parameter_list():
    params = _kernel_params()
    launches = _launches()
    assert {k for _, k, _ in launches} == set(params), (sorted(params), launches)
    for where, name, args in launches:
        want = params[name]
        assert len(args) == len(want), f"{where}: {name} takes {len(want)} arguments"
        for i, (a, p) in enumerate(zip(args, want, strict=True)):
            scalar = (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
                      and isinstance(a.func.value, ast.Name) and a.func.value.id == "np")
            if p == "ptr":
                assert not scalar and not isinstance(a, ast.Constant), (
                    f"{where}: argument {i} of {name} must be a device array")
            else:
                # A bare Python int is passed by CuPy with a type of its choosing:
                # every scalar goes through an explicit numpy type.
                assert scalar, f"{where}: argument {i} of {name} ({p}) needs np.<type>(...)"
                assert _SCALARS.get(a.func.attr) == p, (
                    f"{where}: argument {i} of {name} is np.{a.func.attr}, the kernel "
                    f"takes {p}")


def test_launch_grids_stay_within_cuda_limits():
    """grid.y is capped at 65535 (CUDA's limit) wherever rows walk blockIdx.y:
    every row kernel launch takes its grid from ``kernels.row_grid``."""
    for work, nrows in [(0, 1), (1, 1), (10**12, 10**9), (2**40, 70_000), (255, 65_536)]:
        gx, gy = kernels.row_grid(work, nrows, 256)
        assert 1 <= gx <= 1024 and 1 <= gy <= 65535 and gy <= max(nrows, 1)
    assert kernels.row_grid(10**6, 3, 256) == (1024, 3)
    assert kernels.row_grid(300, 70_000, 256) == (2, 65535)
    for where, name, _args in _launches():
        if name == kernels.CHECKSUMS:
            continue  # a 1-d grid over blocks (grid-stride in x)
        path, line = where.split(":")
        lines = (GPU / path).read_text().splitlines()[: int(line)]
        grid_line = next(t for t in reversed(lines) if "grid" in t and "=" in t)
        assert "kernels.row_grid(" in grid_line, f"{where}: {grid_line.strip()}"


# --- struct layout: offsets the device compiler uses ------------------------------------


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc is None:
        pytest.skip("nvcc not found")
    return nvcc


def test_descriptor_struct_offsets_match_numpy(tmp_path):
    """Every field of cuzarr_plan_row / cuzarr_unshuffle_row sits at the offset
    numpy packs it at (offsetof through nvcc's host compiler, the same front end
    as the device code)."""
    nvcc = _nvcc()
    lines = []
    for struct, dt in (("cuzarr_plan_row", PLAN_DTYPE), ("cuzarr_unshuffle_row", UNSHUFFLE_DTYPE)):
        lines.append(f'std::printf("{struct} sizeof %zu\\n", sizeof({struct}));')
        for name in dt.names:
            lines.append(f'std::printf("{struct} {name} %zu %zu\\n", '
                         f'offsetof({struct}, {name}), sizeof((({struct}*)0)->{name}));')
    src = tmp_path / "layout.cu"
    src.write_text('#include <cstddef>\n#include <cstdio>\n#include "cuzarr_plan.cuh"\n'
                   "int main() {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    r = subprocess.run([nvcc, "-std=c++17", "-arch=sm_80", "-I", str(kernels.kernel_dir()),
                        str(src), "-o", str(exe)], capture_output=True, text=True, timeout=240)
    if r.returncode != 0 and ("gcc" in r.stderr or "host compiler" in r.stderr):
        pytest.skip(f"nvcc has no usable host compiler: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
    got = {}
    for line in out.splitlines():
        parts = line.split()
        got[(parts[0], parts[1])] = tuple(int(x) for x in parts[2:])
    for struct, dt in (("cuzarr_plan_row", PLAN_DTYPE), ("cuzarr_unshuffle_row", UNSHUFFLE_DTYPE)):
        assert got[(struct, "sizeof")] == (dt.itemsize,)
        for name in dt.names:
            fdt, off = dt.fields[name][:2]
            assert got[(struct, name)] == (off, fdt.itemsize), (struct, name)


# --- GpuExecutor with a stand-in nvCOMP -------------------------------------------------


# what the executor asks of CuPy in these tests: the current device (none here)
_NO_CUPY = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda: None))


class _Stream:
    ptr = 0

    def synchronize(self):
        pass


class _FailingCodec:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def decode(self, srcs, out=None):
        raise self.exc


def _fake_nvcomp(monkeypatch):
    mod = types.ModuleType("nvidia.nvcomp")
    mod.as_arrays = lambda buf, offsets, sizes, stream=0: list(zip(offsets, sizes, strict=True))
    pkg = types.ModuleType("nvidia")
    pkg.nvcomp = mod
    monkeypatch.setitem(sys.modules, "nvidia", pkg)
    monkeypatch.setitem(sys.modules, "nvidia.nvcomp", mod)


def _lz4_batch(nchunks: int):
    import numcodecs

    from cuzarr.core.engine import chunk_items
    from cuzarr.gpu.executor import prepare_batch
    from cuzarr.indexing.selection import normalize_numpy
    from cuzarr.metadata.chunk_grid import DimGrid, RegularChunkGrid

    shape, chunks = (8 * nchunks,), (8,)
    p = normalize_numpy((slice(None),), shape, [DimGrid(shape[0], 8)])
    items = chunk_items(p.projections)
    codec = numcodecs.LZ4()
    datas = [codec.encode(np.arange(8, dtype="<f8") + k) for k in range(len(items))]
    names = [f"a/c/{k}" for k in range(len(items))]
    out = np.zeros(shape, "<f8")
    return prepare_batch(items, datas, RegularChunkGrid(chunks).stored_chunk_shape, out.shape,
                         out.strides, np.dtype("<f8"), "lz4", lambda d, s: None, names=names)


@pytest.mark.parametrize("exc", [ValueError("output buffer too small"),
                                 RuntimeError("nvcompErrorCannotDecompress")])
@pytest.mark.parametrize("nchunks", [1, 5])
def test_nvcomp_decode_failure_is_a_codec_error(monkeypatch, exc, nchunks):
    """nvCOMP raises ValueError (an output too small for what a corrupt stream
    decodes to) or RuntimeError (a failed chunk status); the device read raises
    CodecError naming the key(s), as the host twin does."""
    from cuzarr.gpu.executor import GpuExecutor
    from cuzarr.gpu.subbatch import Pending, split_batch

    _fake_nvcomp(monkeypatch)
    batch = _lz4_batch(nchunks)
    ex = object.__new__(GpuExecutor)
    ex.stream = _Stream()
    ex.cp = _NO_CUPY
    ex._codecs = {("lz4", 0): _FailingCodec(exc)}
    staging = np.zeros(batch.plan.staging_nbytes, np.uint8)
    (sub,) = split_batch(batch, 1 << 30)
    with pytest.raises(CodecError, match="a/c/0") as info:
        ex._decode_streams(sub, sub.packed, staging, np.zeros(1, np.uint8), ex.stream, Pending())
    assert info.value.__cause__ is exc


class _Sizes:
    def __init__(self, sizes):
        self.buffer_sizes = sizes


class _SizedCodec:
    """Decodes nothing; reports the sizes it is given (one stream short)."""

    def __init__(self, short: int | None) -> None:
        self.short = short

    def decode(self, srcs, out=None):
        sizes = [n for _off, n in out]
        if self.short is not None:
            sizes[self.short] -= 1
        return _Sizes(sizes)


@pytest.mark.parametrize("short", [0, 3])
def test_nvcomp_size_checks_are_deferred_to_the_reads_one_wait(monkeypatch, short):
    """A stream decoding to another size than its header says is reported when
    the read settles its batches (one wait at the end), not per decode call;
    the error names the chunk, in the sub-batch that holds it."""
    from cuzarr.gpu.executor import GpuExecutor
    from cuzarr.gpu.subbatch import Pending, split_batch

    _fake_nvcomp(monkeypatch)
    batch = _lz4_batch(5)
    ex = object.__new__(GpuExecutor)
    ex.stream = _Stream()
    ex.cp = _NO_CUPY
    ex._codecs = {("lz4", 0): _SizedCodec(0)}
    staging = np.zeros(batch.plan.staging_nbytes, np.uint8)
    subs = split_batch(batch, 1)  # one chunk a sub-batch
    assert [(s.k0, s.k1) for s in subs] == [(k, k + 1) for k in range(5)]
    pending = Pending()
    for k, sub in enumerate(subs):
        ex._codecs = {("lz4", 0): _SizedCodec(0 if k == short else None)}
        ex._decode_streams(sub, sub.packed, staging, np.zeros(1, np.uint8), ex.stream, pending)
    assert len(pending.checks) == 5
    with pytest.raises(CodecError, match=f"a/c/{short}: lz4 stream decoded to"):
        pending.settle()


# --- GpuEncoder's empty-chunk check, with numpy standing in for CuPy -------------------


@pytest.mark.parametrize("dtype,fill", [("<f4", 0.0), ("<f8", float("nan")), ("<c8", 1 + 2j),
                                        ("|b1", False), ("<i2", 7)])
def test_gpu_encoder_empty_check_without_byte_indices(dtype, fill):
    """Slots of one size lying unevenly (edge chunks between them) are compared
    as copies, not gathered through an int64 index per byte (8x their size in
    device memory): the stand-in for CuPy has no ``arange`` to build one."""
    from cuzarr.gpu.plan import STAGING_ALIGN
    from cuzarr.gpu.writer import EncodeBatch, GpuEncoder, HostEncoder

    dt = np.dtype(dtype)
    sizes = [64, 64, 48, 64, 48, 64, 16]  # elements; 64s and 48s interleaved
    offsets, p = [], 0
    for n in sizes:
        offsets.append(p)
        p += -(-n * dt.itemsize // STAGING_ALIGN) * STAGING_ALIGN
    staging = np.zeros(p, np.uint8)
    rng = np.random.default_rng(0)
    for k, (o, n) in enumerate(zip(offsets, sizes, strict=True)):
        chunk = np.full(n, fill, dt)
        if k in (1, 2, 6):  # not empty: one element differs
            chunk[rng.integers(n)] = np.ones((), dt) if dt.kind != "b" else True
        staging[o : o + n * dt.itemsize] = chunk.view(np.uint8)
    nbytes = [n * dt.itemsize for n in sizes]
    batch = EncodeBatch(None, "zstd", 1, fill, dt, 0, True)
    want = HostEncoder()._empty(staging, offsets, nbytes, batch)
    assert want.tolist() == [True, False, False, True, True, True, False]
    enc = object.__new__(GpuEncoder)
    enc.cp = types.SimpleNamespace(stack=np.stack, asarray=np.asarray)
    np.testing.assert_array_equal(enc._empty(staging, offsets, nbytes, batch), want)


# --- GpuExecutor's stream schedule, with stand-in streams -------------------------------


class _Event:
    def __init__(self, stream: _RecStream, seq: int) -> None:
        self.stream, self.seq, self.done = stream, seq, True

    def synchronize(self):
        pass


class _RecStream:
    """A stream that logs what is queued on it: waits, records, allocations and
    sub-batches (the current stream is the innermost ``with``)."""

    current: list[_RecStream] = []

    def __init__(self, name: str) -> None:
        self.name, self.log = name, []
        self.ptr = id(self)

    def record(self):
        ev = _Event(self, len(self.log))
        self.log.append(("record", ev.seq))
        return ev

    def wait_event(self, ev):
        self.log.append(("wait", ev.stream.name, ev.seq))

    def synchronize(self):
        pass

    def __enter__(self):
        _RecStream.current.append(self)
        return self

    def __exit__(self, *exc):
        _RecStream.current.pop()


def _rec_cupy():
    made = []

    def stream(non_blocking=False):
        made.append(_RecStream(f"side{len(made) + 1}"))
        return made[-1]

    def empty(n, dtype=None):
        _RecStream.current[-1].log.append(("alloc", int(n)))
        return np.empty(n, np.uint8)

    return types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=stream), empty=empty,
                                 uint8=np.uint8)


def _rec_executor(monkeypatch):
    from cuzarr.gpu.executor import GpuExecutor

    ex = object.__new__(GpuExecutor)
    ex.cp = _rec_cupy()
    ex.stream = _RecStream("main")
    ex._extra, ex._codecs, ex._keep, ex._turn = [], {}, [], 0
    ex._keep_lock = __import__("threading").Lock()
    ran = []

    def run_sub(sub, st, staging, scratch, out, fill, pending):
        assert _RecStream.current[-1] is st  # queued on the stream it was given
        st.log.append(("sub", sub.k0, sub.k1))
        ran.append((st.name, sub.k0, sub.k1))

    monkeypatch.setattr(ex, "_run_sub", run_sub)
    return ex, ran


def test_batches_of_one_sub_batch_alternate_side_streams(monkeypatch):
    """Batches of one sub-batch (the default read batch) run on the executor's
    side streams in turn, each waiting for the main stream's position (the
    caller's stream) only, never for an earlier batch: consecutive batches of
    one executor overlap. Their staging is allocated on the stream they use,
    and the batch's event is recorded there."""
    import cuzarr

    ex, ran = _rec_executor(monkeypatch)
    batch = _lz4_batch(4)
    with cuzarr.config.set({"gpu.streams": 2, "gpu.sub_batch_bytes": 1 << 30}):
        pend = [ex.run(batch, None, 0) for _ in range(4)]
    assert [r[0] for r in ran] == ["side1", "side2", "side1", "side2"]
    assert all((k0, k1) == (0, 4) for _s, k0, k1 in ran)
    main = ex.stream.log
    assert all(e[0] == "record" for e in main)  # main only marks the caller's position
    for p, name in zip(pend, ["side1", "side2", "side1", "side2"], strict=True):
        assert p.event.stream.name == name
    side1 = ex._extra[0].log
    # wait for main, allocate staging and scratch, the sub-batch, its event; twice
    assert [e[0] for e in side1] == ["wait", "alloc", "alloc", "sub", "record"] * 2
    assert all(e[1] == "main" for e in side1 if e[0] == "wait")


def test_batches_of_several_sub_batches_join_on_the_main_stream(monkeypatch):
    """A batch cut into several sub-batches spreads them over the main and side
    streams after its staging is allocated on the main stream, which then waits
    for every one (the staging is freed in its order)."""
    import cuzarr

    ex, ran = _rec_executor(monkeypatch)
    batch = _lz4_batch(4)
    with cuzarr.config.set({"gpu.streams": 2, "gpu.sub_batch_bytes": 1}):
        p = ex.run(batch, None, 0)
    assert [r[0] for r in ran] == ["main", "side1", "main", "side1"]
    assert [(k0, k1) for _s, k0, k1 in ran] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert p.event.stream is ex.stream
    waits = [e for e in ex.stream.log if e[0] == "wait"]
    assert [w[1] for w in waits] == ["main", "side1", "main", "side1"]
    assert ex.stream.log[0] == ("alloc", batch.plan.staging_nbytes)
