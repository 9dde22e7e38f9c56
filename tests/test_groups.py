"""Groups: creation, hierarchies, members, attributes, modes, and interop with
zarr-python for implicit parents."""

import json

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr import errors


@pytest.fixture(params=["dict", "local"])
def store(request, tmp_path):
    return {} if request.param == "dict" else tmp_path / "g.zarr"


# --------------------------------------------------------------------------------------
# create / open / require


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_and_open(store, zarr_format):
    g = cuzarr.create_group(store, zarr_format=zarr_format, attributes={"a": 1})
    assert isinstance(g, cuzarr.Group)
    assert g.zarr_format == zarr_format
    assert g.path == ""
    assert g.name == "/"
    assert g.attrs["a"] == 1
    h = cuzarr.open_group(store, mode="r")
    assert h.zarr_format == zarr_format
    assert dict(h.attrs) == {"a": 1}
    assert list(h.keys()) == []
    assert len(h) == 0


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_documents_on_disk(tmp_path, zarr_format):
    cuzarr.create_group(tmp_path, zarr_format=zarr_format, attributes={"x": [1, 2]})
    if zarr_format == 3:
        doc = json.loads((tmp_path / "zarr.json").read_text())
        assert doc["zarr_format"] == 3
        assert doc["node_type"] == "group"
        assert doc["attributes"] == {"x": [1, 2]}
    else:
        assert json.loads((tmp_path / ".zgroup").read_text()) == {"zarr_format": 2}
        assert json.loads((tmp_path / ".zattrs").read_text()) == {"x": [1, 2]}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nested_hierarchy(store, zarr_format):
    root = cuzarr.create_group(store, zarr_format=zarr_format)
    a = root.create_group("a")
    b = a.create_group("b")
    x = b.create_array("x", shape=(3, 4), dtype="i2", chunks=(2, 2))
    x[...] = np.arange(12).reshape(3, 4)
    root.create_array("y", shape=(5,), dtype="f4")
    a.create_group("c", attributes={"deep": True})
    assert b.path == "a/b"
    assert b.name == "/a/b"
    assert b.basename == "b"
    assert x.path == "a/b/x"
    assert x.name == "/a/b/x"
    assert x.basename == "x"
    assert x.zarr_format == zarr_format
    r = cuzarr.open_group(store, mode="r")
    assert list(r.keys()) == ["a", "y"]
    assert list(r) == ["a", "y"]
    assert "a" in r and "y" in r and "a/b" in r and "a/b/x" in r
    assert "z" not in r and "a/z" not in r
    assert isinstance(r["a"], cuzarr.Group)
    assert isinstance(r["a/b"], cuzarr.Group)
    assert isinstance(r["a/b/x"], cuzarr.Array)
    assert isinstance(r["a"]["b"]["x"], cuzarr.Array)
    np.testing.assert_array_equal(r["a/b/x"][...], np.arange(12).reshape(3, 4))
    assert r["a/c"].attrs["deep"] is True
    assert sorted(r["a"].keys()) == ["b", "c"]
    # opening a sub-group directly by path
    sub = cuzarr.open_group(store, path="a/b", mode="r")
    assert list(sub.keys()) == ["x"]
    assert sub.path == "a/b"


def test_members_arrays_groups(store):
    root = cuzarr.create_group(store)
    root.create_group("g1").create_group("g11")
    root.create_group("g2")
    root.create_array("arr1", shape=(2,), dtype="u1")
    root["g1"].create_array("arr2", shape=(2,), dtype="u1")
    root["g1/g11"].create_array("arr3", shape=(2,), dtype="u1")
    m = root.members()
    assert [k for k, _ in m] == ["arr1", "g1", "g2"]
    assert isinstance(dict(m)["arr1"], cuzarr.Array)
    assert isinstance(dict(m)["g1"], cuzarr.Group)
    assert [k for k, _ in root.arrays()] == ["arr1"]
    assert [k for k, _ in root.groups()] == ["g1", "g2"]
    assert list(root.array_keys()) == ["arr1"]
    assert list(root.group_keys()) == ["g1", "g2"]
    deep = dict(root.members(max_depth=None))
    assert set(deep) == {"arr1", "g1", "g2", "g1/g11", "g1/arr2", "g1/g11/arr3"}
    assert isinstance(deep["g1/g11/arr3"], cuzarr.Array)
    assert deep["g1/g11/arr3"].path == "g1/g11/arr3"
    one = dict(root.members(max_depth=1))
    assert set(one) == {"arr1", "g1", "g2", "g1/g11", "g1/arr2"}


