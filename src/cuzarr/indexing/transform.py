"""Index transforms: the composed selection behind a lazy view.

An ``IndexTransform`` maps an *input domain* (the view's shape, a box starting
at zero) onto the coordinates of the underlying array. It holds one map per
array (output) dimension, each of one of three kinds:

* constant: ``out = offset``;
* strided: ``out = offset + stride * in[input_dim]``;
* index array: ``out = index_array[in]``, where ``index_array`` has one axis per
  input dimension, each either of full length or of length 1 (broadcast).

Each indexing step on a view (numpy-style ``[...]``, ``.oindex[...]``,
``.vindex[...]``) is first turned into a transform from the new view's domain
onto the old view's domain, then composed with the old transform, so a chain of
steps is always one transform: constant maps stay constant, strided maps
compose into strided maps, and index arrays are gathered once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.indexing.selection import (
    classify_numpy,
    classify_orthogonal,
    normalize_coordinate,
)

__all__ = ["IndexTransform", "OutputMap"]

CONSTANT = "constant"
STRIDED = "strided"
ARRAY = "array"


@dataclass(frozen=True, eq=False)
class OutputMap:
    """How one output (array) dimension's index follows from the input indices."""

    kind: str
    offset: int = 0
    stride: int = 0
    input_dim: int = -1
    index_array: np.ndarray | None = None

    @staticmethod
    def constant(value: int) -> OutputMap:
        return OutputMap(CONSTANT, offset=int(value))

    @staticmethod
    def strided(offset: int, stride: int, input_dim: int) -> OutputMap:
        return OutputMap(STRIDED, offset=int(offset), stride=int(stride), input_dim=input_dim)

    @staticmethod
    def array(arr: np.ndarray) -> OutputMap:
        arr = np.asarray(arr, dtype=np.intp)
        if arr.size == 1 and arr.ndim and all(n == 1 for n in arr.shape):
            return OutputMap.constant(int(arr.reshape(-1)[0]))
        if arr.ndim == 0:
            return OutputMap.constant(int(arr))
        arr = np.array(arr, dtype=np.intp)  # never alias (or freeze) an array the caller owns
        arr.setflags(write=False)
        return OutputMap(ARRAY, index_array=arr)

    def dependent_dims(self) -> tuple[int, ...]:
        """The input dimensions this map varies along."""
        if self.kind == STRIDED:
            return (self.input_dim,)
        if self.kind == ARRAY:
            assert self.index_array is not None
            return tuple(k for k, n in enumerate(self.index_array.shape) if n != 1)
        return ()

    def bounds(self, shape: tuple[int, ...]) -> tuple[int, int] | None:
        """Smallest and largest index produced over ``shape``; ``None`` when empty."""
        if self.kind == CONSTANT:
            return self.offset, self.offset
        if self.kind == STRIDED:
            n = shape[self.input_dim]
            if n == 0:
                return None
            last = self.offset + self.stride * (n - 1)
            return min(self.offset, last), max(self.offset, last)
        arr = self.index_array
        assert arr is not None
        if arr.size == 0:
            return None
        return int(arr.min()), int(arr.max())

    def key(self) -> tuple[Any, ...]:
        if self.kind == ARRAY:
            arr = self.index_array
            assert arr is not None
            return (ARRAY, arr.shape, arr.tobytes())
        return (self.kind, self.offset, self.stride, self.input_dim)


