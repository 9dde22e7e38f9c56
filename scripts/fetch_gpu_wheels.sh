#!/usr/bin/env bash
# Downloads, on a machine with network access, the wheels a GPU machine without
# network needs to run tests_gpu/ and benchmarks/gpu.py (scripts/gpu_check.sh
# installs them there). Its image already has CuPy, NVRTC, cuFile, numpy, torch,
# pytest, hypothesis, xarray, tensorstore, aiohttp and fsspec; what cuzarr adds:
# its codecs (numcodecs, zstandard, crc32c, donfig, msgspec for zarr), nvCOMP, kvikio (with
# rapids-logger; cuFile and cuda-pathfinder are in the image), and
# zarr-python (the oracle and the GPU benchmark's peer). Into .whl/ (git-ignored).
#
#   bash scripts/fetch_gpu_wheels.sh          # then carry ".whl" to the device
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="$(bash scripts/bootstrap.sh | tail -n 1)"
mkdir -p .whl
platforms=()
for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# Versions pinned to what the CPU environment tests with.
pkgs=(
    "numcodecs==$("$py" -c 'import numcodecs; print(numcodecs.__version__)')"
    "zstandard==$("$py" -c 'import zstandard; print(zstandard.__version__)')"
    "google-crc32c==$("$py" -m pip show google-crc32c 2>/dev/null | awk '/^Version/ {print $2}')"
    "donfig==$("$py" -m pip show donfig 2>/dev/null | awk '/^Version/ {print $2}')"
    "zarr==$("$py" -c 'import zarr; print(zarr.__version__)')"
    "lz4==$("$py" -m pip show lz4 2>/dev/null | awk '/^Version/ {print $2}')"
    "msgspec==$("$py" -c 'import msgspec; print(msgspec.__version__)')"
    "nvidia-nvcomp-cu13==$("$py" -m pip show nvidia-nvcomp-cu13 2>/dev/null | awk '/^Version/ {print $2}')"
    "nvidia-libnvcomp-cu13==$("$py" -m pip show nvidia-libnvcomp-cu13 2>/dev/null | awk '/^Version/ {print $2}')"
    kvikio-cu13 libkvikio-cu13 "rapids-logger==0.3.*"
)
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "${pkgs[@]}"
# pure-Python ones (any platform)
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
    "typing_extensions>=4.12" "packaging>=24" "deprecated>=1.2"
du -sh .whl
ls .whl