def test_members_ignores_non_nodes(tmp_path):
    root = cuzarr.create_group(tmp_path)
    root.create_array("a", shape=(2,), dtype="u1")
    (tmp_path / "not_a_node").mkdir()
    (tmp_path / "not_a_node" / "file.txt").write_text("hi")
    (tmp_path / "README").write_text("hi")
    assert list(root.keys()) == ["a"]


def test_tree(store):
    root = cuzarr.create_group(store)
    root.create_group("g1").create_array("x", shape=(2, 3), dtype="i4")
    root.create_array("y", shape=(4,), dtype="f8")
    t = root.tree()
    assert isinstance(t, str)
    lines = t.splitlines()
    assert lines[0] == "/"
    text = "\n".join(lines)
    assert "g1" in text and "x" in text and "y" in text
    assert "(2, 3)" in text and "int32" in text
    assert "(4,)" in text and "float64" in text
    # x is nested below g1: more indentation
    gline = next(line for line in lines if line.rstrip().endswith("g1"))
    xline = next(
        line for line in lines if " x " in line or line.strip().startswith(("└── x", "├── x"))
    )
    assert len(xline) - len(xline.lstrip(" │")) > len(gline) - len(gline.lstrip(" │"))
    assert str(root["g1"].tree()).splitlines()[0] == "/g1"


def test_tree_nesting_and_level_match_zarr():
    expect = {}
    for lib in (zarr, cuzarr):
        g = lib.create_group(zarr.storage.MemoryStore() if lib is zarr else {})
        a = g.create_group("a")
        a.create_group("x").create_array("deep", shape=(1,), dtype="i1")
        a.create_array("y", shape=(2,), dtype="f4")
        g.create_group("a-b")  # sorts between "a" and "a/x" as a path string
        g.create_array("z", shape=(3,), dtype="u1")
        expect[lib] = [str(g.tree()).rstrip("\n"), str(g.tree(level=1)).rstrip("\n")]
    assert expect[cuzarr] == expect[zarr]
    assert "│   └── y (2,) float32" in expect[cuzarr][0]
    assert repr(g.tree()) == str(g.tree())  # shows as a tree at the prompt


def test_tree_max_nodes_and_plain_as_zarr():
    out = {}
    for lib in (zarr, cuzarr):
        g = lib.create_group(zarr.storage.MemoryStore() if lib is zarr else {})
        for name in "abcd":
            g.create_group(name).create_array("x", shape=(1,), dtype="i1")
        full = repr(g.tree(plain=True))
        cut = repr(g.tree(max_nodes=3, plain=True))
        out[lib] = (full, cut)
    assert out[cuzarr][0].rstrip("\n") == out[zarr][0].rstrip("\n")
    for lib in (zarr, cuzarr):
        full, cut = out[lib]
        note = "Truncated at max_nodes=3, some nodes and their children may be missing\n"
        assert cut.startswith(note) and "Truncated" not in full
        assert len(cut[len(note):].rstrip("\n").splitlines()) == 1 + 3  # root and 3 nodes
    with pytest.raises(ValueError):
        cuzarr.create_group({}).tree(max_nodes=-1)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_group_use_consolidated(zarr_format):
    store = {}
    g = cuzarr.create_group(store, zarr_format=zarr_format)
    g.create_array("x", shape=(2,), dtype="i1")
    cuzarr.consolidate_metadata(store)
    g.create_array("y", shape=(2,), dtype="i1")  # not in the consolidated metadata
    assert sorted(cuzarr.open_group(store, mode="r").keys()) == ["x"]
    assert sorted(cuzarr.open_group(store, mode="r", use_consolidated=True).keys()) == ["x"]
    assert sorted(cuzarr.open_group(store, mode="r", use_consolidated=False).keys()) == ["x", "y"]
    other = cuzarr.create_group({}, zarr_format=zarr_format)
    with pytest.raises(errors.MetadataError):
        cuzarr.open_group(other.store, mode="r", use_consolidated=True)


