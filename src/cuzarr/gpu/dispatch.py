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
from cuzarr.config import flag

if TYPE_CHECKING:
    from cuzarr.gpu.reader import DeviceReader
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
    from cuzarr.gpu.executor import STREAM_HEAD
    from cuzarr.gpu.reader import DeviceReader, _ThreadExecutor, direct_reads

    reader = DeviceReader(pipeline, out, fill, chunk_shape, _ThreadExecutor(device))
    if reader.kind == "none" and direct_reads(store, device=device):
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
) -> DeviceWriter | None:
    """A :class:`~cuzarr.gpu.writer.DeviceWriter` when ``value`` lives on the
    device (or the host twin is asked for), the plan is slices only and the
    array is not sharded; ``None`` means the ordinary host write."""
    device = is_device_array(value)
    if not device and not (emulating() and isinstance(value, np.ndarray)):
        return None
    dtype = np.dtype(value.dtype)
    if sharded or dtype.hasobject or dtype.kind not in "biufc" or dtype.fields:
        return None
    from cuzarr.gpu.plan import is_slice_only

    if not is_slice_only(items):
        return None
    from cuzarr.gpu.writer import DeviceWriter

    return DeviceWriter(pipeline, value, fill, chunk_shape, write_empty_chunks, device)
