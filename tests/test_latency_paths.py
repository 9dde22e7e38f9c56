"""The small-call fast paths (benchmarks/bench_latency.py): reads, writes and
opens answered in the calling thread, plans built without the general
classification, consolidated group listings without the event loop, member
metadata fetched in batches, and pipelines shared per metadata object. Each is
checked against numpy, zarr-python, or the general path it stands in for."""

from __future__ import annotations

import itertools
import pickle
import threading
import warnings

import numpy as np
import pytest
import zarr

import cuzarr
import cuzarr.core.array as array_mod
import cuzarr.core.group as group_mod
from cuzarr.codecs.pipeline import pipeline_for
from cuzarr.core import engine
from cuzarr.core.inline import setitem_inline
from cuzarr.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    GroupNotFoundError,
    MetadataError,
    ReadOnlyError,
)
from cuzarr.indexing import selection as sel_mod
from cuzarr.indexing.projection import EDGE, LOOSE, DimProjection, combine_complete
from cuzarr.metadata.chunk_grid import DimGrid

ZSTD = [{"name": "zstd", "configuration": {"level": 1}}]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return cuzarr.storage.MemoryStore() if request.param == "memory" else str(tmp_path / "s")


def _no_loop(monkeypatch):
    """Make any trip through the event loop fail: what runs is a fast path."""

    def refuse(coro, *a, **k):
        coro.close()
        raise AssertionError("went through the event loop")

    monkeypatch.setattr(array_mod, "sync", refuse)
    monkeypatch.setattr(group_mod, "sync", refuse)
    import cuzarr.api.sync_create as sync_create_api
    import cuzarr.api.synchronous as sync_api

    monkeypatch.setattr(sync_api, "sync", refuse)
    monkeypatch.setattr(sync_create_api, "sync", refuse)


def _make(store, shape=(37, 29), chunks=(8, 6), dtype="float32", fmt=3, shards=None, **kw):
    a = cuzarr.create_array(
        store, name="a", shape=shape, chunks=chunks, shards=shards, dtype=dtype,
        zarr_format=fmt, compressors=ZSTD if fmt == 3 else None, fill_value=0, **kw,
    )  # fmt: skip
    data = (np.arange(np.prod(shape)) % 251).reshape(shape).astype(dtype)
    a[...] = data
    return a, data


# -- planning -----------------------------------------------------------------------