def test_attrs_written_without_the_consolidated_metadata_drop_it_like_zarr(tmp_path):
    """v3: a handle opened with use_consolidated=False does not keep the
    consolidated block up to date, so it does not write it back (zarr-python
    neither): readers then list the store, and see members it added."""
    import json

    import zarr

    path = str(tmp_path / "g")
    g = cuzarr.create_group(path)
    g.create_group("a")
    cuzarr.consolidate_metadata(path)
    g2 = cuzarr.open_group(path, mode="r+", use_consolidated=False)
    g2.create_group("late")
    g2.attrs.update({"x": 1})
    doc = json.loads((tmp_path / "g" / "zarr.json").read_text())
    assert "consolidated_metadata" not in doc and doc["attributes"] == {"x": 1}
    assert sorted(cuzarr.open_group(path, mode="r").keys()) == ["a", "late"]
    assert sorted(zarr.open_group(path, mode="r").keys()) == ["a", "late"]
    # a handle that read the consolidated metadata keeps it (and updates it)
    cuzarr.consolidate_metadata(path)
    g3 = cuzarr.open_group(path, mode="r+")
    g3.attrs.update({"y": 2})
    doc = json.loads((tmp_path / "g" / "zarr.json").read_text())
    assert "consolidated_metadata" in doc and doc["attributes"] == {"x": 1, "y": 2}


def test_require_group(store):
    root = cuzarr.create_group(store)
    g = root.require_group("a", attributes={"k": 1})
    assert g.attrs["k"] == 1
    g2 = root.require_group("a")
    assert g2.path == "a"
    assert g2.attrs["k"] == 1
    g2.create_array("x", shape=(1,), dtype="u1")
    # overwrite=True replaces it
    g3 = root.require_group("a", overwrite=True)
    assert list(g3.keys()) == []
    nested = root.require_group("p/q/r")
    assert nested.path == "p/q/r"
    assert isinstance(root["p/q"], cuzarr.Group)


def test_require_array(store):
    root = cuzarr.create_group(store)
    a = root.require_array("x", shape=(4,), dtype="i4", chunks=(2,))
    a[:] = [1, 2, 3, 4]
    b = root.require_array("x", shape=(4,), dtype="i4")
    np.testing.assert_array_equal(b[:], [1, 2, 3, 4])
    with pytest.raises(TypeError):
        root.require_array("x", shape=(5,), dtype="i4")
    with pytest.raises(TypeError):
        root.require_array("x", shape=(4,), dtype="i2", exact=True)
    # as zarr-python: the existing dtype must cast safely to the one asked for
    b2 = root.require_array("x", shape=(4,), dtype="f8")  # i4 -> f8 is safe: accepted
    assert b2.dtype == np.dtype("i4")
    with pytest.raises(TypeError):
        root.require_array("x", shape=(4,), dtype="i2")  # i4 -> i2 is not


def test_group_create_array_kwargs(store):
    g = cuzarr.create_group(store)
    a = g.create_array(
        "x",
        shape=(10, 10),
        dtype="f4",
        chunks=(5, 5),
        fill_value=2.5,
        attributes={"units": "m"},
        dimension_names=["y", "x"],
    )
    assert a.chunks == (5, 5)
    assert a.fill_value == 2.5
    assert a.attrs["units"] == "m"
    np.testing.assert_array_equal(a[...], np.full((10, 10), 2.5, dtype="f4"))
    b = cuzarr.open_array(store, path="x", mode="r")
    assert b.metadata.dimension_names == ("y", "x")
    with pytest.raises(FileExistsError):
        g.create_array("x", shape=(1,), dtype="u1")
    c = g.create_array("x", shape=(1,), dtype="u1", overwrite=True)
    assert c.shape == (1,)