def _grid(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    shape = [1] * rank
    shape[axis] = -1
    return values.reshape(shape)


class IndexTransform:
    """An input domain (``shape``) and one ``OutputMap`` per output dimension."""

    __slots__ = ("maps", "shape")

    def __init__(self, shape: tuple[int, ...], maps: tuple[OutputMap, ...]) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.maps = tuple(maps)

    @classmethod
    def identity(cls, shape: tuple[int, ...]) -> IndexTransform:
        return cls(shape, tuple(OutputMap.strided(0, 1, d) for d in range(len(shape))))

    @property
    def input_rank(self) -> int:
        return len(self.shape)

    @property
    def output_rank(self) -> int:
        return len(self.maps)

    def key(self) -> tuple[Any, ...]:
        """A hashable fingerprint: equal keys select the same elements in the same layout."""
        return (self.shape, tuple(m.key() for m in self.maps))

    def __repr__(self) -> str:
        return f"IndexTransform(shape={self.shape}, maps={self.describe()})"

    # -- composition -------------------------------------------------------------
    def compose(self, inner: IndexTransform) -> IndexTransform:
        """``self`` after ``inner``: ``inner`` maps a new domain onto ``self.shape``."""
        q = inner.input_rank
        maps: list[OutputMap] = []
        cache: dict[int, np.ndarray] = {}

        def index_of(k: int) -> np.ndarray:
            # inner's map for self's input dim k, as an array over inner's domain.
            if k not in cache:
                m = inner.maps[k]
                if m.kind == CONSTANT:
                    cache[k] = np.full((1,) * q, m.offset, dtype=np.intp)
                elif m.kind == STRIDED:
                    vals = m.offset + m.stride * np.arange(inner.shape[m.input_dim], dtype=np.intp)
                    cache[k] = _grid(vals, m.input_dim, q)
                else:
                    assert m.index_array is not None
                    cache[k] = m.index_array
            return cache[k]

        for m in self.maps:
            if m.kind == CONSTANT:
                maps.append(m)
            elif m.kind == STRIDED:
                im = inner.maps[m.input_dim]
                if im.kind == CONSTANT:
                    maps.append(OutputMap.constant(m.offset + m.stride * im.offset))
                elif im.kind == STRIDED:
                    maps.append(
                        OutputMap.strided(
                            m.offset + m.stride * im.offset, m.stride * im.stride, im.input_dim
                        )
                    )
                else:
                    assert im.index_array is not None
                    maps.append(OutputMap.array(m.offset + m.stride * im.index_array))
            else:
                arr = m.index_array
                assert arr is not None
                zero = np.zeros((1,) * q, dtype=np.intp)
                idx = tuple(
                    zero if arr.shape[k] == 1 else index_of(k) for k in range(self.input_rank)
                )
                maps.append(OutputMap.array(np.asarray(arr[idx])))
        return IndexTransform(inner.shape, tuple(maps))

    def index(self, selection: Any) -> IndexTransform:
        """Compose with a numpy-style selection of this domain."""
        return self.compose(numpy_step(selection, self.shape))

    def oindex(self, selection: Any) -> IndexTransform:
        """Compose with an orthogonal selection of this domain."""
        return self.compose(orthogonal_step(selection, self.shape))

    def vindex(self, selection: Any) -> IndexTransform:
        """Compose with a coordinate (pointwise) selection of this domain."""
        return self.compose(vindex_step(selection, self.shape))

    # -- analysis ----------------------------------------------------------------
    def has_arrays(self) -> bool:
        return any(m.kind == ARRAY for m in self.maps)

    def is_orthogonal(self) -> bool:
        """Each map varies along at most one input dim, and no two maps share one."""
        seen: set[int] = set()
        for m in self.maps:
            deps = m.dependent_dims()
            if len(deps) > 1:
                return False
            for k in deps:
                if k in seen:
                    return False
                seen.add(k)
        return True

    def check_bounds(self, shape: tuple[int, ...]) -> None:
        """Raise ``IndexError`` unless every selected index lies inside ``shape``."""
        if len(shape) != self.output_rank:
            raise IndexError(
                f"the view selects {self.output_rank} dimensions, the array now has {len(shape)}"
            )
        for d, (m, n) in enumerate(zip(self.maps, shape, strict=True)):
            b = m.bounds(self.shape)
            if b is not None and (b[0] < 0 or b[1] >= n):
                raise IndexError(
                    f"the view reaches index {b[1] if b[1] >= n else b[0]} of dimension {d}, "
                    f"which has size {n} (was the array resized?)"
                )

    def coordinates(self) -> list[np.ndarray]:
        """Full flat (C-order over the domain) coordinates, one array per output dim."""
        q = self.input_rank
        out = []
        for m in self.maps:
            if m.kind == CONSTANT:
                a = np.full((1,) * q, m.offset, dtype=np.intp)
            elif m.kind == STRIDED:
                a = _grid(
                    m.offset + m.stride * np.arange(self.shape[m.input_dim], dtype=np.intp),
                    m.input_dim,
                    q,
                )
            else:
                assert m.index_array is not None
                a = m.index_array
            out.append(np.broadcast_to(a, self.shape).reshape(-1))
        return out

    def describe(self) -> str:
        """The composed selection as text: numpy-style when it is one, else per-dim maps."""
        ref = [m.input_dim for m in self.maps if m.kind == STRIDED]
        simple = (
            not self.has_arrays()
            and ref == sorted(ref)
            and all(self.shape[k] == 1 for k in set(range(self.input_rank)) - set(ref))
            and self.input_rank == len(ref)
        )
        parts = []
        for m in self.maps:
            if m.kind == CONSTANT:
                parts.append(str(m.offset))
            elif m.kind == STRIDED:
                n = self.shape[m.input_dim]
                stop = m.offset + m.stride * n
                stop_s = "" if stop < 0 else str(stop)
                step_s = "" if m.stride == 1 else f":{m.stride}"
                s = f"{m.offset}:{stop_s}{step_s}"
                parts.append(s if simple else f"{s} along axis {m.input_dim}")
            else:
                arr = m.index_array
                assert arr is not None
                flat = arr.reshape(-1)
                head = ", ".join(str(int(v)) for v in flat[:4]) + (", ..." if flat.size > 4 else "")
                parts.append(f"array(shape={arr.shape}, [{head}])")
        return "[" + ", ".join(parts) + "]"


# -- indexing steps: a selection of a domain -> a transform onto that domain -------
def numpy_step(selection: Any, shape: tuple[int, ...]) -> IndexTransform:
    """Numpy's rules (basic and advanced indexing) as a transform onto ``shape``."""
    norm, advanced = classify_numpy(selection, shape)

    maps: list[OutputMap | None] = [None] * len(shape)
    if not advanced:
        out_shape: list[int] = []
        for n in norm:
            if n[0] == "new":
                out_shape.append(1)
            elif n[0] == "int":
                maps[n[2]] = OutputMap.constant(n[1])
            elif n[0] == "slice":
                start, stop, step = n[1]
                maps[n[2]] = OutputMap.strided(start, step, len(out_shape))
                out_shape.append(len(range(start, stop, step)))
        return IndexTransform(tuple(out_shape), tuple(maps))  # type: ignore[arg-type]

    # Advanced: integers count as advanced indices; all of them broadcast together.
    adv_pos = [j for j, n in enumerate(norm) if n[0] in ("int", "array", "bool0")]
    adv_shapes = []
    for j in adv_pos:
        n = norm[j]
        if n[0] == "array":
            adv_shapes.append(n[1].shape)
        elif n[0] == "bool0":
            adv_shapes.append((1,) if n[1] else (0,))
        else:
            adv_shapes.append(())
    try:
        bshape = tuple(np.broadcast_shapes(*adv_shapes))
    except ValueError as e:
        raise IndexError(f"indexing arrays could not be broadcast together: {e}") from e
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    # Lay out the result dimensions.
    out_shape = []
    slice_axis: dict[int, int] = {}
    b0 = 0
    placed = False
    if not adjacent:
        out_shape.extend(bshape)
        placed = True
    for j, n in enumerate(norm):
        if n[0] == "new":
            out_shape.append(1)
        elif n[0] == "slice":
            slice_axis[j] = len(out_shape)
            start, stop, step = n[1]
            out_shape.append(len(range(start, stop, step)))
        elif n[0] in ("int", "array", "bool0") and not placed:
            b0 = len(out_shape)
            out_shape.extend(bshape)
            placed = True
    rank = len(out_shape)
    nb = len(bshape)
    for j, n in enumerate(norm):
        if n[0] == "slice":
            start, _stop, step = n[1]
            maps[n[2]] = OutputMap.strided(start, step, slice_axis[j])
        elif n[0] == "int":
            maps[n[2]] = OutputMap.constant(n[1])
        elif n[0] == "array":
            arr = n[1]
            padded = (1,) * (nb - arr.ndim) + arr.shape
            full = [1] * rank
            full[b0 : b0 + nb] = padded
            maps[n[2]] = OutputMap.array(arr.reshape(full))
    return IndexTransform(tuple(out_shape), tuple(maps))  # type: ignore[arg-type]


def orthogonal_step(selection: Any, shape: tuple[int, ...]) -> IndexTransform:
    """Orthogonal (outer) indexing as a transform onto ``shape``."""
    kinds = classify_orthogonal(selection, shape)
    rank = sum(k != "int" for k, _ in kinds)
    maps: list[OutputMap] = []
    axis = 0
    for kind, v in kinds:
        if kind == "int":
            maps.append(OutputMap.constant(v))
        elif kind == "slice":
            maps.append(OutputMap.strided(v[0], v[2], axis))
            axis += 1
        else:
            maps.append(OutputMap.array(_grid(v, axis, rank)))
            axis += 1
    out_shape = []
    for kind, v in kinds:
        if kind == "slice":
            out_shape.append(len(range(*v)))
        elif kind == "array":
            out_shape.append(v.shape[0])
    return IndexTransform(tuple(out_shape), tuple(maps))


def vindex_step(selection: Any, shape: tuple[int, ...]) -> IndexTransform:
    """Coordinate (pointwise) indexing as a transform onto ``shape``."""
    coords, out_shape = normalize_coordinate(selection, shape)
    maps = []
    for c in coords:
        maps.append(OutputMap.array(c.reshape(out_shape)))
    return IndexTransform(tuple(out_shape), tuple(maps))
