"""The xarray and dask integrations against zarr-python + xarray's own
zarr backend: behaviour that must match (real stores, no mocks)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import xarray as xr
import zarr

import cuzarr
from cuzarr.integrations.dask import to_dask
from cuzarr.storage import MemoryStore

pytestmark = pytest.mark.filterwarnings("ignore")


def _tree() -> xr.DataTree:
    return xr.DataTree.from_dict(
        {
            "/": xr.Dataset({"r": ("x", [1, 2, 3])}, attrs={"title": "root"}),
            "/g1": xr.Dataset({"a": ("y", [1.0, 2.0])}, attrs={"k": 1}),
            "/g1/g2": xr.Dataset({"b": ("x", np.array([4, -1, 6], "i4"))}),
        }
    )


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_datatree_takes_the_zarr_engines_arguments(tmp_path, fmt):
    """open_datatree / open_groups raised TypeError for consolidated=,
    zarr_format=, storage_options= (engine="zarr" takes them) and for
    use_zarr_fill_value_as_mask= (which engine="cuzarr"'s open_dataset takes)."""
    path = str(tmp_path / "t.zarr")
    _tree().to_zarr(
        path, zarr_format=fmt, consolidated=True, encoding={"/g1/g2": {"b": {"_FillValue": -1}}}
    )
    # a node added after consolidation: consolidated=True does not see it
    zarr.open_group(path, mode="a", use_consolidated=False)["g1"].attrs["late"] = True
    for kw in (
        {"consolidated": True},
        {"consolidated": False},
        {"zarr_format": fmt},
        {"storage_options": None},
        {"consolidated": False, "group": "g1"},
    ):
        want = xr.open_datatree(path, engine="zarr", **kw).load()
        got = xr.open_datatree(path, engine="cuzarr", **kw).load()
        xr.testing.assert_identical(got, want)
        assert ("late" in got["g1" if "group" not in kw else "/"].attrs) == (
            kw.get("consolidated") is False
        )
        groups = xr.open_groups(path, engine="cuzarr", **kw)
        if "group" in kw:  # keyed from the new root ("." and "g2" with engine="zarr")
            assert sorted(groups) == ["/", "/g2"]
        else:
            assert sorted(groups) == sorted(xr.open_groups(path, engine="zarr", **kw))
    # use_zarr_fill_value_as_mask as for open_dataset (engine="zarr" has no such option here)
    for mask in (False, True):
        tree = xr.open_datatree(path, engine="cuzarr", use_zarr_fill_value_as_mask=mask)
        for node in ("g1", "g1/g2"):
            want = xr.open_dataset(
                path, engine="cuzarr", group=node, use_zarr_fill_value_as_mask=mask
            )
            xr.testing.assert_identical(tree[node].to_dataset(inherit=False).load(), want.load())
    b = xr.open_datatree(path, engine="cuzarr", use_zarr_fill_value_as_mask=False)["g1/g2"].b
    np.testing.assert_array_equal(b.values, [4, -1, 6] if fmt == 2 else [4.0, np.nan, 6.0])


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_datatree_of_a_cuzarr_group(tmp_path, fmt):
    """A cuzarr.Group, which open_dataset takes, raised 'synchronous API called
    from inside its own event loop' in open_datatree (it was opened as a store)."""
    path = str(tmp_path / "t.zarr")
    _tree().to_zarr(path, zarr_format=fmt, consolidated=False)
    want = xr.open_datatree(path, engine="zarr").load()
    group = cuzarr.open_group(path, mode="r")
    xr.testing.assert_identical(xr.open_datatree(group, engine="cuzarr").load(), want)
    sub = xr.open_datatree(group, engine="cuzarr", group="/g1").load()
    xr.testing.assert_identical(sub, xr.open_datatree(path, engine="zarr", group="g1").load())


def test_open_datatree_guesses_the_cuzarr_engine(tmp_path):
    """A v3 store without the .zarr suffix: open_dataset guessed engine="cuzarr",
    open_datatree found no engine (the backend did not say it supports groups)."""
    path = str(tmp_path / "no_suffix")
    _tree().to_zarr(path, zarr_format=3, consolidated=False)
    want = xr.open_datatree(path, engine="zarr").load()
    xr.testing.assert_identical(xr.open_datatree(path).load(), want)
    assert sorted(xr.open_groups(path)) == ["/", "/g1", "/g1/g2"]


def test_nczarr_dimensions_like_zarr_engine(tmp_path):
    """A v2 array written by netCDF-C (NCZarr) names its dimensions in .zarray's
    _NCZARR_ARRAY dimrefs, not in _ARRAY_DIMENSIONS: engine="zarr" reads them,
    engine="cuzarr" refused the array ("no dimension names")."""
    path = tmp_path / "nc.zarr"
    ds = xr.Dataset(
        {"v": (("y", "x"), np.arange(6.0).reshape(2, 3), {"units": "m"})},
        coords={"x": [10, 20, 30]},
        attrs={"title": "t"},
    )
    ds.to_zarr(str(path), zarr_format=2, consolidated=False)
    for name, refs in (("v", ["/y", "/x"]), ("x", ["/x"])):
        zarray = json.loads((path / name / ".zarray").read_text())
        zarray["_NCZARR_ARRAY"] = {"dimrefs": refs, "storage": "chunked"}
        (path / name / ".zarray").write_text(json.dumps(zarray))
        zattrs = json.loads((path / name / ".zattrs").read_text())
        del zattrs["_ARRAY_DIMENSIONS"]
        zattrs["_nczarr_attr"] = {"types": {"units": ">S1"}}
        (path / name / ".zattrs").write_text(json.dumps(zattrs))
    want = xr.open_dataset(str(path), engine="zarr", consolidated=False).load()
    got = xr.open_dataset(str(path), engine="cuzarr").load()
    xr.testing.assert_identical(got, want)
    assert got.v.dims == ("y", "x") and got.v.attrs == {"units": "m"}
    xr.testing.assert_identical(got, ds)


def test_dask_names_memory_arrays_by_reference_not_by_value():
    """dask named blocks after tokenize(array), which pickled a memory store's
    bytes: two memory arrays holding equal bytes got one name, so a graph over
    both read one of them twice (a wrong sum), and naming cost a pass over
    every byte of the store."""
    a = cuzarr.create_array(MemoryStore(), shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    b = cuzarr.create_array(MemoryStore(), shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    x, y = to_dask(a), to_dask(b)
    assert x.name != y.name
    b[:] = 7  # after the graph was built: read when it runs
    np.testing.assert_array_equal((x + y).compute(), [7, 7, 7, 7])
    # the same node keeps one name (dask merges its tasks), whatever it holds
    assert to_dask(a).name == x.name == to_dask(cuzarr.open_array(a.store)).name
    a[:] = 1
    assert to_dask(a).name == x.name
    a.resize((6,))
    assert to_dask(a).name != x.name


def test_xarray_chunked_datasets_of_memory_stores_are_named_by_reference():
    """xr.open_dataset(store, engine="cuzarr", chunks=...) names its dask arrays
    after tokenize(store): equal memory stores collided the same way."""
    stores = [MemoryStore(), MemoryStore()]
    for s in stores:
        g = cuzarr.create_group(s)
        g.create_array(
            "v", shape=(4,), chunks=(2,), dtype="i4", fill_value=0, dimension_names=["x"]
        )
    d1, d2 = (xr.open_dataset(s, engine="cuzarr", chunks={}) for s in stores)
    assert d1.v.data.name != d2.v.data.name
    cuzarr.open_array(stores[1], path="v")[:] = 7
    np.testing.assert_array_equal((d1.v + d2.v).values, [7, 7, 7, 7])
    g = cuzarr.open_group(stores[0], mode="r")
    assert xr.open_dataset(g, engine="cuzarr", chunks={}).v.data.name != d2.v.data.name


def test_audit_v2_v3_cf_round_trip_like_zarr_engine(tmp_path):
    """The audit's sweep, kept as a regression: CF encodings (scale/offset,
    _FillValue and missing_value, times with units/calendar and NaT, timedelta),
    fixed and variable-length strings, bools and non-index coordinates, v2 and v3,
    consolidated or not, with each decoding switch: values, dtypes, attrs and
    encodings as engine="zarr"."""
    import pandas as pd

    t = np.array([1.0, np.nan, 3.5, -2.25])
    ds = xr.Dataset(
        {
            "p": ("t", t),
            "q": ("t", t, {"missing_value": -9.0}),
            "m": ("t", np.array([1, -9, 3, 4], "i4"), {"missing_value": -9}),
            "when": ("t", np.array(["2000-01-01", "NaT", "2001-01-01", "1999-12-31"], "M8[ns]")),
            "dt": ("t", np.array([1, 2, "NaT", 4], "m8[s]").astype("m8[ns]")),
            "s": ("t", np.array(["a", "bcé", "", "d"], object)),
            "u": ("t", np.array(["a", "bcd", "", "d"], "U3")),
            "b": ("t", np.array([True, False, True, False])),
            "lat": (("t",), np.arange(4.0)),
        },
        coords={"t": pd.date_range("2000-01-01", periods=4, freq="6h"), "aux": ("t", np.arange(4))},
    )
    enc = {
        "p": {"dtype": "i2", "scale_factor": 0.25, "add_offset": 10.0, "_FillValue": -32768},
        "q": {"_FillValue": -1e30},
        "t": {"units": "hours since 1999-12-31", "calendar": "proleptic_gregorian", "dtype": "i4"},
        "dt": {"units": "minutes", "dtype": "f8"},
    }
    keys = ("chunks", "preferred_chunks", "shards", "dtype", "_FillValue", "missing_value",
            "fill_value", "units", "calendar", "scale_factor", "add_offset")  # fmt: skip
    for fmt in (2, 3):
        for consolidated in (True, False):
            path = str(tmp_path / f"cf{fmt}{consolidated}.zarr")
            ds.to_zarr(path, zarr_format=fmt, consolidated=consolidated, encoding=enc)
            for kw in ({}, {"mask_and_scale": False}, {"decode_times": False},
                       {"decode_timedelta": False}, {"decode_cf": False}):  # fmt: skip
                want = xr.open_dataset(path, engine="zarr", **kw).load()
                got = xr.open_dataset(path, engine="cuzarr", **kw).load()
                xr.testing.assert_identical(got, want)
                for name, var in want.variables.items():
                    assert got[name].dtype == var.dtype, (fmt, kw, name)
                    for k in keys:
                        have, exp = got[name].encoding.get(k), var.encoding.get(k)
                        assert repr(have) == repr(exp) or np.all(have == exp), (fmt, kw, name, k)


def _tree_bytes(root: str) -> dict[str, bytes]:
    base = pathlib.Path(root)
    return {
        str(f.relative_to(base)): f.read_bytes() for f in sorted(base.rglob("*")) if f.is_file()
    }


@pytest.mark.parametrize("fmt", [2, 3])
def test_append_and_region_writes_from_cuzarr_datasets_like_zarr_engine(tmp_path, fmt):
    """A dataset opened through cuzarr, written with to_zarr, appended to along a
    dimension and rewritten in a region, gives the bytes engine="zarr"'s does; a
    dask chunking that straddles the stored chunks (or shards) is refused by
    to_zarr from the encoding cuzarr reports, never written."""
    import pandas as pd

    ds = xr.Dataset(
        {
            "v": (("t", "x"), np.random.default_rng(0).random((10, 6)).astype("f4")),
            "i": ("t", np.arange(10, dtype="i8")),
        },
        coords={"t": pd.date_range("2000", periods=10), "x": np.arange(6)},
    )
    src = str(tmp_path / "src.zarr")
    enc = {"v": {"chunks": (5, 3)}}
    if fmt == 3:
        enc["v"]["shards"] = (5, 6)
    ds.to_zarr(src, zarr_format=fmt, encoding=enc)
    outs = {}
    for engine in ("zarr", "cuzarr"):
        out = str(tmp_path / f"{engine}.zarr")
        opened = xr.open_dataset(src, engine=engine)
        opened.isel(t=slice(0, 5)).to_zarr(out, zarr_format=fmt)
        opened.isel(t=slice(5, 10)).to_zarr(out, append_dim="t")
        patch = opened.isel(t=slice(2, 4)).drop_vars("x")
        patch = patch.assign(v=patch.v * 0 + 7, i=patch.i * 0 - 1)
        patch.to_zarr(out, region={"t": slice(2, 4)})
        outs[engine] = _tree_bytes(out)
        back = xr.open_dataset(out, engine="cuzarr").load()
        xr.testing.assert_identical(back, xr.open_dataset(out, engine="zarr").load())
        assert (back.v.values[2:4] == 7).all() and (back.i.values[2:4] == -1).all()
        np.testing.assert_array_equal(back.v.values[4:], ds.v.values[4:])
        # dask chunks of 4 along t straddle the stored 5s: refused, nothing written
        bad = xr.open_dataset(src, engine=engine, chunks={"t": 4})
        with pytest.raises(ValueError, match="overlap multiple Dask chunks"):
            bad.to_zarr(str(tmp_path / f"bad_{engine}.zarr"), zarr_format=fmt)
    assert outs["cuzarr"] == outs["zarr"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_below_root_reads_the_roots_consolidated_metadata(tmp_path, fmt):
    """ds.to_zarr(path, group="sub/g") consolidates at the root of the store;
    engine="zarr" opens a group through the root's consolidated metadata, while
    engine="cuzarr" looked for it at the group: consolidated=True raised
    MetadataError, and None read past it (a node changed since showed)."""
    path = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"v": ("x", [1.0, 2.0])}, attrs={"k": 1})
    ds.to_zarr(path, group="sub/g", zarr_format=fmt)
    for kw in ({}, {"consolidated": True}, {"consolidated": False}):
        for group in ("sub/g", "/sub/g/"):
            got = xr.open_dataset(path, engine="cuzarr", group=group, **kw).load()
            xr.testing.assert_identical(
                got, xr.open_dataset(path, engine="zarr", group=group, **kw).load()
            )
    # changed without reconsolidating: consolidated=None/True see the root's view
    zarr.open_group(path, mode="a", use_consolidated=False)["sub/g"].attrs["late"] = True
    for kw in ({}, {"consolidated": True}, {"consolidated": False}):
        want = xr.open_dataset(path, engine="zarr", group="sub/g", **kw).attrs
        got = xr.open_dataset(path, engine="cuzarr", group="sub/g", **kw).attrs
        late = kw.get("consolidated") is False
        assert got == want == ({"k": 1, "late": True} if late else {"k": 1}), kw
    # a group added since: engine="zarr" raises KeyError; cuzarr asks the store
    zarr.open_group(path, mode="a", use_consolidated=False).create_group("sub/new")
    assert xr.open_dataset(path, engine="cuzarr", group="sub/new").attrs == {}
    with pytest.raises(KeyError):
        xr.open_dataset(path, engine="cuzarr", group="sub/new", consolidated=True)


def test_views_to_dask_are_named_by_reference_and_selection():
    # LazyArray.to_dask: named by its array (as above) and the elements it selects
    a = cuzarr.create_array(MemoryStore(), shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    b = cuzarr.create_array(MemoryStore(), shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    x, y = a.lazy[...].to_dask(), b.lazy[...].to_dask()
    b[:] = 7
    np.testing.assert_array_equal((x + y).compute(), [7, 7, 7, 7])
    assert a.lazy[[0, 2]].to_dask().name == a.lazy[[0, 2]].to_dask().name
    assert a.lazy[[0, 2]].to_dask().name != a.lazy[[0, 3]].to_dask().name
    assert a.lazy[1:].to_dask().name != a.lazy[:3].to_dask().name


def test_dask_names_fsspec_stores_by_their_options_too():
    # one path on two endpoints: two stores (as == says), two dask names
    from dask.base import tokenize

    from cuzarr.integrations.dask import register_tokenizers
    from cuzarr.storage import FsspecStore

    register_tokenizers()
    opts = [{"endpoint_url": f"http://127.0.0.1:{p}", "anon": True} for p in (9, 10, 9)]
    a, b, c = (FsspecStore.from_url("s3://bkt/data.zarr", storage_options=o) for o in opts)
    assert a != b and tokenize(a) != tokenize(b)
    assert a == c and tokenize(a) == tokenize(c)