def test_group_inherits_format():
    g = cuzarr.create_group({}, zarr_format=2)
    a = g.create_array("x", shape=(2,), dtype="u1")
    assert a.zarr_format == 2
    assert g.create_group("s").zarr_format == 2


def test_delitem(tmp_path):
    g = cuzarr.create_group(tmp_path)
    g.create_array("x", shape=(4,), dtype="u1", chunks=(2,))[:] = 1
    g.create_group("s").create_array("y", shape=(1,), dtype="u1")[:] = 1
    g.create_array("xx", shape=(1,), dtype="u1")[:] = 2
    del g["x"]
    assert sorted(g.keys()) == ["s", "xx"]
    assert not (tmp_path / "x").exists()
    del g["s"]
    assert list(g.keys()) == ["xx"]
    assert g["xx"][0] == 2
    with pytest.raises(KeyError):
        del g["nope"]


# --------------------------------------------------------------------------------------
# attributes


ATTRS = {
    "title": "température — 温度 🌡",
    "ünïcödé-key": "ok",
    "nested": {"list": [1, 2.5, None, True, "x"], "empty": {}},
    "int": 2**53,
    "neg": -1,
    "float": 1e-300,
}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attrs_round_trip_and_persisted(tmp_path, zarr_format):
    g = cuzarr.create_group(tmp_path, zarr_format=zarr_format, attributes=ATTRS)
    assert dict(g.attrs) == ATTRS
    g2 = cuzarr.open_group(tmp_path, mode="r")
    assert dict(g2.attrs) == ATTRS
    doc = "zarr.json" if zarr_format == 3 else ".zattrs"
    raw = (tmp_path / doc).read_bytes()
    parsed = json.loads(raw.decode("utf-8"))
    stored = parsed["attributes"] if zarr_format == 3 else parsed
    assert stored == ATTRS
    # zarr-python reads them too
    zg = zarr.open_group(str(tmp_path), mode="r")
    assert dict(zg.attrs) == ATTRS


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attrs_write_through(tmp_path, zarr_format):
    g = cuzarr.create_group(tmp_path, zarr_format=zarr_format)
    g.attrs["a"] = 1
    g.attrs["ключ"] = "значение"
    g.attrs.update({"b": [1, 2], "c": {"d": "e"}})
    assert cuzarr.open_group(tmp_path, mode="r").attrs.asdict() == {
        "a": 1,
        "ключ": "значение",
        "b": [1, 2],
        "c": {"d": "e"},
    }
    del g.attrs["a"]
    assert "a" not in cuzarr.open_group(tmp_path, mode="r").attrs
    assert len(g.attrs) == 3
    assert sorted(g.attrs) == sorted(["ключ", "b", "c"])
    g.attrs.put({"only": 1})
    assert dict(cuzarr.open_group(tmp_path, mode="r").attrs) == {"only": 1}
    g.update_attributes({"x": "y"})  # merges, as zarr-python's does
    assert dict(cuzarr.open_group(tmp_path, mode="r").attrs) == {"only": 1, "x": "y"}
    assert g.attrs == {"only": 1, "x": "y"}


def test_v2_empty_attrs_remove_zattrs(tmp_path):
    g = cuzarr.create_group(tmp_path, zarr_format=2, attributes={"a": 1})
    del g.attrs["a"]
    assert dict(cuzarr.open_group(tmp_path, mode="r").attrs) == {}


def test_attrs_reject_nan():
    g = cuzarr.create_group({})
    with pytest.raises(ValueError):
        g.attrs["x"] = float("nan")
    assert dict(g.attrs) == {}


def test_array_attrs_in_group(tmp_path):
    g = cuzarr.create_group(tmp_path)
    a = g.create_array("x", shape=(2,), dtype="u1", attributes={"名前": "配列"})
    a.attrs["more"] = [1]
    b = cuzarr.open_group(tmp_path, mode="r")["x"]
    assert dict(b.attrs) == {"名前": "配列", "more": [1]}


