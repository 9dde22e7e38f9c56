"""``create_hierarchy`` (zarr-python's): a hierarchy from metadata alone. The same
nodes given to zarr-python and to cuzarr write the same documents; each library
reads what the other made; existing nodes are refused before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.core.group import GroupMetadata as ZGroupMetadata

import cuzarr
from cuzarr.errors import ContainsArrayError, ContainsGroupError, ReadOnlyError
from cuzarr.storage import LocalStore


def _docs(root: Path) -> dict[str, object]:
    """The metadata documents under ``root`` (an empty v2 ``.zattrs`` counts as
    none: zarr-python writes one, cuzarr does not)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f in ("zarr.json", ".zarray", ".zgroup", ".zattrs"):
                doc = json.loads((Path(d) / f).read_text())
                if doc != {} or f != ".zattrs":
                    out[str((Path(d) / f).relative_to(root))] = doc
    return out


def _zarr_nodes(tmp_path, fmt):
    src = zarr.open_group(str(tmp_path / f"src{fmt}"), mode="w", zarr_format=fmt)
    a = src.create_array("a", shape=(5, 4), chunks=(2, 2), dtype="<f4", fill_value=1.5,
                         attributes={"units": "m"})
    b = src.create_array("b", shape=(7,), chunks=(3,), dtype="<i2", fill_value=-1)
    return {
        "x/y": ZGroupMetadata(attributes={"k": [1, 2]}, zarr_format=fmt),
        "x/y/a": a.metadata,
        "z/b": b.metadata,
    }


@pytest.mark.parametrize("fmt", [2, 3])
def test_same_documents_as_zarr_python(tmp_path, fmt):
    nodes = _zarr_nodes(tmp_path, fmt)
    dict(zarr.create_hierarchy(store=zarr.storage.LocalStore(tmp_path / "z"), nodes=nodes))
    made = dict(cuzarr.create_hierarchy(store=str(tmp_path / "c"), nodes=nodes))
    assert sorted(made) == ["", "x", "x/y", "x/y/a", "z", "z/b"]
    assert isinstance(made["x/y/a"], cuzarr.Array) and isinstance(made["z"], cuzarr.Group)
    assert _docs(tmp_path / "c") == _docs(tmp_path / "z")
    # each library reads the other's hierarchy, fill values included
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"), path="x/y/a")[...],
                                  np.full((5, 4), 1.5, "<f4"))
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "z"), path="z/b")[...],
                                  np.full(7, -1, "<i2"))
    assert cuzarr.open_group(str(tmp_path / "z"), path="x/y").attrs["k"] == [1, 2]


def test_nodes_as_cuzarr_metadata_or_documents(tmp_path):
    a = cuzarr.create_array({}, shape=(3,), dtype="u1", fill_value=7)
    nodes = {
        "/g": cuzarr.open_group({}, mode="w").metadata,
        "g/a": a.metadata,
        "h": {"zarr_format": 3, "node_type": "group", "attributes": {"q": 1}},
        "h/v": a.metadata.to_dict(),
    }
    made = dict(cuzarr.create_hierarchy(store=str(tmp_path), nodes=nodes))
    assert sorted(made) == ["", "g", "g/a", "h", "h/v"]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path), path="h/v")[...], [7, 7, 7])
    assert zarr.open_group(str(tmp_path), path="h").attrs["q"] == 1
    v2 = {"zarr_format": 2, "attributes": {"t": "x"}}
    dict(cuzarr.create_hierarchy(store=str(tmp_path / "two"), nodes={"p": v2}))
    assert zarr.open_group(str(tmp_path / "two"), path="p", zarr_format=2).attrs["t"] == "x"
    with pytest.raises(TypeError, match="not int"):
        dict(cuzarr.create_hierarchy(store={}, nodes={"a": 3}))
    with pytest.raises(ValueError, match="zarr_format"):
        dict(cuzarr.create_hierarchy(store={}, nodes={"a": {"node_type": "group"}}))


