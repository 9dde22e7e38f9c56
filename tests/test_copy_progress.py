"""Progress of copies counts bytes: ``progress=`` of ``copy``, ``copy_all`` and
``copy_store`` (a bar, or a callable), the CLI's bars, and ``cuzarr
consolidate`` walking a hierarchy as ``consolidate_metadata`` does."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.cli import main
from cuzarr.copying.array_copy import copy_array
from cuzarr.copying.progress import Progress, reporter


def _source(root) -> cuzarr.Group:
    g = cuzarr.create_group(str(root))
    a = g.create_array("a", shape=(64, 50), chunks=(16, 10), dtype="f8")
    a[...] = np.arange(3200.0).reshape(64, 50)
    b = g.create_array("sub/b", shape=(1000,), chunks=(100,), dtype="u2")
    b[...] = np.arange(1000)
    return g


def _calls():
    seen: list[tuple[int, int | None]] = []
    return seen, lambda done, total: seen.append((done, total))


@pytest.mark.parametrize("func", ["copy", "copy_all"])
def test_copy_progress_counts_bytes(tmp_path, func):
    src = _source(tmp_path / "src.zarr")
    seen, cb = _calls()
    dest = cuzarr.create_group(str(tmp_path / "dst.zarr"))
    if func == "copy":
        n = cuzarr.copy(src, dest, name="x", progress=cb)
    else:
        n = cuzarr.copy_all(src, dest, progress=cb)
    total = 64 * 50 * 8 + 1000 * 2
    assert n[2] == total
    assert len(seen) == 2 and seen[-1] == (total, total)  # a step per array this small
    assert all(t == total for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    root = dest["x"] if func == "copy" else dest
    np.testing.assert_array_equal(root["a"][...], src["a"][...])


def test_copy_progress_from_foreign_sources_and_bar(tmp_path, capsys):
    data = np.arange(5000, dtype="i4")
    seen, cb = _calls()
    dest = cuzarr.create_group(str(tmp_path / "d.zarr"))
    cuzarr.copy(data, dest, name="np", progress=cb)  # numpy: values copied block by block
    assert seen[-1] == (data.nbytes, data.nbytes)
    cuzarr.copy(_source(tmp_path / "s.zarr")["a"], dest, name="bar", progress=True)
    err = capsys.readouterr().err
    assert "copy [" in err and "25.0 KiB/25.0 KiB" in err  # a bar in bytes, also off a terminal


def test_copy_progress_dry_run_and_refusals(tmp_path):
    src = _source(tmp_path / "src.zarr")
    seen, cb = _calls()
    dest = cuzarr.create_group(str(tmp_path / "dst.zarr"))
    cuzarr.copy(src, dest, name="x", dry_run=True, progress=cb)
    assert seen == []  # nothing copied, nothing reported
    cuzarr.copy(src, dest, name="x")
    with pytest.raises(cuzarr.errors.CopyError):
        cuzarr.copy(src, dest, name="x", progress=cb)
    assert seen == []
    cuzarr.copy(src, dest, name="x", if_exists="skip", progress=cb)
    assert seen == []  # all skipped: 0 bytes to copy
    with pytest.raises(TypeError, match="progress"):
        cuzarr.copy(src, dest, name="y", progress="yes")


def test_copy_store_progress(tmp_path):
    _source(tmp_path / "src.zarr")
    seen, cb = _calls()
    n = cuzarr.copy_store(str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr"), progress=cb)
    assert seen[-1] == (n[2], n[2]) and n[2] > 0
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "dst.zarr"), path="sub/b")[...], np.arange(1000)
    )


def test_copy_array_progress_counts_block_bytes(tmp_path):
    src = _source(tmp_path / "src.zarr")["a"]
    got: list[int] = []
    copy_array(
        src, str(tmp_path / "o.zarr"), chunks=(8, 50), max_block_bytes=1, progress=got.append
    )
    assert sum(got) == src.nbytes and len(got) == 8  # one destination chunk per step


def test_progress_bar_text(capsys):
    bar = Progress(3 << 20, "copy", force=True, unit="B")
    bar.update(1 << 20)

    bar.update(2 << 20)
    err = capsys.readouterr().err
    assert "3.0 MiB/3.0 MiB" in err and "iB/s)" in err and err.endswith("\n")
    count = Progress(None, "read:", force=True, unit="nodes")
    count.update(5)
    count.close()
    assert "read: 5 nodes" in capsys.readouterr().err
    assert reporter(False, 10, "x") is None and reporter(None, 10, "x") is None


def test_cli_consolidate_matches_the_library(tmp_path, capsys):
    for fmt in (2, 3):
        root = tmp_path / f"v{fmt}.zarr"
        g = cuzarr.create_group(str(root), zarr_format=fmt)
        for i in range(3):
            sub = g.create_group(f"g{i}")
            sub.create_array("x", shape=(4,), dtype="i2")
            sub.create_group("deeper").create_array("y", shape=(2, 2), dtype="f4")
        assert main(["consolidate", str(root)]) == 0
        assert "consolidated metadata of 12 nodes" in capsys.readouterr().out
        key = ".zmetadata" if fmt == 2 else "zarr.json"
        ours = json.loads((root / key).read_text())
        cuzarr.consolidate_metadata(str(root))
        assert json.loads((root / key).read_text()) == ours
        z = zarr.open_consolidated(str(root), zarr_format=fmt)
        assert sorted(k for k, _ in z.members(max_depth=None)) == sorted(
            k for k, _ in g.members(max_depth=None)
        )


def test_bench_runs_in_steps(capsys):
    assert main(["bench", "--size-mib", "33"]) == 0  # two write and read steps
    assert "verified=True" in capsys.readouterr().out
