"""A lazy view's selection (an ``IndexTransform``) planned into chunk items:
orthogonal maps as per-dimension projections, the rest as the bounding block
of unique indices plus a gather, or points grouped by chunk."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzarr.buffer import array_module, device_index
from cuzarr.indexing.items import ChunkItem, chunk_items, coordinate_items
from cuzarr.indexing.projection import project_array, project_slice
from cuzarr.indexing.transform import ARRAY, CONSTANT, STRIDED, IndexTransform, _grid

__all__ = ["ViewPlan", "plan_transform"]


@dataclass
class ViewPlan:
    items: list[ChunkItem]
    buffer_shape: tuple[int, ...]
    finish: Callable[[np.ndarray], np.ndarray]
    # finish only reshapes: a caller's C-ordered ``out`` can be the buffer itself
    direct: bool = False


def _project_map(m: Any, n_in: tuple[int, ...], dim: Any, indices: np.ndarray | None = None) -> Any:
    if m.kind == CONSTANT:
        return project_slice(m.offset, m.offset + 1, 1, dim)
    if m.kind == STRIDED:
        n = n_in[m.input_dim]
        return project_slice(m.offset, m.offset + m.stride * n, m.stride, dim)
    return project_array(m.index_array.reshape(-1) if indices is None else indices, dim)


def _orthogonal_finish(t: IndexTransform) -> Callable[[np.ndarray], np.ndarray]:
    """Buffer (one axis per output dim, constants of length 1) -> the view's layout."""
    keep = [i for i, m in enumerate(t.maps) if m.kind != CONSTANT]
    ref = [t.maps[i].dependent_dims()[0] for i in keep]
    perm = tuple(int(p) for p in np.argsort(ref, kind="stable"))
    shape = t.shape

    def finish(buf: np.ndarray) -> np.ndarray:
        sub = buf.reshape(tuple(buf.shape[i] for i in keep))  # drop length-1 constant axes
        if perm != tuple(range(len(perm))):
            sub = sub.transpose(perm)
        return sub.reshape(shape)

    return finish


def plan_transform(t: IndexTransform, array_shape: tuple[int, ...], dims: Any) -> ViewPlan:
    """Chunk items of the elements ``t`` selects on a grid of ``dims`` (an
    array's read grid), the buffer they fill, and buffer -> result."""
    t.check_bounds(array_shape)
    shape = t.shape
    npoints = math.prod(shape)
    if npoints == 0:
        return ViewPlan([], shape, lambda b: b, direct=True)
    if t.is_orthogonal() and all(
        shape[k] == 1
        for k in set(range(t.input_rank)) - {d for m in t.maps for d in m.dependent_dims()}
    ):
        projections = [_project_map(m, shape, dim) for m, dim in zip(t.maps, dims, strict=True)]
        ref = [m.dependent_dims()[0] for m in t.maps if m.kind != CONSTANT]
        return ViewPlan(
            chunk_items(projections),
            tuple(p.out_len for p in projections),
            _orthogonal_finish(t),
            direct=ref == sorted(ref),
        )
    # General: bounding block of unique indices + gather, or points grouped by chunk.
    q = t.input_rank
    uniques: list[tuple[np.ndarray, np.ndarray] | None] = []
    block = 1
    for m in t.maps:
        if m.kind == ARRAY:
            u, inv = np.unique(m.index_array.reshape(-1), return_inverse=True)
            uniques.append((u, inv.reshape(m.index_array.shape)))
            block *= u.shape[0]
        else:
            uniques.append(None)
            block *= shape[m.input_dim] if m.kind == STRIDED else 1
    if npoints <= block:
        items = coordinate_items(dims, t.coordinates())
        return ViewPlan(items, (npoints,), lambda b: b.reshape(shape), direct=True)
    projections = []
    post: list[np.ndarray] = []
    for m, dim, uq in zip(t.maps, dims, uniques, strict=True):
        if m.kind == ARRAY:
            assert uq is not None
            projections.append(_project_map(m, shape, dim, uq[0]))
            post.append(uq[1])
        elif m.kind == STRIDED:
            projections.append(_project_map(m, shape, dim))
            post.append(_grid(np.arange(shape[m.input_dim], dtype=np.intp), m.input_dim, q))
        else:
            projections.append(_project_map(m, shape, dim))
            post.append(np.zeros((1,) * q, dtype=np.intp))
    index = tuple(post)

    def finish(buf: Any) -> Any:
        xp = array_module(buf)
        res = buf[device_index(buf, index)] if index else buf
        if res.shape != shape:
            res = xp.ascontiguousarray(xp.broadcast_to(res, shape))
        return res

    return ViewPlan(chunk_items(projections), tuple(p.out_len for p in projections), finish)
