#!/usr/bin/env bash
# Demo of cuzarr's main job, from nothing: sets up .venv (scripts/bootstrap.sh), then
# writes a Zarr dataset (v3 array, v2 array, group), reads it back, checks it against
# numpy and zarr-python, and prints sizes, compression and throughput.
# Arguments go to scripts/demo.py, e.g. `bash scripts/demo.sh --size-mib 64 --keep /tmp/d`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$(bash "$root/scripts/bootstrap.sh" | tail -n 1)"
if [ ! -x "$py" ]; then
    echo "demo.sh: bootstrap did not report a usable python (got '$py')" >&2
    exit 1
fi
exec "$py" "$root/scripts/demo.py" "$@"
