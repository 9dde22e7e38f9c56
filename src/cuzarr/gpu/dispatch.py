"""Whether a read or a write takes the device path.

The device modules (``reader``, ``writer``, ``executor``, ``plan``, ``formats``)
load on the first request that takes that path: a host-only program never pays
for them (import time, and ~1 MiB of resident memory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzarr.buffer.gpu import is_device_array
from cuzarr.config import config, flag

if TYPE_CHECKING:
    from cuzarr.gpu.reader import DeviceReader
    from cuzarr.gpu.shardwriter import ShardWriter
    from cuzarr.gpu.writer import DeviceWriter

__all__ = ["device_reader_for", "device_writer_for", "emulating"]


def emulating() -> bool:
    """True when ``cuzarr.config`` key ``gpu.emulate`` asks for the device
    paths run on the host (their numpy twins)."""
    return flag("gpu.emulate", False)


def device_reader_for(
    pipeline: Any,
    out: Any,
    fill: Any,
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    store: Any = None,
) -> DeviceReader | None:
    """A :class:`~cuzarr.gpu.reader.DeviceReader` for ``out`` when it is a device
    array (or when the host twin is asked for and the dtype can take the plan);
    ``None`` means the ordinary host read. ``store``: where the chunks come from
    (uncompressed chunks of a local store are read from their files straight
    into device memory, see :func:`cuzarr.gpu.reader.direct_reads`)."""
    device = is_device_array(out)
    if not device and not (
        emulating() and isinstance(out, np.ndarray) and not out.dtype.hasobject
    ):
        return None
    from cuzarr.gpu.batch import DIRECT_KINDS
    from cuzarr.gpu.executor import STREAM_HEAD
    from cuzarr.gpu.reader import DeviceReader, _ThreadExecutor, direct_reads

    reader = DeviceReader(pipeline, out, fill, chunk_shape, _ThreadExecutor(device))
    direct = direct_reads(store, device=device)
    if direct and (reader.kind == "none" or (
        reader.kind in DIRECT_KINDS and config.get("gpu.gds", "auto") is True
    )):
        # uncompressed chunk files go to the device unseen by the host; zstd and
        # LZ4 ones only where asked for (gpu.gds True, not "auto": their headers
        # are then not checked on the host) and trusted (gpu.untrusted leaves
        # reader.kind None)
        reader.direct_store = store
    elif reader.kind in STREAM_HEAD and store is not None:
        # blosc is left out: its inner streams lie unaligned and would be copied
        sio = store.sync_io()
        reader.get_into = getattr(sio, "get_into", None) if sio is not None else None
    return reader


def device_writer_for(
    pipeline: Any,
    value: Any,
    fill: Any,
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    items: Sequence[Any],
    write_empty_chunks: bool,
    sharded: bool,
    shard_codec: Any = None,
    inner_pipeline: Any = None,
) -> DeviceWriter | ShardWriter | None:
    """A :class:`~cuzarr.gpu.writer.DeviceWriter` when ``value`` lives on the
    device (or the host twin is asked for) and the plan is slices only;
    ``None`` means the ordinary host write. A sharded array gets a
    :class:`~cuzarr.gpu.shardwriter.ShardWriter` (of its whole shards) when its
    sharding codec (``shard_codec``) is its only codec and the device encodes
    the inner chunks (``inner_pipeline``), else ``None``."""
    device = is_device_array(value)
    if not device and not (emulating() and isinstance(value, np.ndarray)):
        return None
    dtype = np.dtype(value.dtype)
    if dtype.hasobject or dtype.kind not in "biufc" or dtype.fields:
        return None
    if sharded and (shard_codec is None or inner_pipeline is None):
        return None  # codecs after the sharding codec: whole shards on the host
    from cuzarr.gpu.plan import is_slice_only

    if not is_slice_only(items):
        return None
    if sharded:
        from cuzarr.gpu.shardwriter import ShardWriter

        return ShardWriter.make(shard_codec, inner_pipeline, value, fill, chunk_shape,
                                write_empty_chunks, device)
    from cuzarr.gpu.writer import DeviceWriter

    return DeviceWriter(pipeline, value, fill, chunk_shape, write_empty_chunks, device)
