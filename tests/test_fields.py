"""``fields=`` of the selection methods on structured (v2) arrays: reads give the
field (or packed records of the fields), writes change only those fields. The
oracle is numpy (zarr-python 3.4 fails these reads with a TypeError); zarr-python
reads what cuzarr writes."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from numpy.lib import recfunctions

import cuzarr

DT = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")])


@pytest.fixture
def arrays(tmp_path):
    data = np.zeros((6, 4), dtype=DT)
    data["a"] = np.arange(24).reshape(6, 4)
    data["b"] = 0.5 * data["a"]
    data["c"] = b"xy"
    z = zarr.create_array(
        str(tmp_path / "s"), shape=data.shape, chunks=(4, 3), dtype=DT, zarr_format=2,
        fill_value=None,
    )
    z[...] = data
    return cuzarr.open_array(str(tmp_path / "s"), mode="r+"), data, str(tmp_path / "s")


def _expect(records, fields):
    return records[fields] if isinstance(fields, str) else recfunctions.repack_fields(
        records[fields]
    )


@pytest.mark.parametrize("fields", ["a", ["b", "a"], ["c"]])
def test_reads_of_fields_follow_numpy(arrays, fields):
    c, data, _ = arrays
    cases = [
        ("get_basic_selection", np.s_[1:5, ::2], data[1:5, ::2]),
        ("get_orthogonal_selection", ([0, 2, 5], [1, 3]), data[np.ix_([0, 2, 5], [1, 3])]),
        ("get_coordinate_selection", ([0, 2, 5], [1, 3, 0]), data[[0, 2, 5], [1, 3, 0]]),
        ("get_mask_selection", data["a"] % 5 == 0, data[data["a"] % 5 == 0]),
        ("get_block_selection", (1, 0), data[4:, 0:3]),
    ]
    for meth, sel, ref in cases:
        got = getattr(c, meth)(sel, fields=fields)
        exp = _expect(ref, fields)
        assert got.dtype == exp.dtype and np.array_equal(got, exp), meth
    assert c.get_basic_selection((2, 1), fields="b") == 4.5
    out = np.empty((2, 2), dtype=_expect(data[:2, :2], fields).dtype)
    assert c.get_basic_selection(np.s_[0:2, 0:2], out=out, fields=fields) is out
    np.testing.assert_array_equal(out, _expect(data[:2, :2], fields))


def test_writes_of_fields_change_only_those_fields(arrays):
    c, data, path = arrays
    c.set_basic_selection(np.s_[0:2, 0:2], 99, fields="a")
    data["a"][0:2, 0:2] = 99
    c.set_orthogonal_selection(([5], [3]), -1.5, fields="b")
    data["b"][5, 3] = -1.5
    c.set_coordinate_selection(([4, 1], [0, 2]), [b"zz", b"q"], fields="c")
    data["c"][[4, 1], [0, 2]] = [b"zz", b"q"]
    c.set_mask_selection(data["a"] == 7, 0.25, fields="b")
    data["b"][data["a"] == 7] = 0.25
    new = np.zeros((2, 2), dtype=[("b", "<f8"), ("a", "<i4")])
    new["a"], new["b"] = 5, 6.0
    c.set_block_selection((0, 1), np.resize(new, (4, 1)), fields=["b", "a"])
    data[["b", "a"]][0:4, 3:4] = np.resize(new, (4, 1))
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)


def test_bad_fields_raise_index_error(arrays):
    c, _, _ = arrays
    for bad in ("nope", ["a", "zz"]):
        with pytest.raises(IndexError, match="fields"):
            c.get_basic_selection(..., fields=bad)
    with pytest.raises(IndexError, match="has no fields"):
        cuzarr.create_array({}, shape=(2,), dtype="i4").get_basic_selection(..., fields="a")
    with pytest.raises(IndexError, match="has no fields"):
        cuzarr.create_array({}, shape=(2,), dtype="i4").set_basic_selection(..., 1, fields="a")


def test_field_names_inside_selections_as_zarr_python(arrays):
    c, data, path = arrays
    np.testing.assert_array_equal(c["a"], data["a"])
    np.testing.assert_array_equal(c[1:3, "b"], data[1:3]["b"])
    assert c[2, 1, "b"] == data[2, 1]["b"]
    got = c[:, 0, "c", "a"]
    np.testing.assert_array_equal(got, recfunctions.repack_fields(data[:, 0][["c", "a"]]))
    np.testing.assert_array_equal(c.oindex[[0, 5], "a"], data[[0, 5]]["a"])
    c[0, "b"] = 7.5
    data["b"][0] = 7.5
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)


def test_fields_edge_cases(arrays):
    c, data, _ = arrays
    # no fields: "", [] and None read whole records
    for none in (None, "", []):
        np.testing.assert_array_equal(c.get_basic_selection(np.s_[0:2], fields=none), data[0:2])
    for bad in (0, ["a", "a"], ["zz"]):
        with pytest.raises(IndexError, match="fields"):
            c.get_basic_selection(..., fields=bad)
    with pytest.raises(ValueError, match="out has shape"):
        c.get_basic_selection(np.s_[0:1, 0:2], out=np.zeros((3, 2), "<i4"), fields="a")
    with pytest.raises(TypeError, match="out has dtype"):
        c.get_basic_selection(np.s_[0:1, 0:2], out=np.zeros((1, 2), "i1"), fields="a")
    out = np.zeros((), "<f8")
    assert c.get_basic_selection((2, 1), out=out, fields="b") == 4.5  # a scalar, as without
    assert out[()] == 4.5


def test_writes_of_several_fields_by_points_keep_the_other_fields(arrays):
    # Through a view of several fields numpy's fancy-indexed assignment writes the
    # whole record (the view keeps the record's item size); a write of fields
    # must change those fields alone, on every selection path.
    c, data, path = arrays
    new = np.zeros(3, dtype=[("c", "S3"), ("a", "<i4")])
    new["c"], new["a"] = [b"p", b"q", b"r"], [-1, -2, -3]
    rows, cols = np.array([5, 0, 3]), np.array([2, 3, 0])
    c.set_coordinate_selection((rows, cols), new, fields=["c", "a"])
    c.vindex[rows, [1, 1, 1], "a", "b"] = np.array([(7, 0.5)] * 3, dtype=[("a", "<i4"), ("b", "<f8")])
    c[[1, 4], [0, 3], "b"] = [8.5, 9.5]  # numpy advanced indexing, with a field
    c.oindex[[0, 2], [1, 2], "c", "b"] = np.array([(b"o", 1.0)], dtype=[("c", "S3"), ("b", "<f8")])
    for name in ("c", "a"):
        data[name][rows, cols] = new[name]
    data["a"][rows, 1], data["b"][rows, 1] = 7, 0.5
    data["b"][[1, 4], [0, 3]] = [8.5, 9.5]
    data["c"][np.ix_([0, 2], [1, 2])], data["b"][np.ix_([0, 2], [1, 2])] = b"o", 1.0
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)
    np.testing.assert_array_equal(c[...], data)


def test_pointwise_write_of_a_sub_array_field():
    # the selection mask has the points' shape, the field a trailing (3,) axis
    dt = np.dtype([("a", "<i4"), ("b", "<f8", (3,))])
    a = cuzarr.create_array({}, shape=(4, 8), chunks=(2, 4), dtype=dt, zarr_format=2)
    a["b", [0, 3], [1, 2]] = np.arange(6.0).reshape(2, 3)
    a.vindex[[1, 1], [5, 6], "b"] = [[7, 7, 7], [8, 8, 8]]
    want = np.zeros((4, 8), dt)
    want["b"][[0, 3], [1, 2]] = np.arange(6.0).reshape(2, 3)
    want["b"][[1, 1], [5, 6]] = [[7, 7, 7], [8, 8, 8]]
    np.testing.assert_array_equal(a[...], want)
