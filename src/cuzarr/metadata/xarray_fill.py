"""xarray's encoding of the ``_FillValue`` attribute of Zarr v3 arrays, without
importing xarray (the ``cuzarr copy`` command converts between formats with it).

xarray takes a v2 array's ``fill_value`` as its missing-data value; for v3 it
writes a ``_FillValue`` attribute instead: floats as the base64 of a
little-endian float64, complex numbers as two of those, bytes as base64,
integers and booleans as they are.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

import numpy as np

__all__ = ["decode_fill_attr", "encode_fill_attr"]


def _b64_double(v: float) -> str:
    return base64.standard_b64encode(struct.pack("<d", float(v))).decode()


def decode_fill_attr(value: Any, dtype: np.dtype) -> Any:
    """The value of a v3 ``_FillValue`` attribute as xarray wrote it; anything
    not in its encoding comes back as it is."""
    try:
        if dtype.kind == "f" and isinstance(value, str):
            return struct.unpack("<d", base64.standard_b64decode(value))[0]
        if dtype.kind == "c" and isinstance(value, list | tuple) and len(value) == 2:
            re, im = (
                struct.unpack("<d", base64.standard_b64decode(v))[0] if isinstance(v, str) else v
                for v in value
            )
            return complex(re, im)
        if dtype.kind == "S" and isinstance(value, str):
            return base64.standard_b64decode(value)
    except (ValueError, struct.error, binascii.Error):
        pass  # not xarray's encoding: leave the attribute as written
    return value


def encode_fill_attr(value: Any, dtype: np.dtype) -> Any:
    """``value`` as xarray writes a v3 ``_FillValue`` attribute; ``None`` for a
    type xarray gives none this way."""
    kind = dtype.kind
    if kind == "f":
        return _b64_double(value)
    if kind in "iu":
        return int(value)
    if kind == "b":
        return bool(value)
    if kind == "S":
        return base64.standard_b64encode(bytes(value)).decode()
    if kind == "c":
        return [_b64_double(value.real), _b64_double(value.imag)]
    return None
