#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv with Python 3.12
# and installs cuzarr with the test, benchmark, docs and kernels (CuPy + NVRTC, to
# compile the CUDA kernels without a device) extras. Idempotent: a second run
# only reinstalls when pyproject.toml changed. Source it or run it; it prints the
# venv's python path on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"

is_312() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

find_python312() {
    local c v root_dir
    # An explicit choice wins.
    for c in "${CUZARR_PYTHON:-}" "$(command -v python3.12 2>/dev/null || true)"; do
        if is_312 "$c"; then echo "$c"; return 0; fi
    done
    # pyenv shims refuse python3.12 unless a 3.12 is selected: ask pyenv for the real path.
    if command -v pyenv >/dev/null 2>&1; then
        root_dir="$(pyenv root)"
        for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | sort -t. -k3 -n -r); do
            c="$root_dir/versions/$v/bin/python3.12"
            if is_312 "$c"; then echo "$c"; return 0; fi
        done
    fi
    for c in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12 /opt/python*/bin/python3.12; do
        if is_312 "$c"; then echo "$c"; return 0; fi
    done
    return 1
}

if [ ! -x "$venv/bin/python" ] || ! is_312 "$venv/bin/python"; then
    py="$(find_python312)" || { echo "bootstrap: no Python 3.12 found (set CUZARR_PYTHON)" >&2; exit 1; }
    echo "bootstrap: creating $venv with $py" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) >&2
fi

stamp="$venv/.cuzarr-install-stamp"
# the C extension (setup.py, src/cuzarr/runtime/_native*.c) is built by the
# install: a change to either reinstalls too
want="$(cat "$root/pyproject.toml" "$root/setup.py" "$root"/src/cuzarr/runtime/_native*.[ch] | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bootstrap: installing cuzarr[test,bench,docs,kernels] into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root[test,bench,docs,kernels]" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