def _general_plan(selection, shape, dims, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(sel_mod, "_plain_basic", lambda *a: None)
        return sel_mod.normalize_numpy(selection, shape, dims)


SELECTIONS = [
    (), 0, -1, 5, (3,), (3, 4), (-1, -1), (0, slice(None)), slice(None),
    (slice(2, 9), slice(1, 20)), (slice(-5, None), 3), (slice(10, 2), slice(None)),
    (slice(None, 100), slice(-100, 4)), (slice(0, 0),), (36, 28), (slice(5, 6), -3),
]  # fmt: skip


@pytest.mark.parametrize("selection", SELECTIONS, ids=repr)
def test_plain_basic_plan_is_the_general_plan(selection, monkeypatch):
    shape = (37, 29)
    dims = [DimGrid(37, 8), DimGrid(29, 6)]
    fast = sel_mod._plain_basic(selection, shape, dims)
    assert fast is not None
    assert fast == _general_plan(selection, shape, dims, monkeypatch)


@pytest.mark.parametrize(
    "selection",
    [(1, 2, 3), (np.int64(3), 2), (True, 1), (slice(0, 5, 2), 1), (Ellipsis, 1), (None, 1),
     ([1, 2], 3), (slice(0.0, 3), 1), (40, 1), (-38, 0), "x"],
    ids=repr,
)  # fmt: skip
def test_plain_basic_leaves_the_rest_to_the_general_path(selection):
    assert sel_mod._plain_basic(selection, (37, 29), [DimGrid(37, 8), DimGrid(29, 6)]) is None


def test_zero_dimensional_plans(monkeypatch):
    for selection in [(), Ellipsis]:
        fast = sel_mod.normalize_numpy(selection, (), [])
        assert fast == _general_plan(selection, (), [], monkeypatch)


@pytest.mark.parametrize(
    "flags", list(itertools.product([True, False, EDGE, LOOSE], repeat=2)), ids=repr
)
def test_one_chunk_items_as_the_general_path(flags):
    projections = [
        DimProjection([2], [slice(1, 3)], [slice(0, 2)], [flags[0]], 2),
        DimProjection([0], [slice(0, 4)], [slice(0, 4)], [flags[1]], 4),
    ]
    items = engine.chunk_items(projections)
    assert items == [((2, 0), (slice(1, 3), slice(0, 4)), (slice(0, 2), slice(0, 4)),
                      combine_complete(flags))]  # fmt: skip
    assert items.dims == projections
    assert isinstance(items[0][3], bool)
    # the general path (two chunks on one dimension), restricted to the first
    two = [projections[0], DimProjection([0, 1], [slice(0, 4)] * 2, [slice(0, 4)] * 2,
                                         [flags[1]] * 2, 8)]  # fmt: skip
    assert engine.chunk_items(two)[0] == items[0]


# -- reads in the calling thread ------------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_small_reads_take_no_loop_and_match_numpy(store, fmt, monkeypatch, rng):
    a, data = _make(store, fmt=fmt)
    _no_loop(monkeypatch)
    for selection in SELECTIONS[1:]:
        np.testing.assert_array_equal(a[selection], data[selection])
    assert a[3, 4] == data[3, 4] and np.isscalar(a[3, 4])
    for _ in range(20):
        i, j = rng.integers(0, 37, 10), rng.integers(0, 29, 10)
        np.testing.assert_array_equal(a.vindex[i, j], data[i, j])
        np.testing.assert_array_equal(a.get_coordinate_selection((i, j)), data[i, j])
        oi, oj = np.unique(i[:3]), np.unique(j[:2])
        np.testing.assert_array_equal(a.oindex[oi, oj], data[np.ix_(oi, oj)])
    np.testing.assert_array_equal(a.vindex[[], []], data[[], []])
    assert a.vindex[np.array(3), np.array(4)] == data[3, 4]
    np.testing.assert_array_equal(a.oindex[3, [1, 2]], data[3, [1, 2]])
    np.testing.assert_array_equal(a.get_basic_selection((slice(2, 5), 1)), data[2:5, 1])
    np.testing.assert_array_equal(np.asarray(a), data)  # __array__ (prototype="cpu")


def test_fast_reads_agree_with_zarr_python(tmp_path, rng):
    path = str(tmp_path / "z")
    a, _data = _make(path)
    z = zarr.open_array(path, path="a", mode="r")
    for _ in range(30):
        i, j = int(rng.integers(-37, 37)), int(rng.integers(-29, 29))
        assert a[i, j] == z[i, j]
        np.testing.assert_array_equal(a[i], z[i])
        p = (rng.integers(0, 37, 7), rng.integers(0, 29, 7))
        np.testing.assert_array_equal(a.vindex[p], z.vindex[p])


def test_sharded_small_reads(store, monkeypatch):
    a, data = _make(store, shape=(40, 30), chunks=(4, 5), shards=(8, 10))
    _no_loop(monkeypatch)
    np.testing.assert_array_equal(a[3, 7], data[3, 7])
    np.testing.assert_array_equal(a[0:6, 2:9], data[0:6, 2:9])
    np.testing.assert_array_equal(a.vindex[[1, 2], [3, 4]], data[[1, 2], [3, 4]])


def test_bigger_reads_still_go_through_the_loop(store, monkeypatch):
    a, _data = _make(store, shape=(200, 200), chunks=(10, 10))
    _no_loop(monkeypatch)
    with pytest.raises(AssertionError, match="event loop"):
        a[...]  # 400 chunks
    with pytest.raises(AssertionError, match="event loop"):
        # 400 chunks (beyond engine.SMALL_READ_MAX)
        a.vindex[np.repeat(np.arange(0, 200, 10), 20), np.tile(np.arange(0, 200, 10), 20)]


def test_a_large_orthogonal_read_is_planned_once(store, monkeypatch):
    """An orthogonal or point selection too large to read inline is planned
    once: the inline attempt's plan goes on to the event loop's read (and the
    result is numpy's)."""
    from cuzarr.core import async_array, inline

    a, data = _make(store, shape=(200, 200), chunks=(10, 10))
    calls = []
    for mod in (inline, async_array):
        real = mod.normalize_orthogonal
        monkeypatch.setattr(mod, "normalize_orthogonal",
                            lambda *args, _real=real: calls.append(1) or _real(*args))
    rows = np.random.default_rng(1).permutation(200)[:50]
    np.testing.assert_array_equal(a.oindex[rows, 5:180], data[rows][:, 5:180])
    assert len(calls) == 1
    calls.clear()
    np.testing.assert_array_equal(a.oindex[[3, 4], 1:3], data[[3, 4]][:, 1:3])  # small: inline
    assert len(calls) == 1
    # points likewise: their items made once
    made = []
    real_items = inline.engine.coordinate_items
    monkeypatch.setattr(inline.engine, "coordinate_items",
                        lambda *args: made.append(1) or real_items(*args))
    pts = (np.arange(0, 200, 3), np.arange(199, -1, -3))
    np.testing.assert_array_equal(a.vindex[pts], data[pts])
    assert len(made) == 1


def test_small_read_threshold():
    meta = cuzarr.create_array({}, shape=(10000,), chunks=(1000,), dtype="f8").metadata
    out = np.empty(3)
    assert engine.small_read(meta, 4, out)
    assert engine.small_read(meta, 131, out)  # 131 x 8,000 B: at most 1 MiB
    assert not engine.small_read(meta, 132, out)  # past the bytes
    tiny = cuzarr.create_array({}, shape=(10000,), chunks=(100,), dtype="f4").metadata
    assert engine.small_read(tiny, 256, out)  # 256 x 400 B
    assert not engine.small_read(tiny, 257, out)  # past the chunks
    big = cuzarr.create_array({}, shape=(10**6,), chunks=(10**5,), dtype="f8").metadata
    assert engine.small_read(big, 4, out) and not engine.small_read(big, 5, out)


def test_read_errors_are_the_same(store):
    a, _ = _make(store)
    with pytest.raises(IndexError):
        a[37, 0]
    with pytest.raises(IndexError):
        a[0, -30]
    with pytest.raises(IndexError):
        a.vindex[[0, 40], [0, 1]]
    with pytest.raises(IndexError):
        a[0, 0, 0]


# -- writes in the calling thread ----------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_small_writes_take_no_loop_and_match_numpy(store, fmt, monkeypatch, rng):
    a, data = _make(store, fmt=fmt)
    data = data.copy()
    _no_loop(monkeypatch)
    writes = [
        ((3, 4), np.float32(7)),
        ((-1, -1), 9.5),
        ((slice(0, 8), slice(0, 6)), rng.random((8, 6))),  # one chunk exactly
        ((slice(1, 11), slice(1, 11)), rng.random((10, 10))),  # read-modify-write
        ((slice(30, None), slice(24, None)), rng.random((7, 5))),  # the edge chunk
        ((slice(2, 4), 3), [1, 2]),
        ((slice(8, 16), slice(6, 12)), 0),  # a whole chunk of fill: deleted
    ]
    for selection, value in writes:
        a[selection] = value
        data[selection] = value
        np.testing.assert_array_equal(a[selection], data[selection])
    with pytest.raises(AssertionError, match="event loop"):
        a[5] = 3  # a row: 5 chunks, more than a small write
    monkeypatch.undo()
    a[5] = 3
    data[5] = 3
    np.testing.assert_array_equal(a[...], data)
    if not isinstance(store, str):
        gone, kept = ("a/c/1/1", "a/c/0/0") if fmt == 3 else ("a/1.1", "a/0.0")
        assert gone not in a.store._store_dict and kept in a.store._store_dict


def test_fast_writes_read_back_in_zarr_python(tmp_path, rng):
    path = str(tmp_path / "z")
    a, data = _make(path)
    data = data.copy()
    for _ in range(40):
        i, j = int(rng.integers(0, 37)), int(rng.integers(0, 29))
        v = np.float32(rng.random())
        a[i, j] = v
        data[i, j] = v
        h, w = min(int(rng.integers(1, 6)), 37 - i), min(int(rng.integers(1, 6)), 29 - j)
        block = rng.random((h, w)).astype("f4")
        a[i : i + h, j : j + w] = block
        data[i : i + h, j : j + w] = block
    np.testing.assert_array_equal(zarr.open_array(path, path="a", mode="r")[...], data)


def test_write_fallbacks_and_errors(store):
    a, _data = _make(store)
    b = cuzarr.create_array({}, shape=(2, 2), dtype="float32")
    b[...] = 5
    a[0:2, 0:2] = b  # a cuzarr array as the value: materialized on the loop
    np.testing.assert_array_equal(a[0:2, 0:2], np.full((2, 2), 5, "f4"))
    a[[1, 2], [3, 4]] = 6  # advanced indices: the general path
    assert a[1, 3] == 6 and a[2, 4] == 6
    with pytest.raises(ValueError):
        a[0:2, 0:2] = np.ones((3, 3))
    with pytest.raises(IndexError):
        a[40, 0] = 1
    ro = cuzarr.open_array(a.store, path="a", mode="r")
    with pytest.raises(ReadOnlyError):
        ro[0, 0] = 1
    with pytest.raises((ValueError, TypeError)):
        a[0, 0] = "abc"


def test_structured_field_writes_are_unchanged(store):
    dt = np.dtype([("x", "i4"), ("y", "f8")])
    a = cuzarr.create_array(store, name="r", shape=(6,), chunks=(3,), dtype=dt, zarr_format=2)
    a["x"] = np.arange(6)
    a[1] = (10, 2.5)
    got = a[...]
    assert got["x"].tolist() == [0, 10, 2, 3, 4, 5] and got["y"][1] == 2.5


def test_concurrent_small_writes_keep_every_update(store):
    a = cuzarr.create_array(store, name="c", shape=(16, 16), chunks=(16, 16), dtype="i4",
                            fill_value=0)  # fmt: skip
    cells = [(i, j) for i in range(16) for j in range(16)]

    def work(t: int) -> None:
        for i, j in cells[t::8]:
            a[i, j] = i * 16 + j + 1

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(a[...], np.arange(1, 257).reshape(16, 16))


def test_small_write_limits(store):
    a, _ = _make(store, shape=(2048, 2048), chunks=(1024, 1024), dtype="f8")
    items = engine.chunk_items(sel_mod.normalize_numpy(
        (slice(None), slice(None)), a.shape, a._async_array._write_dims()).projections)  # fmt: skip
    v = np.zeros(a.shape)
    assert len(items) == 4
    # four 8 MiB chunks: encoded in parallel by the pool, not inline (the sync
    # Array decides with small_write before converting the value)
    aa = a._async_array
    assert not engine.small_write(aa.metadata, len(items))
    assert setitem_inline(aa, (slice(None), slice(None)), v) is NotImplemented


# -- async API: same results (the small reads it does inline) ------------------------


def test_async_small_reads(store):
    import asyncio

    a, data = _make(store)

    async def go():
        aa = await cuzarr.api.asynchronous.open_array(a.store, path="a", mode="r")
        return await aa.getitem((3, 4)), await aa.getitem((slice(0, 9), 2))

    x, y = asyncio.run(go())
    assert x == data[3, 4]
    np.testing.assert_array_equal(y, data[0:9, 2])


# -- opens in the calling thread ------------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_array_and_group_take_no_loop(store, fmt, monkeypatch):
    a, data = _make(store, fmt=fmt)
    g = cuzarr.open_group(a.store, mode="r+")
    g.attrs["k"] = 1
    s = a.store
    _no_loop(monkeypatch)
    for mode in ("r", "r+", "a", None):
        b = cuzarr.open_array(s, path="a", mode=mode)
        assert b.shape == a.shape and b.zarr_format == fmt and b.metadata == a.metadata
        assert b.read_only == (mode == "r")
        np.testing.assert_array_equal(b[1:3, 4], data[1:3, 4])
        h = cuzarr.open_group(s, mode=mode)
        assert h.attrs["k"] == 1 and h.zarr_format == fmt
    assert cuzarr.open_array(s, path="a", zarr_format=fmt).zarr_format == fmt
    with pytest.raises(ReadOnlyError):
        cuzarr.open_array(s, path="a", mode="r")[0, 0] = 1


def test_open_meta_array_and_config(store):
    a, _ = _make(store)
    b = cuzarr.open_array(a.store, path="a", mode="r", meta_array=np.empty(0))
    assert isinstance(b[0:2, 0:2], np.ndarray)
    c = cuzarr.open_array(a.store, path="a", config={"write_empty_chunks": True})
    assert c.config.write_empty_chunks is True


def test_open_errors_go_the_async_way(store):
    a, _ = _make(store)
    with pytest.raises(ArrayNotFoundError):
        cuzarr.open_array(a.store, path="nothing", mode="r")
    with pytest.raises(ArrayNotFoundError):  # a group is there (GroupFoundError)
        cuzarr.open_array(a.store, path="", mode="r")
    with pytest.raises((GroupNotFoundError, ContainsArrayError)):
        cuzarr.open_group(a.store, path="a", mode="r")
    with pytest.raises(ContainsArrayError):
        cuzarr.open_group(a.store, path="a", mode="a")
    with pytest.raises(GroupNotFoundError):
        cuzarr.open_group(a.store, path="nothing", mode="r")
    with pytest.raises(MetadataError):
        cuzarr.open_group(a.store, mode="r", use_consolidated=True)
    made = cuzarr.open_group(a.store, path="new", mode="a")  # created, as before
    assert made.path == "new"
    n = cuzarr.open_array(a.store, path="n", mode="a", shape=(3,), dtype="i2")
    assert n.shape == (3,)
    with pytest.warns(Warning):
        cuzarr.open_group(a.store, mode="r", cache_attrs=True)


# -- groups ---------------------------------------------------------------------------


def _hierarchy(store, fmt=3):
    g = cuzarr.create_group(store, path="h", zarr_format=fmt)
    for k in range(12):
        g.create_array(f"m{k:02d}", shape=(4,), chunks=(2,), dtype="i2")
    sub = g.create_group("sub")
    sub.create_array("inner", shape=(3,), dtype="f4")
    sub.create_group("deeper").create_array("x", shape=(1,), dtype="u1")
    cuzarr.consolidate_metadata(store, path="h")
    return g


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_listings_without_the_loop(store, fmt, monkeypatch):
    _hierarchy(store, fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp = cuzarr.open_group(store, path="h", mode="r", use_consolidated=False)
        gc = cuzarr.open_group(store, path="h", mode="r", use_consolidated=True)
    plain = {
        d: [(k, type(v).__name__, getattr(v, "shape", None)) for k, v in gp.members(max_depth=d)]
        for d in (0, 1, None)
    }
    plain_keys = gp.keys()
    _no_loop(monkeypatch)
    assert gc._async_group.consolidated is not None
    assert gc.keys() == plain_keys == sorted(plain_keys)
    assert list(gc) == plain_keys and len(gc) == len(plain_keys)
    for d in (0, 1, None):
        got = [(k, type(v).__name__, getattr(v, "shape", None)) for k, v in gc.members(max_depth=d)]
        assert got == plain[d]
    assert gc["m03"].shape == (4,)
    assert gc["sub/inner"].dtype == np.dtype("f4")
    assert gc["sub"]["deeper"]["x"].shape == (1,)
    assert "m03" in gc and "sub/deeper" in gc and "nope" not in gc and 3 not in gc
    with pytest.raises(KeyError):
        gc["nope"]
    with pytest.raises(ValueError):
        gc.members(max_depth=-1)
    assert [k for k, _ in gc.arrays()] == [f"m{k:02d}" for k in range(12)]
    assert [k for k, _ in gc.groups()] == ["sub"]


def test_members_from_the_store_match_zarr_python(tmp_path):
    path = str(tmp_path / "z")
    g = zarr.create_group(path, zarr_format=3)
    for k in range(20):
        g.create_array(f"a{k}", shape=(k + 1,), dtype="i4")
    g.create_group("grp", attributes={"x": 1})
    (tmp_path / "z" / "not_a_node").mkdir()  # listed, but no node: left out
    c = cuzarr.open_group(path, mode="r", use_consolidated=False)
    mine = [(k, type(v).__name__, getattr(v, "shape", None)) for k, v in c.members()]
    theirs = [(k, type(v).__name__, getattr(v, "shape", None)) for k, v in
              zarr.open_group(path, mode="r", use_consolidated=False).members()]  # fmt: skip
    assert sorted(mine) == sorted(theirs)
    assert c.keys() == sorted(k for k, *_ in theirs)
    assert c["grp"].attrs["x"] == 1


def test_members_of_mixed_formats(store):
    g = cuzarr.create_group(store, path="m", zarr_format=3)
    g.create_array("v3", shape=(2,), dtype="i1")
    cuzarr.create_array(store, name="m/v2", shape=(3,), dtype="i1", zarr_format=2)
    cuzarr.create_group(store, path="m/g2", zarr_format=2, attributes={"a": 2})
    got = {k: (type(v).__name__, v.zarr_format) for k, v in g.members()}
    assert got == {"v3": ("Array", 3), "v2": ("Array", 2), "g2": ("Group", 2)}
    assert g["g2"].attrs["a"] == 2


def test_malformed_member_metadata_still_raises(store):
    g = cuzarr.create_group(store, path="bad")
    g.create_array("ok", shape=(1,), dtype="i1")
    s = cuzarr.open_group(store, path="bad").store
    import asyncio

    asyncio.run(s.set("bad/broken/zarr.json", b"{not json"))
    with pytest.raises(MetadataError):
        cuzarr.open_group(store, path="bad", mode="r").members()


# -- shared pipelines ------------------------------------------------------------------


def test_pipeline_shared_per_metadata_object(store):
    a, data = _make(store)
    meta = a.metadata
    assert pipeline_for(meta) is pipeline_for(meta) is a._async_array._pipeline
    b = cuzarr.open_array(a.store, path="a", mode="r")
    assert b.metadata == meta
    copy = pickle.loads(pickle.dumps(meta))
    assert copy == meta and "_pipeline_cache" not in copy.__dict__
    assert pipeline_for(copy) is not pipeline_for(meta)
    assert pipeline_for(meta.evolve(order="F")) is not pipeline_for(meta)
    a.resize((40, 29))  # new metadata, new grid: reads and writes plan on it
    a[39, 28] = 3
    assert a[39, 28] == 3 and a.shape == (40, 29)
    np.testing.assert_array_equal(a[:37], data)


# -- local store: the root's real path resolved once -----------------------------------


def test_realpath_below_root_is_realpath(tmp_path):
    import os

    from cuzarr.storage import LocalStore

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    real_root = tmp_path / "real_root"
    (real_root / "a" / "b").mkdir(parents=True)
    (real_root / "a" / "in_link").symlink_to("b")  # relative, inside
    (real_root / "a" / "out_link").symlink_to(outside / "deep")
    (real_root / "a" / "up_link").symlink_to("../a/b")
    (real_root / "chain").symlink_to("a/in_link")
    (tmp_path / "root_link").symlink_to(real_root)  # the root itself through a link
    for root in (real_root, tmp_path / "root_link"):
        s = LocalStore(root)
        s._real_root = os.path.realpath(s._root_str)
        for rel in ["", "a", "a/b", "a/in_link", "a/out_link", "a/up_link", "chain", "a/b/x"]:
            p = os.path.join(s._root_str, rel) if rel else s._root_str
            assert s._realpath_below_root(p) == os.path.realpath(p), rel


def test_symlinked_directories_still_refused(tmp_path):
    import asyncio

    from cuzarr.errors import StoreKeyError
    from cuzarr.storage import LocalStore

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "ok").mkdir(parents=True)
    (root / "evil").symlink_to(outside)
    (root / "fine").symlink_to("ok")
    s = LocalStore(root)
    with pytest.raises(StoreKeyError):
        asyncio.run(s.set("evil/x", b"1"))
    asyncio.run(s.set("fine/x", b"1"))
    assert (root / "ok" / "x").read_bytes() == b"1"
    with pytest.raises(StoreKeyError):
        cuzarr.open_array(str(root), path="evil/arr", mode="r")


def test_plain_group_lookups_without_the_loop(store, monkeypatch):
    _hierarchy(store)
    g = cuzarr.open_group(store, path="h", mode="r", use_consolidated=False)
    assert g._async_group.consolidated is None
    with monkeypatch.context() as m:
        _no_loop(m)
        assert g["m03"].shape == (4,)
        assert g["sub/deeper/x"].dtype == np.dtype("u1")
        assert isinstance(g["sub"], cuzarr.Group)
        assert "m03" in g and "sub/inner" in g and 3 not in g
    with pytest.raises(KeyError):
        g["nope"]  # the async way raises the error
    assert "nope" not in g
    with pytest.raises(ValueError):
        g[".."]


def test_bench_latency_script_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_latency.py"
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, str(script), "--contenders", "cuzarr", "--stores", "memory",
         "--cases", "a[i,j],write a[i,j],keys() cons", "--rounds", "1", "--batch-ms", "1",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "!!" not in r.stdout  # a wrong result is reported with '!!'
    import json

    got = json.loads(out.read_text())["memory"]
    assert {"a[i,j]", "write a[i,j]", "keys() cons 1k"} <= set(got)


def test_a_small_write_that_goes_the_slow_way_converts_its_value_once(tmp_path):
    # np.asarray of the value (a dask array: a compute) happens once, whether the
    # write runs inline, is too big for it, runs under GPU emulation, or finds
    # its chunk's lock held by another writer
    import asyncio
    import threading

    class Lazy:
        shape, dtype, ndim = (3,), np.dtype("f8"), 1

        def __init__(self):
            self.n = 0

        def __array__(self, dtype=None, copy=None):
            self.n += 1
            return np.full(3, 2.0)

    store = cuzarr.storage.LocalStore(tmp_path / "s")
    a = cuzarr.create_array(store, shape=(10,), chunks=(5,), dtype="f8")
    v = Lazy()
    a[:3] = v
    assert v.n == 1
    with cuzarr.config.set({"gpu.emulate": True}):
        v = Lazy()
        a[3:6] = v
        assert v.n == 1
    held, release = threading.Event(), threading.Event()

    def hold():
        async def main():
            async with store.lock_keys(["c/0"]):
                held.set()
                await asyncio.to_thread(release.wait, 10)

        asyncio.run(main())

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    threading.Timer(0.2, release.set).start()
    v = Lazy()
    a[0:3] = v  # the lock is busy: written through the loop once it is free
    t.join(10)
    assert v.n == 1
    np.testing.assert_array_equal(a[...], [2, 2, 2, 2, 2, 2, 0, 0, 0, 0])
