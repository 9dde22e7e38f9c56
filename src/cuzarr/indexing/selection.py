"""Normalize selections and turn them into per-dimension projections.

Three indexing modes, as in zarr-python and numpy:

* ``basic``/numpy (``a[...]``): ints, slices with any step, Ellipsis, newaxis,
  integer arrays and boolean masks with numpy's rules for advanced indices;
* orthogonal (``a.oindex[...]``): each dimension indexed independently;
* coordinate (``a.vindex[...]``): integer arrays broadcast into points, or one
  boolean mask over the whole array.

Numpy-mode selections with advanced indices are answered in two steps: an
orthogonal read of the bounding index sets, then numpy's own indexing applied to
that compact block with remapped indices, which reproduces numpy's semantics
(result dimension placement, broadcasting, last-wins writes) exactly.
"""

from __future__ import annotations

import array
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.errors import (
    BoundsCheckError,
    IndexTypeError,
    SliceStepError,
    VindexInvalidSelectionError,
)
from cuzarr.indexing.projection import DimProjection, project_array, project_slice
from cuzarr.metadata.chunk_grid import DimGrid

__all__ = [
    "BasicPlan",
    "FancyPlan",
    "OrthogonalPlan",
    "block_slices",
    "classify_numpy",
    "classify_orthogonal",
    "has_fields",
    "normalize_coordinate",
    "normalize_numpy",
    "normalize_orthogonal",
    "pop_fields",
]


def has_fields(fields: Any) -> bool:
    """Whether ``fields`` asks for fields (``None``, ``""`` and ``[]`` do not, as in
    zarr-python)."""
    return fields is not None and not (isinstance(fields, (str, list, tuple)) and not fields)


def pop_fields(selection: Any) -> tuple[Any, Any]:
    """Field names written into a selection (``a["x"]``, ``a[0, "x"]``, ``a[:, "x",
    "y"]``), split from the rest, as zarr-python reads them: (fields or None,
    selection)."""
    if isinstance(selection, str):
        return selection, Ellipsis
    if not isinstance(selection, tuple) or not any(isinstance(s, str) for s in selection):
        return None, selection
    names = [s for s in selection if isinstance(s, str)]
    rest = tuple(s for s in selection if not isinstance(s, str))
    return (names[0] if len(names) == 1 else names), (rest if rest else Ellipsis)


def _as_int(x: Any) -> int | None:
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray):
        return int(x) if x.ndim == 0 and x.dtype.kind in "iu" else None
    if hasattr(type(x), "__index__") and not _is_sequence(x):
        # numpy takes any object with __index__ as an integer
        try:
            return operator.index(x)
        except TypeError:
            return None
    return None


def _is_sequence(x: Any) -> bool:
    """Sequences numpy turns into index arrays: lists, tuples (inside a
    selection), ranges, buffers such as ``array.array``, and other sequences
    that are not text or bytes."""
    if isinstance(x, (list, tuple, range, memoryview, array.array)):
        return True
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes, bytearray))


def _check_int(i: int, size: int, dim: int) -> int:
    if i < -size or i >= size:
        raise BoundsCheckError(f"index {i} is out of bounds for dimension {dim} with size {size}")
    return i + size if i < 0 else i


def _check_array(arr: np.ndarray, size: int, dim: int) -> np.ndarray:
    if arr.dtype.kind not in "iu":
        raise IndexError(
            f"dimension {dim}: index arrays must hold integers or booleans, got {arr.dtype}"
        )
    lo = hi = 0
    if arr.size:
        # Bounds are checked before the cast to intp, so huge unsigned values
        # cannot wrap around into valid negative indices.
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -size or hi >= size:
            bad = lo if lo < -size else hi
            raise BoundsCheckError(
                f"index {bad} is out of bounds for dimension {dim} with size {size}"
            )
    arr = arr.astype(np.intp, copy=False)
    if arr.size and lo < 0:
        arr = np.where(arr < 0, arr + size, arr)
    return arr


def _as_index_array(x: Any) -> np.ndarray | None:
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, np.bool_)):
        return np.asarray(x, dtype=bool)
    if _is_sequence(x):
        arr = np.asarray(x)
        # numpy: an empty sequence (``[]``, ``[[], []]``) indexes as intp.
        return arr.astype(np.intp) if arr.size == 0 and arr.dtype.kind == "f" else arr
    # CuPy and other array libraries: bring index arrays to the host.
    if hasattr(x, "__array__") or hasattr(x, "__cuda_array_interface__"):
        get = getattr(x, "get", None)
        return np.asarray(get() if callable(get) else x)
    return None


