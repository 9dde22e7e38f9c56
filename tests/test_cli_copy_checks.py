"""`cuzarr copy` checks every option before writing anything, copies rectilinear
arrays, sees overlaps however the paths are spelled, and keeps one Zarr format
per hierarchy (from a CLI audit); it keeps what the options do not change
(sharding, filters, order, codecs, consolidated metadata), `tree`/`info` show the
store rather than stale consolidated metadata, and errors name the user's paths,
not temporary files (from a second one)."""

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
        # (a shape of one rank applies to the arrays of that rank: test_cli_commands.py)
        (["--chunks", "2,2,2"], "no copied array has 3 dimension"),
        (["--chunks", "b=2,2"], "but b has 1 dimension"),
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
    assert "fill_value          : NaN\n" in capsys.readouterr().out  # as the metadata says


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


# -- what a copy keeps (from a second CLI audit) ------------------------------------


def _doc(path):
    import json

    with open(path, encoding="utf-8") as f:
        return json.load(f)


_SHARDED = {
    "name": "sharding_indexed",
    "configuration": {
        "chunk_shape": [2, 2],
        "codecs": [
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 2, "checksum": False}},
            {"name": "crc32c"},
        ],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_location": "start",
    },
}


def _sharded_source(path, shape=(8, 8)):
    """A sharded v3 array with inner transpose + crc32c and a non-default index."""
    a = cuzarr.create_array(
        path, shape=shape, chunks=(4, 4), dtype="u2", serializer=_SHARDED, compressors=None,
        fill_value=3, dimension_names=["y", "x"],
        chunk_key_encoding={"name": "default", "separator": "."},
    )
    data = np.arange(np.prod(shape), dtype="u2").reshape(shape)
    a[...] = data
    return data


def test_rechunking_keeps_the_sharding_layout(here):
    data = _sharded_source("s.zarr")
    assert main(["copy", "s.zarr", "plain.zarr", "--quiet"]) == 0
    assert _doc("plain.zarr/zarr.json") == _doc("s.zarr/zarr.json")
    assert main(["copy", "s.zarr", "r.zarr", "--chunks", "1,2", "--quiet"]) == 0
    r = cuzarr.open_array("r.zarr")
    assert r.shards == (4, 4) and r.chunks == (1, 2)
    conf = _doc("r.zarr/zarr.json")["codecs"][0]["configuration"]
    want = dict(_SHARDED["configuration"], chunk_shape=[1, 2])
    assert conf == want  # inner codecs, index codecs and index place all kept
    assert _doc("r.zarr/zarr.json")["chunk_key_encoding"]["configuration"]["separator"] == "."
    np.testing.assert_array_equal(zarr.open_array("r.zarr", mode="r")[...], data)


def test_shards_option_sets_removes_or_refuses(here, capsys):
    g = cuzarr.create_group("g.zarr")
    g.create_array("a", shape=(8, 8), chunks=(2, 2), dtype="i2")[...] = 1
    _sharded_source("g.zarr/b")
    # "b"'s 4x4 shards hold no whole 3x3 chunks: refused before "a" is written
    _fails(capsys, "copy", "g.zarr", "out.zarr", "--chunks", "3,3", says="--shards none")
    assert not os.path.exists("out.zarr")
    _fails(capsys, "copy", "g.zarr", "out.zarr", "--shards", "5,5", says="multiple of the chunk")
    _fails(capsys, "copy", "g.zarr", "out.zarr", "--shards", "bogus", says="or none")
    assert not os.path.exists("out.zarr")
    assert main(["copy", "g.zarr", "none.zarr", "--chunks", "3,3", "--shards", "none",
                 "--quiet"]) == 0
    b = cuzarr.open_array("none.zarr", path="b")
    assert b.shards is None and b.chunks == (3, 3)
    assert [c["name"] for c in _doc("none.zarr/b/zarr.json")["codecs"]] == [
        "transpose", "bytes", "zstd", "crc32c"
    ]
    assert main(["copy", "g.zarr", "big.zarr", "--shards", "8,8", "--quiet"]) == 0
    assert cuzarr.open_array("big.zarr", path="a").shards == (8, 8)
    big_b = _doc("big.zarr/b/zarr.json")["codecs"][0]["configuration"]
    assert big_b["index_location"] == "start" and big_b["chunk_shape"] == [2, 2]
    for out in ("none.zarr", "big.zarr"):
        np.testing.assert_array_equal(zarr.open_array(out, path="b", mode="r")[...],
                                      g["b"][...])
    assert main(["copy", "none.zarr", "v2.zarr", "--zarr-format", "2", "--shards", "none",
                 "--quiet"]) == 0


