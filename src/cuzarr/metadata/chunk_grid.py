"""Chunk grids: how an array's index space is cut into chunks.

Each grid hands out one dimension grid per dimension; indexing only talks to
those (vectorized ``index_of``, ``offset``, ``chunk_len``, ``data_len``,
``nchunks``). ``DimGrid`` is a regular dimension (a chunk every ``chunk``
elements); ``RectilinearDimGrid`` holds explicit edge lengths as runs of equal
lengths (:class:`EdgeRuns`, one prefix sum per run) and finds chunks by binary
search over the runs. A run-length ``[size, count]`` entry stays one run: a few
bytes of JSON naming 2**24 edges cost one run, not 2**24 Python integers.

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
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.errors import MetadataError
from cuzarr.metadata.named import parse_named

__all__ = [
    "DimGrid",
    "EdgeRuns",
    "RectilinearChunkGrid",
    "RectilinearDimGrid",
    "RegularChunkGrid",
    "chunk_sizes",
    "compress_rle",
    "expand_rle",
    "parse_chunk_grid",
    "parse_edge_runs",
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
    ``offset(i):offset(i + 1)``; chunks starting at or past ``size`` are not
    part of the grid."""

    __slots__ = ("nchunks", "runs", "size")

    def __init__(self, size: int, runs: EdgeRuns) -> None:
        self.size = size
        self.runs = runs
        # Chunks that start inside the array.
        self.nchunks = runs.locate(size - 1) + 1 if size else 0

    def __repr__(self) -> str:
        return f"RectilinearDimGrid(size={self.size}, runs={self.runs!r})"

    @property
    def edges(self) -> tuple[int, ...]:
        """Every edge length, expanded (as many as there are chunks)."""
        return self.runs.expand()

    def offset(self, i: int) -> int:
        return self.runs.offset(i)

    def chunk_len(self, i: int) -> int:
        """The stored extent of chunk ``i`` (its full edge length)."""
        return self.runs.edge(i)

    def data_len(self, i: int) -> int:
        """How many of chunk ``i``'s elements lie inside the array."""
        return min(self.runs.edge(i), self.size - self.runs.offset(i))

    def locate(self, position: int) -> int:
        """The chunk holding one position (scalar ``index_of``)."""
        return self.runs.locate(position)

    def index_of(self, positions: np.ndarray) -> np.ndarray:
        return self.runs.index_of(positions)


_MAX_EXTENT = 2**62  # sizes and offsets are int64 arithmetic: room for sums and products
MAX_EDGES = 2**24  # chunk edges of one dimension of a rectilinear grid


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise MetadataError(f"{what} must be a positive integer, got {value!r}")
    if value > _MAX_EXTENT:
        raise MetadataError(f"{what} {value} is too large (at most 2**62)")
    return int(value)


def _edge_run(item: Any, axis: int) -> tuple[int, int]:
    """One entry of a dimension's JSON edge list as ``(size, count)``: a bare int is
    a run of one, ``[size, count]`` a run-length pair; both checked positive."""
    if not isinstance(item, (list, tuple)):
        return _positive_int(item, f"chunk edge length (dimension {axis})"), 1
    if len(item) != 2:
        raise MetadataError(
            f"rectilinear chunk_shapes[{axis}]: run-length entries are [size, count], got {item!r}"
        )
    size = _positive_int(item[0], f"chunk edge length (dimension {axis})")
    return size, _positive_int(item[1], f"run-length count (dimension {axis})")


def expand_rle(spec: Any, axis: int) -> tuple[int, ...]:
    """Expand one dimension's edge list: ints and ``[value, count]`` pairs."""
    if not isinstance(spec, (list, tuple)) or not spec:
        raise MetadataError(f"rectilinear chunk_shapes[{axis}] must be a non-empty list of edges")
    out: list[int] = []
    for item in spec:
        size, count = _edge_run(item, axis)
        if isinstance(item, (list, tuple)) and len(out) + count > MAX_EDGES:
            # a few bytes of JSON must not expand into gigabytes of edges
            raise MetadataError(
                f"rectilinear chunk_shapes[{axis}] has more than {MAX_EDGES} chunk edges"
            )
        out.extend([size] * count)
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


