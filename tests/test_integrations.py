"""xarray engine, dask bridges (incl. a 2-process LocalCluster) and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import cuzarr
from cuzarr.integrations.dask import from_dask, to_dask
from cuzarr.storage import LocalStore


def _dataset() -> xr.Dataset:
    rng = np.random.default_rng(0)
    t = rng.random((12, 6)).astype("f4")
    t[0, 0] = np.nan
    return xr.Dataset(
        {
            "temperature": (("time", "x"), t, {"units": "K", "long_name": "température"}),
            "count": (("x",), np.arange(6, dtype="i8")),
            "label": (("x",), np.array(["a", "bé", "", "d", "e", "f"], dtype=object)),
        },
        coords={"time": pd.date_range("2020-01-01", periods=12), "x": np.arange(6) * 10.0},
        attrs={"title": "test ✓"},
    )


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("consolidated", [True, False])
def test_xarray_reads_what_xarray_wrote(tmp_path, fmt, consolidated):
    ds = _dataset()
    path = str(tmp_path / "ds.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=fmt, consolidated=consolidated)
        ref = xr.open_dataset(path, engine="zarr", consolidated=consolidated).load()
    back = xr.open_dataset(path, engine="cuzarr")
    xr.testing.assert_identical(back.load(), ref)
    xr.testing.assert_equal(back.load(), ds)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("mask_and_scale", [True, False])
def test_xarray_fill_values_and_scalars_like_zarr_engine(tmp_path, fmt, mask_and_scale):
    # v3: xarray stores a float _FillValue attribute as base64 of a float64, which
    # must be decoded for CF masking; 0-d variables have no dimension_names.
    ds = xr.Dataset(
        {
            "v": (("x",), np.array([1.0, -99.0, 3.0]), {"_FillValue": -99.0}),
            "c": (("x",), np.array([1j, 2.0, 3.0]), {"_FillValue": 2.0 + 0j}),
            "s": ((), 3.5),
        }
    )
    path = str(tmp_path / "f.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=fmt, consolidated=False)
        ref = xr.open_dataset(path, engine="zarr", mask_and_scale=mask_and_scale).load()
    back = xr.open_dataset(path, engine="cuzarr", mask_and_scale=mask_and_scale).load()
    xr.testing.assert_identical(back, ref)
    assert np.isnan(back.v.values[1]) == mask_and_scale
    assert back.v.encoding.get("_FillValue", back.v.attrs.get("_FillValue")) == -99.0


def test_xarray_rectilinear_chunk_encoding_like_zarr_engine(tmp_path):
    path = str(tmp_path / "r.zarr")
    g = cuzarr.create_group(path)
    a = g.create_array(
        "v", shape=(10, 10), chunks=[[1, 2, 2, 5], 5], dtype="f4", dimension_names=["y", "x"]
    )
    a[...] = np.arange(100, dtype="f4").reshape(10, 10)
    ds = xr.open_dataset(path, engine="cuzarr", chunks={})
    assert ds.v.encoding["chunks"] == ((1, 2, 2, 5), 5)  # an int along regular dims
    assert ds.v.encoding["preferred_chunks"] == {"y": (1, 2, 2, 5), "x": 5}
    assert ds.v.chunks == ((1, 2, 2, 5), (5, 5))
    np.testing.assert_array_equal(ds.v.values, a[...])


class CountingStore(LocalStore):
    def __init__(self, root):
        super().__init__(root)
        self.keys: list[str] = []

    async def get(self, key, prototype=None, byte_range=None):
        self.keys.append(key)
        return await super().get(key, prototype, byte_range)


def test_xarray_isel_reads_only_needed_chunks(tmp_path):
    path = tmp_path / "big.zarr"
    g = cuzarr.create_group(str(path))
    a = g.create_array("v", shape=(100, 100), chunks=(10, 10), dtype="f8", dimension_names=["y", "x"])
    a[...] = np.arange(10_000, dtype="f8").reshape(100, 100)
    store = CountingStore(path)
    ds = xr.open_dataset(store, engine="cuzarr")
    store.keys.clear()
    sub = ds.v.isel(y=slice(0, 5), x=[1, 55]).values
    np.testing.assert_array_equal(sub, a[0:5][:, [1, 55]])
    chunk_reads = [k for k in store.keys if k.startswith("v/c")]
    assert sorted(chunk_reads) == ["v/c/0/0", "v/c/0/5"]


def test_cuzarr_written_dataset_opens_in_xarray_both_engines(tmp_path):
    path = str(tmp_path / "c.zarr")
    g = cuzarr.create_group(path, attributes={"source": "cuzarr"})
    a = g.create_array("z", shape=(4, 3), chunks=(2, 3), dtype="i4", dimension_names=["a", "b"])
    a[...] = np.arange(12).reshape(4, 3)
    sub = g.create_group("inner")
    sub.create_array("w", shape=(3,), chunks=(3,), dtype="f4", dimension_names=["b"])[...] = [1, 2, 3]
    for engine in ("cuzarr", "zarr"):
        ds = xr.open_dataset(path, engine=engine)
        np.testing.assert_array_equal(ds.z.values, np.arange(12).reshape(4, 3))
        assert ds.attrs["source"] == "cuzarr"
    tree = xr.open_datatree(path, engine="cuzarr")
    np.testing.assert_array_equal(tree["inner"].dataset.w.values, [1, 2, 3])


def test_xarray_open_datatree_group_is_the_root(tmp_path):
    # open_datatree(group=...) used to ignore the group and open the whole store
    path = str(tmp_path / "t.zarr")
    tree = xr.DataTree.from_dict(
        {
            "/": xr.Dataset({"r": ("x", [1, 2, 3])}),
            "/g1": xr.Dataset({"a": ("y", [1.0, 2.0])}),
            "/g1/g2": xr.Dataset({"b": ("x", [4, 5, 6])}),
            "/other": xr.Dataset(),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree.to_zarr(path, consolidated=False)
        ref = xr.open_datatree(path, engine="zarr", group="g1").load()
    for group in ("g1", "/g1/"):
        got = xr.open_datatree(path, engine="cuzarr", group=group).load()
        xr.testing.assert_identical(got, ref)
        assert list(got.children) == ["g2"]


def test_dask_round_trip_aligned_to_shards(tmp_path):
    import dask.array as da

    x = da.random.default_rng(0).integers(0, 1000, size=(50, 40), chunks=(7, 9))
    arr = from_dask(x, str(tmp_path / "d"), chunks=(5, 5), shards=(10, 20), dtype="i8")
    np.testing.assert_array_equal(arr[...], x.compute())
    y = to_dask(arr)
    assert y.chunks[0][0] == 10 and y.chunks[1][0] == 20
    np.testing.assert_array_equal(y.compute(), x.compute())
    assert int(y.sum().compute()) == int(x.sum().compute())


@pytest.mark.parametrize(
    "kw",
    [
        {"chunks": [[1, 2, 2, 5], 7]},  # rectilinear chunks
        {"chunks": (2, 5), "shards": [[4, 6], 20]},  # rectilinear shards
    ],
)
def test_from_dask_rectilinear(kw):
    import dask.array as da

    x = np.arange(200, dtype="f4").reshape(10, 20)
    arr = from_dask(da.from_array(x, chunks=(3, 5)), {}, **kw)
    np.testing.assert_array_equal(arr[...], x)
    np.testing.assert_array_equal(to_dask(arr).compute(), x)


@pytest.mark.parametrize("shards", [None, (2000,)])
def test_dask_store_misaligned_into_memory_store_loses_nothing(shards):
    # da.store(lock=False) with blocks straddling chunks: threads read-modify-write
    # the same chunks; MemoryStore's per-key locks keep every update.
    import dask
    import dask.array as da

    from cuzarr.storage import MemoryStore

    n = 8_000
    for _ in range(2):
        arr = cuzarr.create_array(
            MemoryStore(), shape=(n,), chunks=(1000,) if shards is None else (40,),
            shards=shards, dtype="i4", fill_value=0,
        )
        with dask.config.set(scheduler="threads", num_workers=16):
            da.store(da.arange(n, chunks=37, dtype="i4") + 1, arr, lock=False)
        np.testing.assert_array_equal(arr[...], np.arange(n, dtype="i4") + 1)


def test_from_dask_zero_length():
    import dask.array as da

    arr = from_dask(da.zeros((0, 5), chunks=(1, 5), dtype="i4"), {})
    assert arr.shape == (0, 5)
    assert arr[...].shape == (0, 5)


def test_dask_distributed_two_processes(tmp_path):
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    expected = np.arange(64 * 48, dtype="i4").reshape(64, 48)
    x = da.from_array(expected, chunks=(16, 24))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster):
        arr = from_dask(x, str(tmp_path / "dist"), chunks=(8, 8), shards=(16, 24), dtype="i4")
        np.testing.assert_array_equal(to_dask(arr).compute(), expected)
        assert float(to_dask(arr).mean().compute()) == expected.mean()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "dist"))[...], expected)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuzarr.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_info_tree_copy_consolidate(tmp_path):
    src = str(tmp_path / "src.zarr")
    g = cuzarr.create_group(src, zarr_format=2, attributes={"k": 1})
    a = g.create_array("a", shape=(40, 30), chunks=(10, 10), dtype="u2")
    data = (np.arange(1200) % 7).astype("u2").reshape(40, 30)
    a[...] = data
    r = _cli("info", src, "--path", "a", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["shape"] == [40, 30] and info["nchunks"] == 12 and info["stored_bytes"] > 0
    assert info["compression_ratio"] > 1
    r = _cli("tree", src)
    assert r.returncode == 0 and "a (40, 30) uint16" in r.stdout
    dst = str(tmp_path / "dst.zarr")
    r = _cli("copy", src, dst, "--zarr-format", "3", "--chunks", "5,5", "--shards", "20,15",
             "--compressor", "zstd:3", "--quiet")
    assert r.returncode == 0, r.stderr
    b = cuzarr.open_array(dst, path="a", mode="r")
    assert b.zarr_format == 3 and b.chunks == (5, 5) and b.shards == (20, 15)
    np.testing.assert_array_equal(b[...], data)
    np.testing.assert_array_equal(zarr.open_array(dst, path="a")[...], data)
    r = _cli("consolidate", dst)
    assert r.returncode == 0, r.stderr
    assert cuzarr.open_consolidated(dst)["a"].shape == (40, 30)
    r = _cli("info", str(tmp_path / "missing"))
    assert r.returncode == 1 and "error" in r.stderr


@pytest.mark.parametrize("direction", [(2, 3), (3, 2)])
def test_cli_copy_between_formats_keeps_what_xarray_reads(tmp_path, direction):
    """Dimension names go across (v3 dimension_names <-> v2 _ARRAY_DIMENSIONS),
    and so does what xarray masks: the v2 fill value <-> the v3 _FillValue."""
    import xarray as xr

    src_fmt, dst_fmt = direction
    ds = xr.Dataset(
        {
            "cnt": ("t", np.array([1, -1, 3], "i4")),
            "f": ("t", np.array([1.0, np.nan, 2.0])),
            "p": ("t", np.array([1.0, np.nan, 2.5])),
        }
    )
    enc = {"cnt": {"_FillValue": -1}, "p": {"dtype": "i2", "scale_factor": 0.01, "_FillValue": -9999}}
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    ds.to_zarr(src, zarr_format=src_fmt, mode="w", encoding=enc, consolidated=False)
    r = _cli("copy", src, dst, "--zarr-format", str(dst_fmt), "--quiet")
    assert r.returncode == 0, r.stderr
    want = xr.open_dataset(src, engine="zarr", consolidated=False)
    for engine in ("zarr", "cuzarr"):
        got = xr.open_dataset(dst, engine=engine, **({"consolidated": False} if engine == "zarr" else {}))
        for v in ("cnt", "f", "p"):
            np.testing.assert_array_equal(got[v].values, want[v].values)
            assert got[v].dims == ("t",)
            assert "_ARRAY_DIMENSIONS" not in got[v].attrs


def test_cli_copy_memory_is_bounded(tmp_path):
    from cuzarr.cli import copy_array

    src = cuzarr.create_array(str(tmp_path / "s"), shape=(256, 256), chunks=(16, 16), dtype="f8")
    src[...] = np.random.default_rng(1).random((256, 256))
    dst = copy_array(src, str(tmp_path / "d"), chunks=(32, 32), max_block_bytes=64 << 10)
    np.testing.assert_array_equal(dst[...], src[...])


def test_cli_user_errors_are_messages_not_tracebacks(tmp_path, capsys):
    from cuzarr.cli import main

    src = str(tmp_path / "src.zarr")
    a = cuzarr.create_array(src, name="x", shape=(6,), chunks=(2,), dtype="i4")
    a[:] = np.arange(6)
    assert main(["copy", src, str(tmp_path / "d.zarr"), "--quiet"]) == 0
    for argv in (
        ["copy", src, str(tmp_path / "d.zarr"), "--quiet"],  # destination exists
        ["copy", src, str(tmp_path / "e.zarr"), "--src-path", "x", "--chunks", "abc"],
        ["copy", src, str(tmp_path / "e.zarr"), "--src-path", "x", "--compressor", "foo"],
        ["copy", src, str(tmp_path / "e.zarr"), "--src-path", "x", "--compressor", "zstd:z"],
        # copying a node onto itself (or into itself) would delete the source first
        ["copy", src, src, "--src-path", "x", "--dst-path", "x", "--overwrite", "--quiet"],
        ["copy", src, src, "--dst-path", "inner", "--quiet"],
    ):
        capsys.readouterr()
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("cuzarr: error:") and "Traceback" not in err, (argv, err)
    np.testing.assert_array_equal(cuzarr.open_array(src, path="x")[:], np.arange(6))
    r = subprocess.run(
        [sys.executable, "-m", "cuzarr", "tree", src], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "x (6,) int32" in r.stdout, r.stderr


def test_cli_copy_v3_to_v2_without_a_fill_attribute_stores_a_null_fill(tmp_path):
    """An xarray v3 array without _FillValue (ints, coordinates) has no missing
    value: its v2 copy gets a null fill, else xarray would mask real zeros."""
    import xarray as xr

    from cuzarr.cli import copy_array

    ds = xr.Dataset({"i": ("x", np.array([0, 1, 2, 3], "i4"))}, coords={"x": np.arange(4)})
    ds.to_zarr(str(tmp_path / "src"), zarr_format=3, consolidated=False)
    src = cuzarr.open_group(str(tmp_path / "src"), mode="r")
    for name in ("i", "x"):
        copy_array(src[name], str(tmp_path / "dst"), path=name, zarr_format=2)
    cuzarr.open_group(str(tmp_path / "dst"), mode="a", zarr_format=2)
    got = xr.open_zarr(str(tmp_path / "dst"), zarr_format=2, consolidated=False)
    np.testing.assert_array_equal(got["i"].values, [0, 1, 2, 3])
    assert cuzarr.open_array(str(tmp_path / "dst"), path="i").fill_value is None


def test_cli_copy_v3_to_v2_of_a_nan_filled_array_stays_sparse(tmp_path):
    """A float v3 array filled with NaN and no _FillValue: its v2 copy keeps the
    NaN fill (masking NaN changes no value), so the chunks never written stay
    unwritten instead of being stored as NaN (a null fill would read them as 0)."""
    import xarray as xr

    from cuzarr.cli import copy_array

    src = cuzarr.create_array(str(tmp_path / "src"), name="v", shape=(100, 100), chunks=(10, 10),
                              dtype="f8", fill_value=np.nan, dimension_names=("y", "x"))
    src[5, 5] = 1.0
    copy_array(src, str(tmp_path / "dst"), path="v", zarr_format=2)
    cuzarr.open_group(str(tmp_path / "dst"), mode="a", zarr_format=2)
    stored = [p for p in (tmp_path / "dst" / "v").iterdir() if not p.name.startswith(".")]
    assert len(stored) == 1  # the one chunk the source holds
    for engine in ("zarr", "cuzarr"):
        got = xr.open_dataset(str(tmp_path / "dst"), engine=engine, consolidated=False)["v"]
        np.testing.assert_array_equal(got.values, src[...])
