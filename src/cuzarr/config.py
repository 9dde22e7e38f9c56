"""Runtime configuration (donfig), under the ``cuzarr`` namespace.

Keys: ``async.concurrency`` (global limit on in-flight store requests),
``threading.max_workers`` (codec thread pool size; ``None`` = CPU count),
``array.write_empty_chunks``, ``array.order``, ``buffer`` (``"cpu"`` or ``"gpu"``),
``gpu.emulate`` (run the device paths' plans on the host), ``gpu.gds`` (read
uncompressed local chunks straight into device memory), ``gpu.stream`` (the
caller's CUDA stream), ``gpu.read_workers`` (threads feeding one device read;
at most ``threading.max_workers``), ``codecs.zstd_system_library`` (decode large zstd frames
through the system's libzstd when found).
Environment variables such as ``CUZARR_ASYNC__CONCURRENCY=32`` override defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from donfig import Config as _DonfigConfig


class Config(_DonfigConfig):
    """donfig configuration with the GPU switch as setter and context manager."""

    def enable_gpu(self, stream: Any = None) -> _GpuToggle:
        """Make device (CuPy) buffers the default output.

        Works as a plain call (``cuzarr.config.enable_gpu()``) and as a context
        manager (``with cuzarr.config.enable_gpu(): ...``) that restores the
        previous setting on exit. ``stream`` (a CuPy stream, a PyTorch CUDA
        stream, or a raw ``cudaStream_t`` as an int) is the caller's stream:
        device reads and writes start after the work queued on it so far (a
        value it computes, an ``out=`` it fills); without it they order after
        the legacy default stream.
        """
        return _GpuToggle(self, "gpu", stream)

    def enable_cpu(self) -> _GpuToggle:
        """Make host (numpy) buffers the default output (the initial state)."""
        return _GpuToggle(self, "cpu")


class _GpuToggle:
    def __init__(self, cfg: Config, value: str, stream: Any = None) -> None:
        self._previous = cfg.get("buffer")
        self._previous_stream = cfg.get("gpu.stream", None)
        self._cfg = cfg
        cfg.set({"buffer": value})
        if stream is not None or value == "cpu":
            cfg.set({"gpu.stream": stream})

    def __enter__(self) -> Config:
        return self._cfg

    def __exit__(self, *exc: object) -> None:
        self._cfg.set({"buffer": self._previous, "gpu.stream": self._previous_stream})


defaults: list[dict[str, Any]] = [
    {
        "default_zarr_format": 3,
        "async": {"concurrency": 64, "timeout": None},
        "threading": {"max_workers": None},
        "array": {"order": "C", "write_empty_chunks": False},
        # Byte ranges of one shard closer than max_gap are fetched as one request.
        "sharding": {"coalesce_max_gap": 1 << 16, "coalesce_max_size": 16 << 20},
        "buffer": "cpu",
        # Run the device read path's plans on the host (numpy twin of the GPU
        # executor): a check of the GPU code path on machines without one.
        # gds: read uncompressed local chunks from disk straight into device
        # memory ("auto": when kvikio is installed; True; False).
        # stream: the caller's CUDA stream that device work orders after (see
        # Config.enable_gpu).
        # read_workers: threads feeding one device read (each fetches a batch,
        # uploads it and queues its decode); on an H200 with 16 CPUs 4 read
        # 1 GiB of zstd at 6.0 GiB/s and 16 at 3.2 (contention, not the GPU).
        "gpu": {"emulate": False, "gds": "auto", "stream": None, "read_workers": 4},
        "json_indent": 2,
        # Decode large zstd frames through the system's libzstd when one is
        # found (codecs/libzstd.py); False: numcodecs only.
        "codecs": {"zstd_system_library": True},
    }
]

config = Config("cuzarr", defaults=defaults)


@contextmanager
def overrides(**kwargs: Any) -> Iterator[None]:
    """Set dotted keys for the duration of a ``with`` block (test helper)."""
    with config.set(kwargs):
        yield


_FALSE_WORDS = frozenset({"", "0", "false", "no", "off", "none"})


def flag(key: str, default: bool = False) -> bool:
    """A boolean setting. Values from environment variables can arrive as
    strings (``CUZARR_GPU__EMULATE=false``): "false", "no", "off", "0", "none"
    and "" count as False, as the corresponding Python literals do."""
    value = config.get(key, default)
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)
