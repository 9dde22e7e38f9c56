"""zarr-python 3.4 names that cuzarr mirrors: the same call with each library on a
temporary directory must write the same metadata documents and the same data."""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cuzarr

zarr = pytest.importorskip("zarr")

LIBS = {"zarr": zarr, "cuzarr": cuzarr}
_DOCS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


def _documents(root: Path) -> dict[str, Any]:
    """Every metadata document under ``root``, by relative path (an empty v2 ``.zattrs``
    counts as absent: zarr-python writes one, cuzarr does not)."""
    out: dict[str, Any] = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f in _DOCS:
                doc = json.loads((Path(dirpath) / f).read_text())
                if f == ".zattrs" and doc == {}:
                    continue
                out[str((Path(dirpath) / f).relative_to(root))] = doc
    return out


def _chunk_keys(root: Path) -> set[str]:
    return {
        str((Path(d) / f).relative_to(root))
        for d, _, fs in os.walk(root)
        for f in fs
        if f not in _DOCS
    }


def _both(tmp_path: Path, fn: Any) -> dict[str, Any]:
    """Run ``fn(lib, root)`` for zarr and cuzarr, each in its own directory; the
    documents and chunk keys written must match. Returns each library's result."""
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, lib in LIBS.items():
            root = tmp_path / name
            root.mkdir()
            results[name] = fn(lib, root)
    assert _documents(tmp_path / "cuzarr") == _documents(tmp_path / "zarr")
    assert _chunk_keys(tmp_path / "cuzarr") == _chunk_keys(tmp_path / "zarr")
    return results


def _same_data(r: dict[str, Any]) -> None:
    np.testing.assert_array_equal(np.asarray(r["cuzarr"][...]), np.asarray(r["zarr"][...]))


# ------------------------------------------------------------------ top level


def test_every_zarr_name_exists():
    skipped = {"copy", "copy_all", "copy_store", "create_hierarchy", "print_debug_info"}
    missing = set(zarr.__all__) - set(cuzarr.__all__) - skipped
    assert not missing


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("chunks", [None, False, 4, (3, 5)])
def test_create(tmp_path, fmt, chunks):
    data = np.arange(70, dtype="i4").reshape(10, 7)

    def fn(lib, root):
        return lib.create(
            (10, 7), chunks=chunks, dtype="i4", store=root / "a", zarr_format=fmt,
            fill_value=3, attributes={"x": 1}, data=data,
        )

    r = _both(tmp_path, fn)
    assert r["cuzarr"].chunks == r["zarr"].chunks
    _same_data(r)


def test_create_legacy_arguments(tmp_path):
    import numcodecs

    def fn(lib, root):
        lib.create(5, store=root / "two", path="v2", zarr_format=2, compressor=numcodecs.GZip(1),
                   filters=[numcodecs.Delta("<f8")], dimension_separator="/", order="F")
        lib.create((6, 6), store=root, path="v3", chunk_shape=(2, 3),
                   chunk_key_encoding=("default", "."), dimension_names=["a", "b"],
                   codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "gzip", "configuration": {"level": 1}}])
        lib.create(4, store=root, path="plain")

    _both(tmp_path, fn)


def test_create_errors_match():
    for kwargs in (
        {"chunks": True},
        {"zarr_format": 3, "compressor": None},
        {"zarr_format": 3, "filters": []},
        {"zarr_format": 3, "dimension_separator": "/"},
        {"zarr_format": 2, "dimension_names": ["a"]},
        {"chunks": 2, "chunk_shape": 2},
    ):
        for lib in LIBS.values():
            with pytest.raises(ValueError):
                lib.create((4,), store={}, **kwargs)


def test_create_mode_and_overwrite(tmp_path):
    for lib in LIBS.values():
        p = tmp_path / lib.__name__
        lib.create(4, store=p)
        with pytest.raises(Exception, match=r"(?i)exists"):
            lib.create(4, store=p)
        a = lib.create(7, store=p, overwrite=True)
        assert a.shape == (7,)


