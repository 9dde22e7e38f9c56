"""pytest plugin: run zarr-python's own tests with a chosen codec pipeline.

Loaded with ``-p cuzarr_pipeline_plugin`` (this folder on ``PYTHONPATH``) by
``scripts/zarr_suite.py``. ``CUZARR_ZARR_PIPELINE`` names the pipeline:
``cuzarr`` (default), ``default`` (zarr-python's BatchedCodecPipeline),
``fused`` (its FusedCodecPipeline) or ``zarrs`` (zarrs-python's, if installed).
Every test runs with ``codec_pipeline.path`` set to it. zarr's own conftest
resets its config before every test (an autouse fixture that runs after this
plugin's), so the path is set through the environment, which a reset reads
(``ZARR_CODEC_PIPELINE__PATH``), as well as by a fixture."""

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


os.environ["ZARR_CODEC_PIPELINE__PATH"] = PATH
zarr.config.refresh()


@pytest.fixture(autouse=True)
def _codec_pipeline() -> Iterator[None]:
    with zarr.config.set({"codec_pipeline.path": PATH}):
        yield


def pytest_report_header(config: pytest.Config) -> str:
    return f"codec pipeline: {PATH}"


# How many batches cuzarr's engine ran (not zarr-python's fallback): a run that
# passes with the fallback doing all the work would prove nothing.
ENGINE = {"read": 0, "write": 0}

if NAME == "cuzarr":
    from cuzarr.zarr_pipeline import jobs as _jobs

    def _counted(cls: type, kind: str) -> None:
        init = cls.__init__

        def counting(self: object, *a: object, **k: object) -> None:
            ENGINE[kind] += 1
            init(self, *a, **k)

        cls.__init__ = counting  # type: ignore[method-assign]

    _counted(_jobs.ZarrReadJob, "read")
    _counted(_jobs.ZarrWriteJob, "write")


def pytest_terminal_summary(terminalreporter: object) -> None:
    if NAME == "cuzarr":
        terminalreporter.write_line(  # type: ignore[attr-defined]
            f"cuzarr engine batches: {ENGINE['read']} reads, {ENGINE['write']} writes"
        )
