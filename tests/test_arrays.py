"""Arrays: creation, modes, resize/append, fill values, empty chunks, info,
numpy protocols, the async API, config, and the sync API inside event loops."""

import asyncio
import json
import threading

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr import errors
from cuzarr.storage import LocalStore, MemoryStore


@pytest.fixture(params=["dict", "local"])
def store(request, tmp_path):
    return {} if request.param == "dict" else tmp_path / "a.zarr"


def chunk_keys(a):
    """Stored chunk keys of array ``a`` (metadata documents excluded)."""

    async def main():
        prefix = a.path + "/" if a.path else ""
        keys = [
            k[len(prefix) :]
            async for k in a.store.list_prefix(prefix)
            if k.rsplit("/", 1)[-1] not in ("zarr.json", ".zarray", ".zattrs", ".zgroup")
        ]
        return sorted(keys)

    return asyncio.run(main())


class CountingStore(MemoryStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gets = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append(key)
        return await super().get(key, prototype, byte_range)


# --------------------------------------------------------------------------------------
# create / open modes


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_properties(store, zarr_format):
    a = cuzarr.create_array(
        store,
        shape=(10, 7),
        dtype="i4",
        chunks=(3, 4),
        fill_value=5,
        zarr_format=zarr_format,
        attributes={"a": 1},
    )
    assert isinstance(a, cuzarr.Array)
    assert a.shape == (10, 7)
    assert a.dtype == np.dtype("i4")
    assert a.ndim == 2
    assert a.size == 70
    assert a.nbytes == 70 * 4
    assert a.chunks == (3, 4)
    assert a.fill_value == 5
    assert a.order == "C"
    assert a.zarr_format == zarr_format
    assert a.nchunks == 4 * 2
    assert a.nchunks_initialized == 0
    assert a.cdata_shape == (4, 2)
    assert a.shards is None
    assert a.path == ""
    assert a.attrs["a"] == 1
    assert len(a) == 10
    np.testing.assert_array_equal(a[...], np.full((10, 7), 5, "i4"))
    b = cuzarr.open_array(store, mode="r")
    assert (b.shape, b.dtype, b.chunks, b.fill_value, b.zarr_format) == (
        a.shape,
        a.dtype,
        a.chunks,
        5,
        zarr_format,
    )


def test_open_array_modes(tmp_path):
    p = tmp_path / "arr"
    with pytest.raises(errors.ArrayNotFoundError):
        cuzarr.open_array(p, mode="r")
    with pytest.raises(errors.ArrayNotFoundError):
        cuzarr.open_array(p, mode="r+")
    # a with shape creates
    a = cuzarr.open_array(p, mode="a", shape=(4,), dtype="i4", chunks=(2,))
    a[:] = [1, 2, 3, 4]
    # a on existing opens (shape ignored)
    b = cuzarr.open_array(p, mode="a")
    np.testing.assert_array_equal(b[:], [1, 2, 3, 4])
    # w- refuses existing
    with pytest.raises(errors.ContainsArrayError):
        cuzarr.open_array(p, mode="w-", shape=(4,), dtype="i4")
    # r+ writes
    c = cuzarr.open_array(p, mode="r+")
    c[0] = 10
    # r reads, refuses writes
    r = cuzarr.open_array(p, mode="r")
    assert r[0] == 10
    with pytest.raises(errors.ReadOnlyError):
        r[0] = 0
    # w replaces
    w = cuzarr.open_array(p, mode="w", shape=(2, 2), dtype="f8", chunks=(1, 1))
    assert w.shape == (2, 2)
    np.testing.assert_array_equal(cuzarr.open_array(p, mode="r")[...], np.zeros((2, 2)))
    assert chunk_keys(w) == []
    # w- on a new path creates
    n = cuzarr.open_array(tmp_path / "new", mode="w-", shape=(3,), dtype="u1")
    assert n.shape == (3,)
    with pytest.raises(ValueError):
        cuzarr.open_array(tmp_path / "new2", mode="w")  # no shape


def test_overwrite_removes_old_chunks(store):
    a = cuzarr.create_array(store, shape=(4,), dtype="i4", chunks=(2,))
    a[:] = [1, 2, 3, 4]
    b = cuzarr.create_array(store, shape=(4,), dtype="i4", chunks=(2,), overwrite=True)
    np.testing.assert_array_equal(b[:], [0, 0, 0, 0])
    assert chunk_keys(b) == []


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", ["i1", "u2", "i4", "u8", "f2", "f4", "f8", "c8", "c16", "bool"])
def test_dtypes_round_trip(zarr_format, dtype, rng):
    data = (rng.random((7, 5)) * 100).astype(dtype)
    a = cuzarr.create_array(
        {}, shape=data.shape, dtype=dtype, chunks=(3, 2), zarr_format=zarr_format
    )
    a[...] = data
    out = a[...]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize("order", ["C", "F"])
def test_order_v2(order, rng):
    data = rng.integers(0, 100, (6, 5)).astype("i4")
    a = cuzarr.create_array(
        {}, shape=data.shape, dtype="i4", chunks=(4, 3), zarr_format=2, order=order
    )
    a[...] = data
    assert a.order == order
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[1:5, 1:4], data[1:5, 1:4])


