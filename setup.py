"""Ships the CUDA sources in kernels/ inside the wheel as cuzarr/gpu/_kernels/,
and builds ``cuzarr.runtime._native`` (everything else is configured in
pyproject.toml). Editable installs read the kernels from kernels/ directly
(cuzarr.gpu.kernels.kernel_dir).

``cuzarr.runtime._native`` (the per-chunk loops of a batch read, in C) is
optional: where it does not build (no C compiler, not POSIX) cuzarr runs the
same steps in Python (cuzarr.runtime.native says which)."""

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent / "kernels"
        dst = Path(self.build_lib) / "cuzarr" / "gpu" / "_kernels"
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.glob("*.cu*")):
            shutil.copy2(f, dst / f.name)


native = [
    Extension(
        "cuzarr.runtime._native",
        [f"src/cuzarr/runtime/{name}.c"
         for name in ("_native", "_native_io", "_native_zstd", "_native_rows")],
        depends=["src/cuzarr/runtime/_native.h"],
        extra_compile_args=["-O2", "-std=c11"],
        optional=True,
    )
] if os.name == "posix" else []

setup(cmdclass={"build_py": BuildPyWithKernels}, ext_modules=native)
