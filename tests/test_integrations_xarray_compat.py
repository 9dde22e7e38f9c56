"""engine="cuzarr" against xarray's own zarr backend (zarr-python), and the dask
bridges against numpy: regression tests, then bounded seeded fuzzing."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import cuzarr
from cuzarr.integrations.dask import from_dask, to_dask

pytestmark = pytest.mark.filterwarnings("ignore")

ENCODING_KEYS = ("chunks", "preferred_chunks", "shards", "dtype", "_FillValue", "fill_value",
                 "units", "calendar", "scale_factor", "add_offset")


def _codec_json(c):
    # zarr-python's v3 codecs -> their metadata dicts (cuzarr's encoding form); numcodecs as is
    return c.to_dict() if hasattr(c, "evolve_from_array_spec") else c


def _same(a, b) -> bool:
    scalars = (float, complex, np.floating, np.complexfloating)
    if isinstance(a, scalars) and isinstance(b, scalars) and np.isnan(a) and np.isnan(b):
        return True
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        eq = a == b
        return bool(np.all(eq)) if isinstance(eq, np.ndarray) else bool(eq)
    except (TypeError, ValueError):
        return repr(a) == repr(b)


def _open_both(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = xr.open_dataset(path, engine="zarr", **kw)
    return ref, xr.open_dataset(path, engine="cuzarr", **kw)


def _assert_like_zarr_engine(path, **kw):
    """Same values, dtypes, attrs and encodings as engine="zarr"."""
    ref, got = _open_both(path, **kw)
    ref, got = ref.load(), got.load()
    xr.testing.assert_identical(got, ref)
    assert got.attrs == ref.attrs
    for name, var in ref.variables.items():
        assert got[name].dtype == var.dtype, name
        for key in (*ENCODING_KEYS, "compressors", "filters", "serializer"):
            want = var.encoding.get(key, "<absent>")
            have = got[name].encoding.get(key, "<absent>")
            if key in ("compressors", "filters") and isinstance(want, tuple):
                want = tuple(_codec_json(c) for c in want)
            elif key == "serializer":
                want = _codec_json(want)
            assert _same(have, want), (name, key, have, want)
    return ref, got


def _to_zarr(ds, path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, consolidated=False, **kw)


# -- 1. shards in the encoding ------------------------------------------------------


def test_sharded_encoding_like_zarr_engine(tmp_path):
    # encoding["shards"] was missing, and preferred_chunks were the shards where
    # xarray's zarr backend gives the (inner) chunks
    path = str(tmp_path / "s.zarr")
    ds = xr.Dataset(
        {
            "v": (("x", "y"), np.arange(70.0).reshape(7, 10)),
            "u": (("y",), np.arange(10, dtype="i2")),  # not sharded
            "w": (("x", "y"), np.ones((7, 10), "f4")),  # shard larger than a dimension
        }
    )
    _to_zarr(ds, path, zarr_format=3, encoding={
        "v": {"chunks": (2, 5), "shards": (4, 10)},
        "w": {"chunks": (4, 10), "shards": (8, 20)},
    })
    ref, got = _assert_like_zarr_engine(path)
    assert got.v.encoding["shards"] == (4, 10) and got.v.encoding["chunks"] == (2, 5)
    assert got.v.encoding["preferred_chunks"] == {"x": 2, "y": 5}
    assert got.w.encoding["shards"] == (8, 20)
    assert got.u.encoding["shards"] is None
    assert got.v.encoding["compressors"] == ({"name": "zstd", "configuration": {"level": 0, "checksum": False}},)
    # lazily, through dask: the same blocks
    ref, got = _open_both(path, chunks={})
    for name in ref.variables:
        assert got[name].chunks == ref[name].chunks, name
    # what engine="cuzarr" opened writes back through zarr-python with its layout
    out = str(tmp_path / "out.zarr")
    _to_zarr(xr.open_dataset(path, engine="cuzarr"), out, zarr_format=3)
    back = zarr.open_group(out, mode="r")
    assert back["v"].shards == (4, 10) and back["v"].chunks == (2, 5)
    assert back["u"].shards is None
    xr.testing.assert_identical(xr.open_dataset(out, engine="cuzarr").load(), ref.load())


def test_rectilinear_shards_in_encoding(tmp_path):
    path = str(tmp_path / "r.zarr")
    g = cuzarr.create_group(path)
    a = g.create_array("v", shape=(10, 20), chunks=(2, 5), shards=[[4, 6], 20], dtype="f4",
                       dimension_names=["y", "x"])
    a[...] = np.arange(200, dtype="f4").reshape(10, 20)
    ds = xr.open_dataset(path, engine="cuzarr")
    assert ds.v.encoding["shards"] == ((4, 6), 20)  # an int along regular dims, as chunks
    assert ds.v.encoding["chunks"] == (2, 5)
    np.testing.assert_array_equal(ds.v.values, a[...])


# -- 2. v2 fill values of every dtype are CF masks, as with engine="zarr" -------------

_V2_FILL_CASES = [
    ("bool", np.array([True, False, True]), False),
    ("bool", np.array([True, False, True]), True),
    ("str", np.array(["a", "", "x"], dtype=object), ""),
    ("str", np.array(["a", "", "x"], dtype=object), "x"),
    ("U", np.array(["a", "", "xy"]), ""),
    ("U", np.array(["a", "", "xy"]), "xy"),
    ("S", np.array([b"ab", b"", b"x"]), b""),
    ("S", np.array([b"ab", b"", b"x"]), b"x"),
]


@pytest.mark.parametrize("mask_and_scale", [True, False])
@pytest.mark.parametrize(("kind", "data", "fill"), _V2_FILL_CASES,
                         ids=[f"{c[0]}-{c[2]!r}" for c in _V2_FILL_CASES])
def test_v2_fill_value_of_bool_and_string_arrays_like_zarr_engine(tmp_path, kind, data, fill, mask_and_scale):
    # cuzarr used to drop the v2 fill_value of bool and string arrays: no mask,
    # and no _FillValue attribute with mask_and_scale=False
    path = str(tmp_path / "f.zarr")
    _to_zarr(xr.Dataset({"v": (("x",), data, {"_FillValue": fill})}), path, zarr_format=2)
    _ref, got = _assert_like_zarr_engine(path, mask_and_scale=mask_and_scale)
    if mask_and_scale:
        assert got.v.isnull().values.tolist() == [d == fill for d in data.tolist()]
    else:
        assert got.v.attrs["_FillValue"] == fill


@pytest.mark.parametrize("dtype", ["bool", "str", "U3", "S3", "i4", "f4"])
def test_v2_default_fill_values_of_zarr_python_arrays(tmp_path, dtype):
    # zarr-python gives v2 arrays a default fill (False, "", 0): xarray's zarr
    # backend masks it; so must engine="cuzarr"
    path = str(tmp_path / "d.zarr")
    g = zarr.open_group(path, zarr_format=2, mode="w")
    a = g.create_array("v", shape=(3,), chunks=(2,), dtype=dtype,
                       attributes={"_ARRAY_DIMENSIONS": ["x"]})
    a[...] = np.array([1, 0, 1]).astype(dtype if dtype != "str" else "U1")
    for mask_and_scale in (True, False):
        _assert_like_zarr_engine(path, mask_and_scale=mask_and_scale)


# -- string dtype, NCZarr attributes, drop_variables ---------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_string_variables_keep_the_zarr_engines_dtype(tmp_path, fmt):
    # xarray's zarr backend keeps numpy's StringDType (and says so in the
    # encoding); cuzarr turned strings into object arrays, and a 0-d string
    # into a fixed-width "<U" one
    path = str(tmp_path / "s.zarr")
    ds = xr.Dataset(
        {"s": (("x",), np.array(["a", "bé", ""], dtype=object)), "z": ((), "✓✓")},
        coords={"x": np.array(["p", "q", "r"], dtype=object)},
    )
    _to_zarr(ds, path, zarr_format=fmt)
    ref, got = _assert_like_zarr_engine(path)
    assert got.s.dtype == ref.s.dtype and got.z.dtype == ref.z.dtype
    assert got.s.encoding["dtype"] == ref.s.encoding["dtype"]
    assert got.z.values.item() == "✓✓"


def test_nczarr_group_attributes_hidden_like_zarr_engine(tmp_path):
    path = str(tmp_path / "n.zarr")
    _to_zarr(xr.Dataset({"v": ("x", [1, 2])}, attrs={"title": "t", "_NCProperties": "v=2"}),
             path, zarr_format=2)
    _ref, got = _assert_like_zarr_engine(path)
    assert got.attrs == {"title": "t"}


def test_drop_variables_as_a_string(tmp_path):
    # a str used to become a set of its characters, dropping nothing
    path = str(tmp_path / "d.zarr")
    _to_zarr(xr.Dataset({"temperature": ("x", [1.0, 2.0]), "t": ("x", [3, 4])}), path, zarr_format=3)
    for drop in ("temperature", ["temperature"]):
        ref, got = _open_both(path, drop_variables=drop)
        assert set(got.variables) == set(ref.variables) == {"t"}


# -- 3. dask -------------------------------------------------------------------------


def test_from_dask_unknown_chunks_says_compute_chunk_sizes():
    import dask.array as da

    x = da.arange(10, chunks=3)
    y = x[x > 3]  # unknown (NaN) chunk sizes
    with pytest.raises(ValueError, match=r"compute_chunk_sizes\(\)"):
        from_dask(y, {})
    arr = from_dask(y.compute_chunk_sizes(), {})
    np.testing.assert_array_equal(arr[...], np.arange(4, 10))


@pytest.mark.parametrize(("dtype", "value"), [("S4", b"ab"), ("U4", "ab"), ("f4", 1.5)])
def test_to_dask_0d_keeps_the_arrays_dtype(dtype, value):
    # a[()] is a numpy scalar (b"ab" is S2): the computed block must be S4, as
    # the dask array's dtype says
    a = cuzarr.create_array({}, shape=(), dtype=dtype)
    a[...] = value
    x = to_dask(a)
    assert x.dtype == np.dtype(dtype)
    out = x.compute()
    assert out.dtype == np.dtype(dtype) and out.item() == value


# -- fuzzing: random datasets, both engines ---------------------------------------------

_DTYPES = ["i1", "i8", "u2", "u8", "f2", "f4", "f8", "c8", "c16", "bool", "M8[ns]", "M8[s]",
           "m8[ns]", "m8[s]", "str", "U4", "S4"]


def _rand_data(rng, dt, shape):
    n = int(np.prod(shape))
    if dt == "bool":
        v = rng.random(n) < 0.5
    elif dt[0] in "iu":
        info = np.iinfo(dt)
        v = rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True).astype(dt)
    elif dt[0] == "f":
        v = (rng.standard_normal(n) * 10).astype(dt)
    elif dt[0] == "c":
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    elif dt.startswith("M8"):
        v = (np.datetime64("2000-01-01", "s") + rng.integers(0, 10**8, n).astype("m8[s]")).astype(dt)
    elif dt.startswith("m8"):
        v = rng.integers(0, 10**6, n).astype("m8[s]").astype(dt)
    elif dt == "str":
        v = np.array(rng.choice(["", "a", "bé", "xyz", "✓✓"], n), dtype=object)
    elif dt == "U4":
        v = np.array(rng.choice(["", "a", "bé", "xyz"], n), dtype="U4")
    else:
        v = np.array(rng.choice([b"", b"a", b"bc", b"xyz"], n), dtype="S4")
    v = v.reshape(shape)
    if n and dt[0] in "fc" and rng.random() < 0.5:
        v.flat[rng.integers(0, n)] = np.nan
    if n > 1 and dt[0] in "Mm" and rng.random() < 0.3:
        v.flat[rng.integers(0, n)] = np.datetime64("NaT") if dt[0] == "M" else np.timedelta64("NaT")
    return v


def _rand_dataset(rng, fmt, prefix=""):
    dims = [prefix + d for d in ("x", "y", "z")][: int(rng.integers(0, 4))]
    sizes = {d: int(rng.integers(0 if rng.random() < 0.1 else 1, 6)) for d in dims}
    ds = xr.Dataset(attrs={"title": "t", "n": int(rng.integers(0, 5))})
    encoding = {}
    for i in range(int(rng.integers(1, 4))):
        dt = str(rng.choice(_DTYPES))
        if fmt == 3 and dt in ("str", "U4", "S4"):
            # xarray writes a v3 string _FillValue it cannot read back (or not at all)
            allow_fill = False
        else:
            allow_fill = dt[0] not in "Mm"
        vdims = tuple(d for d in dims if rng.random() < 0.8)
        shape = tuple(sizes[d] for d in vdims)
        data = _rand_data(rng, dt, shape)
        attrs, enc = {}, {}
        if allow_fill and rng.random() < 0.4:
            if data.size and rng.random() < 0.5:
                attrs["_FillValue"] = data.flat[0] if dt in ("str", "U4", "S4") else data.flat[0].item()
            else:
                attrs["_FillValue"] = {"bool": False, "str": "", "U4": "", "S4": b""}.get(dt, 7 if dt[0] == "u" else -7)
        if dt[0] == "f" and rng.random() < 0.3:
            attrs.update(scale_factor=0.5, add_offset=1.0)
        if dt[0] == "M" and rng.random() < 0.5:
            enc["units"] = "seconds since 1990-01-01"
            enc["calendar"] = str(rng.choice(["standard", "proleptic_gregorian"]))
        if dt[0] not in "Mm" and rng.random() < 0.3:
            attrs["units"] = "m"
        if shape and rng.random() < 0.5:
            enc["chunks"] = tuple(int(rng.integers(1, max(s, 1) + 1)) for s in shape)
        if fmt == 3 and shape and all(shape) and rng.random() < 0.4:
            enc["chunks"] = tuple(max(1, s // 2) for s in shape)
            enc["shards"] = tuple(2 * c for c in enc["chunks"])
        ds[f"v{i}"] = (vdims, data, attrs)
        encoding[f"v{i}"] = enc
    for d in dims:
        if rng.random() < 0.6:
            n = sizes[d]
            ds = ds.assign_coords({d: [np.arange(n), np.arange(n) * 0.5,
                                       pd.date_range("2001", periods=n).values,
                                       np.array([f"c{j}" for j in range(n)], dtype=object)][int(rng.integers(0, 4))]})
    if dims and rng.random() < 0.3:
        ds = ds.assign_coords(aux=((dims[0],), np.arange(sizes[dims[0]], dtype="f4") + 0.25))
    return ds, encoding


@pytest.mark.parametrize("block", range(4))
def test_fuzz_xarray_datasets_both_engines(tmp_path, block):
    for seed in range(block * 10, block * 10 + 10):
        rng = np.random.default_rng(seed)
        fmt = int(rng.choice([2, 3]))
        ds, encoding = _rand_dataset(rng, fmt)
        path = str(tmp_path / f"f{seed}.zarr")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds.to_zarr(path, zarr_format=fmt, consolidated=bool(rng.random() < 0.5),
                       encoding=encoding)
        kw = dict(mask_and_scale=bool(rng.random() < 0.7), decode_times=bool(rng.random() < 0.8))
        _assert_like_zarr_engine(path, **kw)
        ref, got = _open_both(path, chunks={}, **kw)
        for name in ref.variables:
            assert got[name].chunks == ref[name].chunks, (seed, name)
        # and engine="cuzarr"'s dataset written back by zarr-python: as engine="zarr"'s
        outs = []
        for engine in ("zarr", "cuzarr"):
            out = str(tmp_path / f"rt{seed}_{engine}.zarr")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                xr.open_dataset(path, engine=engine, **kw).to_zarr(out, zarr_format=fmt, consolidated=False)
            outs.append(out)
        assert _tree_bytes(outs[1]) == _tree_bytes(outs[0]), seed


def _tree_bytes(root: str) -> dict[str, bytes]:
    base = pathlib.Path(root)
    return {str(f.relative_to(base)): f.read_bytes() for f in sorted(base.rglob("*")) if f.is_file()}


def test_fuzz_datatree_both_engines(tmp_path):
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        fmt = int(rng.choice([2, 3]))
        groups = {"/": _rand_dataset(rng, fmt)[0]}
        for g in ("/a", "/a/b", "/c"):
            if rng.random() < 0.6:  # own dimension names: aligned with the parents
                groups[g] = _rand_dataset(rng, fmt, prefix=g.replace("/", ""))[0]
        tree = xr.DataTree.from_dict(groups)
        path = str(tmp_path / f"t{seed}.zarr")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree.to_zarr(path, zarr_format=fmt, consolidated=bool(rng.random() < 0.5))
            group = None if rng.random() < 0.7 else str(rng.choice(list(groups)))
            ref = xr.open_datatree(path, engine="zarr", group=group).load()
        got = xr.open_datatree(path, engine="cuzarr", group=group).load()
        xr.testing.assert_identical(got, ref)
        for node in ref.subtree:
            for name, var in node.variables.items():
                other = got[node.path][name] if node.path != "/" else got[name]
                for key in ENCODING_KEYS:
                    assert _same(other.encoding.get(key), var.encoding.get(key)), (seed, node.path, name, key)


def test_fuzz_dask_bridges_against_numpy():
    import dask
    import dask.array as da

    for seed in range(40):
        rng = np.random.default_rng(seed)
        dt = str(rng.choice([d for d in _DTYPES if d != "str"]))
        shape = tuple(int(rng.integers(0 if rng.random() < 0.1 else 1, 9))
                      for _ in range(int(rng.integers(0, 4))))
        data = _rand_data(rng, dt, shape)
        kw: dict = {"zarr_format": int(rng.choice([2, 3]))}
        if shape and rng.random() < 0.8:
            kw["chunks"] = tuple(int(rng.integers(1, 5)) for _ in shape)
            if kw["zarr_format"] == 3 and rng.random() < 0.4:
                kw["shards"] = tuple(c * int(rng.integers(1, 3)) for c in kw["chunks"])
        x = da.from_array(data, chunks=tuple(int(rng.integers(1, 6)) for _ in shape) or "auto")
        ctx = (seed, dt, shape, kw)

        def check(got, want=data, ctx=ctx):
            got = np.asarray(got)
            assert got.dtype == want.dtype and got.shape == want.shape, ctx
            if want.dtype.kind in "mM":
                got, want = got.view("i8"), want.view("i8")
            np.testing.assert_array_equal(got, want, err_msg=str(ctx))

        arr = from_dask(x, {}, **kw)
        check(arr[...])
        check(to_dask(arr).compute())
        check(da.from_array(arr, chunks=x.chunks).compute() if shape else arr[...])
        target = cuzarr.create_array({}, shape=shape, dtype=data.dtype, **kw)
        with dask.config.set(scheduler="threads"):
            da.store(x, target, lock=False)
        check(target[...])
        if shape and all(shape):
            part = tuple(slice(0, max(1, s // 2)) for s in shape)
            region = cuzarr.create_array({}, shape=shape, dtype=data.dtype, **kw)
            da.store(x[part], region, regions=part, lock=False)
            check(region[part], data[part])
            check(to_dask(arr)[..., ::2].compute(), data[..., ::2])


def test_engine_takes_zarr_engine_arguments_and_groups(tmp_path):
    """consolidated=, zarr_format=, storage_options=, use_zarr_fill_value_as_mask=
    as with engine="zarr"; a cuzarr.Group as the store; a v3 array's
    _ARRAY_DIMENSIONS attribute stays an attribute (engine="zarr" hides it in v2 only)."""
    import xarray as xr
    import zarr

    p3 = str(tmp_path / "f3.zarr")
    g = zarr.open_group(p3, mode="w", zarr_format=3)
    g.create_array(
        "v", shape=(2,), dtype="f8", dimension_names=["t"],
        attributes={"_ARRAY_DIMENSIONS": ["t"], "units": "K"},
    )  # fmt: skip
    want = xr.open_dataset(p3, engine="zarr", consolidated=False).v.attrs
    got = xr.open_dataset(p3, engine="cuzarr", consolidated=False, zarr_format=3).v.attrs
    assert got == want == {"_ARRAY_DIMENSIONS": ["t"], "units": "K"}
    p2 = str(tmp_path / "f2.zarr")
    ds = xr.Dataset({"c": ("t", np.array([1, -1, 3], "i4"))})
    ds.to_zarr(p2, zarr_format=2, mode="w", encoding={"c": {"_FillValue": -1}})
    for mask in (None, True):
        kw = {} if mask is None else {"use_zarr_fill_value_as_mask": mask}
        a = xr.open_dataset(p2, engine="zarr", **kw).c.values
        b = xr.open_dataset(p2, engine="cuzarr", storage_options=None, **kw).c.values
        np.testing.assert_array_equal(a, b)
    # False: the fill value is no mask, as xarray documents the option (its own
    # engine="zarr" masks this v2 array all the same)
    np.testing.assert_array_equal(
        xr.open_dataset(p2, engine="cuzarr", use_zarr_fill_value_as_mask=False).c.values,
        np.array([1, -1, 3], "i4"),
    )
    np.testing.assert_array_equal(
        xr.open_dataset(cuzarr.open_group(p2, mode="r"), engine="cuzarr").c.values,
        xr.open_dataset(p2, engine="zarr").c.values,
    )