# --------------------------------------------------------------------------------------
# resize / append


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_resize_shrink_deletes_chunks(store, zarr_format):
    a = cuzarr.create_array(
        store, shape=(10, 10), dtype="i4", chunks=(3, 3), zarr_format=zarr_format
    )
    data = np.arange(100, dtype="i4").reshape(10, 10)
    a[...] = data
    assert a.nchunks_initialized == 16
    a.resize((5, 4))
    assert a.shape == (5, 4)
    assert a.nchunks == 2 * 2
    assert a.nchunks_initialized == 4
    assert len(chunk_keys(a)) == 4
    np.testing.assert_array_equal(a[...], data[:5, :4])
    b = cuzarr.open_array(store, mode="r")
    assert b.shape == (5, 4)
    np.testing.assert_array_equal(b[...], data[:5, :4])
    # growing again: the region beyond the old shape reads as fill, not stale data
    a.resize(10, 10)
    assert a.shape == (10, 10)
    expected = np.zeros((10, 10), "i4")
    expected[:5, :4] = data[:5, :4]
    got = a[...]
    # elements inside kept chunks but outside (5, 4) were never cleared by zarr-python
    # either; compare only what the contract fixes: the kept region and the deleted chunks
    np.testing.assert_array_equal(got[:5, :4], data[:5, :4])
    np.testing.assert_array_equal(got[6:, :], 0)
    np.testing.assert_array_equal(got[:, 6:], 0)


