"""``cuzarr.copy`` / ``copy_all`` / ``copy_store`` (zarr-python 2's functions; 3.4
only raises ``NotImplementedError`` for them). Copies are read back with
zarr-python; sources include zarr-python groups and plain numpy containers."""

from __future__ import annotations

import asyncio
import io
import json
import os

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import CopyError


def _source(path, fmt=3):
    g = cuzarr.open_group(path, mode="w", zarr_format=fmt, attributes={"title": "run"})
    shards = (10, 8) if fmt == 3 else None
    a = g.create_array("a", shape=(10, 12), chunks=(5, 4), shards=shards, dtype="<i4",
                       fill_value=-1, attributes={"units": "m"})
    a[:6] = np.arange(72).reshape(6, 12)
    sub = g.create_group("sub", attributes={"k": 2})
    sub.create_array("b", shape=(7,), chunks=(3,), dtype="<f8")[...] = np.linspace(0, 1, 7)
    sub.create_group("deep").create_array("c", shape=(), dtype="u1")[...] = 5
    return g


def _documents(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f in ("zarr.json", ".zarray", ".zgroup", ".zattrs"):
                with open(os.path.join(d, f)) as fh:
                    doc = json.load(fh)
                out[os.path.relpath(os.path.join(d, f), root)] = doc
    return out


@pytest.mark.parametrize(("src_fmt", "dst_fmt"), [(3, 3), (3, 2), (2, 3), (2, 2)])
def test_copy_keeps_data_metadata_and_attributes(tmp_path, src_fmt, dst_fmt):
    src = _source(str(tmp_path / "src"), src_fmt)
    dst = cuzarr.open_group(str(tmp_path / "dst"), mode="w", zarr_format=dst_fmt)
    n = cuzarr.copy(src, dst, name="copy")
    nbytes = 10 * 12 * 4 + 7 * 8 + 1
    assert n == (6, 0, nbytes)  # copy, a, sub, sub/b, sub/deep, sub/deep/c
    z = zarr.open_group(str(tmp_path / "dst"), mode="r")
    for path in ("a", "sub/b", "sub/deep/c"):
        np.testing.assert_array_equal(z[f"copy/{path}"][...], src[path][...])
        assert z[f"copy/{path}"].fill_value == src[path].fill_value
    assert dict(z["copy"].attrs) == {"title": "run"} and dict(z["copy/sub"].attrs) == {"k": 2}
    assert dict(z["copy/a"].attrs) == {"units": "m"}
    assert z["copy/a"].chunks == (5, 4)
    if src_fmt == dst_fmt:  # the same documents, sharding included
        ours = _documents(tmp_path / "dst" / "copy")
        assert ours == _documents(tmp_path / "src")


def test_copy_from_zarr_python_and_from_numpy_containers(tmp_path):
    z = zarr.open_group(str(tmp_path / "z"), mode="w")
    za = z.create_array("x", shape=(9,), chunks=(4,), dtype="<u2", fill_value=7)
    za[:5] = 1
    z.create_group("g", attributes={"a": 1}).create_array("y", shape=(2, 2), dtype="f4")[...] = 3
    dst = cuzarr.open_group(str(tmp_path / "d"), mode="w")
    assert cuzarr.copy_all(z, dst) == (3, 0, 9 * 2 + 16)
    np.testing.assert_array_equal(dst["x"][...], [1, 1, 1, 1, 1, 7, 7, 7, 7])
    assert dst["x"].chunks == (4,) and dst["g"].attrs["a"] == 1
    # a dict of numpy arrays (and dicts) is a group-like source
    data = {"p": np.arange(10.0), "q": {"r": np.arange(6, dtype="i1")}, "s": np.arange(4)}
    n = cuzarr.copy_all(data, dst, chunks=(2,), if_exists="raise")
    assert n[0] == 4 and dst["s"].chunks == (2,) and dst["q/r"].chunks == (2,)
    np.testing.assert_array_equal(dst["q/r"][...], np.arange(6, dtype="i1"))
    with pytest.raises(ValueError, match="chunks"):  # create_kws apply to every array
        cuzarr.copy(np.eye(2), dst, name="e", chunks=(2,))


def test_if_exists_and_dry_run(tmp_path):
    src = _source(str(tmp_path / "src"))
    dst = cuzarr.open_group(str(tmp_path / "dst"), mode="w")
    cuzarr.copy(src, dst, name="c")
    before = _documents(tmp_path / "dst")
    # raise: nothing written, even for the parts not in the way
    dst["c"].create_group("extra")
    del dst["c/sub"]
    with pytest.raises(CopyError, match="'c' already exists"):
        cuzarr.copy(src, dst, name="c")
    assert "sub" not in dst["c"]
    # skip: the group is left as it is
    assert cuzarr.copy(src, dst, name="c", if_exists="skip") == (0, 1, 0)
    # replace: copied into the group (its other members stay)
    n = cuzarr.copy(src, dst, name="c", if_exists="replace")
    assert n[:2] == (6, 0) and "extra" in dst["c"]
    # skip_initialized: arrays with every chunk stored are left alone
    dst["c/sub/b"][...] = 9  # all 3 chunks stored
    n = cuzarr.copy(src, dst, name="c", if_exists="skip_initialized")
    assert n[1] == 2 and float(dst["c/sub/b"][...].sum()) == 63.0  # b and the 0-d c
    # a dry run writes nothing and counts what would be copied
    out = cuzarr.copy(src, str(tmp_path / "nowhere"), name="c", dry_run=True)
    assert out == (6, 0, 0) and not (tmp_path / "nowhere").exists()
    assert set(_documents(tmp_path / "dst")) >= set(before) - {"c/sub/zarr.json"}


def test_shallow_without_attrs_and_logs(tmp_path):
    src = _source(str(tmp_path / "src"))
    dst = cuzarr.open_group(str(tmp_path / "dst"), mode="w")
    lines: list[str] = []
    n = cuzarr.copy(src, dst, name="c", shallow=True, without_attrs=True, log=lines.append)
    assert n[0] == 2 and sorted(dst["c"].keys()) == ["a"]  # subgroups left out
    assert dict(dst["c"].attrs) == {} and dict(dst["c/a"].attrs) == {}
    assert lines == ["copy c", "copy c/a (10, 12) int32", "all done: 2 copied, 0 skipped, 480 bytes copied"]
    buf = io.StringIO()
    cuzarr.copy(src, dst, name="d", log=buf)
    assert buf.getvalue().splitlines()[-1].startswith("all done: 6 copied")
    logfile = tmp_path / "copy.log"
    cuzarr.copy(src, dst, name="e", log=str(logfile), dry_run=True)
    assert logfile.read_text().splitlines()[-1] == "dry run: 6 copied, 0 skipped"
    with pytest.raises(TypeError, match="name must be given"):
        cuzarr.copy(src, dst)  # a root group has no name of its own
    with pytest.raises(ValueError, match="if_exists"):
        cuzarr.copy(src, dst, name="f", if_exists="bogus")


def test_copy_store(tmp_path):
    z = zarr.open_group(str(tmp_path / "src"), mode="w")
    z.create_array("a", shape=(8,), chunks=(2,), dtype="i4")[...] = np.arange(8)
    z.create_array("b", shape=(3,), dtype="i4")[...] = 1
    keys = sorted(os.path.relpath(os.path.join(d, f), tmp_path / "src")
                  for d, _, fs in os.walk(tmp_path / "src") for f in fs)
    n = cuzarr.copy_store(str(tmp_path / "src"), str(tmp_path / "dst"))
    size = sum(os.path.getsize(tmp_path / "src" / k) for k in keys)
    assert n == (len(keys), 0, size)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "dst"), path="a")[...], np.arange(8))
    # raise: refused before anything is copied
    (tmp_path / "dst" / "b" / "zarr.json").unlink()
    with pytest.raises(CopyError, match="exists in the destination"):
        cuzarr.copy_store(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert not (tmp_path / "dst" / "b" / "zarr.json").exists()
    assert cuzarr.copy_store(str(tmp_path / "src"), str(tmp_path / "dst"), if_exists="skip")[:2] == (
        1, len(keys) - 1)
    # a path below, filters, another destination path; a dict store
    out: dict = {}
    lines: list[str] = []
    n = cuzarr.copy_store(str(tmp_path / "src"), out, source_path="a", dest_path="x/y",
                          excludes=r"c/[0-2]$", includes=r"c/1$", log=lines.append)
    assert sorted(out) == ["x/y/c/1", "x/y/c/3", "x/y/zarr.json"]
    assert lines[0] == "copy a/c/1 -> x/y/c/1" and lines[-1].startswith("all done: 3 copied")
    assert cuzarr.copy_store(str(tmp_path / "src"), {}, excludes="A/", flags=0)[0] == len(keys)
    import re

    assert cuzarr.copy_store(str(tmp_path / "src"), {}, excludes="A/", flags=re.I)[0] == len(keys) - 5
    assert cuzarr.copy_store(str(tmp_path / "src"), {}, dry_run=True) == (len(keys), 0, 0)


def test_async_twins(tmp_path):
    src = _source(str(tmp_path / "src"))
    from cuzarr.api import asynchronous as api

    async def main():
        a = await api.copy(src, str(tmp_path / "d1"), name="c")
        b = await api.copy_all(src, str(tmp_path / "d2"))
        c = await api.copy_store(str(tmp_path / "src"), str(tmp_path / "d3"))
        return a, b, c

    a, b, c = asyncio.run(main())
    assert a[0] == 6 and b[0] == 5 and c[0] > 0
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "d2"), path="a")[...],
                                  src["a"][...])


