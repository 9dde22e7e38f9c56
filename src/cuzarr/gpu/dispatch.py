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

if TYPE_CHECKING:
    from cuzarr.gpu.reader import DeviceReader
    from cuzarr.gpu.writer import DeviceWriter

__all__ = ["device_reader_for", "device_writer_for", "emulating"]


def emulating() -> bool:
    """True when ``cuzarr.config`` key ``gpu.emulate`` asks for the device
    paths run on the host (their numpy twins)."""
    from cuzarr.config import config

    return bool(config.get("gpu.emulate", False))


def device_reader_for(
    pipeline: Any,
    out: Any,
    fill: Any,
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    store: Any = None,
) -> DeviceReader | None:
    """:func:`cuzarr.gpu.reader.device_reader_for` when ``out`` may take the
    device path; ``None`` (the host read) otherwise."""
    if not is_device_array(out) and not (
        emulating() and isinstance(out, np.ndarray) and not out.dtype.hasobject
    ):
        return None
    from cuzarr.gpu import reader

    return reader.device_reader_for(pipeline, out, fill, chunk_shape, store)


def device_writer_for(
    pipeline: Any,
    value: Any,
    fill: Any,
    chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
    items: Sequence[Any],
    write_empty_chunks: bool,
    sharded: bool,
) -> DeviceWriter | None:
    """:func:`cuzarr.gpu.writer.device_writer_for` when ``value`` may take the
    device path; ``None`` (the host write) otherwise."""
    if not is_device_array(value) and not (emulating() and isinstance(value, np.ndarray)):
        return None
    from cuzarr.gpu import writer

    return writer.device_writer_for(
        pipeline, value, fill, chunk_shape, items, write_empty_chunks, sharded
    )
