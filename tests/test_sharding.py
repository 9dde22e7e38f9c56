"""Sharding: partial reads, partial writes, nested shards, corruption, interop."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import tensorstore as ts
import zarr

import cuzarr
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.errors import ChecksumError, CodecError
from cuzarr.storage import LocalStore, MemoryStore


class CountingStore(MemoryStore):
    """A MemoryStore that counts requests and bytes returned by ``get``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.nbytes = 0

    async def get(self, key, prototype=None, byte_range=None):
        value = await super().get(key, prototype, byte_range)
        self.calls += 1
        self.nbytes += len(value) if value is not None else 0
        return value


def test_one_inner_chunk_of_a_64mib_shard_reads_under_one_percent():
    store = CountingStore()
    shape = (4096, 4096)  # float32: 64 MiB, one shard
    a = cuzarr.create_array(store, shape=shape, chunks=(128, 256), shards=shape, dtype="f4",
                            compressors=None)
    data = np.arange(np.prod(shape), dtype="f4").reshape(shape)
    a[...] = data
    shard_bytes = len(store._store_dict["c/0/0"])
    store.calls = store.nbytes = 0
    np.testing.assert_array_equal(a[1000:1010, 3000:3010], data[1000:1010, 3000:3010])
    assert store.nbytes < 0.01 * shard_bytes, (store.nbytes, shard_bytes)
    assert store.calls <= 3  # metadata is cached on the array: index + one range


def test_full_read_fetches_each_shard_once():
    store = CountingStore()
    a = cuzarr.create_array(store, shape=(64, 64), chunks=(4, 4), shards=(32, 32), dtype="i2")
    a[...] = np.arange(64 * 64, dtype="i2").reshape(64, 64)
    store.calls = 0
    a[...]
    assert store.calls == 4


def test_coalescing_merges_neighbouring_ranges():
    store = CountingStore()
    a = cuzarr.create_array(store, shape=(256,), chunks=(4,), shards=(256,), dtype="u1",
                            compressors=None)
    a[...] = np.arange(256, dtype="u1")
    store.calls = 0
    with cuzarr.config.set({"sharding.coalesce_max_gap": 1 << 20}):
        np.testing.assert_array_equal(a[0:8], np.arange(8))
        np.testing.assert_array_equal(a.oindex[[0, 40, 80]], [0, 40, 80])
    assert store.calls == 4  # two reads: index + one merged range each
    store.calls = 0
    with cuzarr.config.set({"sharding.coalesce_max_gap": 0}):
        np.testing.assert_array_equal(a.oindex[[0, 40, 80]], [0, 40, 80])
    assert store.calls == 4  # index + three separate ranges


@pytest.mark.parametrize("index_location", ["start", "end"])
def test_partial_write_reencodes_only_touched_inner_chunks(index_location):
    store = MemoryStore()
    codec = ShardingCodec((4, 4), index_location=index_location)
    a = cuzarr.create_array(store, shape=(16, 16), chunks=(16, 16), dtype="i4",
                            serializer=codec, compressors=None)
    a[...] = np.arange(256, dtype="i4").reshape(16, 16)
    before = bytes(store._store_dict["c/0/0"])
    a[0, 0] = -1
    after = bytes(store._store_dict["c/0/0"])
    # Only one 64-byte inner chunk changed: the rest of the shard is byte-identical
    # apart from the index, since the untouched chunks were copied, not re-encoded.
    diff = sum(x != y for x, y in zip(before, after, strict=True))
    assert 0 < diff <= 4 + 4  # one int32 + the crc32c of the index
    expected = np.arange(256, dtype="i4").reshape(16, 16)
    expected[0, 0] = -1
    np.testing.assert_array_equal(a[...], expected)


def test_all_fill_shard_deletes_its_key():
    store = MemoryStore()
    a = cuzarr.create_array(store, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="u2")
    a[...] = 3
    assert sum(k.startswith("c/") for k in store._store_dict) == 4
    a[:4, :4] = 0
    assert "c/0/0" not in store._store_dict
    a[4:, 4:5] = 0  # partial write that leaves data: key stays
    assert "c/1/1" in store._store_dict
    a[...] = 0
    assert not any(k.startswith("c/") for k in store._store_dict)