def _slice_indices(s: slice, size: int, dim: int) -> tuple[int, int, int]:
    try:
        for v in (s.start, s.stop, s.step):
            if v is not None:
                operator.index(v)
        start, stop, step = s.indices(size)
    except TypeError as e:
        raise IndexTypeError(f"dimension {dim}: slice bounds must be integers, got {s}") from e
    except ValueError as e:
        raise SliceStepError(f"dimension {dim}: {e}") from e
    if step != 1:
        n = len(range(start, stop, step))
        if n <= 1:
            # one element or none: the step adds nothing, and a huge one would
            # overflow the int64 index arithmetic of views (numpy takes it)
            return (start, start + 1, 1) if n else (0, 0, 1)
    return start, stop, step


def _expand(selection: Any, ndim: int, allow_newaxis: bool = True) -> list[Any]:
    """Expand Ellipsis; return one entry per consumed dim (plus ``None`` entries)."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    # Sequences index as arrays: a nested list of bools is a multi-dimensional mask.
    selection = tuple(_as_index_array(s) if _is_sequence(s) else s for s in selection)
    consumed = 0
    n_ellipsis = 0
    for s in selection:
        if s is Ellipsis:
            n_ellipsis += 1
        elif s is None:
            if not allow_newaxis:
                raise IndexError("np.newaxis is not allowed in this indexing mode")
        elif isinstance(s, (bool, np.bool_)):
            pass  # a scalar boolean adds an axis and consumes none, as in numpy
        else:
            arr = s if isinstance(s, np.ndarray) else None
            if arr is not None and arr.dtype == bool:
                consumed += max(arr.ndim, 1) if arr.ndim else 0
            else:
                consumed += 1
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed"
        )
    out: list[Any] = []
    for s in selection:
        if s is Ellipsis:
            # An Ellipsis standing for no dimensions still separates advanced
            # indices in numpy's placement rule: keep it as a marker.
            out.extend([slice(None)] * (ndim - consumed) or [Ellipsis])
        else:
            out.append(s)
    if n_ellipsis == 0:
        out.extend([slice(None)] * (ndim - consumed))
    return out


@dataclass
class BasicPlan:
    """Ints and slices only: an orthogonal read plus a reshape.

    ``scalar``: numpy answers with a scalar (all integers and no Ellipsis, as
    ``x[1, 2]`` or ``x[()]``); with an Ellipsis (``x[1, 2, ...]``) a 0-d array.
    """

    projections: list[DimProjection]
    buffer_shape: tuple[int, ...]
    result_shape: tuple[int, ...]
    scalar: bool = False


@dataclass
class OrthogonalPlan:
    projections: list[DimProjection]
    buffer_shape: tuple[int, ...]
    result_shape: tuple[int, ...]


@dataclass
class FancyPlan:
    """Bounding orthogonal block, then numpy indexing with remapped indices."""

    projections: list[DimProjection]
    buffer_shape: tuple[int, ...]
    post_index: tuple[Any, ...]


def classify_numpy(selection: Any, shape: tuple[int, ...]) -> tuple[list[tuple[Any, ...]], bool]:
    """One entry per item of a numpy-style selection, checked against ``shape``.

    Entries: ``("new", None)``, ``("ellipsis", None)`` (a zero-width Ellipsis,
    which still separates advanced indices), ``("bool0", value)``,
    ``("int", index, dim)``, ``("slice", (start, stop, step), dim)`` and
    ``("array", positions, dim)``; boolean masks become their ``nonzero()``
    arrays. The flag tells whether any advanced index is present.
    """
    items = _expand(selection, len(shape))
    norm: list[Any] = []
    dim = 0
    advanced = False
    for s in items:
        if s is None:
            norm.append(("new", None))
            continue
        if s is Ellipsis:
            norm.append(("ellipsis", None))
            continue
        i = _as_int(s)
        if i is not None:
            norm.append(("int", _check_int(i, shape[dim], dim), dim))
            dim += 1
            continue
        if isinstance(s, slice):
            norm.append(("slice", _slice_indices(s, shape[dim], dim), dim))
            dim += 1
            continue
        arr = _as_index_array(s)
        if arr is None:
            raise IndexError(
                f"dimension {dim}: unsupported index {s!r}; only integers, slices, Ellipsis, "
                "np.newaxis, integer arrays and boolean arrays are valid indices"
            )
        advanced = True
        if arr.dtype == bool:
            k = max(arr.ndim, 1)
            if arr.ndim == 0:
                # numpy: a 0-d bool adds a length-1 (True) or 0 (False) axis.
                norm.append(("bool0", bool(arr)))
                continue
            if not _mask_fits(arr.shape, shape[dim : dim + k]):
                raise IndexError(
                    f"boolean index of shape {arr.shape} does not match dimensions "
                    f"{dim}..{dim + k - 1} of shape {shape[dim : dim + k]}"
                )
            for j, nz in enumerate(np.nonzero(arr)):
                norm.append(("array", nz.astype(np.intp), dim + j))
            dim += k
            continue
        if arr.dtype.kind not in "iu":
            _check_array(arr, shape[dim], dim)  # raises the dtype error
        norm.append(("unchecked", arr, dim))
        dim += 1
    if any(n[0] == "bool0" for n in norm):
        advanced = True
    if advanced:
        _check_index_arrays(norm, shape)
    return norm, advanced


def _mask_fits(mask_shape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a boolean mask indexes these dimensions: the same extents, where
    numpy also lets an extent of 0 stand for any (nothing is selected)."""
    return len(mask_shape) == len(shape) and all(
        m == n or m == 0 for m, n in zip(mask_shape, shape, strict=True)
    )


