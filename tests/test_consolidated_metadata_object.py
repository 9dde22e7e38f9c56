"""group.metadata.consolidated_metadata, against zarr-python 3.4's."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.metadata.group import ConsolidatedMetadata


def _hierarchy(root: Path, fmt: int) -> None:
    g = zarr.open_group(str(root), mode="w", zarr_format=fmt)
    g.create_array("a", shape=(3,), dtype="int16")
    sub = g.create_group("sub", attributes={"k": 1})
    sub.create_array("b", shape=(2, 2), dtype="float32")
    sub.create_group("deeper").create_array("c", shape=(1,), dtype="uint8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(root))


def _zarr_group(root: Path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(str(root), mode="r", **kw)


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_matches_zarr_python(tmp_path: Path, fmt: int) -> None:
    _hierarchy(tmp_path / "h", fmt)
    cm = cuzarr.open_group(str(tmp_path / "h"), mode="r").metadata.consolidated_metadata
    zcm = _zarr_group(tmp_path / "h").metadata.consolidated_metadata
    assert isinstance(cm, ConsolidatedMetadata)
    assert (cm.kind, cm.must_understand) == (zcm.kind, zcm.must_understand) == ("inline", False)
    assert sorted(cm.metadata) == sorted(zcm.metadata) == ["a", "sub"]
    assert sorted(cm.flattened_metadata) == sorted(zcm.flattened_metadata)
    for key, meta in cm.flattened_metadata.items():
        zmeta = zcm.flattened_metadata[key]
        z_is_array = type(zmeta).__name__.startswith("Array")
        assert meta.node_type == ("array" if z_is_array else "group")
        assert meta.attributes == zmeta.attributes
        if meta.node_type == "array":
            assert meta.shape == zmeta.shape
            assert np.dtype(meta.dtype.dtype) == zmeta.dtype.to_native_dtype()
    # a child group carries its own children, as in zarr-python
    sub = cm.metadata["sub"].consolidated_metadata
    zsub = zcm.metadata["sub"].consolidated_metadata
    assert sorted(sub.metadata) == sorted(zsub.metadata) == ["b", "deeper"]
    assert sorted(sub.flattened_metadata) == sorted(zsub.flattened_metadata)
    assert sorted(cm.to_dict()) == sorted(zcm.to_dict())
    assert sorted(cm.to_dict()["metadata"]) == sorted(zcm.to_dict()["metadata"])


def test_member_groups_and_new_consolidation_have_it(tmp_path: Path) -> None:
    _hierarchy(tmp_path / "h", 3)
    g = cuzarr.open_group(str(tmp_path / "h"), mode="r")
    assert sorted(g["sub"].metadata.consolidated_metadata.metadata) == ["b", "deeper"]
    assert sorted(_zarr_group(tmp_path / "h")["sub"].metadata.consolidated_metadata.metadata) == [
        "b",
        "deeper",
    ]
    s: dict = {}
    w = cuzarr.open_group(s, mode="w")
    w.create_array("x", shape=(2,), dtype="i1")
    assert w.metadata.consolidated_metadata is None
    c = cuzarr.consolidate_metadata(s)
    assert list(c.metadata.consolidated_metadata.metadata) == ["x"]


def test_none_without_consolidated_metadata(tmp_path: Path) -> None:
    _hierarchy(tmp_path / "h", 3)
    g = cuzarr.open_group(str(tmp_path / "h"), mode="r", use_consolidated=False)
    z = _zarr_group(tmp_path / "h", use_consolidated=False)
    assert g.metadata.consolidated_metadata is None
    assert z.metadata.consolidated_metadata is None


def test_deleted_member_leaves_it(tmp_path: Path) -> None:
    _hierarchy(tmp_path / "h", 3)
    g = cuzarr.open_group(str(tmp_path / "h"), mode="r+")
    del g["a"]
    assert sorted(g.metadata.consolidated_metadata.flattened_metadata) == [
        "sub",
        "sub/b",
        "sub/deeper",
        "sub/deeper/c",
    ]
    reopened = cuzarr.open_group(str(tmp_path / "h"), mode="r")
    assert "a" not in reopened.metadata.consolidated_metadata.metadata


def test_metadata_equality_ignores_it(tmp_path: Path) -> None:
    _hierarchy(tmp_path / "h", 3)
    a = cuzarr.open_group(str(tmp_path / "h"), mode="r")
    b = cuzarr.open_group(str(tmp_path / "h"), mode="r", use_consolidated=False)
    assert a.metadata.attributes == b.metadata.attributes
    assert a.metadata.consolidated_metadata == a.metadata.consolidated_metadata
    with pytest.raises(TypeError):
        ConsolidatedMetadata()