def test_v2_filters_order_and_separator_are_kept(here):
    import numcodecs

    data = np.arange(30, dtype="i4").reshape(6, 5)
    a = cuzarr.create_array(
        "v2.zarr", shape=(6, 5), chunks=(3, 2), dtype="<i4", zarr_format=2, order="F",
        filters=[numcodecs.Delta(dtype="<i4")], compressors=numcodecs.Zstd(level=3),
        dimension_separator="/", fill_value=7, attributes={"k": [1, 2]},
    )
    a[...] = data
    assert main(["copy", "v2.zarr", "same.zarr", "--quiet"]) == 0
    for doc in (".zarray", ".zattrs"):
        assert _doc(f"same.zarr/{doc}") == _doc(f"v2.zarr/{doc}")
    assert main(["copy", "v2.zarr", "re.zarr", "--chunks", "2,5", "--compressor", "gzip:4",
                 "--quiet"]) == 0
    re_ = _doc("re.zarr/.zarray")
    assert re_["order"] == "F" and re_["dimension_separator"] == "/"
    assert re_["filters"] == _doc("v2.zarr/.zarray")["filters"]
    assert re_["compressor"] == {"id": "gzip", "level": 4} and re_["fill_value"] == 7
    assert _doc("re.zarr/.zattrs") == {"k": [1, 2]}
    # across formats: order "F" is a reversing transpose, the filter a numcodecs
    # codec, and back again
    assert main(["copy", "v2.zarr", "v3.zarr", "--zarr-format", "3", "--quiet"]) == 0
    codecs = _doc("v3.zarr/zarr.json")["codecs"]
    assert [c["name"] for c in codecs] == ["transpose", "numcodecs.delta", "bytes", "zstd"]
    assert codecs[0]["configuration"]["order"] == [1, 0]
    assert _doc("v3.zarr/zarr.json")["chunk_key_encoding"]["configuration"]["separator"] == "/"
    assert main(["copy", "v3.zarr", "back.zarr", "--zarr-format", "2", "--quiet"]) == 0
    back = _doc("back.zarr/.zarray")
    assert back["order"] == "F" and back["filters"] == _doc("v2.zarr/.zarray")["filters"]
    assert back["dimension_separator"] == "/" and back["compressor"]["id"] == "zstd"
    for out in ("same.zarr", "re.zarr", "v3.zarr", "back.zarr"):
        np.testing.assert_array_equal(zarr.open_array(out, mode="r")[...], data)


def test_big_endian_data_keeps_its_byte_order_across_formats(here):
    import numcodecs

    for name, filters in (("plain", None), ("delta", [numcodecs.Delta(dtype=">i4")])):
        a = cuzarr.create_array(f"{name}.zarr", shape=(5,), chunks=(2,), dtype=">i4",
                                zarr_format=2, filters=filters)
        a[...] = [1, -2, 3, 70000, 5]
        assert main(["copy", f"{name}.zarr", f"{name}3.zarr", "--zarr-format", "3",
                     "--quiet"]) == 0
        serializer = [c for c in _doc(f"{name}3.zarr/zarr.json")["codecs"]
                      if c["name"] == "bytes"]
        assert serializer[0]["configuration"]["endian"] == "big"
        assert main(["copy", f"{name}3.zarr", f"{name}2.zarr", "--zarr-format", "2",
                     "--quiet"]) == 0
        assert _doc(f"{name}2.zarr/.zarray")["dtype"] == ">i4"
        for out in (f"{name}3.zarr", f"{name}2.zarr"):
            for lib in (zarr, cuzarr):
                np.testing.assert_array_equal(lib.open_array(out, mode="r")[...],
                                              [1, -2, 3, 70000, 5])


