"""Runtime configuration (donfig), under the ``cuzarr`` namespace.

Keys: ``async.concurrency`` (global limit on in-flight store requests),
``threading.max_workers`` (codec thread pool size; ``None`` = CPU count),
``array.write_empty_chunks``, ``array.order``, ``array.read_missing_chunks``
(False: reading a chunk that is not stored raises ``ChunkNotFoundError``),
``async.timeout`` (seconds a blocking call waits), ``json_indent``, ``buffer`` (``"cpu"`` or ``"gpu"``),
``gpu.emulate`` (run the device paths' plans on the host), ``gpu.gds`` (read
uncompressed local chunks straight into device memory), ``gpu.stream`` (the
caller's CUDA stream), ``gpu.read_workers`` (threads feeding one device read;
at most ``threading.max_workers``), ``gpu.untrusted`` (decode device reads on the
host, not with nvCOMP), ``gpu.streams`` / ``gpu.sub_batch_bytes`` (CUDA streams
and sub-batch size of a device read's pipeline), ``gpu.read_ahead`` (batches
of a device read fetched ahead on store I/O threads), ``codecs.zstd_system_library`` (decode large zstd frames
through the system's libzstd when found), ``storage.timeout`` /
``storage.read_timeout`` / ``storage.max_inflated_bytes`` (limits of remote
reads, see :mod:`cuzarr.storage.fsspec`), ``storage.retries``,
``storage.native_io`` (batch reads of local files in C where that was built).
Environment variables such as ``CUZARR_ASYNC__CONCURRENCY=32`` override defaults.
These keys mean what zarr-python's keys of the same names mean. Setting a key
cuzarr does not know warns (``ZarrUserWarning``): it would have no effect.
``config.reset()`` restores the defaults (and the environment's settings).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from donfig import Config as _DonfigConfig

from cuzarr.errors import ZarrUserWarning

# zarr-python keys with another name (or no counterpart) in cuzarr: the warning says so
_ZARR_PYTHON_KEYS = {
    "array.sharding_coalesce_max_gap_bytes": "use 'sharding.coalesce_max_gap'",
    "array.sharding_coalesce_max_bytes": "use 'sharding.coalesce_max_size'",
    "ndbuffer": "use cuzarr.config.enable_gpu() or 'buffer': 'gpu'",
    "codec_pipeline": "cuzarr has one codec pipeline; it is not configurable",
    "codecs": "cuzarr's codecs are registered with cuzarr.codecs.register_codec",
}
# keys read where they are set that have no default (see storage/remote_retry.py)
_OPTIONAL_KEYS = frozenset({"storage.retries"})


def _leaves(d: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            yield from _leaves(v, key + ".")
        else:
            yield key


class Config(_DonfigConfig):
    """donfig configuration with the GPU switch as setter and context manager."""

    def set(self, arg: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """Set configuration values, globally or in a ``with`` block (donfig's
        ``set``); keys cuzarr does not know warn with ``ZarrUserWarning``."""
        given = {**(arg or {}), **{k.replace("__", "."): v for k, v in kwargs.items()}}
        self._warn_unknown(given)
        return super().set(arg, **kwargs)

    def reset(self) -> None:
        """Restore the defaults (then the environment's settings), as zarr-python's
        ``config.reset()`` does."""
        self.clear()
        self.refresh()

    def _warn_unknown(self, given: Mapping[str, Any]) -> None:
        known = {k for d in self.defaults for k in _leaves(d)} | _OPTIONAL_KEYS
        for key in _leaves(given):
            if key in known or any(key.startswith(k + ".") for k in known):
                continue
            hint = next(
                (h for k, h in _ZARR_PYTHON_KEYS.items() if key == k or key.startswith(k + ".")),
                None,
            )
            warnings.warn(
                f"cuzarr.config: unknown key {key!r} has no effect"
                + (f" ({hint})" if hint else ""),
                ZarrUserWarning,
                stacklevel=3,
            )

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
        "array": {"order": "C", "write_empty_chunks": False, "read_missing_chunks": True},
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
        # untrusted: decode device reads on the host (one pinned upload per
        # batch) instead of nvCOMP, whose decoders expect valid streams: for
        # stores whose bytes are not trusted (headers and sizes are checked
        # either way).
        # streams / sub_batch_bytes: each batch of a device read is cut into
        # sub-batches of about sub_batch_bytes stored bytes, queued round-robin
        # on `streams` CUDA streams (1-4) so that uploads overlap decodes.
        # staging_keep_bytes: pinned (host twin: plain) staging kept for the
        # next read when a read ends and gives its buffers back (gpu/staging.py).
        # read_batch_bytes: decoded bytes of one batch of a device read (sharded
        # arrays: whole shards, at least one; core/engine.py batch_size,
        # core/shards.py read_sharded, docs/gpu.md "Batch size").
        # read_ahead: batches of a device read whose files are read into
        # staging on store I/O threads ahead of the batch being prepared
        # (core/readahead.py); 0: each batch is read by the worker preparing it.
        # Off by default: on the 2-CPU reference machine it cut a host-only read's
        # wall time to below the one-thread pread loop's, at about twice the
        # host CPU per chunk (docs/gpu.md "Read-ahead").
        "gpu": {"emulate": False, "gds": "auto", "stream": None, "read_workers": 4,
                "untrusted": False, "streams": 2, "sub_batch_bytes": 32 << 20,
                "staging_keep_bytes": 1 << 30, "read_batch_bytes": 32 << 20,
                "read_ahead": 0},
        "json_indent": 2,
        # Decode large zstd frames through the system's libzstd when one is
        # found (codecs/libzstd.py); False: numcodecs only.
        "codecs": {"zstd_system_library": True},
        # Remote stores (storage/remote_requests.py): timeout = seconds one request may
        # take in all (its retries and their backoff included; writes excepted),
        # read_timeout = seconds an answer may stall before the attempt fails
        # (and is retried); max_inflated_bytes = the most an HTTP answer sent with
        # Content-Encoding gzip/deflate may inflate to. None: no limit.
        "storage": {
            "timeout": 300.0,
            "read_timeout": 30.0,
            "max_inflated_bytes": 128 << 20,
            # Read batches of local chunk files (and walk their zstd frames)
            # through cuzarr.runtime._native, one C call per batch, where it
            # was built; False: the same steps in Python (runtime/native.py).
            "native_io": True,
        },
    }
]

config = Config("cuzarr", defaults=defaults)


@contextmanager
def overrides(**kwargs: Any) -> Iterator[None]:
    """Set dotted keys for the duration of a ``with`` block (test helper)."""
    with config.set(kwargs):
        yield


_FALSE_WORDS = frozenset({"", "0", "false", "no", "off", "none"})


# dotted keys split once (setting() runs per batch, and per chunk in places)
_KEY_PARTS: dict[str, tuple[str, ...]] = {}


def setting(key: str, default: Any = None) -> Any:
    """``config.get(key, default)`` for code that asks per batch or per chunk:
    the dotted key is looked up in the configuration's nested dict directly
    (which ``config.set`` updates in place), and only a key not found there
    goes through donfig's lookup (~0.1 against ~0.4 us, and far fewer cold
    Python frames right after a batch's copies)."""
    parts = _KEY_PARTS.get(key)
    if parts is None:
        parts = _KEY_PARTS[key] = tuple(key.split("."))
    node: Any = config.config
    try:
        for part in parts:
            node = node[part]
    except (KeyError, TypeError):
        return config.get(key, default)
    return node


def flag(key: str, default: bool = False) -> bool:
    """A boolean setting. Values from environment variables can arrive as
    strings (``CUZARR_GPU__EMULATE=false``): "false", "no", "off", "0", "none"
    and "" count as False, as the corresponding Python literals do."""
    value = setting(key, default)
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)
