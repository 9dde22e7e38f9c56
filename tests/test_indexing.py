"""Property tests: cuzarr indexing (read and write) agrees with numpy.

Every test draws a shape (0-d to 4-d, zero-length dims allowed), a regular chunk
shape and a selection, applies it to a cuzarr array (in-memory dict store) and
to a numpy copy, and compares. Where numpy refuses a selection with IndexError,
cuzarr must refuse it with IndexError as well.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuzarr

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------------------
# strategies

shapes = st.lists(st.integers(0, 6), min_size=0, max_size=4).map(tuple)


@st.composite
def arrays(draw, shape=None):
    """(cuzarr array, numpy copy) with random shape, chunks, format and codec."""
    if shape is None:
        shape = draw(shapes)
    chunks = tuple(draw(st.integers(1, max(1, s) + 1)) for s in shape)
    zarr_format = draw(st.sampled_from([2, 3]))
    compressors = draw(st.sampled_from([None, "auto"]))
    fill = draw(st.sampled_from([0, -1]))
    size = int(np.prod(shape)) if shape else 1
    data = (np.arange(size, dtype="i4") * 7 + 3).reshape(shape)
    a = cuzarr.create_array(
        {},
        shape=shape,
        dtype="i4",
        chunks=chunks,
        zarr_format=zarr_format,
        compressors=compressors,
        fill_value=fill,
    )
    # leave some chunks unwritten (they read as fill) so missing chunks are covered too
    if draw(st.booleans()) or size == 0:
        a[...] = data
        expected = data.copy()
    else:
        expected = np.full(shape, fill, dtype="i4")
        if shape and all(s > 0 for s in shape):
            region = tuple(slice(0, max(1, s // 2)) for s in shape)
            a[region] = data[region]
            expected[region] = data[region]
    return a, expected


def int_index(size):
    return st.integers(-size, size - 1)


def slices(size):
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    step = st.one_of(st.none(), st.integers(-4, 4).filter(lambda x: x != 0))
    return st.builds(slice, bound, bound, step)


@st.composite
def int_arrays(draw, size, max_ndim=2):
    if size == 0:
        nd = draw(st.integers(1, max_ndim))
        return np.zeros((0,) * nd, dtype=np.intp)
    nd = draw(st.integers(0, max_ndim))
    shp = tuple(draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd)))
    n = int(np.prod(shp)) if shp else 1
    vals = draw(st.lists(int_index(size), min_size=n, max_size=n))
    arr = np.array(vals, dtype=draw(st.sampled_from(["i8", "i4", "intp"]))).reshape(shp)
    if draw(st.booleans()) and arr.ndim == 1:
        return arr.tolist()  # a plain list of ints works like an array
    return arr


@st.composite
def bool_masks(draw, shp):
    n = int(np.prod(shp)) if shp else 1
    vals = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return np.array(vals, dtype=bool).reshape(shp)


@st.composite
def basic_selections(draw, shape):
    """ints, slices, Ellipsis, np.newaxis (no advanced indices)."""
    items = []
    for s in shape:
        if s > 0 and draw(st.integers(0, 3)) == 0:
            items.append(draw(int_index(s)))
        else:
            items.append(draw(slices(s)))
    return _decorate(draw, items)


def _decorate(draw, items):
    items = list(items)
    # drop trailing items (implicit full slices)
    if items and draw(st.booleans()):
        items = items[: draw(st.integers(0, len(items)))]
    # replace a run with Ellipsis
    if draw(st.booleans()):
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items = items[:i] + [Ellipsis] + items[j:]
    # sprinkle np.newaxis
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def fancy_selections(draw, shape):
    """Mixtures of ints, slices, integer arrays and boolean masks (numpy semantics)."""
    items = []
    d = 0
    n_adv = 0
    while d < len(shape):
        s = shape[d]
        kind = draw(st.sampled_from(["int", "slice", "intarr", "intarr", "bool", "boolnd"]))
        if kind == "int" and s > 0:
            items.append(draw(int_index(s)))
            d += 1
        elif kind == "intarr" and n_adv < 3:
            items.append(draw(int_arrays(s)))
            n_adv += 1
            d += 1
        elif kind == "bool" and n_adv < 3:
            items.append(draw(bool_masks((s,))))
            n_adv += 1
            d += 1
        elif kind == "boolnd" and n_adv < 3 and d + 1 < len(shape):
            k = draw(st.integers(2, len(shape) - d))
            items.append(draw(bool_masks(tuple(shape[d : d + k]))))
            n_adv += 1
            d += k
        else:
            items.append(draw(slices(s)))
            d += 1
    if n_adv == 0 and shape:
        i = draw(st.integers(0, len(shape) - 1))
        items[i : i + 1] = (
            [draw(int_arrays(shape[i]))] if _consumes(items[i]) == 1 else items[i : i + 1]
        )
    if draw(st.integers(0, 9)) == 0:
        items.insert(draw(st.integers(0, len(items))), np.bool_(draw(st.booleans())))
    return _decorate_fancy(draw, items)


def _consumes(item):
    if isinstance(item, np.ndarray) and item.dtype == bool:
        return max(item.ndim, 1)
    return 1


def _decorate_fancy(draw, items):
    items = list(items)
    if draw(st.booleans()):
        # Ellipsis replacing a run of items: only full slices keep numpy and us agreeing
        # on the remaining dims, but any run is a valid selection: numpy is the reference
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items = items[:i] + [Ellipsis] + items[j:]
    for _ in range(draw(st.integers(0, 1))):
        items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


@st.composite
def orthogonal_selections(draw, shape):
    items = []
    for s in shape:
        kind = draw(st.sampled_from(["int", "slice", "intarr", "bool"]))
        if kind == "int" and s > 0:
            items.append(draw(int_index(s)))
        elif kind == "intarr":
            items.append(
                draw(
                    int_arrays(s, max_ndim=1).map(
                        lambda x: np.atleast_1d(np.asarray(x, dtype=np.intp))
                    )
                )
            )
        elif kind == "bool":
            items.append(draw(bool_masks((s,))))
        else:
            items.append(draw(slices(s)))
    return tuple(items)


@st.composite
def coordinate_selections(draw, shape):
    if draw(st.integers(0, 3)) == 0:
        return draw(bool_masks(shape))
    bshape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    n = int(np.prod(bshape)) if bshape else 1
    out = []
    for s in shape:
        if s == 0:
            if n != 0:
                bshape = (0,)
                n = 0
            out.append(np.zeros(bshape, dtype=np.intp))
            continue
        vals = draw(st.lists(int_index(s), min_size=n, max_size=n))
        arr = np.array(vals, dtype=np.intp).reshape(bshape)
        # broadcasting: sometimes give a dimension as a length-1 / lower-rank array
        if arr.ndim == 2 and draw(st.booleans()):
            arr = arr[:1, :]
        out.append(arr)
    # make all zero-size if any is zero-size (numpy broadcasting rules still apply)
    return tuple(out)


def oindex_expected(data, sel):
    """numpy equivalent of an orthogonal selection."""
    arrs = []
    keep = []
    for s, sz in zip(sel, data.shape, strict=True):
        idx = np.arange(sz)[s]
        keep.append(np.ndim(idx) > 0)
        arrs.append(np.atleast_1d(idx))
    if not arrs:
        return data[()], ()
    ix = np.ix_(*arrs)
    res = data[ix]
    shape = tuple(len(a) for a, k in zip(arrs, keep, strict=True) if k)
    return res.reshape(shape), ix


def values_for(draw, shape):
    """A value to assign into a selection of ``shape``: scalar or broadcastable array."""
    kind = draw(st.sampled_from(["scalar", "full", "broadcast"]))
    if kind == "scalar":
        return np.int32(draw(st.integers(-1000, 1000)))
    vshape = list(shape)
    if kind == "broadcast" and vshape:
        # drop some leading dims and set others to 1
        vshape = vshape[draw(st.integers(0, len(vshape))) :]
        vshape = [1 if draw(st.booleans()) else v for v in vshape]
    n = int(np.prod(vshape)) if vshape else 1
    return (np.arange(n, dtype="i4") * -3 - 5).reshape(vshape)


def check_read(fn_actual, fn_expected):
    try:
        expected = fn_expected()
    except IndexError:
        with pytest.raises(IndexError):
            fn_actual()
        return None
    actual = fn_actual()
    assert np.shape(actual) == np.shape(expected), (np.shape(actual), np.shape(expected))
    np.testing.assert_array_equal(actual, expected)
    return expected


# --------------------------------------------------------------------------------------
# reads


@SETTINGS
@given(st.data())
def test_basic_read(data):
    a, expected = data.draw(arrays())
    sel = data.draw(basic_selections(a.shape))
    check_read(lambda: a[sel], lambda: expected[sel])
    # get_basic_selection is the same
    check_read(lambda: a.get_basic_selection(sel), lambda: expected[sel])


@SETTINGS
@given(st.data())
def test_fancy_read(data):
    a, expected = data.draw(arrays())
    sel = data.draw(fancy_selections(a.shape))
    check_read(lambda: a[sel], lambda: expected[sel])


@SETTINGS
@given(st.data())
def test_orthogonal_read(data):
    a, expected = data.draw(arrays())
    sel = data.draw(orthogonal_selections(a.shape))
    exp, _ = oindex_expected(expected, sel)
    got = a.oindex[sel] if sel else a.oindex[()]
    assert np.shape(got) == np.shape(exp)
    np.testing.assert_array_equal(got, exp)


@SETTINGS
@given(st.data())
def test_coordinate_read(data):
    a, expected = data.draw(arrays(shape=data.draw(shapes.filter(lambda s: len(s) > 0))))
    sel = data.draw(coordinate_selections(a.shape))
    check_read(lambda: a.vindex[sel], lambda: expected[sel])


@SETTINGS
@given(st.data())
def test_block_read(data):
    a, expected = data.draw(arrays())
    grid = a.cdata_shape
    items = []
    for g in grid:
        if g > 0 and data.draw(st.booleans()):
            items.append(data.draw(st.integers(-g, g - 1)))
        else:
            items.append(
                slice(
                    data.draw(st.one_of(st.none(), st.integers(-g - 1, g + 1))),
                    data.draw(st.one_of(st.none(), st.integers(-g - 1, g + 1))),
                )
            )
    sel = tuple(items)
    # expected: block coordinates -> element slices (ints keep the dimension)
    el = []
    for it, g, c, s in zip(items, grid, a.chunks, a.shape, strict=True):
        if isinstance(it, int):
            i = it + g if it < 0 else it
            el.append(slice(i * c, min((i + 1) * c, s)))
        else:
            lo, hi, _ = it.indices(g)
            el.append(slice(lo * c, min(hi * c, s)) if hi > lo else slice(0, 0))
    exp = expected[tuple(el)]
    got = a.blocks[sel] if sel else a.blocks[()]
    assert got.shape == exp.shape
    np.testing.assert_array_equal(got, exp)


# --------------------------------------------------------------------------------------
# writes


def _assert_whole(a, expected):
    got = a[...]
    np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(st.data())
def test_basic_write(data):
    a, expected = data.draw(arrays())
    sel = data.draw(basic_selections(a.shape))
    try:
        target_shape = expected[sel].shape
    except IndexError:
        with pytest.raises(IndexError):
            a[sel] = 1
        _assert_whole(a, expected)
        return
    value = values_for(data.draw, target_shape)
    expected[sel] = value
    a[sel] = value
    _assert_whole(a, expected)


@SETTINGS
@given(st.data())
def test_fancy_write(data):
    a, expected = data.draw(arrays())
    sel = data.draw(fancy_selections(a.shape))
    try:
        target_shape = expected[sel].shape
    except IndexError:
        with pytest.raises(IndexError):
            a[sel] = 1
        _assert_whole(a, expected)
        return
    value = values_for(data.draw, target_shape)
    expected[sel] = value  # repeated indices: numpy's last-wins
    a[sel] = value
    _assert_whole(a, expected)


@SETTINGS
@given(st.data())
def test_orthogonal_write(data):
    a, expected = data.draw(arrays())
    sel = data.draw(orthogonal_selections(a.shape))
    exp, ix = oindex_expected(expected, sel)
    value = values_for(data.draw, exp.shape)
    if ix == ():
        expected[()] = value
    else:
        expected[ix] = np.broadcast_to(value, exp.shape).reshape(expected[ix].shape)
    a.oindex[sel if sel else ()] = value
    _assert_whole(a, expected)


@SETTINGS
@given(st.data())
def test_coordinate_write(data):
    a, expected = data.draw(arrays(shape=data.draw(shapes.filter(lambda s: len(s) > 0))))
    sel = data.draw(coordinate_selections(a.shape))
    try:
        target_shape = expected[sel].shape
    except IndexError:
        with pytest.raises(IndexError):
            a.vindex[sel] = 1
        return
    value = values_for(data.draw, target_shape)
    expected[sel] = value
    a.vindex[sel] = value
    _assert_whole(a, expected)


@SETTINGS
@given(st.data())
def test_block_write(data):
    a, expected = data.draw(arrays(shape=data.draw(shapes.filter(lambda s: len(s) > 0 and all(s)))))
    grid = a.cdata_shape
    idx = tuple(data.draw(st.integers(-g, g - 1)) for g in grid)
    el = []
    for i, g, c, s in zip(idx, grid, a.chunks, a.shape, strict=True):
        i = i + g if i < 0 else i
        el.append(slice(i * c, min((i + 1) * c, s)))
    el = tuple(el)
    value = values_for(data.draw, expected[el].shape)
    expected[el] = value
    a.blocks[idx] = value
    _assert_whole(a, expected)


@SETTINGS
@given(st.data())
def test_write_then_read_many(data):
    """A sequence of mixed writes; the array tracks a numpy model throughout."""
    a, expected = data.draw(arrays(shape=data.draw(shapes.filter(lambda s: len(s) > 0))))
    for _ in range(data.draw(st.integers(1, 4))):
        sel = data.draw(st.one_of(basic_selections(a.shape), fancy_selections(a.shape)))
        try:
            target_shape = expected[sel].shape
        except IndexError:
            continue
        value = values_for(data.draw, target_shape)
        expected[sel] = value
        a[sel] = value
        check_read(lambda sel=sel: a[sel], lambda sel=sel: expected[sel])
    _assert_whole(a, expected)


# --------------------------------------------------------------------------------------
# targeted cases (deterministic)


def _make(shape, chunks, data=None):
    a = cuzarr.create_array({}, shape=shape, dtype="i4", chunks=chunks)
    if data is None:
        data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    a[...] = data
    return a, data.copy()


@pytest.mark.parametrize(
    "sel",
    [
        (slice(None, None, -1),),
        (slice(None, None, -3), slice(5, 0, -2)),
        (slice(-1, -100, -1), 0),
        (slice(100, None, -2),),
        (Ellipsis, None, -1),
        (None, Ellipsis, None),
        (np.int64(-1), np.uint8(3)),
        ([0, 0, 0], slice(None)),
        (slice(None), [3, -1, 3]),
        ([[0, 1], [2, 3]], [[0], [1]]),  # broadcasting
        (0, slice(None), [1, 2]),  # 3-d below
    ],
)
def test_targeted_reads(sel):
    if len(sel) == 3 and not any(s is None or s is Ellipsis for s in sel):
        a, data = _make((3, 4, 5), (2, 3, 2))
    else:
        a, data = _make((7, 8), (3, 3))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a[sel].shape == data[sel].shape


def test_advanced_dims_placement():
    a, data = _make((4, 5, 6, 3), (2, 2, 4, 2))
    cases = [
        (slice(None), [0, 2], slice(None), [1, 0]),  # separated: advanced dims go first
        (slice(None), [0, 2], [1, 0], slice(None)),  # adjacent: stay in place
        ([1, 2], slice(1, 3), [[0], [5]], 0),
        (Ellipsis, [0, 1]),
        ([3], Ellipsis, [2]),
        (0, [1, 2], 3),
        (np.ones((4, 5), bool), 0),
        (slice(None), np.array([[True, False, True, False, True, False]] * 5), 1),
    ]
    for sel in cases:
        np.testing.assert_array_equal(a[sel], data[sel])
        assert a[sel].shape == data[sel].shape, sel


def test_repeated_index_write_last_wins():
    a, data = _make((10,), (3,))
    idx = [1, 5, 1, 1, 9, 5]
    vals = np.array([10, 20, 30, 40, 50, 60], dtype="i4")
    a[idx] = vals
    data[idx] = vals
    np.testing.assert_array_equal(a[...], data)
    a.vindex[[2, 2, 2],] = np.array([7, 8, 9], dtype="i4")
    data[[2, 2, 2]] = np.array([7, 8, 9], dtype="i4")
    np.testing.assert_array_equal(a[...], data)


def test_repeated_index_oindex_write_last_wins():
    a, data = _make((6, 6), (4, 4))
    rows = [0, 3, 0]
    cols = [5, 5]
    value = np.arange(6, dtype="i4").reshape(3, 2) + 100
    a.oindex[rows, cols] = value
    data[np.ix_(rows, cols)] = value
    np.testing.assert_array_equal(a[...], data)


def test_oindex_duplicates_read():
    a, data = _make((6, 6), (4, 4))
    np.testing.assert_array_equal(a.oindex[[5, 0, 5], [1, 1]], data[np.ix_([5, 0, 5], [1, 1])])


def test_mask_selection_methods():
    a, data = _make((5, 6), (2, 4))
    mask = (data % 3) == 0
    np.testing.assert_array_equal(a.get_mask_selection(mask), data[mask])
    np.testing.assert_array_equal(a[mask], data[mask])
    np.testing.assert_array_equal(a.vindex[mask], data[mask])
    a.set_mask_selection(mask, -1)
    data[mask] = -1
    np.testing.assert_array_equal(a[...], data)
    a[mask] = np.arange(mask.sum(), dtype="i4")
    data[mask] = np.arange(mask.sum(), dtype="i4")
    np.testing.assert_array_equal(a[...], data)


def test_value_broadcasting_writes():
    a, data = _make((4, 6), (3, 4))
    for sel, value in [
        ((slice(None), slice(None)), np.arange(6, dtype="i4")),
        ((slice(1, 3), slice(None)), np.arange(2, dtype="i4").reshape(2, 1)),
        (([0, 3], slice(None, None, 2)), np.array([[1], [2]], dtype="i4")),
        ((Ellipsis,), 5),
        ((None, 0), np.arange(6, dtype="i4")),
    ]:
        a[sel] = value
        data[sel] = value
        np.testing.assert_array_equal(a[...], data)
    with pytest.raises(ValueError):
        a[0:2, 0:2] = np.arange(3)


def test_write_casts_like_numpy():
    a, data = _make((5,), (2,))
    a[:] = np.array([1.9, -2.7, 3.2, 4.0, 5.5])
    data[:] = np.array([1.9, -2.7, 3.2, 4.0, 5.5])
    np.testing.assert_array_equal(a[:], data)
    a[[0, 1]] = [True, False]
    data[[0, 1]] = [True, False]
    np.testing.assert_array_equal(a[:], data)


def test_zero_d_indexing():
    a = cuzarr.create_array({}, shape=(), dtype="i4", fill_value=3)
    d = np.array(3, dtype="i4")
    for sel in [(), Ellipsis, None, (None, Ellipsis), (Ellipsis, None)]:
        np.testing.assert_array_equal(a[sel], d[sel])
        assert np.shape(a[sel]) == np.shape(d[sel])
    a[()] = 9
    assert a[()] == 9
    a[...] = 4
    assert a[...] == 4
    with pytest.raises(IndexError):
        a[0]
    with pytest.raises(IndexError):
        a[:]


def test_scalar_results_are_numpy_scalars():
    a, data = _make((3, 4), (2, 2))
    r = a[1, 2]
    assert np.ndim(r) == 0
    assert r == data[1, 2]
    assert np.asarray(r).dtype == np.dtype("i4")


def test_results_are_independent_copies():
    a, data = _make((4, 4), (4, 4))
    r = a[...]
    r[0, 0] = 999
    assert a[0, 0] == data[0, 0]
    r2 = a[0]
    assert r2.flags.writeable


@pytest.mark.parametrize(
    "sel",
    [
        np.True_,
        np.False_,
        (np.True_, 0),
        (slice(None), np.False_),
        (np.False_, Ellipsis),
        (Ellipsis, np.True_, [1, 0]),
        (np.array(True), slice(1, 3)),
    ],
)
def test_zero_d_boolean_index(sel):
    # numpy: a 0-d boolean adds a length-1 (True) or length-0 (False) axis, consuming none
    a, data = _make((4, 3), (3, 2))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a[sel].shape == data[sel].shape
    a[sel] = -5
    data[sel] = -5
    np.testing.assert_array_equal(a[...], data)


def test_zero_d_boolean_index_on_0d():
    a = cuzarr.create_array({}, shape=(), dtype="i4", fill_value=3)
    d = np.array(3, dtype="i4")
    for sel in (np.True_, np.False_):
        assert a[sel].shape == d[sel].shape
        np.testing.assert_array_equal(a[sel], d[sel])


@pytest.mark.parametrize(
    "sel",
    [
        (None, 0, Ellipsis, np.array([], dtype=np.intp)),
        (0, Ellipsis, [1, 0]),
        ([0, 1], Ellipsis, [2, 2]),
        ([1], None, [2]),
    ],
)
def test_ellipsis_or_newaxis_between_advanced_indices(sel):
    # numpy: advanced indices separated by an Ellipsis (even one expanding to no
    # dimensions) or by np.newaxis are not adjacent, so their dims go first
    a, data = _make((2, 3), (2, 2))
    assert a[sel].shape == data[sel].shape
    np.testing.assert_array_equal(a[sel], data[sel])


@pytest.mark.parametrize("sel", [[[], []], (slice(None), [[]]), ([[]], [[]])])
def test_empty_nested_list_indexes_like_numpy(sel):
    # numpy indexes with an empty (nested) list as intp, though np.asarray makes it float
    a, data = _make((3, 4), (2, 3))
    assert a[sel].shape == data[sel].shape
    assert a.lazy[sel].read().shape == data[sel].shape
    a[sel] = 7
    np.testing.assert_array_equal(a[...], data)


def test_empty_broadcast_skips_index_array_bounds_check():
    # numpy checks index arrays only when the advanced indices select something
    a, data = _make((3, 3), (2, 2))
    for sel in [([5], []), ([5], np.zeros((0, 1), int)), ([[9]], [[]])]:
        assert a[sel].shape == data[sel].shape
        assert a.lazy[sel].shape == data[sel].shape
        assert a.vindex[sel].shape == data[sel].shape
        a[sel] = 1
    np.testing.assert_array_equal(a[...], data)
    for sel in [(5, []), ([5], [True, False, False]), ([5], [0])]:
        with pytest.raises(IndexError, match="dimension 0"):
            a[sel]
    with pytest.raises(IndexError, match="dimension 0"):
        a.vindex[[5], [0]]


def test_zero_d_results_with_ellipsis_are_arrays():
    # numpy: all-integer selections give scalars, with an Ellipsis a 0-d array
    a, data = _make((3, 4), (2, 3))
    for sel in [(1, 2), (1, 2, Ellipsis), (Ellipsis, 1, 2), (np.array(1), 2, Ellipsis)]:
        r, d = a[sel], data[sel]
        assert type(r) is type(d) and r == d
        assert type(a.get_basic_selection(sel)) is type(d)
    z = cuzarr.create_array({}, shape=(), dtype="i4", fill_value=3)
    assert type(z[...]) is np.ndarray and z[...].shape == ()
    assert type(z[()]) is np.int32
    np.testing.assert_array_equal(np.asarray(z), np.array(3, "i4"))


def test_zero_d_vindex_read_write():
    a = cuzarr.create_array({}, shape=(), dtype="i4", fill_value=3)
    d = np.array(3, "i4")
    for m in (np.True_, np.False_, np.array(True)):
        np.testing.assert_array_equal(a.vindex[m], d[m])
        assert a.vindex[m].shape == d[m].shape
    a.vindex[()] = 5
    assert a[()] == 5
    a.vindex[np.False_] = 6
    assert a[()] == 5
    a.vindex[np.True_] = [7]
    assert a[()] == 7


@pytest.mark.parametrize(
    "sel",
    [
        [[True, False, True], [False, True, True]],
        (Ellipsis, [[True, False, True, False]] * 3),
        ([[True, False, True], [False, True, True]], 1),
        (0, [[False, True, True, False]] * 3),
    ],
)
def test_nested_list_boolean_masks(sel):
    # numpy: a nested list of bools is a multi-dimensional mask (it consumes ndim dims)
    a, data = _make((2, 3, 4), (1, 2, 3))
    assert a[sel].shape == data[sel].shape
    np.testing.assert_array_equal(a[sel], data[sel])
    np.testing.assert_array_equal(a.lazy[sel].read(), data[sel])
    a[sel] = -1
    data[sel] = -1
    np.testing.assert_array_equal(a[...], data)


# --------------------------------------------------------------------------------------
# regressions of an independent differential audit (index kinds numpy takes,
# 0-d write targets, empty masks, error types)


def _pair(shape=(3, 4), chunks=(2, 3), dtype="i2"):
    x = (np.arange(int(np.prod(shape))) % 100).astype(dtype).reshape(shape)
    a = cuzarr.create_array(
        cuzarr.storage.MemoryStore(), shape=shape, chunks=chunks, dtype=dtype, fill_value=0
    )
    a[...] = x
    return a, x


class _Index:
    def __index__(self):
        return 1


_TAKES = {
    "range": range(2),
    "ranges": (range(2), range(2)),
    "slice-and-range": (slice(None), range(3, 0, -2)),
    "memoryview": memoryview(np.array([0, 2])),
    "__index__": _Index(),
    "__index__-and-int": (_Index(), 2),
    "__index__-in-slices": (slice(_Index(), None), _Index()),
    "empty-mask-dim1": (slice(None), np.zeros(0, bool)),
    "empty-mask-0x4": np.zeros((0, 4), bool),
    "empty-mask-3x0": np.zeros((3, 0), bool),
    "empty-mask-0": np.zeros(0, bool),
}


@pytest.mark.parametrize("sel", list(_TAKES.values()), ids=list(_TAKES))
def test_index_kinds_numpy_takes(sel):
    import array as pyarray

    a, x = _pair()
    for s in (sel, pyarray.array("l", [0, 2])):
        want = x[s]
        np.testing.assert_array_equal(a[s], want)
        y = x.copy()
        y[s] = 7
        a[s] = 7
        np.testing.assert_array_equal(a[...], y)
        a[...] = x


_REFUSES = {"str": "ab", "bytes": b"ab", "set": {0, 1}, "float": 1.0, "floats": [1.0]}


@pytest.mark.parametrize("sel", [*_REFUSES.values(), None], ids=[*_REFUSES, "iterator"])
def test_index_kinds_numpy_refuses(sel):
    sel = iter([0, 1]) if sel is None else sel
    a, x = _pair()
    with pytest.raises(IndexError):
        x[sel]
    with pytest.raises(IndexError):
        a[sel]


@pytest.mark.parametrize("mask_shape", [(0, 5), (1, 0), (2, 0)])
def test_empty_masks_must_still_fit_where_not_empty(mask_shape):
    a, x = _pair()
    with pytest.raises(IndexError):
        x[np.zeros(mask_shape, bool)]
    with pytest.raises(IndexError):
        a[np.zeros(mask_shape, bool)]


def test_zero_d_targets_take_values_with_leading_length_one_axes():
    a0 = cuzarr.create_array(
        cuzarr.storage.MemoryStore(), shape=(), chunks=(), dtype="i2", fill_value=0
    )
    a0[...] = np.array([5])
    assert a0[...] == 5
    a0[...] = [[6]]
    assert a0[()] == 6
    a, x = _pair()
    a[1, 2, ...] = np.array([[60]])
    a[0, None, 1] = np.array([61])
    a.oindex[2, 3] = np.array([62])
    x[1, 2, ...] = np.array([[60]])
    x[0, None, 1] = np.array([61])
    x[2, 3] = 62
    np.testing.assert_array_equal(a[...], x)
    # one element by integers alone: numpy refuses any value with dimensions
    for sel in [(1, 2), (np.array(1), 2)]:
        with pytest.raises(ValueError):
            x[sel] = np.array([5])
        with pytest.raises(ValueError):
            a[sel] = np.array([5])
    with pytest.raises(ValueError):
        a0[()] = np.array([5])
    np.testing.assert_array_equal(a[...], x)


def test_a_single_vindex_point_casts_as_numpy_element_assignment():
    a, x = _pair(shape=(3,), chunks=(2,))
    for v in (np.float32("nan"), np.uint64(2**63)):
        with pytest.raises((ValueError, OverflowError, TypeError)):
            x[np.array(1)] = v
        with pytest.raises((ValueError, OverflowError, TypeError)):
            a.vindex[np.array(1)] = v
        with pytest.raises((ValueError, OverflowError, TypeError)):
            a.vindex[1] = v
    np.testing.assert_array_equal(a[...], x)
    a.vindex[np.array(2)] = np.float64(9.0)
    assert a[2] == 9


def test_bad_slices_raise_index_errors_that_numpy_code_also_catches():
    from cuzarr.errors import IndexTypeError, SliceStepError

    a, _ = _pair()
    for get in (lambda s: a[s], lambda s: a.oindex[s], lambda s: a.blocks[s]):
        with pytest.raises(SliceStepError) as e:
            get(slice(None, None, 0))
        assert isinstance(e.value, IndexError) and isinstance(e.value, ValueError)
        assert "dimension 0" in str(e.value)
        with pytest.raises(IndexTypeError) as e:
            get(slice(1.0, None))
        assert isinstance(e.value, IndexError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize(
    "sel",
    [np.array([0, 1]), [0, 1], (Ellipsis, Ellipsis), 1.5, (0, 0, 0)],
    ids=["array", "list", "two-ellipses", "float", "too-many"],
)
def test_malformed_block_selections_raise_index_error(sel):
    a, _ = _pair()
    with pytest.raises(IndexError):
        a.blocks[sel]
    with pytest.raises(IndexError):
        a.blocks[sel] = 1


def test_vindex_refuses_slices_as_zarr_does():
    a, _ = _pair()
    with pytest.raises(IndexError, match="dimension 1"):
        a.vindex[[0, 1], 0:2]
    with pytest.raises(IndexError, match="dimension 1"):
        a.vindex[[0, 1], 0:2] = 1


def test_mask_selections_need_boolean_masks():
    a, x = _pair()
    with pytest.raises(IndexError, match="boolean"):
        a.get_mask_selection(np.full(x.shape, 2))
    with pytest.raises(IndexError, match="boolean"):
        a.set_mask_selection(np.ones(x.shape, int), 5)
    np.testing.assert_array_equal(a[...], x)
    m = x % 3 == 0
    np.testing.assert_array_equal(a.get_mask_selection(m), x[m])
    a.set_mask_selection(m.tolist(), 5)  # nested lists of bools are masks too
    x[m] = 5
    np.testing.assert_array_equal(a[...], x)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.integers(1, 20), st.data())
def test_long_step1_projections_match_the_per_chunk_loop(size, chunk, data):
    """A step-1 slice over many chunks is projected with numpy
    (``projection._project_run``): the same chunks, selections and ``complete``
    flags (values and types) as the per-chunk loop."""
    from cuzarr.indexing import projection
    from cuzarr.metadata.chunk_grid import DimGrid

    a = data.draw(st.integers(0, size - 1))
    b = data.draw(st.integers(a + 1, size))
    dim = DimGrid(size, chunk)
    c0, c1 = a // chunk, (b - 1) // chunk
    fast = projection._project_run(a, b - 1, c0, c1, dim)
    saved = projection._VECTOR_MIN
    projection._VECTOR_MIN = 1 << 62
    try:
        slow = projection.project_slice(a, b, 1, dim)
    finally:
        projection._VECTOR_MIN = saved
    assert (fast.chunks, fast.chunk_sels, fast.out_sels, fast.out_len) == (
        slow.chunks, slow.chunk_sels, slow.out_sels, slow.out_len)
    assert [(type(c), c) for c in fast.complete] == [(type(c), c) for c in slow.complete]