# --------------------------------------------------------------------------------------
# cuzarr.open tells arrays from groups


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_dispatch(store, zarr_format):
    root = cuzarr.create_group(store, zarr_format=zarr_format)
    root.create_array("arr", shape=(3,), dtype="i4")[:] = [1, 2, 3]
    root.create_group("grp")
    assert isinstance(cuzarr.open(store, mode="r"), cuzarr.Group)
    a = cuzarr.open(store, mode="r", path="arr")
    assert isinstance(a, cuzarr.Array)
    np.testing.assert_array_equal(a[:], [1, 2, 3])
    assert isinstance(cuzarr.open(store, mode="r", path="grp"), cuzarr.Group)
    assert cuzarr.open(store, mode="r", path="grp").zarr_format == zarr_format
    assert isinstance(cuzarr.open(store, mode="r", zarr_format=zarr_format), cuzarr.Group)


def test_open_wrong_format_requested():
    store = {}
    cuzarr.create_group(store, zarr_format=2)
    with pytest.raises(FileNotFoundError):
        cuzarr.open_group(store, mode="r", zarr_format=3)
    assert cuzarr.open_group(store, mode="r", zarr_format=2).zarr_format == 2


def test_open_mode_a_creates_group_or_array():
    store = {}
    g = cuzarr.open(store, mode="a")
    assert isinstance(g, cuzarr.Group)
    a = cuzarr.open(store, mode="a", path="x", shape=(3,), dtype="i4")
    assert isinstance(a, cuzarr.Array)
    assert isinstance(cuzarr.open(store, mode="r", path="x"), cuzarr.Array)


def test_open_reads_zarr_python_hierarchy(tmp_path):
    zg = zarr.open_group(str(tmp_path), mode="w")
    zg.attrs["title"] = "zp"
    zg.create_group("sub").create_array("arr", shape=(4,), dtype="i8", chunks=(2,))[:] = np.arange(
        4
    )
    g = cuzarr.open(tmp_path, mode="r")
    assert isinstance(g, cuzarr.Group)
    assert g.attrs["title"] == "zp"
    assert list(g.keys()) == ["sub"]
    np.testing.assert_array_equal(g["sub/arr"][:], np.arange(4))


# --------------------------------------------------------------------------------------
# open_group modes


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_group_modes(tmp_path, zarr_format):
    p = tmp_path / "g"
    # r / r+ on nothing: not found, nothing created
    for mode in ("r", "r+"):
        with pytest.raises(errors.GroupNotFoundError):
            cuzarr.open_group(p, mode=mode)
    assert not p.exists()
    # w- creates when absent
    g = cuzarr.open_group(p, mode="w-", zarr_format=zarr_format, attributes={"v": 1})
    assert g.attrs["v"] == 1
    g.create_array("x", shape=(2,), dtype="u1")[:] = 7
    # w- fails when present
    with pytest.raises(errors.ContainsGroupError):
        cuzarr.open_group(p, mode="w-")
    # a opens existing, keeps contents
    ga = cuzarr.open_group(p, mode="a")
    assert ga.zarr_format == zarr_format
    assert list(ga.keys()) == ["x"]
    assert ga.attrs["v"] == 1
    # r+ opens existing and can write
    gr = cuzarr.open_group(p, mode="r+")
    gr.attrs["w"] = 2
    gr.create_group("new")
    assert sorted(cuzarr.open_group(p, mode="r").keys()) == ["new", "x"]
    # r is read-only
    ro = cuzarr.open_group(p, mode="r")
    assert ro.read_only
    with pytest.raises(errors.ReadOnlyError):
        ro.attrs["z"] = 3
    with pytest.raises(PermissionError):
        ro["x"][0] = 1
    np.testing.assert_array_equal(ro["x"][:], [7, 7])
    # w replaces everything
    gw = cuzarr.open_group(p, mode="w", zarr_format=zarr_format)
    assert list(gw.keys()) == []
    assert dict(gw.attrs) == {}
    assert list(cuzarr.open_group(p, mode="r").keys()) == []
    assert not (p / "x").exists()


