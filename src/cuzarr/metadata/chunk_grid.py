"""Chunk grids: how an array's index space is cut into chunks.

Each grid hands out one dimension grid per dimension; indexing only talks to
those (vectorized ``index_of``, ``offset``, ``chunk_len``, ``data_len``,
``nchunks``). ``DimGrid`` is a regular dimension (a chunk every ``chunk``
elements); ``RectilinearDimGrid`` holds explicit edge lengths with their prefix
sums, and finds chunks by binary search.

Two grids:

* ``RegularChunkGrid``: the v3 ``regular`` grid and every plain v2 grid.
* ``RectilinearChunkGrid``: the zarr-extensions ``rectilinear`` grid (and the
  ZEP0003 v2 form, ``"chunks": [[1, 2, 2, 5], 5]``). Per dimension, an int is a
  regular step and a tuple lists edge lengths; edges may run past the shape.
  As in zarr-python 3.4, every chunk is stored at its full edge length: a chunk
  that runs past the end of the array is padded with the fill value, exactly as
  edge chunks of a regular grid are. (Edge lists that sum to the shape, the
  spec's case, leave no chunk padded along that dimension.)
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzarr.errors import MetadataError

__all__ = [
    "DimGrid",
    "RectilinearChunkGrid",
    "RectilinearDimGrid",
    "RegularChunkGrid",
    "chunk_sizes",
    "compress_rle",
    "expand_rle",
    "parse_chunk_grid",
    "parse_v2_chunks",
]


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

    def resized(self, old_shape: tuple[int, ...], new_shape: tuple[int, ...]) -> RegularChunkGrid:
        return self

    def to_v2_json(self) -> list[Any]:
        return list(self.chunk_shape)


class RectilinearDimGrid:
    """One dimension of explicit edge lengths: chunk ``i`` spans
    ``offsets[i]:offsets[i + 1]``; chunks starting at or past ``size`` are not
    part of the grid."""

    __slots__ = ("edges", "nchunks", "offsets", "offsets_list", "size")

    def __init__(self, size: int, edges: tuple[int, ...], offsets: np.ndarray) -> None:
        self.size = size
        self.edges = edges
        self.offsets = offsets  # int64 prefix sums, len(edges) + 1 entries
        self.offsets_list: list[int] = offsets.tolist()
        # Chunks that start inside the array.
        self.nchunks = bisect.bisect_left(self.offsets_list, size, 0, len(edges)) if size else 0

    def __repr__(self) -> str:
        return f"RectilinearDimGrid(size={self.size}, edges={self.edges!r})"

    def offset(self, i: int) -> int:
        return self.offsets_list[i]

    def chunk_len(self, i: int) -> int:
        """The stored extent of chunk ``i`` (its full edge length)."""
        return self.edges[i]

    def data_len(self, i: int) -> int:
        """How many of chunk ``i``'s elements lie inside the array."""
        return min(self.edges[i], self.size - self.offsets_list[i])

    def locate(self, position: int) -> int:
        """The chunk holding one position (scalar ``index_of``)."""
        return bisect.bisect_right(self.offsets_list, position) - 1

    def index_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, positions, side="right") - 1


_MAX_EXTENT = 2**62  # sizes and offsets are int64 arithmetic: room for sums and products
MAX_EDGES = 2**24  # chunk edges of one dimension of a rectilinear grid


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise MetadataError(f"{what} must be a positive integer, got {value!r}")
    if value > _MAX_EXTENT:
        raise MetadataError(f"{what} {value} is too large (at most 2**62)")
    return int(value)


def expand_rle(spec: Any, axis: int) -> tuple[int, ...]:
    """Expand one dimension's edge list: ints and ``[value, count]`` pairs."""
    if not isinstance(spec, (list, tuple)) or not spec:
        raise MetadataError(f"rectilinear chunk_shapes[{axis}] must be a non-empty list of edges")
    out: list[int] = []
    for item in spec:
        if isinstance(item, (list, tuple)):
            if len(item) != 2:
                raise MetadataError(
                    f"rectilinear chunk_shapes[{axis}]: run-length entries are [size, count], "
                    f"got {item!r}"
                )
            size = _positive_int(item[0], f"chunk edge length (dimension {axis})")
            count = _positive_int(item[1], f"run-length count (dimension {axis})")
            if len(out) + count > MAX_EDGES:
                # a few bytes of JSON must not expand into gigabytes of edges
                raise MetadataError(
                    f"rectilinear chunk_shapes[{axis}] has more than {MAX_EDGES} chunk edges"
                )
            out.extend([size] * count)
        else:
            out.append(_positive_int(item, f"chunk edge length (dimension {axis})"))
    return tuple(out)