def test_compressor_option_keeps_checksums_and_v2_takes_one_compressor(here, capsys):
    _sharded_source("s.zarr")
    assert main(["copy", "s.zarr", "gz.zarr", "--compressor", "gzip:2", "--quiet"]) == 0
    inner = _doc("gz.zarr/zarr.json")["codecs"][0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["transpose", "bytes", "gzip", "crc32c"]
    assert main(["copy", "s.zarr", "raw.zarr", "--compressor", "none", "--quiet"]) == 0
    inner = _doc("raw.zarr/zarr.json")["codecs"][0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["transpose", "bytes", "crc32c"]
    two = cuzarr.create_array("two.zarr", shape=(4,), chunks=(2,), dtype="u2",
                              compressors=[{"name": "zstd"}, {"name": "gzip"}])
    two[...] = 5
    _fails(capsys, "copy", "two.zarr", "v2.zarr", "--zarr-format", "2",
           says="takes one compressor")
    assert not os.path.exists("v2.zarr")
    assert main(["copy", "two.zarr", "v2.zarr", "--zarr-format", "2", "--compressor",
                 "zstd", "--quiet"]) == 0
    np.testing.assert_array_equal(zarr.open_array("v2.zarr", mode="r")[...], [5] * 4)


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_is_written_after_the_data(here, fmt):
    g = cuzarr.create_group("g.zarr", zarr_format=fmt, attributes={"t": 1})
    g.create_array("a", shape=(4,), chunks=(2,), dtype="i2")[...] = [1, 2, 3, 4]
    g.create_group("sub").create_array("old", shape=(2,), dtype="i1")
    cuzarr.consolidate_metadata("g.zarr")
    # stale now: the copy follows the store, and consolidates what it wrote
    g["sub"].create_array("new", shape=(3,), dtype="f4")[...] = 0.5
    del g["sub"]["old"]
    for out in ("c.zarr", "c.zip"):
        assert main(["copy", "g.zarr", out, "--quiet"]) == 0
        store = zarr.storage.ZipStore(out, mode="r") if out.endswith(".zip") else out
        z = zarr.open_consolidated(store, mode="r", zarr_format=fmt)
        assert sorted(k for k, _ in z.members(max_depth=None)) == ["a", "sub", "sub/new"]
        np.testing.assert_array_equal(z["sub/new"][...], [0.5] * 3)
        assert z.attrs["t"] == 1
    # a group described by its root's consolidated metadata: so is its copy
    assert main(["copy", "g.zarr", "sub.zarr", "--src-path", "sub", "--quiet"]) == 0
    z = zarr.open_consolidated("sub.zarr", mode="r", zarr_format=fmt)
    assert [k for k, _ in z.members(max_depth=None)] == ["new"]
    # a copy into a consolidated destination group brings its metadata up to date
    d = cuzarr.create_group("d.zarr", zarr_format=fmt)
    d.create_array("x", shape=(1,), dtype="i1")
    cuzarr.consolidate_metadata("d.zarr")
    assert main(["copy", "g.zarr", "d.zarr", "--dst-path", "in", "--quiet"]) == 0
    z = zarr.open_consolidated("d.zarr", mode="r", zarr_format=fmt)
    np.testing.assert_array_equal(z["in/a"][...], [1, 2, 3, 4])


def test_tree_and_info_show_the_store_not_stale_consolidated_metadata(here, capsys):
    import json

    g = cuzarr.create_group("g.zarr")
    g.create_array("kept", shape=(2,), dtype="i1")
    g.create_array("gone", shape=(2,), dtype="i1")
    cuzarr.consolidate_metadata("g.zarr")
    assert main(["info", "g.zarr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["consolidated_metadata"] == "current"
    g.create_group("added").create_array("deep", shape=(5,), dtype="f8")
    del g["gone"]
    assert main(["tree", "g.zarr"]) == 0
    out, err = capsys.readouterr()
    assert "added" in out and "deep (5,) float64" in out and "gone" not in out, out
    assert "stale" in err and "gone: gone" in err and "new: added" in err, err
    assert main(["info", "g.zarr", "--json"]) == 0
    out, err = capsys.readouterr()
    info = json.loads(out)
    assert info["members"] == 3 and info["arrays"] == 2
    assert info["consolidated_metadata"] == "stale" and "stale" in err
    with pytest.raises(SystemExit):
        main(["tree", "--help"])
    assert "as the store lists it" in " ".join(capsys.readouterr().out.split())


def test_a_store_that_cannot_be_listed_is_read_through_consolidated_metadata(here, capsys):
    import functools
    import http.server
    import threading

    class NoIndexPages(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def list_directory(self, path):
            self.send_error(404)

    g = cuzarr.create_group("site/g.zarr")
    g.create_array("a", shape=(3,), dtype="i2")[...] = 5
    g.create_group("s").create_array("b", shape=(2,), dtype="f4")[...] = 1.5
    cuzarr.consolidate_metadata("site/g.zarr")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(NoIndexPages, directory="site")
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/g.zarr"
        assert main(["tree", url]) == 0
        out, err = capsys.readouterr()
        assert "b (2,) float32" in out and "cannot be listed" in err
        assert main(["copy", url, "out.zarr"]) == 0
        assert "cannot be listed" in capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()
    np.testing.assert_array_equal(cuzarr.open_array("out.zarr", path="s/b")[...], [1.5, 1.5])


def test_errors_name_the_destination_not_temporary_files(here, capsys):
    a = cuzarr.create_array("a.zarr", shape=(4, 4), chunks=(2, 2), dtype="i1")
    a[...] = 1
    open("file.zarr", "w").close()  # a file where the copy needs a directory
    _fails(capsys, "copy", "a.zarr", "file.zarr/x", says="file.zarr/x/zarr.json")
    os.makedirs("out.zarr/c/1/1/junk")  # a directory where a chunk goes: fails midway
    assert main(["copy", "a.zarr", "out.zarr", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "out.zarr/c/1/1'" in err and "the copy into out.zarr stopped" in err, err
    g = cuzarr.create_group("g.zarr")
    g.create_array("x", shape=(3,), dtype="i1")[...] = 1
    cuzarr.consolidate_metadata("g.zarr")  # the zip is rewritten once all is there
    os.makedirs("c.zip.cuzarr-tmp")
    assert main(["copy", "g.zarr", "c.zip", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "'" + os.path.join(str(here), "c.zip") + "'" in err, err
    for e in (err,):
        assert ".cuzarr-tmp" not in e and "Traceback" not in e, e


def test_write_empty_chunks_copies_keep_unwritten_regions_unwritten(here):
    from cuzarr.cli import copy_array

    s = cuzarr.create_array("s.zarr", shape=(8,), chunks=(2,), dtype="i2", fill_value=0)
    s[0:2] = 1
    src = cuzarr.open_array("s.zarr", config={"write_empty_chunks": True})
    src[4:6] = 0  # stored although all fill value: this handle stores empty chunks
    assert sorted(os.listdir("s.zarr/c")) == ["0", "2"]
    dst = copy_array(src, "d.zarr")
    assert dst.config.write_empty_chunks
    assert sorted(os.listdir("d.zarr/c")) == ["0", "2"]  # not 1 and 3, never written
    copy_array(src, "r.zarr", chunks=(4,))
    assert sorted(os.listdir("r.zarr/c")) == ["0", "1"]
    np.testing.assert_array_equal(cuzarr.open_array("r.zarr")[...], s[...])
    copy_array(cuzarr.open_array("s.zarr"), "plain.zarr")  # the default: no empty chunks
    assert sorted(os.listdir("plain.zarr/c")) == ["0"]
