"""Ships the CUDA sources in kernels/ inside the wheel as cuzarr/gpu/_kernels/
(everything else is configured in pyproject.toml). Editable installs read them
from kernels/ directly (cuzarr.gpu.kernels.kernel_dir)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent / "kernels"
        dst = Path(self.build_lib) / "cuzarr" / "gpu" / "_kernels"
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.glob("*.cu*")):
            shutil.copy2(f, dst / f.name)


setup(cmdclass={"build_py": BuildPyWithKernels})
