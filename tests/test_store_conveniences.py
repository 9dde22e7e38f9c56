"""zarr-python's store conveniences on cuzarr's stores: blocking twins of get/set/
delete, ``get_ranges``, zarr-python ``Buffer`` values, ``MemoryStore.set`` of a
byte range, ``LocalStore.move``; each checked against zarr-python's own store."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import zarr
from zarr.core.buffer import cpu, default_buffer_prototype

import cuzarr
from cuzarr.storage import LocalStore, MemoryStore

# zarr-python's byte requests: its stores take no others, and cuzarr's take them too
RangeByteRequest, SuffixByteRequest = zarr.abc.store.RangeByteRequest, zarr.abc.store.SuffixByteRequest


def _pair(tmp_path, kind):
    if kind == "memory":
        return MemoryStore(), zarr.storage.MemoryStore()
    return LocalStore(tmp_path / "c"), zarr.storage.LocalStore(tmp_path / "z")


def _bytes(v):
    return None if v is None else (v if isinstance(v, bytes) else v.to_bytes())


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_blocking_twins_and_buffer_values(tmp_path, kind):
    ours, theirs = _pair(tmp_path, kind)
    for store in (ours, theirs):
        store.set_sync("a/b", cpu.Buffer.from_bytes(b"0123456789"))
        assert _bytes(store.get_sync("a/b")) == b"0123456789"
        got = store.get_sync("a/b", byte_range=RangeByteRequest(2, 5))
        assert _bytes(got) == b"234"
        assert store.get_sync("missing") is None
        store.delete_sync("a/b")
        assert store.get_sync("a/b") is None
        assert store.supports_consolidated_metadata
    # numpy arrays and bytearrays are bytes-like values too; other objects are refused
    ours.set_sync("n", np.arange(3, dtype="<u2"))
    assert ours.get_sync("n") == np.arange(3, dtype="<u2").tobytes()
    with pytest.raises(TypeError, match="bytes-like"):
        ours.set_sync("x", 3.5)


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_get_ranges_as_zarr_python(tmp_path, kind):
    ours, theirs = _pair(tmp_path, kind)
    ranges = [RangeByteRequest(0, 2), None, SuffixByteRequest(3), RangeByteRequest(4, 4)]
    results = {}
    for name, store in (("ours", ours), ("theirs", theirs)):
        store.set_sync("k", cpu.Buffer.from_bytes(b"abcdefgh"))
        got = store.get_ranges_sync("k", ranges, prototype=default_buffer_prototype())
        results[name] = sorted((i, _bytes(v)) for i, v in got)

        async def missing(store=store):
            async for _ in store.get_ranges("nope", ranges, prototype=default_buffer_prototype()):
                pass

        with pytest.raises(ExceptionGroup) as info:
            asyncio.run(missing())
        assert info.group_contains(FileNotFoundError)
    assert results["ours"] == results["theirs"] == [
        (0, b"ab"), (1, b"abcdefgh"), (2, b"fgh"), (3, b"")
    ]


def test_memory_store_sets_a_byte_range():
    # zarr-python's MemoryStore takes the same call (its own fails in 3.4: a Buffer
    # cannot be assigned a slice of another)
    store = MemoryStore()
    asyncio.run(store.set("k", cpu.Buffer.from_bytes(b"abcdef")))
    asyncio.run(store.set("k", b"XY", byte_range=(2, 4)))
    asyncio.run(store.set("k", b"", byte_range=(0, 1)))
    assert asyncio.run(store.get("k")) == b"bXYef"
    with pytest.raises(KeyError):
        asyncio.run(store.set("missing", b"XY", byte_range=(0, 2)))


def test_local_store_move(tmp_path):
    a = cuzarr.create_array(LocalStore(tmp_path / "old"), shape=(6,), chunks=(2,), dtype="i2")
    a[...] = np.arange(6)
    store = a.store
    asyncio.run(store.move(tmp_path / "deep" / "new"))
    assert not (tmp_path / "old").exists() and str(store) == f"file://{tmp_path}/deep/new"
    np.testing.assert_array_equal(cuzarr.open_array(store)[...], np.arange(6))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "deep" / "new"))[...], np.arange(6))
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError):
        asyncio.run(store.move(tmp_path / "taken"))
    with pytest.raises(cuzarr.errors.ReadOnlyError):
        asyncio.run(store.with_read_only(True).move(tmp_path / "other"))


def test_every_store_takes_buffers_prints_its_url_and_hashes_like_its_equals(tmp_path):
    from cuzarr.storage import FsspecStore, ZipStore

    made = {
        "memory": lambda: MemoryStore(shared),
        "local": lambda: LocalStore(tmp_path / "l"),
        "zip": lambda: ZipStore(tmp_path / "z.zip", mode="a"),
        "fsspec": lambda: FsspecStore.from_url(f"file://{tmp_path}/f"),
    }
    shared: dict = {}
    for kind, make in made.items():
        a, b = make(), make()
        assert a == b and hash(a) == hash(b), kind
        a.set_sync("k", cpu.Buffer.from_bytes(b"buf"))
        assert b.get_sync("k") == b"buf", kind
        assert str(a).split("://")[0] in {"memory", "file", "zip"}, kind
        a.close()


def test_strided_numpy_values_are_written_in_c_order(tmp_path):
    from cuzarr.storage import ZipStore

    v = np.arange(24, dtype="<u2").reshape(4, 6)[::2, 1::2]  # not contiguous
    for store in (MemoryStore(), LocalStore(tmp_path / "l"), ZipStore(tmp_path / "z.zip", mode="w")):
        store.set_sync("k", v)
        assert store.get_sync("k") == v.tobytes(), store