@pytest.mark.parametrize("fmt", [None, 2, 3])
def test_group(tmp_path, fmt):
    def fn(lib, root):
        g = lib.group(root, zarr_format=fmt, attributes={"a": 1})
        g.create_group("sub")
        again = lib.group(root, attributes={"b": 2})  # opens, attributes ignored
        assert dict(again.attrs) == {"a": 1} and "sub" in again
        new = lib.group(root, path="x", overwrite=True, zarr_format=fmt)
        return (g.metadata.zarr_format, new.path)

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"]


def test_group_overwrite_replaces(tmp_path):
    def fn(lib, root):
        g = lib.group(root)
        g.create_group("sub")
        g2 = lib.group(root, overwrite=True)
        return sorted(g2.keys())

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"] == []


@pytest.mark.parametrize("src_fmt", [2, 3])
@pytest.mark.parametrize("dst_fmt", [None, 2, 3])
@pytest.mark.parametrize("src_lib", ["zarr", "own"])
def test_from_array_keep(tmp_path, src_fmt, dst_fmt, src_lib):
    """The source is a zarr-python array for both libraries, or each library's own."""
    data = np.arange(100, dtype="i2").reshape(10, 10)
    # zarr-python refuses to carry v3 dimension names into a v2 copy: no names there
    named = src_fmt == 3 and dst_fmt != 2
    kw: dict[str, Any] = {"dimension_names": ["a", "b"]} if named else {}

    def make(lib):
        src = lib.create_array(
            {}, shape=(10, 10), chunks=(3, 4), dtype="i2", fill_value=7, zarr_format=src_fmt,
            attributes={"k": [1, {"n": 2}]}, **kw,
        )
        src[...] = data
        return src

    zsrc = make(zarr)

    def fn(lib, root):
        src = zsrc if src_lib == "zarr" else make(lib)
        return lib.from_array(root / "a", data=src, zarr_format=dst_fmt)

    r = _both(tmp_path, fn)
    _same_data(r)


def test_from_array_options(tmp_path):
    data = np.arange(60, dtype="f4").reshape(6, 10)

    def fn(lib, root):
        src = lib.create_array(root / "src", shape=(6, 10), chunks=(2, 5), shards=(2, 10),
                               dtype="f4")
        src[...] = data
        lib.from_array(root / "nodata", data=src, write_data=False, attributes={})
        lib.from_array(root / "np", data=data, chunks=(3, 3), fill_value=1.5)
        lib.from_array(root / "list", data=[[1, 2], [3, 4]])
        return lib.from_array(root, name="re", data=src, chunks=(3, 5), shards=None,
                              compressors=None, overwrite=True)

    r = _both(tmp_path, fn)
    _same_data(r)


def test_create_array_data_config(tmp_path):
    data = np.arange(24, dtype="u1").reshape(4, 6)

    def fn(lib, root):
        a = lib.create_array(root / "a", data=data, chunks=(2, 3),
                             config={"order": "F", "write_empty_chunks": True})
        lib.create_array(root / "b", data=data, write_data=False)
        lib.create_array(root / "c", shape=(4,), dtype="i4", config={"write_empty_chunks": True})[:] = 0
        return a

    r = _both(tmp_path, fn)
    _same_data(r)
    assert r["cuzarr"].config.order == r["zarr"].config.order == "F"
    assert r["cuzarr"].config.write_empty_chunks is r["zarr"].config.write_empty_chunks is True
    for lib in LIBS.values():
        with pytest.raises(ValueError):
            lib.create_array({}, data=data, shape=(4, 6))


def test_create_array_signature_kept():
    import inspect

    sig = inspect.signature(cuzarr.create_array)
    defaults = {k: p.default for k, p in sig.parameters.items()}
    assert defaults["dtype"] is None and defaults["chunks"] == "auto"
    assert defaults["compressors"] == "auto" and defaults["zarr_format"] == 3
    assert defaults["overwrite"] is False and defaults["write_empty_chunks"] is None
    assert list(sig.parameters)[:2] == ["store", "name"]
    assert list(sig.parameters)[-3:] == ["data", "config", "write_data"]
    assert (defaults["data"], defaults["config"], defaults["write_data"]) == (None, None, True)


