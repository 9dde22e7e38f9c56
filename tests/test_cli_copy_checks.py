"""`cuzarr copy` checks every option before writing anything, copies rectilinear
arrays, sees overlaps however the paths are spelled, and keeps one Zarr format
per hierarchy (from a CLI audit)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.cli import main


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _fails(capsys, *argv: str, says: str) -> None:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_rectilinear_arrays_copy_in_both_formats(here):
    src = cuzarr.create_array("rect.zarr", shape=(10, 6), chunks=[[3, 3, 4], 6], dtype="i2")
    src[:] = np.arange(60).reshape(10, 6)
    sh = cuzarr.create_array(
        "rsh.zarr", shape=(16, 6), chunks=(4, 3), shards=[[8, 8], 6], dtype="i2"
    )
    sh[:] = np.arange(96).reshape(16, 6)
    for args in (["rect.zarr", "o3.zarr"], ["rect.zarr", "o2.zarr", "--zarr-format", "2"],
                 ["rsh.zarr", "osh.zarr"], ["rect.zarr", "small.zarr", "--max-block-mib", "0"]):
        assert main(["copy", *args, "--quiet"]) == 0
    for out, ref in (("o3.zarr", src), ("o2.zarr", src), ("osh.zarr", sh), ("small.zarr", src)):
        np.testing.assert_array_equal(cuzarr.open_array(out)[:], ref[:])
    assert cuzarr.open_array("o3.zarr").chunks == ((3, 3, 4), (6,))


def test_bad_options_write_nothing(here, capsys):
    g = cuzarr.create_group("g.zarr")
    g.create_array("a", shape=(4, 4), dtype="i1")[:] = 1
    g.create_array("b", shape=(4,), dtype="i1")[:] = 2
    cases = [
        (["--compressor", "bogus"], "unknown compressor"),
        (["--compressor", "blosc:bogus"], "blosc compressors are"),
        (["--compressor", "gzip:99"], "gzip 0..9"),
        (["--chunks", "2,2"], "has 1 dimension"),
        (["--chunks", "x"], "positive integers"),
        (["--chunks", ","], "positive integers"),
        (["--zarr-format", "2", "--shards", "4,4"], "needs a Zarr v3 destination"),
    ]
    for extra, says in cases:
        _fails(capsys, "copy", "g.zarr", "out.zarr", *extra, says=says)
        assert not os.path.exists("out.zarr"), extra


def test_overlaps_are_seen_however_spelled(here, capsys):
    cuzarr.create_group("g.zarr").create_array("a", shape=(2,), dtype="i1")
    os.symlink("g.zarr", "link.zarr")
    for dst in (["g.zarr/inner"], ["link.zarr", "--dst-path", "x"], ["g.zarr/a/sub"]):
        _fails(capsys, "copy", "g.zarr", *dst, says="overlaps the source")
    assert sorted(os.listdir("g.zarr")) == ["a", "zarr.json"]


def test_one_zarr_format_per_hierarchy(here, capsys):
    cuzarr.create_group("v2.zarr", zarr_format=2).create_array("z", shape=(2,), dtype="i1")
    cuzarr.create_group("v3.zarr")
    _fails(capsys, "copy", "v2.zarr", "v3.zarr", "--dst-path", "in/deep", says="Zarr v3 group")
    assert not os.path.exists("v3.zarr/in")
    assert main(["copy", "v2.zarr", "v3.zarr", "--dst-path", "in", "--zarr-format", "3",
                 "--quiet"]) == 0
    assert list(zarr.open_group("v3.zarr", mode="r")["in"].keys()) == ["z"]


def test_progress_only_on_a_terminal_and_bench_size(here, capsys):
    cuzarr.create_array("a.zarr", shape=(8,), dtype="i1")[:] = 1
    assert main(["copy", "a.zarr", "b.zarr"]) == 0
    assert "copy [" not in capsys.readouterr().err  # stderr is not a terminal here
    assert main(["bench", "--size-mib", "2"]) == 0
    assert "(2.0 MiB" in capsys.readouterr().out


def test_info_json_fill_value_is_the_metadata_encoding(here, capsys):
    import json

    cuzarr.create_array("nan.zarr", shape=(3,), dtype="f4", fill_value=np.nan)
    assert main(["info", "nan.zarr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fill_value"] == "NaN"
    assert main(["info", "nan.zarr"]) == 0
    assert "nan" in capsys.readouterr().out  # the text form shows the value


def test_zip_destinations_are_left_compacted(here):
    import zipfile

    from cuzarr.storage import ZipStore

    with ZipStore("z.zip", mode="w") as s:
        cuzarr.create_group(s).create_array("a", shape=(2,), dtype="i1")
    assert main(["consolidate", "z.zip"]) == 0
    assert main(["consolidate", "z.zip"]) == 0
    g = cuzarr.create_group("g.zarr")
    g.create_array("x", shape=(3,), dtype="i1")[:] = 1
    g.attrs["k"] = 1  # rewrites zarr.json: one entry per key must stay
    assert main(["copy", "g.zarr", "c.zip", "--quiet"]) == 0
    for path in ("z.zip", "c.zip"):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
        assert len(names) == len(set(names)), names
    np.testing.assert_array_equal(cuzarr.open_array("c.zip", path="x")[:], [1, 1, 1])