@pytest.mark.parametrize("shape", [(10, 6), (8, 6), (0, 6)])
def test_chunk_counts_of_a_sharded_array_match_zarr(tmp_path, shape):
    # nchunks, cdata_shape and nchunks_initialized count inner chunks (a stored
    # shard counts all its inner chunks), as in zarr-python; nshards counts shards.
    kw = dict(shape=shape, chunks=(2, 3), shards=(4, 6), dtype="i4")
    z = zarr.create_array(tmp_path / "z", **kw)
    a = cuzarr.create_array(tmp_path / "c", **kw)
    for arr in (z, a):
        arr[:3, :2] = 1
    assert (a.nchunks, a.cdata_shape) == (z.nchunks, z.cdata_shape)
    assert a.nchunks_initialized == z.nchunks_initialized
    assert a.nshards == z._nshards and a.nshards_initialized == z._nshards_initialized
    assert a.nbytes_stored() == z.nbytes_stored()
    info = a.info_complete()
    assert info.nchunks == a.nchunks and info.shard_shape == (4, 6)
    assert info.count_chunks_initialized == a.nchunks_initialized
    assert info.count_bytes_stored == a.nbytes_stored()
    assert "Shard shape" in repr(info) and "Chunks initialized" in repr(info)


def test_write_empty_chunks_true_stores_fill_inner_chunks_as_zarr_does(tmp_path):
    zarr.create_array(
        tmp_path / "z", shape=(8, 6), chunks=(2, 3), shards=(4, 6), dtype="i4", fill_value=0,
        config={"write_empty_chunks": True},
    )[...] = 0
    a = cuzarr.create_array(
        tmp_path / "c", shape=(8, 6), chunks=(2, 3), shards=(4, 6), dtype="i4", fill_value=0,
        write_empty_chunks=True,
    )
    a[...] = 0
    # As in zarr-python: inner chunks of the stored shards (2 shards x 2 x 2 chunks).
    assert a.nshards_initialized == 2 and a.nchunks_initialized == 8 == a.nchunks
    for key in ("0/0", "1/0"):
        assert (tmp_path / "c/c" / key).read_bytes() == (tmp_path / "z/c" / key).read_bytes()
    a[5, 4] = 7  # a partial write keeps every inner chunk too
    (inner,) = [c for c in a.metadata.codecs if c.name == "sharding_indexed"]
    index, _ = inner.split((tmp_path / "c/c/1/0").read_bytes(), (4, 6))
    assert (index[..., 0] != 2**64 - 1).all()


def test_nested_sharding_round_trip(tmp_path):
    inner = ShardingCodec((2, 2), codecs=[{"name": "bytes"}, {"name": "zstd"}])
    outer = ShardingCodec((4, 4), codecs=[inner])
    a = cuzarr.create_array(str(tmp_path), shape=(10, 9), chunks=(8, 8), dtype="u1",
                            serializer=outer, compressors=None)
    data = np.arange(90, dtype="u1").reshape(10, 9)
    a[...] = data
    a[3:5, 2:7] = 200
    data[3:5, 2:7] = 200
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path))[...], data)


def test_corrupt_shard_index_is_detected(tmp_path):
    a = cuzarr.create_array(str(tmp_path), shape=(16,), chunks=(4,), shards=(16,), dtype="i8")
    a[...] = np.arange(16)
    path = tmp_path / "c" / "0"
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0xFF  # inside the index, protected by crc32c
    path.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError):
        a[0:2]
    with pytest.raises(ChecksumError):
        a[...]
    path.write_bytes(bytes(raw[:-30]))  # truncated: index length wrong
    with pytest.raises((CodecError, ChecksumError)):
        a[...]


def test_index_pointing_past_the_end_is_refused(tmp_path):
    from cuzarr.codecs.checksum import crc32c

    a = cuzarr.create_array(str(tmp_path), shape=(8,), chunks=(4,), shards=(8,), dtype="u1",
                            compressors=None)
    a[...] = np.arange(8, dtype="u1")
    path = tmp_path / "c" / "0"
    raw = path.read_bytes()
    index = np.frombuffer(raw[-36:-4], dtype="<u8").copy()
    index[1] = 10_000  # size of chunk 0 far past the end
    body = index.tobytes()
    path.write_bytes(raw[:-36] + body + crc32c(body).to_bytes(4, "little"))
    with pytest.raises(CodecError, match=r"past the end|could not be read"):
        a[...]
    with pytest.raises(CodecError):
        a[0:2]


