"""pytest plugin: run zarr-python's own tests with a chosen codec pipeline.

Loaded with ``-p cuzarr_pipeline_plugin`` (this folder on ``PYTHONPATH``) by
``scripts/zarr_suite.py``. ``CUZARR_ZARR_PIPELINE`` names the pipeline:
``cuzarr`` (default), ``default`` (zarr-python's BatchedCodecPipeline),
``fused`` (its FusedCodecPipeline) or ``zarrs`` (zarrs-python's, if installed).
Every test runs with ``codec_pipeline.path`` set to it, and the tests that
check the default path itself see the configured one (as zarrs' own suite run
does)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import zarr

PATHS = {
    "cuzarr": "cuzarr.zarr_pipeline.CuzarrCodecPipeline",
    "default": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
}

NAME = os.environ.get("CUZARR_ZARR_PIPELINE", "cuzarr")
PATH = PATHS[NAME]

if NAME == "cuzarr":
    import cuzarr.zarr_pipeline  # noqa: F401  (registers the class)
elif NAME == "zarrs":
    import zarrs  # noqa: F401


@pytest.fixture(autouse=True)
def _codec_pipeline() -> Iterator[None]:
    with zarr.config.set({"codec_pipeline.path": PATH}):
        yield


def pytest_report_header(config: pytest.Config) -> str:
    return f"codec pipeline: {PATH}"