def test_dtype_is_required_without_data_as_in_zarr_python():
    for lib in LIBS.values():
        g = lib.group()
        for make, args in (
            (lib.create_array, ({},)),
            (g.create_array, ("a",)),
            (g.require_array, ("b",)),
        ):
            with pytest.raises(ValueError, match="dtype was not specified"):
                make(*args, shape=(3,))
        # the legacy functions keep their float64 default
        assert lib.zeros((2,)).dtype == lib.open({}, mode="a", shape=(2,)).dtype == "float64"
    with pytest.raises(TypeError, match="unexpected keyword argument 'shpe'"):
        cuzarr.group().create_array("a", shpe=(3,), dtype="i4")


@pytest.mark.parametrize("fmt", [2, 3])
def test_save_and_load(tmp_path, fmt):
    a, b = np.arange(12).reshape(3, 4), np.linspace(0, 1, 5)

    def fn(lib, root):
        lib.save(root / "one", a, zarr_format=fmt)
        lib.save(root / "many", a, b, zarr_format=fmt, named=b)
        lib.save_array(root, a, path="arr", zarr_format=fmt, fill_value=5)
        lib.save_group(root / "grp", x=a, zarr_format=fmt)
        return lib.load(root / "one"), lib.load(root, path="many/arr_1")

    r = _both(tmp_path, fn)
    for x, y in zip(r["cuzarr"], r["zarr"], strict=True):
        np.testing.assert_array_equal(x, y)
    got = cuzarr.load(tmp_path / "cuzarr" / "many")
    assert sorted(got) == ["arr_0", "arr_1", "named"]
    np.testing.assert_array_equal(got["named"], b)


def test_save_errors():
    for lib in LIBS.values():
        with pytest.raises(ValueError):
            lib.save({})
        with pytest.raises(TypeError):
            lib.save_group({}, [1, 2])


def test_tree_and_open_like(tmp_path):
    def fn(lib, root):
        g = lib.group(root)
        g.create_group("a").create_array("x", shape=(2,), dtype="i1")
        t = lib.tree(g)
        src = lib.create_array({}, shape=(5, 5), chunks=(2, 2), dtype="i2", fill_value=9)
        b = lib.open_like(src, "like", store=root)
        return str(t).splitlines()[0], b.shape, b.chunks, b.fill_value

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"]


# ------------------------------------------------------------------ Group


def test_group_getters(tmp_path):
    def fn(lib, root):
        g = lib.group(root)
        g.create_array("arr", shape=(3,), dtype="i4")
        g.create_group("sub").create_group("deep")
        out = [
            g.get("arr").shape,
            g.get("missing", "dflt"),
            g.get("sub/deep").path,
            g.get_array("arr").shape,
            g.get_group("sub").path,
            g.nmembers(),
            g.nmembers(max_depth=None),
            [a.path for a in g.array_values()],
            [s.path for s in g.group_values()],
            [s.path for s in g.require_groups("sub", "new1", "new2")],
        ]
        for call, exc in (
            (lambda: g.get_array("missing"), "ArrayNotFoundError"),
            (lambda: g.get_array("sub"), "ContainsGroupError"),
            (lambda: g.get_group("arr"), "ContainsArrayError"),
            (lambda: g.get_group("missing"), "GroupNotFoundError"),
        ):
            with pytest.raises(Exception) as info:
                call()
            assert type(info.value).__name__ == exc
        return out

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_array_constructors(tmp_path, fmt):
    def fn(lib, root):
        g = lib.group(root, zarr_format=fmt)
        z = g.zeros(name="z", shape=(4, 4), chunks=2, dtype="i4")
        g.ones(name="o", shape=(3,))
        g.full(name="f", shape=(3,), fill_value=2.5)
        g.empty(name="e", shape=(3,), dtype="u1")
        g.zeros_like(name="zl", data=z)
        g.ones_like(name="ol", data=np.zeros((2, 3), dtype="f4"))
        g.full_like(name="fl", data=z, fill_value=4)
        g.empty_like(name="el", data=z)
        # Group.create_array in zarr-python 3.4 defaults v2 arrays to blosc (its
        # top-level create_array to zstd); cuzarr uses zstd for both: name the codecs.
        g.create("c", shape=(5,), dtype="i8", chunks=(2,), compressors=None)
        g.create_array("d", data=np.arange(6), compressors=None)
        return [g[k][...].tolist() for k in ("z", "o", "f", "zl", "ol", "fl", "c", "d")]

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"]


