"""Device writes of sharded arrays, run on the host (``gpu.emulate``).

Whole shards go through ``gpu.shardwriter.ShardWriter``: the inner chunks of a
batch's shards gathered in one plan, checked for the fill value, encoded as
one batch (``HostEncoder`` standing in for nvCOMP), and laid out by the
sharding codec's own ``assemble``. Shards written in part and shards cut by the
array's end take the host route. What is written is compared byte for byte
with the host path's (inner codecs whose device container is the host's: none,
zstd, zlib), read back by zarr-python and tensorstore, and compared with numpy.
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import tensorstore as ts
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import cuzarr
from _gpu_helpers import sample
from cuzarr.codecs.sharding import EMPTY, ShardingCodec
from cuzarr.gpu.shardwriter import inner_items
from cuzarr.gpu.writer import HostEncoder
from cuzarr.storage import LocalStore

SAME_BYTES = {
    "none": None,
    "zstd": {"name": "zstd", "configuration": {"level": 3}},
    "zlib": numcodecs.Zlib(level=1),
}
# device containers that differ from the host codec's bytes (values agree)
OTHER = {
    "lz4": numcodecs.LZ4(),
    "gzip": {"name": "gzip", "configuration": {"level": 5}},
    "blosc-lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                     "shuffle": "shuffle", "typesize": 4,
                                                     "blocksize": 0}},
    "blosc-zstd": {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                                                      "shuffle": "noshuffle", "typesize": 4,
                                                      "blocksize": 256}},
}
# tensorstore has no numcodecs.* codecs
TS_READS = {"none", "zstd", "gzip", "blosc-lz4", "blosc-zstd"}
CONTAINER = {"none": "none", "zstd": "zstd", "zlib": "zlib", "lz4": "lz4", "gzip": "gzip",
             "blosc-lz4": "blosc", "blosc-zstd": "blosc"}


def _stored(root):
    """Every stored file under ``root``: relative path -> bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _writes(a, data):
    """Whole shards (forwards, then reversed), shards back to the fill value,
    an all-fill inner chunk in a written shard, partial and edge shards;
    returns the expected array. Shards are (8, 8) of (4, 4) inner chunks."""
    expect = np.zeros(data.shape, data.dtype)
    a[...] = data
    expect[...] = data
    a[::-1, ::-1] = data[::-1, ::-1] + 1
    expect[...] = data + 1
    a[8:16, :] = 0  # a row of whole shards back to the fill value: deleted
    expect[8:16, :] = 0
    z = data[:8, :16].copy()
    z[:4, 4:8] = 0  # one inner chunk all fill: left out of its shard
    a[:8, :16] = z
    expect[:8, :16] = z
    a[3:13, 5:9] = data[:10, :4]  # partial shards: read-modify-write on the host
    expect[3:13, 5:9] = data[:10, :4]
    return expect


def _both(tmp_path, kw, write):
    """Write with the device path's twin and with the host path; the stored
    files of both and the twin's statistics."""
    roots, stats = {}, {}
    for emu in (False, True):
        HostEncoder.stats.clear()
        path = tmp_path / str(emu)
        with cuzarr.config.set({"gpu.emulate": emu}):
            a = cuzarr.create_array(LocalStore(path), **kw)
            write(a)
        stats[emu] = dict(HostEncoder.stats)
        roots[emu] = _stored(path)
    return roots, stats[True], stats[False]


def _read_ts(path):
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    return t.read().result()


@pytest.mark.parametrize("wec", [False, True], ids=["drop-empty", "write-empty"])
@pytest.mark.parametrize("loc", ["start", "end"])
@pytest.mark.parametrize("codec", list(SAME_BYTES))
@pytest.mark.parametrize("dtype", ["<f4", "<i2"])
def test_whole_shards_written_on_device_as_on_the_host(tmp_path, codec, loc, wec, dtype):
    data = sample((30, 22), dtype, 0, offset=1000)
    kw = dict(shape=data.shape, dtype=dtype, chunks=(4, 4),
              shards={"shape": (8, 8), "index_location": loc}, compressors=SAME_BYTES[codec],
              fill_value=0, write_empty_chunks=wec)
    expect = {}
    roots, emu, host = _both(tmp_path, kw, lambda a: expect.setdefault("e", _writes(a, data)))
    assert not host
    assert emu["batches"] > 0 and emu[f"container:{CONTAINER[codec]}"] > 0
    assert (emu.get("empty", 0) > 0) == (not wec)
    assert roots[True] == roots[False]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "True"), mode="r")[...],
                                  expect["e"])
    if codec in TS_READS:
        np.testing.assert_array_equal(_read_ts(tmp_path / "True"), expect["e"])
    assert ("c/1/2" in roots[True]) == wec  # a cut shard set to the fill value


