"""``dtype=object`` names no Zarr data type by itself: asked for without an object
codec it is refused, as zarr-python refuses it; data that holds objects (numpy
object arrays, h5py strings, a cuzarr array to copy) says which type it is."""

from __future__ import annotations

import h5py
import numcodecs
import numpy as np
import pytest
import zarr

import cuzarr


@pytest.mark.parametrize("fmt", [2, 3])
def test_object_dtype_needs_an_object_codec_as_in_zarr_python(fmt):
    for lib in (zarr, cuzarr):
        with pytest.raises(ValueError):
            lib.create_array({}, shape=(3,), dtype=object, zarr_format=fmt)
    with pytest.raises(ValueError, match="dtype=object is ambiguous"):
        cuzarr.create_array({}, shape=(3,), dtype="O", zarr_format=fmt)
    # an object codec says which data type it is
    if fmt == 2:
        a = cuzarr.create_array(
            {}, shape=(2,), dtype=object, zarr_format=2, filters=[numcodecs.VLenBytes()]
        )
        assert a.metadata.dtype.kind == "bytes"
    else:
        a = cuzarr.create_array({}, shape=(2,), dtype=object, serializer="vlen-utf8")
        assert a.metadata.dtype.kind == "string"
    # str and bytes are not ambiguous
    assert cuzarr.create_array({}, shape=(2,), dtype=str, zarr_format=fmt).metadata.dtype.is_vlen


def test_data_says_which_type_its_objects_are(tmp_path):
    assert cuzarr.array(np.array(["a", "bc"], dtype=object)).metadata.dtype.kind == "string"
    b = cuzarr.array(np.array([b"a", None, b"cd"], dtype=object), zarr_format=2)
    assert b.metadata.dtype.kind == "bytes"
    like = cuzarr.zeros_like(b)  # a cuzarr array's own data type
    assert like.metadata.dtype.kind == "bytes"
    assert cuzarr.empty_like(np.array([b"x"], dtype=object)).metadata.dtype.kind == "bytes"
    cuzarr.save_array(str(tmp_path / "s.zarr"), np.array(["p", "q"], dtype=object))
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "s.zarr"))[...], ["p", "q"])
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("s", data=["ab", "cde"], dtype=h5py.string_dtype())
        f.create_dataset("b", data=[b"x", b"yz"], dtype=h5py.string_dtype("ascii"))
        g = cuzarr.create_group(str(tmp_path / "h.zarr"))
        cuzarr.copy_all(f, g)
    assert g["s"].metadata.dtype.kind == "string" and g["b"].metadata.dtype.kind == "bytes"
    np.testing.assert_array_equal(g["s"][...], ["ab", "cde"])
    assert list(g["b"][...]) == [b"x", b"yz"]
    # zarr-python reads them
    z = zarr.open_group(str(tmp_path / "h.zarr"), mode="r")
    assert list(z["s"][...]) == ["ab", "cde"]
