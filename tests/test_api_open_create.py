"""open_array/create_array corner cases shared with zarr-python (filters, 0-d dimension names)."""

from __future__ import annotations

import pytest


def test_open_array_creating_a_v3_array_takes_filters():
    # DESIGN.md: filters are accepted for both formats. open_array(mode="w")
    # had come to go through the legacy create(), which refuses v3 filters.
    import numpy as np

    import cuzarr

    delta = {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}
    for mode in ("w", "a"):
        a = cuzarr.open_array({}, mode=mode, shape=(4,), dtype="i4", filters=[delta])
        a[...] = [1, 2, 3, 4]
        assert a.metadata.zarr_format == 3
        np.testing.assert_array_equal(a[...], [1, 2, 3, 4])
        assert len(a.filters) == 1


def test_zero_d_empty_dimension_names_left_out_as_zarr_does(tmp_path):
    import json

    import zarr

    import cuzarr

    docs = []
    for lib, d in ((cuzarr, tmp_path / "c"), (zarr, tmp_path / "z")):
        lib.create_array(str(d), shape=(), dtype="i4", dimension_names=[])
        docs.append(json.loads((d / "zarr.json").read_text()))
    assert "dimension_names" not in docs[0]
    assert docs[0].keys() == docs[1].keys()
    a = cuzarr.open_array(tmp_path / "c", mode="r")
    assert a.metadata.dimension_names is None
    with pytest.raises(ValueError, match="dimension_names"):
        cuzarr.create_array(tmp_path / "bad", shape=(2,), dtype="i4", dimension_names=[])
