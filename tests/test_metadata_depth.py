"""Deeply nested metadata is a ``MetadataError``, never a ``RecursionError``.

Python's json module and numpy's dtype code recurse once per level: a document
100,000 levels deep, or a v2 structured dtype 400 levels deep, used to escape
as ``RecursionError``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import MetadataError
from cuzarr.storage.reference import ReferenceStore

DEEP = 100_000


def _deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def _v2_struct(depth: int) -> list:
    dt: object = "<i4"
    for i in range(depth):
        dt = [[f"f{i}", dt]]
    return dt  # type: ignore[return-value]


def _rewrite(path, edit) -> None:
    doc = json.loads(path.read_text())
    path.write_text(edit(doc))


@pytest.mark.parametrize("fmt", [2, 3])
def test_deep_json_document_is_a_metadata_error(tmp_path, fmt):
    cuzarr.create_array(str(tmp_path / "a"), shape=(2,), dtype="i1", zarr_format=fmt)
    name = "zarr.json" if fmt == 3 else ".zarray"
    p = tmp_path / "a" / name
    p.write_text(p.read_text().rstrip()[:-1] + f', "x": {_deep_list(DEEP)}}}')
    with pytest.raises(MetadataError, match="nested too deeply"):
        cuzarr.open_array(str(tmp_path / "a"))
    with pytest.raises(MetadataError, match="nested too deeply"):
        cuzarr.open(str(tmp_path / "a"))


def test_deep_v2_attributes_and_consolidated_metadata(tmp_path):
    g = cuzarr.open_group(str(tmp_path), mode="w", zarr_format=2)
    g.create_array("a", shape=(2,), dtype="i1")
    cuzarr.consolidate_metadata(str(tmp_path))
    (tmp_path / "a" / ".zattrs").write_text(f'{{"x": {_deep_list(DEEP)}}}')
    with pytest.raises(MetadataError, match="nested too deeply"):
        dict(cuzarr.open_array(str(tmp_path / "a")).attrs)
    (tmp_path / ".zmetadata").write_text(f'{{"metadata": {_deep_list(DEEP)}}}')
    with pytest.raises(MetadataError, match="nested too deeply"):
        cuzarr.open_consolidated(str(tmp_path))


def test_attributes_just_below_the_parsers_limit_refuse_to_be_written(tmp_path):
    """Nesting the parser still accepts, but the writer cannot produce again."""
    a = cuzarr.create_array(str(tmp_path / "a"), shape=(2,), dtype="i1")
    p = tmp_path / "a" / "zarr.json"
    p.write_text(p.read_text().rstrip()[:-1] + f', "attributes": {{"x": {_deep_list(990)}}}}}')
    a = cuzarr.open_array(str(tmp_path / "a"))
    with pytest.raises(MetadataError, match="nested too deeply"):
        a.attrs["y"] = 1


def test_deep_reference_file_is_a_metadata_error(tmp_path):
    p = tmp_path / "refs.json"
    p.write_text(f'{{"version": 1, "refs": {_deep_list(DEEP)}}}')
    with pytest.raises(MetadataError):
        ReferenceStore(str(p))


def test_deep_v2_structured_dtype_is_a_metadata_error(tmp_path):
    cuzarr.create_array(str(tmp_path / "a"), shape=(2,), dtype="i1", zarr_format=2)
    p = tmp_path / "a" / ".zarray"
    _rewrite(p, lambda d: json.dumps({**d, "dtype": _v2_struct(400)}))
    with pytest.raises(MetadataError, match="nested more than 128 levels"):
        cuzarr.open_array(str(tmp_path / "a"))


def test_deep_v3_struct_data_type_is_a_metadata_error(tmp_path):
    cuzarr.create_array(str(tmp_path / "a"), shape=(2,), dtype="i1")
    # written as text (600 levels of JSON: within the parser's limit, not json.dumps')
    dt = '"int32"'
    for i in range(150):
        dt = f'{{"name": "struct", "configuration": {{"fields": [{{"name": "f{i}", "data_type": {dt}}}]}}}}'
    p = tmp_path / "a" / "zarr.json"
    doc = json.loads(p.read_text())
    doc["fill_value"] = None
    doc["data_type"] = "@"
    p.write_text(json.dumps(doc).replace('"@"', dt))
    with pytest.raises(MetadataError, match="nested more than 128 levels"):
        cuzarr.open_array(str(tmp_path / "a"))


def test_nested_structured_dtypes_within_the_limit_read_like_zarr_python(tmp_path):
    """Twenty levels of structs (far more than any real data type) still work."""
    dt = np.dtype(json_free_struct(20))
    data = np.zeros(3, dtype=dt)
    z = zarr.create_array(str(tmp_path / "z"), shape=(3,), dtype=dt, zarr_format=2)
    z[:] = data
    a = cuzarr.open_array(str(tmp_path / "z"))
    assert a.dtype == dt
    np.testing.assert_array_equal(a[:], data)


def json_free_struct(depth: int) -> list:
    dt: object = "<i4"
    for i in range(depth):
        dt = [(f"f{i}", dt)]
    return dt  # type: ignore[return-value]
