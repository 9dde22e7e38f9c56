#!/usr/bin/env bash
# The device checks, in one run on a GPU machine (no network): install the wheels
# from .whl/ (scripts/fetch_gpu_wheels.sh), compile the kernels with NVRTC and
# nvcc, run tests_gpu/, then benchmarks/gpu.py, its --host-only mode and
# benchmarks/gpu_phases.py. Logs and figures go to $OUT (or ./gpu-out): the
# figures as JSON (gpu_bench.json, gpu_host.json, gpu_phases.json: date, commit,
# host, CPUs, versions, device, every time), to be committed under
# benchmarks/results/.
#
#   device run, carry [".whl"]:  CUZARR_COMMIT=<git rev-parse HEAD> bash scripts/gpu_check.sh
#   (the device's copy of the tree has no .git: CUZARR_COMMIT names the commit in the JSON)
#   GIB=1 (benchmark size; 1 GiB fits a 15-minute device session), TESTS_ONLY=1 (skip the benchmark),
#   TOTAL_TIMEOUT=540 (seconds for the whole script: the device tool runs one command
#   for at most 600 s), TEST_TIMEOUT=240 / BENCH_TIMEOUT=200 / HOST_TIMEOUT=60 /
#   PHASES_TIMEOUT=60 (the most each part may take; each also stops in time for the
#   parts after it to keep a share of the total),
#   CODECS=zstd,lz4,blosc-lz4, PHASES=0 (skip gpu_phases.py)
set -uo pipefail
start=$SECONDS
total=${TOTAL_TIMEOUT:-540}
# budget WANT RESERVE: seconds a part may take, at most WANT, leaving RESERVE
# seconds of the total for the parts after it (0 or less: no time left)
budget() {
    local left=$((start + total - SECONDS - $2))
    echo $((left < $1 ? left : $1))
}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
fi
# cuzarr itself, built offline with the image's setuptools: its entry points
# (xarray's engine="cuzarr") need the installed metadata.
if python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
    --upgrade --target /tmp/site "$root"; then
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "gpu_check: could not build cuzarr offline; importing it from src/" >&2
    export PYTHONPATH="/tmp/site:$root/src${PYTHONPATH:+:$PYTHONPATH}"
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    python3 -c 'import sys, cupy, cuzarr; print(sys.version.split()[0], "cupy", cupy.__version__, "devices", cupy.cuda.runtime.getDeviceCount(), "cuzarr", cuzarr.__file__)'
    python3 -c 'from nvidia import nvcomp; print("nvcomp", getattr(nvcomp, "__version__", "?"))' || true
    python3 -c 'import kvikio; print("kvikio", kvikio.__version__)' || true
    python3 -c 'from cuzarr.runtime import native; print("native io (C loops)", native.available())' || true
    python3 -c 'from cuzarr.gpu import kernels; print("nvrtc", kernels.compile_check("90"))'
    python3 scripts/nvcomp_alignments.py || true
    if command -v nvcc >/dev/null; then CUZARR_PYTHON_BIN=python3 bash scripts/compile_kernels.sh; fi
} 2>&1 | tee "$out/env.log"
rc=0
# One process per file: a crash in native code (driver, nvCOMP) fails that file
# and leaves the others' results.
: >"$out/tests_gpu.log"
if [ "${TESTS_ONLY:-0}" = "1" ]; then reserve=0; else reserve=200; fi
deadline=$((SECONDS + $(budget "${TEST_TIMEOUT:-240}" "$reserve")))
for f in tests_gpu/test_*.py; do
    left=$((deadline - SECONDS))
    if [ "$left" -le 5 ]; then echo "gpu_check: out of time before $f" | tee -a "$out/tests_gpu.log"; rc=1; break; fi
    echo "== $f" | tee -a "$out/tests_gpu.log"
    timeout "$left" python3 -X faulthandler -m pytest "$f" -q -p no:cacheprovider -o addopts="" \
        --timeout 90 -rfE --durations=5 2>&1 | tee -a "$out/tests_gpu.log" || rc=1
done
# run_part LOG SECONDS CMD...: CMD under a timeout of SECONDS (skipped, and the
# run marked failed, when no time is left), its output also in $out/LOG
run_part() {
    local log=$1 secs=$2
    shift 2
    if [ "$secs" -le 10 ]; then
        echo "gpu_check: out of time before $log" | tee -a "$out/$log"
        rc=1
        return
    fi
    timeout "$secs" "$@" 2>&1 | tee "$out/$log" || rc=1
}
if [ "${TESTS_ONLY:-0}" != "1" ]; then
    # --json is rewritten after each (codec, layout): a timeout keeps what was measured
    run_part gpu_bench.log "$(budget "${BENCH_TIMEOUT:-200}" 90)" \
        python3 benchmarks/gpu.py --gib "${GIB:-1}" --repeats 3 \
        --codecs "${CODECS:-zstd,lz4,blosc-lz4}" --dir /tmp/cuzarr-gpu-bench \
        --json "$out/gpu_bench.json"
    # the host's share of a device read (no device used), on this machine's CPUs
    run_part gpu_host.log "$(budget "${HOST_TIMEOUT:-60}" 40)" \
        python3 benchmarks/gpu.py --host-only --gib "${GIB:-1}" --repeats 7 \
        --dir /tmp/cuzarr-gpu-bench --json "$out/gpu_host.json"
    # where a zstd read's time goes, per read-thread count (the array is built above)
    if [ "${PHASES:-1}" != "0" ]; then
        run_part gpu_phases.log "$(budget "${PHASES_TIMEOUT:-60}" 0)" \
            python3 benchmarks/gpu_phases.py --gib "${GIB:-1}" \
            --codec zstd --dir /tmp/cuzarr-gpu-bench --json "$out/gpu_phases.json"
    fi
fi
exit "$rc"
