"""Shared pieces of the reference-store tests."""

from __future__ import annotations

import json


def zarray(shape, chunks, dtype="<i4", fill=0) -> str:
    """A Zarr v2 ``.zarray`` document (no compressor) as JSON text."""
    return json.dumps(
        {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": list(chunks),
            "dtype": dtype,
            "compressor": None,
            "fill_value": fill,
            "filters": None,
            "order": "C",
        }
    )
