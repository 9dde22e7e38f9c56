"""Top-level helpers zarr-python users reach for: print_debug_info, set_log_level,
buffer.default_buffer_prototype, and to_dask/from_dask at the top level."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr

import cuzarr


def test_print_debug_info(capsys) -> None:
    cuzarr.print_debug_info()
    out = capsys.readouterr().out
    assert f"cuzarr: {cuzarr.__version__}" in out
    assert f"numpy: {np.__version__}" in out
    assert f"zarr: {zarr.__version__}" in out  # an optional dependency, installed here
    assert "**Required dependencies:**" in out and "**Optional dependencies:**" in out


def test_set_log_level_as_zarr_python() -> None:
    logger = logging.getLogger("cuzarr")
    before = logger.level
    try:
        cuzarr.set_log_level("DEBUG")
        assert logger.level == logging.DEBUG
        assert logger.handlers and all(h.level == logging.DEBUG for h in logger.handlers)
        cuzarr.set_log_level("WARNING")
        assert logger.level == logging.WARNING and len(logger.handlers) == 1
        cuzarr.set_format("%(levelname)s|%(message)s")
        assert logger.handlers[0].formatter._fmt == "%(levelname)s|%(message)s"
        with pytest.raises(ValueError):
            cuzarr.set_log_level("LOUD")  # type: ignore[arg-type]
    finally:
        logger.setLevel(before)


def test_default_buffer_prototype_follows_config() -> None:
    assert cuzarr.buffer.default_buffer_prototype().name == "cpu"
    a = cuzarr.create_array({}, shape=(4,), dtype="i2")
    out = a.get_basic_selection(..., prototype=cuzarr.buffer.default_buffer_prototype())
    assert isinstance(out, np.ndarray)


def test_dask_at_the_top_level() -> None:
    da = pytest.importorskip("dask.array")
    a = cuzarr.create_array({}, shape=(20, 6), chunks=(5, 3), dtype="f8")
    a[...] = np.arange(120.0).reshape(20, 6)
    x = cuzarr.to_dask(a)
    assert x.chunks == ((5, 5, 5, 5), (3, 3))
    np.testing.assert_array_equal(x.sum(axis=0).compute(), a[...].sum(axis=0))
    store: dict = {}
    b = cuzarr.from_dask(da.from_array(a[...] * 2, chunks=(7, 6)), store, chunks=(5, 3))
    np.testing.assert_array_equal(cuzarr.open_array(store)[...], a[...] * 2)
    assert b.chunks == (5, 3)