def test_open_group_mode_a_creates():
    store = {}
    g = cuzarr.open_group(store, mode="a", attributes={"k": "v"})
    assert g.attrs["k"] == "v"
    assert "zarr.json" in store
    g2 = cuzarr.open_group(store, mode="a", path="child")
    assert g2.path == "child"
    assert list(cuzarr.open_group(store, mode="r").keys()) == ["child"]


def test_open_group_mode_a_over_array_refused():
    store = {}
    cuzarr.create_array(store, shape=(2,), dtype="u1")
    with pytest.raises(FileExistsError):
        cuzarr.open_group(store, mode="a")


def test_open_group_bad_mode():
    with pytest.raises(ValueError):
        cuzarr.open_group({}, mode="rw")


# --------------------------------------------------------------------------------------
# implicit parents


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_array_name_creates_implicit_parents(tmp_path, zarr_format):
    a = cuzarr.create_array(
        tmp_path, name="a/b/c", shape=(3, 2), dtype="f4", chunks=(2, 2), zarr_format=zarr_format
    )
    a[...] = np.arange(6, dtype="f4").reshape(3, 2)
    for parent in ("", "a", "a/b"):
        g = cuzarr.open_group(tmp_path, path=parent, mode="r")
        assert g.zarr_format == zarr_format
    assert list(cuzarr.open_group(tmp_path, mode="r").keys()) == ["a"]
    assert list(cuzarr.open_group(tmp_path, path="a/b", mode="r").keys()) == ["c"]
    # zarr-python sees the same hierarchy
    zg = zarr.open_group(str(tmp_path), mode="r")
    assert zg.metadata.zarr_format == zarr_format
    assert isinstance(zg["a"], zarr.Group)
    assert isinstance(zg["a/b"], zarr.Group)
    za = zg["a/b/c"]
    assert isinstance(za, zarr.Array)
    np.testing.assert_array_equal(za[...], np.arange(6, dtype="f4").reshape(3, 2))
    assert [k for k, _ in zg.members(max_depth=None)] == ["a", "a/b", "a/b/c"] or sorted(
        k for k, _ in zg.members(max_depth=None)
    ) == ["a", "a/b", "a/b/c"]


def test_group_path_creates_implicit_parents(tmp_path):
    cuzarr.create_group(tmp_path, path="x/y/z", attributes={"leaf": 1})
    zg = zarr.open_group(str(tmp_path), mode="r")
    assert isinstance(zg["x"], zarr.Group)
    assert isinstance(zg["x/y"], zarr.Group)
    assert zg["x/y/z"].attrs["leaf"] == 1


def test_implicit_parents_do_not_clobber_existing(tmp_path):
    root = cuzarr.create_group(tmp_path, attributes={"keep": "me"})
    root.create_group("a", attributes={"also": "me"})
    cuzarr.create_array(tmp_path, name="a/b/c", shape=(1,), dtype="u1")
    assert cuzarr.open_group(tmp_path, mode="r").attrs["keep"] == "me"
    assert cuzarr.open_group(tmp_path, path="a", mode="r").attrs["also"] == "me"


def test_zarr_python_reads_cuzarr_groups(tmp_path):
    root = cuzarr.create_group(tmp_path, attributes={"ü": "ß"})
    root.create_group("g", attributes={"n": 1})
    root["g"].create_array("x", shape=(4,), dtype="i4", chunks=(2,))[:] = [1, 2, 3, 4]
    zg = zarr.open_group(str(tmp_path), mode="r")
    assert zg.attrs["ü"] == "ß"
    assert zg["g"].attrs["n"] == 1
    np.testing.assert_array_equal(zg["g/x"][:], [1, 2, 3, 4])
    assert sorted(zg.group_keys()) == ["g"]


# --------------------------------------------------------------------------------------
# async groups