def test_copy_from_an_hdf5_file(tmp_path):
    # zarr-python 2's copy was the way from HDF5 to Zarr: h5py groups, datasets
    # (chunked or not, gzip, fill values) and attributes of numpy types
    import h5py
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = np.bytes_(b"hdf")
        f.attrs["n"] = np.int64(3)
        f.create_dataset("x", data=np.arange(60.0).reshape(6, 10), chunks=(3, 5), compression="gzip")
        f.create_dataset("y", data=np.arange(7, dtype="<i2"))  # contiguous
        g = f.create_group("grp")
        g.attrs["vec"] = np.array([1.5, 2.5])
        g.create_dataset("z", shape=(5,), dtype="f4", chunks=(2,), fillvalue=-1.0)
    with h5py.File(path, "r") as f:
        dst = cuzarr.open_group(str(tmp_path / "out.zarr"), mode="w")
        n = cuzarr.copy_all(f, dst)
        assert n == (4, 0, 60 * 8 + 7 * 2 + 5 * 4)
        z = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
        np.testing.assert_array_equal(z["x"][...], f["x"][...])
        np.testing.assert_array_equal(z["y"][...], f["y"][...])
        np.testing.assert_array_equal(z["grp/z"][...], np.full(5, -1.0, "f4"))
        assert z["x"].chunks == (3, 5) and z["grp/z"].fill_value == -1.0
        assert dict(z.attrs) == {"title": "hdf", "n": 3} and z["grp"].attrs["vec"] == [1.5, 2.5]