def _check_index_arrays(norm: list[Any], shape: tuple[int, ...]) -> None:
    """Bounds-check integer index arrays in place, as numpy does: only when the
    advanced indices broadcast to a non-empty result (``x[[99], []]`` is empty)."""
    shapes = []
    for n in norm:
        if n[0] in ("array", "unchecked"):
            shapes.append(n[1].shape)
        elif n[0] == "bool0":
            shapes.append((1,) if n[1] else (0,))
        elif n[0] == "int":
            shapes.append(())
    try:
        bshape = np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise IndexError(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes "
            f"{' '.join(str(tuple(x)) for x in shapes)}"
        ) from e
    empty = math.prod(bshape) == 0
    for j, n in enumerate(norm):
        if n[0] == "unchecked":
            if empty:
                # Nothing is selected: the positions need not be in bounds.
                norm[j] = ("array", np.zeros(bshape, dtype=np.intp), n[2])
            else:
                norm[j] = ("array", _check_array(n[1], shape[n[2]], n[2]), n[2])


def _plain_basic(selection: Any, shape: tuple[int, ...], dims: list[DimGrid]) -> BasicPlan | None:
    """``normalize_numpy`` of the commonest selections, or None: Python ints and
    step-1 slices of Python ints (or None), at most one per dimension (``a[i, j]``,
    ``a[3]``, ``a[0:10, 5:]``). The same plan as the general path, without its
    generic classification (a few microseconds of a ~35 us single-element read)."""
    sel = selection if type(selection) is tuple else (selection,)
    ndim = len(shape)
    if len(sel) > ndim:
        return None
    projections: list[DimProjection] = []
    buffer_shape: list[int] = []
    result_shape: list[int] = []
    for d, s in enumerate(sel):
        size = shape[d]
        if type(s) is int:
            if s < -size or s >= size:
                return None  # the general path raises the error
            i = s + size if s < 0 else s
            p = project_slice(i, i + 1, 1, dims[d])
        elif (
            type(s) is slice
            and s.step is None
            and (s.start is None or type(s.start) is int)
            and (s.stop is None or type(s.stop) is int)
        ):
            start, stop, _ = s.indices(size)
            p = project_slice(start, stop, 1, dims[d])
            result_shape.append(p.out_len)
        else:
            return None
        projections.append(p)
        buffer_shape.append(p.out_len)
    for d in range(len(sel), ndim):
        p = project_slice(0, shape[d], 1, dims[d])
        projections.append(p)
        buffer_shape.append(p.out_len)
        result_shape.append(p.out_len)
    return BasicPlan(projections, tuple(buffer_shape), tuple(result_shape), not result_shape)