def test_group_zarr_format_mismatch():
    for lib in LIBS.values():
        g = lib.group({}, zarr_format=3)
        with pytest.raises(ValueError):
            g.zeros(name="z", shape=(2,), zarr_format=2)


def test_group_info(tmp_path):
    def fn(lib, root):
        g = lib.group(root)
        g.create_group("a").create_array("x", shape=(1,), dtype="i1")
        g.create_array("y", shape=(1,), dtype="i1")
        return repr(g.info), repr(g.info_complete())

    r = _both(tmp_path, fn)
    assert r["cuzarr"] == r["zarr"]


# ------------------------------------------------------------------ Array


def test_array_open_and_config(tmp_path):
    for lib in LIBS.values():
        p = tmp_path / lib.__name__
        lib.create_array(p, shape=(4, 4), dtype="i4")[...] = 1
        a = lib.Array.open(p)
        assert a.shape == (4, 4) and a.config.order == "C"
        b = a.with_config({"order": "F"})
        assert b.config.order == "F"
        assert b.config.write_empty_chunks == a.config.write_empty_chunks
        assert b[...].flags.f_contiguous
        c = lib.Array.open(p, config={"write_empty_chunks": True})
        assert c.config.write_empty_chunks is True
        with pytest.raises(FileNotFoundError):
            lib.Array.open(tmp_path / "missing")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_array_applies_config(tmp_path, zarr_format):
    """open_array(config=...) of an existing array took no effect in cuzarr (the
    keyword was dropped): write_empty_chunks=True then stored no fill chunks."""
    for name, lib in LIBS.items():
        p = tmp_path / name
        lib.create_array(p, shape=(4,), chunks=(2,), dtype="i4", zarr_format=zarr_format)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # a v2 array's order is in its metadata: zarr-python ignores one given
            a = lib.open_array(p, mode="r+", config={"write_empty_chunks": True, "order": "F"})
        assert a.config.write_empty_chunks is True
        assert a.config.order == ("F" if zarr_format == 3 else a.config.order)
        a[:2] = 0
        key = "0" if zarr_format == 2 else "c/0"
        assert (p / key).exists(), name


# ------------------------------------------------------------------ async twins


def test_async_twins(tmp_path):
    from zarr.api import asynchronous as za

    from cuzarr.api import asynchronous as ca

    async def run(api, root):
        g = await api.group(store=root)
        await api.save_array(root, np.arange(4), path="s")
        a = await api.create(4, store=root, path="c", data=np.arange(4))
        b = await api.from_array(root / "f", data=np.ones(3))
        out = await api.load(store=root, path="s")
        assert (await g.nmembers()) >= 2
        assert (await g.get("nope")) is None
        return a.shape, b.shape, list(out)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rz = asyncio.run(run(za, tmp_path / "z"))
        rc = asyncio.run(run(ca, tmp_path / "c"))
    assert rc == rz
    assert _documents(tmp_path / "c") == _documents(tmp_path / "z")


def test_update_attributes_merges_as_zarr_does(tmp_path):
    import zarr as _zarr

    for lib in (_zarr, cuzarr):
        a = lib.create_array(tmp_path / lib.__name__, shape=(2,), dtype="u1",
                             attributes={"a": 1, "b": 2})
        a.update_attributes({"b": 3, "c": 4})
        g = lib.open_group(tmp_path / (lib.__name__ + "g"), mode="w", attributes={"x": 1})
        g.update_attributes({"y": 2})
    for name in ("zarr", "cuzarr"):
        assert dict(cuzarr.open_array(tmp_path / name, mode="r").attrs) == {"a": 1, "b": 3, "c": 4}
        assert dict(_zarr.open_group(tmp_path / (name + "g"), mode="r").attrs) == {"x": 1, "y": 2}


def test_create_object_codec_is_the_first_v2_filter(tmp_path):
    import numcodecs

    a = cuzarr.create(shape=(3,), dtype=object, object_codec=numcodecs.VLenBytes(),
                      zarr_format=2, store=tmp_path / "b")
    a[:] = np.array([b"x", b"", b"\x00y"], dtype=object)
    assert list(zarr.open_array(tmp_path / "b", mode="r")[:]) == [b"x", b"", b"\x00y"]
    meta = json.loads((tmp_path / "b" / ".zarray").read_text())
    assert [f["id"] for f in meta["filters"]] == ["vlen-bytes"]