def test_checked_indexes_are_cached_by_their_bytes_only(tmp_path):
    """Partial reads re-read a shard's index each time; a checked index is kept
    by its exact bytes, so a shard rewritten (here by zarr-python) is read
    afresh, a corrupt index keeps failing, and the cache stays bounded."""
    path = tmp_path / "a"
    a = cuzarr.create_array(str(path), shape=(64, 64), chunks=(8, 8), shards=(32, 32),
                            dtype="i4")
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    a[...] = data
    np.testing.assert_array_equal(a[1:3, 2:5], data[1:3, 2:5])
    np.testing.assert_array_equal(a[1:3, 2:5], data[1:3, 2:5])  # from the cache
    codec = a.async_array._shard_codec
    assert codec._indexes._d
    index = next(iter(codec._indexes._d.values()))
    assert not index.flags.writeable
    # another writer rewrites the shard: new index bytes, new data
    z = zarr.open_array(str(path), mode="r+")
    z[0:16, 0:16] = -1
    want = data.copy()
    want[0:16, 0:16] = -1
    np.testing.assert_array_equal(a[1:3, 2:5], want[1:3, 2:5])
    np.testing.assert_array_equal(a[...], want)
    # a corrupt index fails every time, not only the first
    shard = path / "c" / "0" / "0"
    raw = bytearray(shard.read_bytes())
    raw[-6] ^= 0xFF
    shard.write_bytes(bytes(raw))
    for _ in range(2):
        with pytest.raises(ChecksumError):
            a[1:3, 2:5]
    # bounded: many distinct indexes keep at most max_items
    codec._indexes.max_items = 3
    for v in range(8):
        a[32:34, 32:34] = v
        assert a[32, 32] == v
    assert len(codec._indexes._d) <= 3


def test_cached_index_is_not_a_view_of_a_reused_read_buffer(tmp_path):
    """Inner shards of a nested shard are decoded from the thread's reused read
    buffer: a cached index must be a copy, not a view into that buffer, or a
    later shard with the same index bytes reads another shard's index (here
    silently: fill instead of data). Nor may it keep a whole shard alive."""
    from cuzarr.codecs.base import ChunkSpec
    from cuzarr.codecs.bytes_codec import BytesCodec
    from cuzarr.metadata.dtypes import parse_data_type

    a = cuzarr.create_array(str(tmp_path / "a"), shape=(32,), chunks=(8,), shards=(16,),
                            dtype="i4", fill_value=0, compressors=None,
                            serializer=ShardingCodec((4,), [BytesCodec()], index_location="start"))
    want = np.arange(1, 33, dtype="i4")
    want[20:24] = 0  # inner shard 2 holds one sub-chunk; 1 and 3 hold the same index
    a[...] = want
    np.testing.assert_array_equal(a[8:16], want[8:16])
    np.testing.assert_array_equal(a[16:32], want[16:32])
    codec = ShardingCodec((4,))
    shard = codec.encode(np.arange(8, dtype="i4"), ChunkSpec((8,), parse_data_type("int32", 3), 0))
    index, _ = codec.split(bytearray(shard), (8,))
    assert index.base is None and not index.flags.writeable


SHARD_CASES = [
    # shape, inner chunks, shard shape, compressor, index location
    ((37, 23), (4, 5), (8, 10), "zstd", "end"),
    ((20, 20), (5, 5), (10, 20), "gzip", "start"),
    ((50,), (3,), (9,), None, "end"),
    ((9, 7, 5), (2, 3, 2), (4, 3, 4), "blosc", "start"),
]


def _v3_compressors(name):
    return {
        "zstd": [{"name": "zstd", "configuration": {"level": 3}}],
        "gzip": [{"name": "gzip", "configuration": {"level": 1}}],
        "blosc": [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}],
        None: None,
    }[name]