@pytest.mark.parametrize("loc", ["start", "end"])
@pytest.mark.parametrize("codec", list(OTHER))
def test_whole_shards_other_containers(tmp_path, codec, loc):
    """Containers whose device bytes differ from the host codec's (nvCOMP's
    streams, blosc's block layout): the same shards, the same inner chunks left
    out, the same values, read by zarr-python and tensorstore."""
    data = sample((30, 22), "<f4", 3, offset=1000)
    kw = dict(shape=data.shape, dtype="<f4", chunks=(4, 4),
              shards={"shape": (8, 8), "index_location": loc}, compressors=OTHER[codec],
              fill_value=0)
    expect = {}
    roots, emu, _host = _both(tmp_path, kw, lambda a: expect.setdefault("e", _writes(a, data)))
    assert emu[f"container:{CONTAINER[codec]}"] > 0
    assert roots[True].keys() == roots[False].keys()
    index = ShardingCodec((4, 4), index_location=loc)  # default index codecs
    for key in [k for k in roots[True] if k.startswith("c/")]:
        got = index.split(roots[True][key], (8, 8))[0][..., 0] == EMPTY
        want = index.split(roots[False][key], (8, 8))[0][..., 0] == EMPTY
        np.testing.assert_array_equal(got, want)
    a = cuzarr.open_array(LocalStore(tmp_path / "True"))
    np.testing.assert_array_equal(a[...], expect["e"])
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "True"), mode="r")[...],
                                  expect["e"])
    if codec in TS_READS:
        np.testing.assert_array_equal(_read_ts(tmp_path / "True"), expect["e"])


