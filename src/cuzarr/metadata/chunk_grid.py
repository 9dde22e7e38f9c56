"""Chunk grids: how an array's index space is cut into chunks.

Each grid hands out one ``DimGrid`` per dimension; indexing only talks to those
(vectorized ``index_of``, ``offset``, ``data_len``), so grids with irregular
edges can slot in without touching the indexing code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.errors import MetadataError

__all__ = ["DimGrid", "RegularChunkGrid", "parse_chunk_grid"]


@dataclass(frozen=True)
class DimGrid:
    """One dimension of a regular grid: ``size`` elements cut every ``chunk``."""

    size: int
    chunk: int

    @property
    def nchunks(self) -> int:
        return -(-self.size // self.chunk) if self.size else 0

    def offset(self, i: int) -> int:
        return i * self.chunk

    def chunk_len(self, i: int) -> int:
        """The stored (nominal) extent of chunk ``i``."""
        return self.chunk

    def data_len(self, i: int) -> int:
        """How many of chunk ``i``'s elements lie inside the array."""
        return min(self.chunk, self.size - i * self.chunk)

    def index_of(self, positions: np.ndarray) -> np.ndarray:
        return positions // self.chunk


@dataclass(frozen=True)
class RegularChunkGrid:
    """The v3 ``regular`` grid (and every v2 grid)."""

    chunk_shape: tuple[int, ...]
    name: str = "regular"

    def __post_init__(self) -> None:
        for c in self.chunk_shape:
            if not isinstance(c, (int, np.integer)) or isinstance(c, bool) or c < 1:
                raise MetadataError(
                    f"chunk sizes must be positive integers, got {self.chunk_shape}"
                )

    def to_json(self) -> dict[str, Any]:
        return {"name": "regular", "configuration": {"chunk_shape": list(self.chunk_shape)}}

    def dims(self, shape: tuple[int, ...]) -> list[DimGrid]:
        return [DimGrid(s, c) for s, c in zip(shape, self.chunk_shape, strict=True)]

    def grid_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(d.nchunks for d in self.dims(shape))

    def nchunks(self, shape: tuple[int, ...]) -> int:
        return math.prod(self.grid_shape(shape))

    def stored_chunk_shape(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        return self.chunk_shape


def parse_chunk_grid(obj: Any, ndim: int) -> RegularChunkGrid:
    """Parse a v3 ``chunk_grid`` object."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise MetadataError(f"invalid chunk_grid {obj!r}")
    name = obj["name"]
    conf = obj.get("configuration") or {}
    if name == "regular":
        cs = conf.get("chunk_shape")
        if not isinstance(cs, list) or len(cs) != ndim:
            raise MetadataError(f"chunk_grid chunk_shape {cs!r} does not match {ndim} dimensions")
        return RegularChunkGrid(tuple(cs))
    raise MetadataError(f"unsupported chunk_grid {name!r}")