def test_shortcuts_take_path_as_zarr_does(tmp_path):
    for fn, args in ((cuzarr.zeros, ((3,),)), (cuzarr.full, ((3,), 7)),
                     (cuzarr.array, (np.arange(3),)), (cuzarr.empty, ((3,),))):
        fn(*args, store=tmp_path / "s", path=f"g/{fn.__name__}")
        assert zarr.open_array(tmp_path / "s", path=f"g/{fn.__name__}", mode="r").shape == (3,)
    with pytest.raises(ValueError, match="name or path"):
        cuzarr.zeros((3,), store=tmp_path / "t", name="a", path="b")


def test_config_default_zarr_format_and_json_indent_as_zarr_python():
    # Both keys were in cuzarr.config's defaults but nothing read them.
    import warnings

    calls = {
        "create": lambda lib, d: lib.create(shape=(2,), dtype="i4", store=d),
        "zeros": lambda lib, d: lib.zeros(shape=(2,), dtype="i4", store=d),
        "array": lambda lib, d: lib.array(np.array([1, 2]), store=d),
        "group": lambda lib, d: lib.group(d),
        "open_group": lambda lib, d: lib.open_group(d, mode="a"),
        "open_array": lambda lib, d: lib.open_array(d, mode="a", shape=(2,), dtype="i4"),
        "create_array": lambda lib, d: lib.create_array(d, shape=(2,), dtype="i4"),
    }
    formats = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib in (zarr, cuzarr):
            with lib.config.set({"default_zarr_format": 2}):
                formats[lib.__name__] = {
                    name: fn(lib, {} if lib is cuzarr else zarr.storage.MemoryStore())
                    .metadata.zarr_format
                    for name, fn in calls.items()
                }
    assert formats["cuzarr"] == formats["zarr"]
    assert formats["cuzarr"]["zeros"] == 2 and formats["cuzarr"]["create_array"] == 3
    d: dict = {}
    with cuzarr.config.set({"json_indent": 4}):
        cuzarr.create_array(d, shape=(2,), dtype="i4")
    assert d["zarr.json"].startswith(b'{\n    "shape"')


# ---------------------------------------------------------------------------
# what code written for zarr-python 3.4 does (`import cuzarr as zarr`)


def test_errors_are_caught_as_zarr_python_code_catches_them(tmp_path):
    import zarr

    from cuzarr import errors

    path = str(tmp_path / "a")
    cuzarr.create_array(path, shape=(2,), dtype="i4")
    for lib in (cuzarr, zarr):
        with pytest.raises(ValueError):  # ContainsArrayError is a ValueError in both
            lib.create_array(path, shape=(2,), dtype="i4")
    with pytest.raises(FileExistsError):  # and still what DESIGN.md promises
        cuzarr.create_array(path, shape=(2,), dtype="i4")
    with pytest.raises(errors.ContainsArrayError):  # zarr-python: ContainsArrayError
        cuzarr.open_group(path, mode="r")
    with pytest.raises(errors.GroupNotFoundError):
        cuzarr.open_group(path, mode="r")
    gpath = str(tmp_path / "g")
    cuzarr.create_group(gpath)
    with pytest.raises(errors.NodeTypeValidationError):  # zarr-python's error there
        cuzarr.open_array(gpath, mode="r")
    with pytest.raises(errors.ArrayNotFoundError):
        cuzarr.open_array(gpath, mode="r")
    ro = cuzarr.open_array(path, mode="r")
    with pytest.raises(ValueError):  # zarr-python raises ValueError for read-only writes
        ro[0] = 1
    with pytest.raises(PermissionError):
        ro[0] = 1
    with pytest.raises(errors.VindexInvalidSelectionError):
        cuzarr.create_array({}, shape=(2, 2), dtype="i4").vindex[[0], 0:1]
    for name in (
        "BaseZarrError", "MetadataValidationError", "NegativeStepError", "ArrayIndexError",
        "VindexInvalidSelectionError", "ContainsArrayAndGroupError", "ChunkNotFoundError",
        "ZarrUserWarning", "ZarrDeprecationWarning", "UnstableSpecificationWarning",
    ):  # fmt: skip
        assert hasattr(errors, name), name
    assert issubclass(errors.NodeNotFoundError, errors.BaseZarrError)
    assert issubclass(errors.BaseZarrError, ValueError)


