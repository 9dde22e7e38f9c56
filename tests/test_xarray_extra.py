"""``cuzarr[xarray]`` pulls what the docs' xarray example needs: xarray, and the
zarr-python that xarray's ``to_zarr`` writes with (3.x for ``zarr_format=3``).
(Checked once by installing ``cuzarr[xarray]`` alone into a fresh environment
and running the example; this environment holds every optional package xarray
might import, so here the extra's requirements are checked and the example run.)"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

xr = pytest.importorskip("xarray")

ROOT = Path(__file__).resolve().parents[1]


def _extra(name: str) -> dict[str, Requirement]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = [Requirement(r) for r in doc["project"]["optional-dependencies"][name]]
    return {r.name: r for r in reqs}


def test_xarray_extra_holds_what_to_zarr_needs(tmp_path, monkeypatch):
    extra = _extra("xarray")
    assert set(extra) >= {"xarray", "zarr"}
    assert extra["zarr"].specifier.contains("3.0.0") and not extra["zarr"].specifier.contains(
        "2.18.0"
    )
    for name, req in extra.items():
        assert req.specifier.contains(version(name)), (name, version(name))
    # the docs' example: to_zarr writes (through zarr-python), cuzarr reads
    monkeypatch.chdir(tmp_path)
    xr.Dataset(
        {"temperature": (("time", "x"), np.random.rand(10, 5).astype("f4"), {"units": "K"})},
        coords={"time": np.arange(10), "x": np.arange(5)},
    ).to_zarr("climate.zarr", zarr_format=3, consolidated=False)
    ds = xr.open_dataset("climate.zarr", engine="cuzarr", consolidated=False)
    assert ds.temperature.attrs["units"] == "K"