def test_copy_of_a_group_into_itself_copies_what_was_there(tmp_path):
    g = _source(str(tmp_path / "g"))
    sub = g["sub"]
    n = cuzarr.copy(sub, sub, name="backup")
    assert n[0] == 4 and sorted(sub["backup"].keys()) == ["b", "deep"]
    np.testing.assert_array_equal(sub["backup/b"][...], sub["b"][...])


def test_async_twins_take_async_handles():
    from cuzarr.api import asynchronous as api

    async def main():
        g = await api.create_group({})
        x = await g.create_array("x", shape=(10,), chunks=(5,), dtype="i4")
        await x.setitem(slice(None), np.arange(10))
        dest = await api.create_group({})
        a = await api.copy(x, dest, name="y")
        b = await api.copy_all(g, dest=dest, if_exists="skip")
        return a, b, await (await dest.getitem("y")).getitem(slice(None))

    a, b, y = asyncio.run(main())
    assert a == (1, 0, 40) and b == (1, 0, 40)
    np.testing.assert_array_equal(y, np.arange(10))



def test_zarr_python_groups_as_destinations_and_dry_runs_into_a_new_zip(tmp_path):
    src = _source(str(tmp_path / "src"))
    zg = zarr.open_group(str(tmp_path / "z"), mode="w")
    assert cuzarr.copy(src["sub"], zg, name="s")[0] == 4
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "z"))["s/b"][...], src["sub/b"][...])
    # a dry run into a zip that does not exist yet: counted, nothing made
    n = cuzarr.copy_store(str(tmp_path / "src"), str(tmp_path / "new.zip"), dry_run=True)
    assert n[0] > 0 and n[2] == 0 and not (tmp_path / "new.zip").exists()
    # the real copy closes the zip it opened: complete, readable at once
    assert cuzarr.copy_store(str(tmp_path / "src"), str(tmp_path / "new.zip"))[0] == n[0]
    zs = zarr.storage.ZipStore(tmp_path / "new.zip", mode="r")
    np.testing.assert_array_equal(zarr.open_array(zs, path="a", mode="r")[...], src["a"][...])