class EdgeRuns:
    """One dimension's chunk edges as runs of equal lengths.

    Run ``r`` holds ``counts[r]`` edges of ``sizes[r]`` elements; it starts at
    edge ``starts[r]`` and element ``offsets[r]`` (both lists end with the
    totals). Queries bisect over the runs: memory and time grow with the
    number of runs (at most the number of entries in the JSON), never with the
    number of edges.
    """

    __slots__ = ("_arrays", "counts", "offsets", "sizes", "starts")

    def __init__(self, sizes: list[int], counts: list[int]) -> None:
        merged_s: list[int] = []
        merged_c: list[int] = []
        for size, count in zip(sizes, counts, strict=True):
            if merged_s and merged_s[-1] == size:
                merged_c[-1] += count  # adjacent runs of one length are one run
            else:
                merged_s.append(size)
                merged_c.append(count)
        starts, offsets = [0], [0]
        for size, count in zip(merged_s, merged_c, strict=True):
            starts.append(starts[-1] + count)
            offsets.append(offsets[-1] + size * count)
        self.sizes = merged_s
        self.counts = merged_c
        self.starts = starts
        self.offsets = offsets
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_edges(cls, edges: Any) -> EdgeRuns:
        """Runs of an explicit edge sequence."""
        sizes: list[int] = []
        counts: list[int] = []
        for e in edges:
            if sizes and sizes[-1] == e:
                counts[-1] += 1
            else:
                sizes.append(e)
                counts.append(1)
        return cls(sizes, counts)

    def __len__(self) -> int:
        return self.starts[-1]

    @property
    def total(self) -> int:
        """The sum of the edges."""
        return self.offsets[-1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EdgeRuns):
            return NotImplemented
        return self.sizes == other.sizes and self.counts == other.counts

    def __hash__(self) -> int:
        return hash((tuple(self.sizes), tuple(self.counts)))

    def __repr__(self) -> str:
        return f"EdgeRuns({self.to_json()!r})"

    def __reduce__(self) -> Any:
        return (EdgeRuns, (self.sizes, self.counts))

    def max(self) -> int:
        return max(self.sizes)

    def distinct(self) -> set[int]:
        return set(self.sizes)

    def _run_of_edge(self, i: int) -> int:
        if not 0 <= i < self.starts[-1]:
            raise IndexError(f"chunk {i} is outside the grid's {self.starts[-1]} edges")
        return bisect.bisect_right(self.starts, i) - 1

    def edge(self, i: int) -> int:
        """The length of edge ``i``."""
        return self.sizes[self._run_of_edge(i)]

    def offset(self, i: int) -> int:
        """Where edge ``i`` starts (``offset(len(self))`` is the total)."""
        if i == self.starts[-1]:
            return self.offsets[-1]
        r = self._run_of_edge(i)
        return self.offsets[r] + (i - self.starts[r]) * self.sizes[r]

    def locate(self, position: int) -> int:
        """The edge holding ``position`` (the last one for positions past the end)."""
        r = bisect.bisect_right(self.offsets, position, 0, len(self.sizes)) - 1
        if r < 0:
            return -1
        return min(self.starts[r] + (position - self.offsets[r]) // self.sizes[r], len(self) - 1)

    def index_of(self, positions: np.ndarray) -> np.ndarray:
        """``locate`` for an array of in-bounds positions."""
        if self._arrays is None:  # built on the first vectorized lookup
            self._arrays = (
                np.asarray(self.offsets[:-1], dtype=np.int64),
                np.asarray(self.sizes, dtype=np.int64),
                np.asarray(self.starts[:-1], dtype=np.int64),
            )
        offs, sizes, starts = self._arrays
        r = np.searchsorted(offs, positions, side="right") - 1
        return starts[r] + (positions - offs[r]) // sizes[r]

    def expand(self, n: int | None = None) -> tuple[int, ...]:
        """The first ``n`` edge lengths (all of them by default), one by one."""
        out: list[int] = []
        left = len(self) if n is None else n
        for size, count in zip(self.sizes, self.counts, strict=True):
            if left <= 0:
                break
            take = min(count, left)
            out.extend([size] * take)
            left -= take
        return tuple(out)

    def to_json(self) -> list[Any]:
        """zarr-python 3.4's run-length form: ``[size, count]`` for runs longer
        than one, bare ints otherwise."""
        return [[s, c] if c > 1 else s for s, c in zip(self.sizes, self.counts, strict=True)]


def parse_edge_runs(spec: Any, axis: int) -> EdgeRuns:
    """One dimension's JSON edge list (ints and ``[size, count]`` pairs) as runs,
    checked: positive sizes, at most ``MAX_EDGES`` edges, sums within 2**62."""
    if not isinstance(spec, (list, tuple)) or not spec:
        raise MetadataError(f"rectilinear chunk_shapes[{axis}] must be a non-empty list of edges")
    sizes: list[int] = []
    counts: list[int] = []
    n = 0
    for item in spec:
        size, count = _edge_run(item, axis)
        n += count
        if n > MAX_EDGES:
            raise MetadataError(
                f"rectilinear chunk_shapes[{axis}] has more than {MAX_EDGES} chunk edges"
            )
        sizes.append(size)
        counts.append(count)
    runs = EdgeRuns(sizes, counts)
    if runs.total > _MAX_EXTENT:
        raise MetadataError(f"the chunk edges of dimension {axis} add up to more than 2**62")
    return runs


class RectilinearChunkGrid:
    """The zarr-extensions ``rectilinear`` grid.

    ``chunk_shapes`` holds, per dimension, an int (a regular step repeating over
    the whole dimension) or the edge lengths: a sequence of ints or
    :class:`EdgeRuns`. The grid keeps edges as runs; its ``chunk_shapes``
    attribute gives them back expanded (edge by edge, built on first use).
    """

    name = "rectilinear"

    def __init__(self, chunk_shapes: tuple[int | tuple[int, ...] | EdgeRuns, ...]) -> None:
        specs: list[int | EdgeRuns] = []
        for d, spec in enumerate(chunk_shapes):
            if isinstance(spec, EdgeRuns):
                runs = spec
            elif isinstance(spec, (list, tuple)):
                edges = [_positive_int(e, f"chunk edge length (dimension {d})") for e in spec]
                if not edges:
                    raise MetadataError(f"dimension {d} of a rectilinear grid has no chunk edges")
                runs = EdgeRuns.from_edges(edges)
            else:
                specs.append(_positive_int(spec, f"chunk size (dimension {d})"))
                continue
            if len(runs) > MAX_EDGES:
                # also for plain lists: what cuzarr writes it must read back
                raise MetadataError(f"dimension {d} has more than {MAX_EDGES} chunk edges")
            if runs.total > _MAX_EXTENT:
                raise MetadataError(f"the chunk edges of dimension {d} add up to more than 2**62")
            specs.append(runs)
        self.specs: tuple[int | EdgeRuns, ...] = tuple(specs)
        self._expanded: tuple[int | tuple[int, ...], ...] | None = None
        self._dims_cache: dict[tuple[int, ...], list[Any]] = {}
        specs_t = self.specs

        def fn(c: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(v if type(v) is int else v.edge(i) for v, i in zip(specs_t, c))  # type: ignore[union-attr]

        self._shape_of = fn

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RectilinearChunkGrid):
            return NotImplemented
        return self.specs == other.specs

    def __hash__(self) -> int:
        return hash(self.specs)

    def __repr__(self) -> str:
        return f"RectilinearChunkGrid({self.specs!r})"

    def __reduce__(self) -> Any:
        return (RectilinearChunkGrid, (self.specs,))

    @property
    def chunk_shapes(self) -> tuple[int | tuple[int, ...], ...]:
        """Per dimension, the regular step (int) or every edge length (tuple)."""
        if self._expanded is None:
            self._expanded = tuple(s if isinstance(s, int) else s.expand() for s in self.specs)
        return self._expanded

    # -- shape queries -------------------------------------------------------
    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The largest chunk along each dimension: a bound, not every chunk's shape."""
        return tuple(s if isinstance(s, int) else s.max() for s in self.specs)

    def edge_lengths(self, dim: int) -> set[int]:
        """The distinct chunk lengths along dimension ``dim``."""
        s = self.specs[dim]
        return {s} if isinstance(s, int) else s.distinct()

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """Raise unless the edges cover ``shape`` (edges may run past it)."""
        if len(shape) != len(self.specs):
            raise MetadataError(
                f"rectilinear chunk_shapes has {len(self.specs)} dimensions, "
                f"the shape {list(shape)} has {len(shape)}"
            )
        for d, (n, spec) in enumerate(zip(shape, self.specs, strict=True)):
            if isinstance(spec, EdgeRuns) and spec.total < n:
                raise MetadataError(
                    f"rectilinear chunk edges of dimension {d} sum to {spec.total}, "
                    f"less than the array's extent {n}"
                )

    def dims(self, shape: tuple[int, ...]) -> list[Any]:
        dims = self._dims_cache.get(shape)
        if dims is None:
            self.check_shape(shape)
            dims = [
                DimGrid(n, spec) if isinstance(spec, int) else RectilinearDimGrid(n, spec)
                for n, spec in zip(shape, self.specs, strict=True)
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
        specs: list[int | EdgeRuns] = []
        changed = False
        for spec, n in zip(self.specs, new_shape, strict=True):
            if isinstance(spec, EdgeRuns) and n > spec.total:
                specs.append(EdgeRuns([*spec.sizes, n - spec.total], [*spec.counts, 1]))
                changed = True
            else:
                specs.append(spec)
        return RectilinearChunkGrid(tuple(specs)) if changed else self

    # -- serialization -------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        dims: list[Any] = []
        for spec in self.specs:
            if isinstance(spec, int):
                dims.append(spec)
            else:
                rle = spec.to_json()
                # explicit edges where run-length encoding saves nothing
                dims.append(rle if len(rle) < len(spec) else list(spec.expand()))
        return {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": dims},
        }

    def to_v2_json(self) -> list[Any]:
        """The ZEP0003 v2 ``chunks`` form: ints and explicit edge lists."""
        return [s if isinstance(s, int) else list(s.expand()) for s in self.specs]


def chunk_sizes(dims: list[Any]) -> tuple[tuple[int, ...], ...]:
    """Dask-style chunks: per dimension, the extent of each chunk inside the array."""
    out: list[tuple[int, ...]] = []
    for d in dims:
        n = d.nchunks
        if isinstance(d, DimGrid):
            out.append((d.chunk,) * (n - 1) + (d.data_len(n - 1),) if n else ())
        else:
            out.append(d.runs.expand(n - 1) + (d.data_len(n - 1),) if n else ())
    return tuple(out)


def parse_chunk_grid(
    obj: Any, ndim: int, shape: tuple[int, ...] | None = None
) -> RegularChunkGrid | RectilinearChunkGrid:
    """Parse a v3 ``chunk_grid`` object (checked against ``shape`` when given)."""
    name, conf = parse_named(obj, "chunk_grid")
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
            tuple(parse_edge_runs(s, d) if isinstance(s, list) else s for d, s in enumerate(cs))
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
        tuple(parse_edge_runs(c, d) if isinstance(c, list) else c for d, c in enumerate(chunks))
    )
    grid.check_shape(shape)
    return grid
