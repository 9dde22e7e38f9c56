"""Lazy views (``a.lazy[...]``), index-transform composition and ``read_many``."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuzarr
from _counting_store import CountingMemoryStore
from cuzarr.api import asynchronous as zasync
from cuzarr.errors import ReadOnlyError
from cuzarr.indexing.transform import IndexTransform


class CountingStore(CountingMemoryStore):
    def chunk_gets(self):
        return [k for k, _ in self.gets if not k.endswith(("zarr.json", ".zarray", ".zattrs"))]


def make(shape, chunks, shards=None, store=None, dtype="i8", zarr_format=3, order="C"):
    store = {} if store is None else store
    data = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + 1
    kw = {"shards": shards} if shards is not None else {}
    a = cuzarr.create_array(
        store, shape=shape, dtype=dtype, chunks=chunks, zarr_format=zarr_format, order=order, **kw
    )
    if data.size:
        a[...] = data
    return a, data


# -- numpy references for the three indexing modes -----------------------------------
def np_oindex(x, sel):
    if not isinstance(sel, tuple):
        sel = (sel,)
    if any(s is Ellipsis for s in sel):
        i = next(j for j, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * (x.ndim - len(sel) + 1) + sel[i + 1 :]
    sel = sel + (slice(None),) * (x.ndim - len(sel))
    for d in reversed(range(x.ndim)):
        s = sel[d]
        if isinstance(s, (int, np.integer)):
            x = np.take(x, s, axis=d)
        elif isinstance(s, slice):
            x = x[(slice(None),) * d + (s,)]
        else:
            s = np.asarray(s)
            if s.dtype == bool:
                s = np.flatnonzero(s)
            x = np.take(x, s.astype(np.intp), axis=d)
    return x


def apply_np(x, step):
    mode, sel = step
    if mode == "index":
        return x[sel]
    if mode == "oindex":
        return np_oindex(x, sel)
    if isinstance(sel, tuple):
        sel = tuple(
            np.arange(*s.indices(n)) if isinstance(s, slice) else s for s, n in zip(sel, x.shape)
        )
    return x[sel]


def apply_view(v, step):
    mode, sel = step
    if mode == "index":
        return v[sel]
    return getattr(v, mode)[sel]


# -- hypothesis strategies ----------------------------------------------------------
@st.composite
def a_slice(draw, n):
    start = draw(st.none() | st.integers(-n - 2, n + 2))
    stop = draw(st.none() | st.integers(-n - 2, n + 2))
    step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2, -3]))
    return slice(start, stop, step)


@st.composite
def an_int(draw, n):
    return draw(st.integers(-n, n - 1))


@st.composite
def numpy_step(draw, shape):
    sel: list = []
    n_arrays = 0
    length = draw(st.integers(0, 3))
    has_mask = False
    for n in shape:
        choices = ["slice"]
        if n > 0:
            choices += ["int", "array", "array"]
            if not has_mask and n_arrays == 0:
                choices.append("mask")
        kind = draw(st.sampled_from(choices))
        if kind == "slice":
            sel.append(draw(a_slice(n)))
        elif kind == "int":
            sel.append(draw(an_int(n)))
        elif kind == "array" and not has_mask and n_arrays < 2:
            n_arrays += 1
            sel.append(
                np.array(
                    draw(st.lists(st.integers(-n, n - 1), min_size=length, max_size=length)),
                    dtype=np.intp,
                )
            )
        elif kind == "mask" and not has_mask and n_arrays == 0:
            has_mask = True
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        else:
            sel.append(slice(None))
    # Trailing dims may be left implicit; Ellipsis and newaxis appear sometimes.
    if len(shape) >= 2 and not has_mask and n_arrays == 0 and draw(st.integers(0, 5)) == 0:
        k = draw(st.integers(2, len(shape)))  # one mask over the leading k dims
        m = draw(
            st.lists(
                st.booleans(), min_size=int(np.prod(shape[:k])), max_size=int(np.prod(shape[:k]))
            )
        )
        sel = [np.array(m, dtype=bool).reshape(shape[:k])] + sel[k:]
    cut = draw(st.integers(0, len(sel)))
    if cut < len(sel):
        mode = draw(st.sampled_from(["keep", "truncate", "ellipsis"]))
        if mode == "truncate":
            sel = sel[:cut]
        elif mode == "ellipsis":
            sel = sel[:cut] + [Ellipsis] + sel[cut + draw(st.integers(0, len(sel) - cut)) :]
    if len(shape) < 4 and draw(st.integers(0, 3)) == 0:
        sel.insert(draw(st.integers(0, len(sel))), None)
    return ("index", tuple(sel))


@st.composite
def oindex_step(draw, shape):
    sel: list = []
    for n in shape:
        kinds = ["slice"] + (["int", "array", "mask"] if n > 0 else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "slice":
            sel.append(draw(a_slice(n)))
        elif kind == "int":
            sel.append(draw(an_int(n)))
        elif kind == "array":
            sel.append(np.array(draw(st.lists(st.integers(-n, n - 1), max_size=4)), dtype=np.intp))
        else:
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    return ("oindex", tuple(sel))


@st.composite
def vindex_step(draw, shape):
    if draw(st.integers(0, 4)) == 0:
        mask = np.array(
            draw(
                st.lists(st.booleans(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
            )
        ).reshape(shape)
        return ("vindex", mask)
    two_d = draw(st.booleans())
    length = draw(st.integers(0 if 0 in shape else 1, 4 if 0 not in shape else 0))
    sel = []
    for n in shape:
        if n > 0 and draw(st.integers(0, 3)) == 0:
            sel.append(draw(an_int(n)))
            continue
        vals = np.array(
            draw(
                st.lists(
                    st.integers(-n, n - 1) if n else st.nothing(), min_size=length, max_size=length
                )
            ),
            dtype=np.intp,
        )
        if two_d and length % 2 == 0 and length:
            vals = vals.reshape(2, -1)
        sel.append(vals)
    return ("vindex", tuple(sel))


@st.composite
def chains(draw):
    ndim = draw(st.sampled_from([1, 2, 3, 3, 4]))
    size = st.integers(1, 6) if draw(st.integers(0, 5)) else st.integers(0, 6)
    shape = tuple(draw(st.lists(size, min_size=ndim, max_size=ndim)))
    layout = draw(st.sampled_from(["plain", "sharded", "v2"]))
    chunks = tuple(draw(st.integers(1, 3)) for _ in shape)
    steps = []
    x = np.zeros(shape)
    for _ in range(draw(st.integers(1, 4))):
        kinds = [numpy_step, oindex_step]
        if x.ndim >= 1:
            kinds.append(vindex_step)
        step = draw(draw(st.sampled_from(kinds))(x.shape))
        try:
            y = apply_np(x, step)
        except IndexError:
            continue  # e.g. arrays that do not broadcast: numpy refuses, so do we (tested apart)
        if y.ndim > 5 or y.size > 400:
            break
        steps.append(step)
        x = y
    return shape, chunks, layout, steps


def build(shape, chunks, layout, store=None):
    if layout == "sharded":
        return make(shape, chunks, shards=tuple(2 * c for c in chunks), store=store)
    if layout == "v2":
        return make(shape, chunks, zarr_format=2, order="F", store=store)
    return make(shape, chunks, store=store)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(chains())
def test_chained_views_read_like_numpy(case):
    shape, chunks, layout, steps = case
    a, data = build(shape, chunks, layout)
    v = a.lazy
    ref = data
    for step in steps:
        v = apply_view(v, step)
        ref = apply_np(ref, step)
    assert v.shape == ref.shape
    assert v.ndim == ref.ndim
    assert v.dtype == ref.dtype
    got = v.read()
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(np.asarray(v), ref)


@SETTINGS
@given(chains(), st.booleans())
def test_chained_views_write_like_numpy(case, scalar):
    shape, chunks, layout, steps = case
    a, data = build(shape, chunks, layout)
    v = a.lazy
    target = np.arange(data.size).reshape(data.shape)  # flat position of each element
    for step in steps:
        v = apply_view(v, step)
        target = apply_np(target, step)
    # The written value depends only on the target position, so repeated targets
    # receive equal values whatever the order of assignment.
    value = np.asarray(-7) if scalar else -(np.asarray(target) + 1000)
    expected = data.copy()
    expected.reshape(-1)[np.asarray(target).reshape(-1)] = np.broadcast_to(
        value, np.shape(target)
    ).reshape(-1)
    if scalar:
        v[...] = -7
    else:
        v.write(value)
    np.testing.assert_array_equal(a[...], expected)


TRICKY = [
    # numpy's placement rule: separated advanced indices (ints count) go first
    [("index", (0, slice(None), [0, 1]))],
    [("index", ([1, 0, 1], slice(None), 2))],
    [("index", (slice(None), 0, [1, 2]))],
    [("index", ([[0], [1]], slice(None, None, -1), [0, 2, 1]))],
    [("index", (None, [0, 1], None, [1, 0]))],
    [("index", ([2, 0], Ellipsis, [1, 3]))],
    [("index", (slice(1, None), np.array([True, False, True, True, False]), 1))],
    [("oindex", ([2, 0], slice(None), [3, 1, 1])), ("index", (slice(None), 1, [0, 2]))],
    [("index", (slice(None, None, 2), [4, 0])), ("vindex", ([1, 0], [0, 0], [1, 1]))],
    [("vindex", ([0, 3, 3], [4, 1, 1], [5, 0, 0])), ("index", ([2, 0],))],
    [("index", (np.ones((4, 5), dtype=bool),)), ("index", (slice(3, 15, 4), [5, 0]))],
    [("index", (None, slice(None), None, 1)), ("index", (0, Ellipsis, 0, [1, 1]))],
    [("oindex", ([3, 1], np.array([True, False, True, False, True]), slice(None, None, -2)))],
]


@pytest.mark.parametrize("steps", TRICKY)
@pytest.mark.parametrize("layout", ["plain", "sharded"])
def test_tricky_chains(steps, layout):
    a, data = build((4, 5, 6), (2, 2, 3), layout)
    v, ref = a.lazy, data
    for step in steps:
        v, ref = apply_view(v, step), apply_np(ref, step)
    assert v.shape == ref.shape
    np.testing.assert_array_equal(v.read(), ref)
    value = -(np.arange(ref.size).reshape(ref.shape) + 1)
    target = np.arange(data.size).reshape(data.shape)
    for step in steps:
        target = apply_np(target, step)
    if np.unique(target).size == target.size:
        v.write(value)
        expected = data.copy()
        expected.reshape(-1)[target.reshape(-1)] = value.reshape(-1)
        np.testing.assert_array_equal(a[...], expected)


# -- transforms ------------------------------------------------------------------------
def test_transform_composition_is_flat():
    t = IndexTransform.identity((100, 50))
    t2 = t.index(slice(10, 100, 3)).index((slice(None, None, -1), 5))
    assert t2.shape == (30,)
    assert [m.kind for m in t2.maps] == ["strided", "constant"]
    assert (t2.maps[0].offset, t2.maps[0].stride) == (97, -3)
    assert t2.maps[1].offset == 5
    t3 = t.oindex(([3, 1, 4], slice(None, 10, 2))).vindex(([0, 2], [1, 4]))
    assert [m.kind for m in t3.maps] == ["array", "array"]
    np.testing.assert_array_equal(t3.maps[0].index_array, [3, 4])
    np.testing.assert_array_equal(t3.maps[1].index_array, [2, 8])


def test_index_arrays_are_not_aliased():
    idx = np.array([1, 2, 3])
    t = IndexTransform.identity((10,)).index(idx)
    idx[0] = 9
    np.testing.assert_array_equal(t.maps[0].index_array, [1, 2, 3])
    assert idx.flags.writeable


# -- behaviour -------------------------------------------------------------------------
def test_views_do_no_io_and_show_themselves():
    store = CountingStore()
    a, _ = make((200, 50), (16, 16), store=store)
    store.gets.clear()
    v = a.lazy[10:100:3][::-1, 5]
    w = a.lazy.oindex[[1, 5], :][:, np.newaxis, ::2].vindex[[0, 1], 0, [3, 4]]
    assert (v.shape, v.ndim, v.dtype) == ((30,), 1, np.dtype("i8"))
    assert w.shape == (2,)
    assert isinstance(v, cuzarr.LazyArray)
    r = repr(v)
    assert "LazyArray" in r and repr(a) in r and "97:7:-3, 5" in r
    assert "array(" in repr(w)
    assert store.gets == []


def test_array_indexing_stays_eager():
    a, data = make((10, 10), (4, 4))
    assert isinstance(a[1:3], np.ndarray)
    assert isinstance(a.lazy[1:3], cuzarr.LazyArray)
    np.testing.assert_array_equal(a.lazy[1:3][:, 2].read(), data[1:3, 2])


def test_read_out_and_prototype():
    a, data = make((10, 12), (4, 5))
    v = a.lazy[2:9, ::-3]
    out = np.zeros(v.shape, dtype=v.dtype)
    assert v.read(out=out, prototype=None) is out
    np.testing.assert_array_equal(out, data[2:9, ::-3])
    with pytest.raises(ValueError):
        v.read(out=np.zeros((3, 3), dtype=v.dtype))
    np.testing.assert_array_equal(np.asarray(v, dtype="f4"), data[2:9, ::-3].astype("f4"))


def test_zero_d_and_scalar_views():
    a, data = make((6, 7), (4, 4))
    v = a.lazy[2, 3]
    assert v.shape == ()
    r = v.read()
    assert isinstance(r, np.ndarray) and r.shape == () and r == data[2, 3]
    v.write(-1)
    assert a[2, 3] == -1
    z = cuzarr.create_array({}, shape=(), dtype="f4", fill_value=1.5)
    assert z.lazy[...].read() == 1.5
    z.lazy[...] = 4
    assert z[...] == 4
    assert z.lazy[None].shape == (1,)
    np.testing.assert_array_equal(z.lazy[None].read(), [4])


def test_write_through_broadcasts():
    a, data = make((8, 9), (3, 4))
    v = a.lazy[1:7]
    v[:, ::2] = np.arange(5)
    data[1:7][:, ::2] = np.arange(5)
    np.testing.assert_array_equal(a[...], data)
    a.lazy.oindex[[0, 7], [1, 2]] = [[10], [20]]
    data[np.ix_([0, 7], [1, 2])] = [[10], [20]]
    np.testing.assert_array_equal(a[...], data)
    a.lazy.vindex[[1, 2], [3, 4]] = 99
    data[[1, 2], [3, 4]] = 99
    np.testing.assert_array_equal(a[...], data)
    a.lazy[2:5].vindex[[0, 2], [0, 0]] = [5, 6]
    data[[2, 4], [0, 0]] = [5, 6]
    np.testing.assert_array_equal(a[...], data)
    with pytest.raises(ValueError):
        a.lazy[1:3].write(np.zeros((3, 3)))


def test_bad_selections_raise_index_error():
    a, _ = make((8, 9), (3, 4))
    v = a.lazy[2:6]
    with pytest.raises(IndexError):
        v[4]
    with pytest.raises(IndexError):
        v[:, [9]]
    with pytest.raises(IndexError):
        v[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError):
        v.oindex[[[0]], :]
    with pytest.raises(IndexError):
        v.vindex[[0]]
    with pytest.raises(IndexError):
        v[0, 0, 0]


def test_view_after_shrinking_resize_raises():
    a, _ = make((10,), (3,))
    v = a.lazy[5:9]
    a.resize(6)
    with pytest.raises(IndexError):
        v.read()
    np.testing.assert_array_equal(a.lazy[5:6].read(), [6])


def test_read_only_write_raises(tmp_path):
    make((4,), (2,), store=cuzarr.storage.LocalStore(tmp_path))
    ro = cuzarr.open_array(cuzarr.storage.LocalStore(tmp_path, read_only=True))
    with pytest.raises(ReadOnlyError):
        ro.lazy[1:2] = 5
    np.testing.assert_array_equal(ro.lazy[1:3].read(), [2, 3])


# -- batched reads ---------------------------------------------------------------------
def test_read_many_fetches_each_chunk_once():
    store = CountingStore()
    a, data = make((64, 64), (8, 8), store=store)
    sels = [
        (slice(0, 20), slice(0, 20)),
        (slice(10, 30), slice(5, 25)),
        (slice(4, 12), slice(4, 12)),
        (slice(None, None, -5), 3),
        ([1, 17, 1, 40], slice(0, 9)),
    ]
    views = [a.lazy[s] for s in sels] + [a.lazy.vindex[[0, 9, 63], [0, 9, 63]]]
    store.gets.clear()
    got = cuzarr.read_many(views)
    batched = store.chunk_gets()
    assert len(batched) == len(set(batched))
    needed = set().union(*(v.chunks_touched(keys=True) for v in views))
    assert set(batched) == needed
    for g, s in zip(got, sels, strict=False):
        np.testing.assert_array_equal(g, data[s])
    np.testing.assert_array_equal(got[-1], data[[0, 9, 63], [0, 9, 63]])
    store.gets.clear()
    for v in views:
        v.read()
    assert len(store.chunk_gets()) > len(batched)


def test_read_many_halves_of_a_chunk_and_identical_views():
    store = CountingStore()
    a, data = make((16,), (8,), store=store)
    store.gets.clear()
    lo, hi = cuzarr.read_many([a.lazy[0:4], a.lazy[4:8]])
    assert store.chunk_gets() == ["c/0"]
    np.testing.assert_array_equal(np.concatenate([lo, hi]), data[:8])
    store.gets.clear()
    v = a.lazy[3:12]
    r1, r2, r3 = cuzarr.read_many([v, a.lazy[3:12], v])
    assert sorted(store.chunk_gets()) == ["c/0", "c/1"]
    for r in (r1, r2, r3):
        np.testing.assert_array_equal(r, data[3:12])
    r1[0] = -5  # results do not alias each other
    assert r2[0] == data[3] and r3[0] == data[3]


def test_read_many_several_arrays_and_plain_arrays():
    a, da_ = make((10, 10), (4, 4))
    b, db = make((5,), (2,), dtype="f4")
    ra, rb, rwhole = cuzarr.read_many([a.lazy[::3, 1], b.lazy[[4, 0]], b])
    np.testing.assert_array_equal(ra, da_[::3, 1])
    np.testing.assert_array_equal(rb, db[[4, 0]])
    np.testing.assert_array_equal(rwhole, db)
    assert cuzarr.read_many([]) == []
    with pytest.raises(TypeError):
        cuzarr.read_many([np.zeros(3)])


def test_read_many_missing_chunks_read_as_fill():
    store = CountingStore()
    a = cuzarr.create_array(store, shape=(20,), dtype="i2", chunks=(5,), fill_value=-3)
    a[0:5] = 1
    x, y = cuzarr.read_many([a.lazy[3:8], a.lazy[::4]])
    np.testing.assert_array_equal(x, [1, 1, -3, -3, -3])
    np.testing.assert_array_equal(y, [1, 1, -3, -3, -3])


def test_sharded_views_and_read_many():
    store = CountingStore()
    a, data = make((16, 16), (4, 4), shards=(8, 8), store=store)
    views = [a.lazy[0:3, 0:3], a.lazy[1:4, 2:4], a.lazy[8:, 9], a.lazy.vindex[[0, 15], [0, 15]]]
    assert views[0].chunks_touched() == [(0, 0)]
    assert views[2].chunks_touched() == [(2, 2), (3, 2)]
    assert views[2].chunks_touched(keys=True) == ["c/1/1"]
    store.gets.clear()
    got = cuzarr.read_many(views)
    batched = len(store.chunk_gets())
    refs = [data[0:3, 0:3], data[1:4, 2:4], data[8:, 9], data[[0, 15], [0, 15]]]
    for g, r in zip(got, refs, strict=True):
        np.testing.assert_array_equal(g, r)
    store.gets.clear()
    for v, r in zip(views, refs, strict=True):
        np.testing.assert_array_equal(v.read(), r)
    assert len(store.chunk_gets()) > batched
    views[1][...] = 0
    data[1:4, 2:4] = 0
    np.testing.assert_array_equal(a[...], data)


def test_chunks_touched():
    a, _ = make((10, 10), (4, 4), store={})
    v = a.lazy[3:5, ::9]
    assert v.chunks_touched() == [(0, 0), (0, 2), (1, 0), (1, 2)]
    assert v.chunks_touched(keys=True) == ["c/0/0", "c/0/2", "c/1/0", "c/1/2"]
    g = cuzarr.open_group({}, mode="w")
    b = g.create_array("sub/x", shape=(6,), dtype="u1", chunks=(2,))
    assert b.lazy[[5, 0]].chunks_touched(keys=True) == ["sub/x/c/0", "sub/x/c/2"]
    assert b.lazy[2:2].chunks_touched() == []


def test_async_twins():
    async def main():
        store = {}
        a = await zasync.create_array(store, shape=(12,), dtype="i4", chunks=(5,))
        await a.setitem(slice(None), np.arange(12))
        v = a.lazy[2:11:2]
        assert isinstance(v, zasync.LazyArray)
        np.testing.assert_array_equal(await v.read_async(), np.arange(2, 11, 2))
        await v[::2].write_async(-1)
        x, y = await zasync.read_many([a.lazy[:6], a.lazy[6:]])
        return np.concatenate([x, y])

    got = asyncio.run(main())
    exp = np.arange(12)
    exp[2:11:2][::2] = -1
    np.testing.assert_array_equal(got, exp)


def test_dask_from_array():
    da = pytest.importorskip("dask.array")
    a, data = make((30, 20), (7, 6))
    v = a.lazy[3:28, ::-2]
    d = da.from_array(v, chunks=(10, 4))
    np.testing.assert_array_equal(d.compute(), data[3:28, ::-2])
    np.testing.assert_array_equal((d + 1).sum(axis=0).compute(), (data[3:28, ::-2] + 1).sum(axis=0))
    d2 = v.to_dask(chunks=(5, 5))
    assert type(d2._meta) is np.ndarray
    np.testing.assert_array_equal(d2[::3].compute(), data[3:28, ::-2][::3])


def test_rectilinear_views():
    try:
        a = cuzarr.create_array({}, shape=(10, 7), dtype="i4", chunks=[[1, 2, 2, 5], 5])
    except Exception:  # pragma: no cover - variable chunks not available
        pytest.skip("rectilinear grids are not available")
    data = np.arange(70, dtype="i4").reshape(10, 7)
    a[...] = data
    v = a.lazy[::-1][1:9, [6, 0, 3]]
    np.testing.assert_array_equal(v.read(), data[::-1][1:9, [6, 0, 3]])
    x, y = cuzarr.read_many([a.lazy[0:3], a.lazy.vindex[[0, 9], [6, 6]]])
    np.testing.assert_array_equal(x, data[0:3])
    np.testing.assert_array_equal(y, data[[0, 9], [6, 6]])
    a.lazy[2:4].oindex[:, [1, 5]] = 0
    data[2:4, [1, 5]] = 0
    np.testing.assert_array_equal(a[...], data)


def test_write_view_from_a_view_or_array():
    # The value is read on the loop thread (its __array__ would re-enter sync).
    src = cuzarr.create_array({}, shape=(4,), chunks=(3,), dtype="i4", fill_value=0)
    src[:] = [1, 2, 3, 4]
    a = cuzarr.create_array({}, shape=(6,), chunks=(2,), dtype="i4", fill_value=0)
    a.lazy[2:6] = src
    a.lazy[[0, 1]] = src.lazy[::2]
    a.lazy[4:6].write(src.lazy[1:3])
    np.testing.assert_array_equal(a[:], [1, 3, 1, 2, 2, 3])


def test_read_out_checks_before_io_and_fills_in_place():
    store = CountingStore()
    a, data = make((64, 48), (16, 16), store=store)
    v = a.lazy[3:60:2, ::-1]
    # dtype and shape are refused before any chunk is fetched, as get_*_selection does
    store.gets.clear()
    with pytest.raises(TypeError, match="dtype"):
        v.read(out=np.empty(v.shape, dtype="f8"))
    with pytest.raises(ValueError, match="shape"):
        v.read(out=np.empty((2, 2), dtype=a.dtype))
    assert store.chunk_gets() == []
    cases = [
        (v, data[3:60:2, ::-1]),
        (a.lazy[5], data[5]),
        (a.lazy[None, 2:9, 7][..., None], data[None, 2:9, 7][..., None]),
        (a.lazy.oindex[[9, 1, 1], [3, 40]], data[np.ix_([9, 1, 1], [3, 40])]),
        (a.lazy.vindex[[1, 2, 63], [0, 47, 5]], data[[1, 2, 63], [0, 47, 5]]),
        (a.lazy[::3, 1], data[::3, 1]),
    ]
    for view, expected in cases:
        out = np.full(view.shape, -1, dtype=a.dtype)
        assert view.read(out=out) is out
        np.testing.assert_array_equal(out, expected)
    # a non-contiguous out is filled too
    big = np.full((v.shape[0], v.shape[1] * 2), -1, dtype=a.dtype)
    v.read(out=big[:, ::2])
    np.testing.assert_array_equal(big[:, ::2], data[3:60:2, ::-1])
    assert (big[:, 1::2] == -1).all()


def test_read_out_decodes_into_out_without_a_temporary():
    import tracemalloc

    a = cuzarr.create_array({}, shape=(1024, 1024), chunks=(256, 256), dtype="f8")
    a[...] = 1.5
    v = a.lazy[:, 128:]
    out = np.empty(v.shape, dtype="f8")
    v.read(out=out)  # warm-up: imports, thread pools
    tracemalloc.start()
    try:
        v.read(out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (out == 1.5).all()
    assert peak < out.nbytes // 4, peak  # no buffer of the view's size besides out


def test_iterating_a_view_yields_row_views_and_0d_refuses():
    a, data = make((5, 4), (2, 3))
    rows = list(a.lazy[1:4, ::-1])
    assert len(rows) == 3
    for r, expected in zip(rows, data[1:4, ::-1], strict=True):
        np.testing.assert_array_equal(r.read(), expected)
    with pytest.raises(TypeError, match="0-d"):
        iter(a.lazy[2, 3])
    assert list(a.lazy[0:0]) == []


def test_read_only_out_is_refused_before_io():
    # decoders write through raw pointers: a read-only out (even one over an
    # immutable bytes object) must be refused, for views and get_*_selection alike
    store = CountingStore()
    a = cuzarr.create_array(store, shape=(512, 512), chunks=(512, 512), dtype="f8")
    a[...] = 1.0
    raw = bytes(512 * 512 * 8)
    out = np.frombuffer(raw, "f8").reshape(512, 512)
    store.gets.clear()
    for call in (
        lambda: a.lazy[...].read(out=out),
        lambda: a.get_orthogonal_selection(Ellipsis, out=out),
        lambda: a.get_basic_selection(Ellipsis, out=out),
        lambda: a.get_coordinate_selection(([0, 1], [2, 3]), out=out[0, :2]),
        lambda: a.get_coordinate_selection(([0, 1], [2, 3]), out=out[:2, 0]),
        lambda: asyncio.run(a._async_array.getitem([0, 1], out=out[:2])),
        lambda: asyncio.run(a._async_array.getitem((np.arange(4), slice(None)), out=out[:4])),
    ):
        with pytest.raises(ValueError, match="read-only"):
            call()
    assert store.chunk_gets() == []
    assert raw == bytes(512 * 512 * 8)


def test_read_many_treats_handles_of_one_stored_array_as_one(monkeypatch):
    from cuzarr.storage import MemoryStore

    fetched: list[str] = []
    plain = MemoryStore._get_many_sync

    def counting(self, keys):
        fetched.extend(keys)
        return plain(self, keys)

    monkeypatch.setattr(MemoryStore, "_get_many_sync", counting)
    store: dict = {}
    a, data = make((16, 16), (8, 8), store=store)
    b = cuzarr.open_array(store, mode="r")  # another handle on the same stored array
    fetched.clear()
    got = cuzarr.read_many([a.lazy[0:2], b.lazy[0:2, 0:3], a.lazy[4:9, 9:]])
    assert sorted(k for k in fetched if "/" in k) == ["c/0/0", "c/0/1", "c/1/1"]
    for g, s in zip(got, [np.s_[0:2], np.s_[0:2, 0:3], np.s_[4:9, 9:]], strict=True):
        np.testing.assert_array_equal(g, data[s])
    # handles that read differently are read on their own: metadata from before a
    # resize, another memory order of results, a store subclass (it may count reads)
    c = cuzarr.open_array(store)
    c.resize((16, 8))
    f = cuzarr.open_array(store, mode="r", config={"order": "F"})
    counted = CountingMemoryStore(store)
    d = cuzarr.open_array(counted, mode="r")
    fetched.clear()
    got = cuzarr.read_many([a.lazy[0:2, 0:4], c.lazy[0:2, 0:4], f.lazy[0:2, 0:4]])
    assert [k for k in fetched if k == "c/0/0"] == ["c/0/0"] * 3
    assert got[2].flags.f_contiguous and not got[0].flags.f_contiguous
    np.testing.assert_array_equal(got[1], data[0:2, 0:4])
    counted.gets.clear()
    cuzarr.read_many([a.lazy[0:2, 0:4], d.lazy[0:2, 0:4]])
    assert [k for k, _ in counted.gets] == ["c/0/0"]


def test_huge_steps_over_one_element_compose_with_index_arrays():
    a, data = make((10, 4), (3, 4))
    for chain in (
        lambda x: x[:: 2**70][[0, 0]],
        lambda x: x[3 :: 2**64, :: -(2**65)][[0, 0], [0, 0]],
    ):
        np.testing.assert_array_equal(chain(a.lazy).read(), chain(data))
    got = a.lazy[:: 2**63].vindex[[0, 0], [1, 3]].read()
    np.testing.assert_array_equal(got, data[:: 2**63][[0, 0], [1, 3]])
    np.testing.assert_array_equal(a[5:6:-3], data[5:6:-3])
    np.testing.assert_array_equal(a[:: -(2**70)], data[:: -(2**70)])


def test_scalar_booleans_in_orthogonal_selections_of_0d_arrays_say_why():
    z = cuzarr.create_array({}, shape=(), dtype="i4")
    a = cuzarr.create_array({}, shape=(5,), dtype="i4")
    for arr in (z, a):
        for sel in (True, np.False_, np.array(True)):
            with pytest.raises(IndexError, match="scalar boolean is not an orthogonal index"):
                arr.oindex[sel]
            with pytest.raises(IndexError, match="scalar boolean is not an orthogonal index"):
                arr.lazy.oindex[sel]
