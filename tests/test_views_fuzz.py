"""Differential fuzzing of lazy views (``a.lazy[...]``) against numpy.

Each case builds a random array (0-d to 4-d, zero-length dimensions, regular
chunks that need not divide the shape, several dtypes, v2 (C and F order) and
v3, some sharded, some chunks left unwritten) in a real store that counts its
``get`` calls, then applies random chains of 1-5 view steps (``[...]`` with
numpy's rules, ``.oindex[...]``, ``.vindex[...]``) to a view and the same
steps to a numpy copy, and compares:

* shape / ndim / size / nbytes / len, and the data read by ``read()``,
  ``read(out=)``, ``np.asarray`` and ``read_async`` (and the eager ``a[...]``
  for the first step);
* the store reads of one materialization: each chunk key (or each byte range
  of a shard) fetched at most once, exactly the keys ``chunks_touched`` names;
* ``read_many`` over several views: each chunk fetched once across all;
* writes through views (broadcast values, repeated points: last one wins),
  checked by reading the whole array back against a numpy model;
* errors: a selection numpy refuses raises ``IndexError`` (out-of-range
  indices name the dimension), as for plain arrays.

Layouts: v3, v2 (C and F order), sharded (partial shard reads), sharding
inside other codecs (whole shards), rectilinear grids; dtypes: ints, floats,
bool, complex, fixed and variable-length strings, datetime64. Reads also run
through the device path on the host (``gpu.emulate``), views are pickled, and
earlier views are re-read after writes (a view is a selection, not a snapshot).

The test runs a bounded, seeded set of cases. For a longer exploratory run::

    python tests/test_views_fuzz.py 20000 [first_seed]
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import sys
import traceback

import numpy as np
import pytest

import cuzarr
from _counting_store import CountingLocalStore, CountingMemoryStore

META = (".zarray", ".zattrs", ".zgroup", "zarr.json")


def chunk_gets(store):
    return [(k, r) for k, r in store.gets if not k.endswith(META)]


# -- random arrays ---------------------------------------------------------------------
DTYPES = ["i1", "u1", "i2", "u2", "i4", "i8", "f4", "f8", "bool", "c8", "U3", "T", "M8[s]"]


def rand_values(rng, dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -30000), min(info.max, 30000) + 1, size=shape).astype(dt)
    if dt.kind in "UT":
        return np.asarray(rng.integers(0, 1000, size=shape).astype(str), dtype=dt)
    if dt.kind == "M":
        return rng.integers(-(10**9), 10**9, size=shape).astype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).round(3).astype(dt)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


def rect_edges(rng, n):
    edges = []
    while sum(edges) < n:
        edges.append(int(rng.integers(1, 4)))
    return edges


def make_array(rng, tmp_path=None):
    ndim = int(rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 4]))
    allow_zero = rng.random() < 0.15
    big = rng.random() < 0.15  # more chunks per dimension
    hi = (30 if ndim == 1 else 16 if ndim == 2 else 7) if big else 8 if ndim <= 2 else 5
    shape = tuple(int(rng.integers(0 if allow_zero else 1, hi)) for _ in range(ndim))
    chunks = tuple(int(rng.integers(1, (max(n, 1) + 2) if not big else 5)) for n in shape)
    layout = str(rng.choice(["v3", "v3", "v2C", "v2F", "sharded", "sharded", "rect", "shardcrc"]))
    if layout in ("sharded", "shardcrc", "rect") and (ndim == 0 or 0 in shape):
        layout = "v3"
    dtype = str(rng.choice(DTYPES))
    kw: dict = {}
    if layout == "shardcrc" and np.dtype(dtype).kind == "T":
        layout = "sharded"
    if layout.startswith("v2"):
        kw.update(zarr_format=2, order=layout[-1])
    elif layout == "sharded":
        kw["shards"] = tuple(c * int(rng.integers(1, 4)) for c in chunks)
    elif layout == "shardcrc":  # sharding inside other codecs: shards are read whole
        from cuzarr.codecs.sharding import ShardingCodec

        kw["serializer"] = ShardingCodec(chunks)
        chunks = tuple(c * int(rng.integers(1, 4)) for c in chunks)
        kw["compressors"] = [{"name": "crc32c"}]
    elif layout == "rect":  # a rectilinear grid (edges may overflow the shape)
        chunks = [rect_edges(rng, n) for n in shape]
        if rng.random() < 0.5:
            kw.update(zarr_format=2)
    if rng.random() < 0.5 and layout != "shardcrc":
        kw["compressors"] = None
    fill = rand_values(rng, dtype, ()).item()
    if tmp_path is not None and rng.random() < 0.2:
        store = CountingLocalStore(tmp_path / f"a{rng.integers(1 << 30)}")
    else:
        store = CountingMemoryStore()
    a = cuzarr.create_array(store, shape=shape, dtype=dtype, chunks=chunks, fill_value=fill, **kw)
    data = np.full(shape, fill, dtype=dtype)
    if data.size:
        if rng.random() < 0.3:  # leave some chunks unwritten: they read as the fill value
            region = tuple(slice(0, int(rng.integers(0, n + 1))) for n in shape)
        else:
            region = (Ellipsis,)
        vals = rand_values(rng, dtype, np.shape(data[region]))
        data[region] = vals
        a[region] = vals
    return a, data, store, layout


# -- random selections (relative to the current view's shape) -----------------------
def r_slice(rng, n):
    step = [None, None, 1, 2, 3, -1, -1, -2, -3, 7][int(rng.integers(10))]
    r = rng.random()
    if r < 0.15:
        return slice(None, None, step)
    if r < 0.25:  # anything, out-of-range bounds (clipped) and empty results included

        def bound():
            return None if rng.random() < 0.3 else int(rng.integers(-n - 3, n + 4))

        return slice(bound(), bound(), step)
    lo, hi = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
    hi = max(hi, min(lo + 1, n))

    def enc(i, end):  # sometimes counted from the end, or left open
        if i == end and rng.random() < 0.5:
            return None
        return i - n if rng.random() < 0.3 and i < n else i

    if step is None or step > 0:
        return slice(enc(lo, 0), enc(hi, n), step)
    start = hi - 1
    stop = lo - 1
    return slice(enc(start, n - 1), None if stop < 0 else enc(stop, -1), step)


def r_int(rng, n, bad=False):
    if bad:
        return int(rng.choice([n, n + 1 + int(rng.integers(3)), -n - 1 - int(rng.integers(3))]))
    i = int(rng.integers(-n, n))
    return [i, np.int64(i), np.intp(i), np.uint32(i) if i >= 0 else np.int16(i)][
        int(rng.integers(4))
    ]


def r_index_array(rng, n, shape, bad=False):
    if n == 0 or 0 in shape:
        return np.zeros(shape if 0 in shape else (0,), dtype=np.intp)
    arr = rng.integers(-n, n, size=shape)
    if rng.random() < 0.4 and arr.size > 1:  # repeats
        arr.reshape(-1)[-1] = arr.reshape(-1)[0]
    if bad:
        arr.reshape(-1)[int(rng.integers(arr.size))] = r_int(rng, n, bad=True)
    if rng.random() < 0.2:
        arr = arr.astype(str(rng.choice(["i4", "i8", "i2"])))
    if rng.random() < 0.15 and arr.ndim == 1 and (arr >= 0).all():
        arr = arr.astype(np.uint16)
    return arr


def maybe_list(rng, arr):
    return arr.tolist() if rng.random() < 0.2 and arr.size else arr


def numpy_step(rng, shp, bad_dim=None):
    """A ``view[...]`` selection: ints, slices, arrays, masks, Ellipsis, newaxis."""
    ndim = len(shp)
    kinds = []
    d = 0
    n_masks = 0
    separated = ndim >= 3 and bad_dim is None and rng.random() < 0.2
    if separated:  # advanced indices apart: numpy moves their dimensions to the front
        i = int(rng.integers(0, ndim - 2))
        j = int(rng.integers(i + 2, ndim))
    while separated and d < ndim:
        k = "slice" if d not in (i, j) else "array" if d == j or rng.random() < 0.3 else "int"
        kinds.append((k if (k != "int" or shp[d]) else "array", d, 1))
        d += 1
    while d < ndim:
        opts = ["slice", "slice", "int", "array", "mask"]
        k = str(rng.choice(opts))
        if k == "mask" and n_masks and rng.random() < 0.8:
            k = "slice"
        if k == "mask":
            n_masks += 1
            span = 1 if rng.random() < 0.6 else int(rng.integers(1, ndim - d + 1))
            kinds.append(("mask", d, span))
            d += span
        else:
            kinds.append((k if (k != "int" or shp[d]) else "slice", d, 1))
            d += 1
    if bad_dim is not None:
        if not any(dd == bad_dim and span == 1 for _kk, dd, span in kinds):
            return None  # a mask covers it
        kinds = [
            (kk if dd != bad_dim else "badint" if rng.random() < 0.5 else "badarray", dd, s)
            for kk, dd, s in kinds
        ]
    masks = {}
    for kk, dd, span in kinds:
        if kk == "mask":
            p = float(rng.choice([0.0, 0.3, 0.5, 0.7, 0.7, 1.0]))
            masks[dd] = rng.random(shp[dd : dd + span]) < p
            if not masks[dd].any() and masks[dd].size and rng.random() < 0.8:
                masks[dd].reshape(-1)[int(rng.integers(masks[dd].size))] = True
    nnz = [int(m.sum()) for m in masks.values()]
    if nnz:
        base = (nnz[0],)
    elif separated and rng.random() < 0.7:
        base = (int(rng.integers(2, 5)),)
    else:
        k = 0 if 0 in shp or rng.random() < 0.1 else int(rng.integers(1, 4))
        base = [(k,), (k,), (2, k), (k, 1), (1, k), ()][int(rng.integers(6))]
    sel: list = []
    for kk, dd, _span in kinds:
        n = shp[dd]
        if kk == "slice":
            sel.append(r_slice(rng, n))
        elif kk == "int":
            sel.append(r_int(rng, n))
        elif kk == "badint":
            sel.append(r_int(rng, n, bad=True))
        elif kk == "mask":
            m = masks[dd]
            sel.append(m.tolist() if rng.random() < 0.1 and m.ndim == 1 and m.size else m)
        else:
            shape = base
            if shape and rng.random() < 0.3:  # a broadcast-compatible variant
                shape = tuple(1 if rng.random() < 0.5 else s for s in shape)[int(rng.integers(2)) :]
            if rng.random() < 0.03:
                shape = (len(base) and base[0] + 1,) + tuple(base[1:])  # may not broadcast
            arr = r_index_array(rng, n, shape, bad=kk == "badarray")
            sel.append(maybe_list(rng, arr) if arr.ndim else arr)
    r = rng.random()
    if r < 0.15 and sel:  # leave trailing dimensions implicit
        cut = int(rng.integers(0, len(sel) + 1))
        if bad_dim is None or cut > [kk[1] for kk in kinds].index(bad_dim):
            sel = sel[:cut]
    elif r < 0.4:  # an Ellipsis standing for a run of full slices (maybe none)
        i = int(rng.integers(0, len(sel) + 1))
        j = i + int(rng.integers(0, len(sel) - i + 1))
        run = [s for s in sel[i:j] if not (isinstance(s, slice) and s == slice(None))]
        if (not run or rng.random() < 0.3) and (
            bad_dim is None or all(kk[1] != bad_dim for kk in kinds[i:j])
        ):
            sel = sel[:i] + [Ellipsis] + sel[j:]
    for _ in range(int(rng.choice([0, 0, 0, 1, 1, 2]))):
        sel.insert(int(rng.integers(0, len(sel) + 1)), None)
    if rng.random() < 0.04:
        sel.insert(int(rng.integers(0, len(sel) + 1)), bool(rng.random() < 0.5))
    if len(sel) == 1 and rng.random() < 0.5:
        return sel[0]
    return tuple(sel)


def oindex_step(rng, shp, bad_dim=None):
    sel: list = []
    for d, n in enumerate(shp):
        kinds = ["slice", "slice", "int", "array", "mask"] if n else ["slice", "array", "mask"]
        k = str(rng.choice(kinds))
        if d == bad_dim:
            k = "badint" if rng.random() < 0.5 else "badarray"
        if k == "slice":
            sel.append(r_slice(rng, n))
        elif k == "int":
            sel.append(r_int(rng, n))
        elif k == "badint":
            sel.append(r_int(rng, n, bad=True))
        elif k == "mask":
            m = rng.random(n) < 0.5
            if n and not m.any() and rng.random() < 0.8:
                m[int(rng.integers(n))] = True
            sel.append(m)
        else:
            length = 0 if rng.random() < 0.1 else int(rng.integers(1, 5))
            arr = r_index_array(rng, n, (length,), bad=k == "badarray")
            sel.append(maybe_list(rng, arr))
    if rng.random() < 0.3 and sel:
        i = int(rng.integers(0, len(sel) + 1))
        j = i + int(rng.integers(0, len(sel) - i + 1))
        if bad_dim is None or not (i <= bad_dim < j):
            sel = sel[:i] + [Ellipsis] + sel[j:]
    elif rng.random() < 0.2 and bad_dim is None:
        sel = sel[: int(rng.integers(0, len(sel) + 1))]
    return tuple(sel) if len(sel) != 1 or rng.random() < 0.5 else sel[0]


def vindex_step(rng, shp, bad_dim=None):
    if bad_dim is None and (rng.random() < 0.2 or not shp):
        m = np.asarray(rng.random(shp) < float(rng.choice([0.0, 0.5, 0.5, 1.0])))
        if m.size and not m.any() and rng.random() < 0.8:
            m.reshape(-1)[int(rng.integers(m.size))] = True
        return m
    k = 0 if 0 in shp or rng.random() < 0.05 else int(rng.integers(1, 5))
    base = [(k,), (k,), (2, k), (k, 1), (1, k)][int(rng.integers(5))]
    sel: list = []
    for d, n in enumerate(shp):
        if d == bad_dim:
            if rng.random() < 0.5 or math_prod(base) == 0:
                sel.append(r_int(rng, n, bad=True))
            else:
                sel.append(r_index_array(rng, n, base, bad=True))
        elif n and rng.random() < 0.2:
            sel.append(r_int(rng, n))
        else:
            shape = base
            if rng.random() < 0.3:
                shape = tuple(1 if rng.random() < 0.5 else s for s in shape)[int(rng.integers(2)) :]
            sel.append(
                maybe_list(rng, r_index_array(rng, n, shape))
                if shape
                else r_index_array(rng, n, (1,))
            )
    return tuple(sel)


def math_prod(shape):
    return int(np.prod(shape, dtype=np.int64))


STEPS = {"index": numpy_step, "oindex": oindex_step, "vindex": vindex_step}


# -- numpy references ------------------------------------------------------------------
def np_oindex(x, sel):
    sel = sel if isinstance(sel, tuple) else (sel,)
    if any(s is Ellipsis for s in sel):
        i = next(j for j, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * (x.ndim - len(sel) + 1) + sel[i + 1 :]
    if len(sel) > x.ndim:
        raise IndexError("too many indices")
    sel = sel + (slice(None),) * (x.ndim - len(sel))
    for d in reversed(range(x.ndim)):
        s = sel[d]
        if isinstance(s, slice):
            x = x[(slice(None),) * d + (s,)]
        elif isinstance(s, (int, np.integer)):
            x = np.take(x, s, axis=d)
        else:
            s = np.asarray(s)
            if s.dtype == bool:
                if s.shape != (x.shape[d],):
                    raise IndexError("mask")
                s = np.flatnonzero(s)
            if s.ndim != 1:
                raise IndexError("not 1-d")
            n = x.shape[d]
            if s.size and (s.min() < -n or s.max() >= n):
                raise IndexError("out of range")
            x = np.take(x, s.astype(np.intp), axis=d)
    return x


def apply_np(x, mode, sel):
    if mode == "index":
        return np.asarray(x[sel], dtype=x.dtype)
    if mode == "oindex":
        return np.asarray(np_oindex(x, sel), dtype=x.dtype)
    if isinstance(sel, np.ndarray) and sel.dtype == bool:
        if sel.shape != x.shape:
            raise IndexError("mask shape")
        return np.asarray(x[sel], dtype=x.dtype)
    if len(sel) != x.ndim:
        raise IndexError("vindex needs one index per dimension")
    return np.asarray(x[tuple(sel)], dtype=x.dtype)


def apply_view(v, mode, sel):
    return v[sel] if mode == "index" else getattr(v, mode)[sel]


def random_chain(rng, data, max_steps=5, allow_errors=True):
    """Steps applied to ``data``: ``[(mode, sel), ...]``, the numpy result, and an
    optional failing step ``(mode, sel, bad_dim)`` that numpy refuses."""
    steps = []
    ref = data
    failing = None
    for _ in range(int(rng.integers(1, max_steps + 1))):
        mode = str(rng.choice(["index", "index", "oindex", "vindex"]))
        bad_dim = None
        if allow_errors and ref.ndim and rng.random() < 0.06 and 0 not in ref.shape:
            bad_dim = int(rng.integers(ref.ndim))
        sel = STEPS[mode](rng, ref.shape, bad_dim)
        if sel is None:
            continue
        try:
            y = apply_np(ref, mode, sel)
        except IndexError:
            failing = (mode, sel, bad_dim)
            break
        except (ValueError, TypeError):
            continue
        if y.size > 3000 or y.ndim > 6:
            break
        steps.append((mode, sel))
        ref = y
    return steps, ref, failing


# -- checks ----------------------------------------------------------------------------
def check_fetched_once(gets, needed, sharded):
    """Each chunk fetched at most once: no key twice (plain arrays, where the
    keys are exactly ``needed``); for shards no byte fetched twice as data (one
    index read per shard, whole-shard reads alone, data ranges disjoint)."""
    if not sharded:
        keys = [k for k, _ in gets]
        assert len(keys) == len(set(keys)), f"a chunk fetched twice: {sorted(keys)}"
        assert set(keys) == set(needed), (sorted(keys), sorted(needed))
        return
    assert {k for k, _ in gets} <= set(needed), (gets, needed)
    by_key: dict = {}
    for k, r in gets:
        by_key.setdefault(k, []).append(r)
    for k, rs in by_key.items():
        if None in rs:
            assert rs == [None], f"shard {k} read whole and in parts: {rs}"
            continue
        assert sum(type(r).__name__ == "SuffixByteRequest" for r in rs) <= 1, (k, rs)
        spans = sorted((r.start, r.end) for r in rs if type(r).__name__ == "RangeByteRequest")
        for (_s0, e0), (s1, _e1) in itertools.pairwise(spans):
            assert e0 <= s1, f"shard {k}: byte ranges fetched twice: {spans}"


def check_io_once(store, v, sharded):
    check_fetched_once(chunk_gets(store), v.chunks_touched(keys=True), sharded)


def selected_chunks(a, data, steps, layout):
    """Chunk coordinates holding an element the chain selects (numpy model), on
    the grid ``chunks_touched`` uses: ``a.chunks``, or shards when they are read whole."""
    pos = np.arange(data.size).reshape(data.shape)
    for mode, sel in steps:
        pos = apply_np(pos, mode, sel)
    if not data.shape:
        return {()} if pos.size else set()
    grid = a.metadata.chunk_shape if layout == "shardcrc" else a.chunks
    coords = np.unravel_index(pos.reshape(-1), data.shape)
    cids = []
    for c, g in zip(coords, grid, strict=True):
        if isinstance(g, (tuple, list)):  # rectilinear: edge lengths
            cids.append(np.searchsorted(np.cumsum(g), c, side="right"))
        else:
            cids.append(c // g)
    return {tuple(int(x[i]) for x in cids) for i in range(pos.size)}


def check_read(rng, a, data, store, layout, steps, ref):
    v = a.lazy
    for mode, sel in steps:
        v = apply_view(v, mode, sel)
    assert v.shape == ref.shape, (v.shape, ref.shape)
    assert v.ndim == ref.ndim and v.dtype == data.dtype
    assert v.size == ref.size and v.nbytes == ref.nbytes
    if ref.ndim:
        assert len(v) == len(ref)
    else:
        with pytest.raises(TypeError):
            len(v)
    assert v.lazy is v
    store.gets.clear()
    how = int(rng.integers(5))
    if how == 0:
        got = v.read()
    elif how == 1:
        got = np.asarray(v)
    elif how == 2:
        out = np.full(v.shape, rand_values(rng, data.dtype, ()), dtype=data.dtype)
        assert v.read(out=out) is out
        got = out
    elif how == 3:
        got = asyncio.run(v.read_async())
    else:  # the device read path, run on the host
        with cuzarr.config.set({"gpu.emulate": True}):
            got = v.read()
    assert isinstance(got, np.ndarray) and got.shape == ref.shape and got.dtype == data.dtype
    np.testing.assert_array_equal(got, ref)
    check_io_once(store, v, layout == "sharded")
    touched = set(v.chunks_touched())
    assert selected_chunks(a, data, steps, layout) <= touched
    return v


def check_first_step_eager(a, data, mode, sel):
    """The eager array answers the first step like numpy, too."""
    ref = apply_np(data, mode, sel)
    got = a[sel] if mode == "index" else getattr(a, mode)[sel]
    np.testing.assert_array_equal(np.asarray(got), ref)
    assert np.shape(got) == ref.shape


def check_error(a, data, steps, failing):
    mode, sel, bad_dim = failing
    v = a.lazy
    for m, s in steps:
        v = apply_view(v, m, s)
    with pytest.raises(IndexError) as info:
        apply_view(v, mode, sel)
    msg = str(info.value)
    if bad_dim is not None and "out of bounds" in msg:
        # A deliberately out-of-range index: the message names its dimension.
        assert f"dimension {bad_dim} " in msg, (msg, bad_dim, v.shape, mode, sel)
    if not steps:  # as for the plain array
        with pytest.raises(IndexError):
            a[sel] if mode == "index" else getattr(a, mode)[sel]


def invalid_step(rng, shp):
    """A selection every mode refuses with IndexError (numpy too, except a zero
    step, where numpy raises ValueError and cuzarr IndexError, as for arrays)."""
    n = len(shp)
    cases = [
        ("index", 1.5),
        ("index", "a"),
        ("index", (0,) * (n + 1) if all(shp) else (slice(None),) * (n + 1)),
        ("index", (Ellipsis, Ellipsis)),
        ("index", np.zeros(shp + (2,), dtype=bool)),
        ("index", [0.0]),
        ("oindex", (None,) + (slice(None),) * n),
        ("oindex", (slice(None),) * (n + 1)),
        ("vindex", ([0],) * (n + 1)),
        ("vindex", (None,) * max(n, 1)),
    ]
    if n:
        cases += [
            ("index", (slice(None, None, 0),)),
            ("oindex", (np.zeros((1, 1), dtype=np.intp),)),
            ("oindex", (np.zeros(shp[0] + 1, dtype=bool),)),
            ("vindex", np.zeros(shp[:-1] + (shp[-1] + 1,), dtype=bool)),
            ("index", (np.zeros(shp[0] + 1, dtype=bool),)),
        ]
    return cases[int(rng.integers(len(cases)))]


def check_invalid(rng, a, steps):
    v = a.lazy
    for mode, sel in steps:
        v = apply_view(v, mode, sel)
    mode, sel = invalid_step(rng, v.shape)
    with pytest.raises(IndexError):
        apply_view(v, mode, sel)
    if not steps:
        with pytest.raises(IndexError):
            a[sel] if mode == "index" else getattr(a, mode)[sel]


def last_wins(flat, targets, values):
    """``flat[targets] = values`` where the last of repeated targets wins."""
    t = targets.reshape(-1)
    vals = values.reshape(-1)
    if not t.size:
        return
    _, first_rev = np.unique(t[::-1], return_index=True)
    last = t.size - 1 - first_rev
    flat[t[last]] = vals[last]


def check_write(rng, a, data, store, steps):
    """Write through the chained view, then compare the whole array."""
    pos = np.arange(data.size).reshape(data.shape)
    v = a.lazy
    parent = v
    for mode, sel in steps:
        parent = v
        pos = apply_np(pos, mode, sel)
        v = apply_view(v, mode, sel)
    shape = pos.shape
    r = rng.random()
    if r < 0.2:
        value = rand_values(rng, data.dtype, ())
        value = value.item() if rng.random() < 0.5 else value
    else:
        vshape = shape
        if r < 0.5 and vshape:
            vshape = tuple(1 if rng.random() < 0.5 else s for s in vshape)
            vshape = vshape[int(rng.integers(0, len(vshape) + 1)) :]
        elif r < 0.6 and vshape:
            # Extra leading length-1 axes (numpy drops them; for a 0-d target
            # neither numpy's ``x[i, j] = [v]`` nor cuzarr accepts them).
            vshape = (1,) * int(rng.integers(1, 3)) + vshape
        value = rand_values(rng, data.dtype, vshape)
        if rng.random() < 0.15:  # another dtype, cast as numpy casts (values in range)
            if data.dtype.kind in "iu":
                value = value.astype("f8") + (0.25 if data.dtype.kind == "u" else -0.25)
            elif data.dtype.kind == "f":
                value = value.astype("i8") if rng.random() < 0.5 else value.astype("f2")
            elif data.dtype.kind == "b":
                value = value.astype("u1")
            elif data.dtype.kind == "c":
                value = value.astype("c16")
        elif rng.random() < 0.1 and np.size(value):  # a list
            value = value.tolist()
        elif rng.random() < 0.1:  # a cuzarr array or view as the value
            src = cuzarr.create_array(
                {},
                shape=np.shape(value),
                dtype=data.dtype,
                chunks=tuple(max(1, n // 2) for n in np.shape(value)),
            )
            src[...] = value
            value = src if rng.random() < 0.5 else src.lazy[...]
    if shape and rng.random() < 0.1:  # a view of the same array: read before the write
        value = v[::-1]
        vv = data.reshape(-1)[pos][::-1]
    else:
        vv = np.asarray(value).astype(data.dtype)
    expected = data.copy()
    flat = expected.reshape(-1)
    while vv.ndim > len(shape):  # numpy drops a value's extra leading length-1 axes
        vv = vv[0]
    last_wins(flat, pos, np.broadcast_to(vv, shape))
    how = int(rng.integers(4))
    if how == 0:
        v[...] = value
    elif how == 1:
        v.write(value)
    elif how == 2:
        asyncio.run(v.write_async(value))
    else:  # the last step as an assignment
        mode, sel = steps[-1]
        if mode == "index":
            parent[sel] = value
        else:
            getattr(parent, mode)[sel] = value
    np.testing.assert_array_equal(a[...], expected)
    data[...] = expected


def check_read_many(rng, a, data, store, layout):
    views, refs = [], []
    other = None
    if rng.random() < 0.3:  # a second array in another store: read alongside
        other = cuzarr.create_array({}, shape=(5, 3), chunks=(2, 2), dtype="f4", fill_value=-1)
        odata = np.arange(15, dtype="f4").reshape(5, 3)
        other[:4] = odata[:4]
        odata[4] = -1
    for _ in range(int(rng.integers(2, 5))):
        if views and rng.random() < 0.2:
            views.append(views[-1] if rng.random() < 0.5 else views[-1].lazy[...])
            refs.append(refs[-1])
            continue
        if other is not None and rng.random() < 0.3:
            if rng.random() < 0.3:
                views.append(other)
                refs.append(odata)
            else:
                steps, ref, _f = random_chain(rng, odata, 2, allow_errors=False)
                v = other.lazy
                for mode, sel in steps:
                    v = apply_view(v, mode, sel)
                views.append(v)
                refs.append(ref)
            continue
        steps, ref, _f = random_chain(rng, data, 3, allow_errors=False)
        v = a.lazy
        for mode, sel in steps:
            v = apply_view(v, mode, sel)
        views.append(v)
        refs.append(ref)
    store.gets.clear()
    emulate = rng.random() < 0.3  # the device path (staged shared chunks), run on the host
    with cuzarr.config.set({"gpu.emulate": emulate}):
        got = cuzarr.read_many(views)
    assert len(got) == len(views)
    for g, r in zip(got, refs, strict=True):
        assert g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    for i in range(len(got)):  # identical views too: each result is its own array
        for j in range(i):
            assert not (got[i].size and np.shares_memory(got[i], got[j])), (i, j)
    needed = set().union(*(v.chunks_touched(keys=True) for v in views if v.lazy.array is a))
    check_fetched_once(chunk_gets(store), needed, layout == "sharded")


def run_case(seed, tmp_path=None):
    rng = np.random.default_rng(seed)
    a, data, store, layout = make_array(rng, tmp_path)
    made = []
    for _ in range(3):
        steps, ref, failing = random_chain(rng, data)
        if steps:
            v = check_read(rng, a, data, store, layout, steps, ref)
            made.append((v, steps))
            if rng.random() < 0.1:  # a view pickles with its array (a store copy)
                w = pickle.loads(pickle.dumps(v))
                assert w.shape == v.shape
                np.testing.assert_array_equal(w.read(), ref)
            if len(steps) == 1 and rng.random() < 0.5:
                check_first_step_eager(a, data, *steps[0])
        if failing is not None:
            check_error(a, data, steps, failing)
        if rng.random() < 0.3:
            check_invalid(rng, a, steps)
    check_read_many(rng, a, data, store, layout)
    for _ in range(2):
        steps, _ref, _failing = random_chain(rng, data, allow_errors=False)
        if steps:
            check_write(rng, a, data, store, steps)
    for v, steps in made:  # a view remembers its selection, not a snapshot
        ref = data
        for mode, sel in steps:
            ref = apply_np(ref, mode, sel)
        np.testing.assert_array_equal(v.read(), ref)


# more with CUZARR_VIEWS_FUZZ_CASES (e.g. 6000 for a long run)
N_CASES = int(os.environ.get("CUZARR_VIEWS_FUZZ_CASES", "600"))


@pytest.mark.parametrize("block", range(10))
def test_views_fuzz(block, tmp_path):
    per = N_CASES // 10
    for seed in range(block * per, (block + 1) * per):
        try:
            run_case(seed, tmp_path)
        except (Exception, pytest.fail.Exception) as e:
            raise AssertionError(f"seed {seed}: {type(e).__name__}: {e}") from e


# -- regressions found by the fuzzer ---------------------------------------------------
def test_write_view_of_0d_array_with_several_points():
    # A view of a 0-d array can name its one element several times
    # (``a.lazy[None][[0, 0, 0]]``); writing it raised "could not broadcast value
    # of shape (3,) to the selection's shape ()". As in numpy, the last value wins.
    a = cuzarr.create_array({}, shape=(), dtype="i4", chunks=(), fill_value=0)
    v = a.lazy[None][[0, 0, 0]]
    assert v.shape == (3,)
    v[...] = [1, 2, 3]
    assert a[...] == 3
    a.lazy[None, ...].oindex[[0, -1]] = np.array([7, 8])
    assert a[...] == 8
    a.lazy[None][None].vindex[[0, 0], [0, 0]].write(np.array([5, 6]))
    assert a[...] == 6
    np.testing.assert_array_equal(a.lazy[None][[0, 0, 0]].read(), [6, 6, 6])


if __name__ == "__main__":  # pragma: no cover - exploratory runs
    import collections
    import pathlib
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    fails: dict = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(first, first + n):
            try:
                run_case(seed, pathlib.Path(tmp))
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # pytest's Failed too
                tb = traceback.extract_tb(e.__traceback__)
                where = next(
                    (
                        f"{f.name}:{f.lineno}"
                        for f in reversed(tb)
                        if "test_views_fuzz" in f.filename
                    ),
                    "?",
                )
                key = (type(e).__name__, where, str(e).split("\n")[0][:100])
                fails[key].append(seed)
    for key, seeds in sorted(fails.items(), key=lambda kv: -len(kv[1])):
        print(len(seeds), key, seeds[:8])
    print("cases", n, "failing", sum(len(s) for s in fails.values()))