def _zarr_compressors(name):
    return {
        "zstd": [zarr.codecs.ZstdCodec(level=3)],
        "gzip": [zarr.codecs.GzipCodec(level=1)],
        "blosc": [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")],
        None: None,
    }[name]


@pytest.mark.parametrize(("shape", "chunks", "shards", "comp", "loc"), SHARD_CASES)
def test_interop_zarr_both_ways(tmp_path, shape, chunks, shards, comp, loc):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1000, size=shape).astype("i4")
    region = tuple(slice(1, max(2, s // 2)) for s in shape)
    expected = data.copy()
    expected[region] = -5
    # cuzarr writes (whole, then a partial shard write), zarr-python reads.
    codec = ShardingCodec(chunks, codecs=[{"name": "bytes"}, *(_v3_compressors(comp) or [])],
                          index_location=loc)
    a = cuzarr.create_array(str(tmp_path / "c"), shape=shape, chunks=shards, dtype="i4",
                            serializer=codec, compressors=None)
    a[...] = data
    a[region] = -5
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"))[...], expected)
    # zarr-python writes, cuzarr reads (and partially rewrites, zarr-python re-reads).
    z = zarr.create_array(str(tmp_path / "z"), shape=shape, chunks=chunks, shards=shards,
                          dtype="i4", compressors=_zarr_compressors(comp))
    z[...] = data
    b = cuzarr.open_array(str(tmp_path / "z"))
    assert b.chunks == chunks and b.shards == shards
    np.testing.assert_array_equal(b[...], data)
    sel = tuple(slice(None, None, 2) for _ in shape)
    np.testing.assert_array_equal(b[sel], data[sel])
    b[region] = -5
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z"))[...], expected)


@pytest.mark.parametrize(("shape", "chunks", "shards", "comp", "loc"), SHARD_CASES)
def test_interop_tensorstore_both_ways(tmp_path, shape, chunks, shards, comp, loc):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 1000, size=shape).astype("i4")
    codec = ShardingCodec(chunks, codecs=[{"name": "bytes"}, *(_v3_compressors(comp) or [])],
                          index_location=loc)
    a = cuzarr.create_array(str(tmp_path / "c"), shape=shape, chunks=shards, dtype="i4",
                            serializer=codec, compressors=None)
    a[...] = data
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "c")}}).result()
    np.testing.assert_array_equal(t.read().result(), data)
    inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, *(_v3_compressors(comp) or [])]
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "t")},
        "metadata": {
            "shape": list(shape),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shards)}},
            "data_type": "int32",
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(chunks), "codecs": inner_codecs,
                "index_location": loc}}],
        },
        "create": True,
    }
    t2 = ts.open(spec).result()
    t2.write(data).result()
    b = cuzarr.open_array(str(tmp_path / "t"))
    np.testing.assert_array_equal(b[...], data)
    region = tuple(slice(0, max(1, s // 3)) for s in shape)
    b[region] = 9
    expected = data.copy()
    expected[region] = 9
    t3 = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "t")}}).result()
    np.testing.assert_array_equal(t3.read().result(), expected)


def test_concurrent_writes_to_different_shards(tmp_path):
    a = cuzarr.create_array(str(tmp_path), shape=(64, 64), chunks=(4, 4), shards=(16, 16), dtype="i4")

    async def main():
        await asyncio.gather(*(
            a.async_array.setitem((slice(16 * i, 16 * (i + 1)), slice(None)), i)
            for i in range(4)
        ))

    cuzarr.runtime.sync.sync(main())
    expected = np.repeat(np.arange(4, dtype="i4"), 16)[:, None] * np.ones((1, 64), dtype="i4")
    np.testing.assert_array_equal(a[...], expected)
    assert isinstance(a.store, LocalStore)


def test_nat_inner_chunks_are_empty_like_zarr_python():
    # A NaT fill (datetime64) never compared equal (NaT != NaT): all-NaT inner
    # chunks and chunks were stored, where zarr-python leaves them empty.
    store = {}
    a = cuzarr.create_array(store, shape=(9,), chunks=(2,), shards=(4,), dtype="M8[s]")
    data = np.arange(9).astype("M8[s]")
    a[...] = data
    index = np.frombuffer(bytes(store["c/2"])[-36:-4], dtype="<u8").reshape(2, 2)
    assert (index[1] == 2**64 - 1).all()  # [10, 12) lies outside the array
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=(9,), chunks=(2,), shards=(4,),
                          dtype="M8[s]")
    z[...] = data
    assert bytes(store["c/2"]) == z.store._store_dict["c/2"].to_bytes()
    plain = {}
    b = cuzarr.create_array(plain, shape=(4,), chunks=(2,), dtype="M8[s]")
    b[...] = np.array(["NaT", "NaT", 1, 2], dtype="M8[s]")
    assert "c/0" not in plain and "c/1" in plain