def test_refusals_write_nothing(tmp_path):
    root = str(tmp_path)
    g = cuzarr.open_group(root, mode="w", attributes={"keep": True})
    g.create_array("arr", shape=(4,), chunks=(2,), dtype="i4")[...] = 3
    g.create_group("grp")
    before = _docs(tmp_path)
    arr_meta = g["arr"].metadata
    grp_meta = g["grp"].metadata
    cases = [
        ({"arr": grp_meta}, ContainsArrayError),  # an array named where one exists
        ({"grp": arr_meta}, ContainsGroupError),
        ({"arr/inner": grp_meta}, ContainsArrayError),  # an implied group where an array is
        ({"n": arr_meta, "n/m": grp_meta}, ValueError),  # a node inside an array
        ({"v2": {"zarr_format": 2}, "v3": grp_meta}, ValueError),  # two formats
    ]
    for nodes, err in cases:
        with pytest.raises(err):
            dict(cuzarr.create_hierarchy(store=root, nodes={**nodes, "new": grp_meta}))
        assert _docs(tmp_path) == before
        assert not (tmp_path / "new").exists()
    with pytest.raises(ReadOnlyError):
        dict(cuzarr.create_hierarchy(store=LocalStore(root, read_only=True), nodes={"n": grp_meta}))


def test_overwrite_and_existing_groups(tmp_path):
    root = str(tmp_path)
    g = cuzarr.open_group(root, mode="w", attributes={"keep": True})
    g.create_array("arr", shape=(4,), chunks=(2,), dtype="i4")[...] = 3
    sub = g.create_group("grp", attributes={"old": 1})
    sub.create_array("member", shape=(2,), dtype="i1")[...] = 1
    kept = g.create_group("kept", attributes={"k": 1})
    kept.create_array("inside", shape=(2,), dtype="i1")[...] = 2
    new_arr = cuzarr.create_array({}, shape=(6,), chunks=(3,), dtype="f8", fill_value=0.5).metadata
    nodes = {
        "arr": new_arr,  # array replaced by an array: the old chunks go
        "grp": cuzarr.open_group({}, mode="w", attributes={"new": 2}).metadata,
        "grp/deep/er": new_arr,  # written after grp's old members went
        "kept/x": new_arr,  # kept only implied: stays as it is, members too
    }
    made = dict(cuzarr.create_hierarchy(store=root, nodes=nodes, overwrite=True))
    assert sorted(made) == ["", "arr", "grp", "grp/deep", "grp/deep/er", "kept", "kept/x"]
    z = zarr.open_group(root, mode="r")
    assert dict(z.attrs) == {"keep": True} and dict(z["grp"].attrs) == {"new": 2}
    np.testing.assert_array_equal(z["arr"][...], np.full(6, 0.5))
    assert not (tmp_path / "arr" / "c" / "1").exists()
    # as zarr-python: a node replaced goes with everything below it
    assert sorted(z["grp"].keys()) == ["deep"]
    assert dict(z["kept"].attrs) == {"k": 1}
    np.testing.assert_array_equal(z["kept/inside"][...], [2, 2])
    # the root replaced: the whole store is cleared first
    dict(cuzarr.create_hierarchy(store=root, nodes={"": made[""].metadata, "n": new_arr},
                                 overwrite=True))
    assert sorted(zarr.open_group(root, mode="r").keys()) == ["n"]


def test_what_zarr_python_also_refuses(tmp_path):
    meta = cuzarr.create_array({}, shape=(2,), dtype="i2").metadata
    with pytest.raises(ValueError, match="same node"):
        dict(cuzarr.create_hierarchy(store={}, nodes={"/a": meta, "a": meta}))
    g = cuzarr.open_group({}, mode="w")
    with pytest.raises(ValueError, match="group itself"):
        dict(g.create_hierarchy({"": g.metadata}, overwrite=True))
    # v3 nodes below an existing v2 group would be invisible to zarr-python
    v2 = cuzarr.open_group(str(tmp_path), mode="w", zarr_format=2)
    v2.create_group("a")
    with pytest.raises(ValueError, match="v3 nodes cannot go below the existing v2 group"):
        dict(cuzarr.create_hierarchy(store=str(tmp_path), nodes={"a/n": meta}))
    assert not (tmp_path / "a" / "n").exists()


def test_group_create_hierarchy_is_relative_to_the_group(tmp_path):
    g = cuzarr.open_group(str(tmp_path), mode="w").create_group("base")
    meta = cuzarr.create_array({}, shape=(2,), dtype="i2").metadata
    made = dict(g.create_hierarchy({"a/b": meta}))
    assert sorted(made) == ["a", "a/b"] and made["a/b"].path == "base/a/b"
    assert zarr.open_array(str(tmp_path), path="base/a/b").shape == (2,)
