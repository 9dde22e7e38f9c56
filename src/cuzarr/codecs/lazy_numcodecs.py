"""numcodecs, imported on first use.

Importing numcodecs loads every codec it bundles (blosc, zstd, lz4, ...): ~4-7
MiB of resident memory and ~40 ms on the reference machine. Reading a plain zstd
array on a machine with libzstd never needs it, so cuzarr imports it when a
codec first does, or when an array is opened for writing (large zstd chunks
compress through it, byte-identical to zarr-python's).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_numcodec", "nc_zstd", "numcodecs"]

_zstd: Any = None


def numcodecs() -> Any:
    """The ``numcodecs`` module (imported now if it was not)."""
    import numcodecs as nc

    return nc


def is_numcodec(value: Any) -> bool:
    """Whether ``value`` is a numcodecs codec. No object is one unless numcodecs
    was imported, so this imports nothing."""
    abc = sys.modules.get("numcodecs.abc")
    return abc is not None and isinstance(value, abc.Codec)


def nc_zstd() -> Any:
    """One shared ``numcodecs.Zstd()`` (its ``decode`` keeps no state)."""
    global _zstd
    if _zstd is None:
        _zstd = numcodecs().Zstd()
    return _zstd