def normalize_numpy(
    selection: Any, shape: tuple[int, ...], dims: list[DimGrid]
) -> BasicPlan | FancyPlan:
    """Plan a numpy-semantics selection (``a[...]``)."""
    plan = _plain_basic(selection, shape, dims)
    if plan is not None:
        return plan
    norm, advanced = classify_numpy(selection, shape)
    projections: list[DimProjection] = []
    if not advanced:
        buffer_shape = []
        result_shape = []
        for n in norm:
            if n[0] == "new":
                result_shape.append(1)
                continue
            if n[0] == "ellipsis":
                continue
            d = n[2]
            if n[0] == "int":
                p = project_slice(n[1], n[1] + 1, 1, dims[d])
            else:
                p = project_slice(*n[1], dims[d])
                result_shape.append(p.out_len)
            projections.append(p)
            buffer_shape.append(p.out_len)
        scalar = not result_shape and all(n[0] != "ellipsis" for n in norm)
        return BasicPlan(projections, tuple(buffer_shape), tuple(result_shape), scalar)
    # Advanced: read the bounding block, index it with numpy.
    post: list[Any] = []
    for n in norm:
        kind = n[0]
        if kind == "new":
            post.append(None)
        elif kind == "ellipsis":
            post.append(Ellipsis)
        elif kind == "bool0":
            post.append(np.bool_(n[1]))
        elif kind == "int":
            projections.append(project_slice(n[1], n[1] + 1, 1, dims[n[2]]))
            post.append(0)
        elif kind == "slice":
            projections.append(project_slice(*n[1], dims[n[2]]))
            post.append(slice(None))
        else:
            arr = n[1]
            uniq, inverse = np.unique(arr.reshape(-1), return_inverse=True)
            projections.append(project_array(uniq, dims[n[2]]))
            post.append(inverse.reshape(arr.shape))
    buffer_shape = tuple(p.out_len for p in projections)
    return FancyPlan(projections, buffer_shape, tuple(post))


def classify_orthogonal(selection: Any, shape: tuple[int, ...]) -> list[tuple[str, Any]]:
    """One entry per dimension of an orthogonal selection, checked against ``shape``:
    ``("int", index)``, ``("slice", (start, stop, step))`` or ``("array", positions)``
    (1-d masks become their ``flatnonzero`` positions)."""
    items = [s for s in _expand(selection, len(shape), allow_newaxis=False) if s is not Ellipsis]
    kinds: list[tuple[str, Any]] = []
    if any(
        isinstance(s, (bool, np.bool_))
        or (isinstance(s, np.ndarray) and s.ndim == 0 and s.dtype == bool)
        for s in items
    ):
        # scalar booleans consume no dimension in _expand (numpy's rule for basic
        # indexing); orthogonal indexing has no place for them
        raise IndexError(
            "a scalar boolean is not an orthogonal index: use a 1-d boolean mask for a dimension"
        )
    for d, s in enumerate(items):
        i = _as_int(s)
        if i is not None:
            kinds.append(("int", _check_int(i, shape[d], d)))
            continue
        if isinstance(s, slice):
            kinds.append(("slice", _slice_indices(s, shape[d], d)))
            continue
        arr = _as_index_array(s)
        if arr is None:
            raise IndexError(f"dimension {d}: unsupported orthogonal index {s!r}")
        if arr.dtype == bool:
            if arr.ndim != 1 or arr.shape[0] != shape[d]:
                raise IndexError(
                    f"dimension {d}: boolean index of shape {arr.shape} does not match "
                    f"size {shape[d]}"
                )
            arr = np.flatnonzero(arr)
        elif arr.ndim != 1:
            raise IndexError(f"dimension {d}: orthogonal index arrays must be 1-d")
        kinds.append(("array", _check_array(arr, shape[d], d)))
    return kinds


def normalize_orthogonal(
    selection: Any, shape: tuple[int, ...], dims: list[DimGrid]
) -> OrthogonalPlan:
    """Plan an orthogonal selection (``a.oindex[...]``)."""
    projections: list[DimProjection] = []
    result_shape: list[int] = []
    for d, (kind, v) in enumerate(classify_orthogonal(selection, shape)):
        if kind == "int":
            projections.append(project_slice(v, v + 1, 1, dims[d]))
            continue
        p = project_slice(*v, dims[d]) if kind == "slice" else project_array(v, dims[d])
        projections.append(p)
        result_shape.append(p.out_len)
    return OrthogonalPlan(projections, tuple(p.out_len for p in projections), tuple(result_shape))