def test_async_group():
    import asyncio

    from cuzarr.api import asynchronous as aapi

    async def main():
        g = await aapi.create_group({}, attributes={"a": 1})
        assert isinstance(g, aapi.AsyncGroup)
        x = await g.create_array("x", shape=(4,), dtype="i4", chunks=(2,))
        await x.setitem(slice(None), np.arange(4))
        sub = await g.create_group("s")
        assert sub.path == "s"
        names = [k for k, _ in await g.members()]
        assert names == ["s", "x"]
        child = await g.getitem("x")
        np.testing.assert_array_equal(await child.getitem(slice(None)), np.arange(4))
        assert await g.contains("s")
        assert not await g.contains("t")

    asyncio.run(main())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_delete_member_of_consolidated_group(tmp_path, zarr_format):
    # As zarr-python: a deleted member (and its descendants) leaves the
    # consolidated metadata, in memory and in the store.
    g = cuzarr.create_group(tmp_path, zarr_format=zarr_format)
    g.create_array("a", shape=(2,), dtype="i4")
    g.create_array("ab", shape=(2,), dtype="i4")
    g.create_group("s").create_array("b", shape=(2,), dtype="i4")
    cuzarr.consolidate_metadata(tmp_path)
    c = cuzarr.open_consolidated(tmp_path, mode="a")
    del c["a"]
    del c["s"]
    assert sorted(c.keys()) == ["ab"] and "a" not in c
    assert [k for k, _ in c.members(max_depth=None)] == ["ab"]
    reopened = cuzarr.open_group(tmp_path, mode="r", use_consolidated=True)
    assert [k for k, _ in reopened.members(max_depth=None)] == ["ab"]
    z = zarr.open_consolidated(str(tmp_path), mode="r", zarr_format=zarr_format)
    assert sorted(z.keys()) == ["ab"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_handle_sees_its_members_changes(zarr_format):
    # Members got from a consolidated handle are built from its snapshot. A
    # change made through one (attributes, resize) used to stay out of the
    # snapshot, so the next lookup saw the old metadata and wrote it back:
    # attrs["y"] = 7 then attrs["z"] = 8 through fresh lookups lost "y".
    d: dict = {}
    g = cuzarr.group(d, zarr_format=zarr_format)
    g.create_array("x", shape=(2,), dtype="i1")
    g.create_group("s").create_array("y", shape=(3,), dtype="i1")
    cuzarr.consolidate_metadata(d)
    h = cuzarr.open_consolidated(d, mode="a")
    h["x"].attrs["y"] = 7
    h["x"].attrs["z"] = 8
    h["s"].attrs["y"] = 7
    h["s"].attrs["z"] = 8
    h["s"]["y"].attrs["a"] = 1
    h["s/y"].attrs["b"] = 2
    assert dict(cuzarr.open_array(d, path="x").attrs) == {"y": 7, "z": 8}
    assert dict(cuzarr.open_group(d, path="s").attrs) == {"y": 7, "z": 8}
    assert dict(cuzarr.open_array(d, path="s/y").attrs) == {"a": 1, "b": 2}
    h["s"]["y"].resize((5,))
    assert h["s/y"].shape == (5,)
    h["s/y"][3:5] = 4
    np.testing.assert_array_equal(cuzarr.open_array(d, path="s/y")[...], [0, 0, 0, 4, 4])
    del h["s"]["y"]  # gone from the root handle's snapshot too
    assert "s/y" not in h
    with pytest.raises(KeyError):
        h["s/y"]


def test_members_of_another_format_than_the_group_are_refused():
    """zarr-python cannot see a v2 array under a v3 group (nor the reverse)."""
    for fmt, other in ((3, 2), (2, 3)):
        g = cuzarr.create_group({}, zarr_format=fmt)
        with pytest.raises(ValueError, match="Cannot create"):
            g.create_array("x", shape=(2,), dtype="i4", zarr_format=other)
        assert "x" not in g
        assert g.create_array("y", shape=(2,), dtype="i4", zarr_format=fmt).zarr_format == fmt
