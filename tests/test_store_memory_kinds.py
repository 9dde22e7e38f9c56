"""ManagedMemoryStore (named dicts that memory:// URLs find) and GpuMemoryStore's
refusal without a device; zarr-python 3.4's ManagedMemoryStore is the oracle of the
URL and naming rules. GpuMemoryStore on a device: tests_gpu/test_gpu_stores.py."""

from __future__ import annotations

import asyncio
import gc
import pickle

import numpy as np
import pytest
import zarr.storage

import cuzarr
from cuzarr.storage import ManagedMemoryStore


def test_name_url_and_path_as_zarr_python() -> None:
    for cls in (ManagedMemoryStore, zarr.storage.ManagedMemoryStore):
        s = cls("kinds-a")
        assert str(s) == "memory://kinds-a" and s.name == "kinds-a"
        sub = cls.from_url("memory://kinds-a/sub/dir")
        assert str(sub) == "memory://kinds-a/sub/dir" and sub.path == "sub/dir"
        assert repr(sub) == "ManagedMemoryStore('memory://kinds-a/sub/dir')"
        assert cls("kinds-a") == s and cls("kinds-b") != s
        with pytest.raises(ValueError):
            cls("a/b")
        with pytest.raises(ValueError):
            cls.from_url("memory://never-made-kinds")
        assert str(cls()) != str(cls())  # unnamed: a new name each


def test_url_finds_the_store_and_paths_are_separate() -> None:
    m = ManagedMemoryStore("kinds-data")
    g = cuzarr.open_group(m, mode="w")
    g.create_array("x", shape=(6,), chunks=(2,), dtype="i4")[...] = np.arange(6)
    a = cuzarr.open_array("memory://kinds-data/x", mode="r")
    np.testing.assert_array_equal(a[...], np.arange(6))
    sub = ManagedMemoryStore.from_url("memory://kinds-data/x")
    assert sorted(sub._store_dict) == ["c/0", "c/1", "c/2", "zarr.json"]
    np.testing.assert_array_equal(cuzarr.open_array(sub)[...], np.arange(6))
    # writes through a sub-path store land under that path of the shared dict
    g.create_group("grp")
    in_grp = ManagedMemoryStore.from_url("memory://kinds-data/grp")
    cuzarr.create_array(in_grp, name="y", shape=(2,), dtype="u1")[...] = 9
    assert "grp/y/c/0" in m._store_dict
    assert sorted(cuzarr.open_group(m, mode="r")["grp"].keys()) == ["y"]
    ro = ManagedMemoryStore.from_url("memory://kinds-data", read_only=True)
    with pytest.raises(cuzarr.errors.ReadOnlyError):
        asyncio.run(ro.set("k", b"v"))


def test_dict_freed_with_its_last_store() -> None:
    s = ManagedMemoryStore("kinds-temp")
    asyncio.run(s.set("k", b"v"))
    del s
    gc.collect()
    with pytest.raises(ValueError, match="kinds-temp"):
        ManagedMemoryStore.from_url("memory://kinds-temp")


def test_pickle_within_a_process_shares_the_dict() -> None:
    s = ManagedMemoryStore("kinds-pickle", path="p")
    asyncio.run(s.set("k", b"v"))
    t = pickle.loads(pickle.dumps(s))
    assert t == s and asyncio.run(t.get("k")) == b"v"


def test_gpu_memory_store_without_a_device_says_so() -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return  # a device: tests_gpu/test_gpu_stores.py covers the store
    except Exception:  # no driver: the case this test is about
        pass
    with pytest.raises(RuntimeError, match="GpuMemoryStore needs CuPy and a CUDA device"):
        cuzarr.storage.GpuMemoryStore()
