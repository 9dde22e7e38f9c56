"""cuzarr.storage.ObjectStore (obstore) against zarr-python 3.4's ObjectStore.

Real parts only: obstore's local-file store on a temporary directory, its
in-memory store, and S3 through moto's server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarr.storage

import cuzarr
from _moto_helpers import moto_s3_server
from cuzarr.errors import ReadOnlyError
from cuzarr.storage import ObjectStore, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

obstore_store = pytest.importorskip("obstore.store")


def _run(coro):
    return asyncio.run(coro)


async def _keys(it) -> list[str]:
    return sorted([k async for k in it])


def test_arrays_both_ways_with_zarr_python(tmp_path: Path) -> None:
    backing = obstore_store.LocalStore(str(tmp_path), mkdir=True)
    data = np.arange(600, dtype="float32").reshape(20, 30)
    g = cuzarr.open_group(ObjectStore(backing), mode="w")
    a = g.create_array("cz", shape=data.shape, chunks=(7, 8), shards=(14, 16), dtype=data.dtype)
    a[...] = data
    zstore = zarr.storage.ObjectStore(backing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zg = zarr.open_group(zstore, mode="a")
        np.testing.assert_array_equal(zg["cz"][...], data)
        z = zg.create_array("zp", shape=(5, 5), chunks=(2, 2), dtype="int16")
        z[...] = np.arange(25, dtype="int16").reshape(5, 5)
    # the obstore object itself is a store too
    b = cuzarr.open_array(backing, path="zp", mode="r")
    np.testing.assert_array_equal(b[...], np.arange(25).reshape(5, 5))
    assert sorted(cuzarr.open_group(ObjectStore(backing), mode="r").keys()) == ["cz", "zp"]


def test_store_api(tmp_path: Path) -> None:
    s = ObjectStore(obstore_store.MemoryStore())

    async def go() -> None:
        await s.set("a/b/c", b"0123456789")
        await s.set("a/bc", b"x")
        await s.set("ab", b"y")
        assert await s.get("missing") is None
        assert await s.get("a/b/c", byte_range=RangeByteRequest(2, 5)) == b"234"
        assert await s.get("a/b/c", byte_range=OffsetByteRequest(7)) == b"789"
        assert await s.get("a/b/c", byte_range=SuffixByteRequest(3)) == b"789"
        assert await s.get("a/b/c", byte_range=RangeByteRequest(4, 4)) == b""
        assert await s.exists("a/bc") and not await s.exists("a/b")
        assert await s.getsize("a/b/c") == 10
        assert await _keys(s.list()) == ["a/b/c", "a/bc", "ab"]
        assert await _keys(s.list_prefix("a")) == ["a/b/c", "a/bc", "ab"]
        assert await _keys(s.list_prefix("a/")) == ["a/b/c", "a/bc"]
        assert await _keys(s.list_prefix("a/b")) == ["a/b/c", "a/bc"]
        assert await _keys(s.list_dir("")) == ["a", "ab"]
        assert await _keys(s.list_dir("a")) == ["b", "bc"]
        assert await _keys(s.list_dir("a/")) == ["b", "bc"]
        await s.set_if_not_exists("ab", b"new")
        assert await s.get("ab") == b"y"
        await s.delete("ab")
        await s.delete("ab")  # missing: nothing to do
        assert not await s.exists("ab")
        await s.delete_dir("a")
        assert await _keys(s.list()) == []

    _run(go())
    ro = s.with_read_only(True)
    with pytest.raises(ReadOnlyError):
        _run(ro.set("k", b"v"))
    with pytest.raises(TypeError, match="obstore store"):
        ObjectStore({})


def test_pickles_for_dask(tmp_path: Path) -> None:
    s = ObjectStore(obstore_store.LocalStore(str(tmp_path), mkdir=True))
    a = cuzarr.create_array(s, shape=(10,), chunks=(5,), dtype="i4")
    a[...] = np.arange(10)
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(b[...], np.arange(10))


def test_s3_through_moto() -> None:
    import boto3

    with moto_s3_server() as port:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="cuzarr-objectstore"
        )
        backing = obstore_store.S3Store(
            "cuzarr-objectstore",
            endpoint=endpoint,
            region="us-east-1",
            access_key_id="x",
            secret_access_key="x",
            client_options={"allow_http": True},
        )
        store = ObjectStore(backing)
        data = np.random.default_rng(0).random((40, 30))
        a = cuzarr.create_array(store, name="x", shape=data.shape, chunks=(16, 16), dtype="f8")
        a[...] = data
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z = zarr.open_array(zarr.storage.ObjectStore(backing, read_only=True), path="x")
            np.testing.assert_array_equal(z[...], data)
        np.testing.assert_array_equal(
            cuzarr.open_array(store, path="x", mode="r")[5:20], data[5:20]
        )
        cuzarr.consolidate_metadata(store)
        assert list(cuzarr.open_group(store, mode="r").metadata.consolidated_metadata.metadata) == [
            "x"
        ]