def normalize_coordinate(
    selection: Any, shape: tuple[int, ...]
) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """Normalize a coordinate selection (``a.vindex[...]``) to flat per-dim arrays.

    Returns the flat coordinate arrays and the result shape (their broadcast shape).
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) == 1:
        arr = _as_index_array(selection[0])
        if arr is not None and arr.dtype == bool:
            if not _mask_fits(arr.shape, shape):
                raise IndexError(
                    f"boolean mask of shape {arr.shape} does not match array shape {shape}"
                )
            if arr.ndim == 0:
                # A 0-d array's mask is one bool: numpy selects its element or nothing.
                return [], (int(bool(arr)),)
            coords = list(np.nonzero(arr))
            return [c.astype(np.intp) for c in coords], (coords[0].shape[0],)
    if len(selection) != len(shape):
        raise IndexError(
            f"vindex needs one index per dimension ({len(shape)}), got {len(selection)}"
        )
    arrays = []
    for d, s in enumerate(selection):
        i = _as_int(s)
        if i is not None:
            arr = np.asarray(_check_int(i, shape[d], d), dtype=np.intp)
        else:
            arr = _as_index_array(s)
            if arr is None:
                if isinstance(s, slice):
                    # as zarr-python: a slice has no meaning among points (numpy's
                    # fancy indexing would make it an outer dimension)
                    raise VindexInvalidSelectionError(
                        f"dimension {d}: vindex takes integer arrays or one boolean mask, "
                        f"not slices ({s}); use oindex or a[...] for those"
                    )
                raise IndexError(f"dimension {d}: unsupported coordinate index {s!r}")
            if arr.dtype == bool:
                raise IndexError(
                    "vindex takes one boolean mask over the whole array, or integer arrays"
                )
        arr = np.asarray(arr)
        if arr.dtype.kind not in "iu":
            _check_array(arr, shape[d], d)  # raises the dtype error
        arrays.append(arr)
    try:
        bshape = np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError as e:
        raise IndexError(f"coordinate arrays do not broadcast together: {e}") from e
    if math.prod(bshape) == 0:
        # As numpy: nothing selected, so the positions need not be in bounds.
        return [np.zeros(0, dtype=np.intp) for _ in arrays], bshape
    b = np.broadcast_arrays(*(_check_array(x, shape[d], d) for d, x in enumerate(arrays)))
    out_shape = b[0].shape if b else ()
    return [x.reshape(-1) for x in b], out_shape


def block_slices(selection: Any, dims: Sequence[Any]) -> tuple[slice, ...]:
    """A block selection (``Array.blocks``: ints and step-1 slices of chunk-grid
    indices, per dimension of ``dims``) as the slices of the elements it covers."""
    ndim = len(dims)
    if not isinstance(selection, tuple):
        selection = (selection,)
    ellipses = [k for k, s in enumerate(selection) if s is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        i = ellipses[0]
        selection = (
            selection[:i] + (slice(None),) * (ndim - len(selection) + 1) + selection[i + 1 :]
        )
    if len(selection) > ndim:
        raise IndexError(f"too many block indices for {ndim}-dimensional array")
    selection = selection + (slice(None),) * (ndim - len(selection))
    out = []
    for d, (s, dim) in enumerate(zip(selection, dims, strict=True)):
        n = dim.nchunks
        i = _as_int(s)
        if i is not None:
            if i < -n or i >= n:
                raise IndexError(
                    f"block index {i} is out of bounds for dimension {d} with {n} blocks"
                )
            i = i + n if i < 0 else i
            out.append(slice(dim.offset(i), dim.offset(i) + dim.data_len(i)))
        elif isinstance(s, slice):
            start, stop, _ = _slice_indices(s, n, d)
            if s.step not in (None, 1):  # checked as given: one-block slices drop steps
                raise IndexError(f"dimension {d}: block slices must have step 1")
            if stop <= start:
                out.append(slice(0, 0))
            else:
                out.append(slice(dim.offset(start), dim.offset(stop - 1) + dim.data_len(stop - 1)))
        else:
            raise IndexError(f"dimension {d}: block selections take ints and slices, got {s!r}")
    return tuple(out)
