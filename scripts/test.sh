#!/usr/bin/env bash
# The whole test suite, from nothing: creates/refreshes .venv (scripts/bootstrap.sh), then
#   1. ruff check        (src tests tests_gpu benchmarks scripts), then lint-imports
#                        (the layer contract in pyproject.toml)
#   2. kernel compile    (every kernels/**/*.cu through nvcc, scripts/compile_kernels.sh)
#   3. pytest tests      (CPU tests, in parallel with pytest-xdist; includes the NVRTC
#                         compile of every kernel and the GPU plans run on the host)
#   4. xarray's own Zarr backend tests with reads through cuzarr (tests_xarray/), the
#      same tests through zarr-python with cuzarr's codec pipeline, and
#      zarr-python's own tests with cuzarr's codec pipeline (scripts/zarr_suite.py)
#   5. pytest tests_torch (PyTorch tests in a Python 3.11 env, scripts/bootstrap_torch.sh)
#   6. mkdocs build --strict
# Exits non-zero if any step fails -- including pytest collecting no tests (exit code 5).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k v2 -x`.
#
#   CUZARR_TEST_WORKERS  pytest-xdist workers (default 2; "auto" = one per core)
#   CUZARR_TEST_TIMEOUT  seconds before the pytest run is killed (default 1500)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step() { printf '\n== %s\n' "$*"; }
t0=$SECONDS

step "environment"
py="$(bash scripts/bootstrap.sh | tail -n 1)"
if [ ! -x "$py" ]; then
    echo "test.sh: bootstrap did not report a usable python (got '$py')" >&2
    exit 1
fi
bin="$(dirname "$py")"
"$py" -c 'import sys, cuzarr; print(f"python {sys.version.split()[0]}, cuzarr {cuzarr.__version__} from {cuzarr.__file__}")'

step "ruff check"
lint_paths=()
for d in src tests tests_gpu tests_torch tests_xarray benchmarks scripts; do
    [ -d "$d" ] && lint_paths+=("$d")
done
"$bin/ruff" check "${lint_paths[@]}"

step "import layers (import-linter, [tool.importlinter] in pyproject.toml)"
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" "$bin/lint-imports"

step "compile CUDA kernels"
CUZARR_PYTHON_BIN="$py" bash scripts/compile_kernels.sh

step "pytest tests"
rc=0
# The environment has CuPy + NVRTC (the kernels extra): the NVRTC compile checks
# must run, not skip.
CUZARR_REQUIRE_NVRTC=1 timeout --foreground --kill-after=30 "${CUZARR_TEST_TIMEOUT:-1500}" \
    "$py" -m pytest tests -n "${CUZARR_TEST_WORKERS:-2}" -q "$@" || rc=$?
case "$rc" in
    0) ;;
    5) echo "test.sh: pytest collected no tests (exit code 5) -- treating that as a failure" >&2 ;;
    124) echo "test.sh: pytest ran past ${CUZARR_TEST_TIMEOUT:-1500} s and was stopped" >&2 ;;
    *) echo "test.sh: pytest failed (exit code $rc)" >&2 ;;
esac
[ "$rc" -eq 0 ] || exit "$rc"

step "xarray's own Zarr backend tests, reads through cuzarr (tests_xarray/)"
# xarray/tests/test_backends.py of the pinned xarray, from the installed package;
# tests_xarray/cuzarr_reads.py routes engine="zarr" reads to cuzarr and expects
# exactly the failures listed in tests_xarray/differences.py.
rc=0
PYTHONPATH="$root/tests_xarray${PYTHONPATH:+:$PYTHONPATH}" \
    timeout --foreground --kill-after=30 "${CUZARR_XARRAY_TIMEOUT:-900}" \
    "$py" -m pytest -c tests_xarray/pytest.ini --rootdir tests_xarray \
    --pyargs xarray.tests.test_backends -n "${CUZARR_TEST_WORKERS:-2}" -q || rc=$?
case "$rc" in
    0) ;;
    5) echo "test.sh: xarray's tests: none collected (exit code 5)" >&2 ;;
    124) echo "test.sh: xarray's tests ran past ${CUZARR_XARRAY_TIMEOUT:-900} s and were stopped" >&2 ;;
    *) echo "test.sh: xarray's tests failed (exit code $rc)" >&2 ;;
esac
[ "$rc" -eq 0 ] || exit "$rc"

step "xarray's own Zarr backend tests, zarr-python with cuzarr's codec pipeline (tests_xarray/)"
# the same tests with engine="zarr" left to zarr-python, whose codec_pipeline.path is
# cuzarr.zarr_pipeline.CuzarrCodecPipeline for every write and read (issue #30)
rc=0
PYTHONPATH="$root/tests_xarray${PYTHONPATH:+:$PYTHONPATH}" \
    timeout --foreground --kill-after=30 "${CUZARR_XARRAY_TIMEOUT:-900}" \
    "$py" -m pytest -c tests_xarray/pytest.ini --rootdir tests_xarray \
    --pyargs xarray.tests.test_backends -n "${CUZARR_TEST_WORKERS:-2}" -q \
    --xarray-reads=zarr-pipeline || rc=$?
[ "$rc" -eq 0 ] || { echo "test.sh: xarray's tests with cuzarr's pipeline failed (exit code $rc)" >&2; exit "$rc"; }

step "zarr-python's own tests with cuzarr's codec pipeline (scripts/zarr_suite.py)"
# arrays, indexing, codecs, sharding and v2 tests of the installed zarr-python's
# sdist, codec_pipeline.path set to cuzarr.zarr_pipeline.CuzarrCodecPipeline; the
# differences listed (and explained) in tests/zarr_suite/differences.py are left out
rc=0
for subset in ci array; do
    timeout --foreground --kill-after=30 600 "$py" scripts/zarr_suite.py --subset "$subset" || rc=$?
    [ "$rc" -eq 0 ] || { echo "test.sh: zarr-python's $subset tests failed (exit code $rc)" >&2; exit "$rc"; }
done

step "pytest tests_torch (PyTorch CPU build, Python 3.11 env)"
py311="$(bash scripts/bootstrap_torch.sh | tail -n 1)"
rc=0
timeout --foreground --kill-after=30 600 "$py311" -m pytest tests_torch -q -p no:cacheprovider || rc=$?
[ "$rc" -eq 0 ] || { echo "test.sh: torch tests failed (exit code $rc)" >&2; exit "$rc"; }

step "docs site (mkdocs build --strict)"
NO_MKDOCS_2_WARNING=1 "$bin/mkdocs" build --strict -q -d "$(mktemp -d)"

step "all checks passed in $((SECONDS - t0)) s"