def test_group_setitem_stores_an_array():
    g = cuzarr.create_group({})
    g["x"] = np.arange(3)
    g["y"] = [[1, 2], [3, 4]]
    g["x"] = np.arange(5.0)  # replaces
    np.testing.assert_array_equal(g["x"][...], np.arange(5.0))
    np.testing.assert_array_equal(g["y"][...], [[1, 2], [3, 4]])
    assert sorted(g.keys()) == ["x", "y"]


def test_zarr_python_parameter_names_and_defaults():
    store: dict = {}
    a = cuzarr.create_array(store, shape=(4,), chunks=(2,), dtype="i4", fill_value=7)
    a.resize(new_shape=(6,))
    assert a.shape == (6,)
    with pytest.raises(TypeError):
        a.resize(5, new_shape=(6,))
    a.update_attributes(new_attributes={"k": 1})
    assert a.attrs["k"] == 1
    g = cuzarr.create_group({})
    g.update_attributes(new_attributes={"m": 2})
    assert g.attrs["m"] == 2
    assert cuzarr.full_like(a).fill_value == 7
    a.set_basic_selection(slice(0, 2), 1, prototype=None)
    a.set_orthogonal_selection([3], 2, prototype=None)
    np.testing.assert_array_equal(a[:4], [1, 1, 7, 2])
    b = cuzarr.open(store, config={"write_empty_chunks": True})
    b[...] = 7  # the fill value, stored anyway
    assert sum(1 for k in store if k.startswith("c/")) == 3
    cuzarr.consolidate_metadata(g.store)
    assert cuzarr.open_consolidated(g.store, use_consolidated=True).attrs["m"] == 2


def test_zarr_python_codec_enums_and_to_dict():
    import cuzarr.codecs as codecs

    blosc = codecs.BloscCodec(cname=codecs.BloscCname.zstd, clevel=3, shuffle=codecs.BloscShuffle.bitshuffle)
    a = cuzarr.create_array(
        {}, shape=(10,), dtype="i4", compressors=[blosc],
        serializer=codecs.BytesCodec(endian=codecs.Endian.big),
    )  # fmt: skip
    a[...] = np.arange(10)
    np.testing.assert_array_equal(a[...], np.arange(10))
    assert blosc.to_dict() == {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "blocksize": 0},
    }
    assert codecs.ShardingCodec is cuzarr.codecs.sharding.ShardingCodec


@pytest.mark.parametrize(
    "shape,dtype,shards",
    [
        ((10000, 10000), "f4", None),
        ((10000, 10000), "f4", "auto"),
        ((300000,), "f8", None),
        ((123, 4567, 3), "f8", "auto"),
        ((0, 5), "u1", None),
        ((1000,), str, None),
        ((64, 64, 64, 64), "i2", None),
        ((), "i4", "auto"),
    ],
)
def test_automatic_chunks_and_shards_are_zarr_pythons(shape, dtype, shards):
    import warnings

    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python: automatic shards are experimental
        z = zarr.create_array(zarr.storage.MemoryStore(), shape=shape, dtype=dtype, shards=shards)
    c = cuzarr.create_array({}, shape=shape, dtype=dtype, shards=shards)
    assert (c.chunks, c.shards) == (z.chunks, z.shards)


def test_late_compat_details(tmp_path):
    from cuzarr import errors

    a = cuzarr.create_array({}, shape=(100,), chunks=(10,), shards=(50,), dtype="i4")
    assert a.metadata.chunks == (10,)  # the inner chunks, as zarr-python
    gpath = str(tmp_path / "g")
    cuzarr.create_group(gpath)
    with pytest.raises(errors.NodeTypeValidationError):
        cuzarr.open_array(gpath, mode="a", shape=(3,), dtype="i4")
    with pytest.raises(errors.GroupNotFoundError):
        cuzarr.open(str(tmp_path / "missing"), mode="r")
    with pytest.raises(TypeError):
        cuzarr.open_consolidated(gpath, use_consolidated=False)
    assert cuzarr.create_array({}, shape=(2**40, 2**40, 2**40), dtype="i1").chunks


