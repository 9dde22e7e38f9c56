"""bench_core.py's contenders: zarr-python (any pipeline) or cuzarr behind one
API, and tensorstore (imported only inside worker processes)."""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from typing import Any

import numpy as np

from core_common import DTYPE, PIPELINES, ZSTD_V3

# contender adapters (only imported inside worker processes)
# --------------------------------------------------------------------------


class ZarrLike:
    """zarr-python (any codec pipeline) or cuzarr (same API)."""

    def __init__(self, module: str, pipeline: str | None, mem: str):
        self.mod = importlib.import_module(module)
        self.mem = mem
        self.pipeline = pipeline
        self.info: dict[str, Any] = {
            "module": module,
            "version": getattr(self.mod, "__version__", "?"),
        }
        if pipeline is not None:
            import zarr

            zarr.config.set({"codec_pipeline.path": pipeline})
            self.info["codec_pipeline"] = zarr.config.get("codec_pipeline.path")
            if pipeline.startswith("zarrs"):
                import zarrs

                self.info["zarrs_version"] = zarrs.__version__

    def mem_location(self) -> Any:
        if self.mem == "zarr":
            import zarr

            return zarr.storage.MemoryStore()
        if self.mem == "MemoryStore":
            return importlib.import_module(self.info["module"] + ".storage").MemoryStore()
        return {}

    def disk_location(self, path: Path) -> Any:
        return str(path)

    def _own_pipeline(self) -> Any:
        """zarr-python binds its codec pipeline to an array when the array is created
        or opened, from the global ``codec_pipeline.path``: set it to this adapter's
        for that moment only. With several zarr-python adapters in one process
        (``--in-process``), a setting made once at construction would leave every
        one of them with the last adapter's pipeline."""
        if self.pipeline is None:
            return contextlib.nullcontext()
        import zarr

        return zarr.config.set({"codec_pipeline.path": self.pipeline})

    def create(self, loc: Any, shape, chunks, shards=None) -> Any:
        kw = {"shards": tuple(shards)} if shards is not None else {}
        with self._own_pipeline():
            return self._create(loc, shape, chunks, kw)

    def _create(self, loc: Any, shape, chunks, kw: dict[str, Any]) -> Any:
        return self.mod.create_array(
            loc,
            shape=shape,
            dtype=DTYPE,
            chunks=chunks,
            compressors=[ZSTD_V3],
            fill_value=0,
            zarr_format=3,
            overwrite=True,
            **kw,
        )

    def write(self, handle: Any, data: np.ndarray) -> None:
        handle[...] = data

    def open(self, loc: Any) -> Any:
        with self._own_pipeline():
            h = self.mod.open_array(loc, mode="r")
        pipe = getattr(getattr(h, "_async_array", None), "codec_pipeline", None)
        if pipe is not None and "codec_pipeline" in self.info:
            self.info["effective_pipeline"] = f"{type(pipe).__module__}.{type(pipe).__name__}"
        return h

    def read(self, handle: Any) -> np.ndarray:
        return handle[...]

    def select(self, handle: Any, kind: str, sel: tuple) -> Any:
        if kind == "oindex":
            return handle.oindex[sel]
        if kind == "vindex":
            return handle.vindex[sel]
        return handle[sel]


class TensorStore:
    def __init__(self) -> None:
        import tensorstore as ts

        self.ts = ts
        # tensorstore fsyncs every file it writes by default; nobody else does.
        self.ctx = ts.Context({"file_io_sync": False})
        self.info = {
            "module": "tensorstore",
            "version": getattr(ts, "__version__", "?"),
            "context": {"file_io_sync": False},
        }
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            self.info["version"] = version("tensorstore")

    def mem_location(self) -> Any:
        return {"driver": "memory", "path": "tiny/"}

    def disk_location(self, path: Path) -> Any:
        return {"driver": "file", "path": str(path) + "/"}

    def create(self, loc: Any, shape, chunks, shards=None) -> Any:
        inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD_V3]
        if shards is None:
            grid, codecs = list(chunks), inner_codecs
        else:
            grid = list(shards)
            codecs = [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": list(chunks),
                        "codecs": inner_codecs,
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                        "index_location": "end",
                    },
                }
            ]
        spec = {
            "driver": "zarr3",
            "kvstore": loc,
            "metadata": {
                "shape": list(shape),
                "data_type": DTYPE,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": codecs,
            },
        }
        return self.ts.open(spec, create=True, delete_existing=True, context=self.ctx).result()

    def write(self, handle: Any, data: np.ndarray) -> None:
        handle.write(data).result()

    def open(self, loc: Any) -> Any:
        spec = {"driver": "zarr3", "kvstore": loc}
        return self.ts.open(spec, open=True, read=True, context=self.ctx).result()

    def read(self, handle: Any) -> np.ndarray:
        return handle.read().result()

    def select(self, handle: Any, kind: str, sel: tuple) -> Any:
        if kind == "oindex":
            return handle.oindex[sel].read().result()
        if kind == "vindex":
            return handle.vindex[sel].read().result()
        return handle[sel].read().result()


def make_adapter(contender: str, impl_module: str, cuzarr_mem: str = "dict") -> Any:
    if contender == "cuzarr":
        return ZarrLike(impl_module, None, mem=cuzarr_mem)
    if contender in PIPELINES:
        return ZarrLike("zarr", PIPELINES[contender], mem="zarr")
    if contender == "tensorstore":
        return TensorStore()
    raise ValueError(contender)


# --------------------------------------------------------------------------
# "limit" reference rows: raw codec throughput on all cores, no Zarr machinery
# --------------------------------------------------------------------------
