"""zarr-python's own store objects used by cuzarr directly: one store object serves
both libraries, each reading what the other wrote, partial (sharded) reads
included; read-only zarr-python stores refuse cuzarr's writes; a zarr-python store
subclass sees every read cuzarr makes."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import ReadOnlyError
from cuzarr.storage import ZarrPythonStore


def _zarr_stores(tmp_path):
    return {
        "memory": zarr.storage.MemoryStore(),
        "local": zarr.storage.LocalStore(tmp_path / "l"),
        # (a local fsspec filesystem makes no parent directories unless told)
        "fsspec": zarr.storage.FsspecStore.from_url(
            f"file://{tmp_path}/f", storage_options={"auto_mkdir": True}
        ),
        "zip": zarr.storage.ZipStore(tmp_path / "z.zip", mode="w"),
    }


# zarr-python's ZipStore appends a rewritten key as a second entry (zipfile warns)
@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
@pytest.mark.parametrize("kind", ["memory", "local", "fsspec", "zip"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_both_libraries_share_one_zarr_python_store(tmp_path, kind, fmt):
    zs = _zarr_stores(tmp_path)[kind]
    data = np.arange(10 * 8, dtype="<i4").reshape(10, 8)
    shards = (6, 6) if fmt == 3 else None
    a = cuzarr.create_array(zs, name="g/a", shape=data.shape, chunks=(3, 3), shards=shards,
                            dtype=data.dtype, zarr_format=fmt, attributes={"u": 1})
    a[...] = data
    a[2:5, 1] = -1
    data[2:5, 1] = -1
    np.testing.assert_array_equal(zarr.open_array(zs, path="g/a", zarr_format=fmt)[...], data)
    z = zarr.create_array(zs, name="b", shape=(7,), chunks=(2,), dtype="f8", fill_value=2.5,
                          zarr_format=fmt)
    z[1:3] = 1.0
    assert isinstance(a.store, ZarrPythonStore) and a.store.inner is zs
    g = cuzarr.open_group(zs, zarr_format=fmt)
    assert sorted(g.keys()) == ["b", "g"] and g["g/a"].attrs["u"] == 1
    np.testing.assert_array_equal(g["b"][...], [2.5, 1, 1, 2.5, 2.5, 2.5, 2.5])
    np.testing.assert_array_equal(g["g/a"][[0, 9], 1:7:2], data[[0, 9], 1:7:2])
    zs.close()


def test_read_only_zarr_python_store_refuses_writes(tmp_path):
    zarr.create_array(str(tmp_path), shape=(4,), dtype="u1", fill_value=3)
    ro = zarr.storage.LocalStore(tmp_path, read_only=True)
    a = cuzarr.open_array(ro)
    np.testing.assert_array_equal(a[...], [3, 3, 3, 3])
    with pytest.raises(ReadOnlyError):
        a[0] = 1
    assert not (tmp_path / "c").exists()


def test_a_zarr_python_store_subclass_sees_every_read(tmp_path):
    seen = []

    class Counting(zarr.storage.MemoryStore):
        async def get(self, key, prototype, byte_range=None):
            seen.append((key, byte_range))
            return await super().get(key, prototype, byte_range)

    zs = Counting()
    a = cuzarr.create_array(zs, shape=(8,), chunks=(2,), shards=(4,), dtype="i2")
    a[...] = np.arange(8)
    seen.clear()
    assert a[5] == 5
    assert {k for k, _ in seen} == {"c/1"}  # the one shard holding element 5


def test_not_a_store_is_refused():
    with pytest.raises(TypeError, match="not a zarr-python store"):
        ZarrPythonStore({})


def test_wrappers_of_equal_zarr_python_stores_hash_alike(tmp_path):
    a = ZarrPythonStore(zarr.storage.LocalStore(tmp_path))
    b = ZarrPythonStore(zarr.storage.LocalStore(tmp_path))
    assert a == b and len({a, b}) == 1