@pytest.mark.parametrize("shards", [None, (4, 4)])
def test_resize_of_a_huge_sparse_array_lists_instead_of_enumerating(shards):
    # 2**80 grid positions past the new edge: naming each would never finish
    store = {}
    a = cuzarr.create_array(
        store, shape=(2**40, 2**40), chunks=(2, 2), shards=shards, dtype="u1"
    )
    a[0:6, 0:6] = 1
    a[-1, -1] = 2
    a.resize((3, 5))
    assert a.shape == (3, 5)
    n = 2 if shards is None else 4
    expected = {f"c/{i}/{j}" for i in range(-(-3 // n)) for j in range(-(-5 // n))}
    assert {k for k in store if k.startswith("c/")} == expected
    np.testing.assert_array_equal(a[...], 1)


def test_resize_shrinking_several_dimensions_deletes_each_outside_chunk_once(tmp_path):
    a = cuzarr.create_array(tmp_path / "a", shape=(9, 8, 7), chunks=(2, 3, 2), dtype="u1")
    a[...] = 1
    a.resize((3, 8, 2))
    kept = {f"c/{i}/{j}/{k}" for i in range(2) for j in range(3) for k in range(1)}
    assert set(chunk_keys(a)) == kept
    np.testing.assert_array_equal(a[...], 1)


def test_resize_grow(store):
    a = cuzarr.create_array(store, shape=(3,), dtype="f4", chunks=(2,), fill_value=-1)
    a[:] = [1, 2, 3]
    a.resize((7,))
    np.testing.assert_array_equal(a[:], [1, 2, 3, -1, -1, -1, -1])
    np.testing.assert_array_equal(cuzarr.open_array(store, mode="r")[:], [1, 2, 3, -1, -1, -1, -1])


def test_resize_to_zero_and_back():
    a = cuzarr.create_array({}, shape=(4, 4), dtype="u1", chunks=(2, 2))
    a[...] = 1
    a.resize((0, 4))
    assert a.shape == (0, 4)
    assert a.nchunks_initialized == 0
    assert a[...].shape == (0, 4)
    a.resize((2, 2))
    np.testing.assert_array_equal(a[...], np.zeros((2, 2)))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_append_axis0(store, zarr_format):
    a = cuzarr.create_array(store, shape=(3, 4), dtype="i4", chunks=(2, 3), zarr_format=zarr_format)
    data = np.arange(12, dtype="i4").reshape(3, 4)
    a[...] = data
    more = np.arange(100, 120, dtype="i4").reshape(5, 4)
    assert a.append(more) == (8, 4)
    assert a.shape == (8, 4)
    np.testing.assert_array_equal(a[...], np.concatenate([data, more]))
    np.testing.assert_array_equal(
        cuzarr.open_array(store, mode="r")[...], np.concatenate([data, more])
    )


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_append_axis1(store, zarr_format):
    a = cuzarr.create_array(store, shape=(3, 4), dtype="i4", chunks=(2, 3), zarr_format=zarr_format)
    data = np.arange(12, dtype="i4").reshape(3, 4)
    a[...] = data
    more = np.arange(100, 106, dtype="i4").reshape(3, 2)
    assert a.append(more, axis=1) == (3, 6)
    np.testing.assert_array_equal(a[...], np.concatenate([data, more], axis=1))
    a.append(np.full((3, 1), 7, "i4"), axis=-1)
    assert a.shape == (3, 7)
    np.testing.assert_array_equal(a[:, 6], [7, 7, 7])


def test_append_many_times(rng):
    a = cuzarr.create_array({}, shape=(0,), dtype="f8", chunks=(5,))
    parts = [rng.random(n) for n in (1, 4, 7, 0, 3, 10)]
    for p in parts:
        a.append(p)
    np.testing.assert_array_equal(a[:], np.concatenate(parts))


# --------------------------------------------------------------------------------------
# fill value / empty chunks


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    ("dtype", "fill"),
    [("i4", 0), ("i4", -7), ("f8", 1.5), ("f8", float("nan")), ("u1", 255), ("bool", True)],
)
def test_fill_value_for_missing_chunks(zarr_format, dtype, fill):
    a = cuzarr.create_array(
        {}, shape=(5, 5), dtype=dtype, chunks=(2, 2), fill_value=fill, zarr_format=zarr_format
    )
    expected = np.full((5, 5), fill, dtype=dtype)
    np.testing.assert_array_equal(a[...], expected)
    other = (not fill) if dtype == "bool" else (1 if fill == 0 else 0)
    a[0, 0] = other
    expected[0, 0] = other
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(a[2:, 2:], expected[2:, 2:])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_write_empty_chunks_false(zarr_format):
    store = {}
    a = cuzarr.create_array(
        store, shape=(6, 6), dtype="f4", chunks=(3, 3), fill_value=0, zarr_format=zarr_format
    )
    assert not a.async_array.write_empty_chunks
    a[...] = 0
    assert a.nchunks_initialized == 0
    assert chunk_keys(a) == []
    a[0, 0] = 1
    assert a.nchunks_initialized == 1
    a[3:, 3:] = 2
    assert a.nchunks_initialized == 2
    a[0, 0] = 0  # chunk back to all-fill: deleted
    assert a.nchunks_initialized == 1
    assert len(chunk_keys(a)) == 1
    a[...] = 0
    assert chunk_keys(a) == []
    np.testing.assert_array_equal(a[...], 0)


def test_write_empty_chunks_nan_fill():
    a = cuzarr.create_array({}, shape=(4,), dtype="f8", chunks=(2,), fill_value=float("nan"))
    a[:] = np.nan
    assert a.nchunks_initialized == 0
    a[:2] = 1.0
    assert a.nchunks_initialized == 1


@pytest.mark.parametrize("shards", [None, (4,)])
@pytest.mark.parametrize(
    ("dtype", "fill", "value"),
    [("f8", 0.0, -0.0), ("f4", -0.0, 0.0), ("c16", 0j, complex(0.0, -0.0))],
)
def test_signed_zero_is_not_the_fill(dtype, fill, value, shards):
    # -0.0 == 0.0 in numpy, but they are different values: the chunk is stored
    a = cuzarr.create_array({}, shape=(8,), dtype=dtype, chunks=(2,), shards=shards, fill_value=fill)
    a[0:2] = value
    assert a.nshards_initialized == 1  # one stored object (a shard holds 2 chunks)
    got = a[0:2]
    np.testing.assert_array_equal(np.signbit(got.real), np.signbit(np.real(value)))
    np.testing.assert_array_equal(np.signbit(got.imag), np.signbit(np.imag(value)))
    a[0:2] = fill
    assert a.nchunks_initialized == 0


@pytest.mark.parametrize(
    ("dtype", "fill", "value"),
    [(bytes, b"a\x00", b"a"), (bytes, b"\x00", b""), (str, "a", "a\x00")],
)
def test_variable_length_values_differing_from_fill_only_by_nul(dtype, fill, value):
    a = cuzarr.create_array({}, shape=(2,), chunks=(1,), dtype=dtype, fill_value=fill)
    a[1] = value
    assert a.nchunks_initialized == 1
    assert a[1] == value and a[0] == fill


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(("dtype", "value"), [(str, "ab"), (bytes, b"ab")])
def test_zero_d_variable_length_read(tmp_path, zarr_format, dtype, value):
    a = cuzarr.create_array(tmp_path / "c", shape=(), dtype=dtype, zarr_format=zarr_format)
    a[()] = value
    assert cuzarr.open_array(tmp_path / "c", mode="r")[()] == value
    assert zarr.open_array(tmp_path / "c", mode="r")[()] == value
    if dtype is str:  # zarr-python 3.4 cannot write 0-d variable-length bytes
        z = zarr.create_array(tmp_path / "z", shape=(), dtype=dtype, zarr_format=zarr_format)
        z[()] = value
        assert cuzarr.open_array(tmp_path / "z", mode="r")[()] == value


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_write_empty_chunks_true(zarr_format):
    store = {}
    a = cuzarr.create_array(
        store,
        shape=(6, 6),
        dtype="f4",
        chunks=(3, 3),
        fill_value=0,
        write_empty_chunks=True,
        zarr_format=zarr_format,
    )
    a[...] = 0
    assert a.nchunks_initialized == 4
    assert len(chunk_keys(a)) == 4
    np.testing.assert_array_equal(a[...], 0)


def test_write_empty_chunks_config():
    with cuzarr.config.set({"array.write_empty_chunks": True}):
        a = cuzarr.create_array({}, shape=(4,), dtype="i4", chunks=(2,))
        a[:] = 0
        assert a.nchunks_initialized == 2


def test_nchunks_initialized_ignores_foreign_keys():
    store = {}
    a = cuzarr.create_array(store, shape=(4,), dtype="i4", chunks=(2,))
    a[:] = 1
    store["c/99"] = b"x"  # outside the grid
    store["other"] = b"x"
    assert a.nchunks_initialized == 2


# --------------------------------------------------------------------------------------
# info, len, iter, __array__


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_info(zarr_format):
    a = cuzarr.create_array(
        {}, shape=(100, 50), dtype="f8", chunks=(10, 10), zarr_format=zarr_format
    )
    info = a.info
    text = repr(info)
    assert str(info) == text
    assert "(100, 50)" in text
    assert "(10, 10)" in text
    assert "float64" in text
    assert f"{zarr_format}" in text
    assert "MemoryStore" in text
    assert "zstd" in text
    assert str(100 * 50 * 8) in text
    assert info.nchunks == 50
    assert info.count_bytes == a.nbytes == 40000


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_info_complete_matches_the_files_on_disk(tmp_path, zarr_format):
    a = cuzarr.create_array(
        tmp_path / "a", shape=(10, 10), dtype="f8", chunks=(4, 4), fill_value=1.5,
        zarr_format=zarr_format,
    )
    a[:5, :5] = 2.0
    on_disk = sum(p.stat().st_size for p in (tmp_path / "a").rglob("*") if p.is_file())
    info = a.info_complete()
    assert info.count_bytes_stored == a.nbytes_stored() == on_disk
    assert info.count_chunks_initialized == a.nchunks_initialized == 4
    text = repr(info)
    assert f"No. bytes stored   : {on_disk}" in text
    assert f"Storage ratio      : {800 / on_disk:.2f}" in text
    assert "Fill value         : 1.5" in text and "Shard shape" not in text
    assert "No. bytes stored" not in repr(a.info)  # the static summary makes no requests


def test_numpy_protocols(rng):
    data = rng.random((5, 4))
    a = cuzarr.array(data, store={}, chunks=(2, 3))
    np.testing.assert_array_equal(np.asarray(a), data)
    np.testing.assert_array_equal(np.array(a), data)
    assert np.asarray(a, dtype="f4").dtype == np.dtype("f4")
    np.testing.assert_allclose(np.asarray(a, dtype="f4"), data.astype("f4"))
    assert len(a) == 5
    rows = list(a)
    assert len(rows) == 5
    for r, d in zip(rows, data, strict=True):
        np.testing.assert_array_equal(r, d)
    assert float(np.sum(a)) == pytest.approx(float(data.sum()))


@pytest.mark.parametrize("lazy", [False, True])
def test_array_protocol_copy_false_with_a_cast_raises(lazy):
    """numpy 2's __array__(copy=False): a read is fresh memory (no error), but a
    dtype cast is a copy, so copy=False with another dtype raises as numpy does."""
    data = np.arange(12, dtype="i4").reshape(3, 4)
    a = cuzarr.array(data, store={}, chunks=(2, 3))
    src = a.lazy[1:] if lazy else a
    want = data[1:] if lazy else data
    np.testing.assert_array_equal(np.asarray(src, copy=False), want)
    np.testing.assert_array_equal(np.asarray(src, dtype="i4", copy=False), want)
    assert np.asarray(src, dtype="f8", copy=True).dtype == np.float64
    with pytest.raises(ValueError, match="avoid copy"):
        np.asarray(src, dtype="f8", copy=False)


def test_iter_1d_gives_scalars():
    a = cuzarr.array(np.arange(7, dtype="i4"), store={}, chunks=(3,))
    got = list(a)
    assert got == list(np.arange(7, dtype="i4"))
    assert all(np.ndim(x) == 0 for x in got)


def test_iter_reads_each_chunk_once():
    store = CountingStore()
    data = np.arange(20 * 6, dtype="i2").reshape(20, 6)
    cuzarr.array(data, store=store, chunks=(3, 4))
    a = cuzarr.open_array(store, mode="r")
    store.gets.clear()
    rows = list(a)
    np.testing.assert_array_equal(np.stack(rows), data)
    chunk_gets = [k for k in store.gets if k.startswith("c/")]
    assert len(chunk_gets) == a.nchunks == 7 * 2
    assert len(set(chunk_gets)) == len(chunk_gets)


def test_len_iter_0d_and_empty():
    z = cuzarr.create_array({}, shape=(), dtype="i4")
    with pytest.raises(TypeError):
        len(z)
    with pytest.raises(TypeError):
        iter(z).__next__()
    e = cuzarr.create_array({}, shape=(0, 3), dtype="i4", chunks=(2, 2))
    assert len(e) == 0
    assert list(e) == []


# --------------------------------------------------------------------------------------
# zeros / ones / full / array / empty / _like


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_constructors(zarr_format):
    kw = {"zarr_format": zarr_format, "chunks": (2, 2)}
    z = cuzarr.zeros((3, 4), store={}, dtype="i4", **kw)
    np.testing.assert_array_equal(z[...], np.zeros((3, 4), "i4"))
    assert z.dtype == np.dtype("i4")
    o = cuzarr.ones((3, 4), store={}, dtype="f4", **kw)
    np.testing.assert_array_equal(o[...], np.ones((3, 4), "f4"))
    f = cuzarr.full((3, 4), 42, store={}, dtype="u2", **kw)
    np.testing.assert_array_equal(f[...], np.full((3, 4), 42, "u2"))
    e = cuzarr.empty((3, 4), store={}, dtype="f8", **kw)
    assert e.shape == (3, 4) and e.dtype == np.dtype("f8")
    data = np.arange(12, dtype="i8").reshape(3, 4)
    a = cuzarr.array(data, store={}, **kw)
    np.testing.assert_array_equal(a[...], data)
    assert a.dtype == data.dtype
    assert a.zarr_format == zarr_format
    # _like copy shape, dtype (and chunks from an Array)
    for like in (a, data):
        zl = cuzarr.zeros_like(like, store={})
        assert zl.shape == data.shape and zl.dtype == data.dtype
        np.testing.assert_array_equal(zl[...], 0)
        ol = cuzarr.ones_like(like, store={})
        np.testing.assert_array_equal(ol[...], 1)
        fl = cuzarr.full_like(like, 9, store={})
        np.testing.assert_array_equal(fl[...], 9)
        el = cuzarr.empty_like(like, store={})
        assert el.shape == data.shape and el.dtype == data.dtype
    assert cuzarr.zeros_like(a, store={}).chunks == a.chunks
    assert cuzarr.zeros_like(a, store={}, dtype="f4").dtype == np.dtype("f4")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_like_keeps_format_codecs_and_shards_as_zarr_does(zarr_format):
    import numcodecs

    kw = (
        {"compressors": numcodecs.GZip(3), "filters": [numcodecs.Delta("<i4")], "order": "F"}
        if zarr_format == 2
        else {"compressors": {"name": "gzip", "configuration": {"level": 2}}, "shards": (4, 4)}
    )
    a = cuzarr.create_array(
        {}, shape=(8, 8), chunks=(2, 2), dtype="i4", fill_value=7, zarr_format=zarr_format, **kw
    )
    e = cuzarr.empty_like(a)
    assert e.metadata.to_documents() == a.metadata.to_documents()
    assert e.fill_value == 7  # empty_like keeps the fill value, as in zarr-python
    z = cuzarr.zeros_like(a)
    assert (z.zarr_format, z.shards, z.order) == (zarr_format, a.shards, a.order)
    assert (z.compressors, z.filters, z.serializer) == (a.compressors, a.filters, a.serializer)
    assert z.fill_value == 0 and cuzarr.ones_like(a).fill_value == 1
    other = cuzarr.zeros_like(a, zarr_format=5 - zarr_format)
    assert other.zarr_format == 5 - zarr_format and other.chunks == (2, 2)
    assert cuzarr.zeros_like(a, dtype=str)[0, 0] == "0"  # dtype-bound codecs not carried
    if zarr_format == 2:
        assert a.compressor == numcodecs.GZip(3) and a.serializer is None
    else:
        with pytest.raises(TypeError):
            _ = a.compressor


def test_constructors_store_nothing(store):
    z = cuzarr.full((10, 10), 3, store=store, dtype="i4", chunks=(5, 5))
    assert z.nchunks_initialized == 0
    assert chunk_keys(z) == []


def test_array_from_list_and_name(tmp_path):
    a = cuzarr.array([[1, 2], [3, 4]], store=tmp_path, name="nested/x")
    assert a.path == "nested/x"
    np.testing.assert_array_equal(
        cuzarr.open_array(tmp_path, path="nested/x", mode="r")[...], [[1, 2], [3, 4]]
    )


# --------------------------------------------------------------------------------------
# attrs write-through


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attrs_write_through(tmp_path, zarr_format):
    a = cuzarr.create_array(tmp_path, shape=(2,), dtype="i4", zarr_format=zarr_format)
    a.attrs["units"] = "m/s"
    a.attrs["ß"] = {"nested": [1, None]}
    assert dict(cuzarr.open_array(tmp_path, mode="r").attrs) == {
        "units": "m/s",
        "ß": {"nested": [1, None]},
    }
    a.attrs.update(x=1)
    del a.attrs["units"]
    b = cuzarr.open_array(tmp_path, mode="r")
    assert dict(b.attrs) == {"ß": {"nested": [1, None]}, "x": 1}
    if zarr_format == 3:
        assert json.loads((tmp_path / "zarr.json").read_text())["attributes"] == dict(b.attrs)
    else:
        assert json.loads((tmp_path / ".zattrs").read_text()) == dict(b.attrs)
    za = zarr.open_array(str(tmp_path), mode="r")
    assert dict(za.attrs) == dict(b.attrs)
    # attribute updates leave the data alone
    a[:] = [5, 6]
    a.attrs["y"] = 2
    np.testing.assert_array_equal(cuzarr.open_array(tmp_path, mode="r")[:], [5, 6])


def test_attrs_after_resize_kept():
    a = cuzarr.create_array({}, shape=(2,), dtype="i4", attributes={"k": "v"})
    a.resize((4,))
    assert a.attrs["k"] == "v"


# --------------------------------------------------------------------------------------
# out=


def test_out_basic_selection():
    data = np.arange(60, dtype="f8").reshape(6, 10)
    a = cuzarr.array(data, store={}, chunks=(4, 3))
    out = np.empty((6, 10))
    res = a.get_basic_selection(Ellipsis, out=out)
    assert res is out  # the caller's array itself, as zarr-python returns it
    np.testing.assert_array_equal(out, data)
    out2 = np.zeros((3, 4))
    res2 = a.get_basic_selection((slice(1, 4), slice(2, 6)), out=out2)
    assert res2 is out2  # the caller's array itself, as zarr-python returns it
    np.testing.assert_array_equal(out2, data[1:4, 2:6])
    # out as a view into a bigger buffer
    big = np.zeros((10, 10))
    view = big[2:5, 3:7]
    res3 = a.get_basic_selection((slice(1, 4), slice(2, 6)), out=view)
    assert res3 is view
    np.testing.assert_array_equal(big[2:5, 3:7], data[1:4, 2:6])
    assert big[0].sum() == 0
    with pytest.raises(ValueError):
        a.get_basic_selection((slice(1, 4), slice(2, 6)), out=np.empty((4, 3)))
    # a scalar selection fills out and returns the scalar, as zarr-python does
    out0 = np.zeros((), "f8")
    assert a.get_basic_selection((2, 3), out=out0) == data[2, 3] and out0 == data[2, 3]


def test_out_orthogonal_selection():
    data = np.arange(60, dtype="i4").reshape(6, 10)
    a = cuzarr.array(data, store={}, chunks=(4, 3))
    out = np.empty((3, 2), dtype="i4")
    res = a.get_orthogonal_selection(([0, 2, 5], [1, 9]), out=out)
    assert res is out  # the caller's array itself, as zarr-python returns it
    np.testing.assert_array_equal(out, data[np.ix_([0, 2, 5], [1, 9])])
    with pytest.raises(ValueError):
        a.get_orthogonal_selection(([0, 2, 5], [1, 9]), out=np.empty((2, 3), "i4"))


def test_out_coordinate_and_block_selection():
    data = np.arange(60, dtype="i4").reshape(6, 10)
    a = cuzarr.array(data, store={}, chunks=(4, 3))
    out = np.empty(3, dtype="i4")
    res = a.get_coordinate_selection(([0, 2, 5], [1, 9, 0]), out=out)
    assert res is out  # the caller's array itself, as zarr-python returns it
    np.testing.assert_array_equal(out, data[[0, 2, 5], [1, 9, 0]])
    outb = np.empty((4, 3), dtype="i4")
    resb = a.get_block_selection((0, 1), out=outb)
    assert resb is outb  # the caller's array itself, as zarr-python returns it
    np.testing.assert_array_equal(outb, data[0:4, 3:6])


def test_out_coordinate_selection_fortran_or_strided_out():
    # A 2-d point selection into an ``out`` that has no flat view (Fortran
    # order, or a strided view) used to raise "out must be reshapeable".
    data = np.arange(60, dtype="i4").reshape(6, 10)
    a = cuzarr.array(data, store={}, chunks=(4, 3))
    sel = (np.array([[0, 2], [5, 1]]), np.array([[1, 9], [0, 3]]))
    out = np.asfortranarray(np.zeros((2, 2), dtype="i4"))
    assert a.get_coordinate_selection(sel, out=out) is out
    np.testing.assert_array_equal(out, data[sel])
    big = np.zeros((4, 4), dtype="i4")
    view = big[::2, ::2]
    a.get_coordinate_selection(sel, out=view)
    np.testing.assert_array_equal(big[::2, ::2], data[sel])
    assert big[1::2].sum() == 0 and big[:, 1::2].sum() == 0
    with pytest.raises(TypeError):
        a.get_coordinate_selection(sel, out=np.asfortranarray(np.zeros((2, 2), "f8")))


# --------------------------------------------------------------------------------------
# 0-d and zero-length


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zero_dim(store, zarr_format):
    a = cuzarr.create_array(store, shape=(), dtype="f8", fill_value=2.5, zarr_format=zarr_format)
    assert a.shape == () and a.ndim == 0 and a.size == 1
    assert a.chunks == ()
    assert a.nchunks == 1
    assert a[()] == 2.5
    assert a[...].shape == ()
    a[()] = 7.0
    assert a[()] == 7.0
    assert np.asarray(a).shape == ()
    assert float(np.asarray(a)) == 7.0
    assert a.nchunks_initialized == 1
    a[...] = 3.0
    b = cuzarr.open_array(store, mode="r")
    assert b[...] == 3.0
    a[()] = 2.5  # fill value again: chunk deleted
    assert a.nchunks_initialized == 0
    assert b[()] == 2.5
    c = cuzarr.array(np.float32(4.0), store={})
    assert c.shape == () and c[()] == 4.0


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zero_length_dims(store, zarr_format):
    a = cuzarr.create_array(store, shape=(0, 5), dtype="i4", chunks=(2, 2), zarr_format=zarr_format)
    assert a.size == 0 and a.nbytes == 0
    assert a.nchunks == 0
    assert a[...].shape == (0, 5)
    assert a[:, 1:3].shape == (0, 2)
    a[...] = 1  # no-op
    a[:, 2] = np.zeros((0,), "i4")
    assert a.nchunks_initialized == 0
    assert np.asarray(a).shape == (0, 5)
    assert a.oindex[[], [1, 2]].shape == (0, 2)
    b = cuzarr.array(np.zeros((3, 0)), store={})
    assert b[...].shape == (3, 0)
    assert b[1].shape == (0,)


# --------------------------------------------------------------------------------------
# sync API called inside a running event loop


def _run_with_timeout(fn, timeout=30):
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:
            result["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "sync API deadlocked inside a running event loop"
    return result


def test_sync_api_inside_asyncio_run():
    data = np.arange(24, dtype="i4").reshape(4, 6)
    store = {}
    cuzarr.array(data, store=store, chunks=(2, 2))

    async def main():
        a = cuzarr.open_array(store, mode="r+")
        got = a[...]
        a[0, 0] = 100
        g = cuzarr.open_group({}, mode="a")
        g.attrs["x"] = 1
        return got, a[0, 0]

    result = _run_with_timeout(lambda: asyncio.run(main()))
    if "error" in result:
        assert isinstance(result["error"], RuntimeError), repr(result["error"])
        assert "async" in str(result["error"]).lower()
    else:
        got, first = result["value"]
        np.testing.assert_array_equal(got, data)
        assert first == 100


def test_sync_api_inside_cuzarr_loop_raises_not_deadlocks():
    from cuzarr.runtime.sync import get_loop

    a = cuzarr.array(np.arange(4), store={}, chunks=(2,))

    async def inner():
        return a[...]

    def go():
        fut = asyncio.run_coroutine_threadsafe(inner(), get_loop())
        return fut.result(20)

    result = _run_with_timeout(go)
    if "error" in result:
        assert isinstance(result["error"], RuntimeError), repr(result["error"])
    else:
        np.testing.assert_array_equal(result["value"], np.arange(4))


def test_sync_api_from_many_threads():
    data = np.arange(1000, dtype="i8")
    a = cuzarr.array(data, store={}, chunks=(7,))
    errors_seen = []

    def worker(i):
        try:
            for _ in range(5):
                lo = (i * 37) % 900
                np.testing.assert_array_equal(a[lo : lo + 100], data[lo : lo + 100])
        except BaseException as e:
            errors_seen.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors_seen == []


def test_sync_timeout_cancels_the_operation():
    # A call that times out (config async.timeout) is stopped before the
    # TimeoutError reaches the caller: its write never lands later.
    from cuzarr.storage import MemoryStore

    d = {}
    log = []

    class Stuck(MemoryStore):
        async def set(self, key, value):
            if key.startswith("c/"):
                try:
                    await asyncio.Event().wait()  # never set
                except asyncio.CancelledError:
                    log.append("cancelled")
                    raise
            await super().set(key, value)

    a = cuzarr.create_array(Stuck(d), shape=(4,), dtype="i4", chunks=(4,))
    with (
        cuzarr.config.set({"async.timeout": 0.05}),
        pytest.raises(TimeoutError, match=r"async\.timeout"),
    ):
        a[:] = 1
    assert log == ["cancelled"]  # unwound before the caller saw the error
    assert "c/0" not in d
    np.testing.assert_array_equal(a[:], 0)


def test_sync_timeout_while_the_loop_is_busy_never_starts_the_operation():
    # The loop is blocked for longer than the timeout, so it has not even created
    # the operation's task when the caller gives up: the operation must not run
    # afterwards (it used to start once the loop was free).
    import time

    from cuzarr.runtime import sync as sync_mod

    loop = sync_mod.get_loop()
    ran = []

    async def work():
        ran.append("start")
        return 1

    blocked = threading.Event()

    def block():
        blocked.set()
        time.sleep(0.3)

    loop.call_soon_threadsafe(block)
    blocked.wait(5)
    with pytest.raises(TimeoutError, match=r"async\.timeout"):
        sync_mod.sync(work(), timeout=0.05)
    sync_mod.sync(asyncio.sleep(0))  # the loop is free again, and ran what it had
    assert ran == []


def test_sync_timeout_is_bounded_when_the_operation_ignores_cancellation():
    # An operation that swallows its cancellation (a store awaiting something
    # that never ends) used to make the timed-out call wait for it forever.
    from cuzarr.runtime import sync as sync_mod

    release = threading.Event()
    cancels = []

    async def stubborn():
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancels.append(1)  # ignored: keeps going
        return 1

    errors = []

    def call():
        try:
            sync_mod.sync(stubborn(), timeout=0.05)
        except TimeoutError as e:
            errors.append(str(e))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(10)
    try:
        assert not t.is_alive(), "the timed-out call never returned"
        assert cancels, "the operation was not cancelled"
        assert len(errors) == 1 and "may still complete" in errors[0]
    finally:
        release.set()
    sync_mod.sync(asyncio.sleep(0.05))


# --------------------------------------------------------------------------------------
# async API


def test_async_api(tmp_path):
    from cuzarr.api import asynchronous as aapi

    data = np.arange(30, dtype="f4").reshape(5, 6)

    async def main():
        a = await aapi.create_array(tmp_path, shape=(5, 6), dtype="f4", chunks=(2, 4))
        assert isinstance(a, aapi.AsyncArray)
        await a.setitem(Ellipsis, data)
        b = await aapi.open_array(tmp_path, mode="r")
        np.testing.assert_array_equal(await b.getitem(Ellipsis), data)
        np.testing.assert_array_equal(await b.getitem((slice(1, 4), 2)), data[1:4, 2])
        np.testing.assert_array_equal(
            await b.get_orthogonal_selection(([0, 4], [1, 5])), data[np.ix_([0, 4], [1, 5])]
        )
        np.testing.assert_array_equal(
            await b.get_coordinate_selection(([0, 4], [1, 5])), data[[0, 4], [1, 5]]
        )
        await a.setitem((0, slice(None)), -1)
        r = await b.getitem(0)
        np.testing.assert_array_equal(r, -np.ones(6))
        # concurrent reads on one loop
        results = await asyncio.gather(*(b.getitem(i) for i in range(1, 5)))
        for i, row in enumerate(results, start=1):
            np.testing.assert_array_equal(row, data[i])
        with pytest.raises(errors.ReadOnlyError):
            await b.setitem(0, 1)
        await a.resize((3, 6))
        assert a.shape == (3, 6)
        n = await aapi.open(tmp_path, mode="r")
        assert isinstance(n, aapi.AsyncArray)
        assert await n.nchunks_initialized() == 4
        arr = await aapi.array(data, store={})
        np.testing.assert_array_equal(await arr.getitem(Ellipsis), data)

    asyncio.run(main())


def test_async_api_twice_in_separate_loops():
    from cuzarr.api import asynchronous as aapi

    store = {}

    async def write():
        a = await aapi.create_array(store, shape=(4,), dtype="i4", chunks=(2,))
        await a.setitem(slice(None), np.arange(4))

    async def read():
        a = await aapi.open_array(store, mode="r")
        return await a.getitem(slice(None))

    asyncio.run(write())
    np.testing.assert_array_equal(asyncio.run(read()), np.arange(4))
    np.testing.assert_array_equal(asyncio.run(read()), np.arange(4))


# --------------------------------------------------------------------------------------
# config


def test_config_small_concurrency_still_correct(rng):
    data = rng.random((40, 30))
    store = {}
    with cuzarr.config.set({"async.concurrency": 2, "threading.max_workers": 1}):
        assert cuzarr.config.get("async.concurrency") == 2
        a = cuzarr.array(data, store=store, chunks=(3, 4))
        np.testing.assert_array_equal(a[...], data)
        a[5:25, 3:17] = -1
        expected = data.copy()
        expected[5:25, 3:17] = -1
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(a.oindex[[0, 39], :], expected[[0, 39], :])
        np.testing.assert_array_equal(a.vindex[[0, 39], [0, 29]], expected[[0, 39], [0, 29]])
    assert cuzarr.config.get("async.concurrency") != 2
    np.testing.assert_array_equal(cuzarr.open_array(store, mode="r")[...], expected)


def test_config_concurrency_one_async(tmp_path):
    from cuzarr.api import asynchronous as aapi

    data = np.arange(100, dtype="i4").reshape(10, 10)

    async def main():
        a = await aapi.create_array(LocalStore(tmp_path), shape=(10, 10), dtype="i4", chunks=(2, 2))
        await a.setitem(Ellipsis, data)
        return await a.getitem(Ellipsis)

    with cuzarr.config.set({"async.concurrency": 1, "threading.max_workers": 1}):
        np.testing.assert_array_equal(asyncio.run(main()), data)


# --------------------------------------------------------------------------------------
# interop sanity: zarr-python reads what cuzarr wrote and vice versa


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_python_reads_resized_appended(tmp_path, zarr_format):
    a = cuzarr.create_array(
        tmp_path, shape=(5, 3), dtype="i4", chunks=(2, 2), zarr_format=zarr_format
    )
    data = np.arange(15, dtype="i4").reshape(5, 3)
    a[...] = data
    a.append(data)
    a.resize((8, 3))
    z = zarr.open_array(str(tmp_path), mode="r")
    assert z.shape == (8, 3)
    np.testing.assert_array_equal(z[...], np.concatenate([data, data])[:8])


def test_store_kwarg_variants(tmp_path):
    for s in (
        {},
        MemoryStore(),
        LocalStore(tmp_path / "x"),
        str(tmp_path / "y"),
        tmp_path / "z",
        None,
    ):
        a = cuzarr.create_array(s, shape=(3,), dtype="i4")
        a[:] = [1, 2, 3]
        np.testing.assert_array_equal(a[:], [1, 2, 3])


# --------------------------------------------------------------------------------------
# array-likes that are themselves cuzarr arrays (their __array__ does I/O)


def test_assign_from_cuzarr_array():
    src = cuzarr.array(np.arange(6, dtype="i8"), store={}, chunks=(2,))
    dst = cuzarr.create_array({}, shape=(6,), dtype="i8", chunks=(4,))
    dst[:] = src  # numpy semantics: any array-like is a value
    np.testing.assert_array_equal(dst[:], np.arange(6))
    dst.oindex[[0, 1]] = src.oindex[[4, 5]]
    np.testing.assert_array_equal(dst[:2], [4, 5])


def test_array_and_append_from_cuzarr_array():
    src = cuzarr.array(np.arange(6, dtype="i8").reshape(2, 3), store={}, chunks=(1, 2))
    copy = cuzarr.array(src, store={})
    np.testing.assert_array_equal(copy[...], src[...])
    copy.append(src)
    np.testing.assert_array_equal(copy[...], np.concatenate([src[...], src[...]]))


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [
        ("float4_e2m1fn", float("nan")),  # ml_dtypes would store -0.0
        ("float4_e2m1fn", float("inf")),  # ... and 6.0
        ("float8_e4m3fn", float("-inf")),  # ... and NaN
        ("float8_e4m3fnuz", float("inf")),
    ],
)
def test_unrepresentable_ml_fill_value_is_refused(dtype, fill):
    pytest.importorskip("ml_dtypes")
    with pytest.raises(ValueError, match="not representable"):
        cuzarr.create_array({}, shape=(2,), dtype=dtype, fill_value=fill)


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [
        ("bfloat16", float("nan")),
        ("bfloat16", float("-inf")),
        ("float8_e5m2", float("inf")),
        ("float8_e4m3fn", float("nan")),
        ("float8_e4m3fn", -0.0),
        ("float4_e2m1fn", 1.5),
    ],
)
def test_representable_ml_fill_values(dtype, fill):
    pytest.importorskip("ml_dtypes")
    a = cuzarr.create_array({}, shape=(2,), dtype=dtype, fill_value=fill)
    got = np.float64(a[...].astype("f8")[0])
    assert (np.isnan(got) and np.isnan(fill)) or (
        got == fill and np.signbit(got) == np.signbit(fill)
    )


def test_write_numpy_scalars_into_basic_selections_as_numpy():
    # numpy packs a scalar assigned to a basic selection by its Python value:
    # NaN into ints and out-of-range ints raise instead of casting to garbage.
    a = cuzarr.create_array({}, shape=(4,), chunks=(2,), dtype="i1", fill_value=0)
    for sel, v, err in [
        (slice(0, 3), np.float64("nan"), ValueError),
        (1, np.int64(300), OverflowError),
        (slice(None), np.uint64(2**64 - 1), OverflowError),
        (0, np.datetime64("2020-01-01"), TypeError),
    ]:
        with pytest.raises(err):
            np.zeros(4, "i1")[sel] = v
        with pytest.raises(err):
            a[sel] = v
        with pytest.raises(err):
            a.blocks[0] = v
        with pytest.raises(err):
            a.lazy[sel] = v
    assert not a.nchunks_initialized
    a[1:3] = np.float64(-1.7)
    a.vindex[[0]] = np.int64(300)  # numpy casts for advanced selections
    np.testing.assert_array_equal(a[:], [44, -1, -1, 0])
    with pytest.raises(ValueError, match="abc"):  # numpy's class, not TypeError
        cuzarr.create_array({}, shape=(2,), dtype="f8")[0] = "abc"


def test_write_value_with_leading_length_one_axes():
    # numpy accepts extra leading length-1 axes on the value (x[::2] = [[1, 2]]).
    a = cuzarr.create_array({}, shape=(4, 3), chunks=(2, 2), dtype="i4", fill_value=0)
    x = np.zeros((4, 3), "i4")
    for sel, v in [((slice(None, None, 2), 0), np.array([[1, 2]])), ((1,), np.ones((1, 1, 3)))]:
        x[sel] = v
        a[sel] = v
    a.oindex[[0, 3], 2] = np.array([[5, 6]])
    a.vindex[[1, 2], [2, 2]] = np.array([[7, 8]])
    x[[0, 3], 2] = [5, 6]
    x[[1, 2], [2, 2]] = [7, 8]
    np.testing.assert_array_equal(a[:], x)
    with pytest.raises(ValueError, match="broadcast"):
        a[0] = np.ones((2, 3))
