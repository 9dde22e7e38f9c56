"""The user guide's code examples run as tests, and the docs site builds strictly.

Every ```python block of a page runs, in order, in one namespace per page, in a
fresh working directory. A block preceded by the line ``<!-- norun -->`` is
shown but not run (it needs a server, a GPU or a file the reader brings).
The site itself is built with ``mkdocs build --strict`` by scripts/test.sh.
"""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"(<!-- norun -->\s*\n)?```python\n(.*?)```", re.S)


def _runnable(page: Path) -> list[str]:
    return [m.group(2) for m in _BLOCK.finditer(page.read_text(encoding="utf-8")) if not m.group(1)]


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if _runnable(p))


@pytest.fixture
def restored_config():
    """The pages set cuzarr's and zarr-python's global config as a user would
    (``zarr.config.set({...})`` outside a ``with``): put both back afterwards,
    or the rest of this worker's tests run under a page's settings."""
    import zarr

    import cuzarr

    saved = [(c, copy.deepcopy(c.config)) for c in (cuzarr.config, zarr.config)]
    yield
    for c, conf in saved:
        c.config.clear()
        c.config.update(conf)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_examples_run(page, tmp_path, monkeypatch, restored_config):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for i, code in enumerate(_runnable(page)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
