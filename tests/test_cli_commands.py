"""The command line's own conveniences: --version, plain `info` values, `tree`
on an array, refused benchmark sizes, and errors that say what to do (an
existing destination: --overwrite; a read-only store: mode="r+")."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.cli import main
from cuzarr.errors import ContainsArrayError, ReadOnlyError


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _out(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _fails(capsys, *argv: str, says: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    return err


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"cuzarr {cuzarr.__version__}"


def _fields(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (ln.partition(" : ") for ln in text.splitlines())}


@pytest.mark.parametrize("lib", [cuzarr, zarr])
def test_info_prints_plain_values(here, capsys, lib):
    g = lib.create_group("g.zarr")
    a = g.create_array(
        "temperature", shape=(20, 10), chunks=(10, 5), dtype="f4", dimension_names=["y", "x"]
    )
    a[...] = 1.5
    f = _fields(_out(capsys, "info", "g.zarr", "--path", "temperature"))
    assert f["fill_value"] == "0.0"  # not np.float32(0.0)
    assert f["shards"] == "null"
    assert json.loads(f["shape"]) == [20, 10]
    assert json.loads(f["dimension_names"]) == ["y", "x"]
    codecs = json.loads(f["codecs"])  # codecs as JSON
    assert codecs == list(
        zarr.open_array("g.zarr", path="temperature").metadata.to_dict()["codecs"]
    )
    as_json = json.loads(_out(capsys, "info", "g.zarr", "--path", "temperature", "--json"))
    assert as_json["fill_value"] == 0.0 and as_json["dimension_names"] == ["y", "x"]
    # a group's consolidated status as the docs name it: null, current, stale
    assert _fields(_out(capsys, "info", "g.zarr"))["consolidated_metadata"] == "null"
    lib.consolidate_metadata("g.zarr")
    assert _fields(_out(capsys, "info", "g.zarr"))["consolidated_metadata"] == "current"
    lib.open_group("g.zarr", mode="a", use_consolidated=False).create_array(
        "new", shape=(2,), dtype="i1"
    )
    assert _fields(_out(capsys, "info", "g.zarr"))["consolidated_metadata"] == "stale"


def test_info_nan_fill_and_v2_dimension_names(here, capsys):
    a = zarr.create_array(
        "v2.zarr",
        shape=(4,),
        dtype="f8",
        fill_value=np.nan,
        zarr_format=2,
        attributes={"_ARRAY_DIMENSIONS": ["t"]},
    )
    a[...] = 1
    f = _fields(_out(capsys, "info", "v2.zarr"))
    assert f["fill_value"] == "NaN" and json.loads(f["dimension_names"]) == ["t"]


def test_tree_on_an_array_shows_it(here, capsys):
    g = cuzarr.create_group("g.zarr")
    g.create_array("inner/t", shape=(3, 4), dtype="u2")
    assert _out(capsys, "tree", "g.zarr", "--path", "inner/t").strip() == "t (3, 4) uint16"
    cuzarr.create_array("root.zarr", shape=(5,), dtype="i8")
    assert _out(capsys, "tree", "root.zarr").strip() == "/ (5,) int64"
    assert "└── t (3, 4) uint16" in _out(capsys, "tree", "g.zarr", "--path", "inner")


def test_bench_refuses_an_empty_size(capsys):
    _fails(capsys, "bench", "--size-mib", "0", says="--size-mib must be at least 1")
    _fails(capsys, "bench", "--size-mib", "-3", says="--size-mib must be at least 1")


def test_existing_destination_suggests_overwrite(here, capsys):
    src = cuzarr.create_group("src.zarr")
    src.create_array("a", shape=(4,), dtype="i2")[...] = [1, 2, 3, 4]
    assert main(["copy", "src.zarr", "dst.zarr", "--quiet"]) == 0
    _fails(capsys, "copy", "src.zarr", "dst.zarr", "--quiet", says="--overwrite replaces it")
    err = _fails(
        capsys,
        "copy",
        "src.zarr",
        "dst.zarr",
        "--src-path",
        "a",
        "--dst-path",
        "a",
        "--quiet",
        says="--overwrite replaces it",
    )
    assert "an array already exists" in err
    assert main(["copy", "src.zarr", "dst.zarr", "--quiet", "--overwrite"]) == 0


def test_read_only_errors_name_the_store_and_say_how_to_write(here):
    a = cuzarr.create_array("ro.zarr", shape=(3,), dtype="i4")
    r = cuzarr.open_array("ro.zarr", mode="r")
    with pytest.raises(ReadOnlyError, match=r"LocalStore\(.*ro\.zarr.*mode='r\+'"):
        r[...] = 1
    cuzarr.create_group("grp.zarr")
    rg = cuzarr.open_group("grp.zarr", mode="r")
    with pytest.raises(ReadOnlyError, match=r"grp\.zarr.*mode='r\+'"):
        rg.create_array("x", shape=(2,), dtype="i1")
    with pytest.raises(ReadOnlyError, match="mode='r\\+'"):
        cuzarr.create_array(r.store_path, shape=(2,), dtype="i1", overwrite=True)
    with pytest.raises(ReadOnlyError, match=r"ro\.zarr.*mode='a'"):
        cuzarr.create(shape=(2,), store="ro.zarr", mode="r")
    with pytest.raises(ContainsArrayError):  # and a writable handle still writes
        cuzarr.create_array("ro.zarr", shape=(3,), dtype="i4")
    a[...] = 7
    np.testing.assert_array_equal(cuzarr.open_array("ro.zarr", mode="r+")[...], [7, 7, 7])


def _chunks(path: str, name: str) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    a = zarr.open_array(path, path=name, mode="r")
    return a.chunks, a.shards


def test_copy_chunks_per_array_and_per_rank(here, capsys):
    g = zarr.create_group("src.zarr")
    t = g.create_array("temperature", shape=(40, 30), chunks=(10, 10), dtype="f4")
    t[...] = np.arange(1200, dtype="f4").reshape(40, 30)
    p = g.create_array("pressure", shape=(40, 30), chunks=(10, 10), dtype="f4")
    p[...] = 2
    s = g.create_array("station", shape=(100,), chunks=(10,), dtype="i4")
    s[...] = np.arange(100)
    v = g.create_array("sub/volume", shape=(8, 8, 8), chunks=(4, 4, 4), dtype="u1")
    v[...] = 3
    # one shape for a group with arrays of other ranks: those keep their chunks
    assert main(["copy", "src.zarr", "a.zarr", "--chunks", "20,30", "--quiet"]) == 0
    assert _chunks("a.zarr", "temperature")[0] == (20, 30)
    assert _chunks("a.zarr", "pressure")[0] == (20, 30)
    assert _chunks("a.zarr", "station")[0] == (10,)
    assert _chunks("a.zarr", "sub/volume")[0] == (4, 4, 4)
    # by name, by rank, and shards the same way; names win over ranks
    argv = ["copy", "src.zarr", "b.zarr", "--quiet", "--chunks", "temperature=40,10",
            "--chunks", "5,5", "--chunks", "50", "--chunks", "sub/volume=8,8,2",
            "--shards", "station=100", "--shards", "sub/volume=8,8,8"]  # fmt: skip
    assert main(argv) == 0
    assert _chunks("b.zarr", "temperature") == ((40, 10), None)
    assert _chunks("b.zarr", "pressure") == ((5, 5), None)
    assert _chunks("b.zarr", "station") == ((50,), (100,))
    assert _chunks("b.zarr", "sub/volume") == ((8, 8, 2), (8, 8, 8))
    for name in ("temperature", "pressure", "station", "sub/volume"):
        np.testing.assert_array_equal(zarr.open_array("b.zarr", path=name)[...], g[name][...])
    # an array copied alone is named by its name
    assert main(["copy", "src.zarr", "c.zarr", "--src-path", "station",
                 "--chunks", "station=25", "--quiet"]) == 0  # fmt: skip
    assert _chunks("c.zarr", "")[0] == (25,)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--chunks", "nope=3"], "no array 'nope' is copied"),
        (["--chunks", "3,3,3,3"], "no copied array has 4 dimension(s)"),
        (["--chunks", "temperature=3"], "but temperature has 2 dimension(s)"),
        (["--chunks", "4,4", "--chunks", "5,5"], "two shapes of 2 dimension(s)"),
        (["--chunks", "station=4", "--chunks", "station=5"], "gives 'station' twice"),
        (["--chunks", "station=0"], "expected positive integers"),
        (["--shards", "station=100", "--zarr-format", "2"], "needs a Zarr v3 destination"),
        (["--chunks", "station=30", "--shards", "station=100"], "multiple of the chunk shape"),
    ],
)
def test_copy_per_array_options_checked_before_writing(here, capsys, argv, says):
    g = cuzarr.create_group("src.zarr")
    g.create_array("temperature", shape=(4, 6), dtype="f4")
    g.create_array("station", shape=(100,), dtype="i4")
    _fails(capsys, "copy", "src.zarr", "dst.zarr", "--quiet", *argv, says=says)
    assert not (here / "dst.zarr").exists()