def compress_rle(edges: tuple[int, ...] | list[int]) -> list[Any]:
    """Run-length encode edges as zarr-python 3.4 does: runs longer than one
    become ``[value, count]``, single edges stay bare ints."""
    out: list[Any] = []
    i, n = 0, len(edges)
    while i < n:
        j = i + 1
        while j < n and edges[j] == edges[i]:
            j += 1
        out.append([int(edges[i]), j - i] if j - i > 1 else int(edges[i]))
        i = j
    return out


@dataclass(frozen=True)
class RectilinearChunkGrid:
    """The zarr-extensions ``rectilinear`` grid.

    ``chunk_shapes`` holds, per dimension, an int (a regular step repeating over
    the whole dimension) or a tuple of edge lengths (already expanded).
    """

    chunk_shapes: tuple[int | tuple[int, ...], ...]
    name: str = "rectilinear"
    _offsets: tuple[np.ndarray | None, ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    _dims_cache: dict[tuple[int, ...], list[Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _shape_of: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shapes: list[int | tuple[int, ...]] = []
        offsets: list[np.ndarray | None] = []
        for d, spec in enumerate(self.chunk_shapes):
            if isinstance(spec, (list, tuple)):
                edges = tuple(_positive_int(e, f"chunk edge length (dimension {d})") for e in spec)
                if not edges:
                    raise MetadataError(f"dimension {d} of a rectilinear grid has no chunk edges")
                if len(edges) > MAX_EDGES:
                    # also for plain lists: what cuzarr writes it must read back
                    raise MetadataError(f"dimension {d} has more than {MAX_EDGES} chunk edges")
                if sum(edges) > _MAX_EXTENT:
                    raise MetadataError(
                        f"the chunk edges of dimension {d} add up to more than 2**62"
                    )
                shapes.append(edges)
                offs = np.zeros(len(edges) + 1, dtype=np.int64)
                np.cumsum(edges, out=offs[1:])
                offsets.append(offs)
            else:
                shapes.append(_positive_int(spec, f"chunk size (dimension {d})"))
                offsets.append(None)
        object.__setattr__(self, "chunk_shapes", tuple(shapes))
        object.__setattr__(self, "_offsets", tuple(offsets))
        # Per dimension: the edge tuple to index (irregular) or the constant size.
        dims = tuple(shapes)

        def fn(c: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(v[i] if type(v) is tuple else v for v, i in zip(dims, c))

        object.__setattr__(self, "_shape_of", fn)

    def __reduce__(self) -> Any:
        return (RectilinearChunkGrid, (self.chunk_shapes,))

    # -- shape queries -------------------------------------------------------
    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The largest chunk along each dimension: a bound, not every chunk's shape."""
        return tuple(s if isinstance(s, int) else max(s) for s in self.chunk_shapes)

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """Raise unless the edges cover ``shape`` (edges may run past it)."""
        if len(shape) != len(self.chunk_shapes):
            raise MetadataError(
                f"rectilinear chunk_shapes has {len(self.chunk_shapes)} dimensions, "
                f"the shape {list(shape)} has {len(shape)}"
            )
        for d, (s, offs) in enumerate(zip(shape, self._offsets, strict=True)):
            if offs is not None and int(offs[-1]) < s:
                raise MetadataError(
                    f"rectilinear chunk edges of dimension {d} sum to {int(offs[-1])}, "
                    f"less than the array's extent {s}"
                )

    def dims(self, shape: tuple[int, ...]) -> list[Any]:
        dims = self._dims_cache.get(shape)
        if dims is None:
            self.check_shape(shape)
            dims = [
                DimGrid(s, spec) if isinstance(spec, int) else RectilinearDimGrid(s, spec, offs)  # type: ignore[arg-type]
                for s, spec, offs in zip(shape, self.chunk_shapes, self._offsets, strict=True)
            ]
            if len(self._dims_cache) > 16:
                self._dims_cache.clear()
            self._dims_cache[shape] = dims
        return dims

    def grid_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(d.nchunks for d in self.dims(shape))

    def nchunks(self, shape: tuple[int, ...]) -> int:
        return math.prod(self.grid_shape(shape))

    def stored_chunk_shape(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The shape chunk ``coords`` is stored with: its full edge lengths."""
        return self._shape_of(coords)

    def resized(
        self, old_shape: tuple[int, ...], new_shape: tuple[int, ...]
    ) -> RectilinearChunkGrid:
        """The grid after a resize, as zarr-python 3.4 does it: an edge list that
        no longer covers its dimension gets one new edge for the difference;
        otherwise the edges stay (they may run past the shape)."""
        shapes: list[int | tuple[int, ...]] = []
        changed = False
        for spec, n in zip(self.chunk_shapes, new_shape, strict=True):
            if isinstance(spec, tuple) and n > sum(spec):
                shapes.append((*spec, n - sum(spec)))
                changed = True
            else:
                shapes.append(spec)
        return RectilinearChunkGrid(tuple(shapes)) if changed else self

    # -- serialization -------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        dims: list[Any] = []
        for spec in self.chunk_shapes:
            if isinstance(spec, int):
                dims.append(spec)
            else:
                rle = compress_rle(spec)
                dims.append(rle if len(rle) < len(spec) else list(spec))
        return {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": dims},
        }

    def to_v2_json(self) -> list[Any]:
        """The ZEP0003 v2 ``chunks`` form: ints and explicit edge lists."""
        return [s if isinstance(s, int) else list(s) for s in self.chunk_shapes]


def chunk_sizes(dims: list[Any]) -> tuple[tuple[int, ...], ...]:
    """Dask-style chunks: per dimension, the extent of each chunk inside the array."""
    out: list[tuple[int, ...]] = []
    for d in dims:
        n = d.nchunks
        if isinstance(d, DimGrid):
            out.append((d.chunk,) * (n - 1) + (d.data_len(n - 1),) if n else ())
        else:
            out.append(tuple(d.edges[: n - 1]) + (d.data_len(n - 1),) if n else ())
    return tuple(out)


def parse_chunk_grid(
    obj: Any, ndim: int, shape: tuple[int, ...] | None = None
) -> RegularChunkGrid | RectilinearChunkGrid:
    """Parse a v3 ``chunk_grid`` object (checked against ``shape`` when given)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise MetadataError(f"invalid chunk_grid {obj!r}")
    name = obj["name"]
    conf = obj.get("configuration") or {}
    if not isinstance(conf, dict):
        raise MetadataError(f"chunk_grid configuration must be an object, got {conf!r}")
    if name == "regular":
        cs = conf.get("chunk_shape")
        if not isinstance(cs, list) or len(cs) != ndim:
            raise MetadataError(f"chunk_grid chunk_shape {cs!r} does not match {ndim} dimensions")
        return RegularChunkGrid(tuple(cs))
    if name == "rectilinear":
        kind = conf.get("kind")
        if kind != "inline":
            raise MetadataError(
                f"rectilinear chunk grid kind {kind!r} is not supported (only 'inline')"
            )
        cs = conf.get("chunk_shapes")
        if not isinstance(cs, list) or len(cs) != ndim:
            raise MetadataError(f"rectilinear chunk_shapes {cs!r} does not match {ndim} dimensions")
        grid = RectilinearChunkGrid(
            tuple(expand_rle(s, d) if isinstance(s, list) else s for d, s in enumerate(cs))
        )
        if shape is not None:
            grid.check_shape(shape)
        return grid
    raise MetadataError(f"unsupported chunk_grid {name!r}")


def parse_v2_chunks(chunks: Any, shape: tuple[int, ...]) -> RegularChunkGrid | RectilinearChunkGrid:
    """A v2 ``chunks`` member: ints (regular) or, per ZEP0003, edge lists."""
    if not isinstance(chunks, list) or len(chunks) != len(shape):
        raise MetadataError(f".zarray: chunks {chunks!r} does not match shape {list(shape)}")
    if not any(isinstance(c, list) for c in chunks):
        return RegularChunkGrid(tuple(chunks))
    grid = RectilinearChunkGrid(
        tuple(expand_rle(c, d) if isinstance(c, list) else c for d, c in enumerate(chunks))
    )
    grid.check_shape(shape)
    return grid