@pytest.mark.parametrize(
    "kw",
    [
        {"chunks": False},
        {"chunks": (5, 5), "shards": -1},
        {"chunks": (5, 5), "shards": (-1, 10)},
    ],
    ids=["chunks-False", "shards-minus-1", "shard-axis-minus-1"],
)
def test_whole_axis_chunk_and_shard_spellings(kw):
    import zarr

    z = zarr.create_array(zarr.storage.MemoryStore(), shape=(11, 20), dtype="i4", **kw)
    c = cuzarr.create_array({}, shape=(11, 20), dtype="i4", **kw)
    assert (c.chunks, c.shards) == (z.chunks, z.shards)


def test_async_open_takes_any_store_like_as_zarr(tmp_path):
    import asyncio

    from cuzarr.api import asynchronous as ca

    cuzarr.create_array(str(tmp_path / "a"), shape=(3,), dtype="i2")[:] = 3
    cuzarr.create_group(str(tmp_path / "g"))

    async def main():
        a = await cuzarr.AsyncArray.open(str(tmp_path / "a"))
        f = await cuzarr.AsyncArray.open(tmp_path / "a", config={"order": "F"})
        g = await cuzarr.AsyncGroup.open(str(tmp_path / "g"))
        x = await g.require_group("x", True)  # overwrite positionally, as zarr-python
        return await a.getitem(slice(None)), f.order, x.path

    got, order, path = asyncio.run(main())
    assert list(got) == [3, 3, 3] and order == "F" and path.endswith("x")
    # zarr-python's name is a copy function, not the stdlib module leaking through
    assert callable(ca.copy) and ca.copy.__module__ == ca.__name__
    ro = cuzarr.storage.LocalStore(tmp_path / "a", read_only=True)
    assert cuzarr.open_array(ro, mode=None).read_only  # mode=None: "r" on read-only stores
    assert not cuzarr.open_array(str(tmp_path / "a"), mode=None).read_only


def test_handles_compare_by_node_as_in_zarr_python(tmp_path):
    # Two handles of one node are equal (zarr-python's dataclass equality), and
    # print as zarr-python prints them: the store's URL and the node's path.
    for lib in LIBS.values():
        root = tmp_path / lib.__name__
        a = lib.create_array(str(root), name="g/a", shape=(3,), dtype="i4")
        b = lib.open_array(str(root), path="g/a")
        g1, g2 = lib.open_group(str(root), path="g"), lib.open_group(str(root), path="g")
        assert a == b and g1 == g2 and a.async_array == b.async_array
        assert a != g1 and g1 != lib.open_group(str(root))
        other = lib.create_array(str(root), name="g/b", shape=(3,), dtype="i4")
        assert a != other
        a.resize((4,))
        assert a != b  # b still holds the old shape
        url = f"file://{root}"
        assert str(a.store) == url and str(a.store_path) == f"{url}/g/a"
        assert repr(a) == f"<Array {url}/g/a shape=(4,) dtype=int32>"
        assert repr(g1) == f"<Group {url}/g>"
        assert repr(a.async_array).startswith(f"<AsyncArray {url}/g/a ")
        assert str(lib.group().store).startswith("memory://")
    # still usable as dict keys and in sets (equal handles hash alike)
    a, b = cuzarr.open_array(str(tmp_path / "cuzarr"), path="g/a"), cuzarr.open_array(
        str(tmp_path / "cuzarr"), path="g/a"
    )
    assert len({a, b}) == 1 and len({a.store, b.store}) == 1


def test_group_method_parameter_names_as_in_zarr_python():
    import inspect

    pairs = [
        (zarr.AsyncGroup, cuzarr.AsyncGroup, ["get", "getitem", "setitem", "contains", "delitem"]),
        (zarr.Group, cuzarr.Group, ["get", "__getitem__", "__contains__", "__delitem__", "__setitem__"]),
    ]
    for theirs, ours, names in pairs:
        for n in names:
            want = list(inspect.signature(getattr(theirs, n)).parameters)[:2]
            assert list(inspect.signature(getattr(ours, n)).parameters)[:2] == want, n


def test_open_group_takes_the_legacy_keywords_with_zarr_pythons_warning(tmp_path):
    for lib in LIBS.values():
        for kw in ({"cache_attrs": True}, {"synchronizer": object()}, {"chunk_store": {}}):
            with pytest.warns(RuntimeWarning, match="not yet implemented"):
                g = lib.open_group(str(tmp_path / lib.__name__), mode="a", **kw)
            assert isinstance(g, lib.Group)


