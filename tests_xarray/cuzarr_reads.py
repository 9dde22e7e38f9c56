"""pytest plugin: run xarray's own Zarr backend tests with every read through cuzarr.

xarray's tests write with ``to_zarr`` (zarr-python) and read with
``xr.open_dataset(..., engine="zarr")``, ``xr.open_zarr``, ``xr.open_datatree``...;
all of these ask ``xarray.backends.plugins.get_backend`` for the "zarr" engine. This
plugin answers with cuzarr's entrypoint instead (``--xarray-reads=zarr`` keeps
xarray's own, for the reference run), runs only the Zarr test classes of
``xarray/tests/test_backends.py`` and marks the tests listed in
:mod:`differences` as expected failures, each with its reason.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from differences import DIFFERENCES, SELECTED_CLASSES
from xarray.backends import plugins

from cuzarr.integrations.xarray import CuzarrBackendEntrypoint

# Arguments of xarray's zarr entrypoint that mean nothing to a reader of a store
# opened read-only: "mode" (always "r" for a read), "cache_members" (zarr-python's
# member cache of a group handle).
_ZARR_ONLY = ("mode", "cache_members")


class RoutedEntrypoint(CuzarrBackendEntrypoint):
    """engine="zarr" served by cuzarr (the arguments engine="zarr" takes and
    cuzarr does not need are dropped)."""

    def open_dataset(self, filename_or_obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().open_dataset(filename_or_obj, **_reader_kwargs(kwargs))

    def open_groups_as_dict(self, filename_or_obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().open_groups_as_dict(filename_or_obj, **_reader_kwargs(kwargs))


def _reader_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    mode = kwargs.get("mode", "r")
    if mode not in ("r", "r+", "a"):
        raise ValueError(f"cuzarr_reads: a read with mode={mode!r}")
    return {k: v for k, v in kwargs.items() if k not in _ZARR_ONLY}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--xarray-reads",
        choices=("cuzarr", "zarr", "zarr-pipeline"),
        default="cuzarr",
        help="which library serves engine='zarr' reads (default: cuzarr; "
        "zarr-pipeline: zarr-python itself, its codec pipeline cuzarr's, for "
        "writes and reads alike)",
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--xarray-reads")
    if mode == "zarr-pipeline":
        import zarr

        zarr.config.set({"codec_pipeline.path": "cuzarr.zarr_pipeline.CuzarrCodecPipeline"})
        return
    if mode != "cuzarr":
        return
    original = plugins.get_backend

    def get_backend(engine: Any) -> Any:
        if engine == "zarr":
            return RoutedEntrypoint()
        return original(engine)

    plugins.get_backend = get_backend


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_if_param(items)
    keep, drop = [], []
    for item in items:
        cls = item.cls.__name__ if item.cls is not None else None
        (keep if cls in SELECTED_CLASSES else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if config.getoption("--xarray-reads") != "cuzarr":
        return
    for item in keep:
        reason = _listed(item)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


def _matches(pattern: str, name: str) -> bool:
    """Whether ``name`` is ``pattern``, where ``*`` stands for any text."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name) is not None


def _skip_if_param(items: list[pytest.Item]) -> None:
    """xarray's ``skip_if_param`` marker, which its repository's conftest.py (not
    installed with the package) implements: skip the test where its parameters
    (fixture parameters included, e.g. ``default_zarr_format``) have the given
    values and ``condition`` (default True) holds."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for mark in item.iter_markers("skip_if_param"):
            want = dict(mark.kwargs)
            reason = want.pop("reason", "skip_if_param")
            condition = want.pop("condition", True)
            if condition and all(k in params and params[k] == v for k, v in want.items()):
                item.add_marker(pytest.mark.skip(reason=reason))


def _listed(item: pytest.Item) -> str | None:
    """The reason the test is listed as differing, or None."""
    cls = item.cls.__name__ if item.cls is not None else None
    for (where, pattern), reason in DIFFERENCES.items():
        if (where is None or where == cls) and _matches(pattern, item.name):
            return reason
    return None
