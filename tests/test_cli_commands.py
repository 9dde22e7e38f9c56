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
    assert codecs == list(zarr.open_array("g.zarr", path="temperature").metadata.to_dict()["codecs"])
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


@pytest.mark.parametrize("fmt", [2, 3])
def test_object_dtype_needs_an_object_codec_as_in_zarr_python(fmt):
    for lib in (zarr, cuzarr):
        with pytest.raises(ValueError):
            lib.create_array({}, shape=(3,), dtype=object, zarr_format=fmt)
    with pytest.raises(ValueError, match="dtype=object is ambiguous"):
        cuzarr.create_array({}, shape=(3,), dtype="O", zarr_format=fmt)
    # an object codec says which data type it is
    if fmt == 2:
        import numcodecs

        a = cuzarr.create_array(
            {}, shape=(2,), dtype=object, zarr_format=2, filters=[numcodecs.VLenBytes()]
        )
        assert a.metadata.dtype.kind == "bytes"
    else:
        a = cuzarr.create_array({}, shape=(2,), dtype=object, serializer="vlen-utf8")
        assert a.metadata.dtype.kind == "string"
    # str and bytes are not ambiguous
    assert cuzarr.create_array({}, shape=(2,), dtype=str, zarr_format=fmt).metadata.dtype.is_vlen