@pytest.mark.parametrize("compressors", [
    [{"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}],
    {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "bitshuffle",
                                        "typesize": 4, "blocksize": 0}},
    {"name": "zstd", "configuration": {"level": 1, "checksum": True}},
], ids=["crc32c", "bitshuffle", "zstd-checksum"])
def test_inner_codecs_the_device_does_not_encode_take_the_host_route(tmp_path, compressors):
    data = sample((16, 16), "<f4", 1, offset=10)
    kw = dict(shape=data.shape, dtype="<f4", chunks=(4, 4), shards=(8, 8),
              compressors=compressors, fill_value=0)
    roots, emu, _host = _both(tmp_path, kw, lambda a: a.__setitem__(Ellipsis, data))
    assert not emu
    assert roots[True] == roots[False]


def test_edge_shards_cut_by_the_array_end_take_the_host_route(tmp_path):
    """Shards past the array's end are updated in place on the host; the whole
    ones inside go to the device: 2 x 2 whole shards of 4 inner chunks each."""
    data = sample((20, 19), "<i4", 2, offset=5)
    kw = dict(shape=data.shape, dtype="<i4", chunks=(4, 4), shards=(8, 8),
              compressors={"name": "zstd", "configuration": {"level": 1}}, fill_value=0)
    roots, emu, _host = _both(tmp_path, kw, lambda a: a.__setitem__(Ellipsis, data))
    assert emu["batches"] > 0 and emu["chunks"] == 16
    assert roots[True] == roots[False]
    np.testing.assert_array_equal(_read_ts(tmp_path / "True"), data)


ZSTD = {"name": "zstd", "configuration": {"level": 1}}


@pytest.mark.parametrize("case", ["big-endian", "bool", "complex", "u8", "rectilinear",
                                  "nan-fill"])
def test_dtypes_byte_orders_and_grids_as_on_the_host(tmp_path, case):
    """Inner chunks in big-endian order (swapped by the gather), other dtypes,
    shards of a rectilinear grid (each shard its own shape), a NaN fill (NaN
    inner chunks left out): the host path's bytes."""
    data = (np.arange(24 * 40) % 3).reshape(24, 40)
    kw = dict(shape=data.shape, chunks=(4, 4), shards=(8, 8), compressors=ZSTD, fill_value=0)
    if case == "big-endian":
        big = [{"name": "bytes", "configuration": {"endian": "big"}}, ZSTD]
        kw.update(dtype="f8", shards=None, chunks=(8, 8), compressors=None,
                  serializer=ShardingCodec((4, 4), big))
    elif case == "rectilinear":
        kw.update(dtype="<i4", shards=[[8, 16], [8, 16, 16]])
    elif case == "nan-fill":
        kw.update(dtype="f4", fill_value=np.nan)
        data = np.full(data.shape, np.nan)
        data[3, 5] = 1
    else:
        kw["dtype"] = {"bool": "|b1", "complex": "<c16", "u8": "<u8"}[case]
    data = data.astype(kw["dtype"])

    def write(a):
        a[...] = data
        a[::-1] = data[::-1]

    roots, emu, _host = _both(tmp_path, kw, write)
    assert emu["batches"] > 0
    assert roots[True] == roots[False]
    np.testing.assert_array_equal(cuzarr.open_array(LocalStore(tmp_path / "True"))[...], data)


def test_inner_items_follow_the_shard_selection():
    order = [(0, 0), (0, 1), (1, 0), (1, 1)]
    item = ((1, 0), (slice(0, 4), slice(0, 6)), (slice(2, 6), slice(0, 6)), True)
    got = inner_items(item, (4, 6), (2, 3), order, (6, 6))
    assert [g[0] for g in got] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert got[1][2] == (slice(2, 4, 1), slice(3, 6, 1))
    # a reversed shard selection: inner chunk 0 takes the value's last rows
    rev = ((0, 0), (slice(3, None, -1), slice(0, 6)), (slice(0, 4), slice(0, 6)), True)
    got = inner_items(rev, (4, 6), (2, 3), order, (4, 6))
    value = np.arange(24).reshape(4, 6)
    shard = value[::-1]
    for (_c, _cs, osel, _), (i, j) in zip(got, order, strict=True):
        np.testing.assert_array_equal(value[osel], shard[2 * i : 2 * i + 2, 3 * j : 3 * j + 3])
    with pytest.raises(ValueError, match="whole"):
        inner_items(((0, 0), (slice(0, 2), slice(0, 6)), (slice(0, 2), slice(0, 6)), True),
                    (4, 6), (2, 3), order, (6, 6))


def test_stepped_writes_to_one_element_shards(tmp_path):
    """A stepped selection covers a one-element shard whole (any step selects
    its one element): ``a[::2] = v`` on 1-element shards goes through the
    device writer, as the host path would write it (found by a fuzz)."""
    data = np.arange(5, dtype="<f4") + 1
    kw = dict(shape=(5,), dtype="<f4", chunks=(1,), shards=(1,), fill_value=0,
              compressors={"name": "zstd", "configuration": {"level": 1}})
    dev = cuzarr.create_array(LocalStore(tmp_path / "d"), **kw)
    host = cuzarr.create_array(LocalStore(tmp_path / "h"), **kw)
    with cuzarr.config.set({"gpu.emulate": True}):
        dev[::2] = data[::2]
    host[::2] = data[::2]
    expected = np.where(np.arange(5) % 2 == 0, data, 0)
    np.testing.assert_array_equal(dev[...], expected)
    np.testing.assert_array_equal(host[...], expected)
    item = ((2,), (slice(0, 1, 2),), (slice(1, 2, 1),), True)
    assert inner_items(item, (1,), (1,), [(0,)], (3,))[0][2] == (slice(1, 2, 1),)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_sharded_writes_match_numpy_and_the_host(tmp_path_factory, data):
    ndim = data.draw(st.integers(1, 3))
    inner = tuple(data.draw(st.integers(1, 3)) for _ in range(ndim))
    shards = tuple(c * data.draw(st.integers(1, 3)) for c in inner)
    shape = tuple(data.draw(st.integers(1, 2 * s + 1)) for s in shards)
    sel = tuple(
        data.draw(st.sampled_from([slice(None), slice(None, None, -1)]))
        if data.draw(st.booleans()) else
        slice(data.draw(st.integers(0, s)), data.draw(st.integers(0, s)),
              data.draw(st.sampled_from([None, 1, 2, -1])))
        for s in shape
    )
    name = data.draw(st.sampled_from(["none", "zstd", "lz4", "blosc-lz4"]))
    comp = {**SAME_BYTES, **OTHER}[name]
    loc = data.draw(st.sampled_from(["start", "end"]))
    wec = data.draw(st.booleans())
    base = sample(shape, "<i4", 1, offset=3)
    base[tuple(slice(0, c) for c in inner)] = 0  # an all-fill inner chunk
    expect = base.copy()
    val = -np.arange(expect[sel].size, dtype="<i4").reshape(expect[sel].shape)
    expect[sel] = val
    kw = dict(shape=shape, dtype="<i4", chunks=inner,
              shards={"shape": shards, "index_location": loc}, compressors=comp,
              fill_value=0, write_empty_chunks=wec)

    def write(a):
        a[...] = base
        a[sel] = val

    path = tmp_path_factory.mktemp("w")
    roots, _emu, _host = _both(path, kw, write)
    np.testing.assert_array_equal(zarr.open_array(str(path / "True"), mode="r")[...], expect)
    assert roots[True].keys() == roots[False].keys()
    if name in SAME_BYTES:
        assert roots[True] == roots[False]