@pytest.mark.parametrize("fmt", [2, 3])
def test_create_group_follows_the_configured_default_format(tmp_path, fmt):
    for lib in LIBS.values():
        with lib.config.set({"default_zarr_format": fmt}):
            g = lib.create_group(str(tmp_path / lib.__name__))
            ag = asyncio.run(
                lib.api.asynchronous.create_group(store=str(tmp_path / lib.__name__ / "x"))
            )
        assert g.metadata.zarr_format == ag.metadata.zarr_format == fmt


def test_group_and_array_constructors_of_zarr_python(tmp_path):
    for lib in LIBS.values():
        root = str(tmp_path / lib.__name__)
        g = lib.Group.from_store(root, attributes={"a": 1}, zarr_format=2)
        assert g.metadata.zarr_format == 2 and g.attrs["a"] == 1 and g.synchronizer is None
        with pytest.raises(lib.errors.ContainsGroupError):
            lib.Group.from_store(root, zarr_format=2)
        g = lib.Group.from_store(root, overwrite=True)
        assert lib.Group.open(root).metadata.zarr_format == 3
        updated = asyncio.run(g.update_attributes_async({"b": 2}))
        assert updated.attrs["b"] == 2 and dict(lib.open_group(root).attrs) == {"b": 2}
        assert len(g.members(max_depth=None, use_consolidated_for_children=False)) == 0
    # from_dict: a handle from a metadata document alone (zarr-python's documents)
    z = zarr.create_array({}, shape=(3,), dtype="i4", fill_value=4)
    a = cuzarr.Array.from_dict(cuzarr.storage.StorePath(cuzarr.storage.MemoryStore()),
                               z.metadata.to_dict())
    np.testing.assert_array_equal(a[...], [4, 4, 4])
    for fmt in (2, 3):
        doc = zarr.group(zarr_format=fmt, attributes={"x": 2}).metadata.to_dict()
        ag = cuzarr.AsyncGroup.from_dict(cuzarr.storage.StorePath(cuzarr.storage.MemoryStore()), doc)
        assert ag.attrs == {"x": 2} and ag.zarr_format == fmt
    with pytest.raises(cuzarr.errors.ContainsArrayError):
        cuzarr.AsyncGroup.from_dict(cuzarr.storage.StorePath(cuzarr.storage.MemoryStore()),
                                    z.metadata.to_dict())
    # AsyncArray(metadata, store_path, config) as zarr-python's constructor
    aa = cuzarr.AsyncArray(z.metadata.to_dict(), cuzarr.storage.StorePath(cuzarr.storage.MemoryStore()),
                           {"write_empty_chunks": True, "order": "F"})
    assert aa.config.write_empty_chunks is True and aa.config.order == "F"
    with pytest.raises(ValueError, match="unknown array config"):
        cuzarr.AsyncArray(z.metadata.to_dict(), aa.store_path, {"bogus": 1})


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_metadata_to_dict_as_zarr_python(fmt):
    ours = cuzarr.group(zarr_format=fmt, attributes={"a": [1, "x"]}).metadata.to_dict()
    theirs = zarr.group(zarr_format=fmt, attributes={"a": [1, "x"]}).metadata.to_dict()
    assert {k: ours[k] for k in ("zarr_format", "attributes")} == {
        k: theirs[k] for k in ("zarr_format", "attributes")
    }
    sp = cuzarr.storage.StorePath(cuzarr.storage.MemoryStore())
    assert cuzarr.AsyncGroup.from_dict(sp, ours).attrs == {"a": [1, "x"]}


def test_handles_with_nan_or_nat_fill_values_equal_themselves():
    store: dict = {}
    cuzarr.create_array(store, name="f", shape=(3,), dtype="f8", fill_value=np.nan)
    cuzarr.create_array(store, name="t", shape=(3,), dtype="M8[s]")  # NaT by default
    for name in ("f", "t"):
        a, b = cuzarr.open_array(store, path=name), cuzarr.open_array(store, path=name)
        assert a == b and len({a, b}) == 1
        assert cuzarr.open_group(store)[name] == a
