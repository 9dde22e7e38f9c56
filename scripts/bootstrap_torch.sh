#!/usr/bin/env bash
# A second environment, .venv311, for the PyTorch tests: Python 3.11 (cuzarr
# supports 3.11+) because the package index holds only multi-GB CUDA builds of
# torch for 3.12, while a CPU wheel of torch 2.13.0 for 3.11 is at hand on these
# machines. Installs torch, ml_dtypes (bfloat16/float8 arrays), cuzarr (editable) and
# pytest; prints the python path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv311"
is_311() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; }
find_python311() {
    local c v
    for c in "${CUZARR_PYTHON311:-}" "$(command -v python3.11 2>/dev/null || true)" "$(command -v python3 2>/dev/null || true)"; do
        if is_311 "$c"; then echo "$c"; return 0; fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.11(\.[0-9]+)?$'); do
            c="$(pyenv root)/versions/$v/bin/python3.11"
            if is_311 "$c"; then echo "$c"; return 0; fi
        done
    fi
    for c in "$HOME"/.pyenv/versions/3.11*/bin/python3.11 /usr/bin/python3.11 /usr/local/bin/python3.11; do
        if is_311 "$c"; then echo "$c"; return 0; fi
    done
    return 1
}
if [ ! -x "$venv/bin/python" ] || ! is_311 "$venv/bin/python"; then
    py="$(find_python311)" || { echo "bootstrap_torch: no Python 3.11 found (set CUZARR_PYTHON311)" >&2; exit 1; }
    echo "bootstrap_torch: creating $venv with $py" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv"
fi
stamp="$venv/.cuzarr-install-stamp"
want="$(cat "$root/pyproject.toml" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bootstrap_torch: installing torch 2.13.0 (CPU) and cuzarr into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0" "ml_dtypes>=0.5" "pytest>=8.0" "pytest-timeout>=2.3" \
        -e "$root" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