@pytest.mark.parametrize("write_empty_chunks", [False, True])
def test_empty_shard_under_compressors_is_not_stored(tmp_path, write_empty_chunks):
    """Sharding as the serializer with compressors after it: a shard whose inner
    chunks are all fill is deleted, not stored as compressed empty bytes (which
    decoded to a shard shorter than its index: a CodecError on every read)."""
    import zarr

    spec = dict(
        shape=(8,),
        chunks=(4,),
        dtype="i2",
        fill_value=0,
        serializer={
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [2],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            },
        },
        compressors=[{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}],
        config={"write_empty_chunks": write_empty_chunks},
    )
    path = str(tmp_path / "a")
    a = cuzarr.create_array(path, **spec)
    a[...] = np.array([0, 0, 0, 0, 1, 2, 3, 4], "i2")
    a[4:] = 0
    stored = sorted(p.name for p in (tmp_path / "a" / "c").iterdir())
    np.testing.assert_array_equal(a[...], np.zeros(8, "i2"))
    np.testing.assert_array_equal(zarr.open_array(path)[...], np.zeros(8, "i2"))
    if write_empty_chunks:
        assert stored == ["0", "1"]  # inner chunks of fill kept, as zarr-python does
    else:
        assert stored == []


def test_inner_chunks_grouped_by_shard_in_order_of_first_item():
    """Reads group inner-chunk items by shard with numpy (``_group_rows``): the
    same groups, in the same order, as one dict insertion per item."""
    from cuzarr.core.shards import _group_rows

    rng = np.random.default_rng(5)
    for ndim in (1, 2, 3):
        rows = rng.integers(0, 3, size=(200, ndim))
        expected: dict[tuple[int, ...], list[int]] = {}
        for i, r in enumerate(rows.tolist()):
            expected.setdefault(tuple(r), []).append(i)
        assert _group_rows(rows) == list(expected.items())
    # a grid whose rows do not fit one int64 each: grouped as records
    big = np.array([[2**40, 2**40, 1], [0, 0, 0], [2**40, 2**40, 1]], np.int64)
    assert _group_rows(big) == [((2**40, 2**40, 1), [0, 2]), ((0, 0, 0), [1])]


@pytest.mark.parametrize("loc", ["start", "end"])
def test_shards_dict_index_location_as_zarr_python(tmp_path, loc):
    """``shards={"shape": ..., "index_location": ...}`` places the index where
    asked, as zarr-python's create_array does (the same metadata)."""
    kw = dict(shape=(16, 16), dtype="i4", chunks=(4, 4),
              shards={"shape": (8, 8), "index_location": loc})
    a = cuzarr.create_array(str(tmp_path / "c"), **kw)
    zarr.create_array(str(tmp_path / "z"), **kw)
    conf = a.metadata.to_dict()["codecs"][0]["configuration"]
    assert conf["index_location"] == loc
    assert (tmp_path / "c" / "zarr.json").read_text() == (tmp_path / "z" / "zarr.json").read_text()
    a[...] = np.arange(256, dtype="i4").reshape(16, 16)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"), mode="r")[...],
                                  a[...])


@pytest.mark.parametrize("native_io", [True, False])
def test_large_inner_chunks_decoded_together_in_groups(tmp_path, native_io):
    """Whole inner chunks of 36 KiB (shared out to idle worker loops in groups,
    each group one C call where cuzarr.runtime.native is built) read as numpy
    has them, with edge shards, partial selections and missing inner chunks;
    a corrupt inner chunk raises a CodecError naming its shard."""
    rng = np.random.default_rng(4)
    data = np.cumsum(rng.standard_normal((800, 430)), axis=1).astype("f4")
    data[96:192, 0:96] = 0  # an inner chunk of fill: not stored
    with cuzarr.config.set({"storage.native_io": native_io, "threading.max_workers": 2}):
        a = cuzarr.create_array(str(tmp_path / "a"), shape=data.shape, dtype="f4",
                                chunks=(96, 96), shards=(384, 384), fill_value=0,
                                compressors={"name": "zstd", "configuration": {"level": 1}})
        a[...] = data
        for sel in [np.s_[...], np.s_[5:700, 90:400], np.s_[::7, ::-3], np.s_[300, :]]:
            np.testing.assert_array_equal(a[sel], data[sel])
        shard = tmp_path / "a" / "c" / "0" / "0"
        raw = bytearray(shard.read_bytes())
        raw[0] ^= 0xFF  # the first inner chunk's zstd magic (the index is at the end)
        shard.write_bytes(bytes(raw))
        with pytest.raises(CodecError, match="c/0/0"):
            a[...]
        np.testing.assert_array_equal(a[400:], data[400:])
