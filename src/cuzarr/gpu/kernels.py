"""Load the CUDA sources in ``kernels/`` and compile them with CuPy, cached.

The sources ship inside the wheel as ``cuzarr/gpu/_kernels/*.cu`` (copied there by
setup.py's build step); in a source checkout or an editable install they are read
from the repository's top-level ``kernels/``. ``module()`` compiles with
``cupy.RawModule`` (NVRTC) once per process and device; kernels are looked up by
their ``name_expressions``. ``compile_check(arch)`` compiles the same sources with
NVRTC directly, which needs no device (used by the CPU test suite).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKSUMS",
    "GATHER",
    "NAME_EXPRESSIONS",
    "SCATTER",
    "SHUFFLE",
    "UNSHUFFLE",
    "compile_check",
    "get_function",
    "kernel_dir",
    "module",
    "row_grid",
    "source",
    "word_type",
]

WORD_TYPES = {
    1: "unsigned char",
    2: "unsigned short",
    4: "unsigned int",
    8: "unsigned long long",
    16: "cuzarr_w16",
}
SCATTER = "cuzarr_scatter<{}>"
GATHER = "cuzarr_gather<{}>"
UNSHUFFLE = "cuzarr_unshuffle"
SHUFFLE = "cuzarr_shuffle"
CHECKSUMS = "cuzarr_block_checksums"
SOURCES = ("scatter.cu", "unshuffle.cu", "checksum.cu")
NAME_EXPRESSIONS = {
    "scatter.cu": tuple(SCATTER.format(w) for w in WORD_TYPES.values())
    + tuple(GATHER.format(w) for w in WORD_TYPES.values()),
    "unshuffle.cu": (),
    "checksum.cu": (),
}
OPTIONS = ("-std=c++17",)


def kernel_dir() -> Path:
    """The folder holding the ``.cu`` sources (installed package data first)."""
    here = Path(__file__).resolve().parent
    for cand in (here / "_kernels", here.parents[2] / "kernels"):
        if (cand / "scatter.cu").is_file():
            return cand
    raise FileNotFoundError(
        f"cuzarr's CUDA kernel sources were not found (looked in {here / '_kernels'} "
        f"and {here.parents[2] / 'kernels'})"
    )


@functools.cache
def source(name: str) -> str:
    """One kernel file, with ``#include "cuzarr_plan.cuh"`` inlined (NVRTC then needs
    no include path)."""
    kdir = kernel_dir()
    text = (kdir / name).read_text()
    header = (kdir / "cuzarr_plan.cuh").read_text().replace("#pragma once", "")
    return text.replace('#include "cuzarr_plan.cuh"', header)


# CUDA's limits on a launch grid: x up to 2**31 - 1 blocks, y (and z) up to 65535.
# The row kernels (scatter, gather, shuffle, unshuffle) walk rows along y and the
# work of a row along x, both grid-stride, so any grid within these caps is right.
MAX_GRID_X = 1024  # blocks across a row's work (more would only queue)
MAX_GRID_Y = 65535


def row_grid(work: int, nrows: int, threads: int) -> tuple[int, int]:
    """The ``(x, y)`` grid of a row kernel launch: x blocks of ``threads`` cover
    the ``work`` items (words, bytes) of the largest row, y one row each, within
    CUDA's limits (the kernels loop over what the grid leaves)."""
    return (min(MAX_GRID_X, max(1, -(-int(work) // int(threads)))),
            max(1, min(int(nrows), MAX_GRID_Y)))


def word_type(nbytes: int) -> str:
    """The C type of a copy word of ``nbytes`` bytes."""
    return WORD_TYPES[nbytes]


@functools.cache
def _module(name: str, device: int) -> Any:
    from cuzarr.buffer.gpu import import_cupy

    cp = import_cupy()
    mod = cp.RawModule(
        code=source(name), options=OPTIONS, name_expressions=list(NAME_EXPRESSIONS[name])
    )
    mod.compile()
    return mod


def module(name: str) -> Any:
    """The compiled ``cupy.RawModule`` for ``name`` on the current device."""
    from cuzarr.buffer.gpu import import_cupy

    return _module(name, int(import_cupy().cuda.runtime.getDevice()))


def get_function(name: str, kernel: str) -> Any:
    """A kernel (a name expression such as ``cuzarr_scatter<unsigned int>``)."""
    return module(name).get_function(kernel)


def compile_check(arch: str = "90", names: tuple[str, ...] = SOURCES) -> dict[str, int]:
    """Compile every source with NVRTC for ``sm_<arch>`` without a device; returns
    the cubin size per file. Raises ``RuntimeError`` with NVRTC's log on failure."""
    from cupy.cuda import nvrtc

    sizes = {}
    for name in names:
        prog = nvrtc.createProgram(source(name), name, (), ())
        try:
            for expr in NAME_EXPRESSIONS[name]:
                nvrtc.addNameExpression(prog, expr)
            try:
                nvrtc.compileProgram(prog, [*OPTIONS, f"-arch=sm_{arch}"])
            except Exception as e:
                raise RuntimeError(f"{name} [sm_{arch}]: {e}\n{nvrtc.getProgramLog(prog)}") from e
            for expr in NAME_EXPRESSIONS[name]:
                nvrtc.getLoweredName(prog, expr)
            sizes[name] = len(nvrtc.getCUBIN(prog))
        finally:
            nvrtc.destroyProgram(prog)
    return sizes
