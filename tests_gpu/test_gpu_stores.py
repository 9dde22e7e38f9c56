"""GpuMemoryStore: values in device memory, arrays read and written through it,
and zarr-python's GpuMemoryStore reading the same device values (needs a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

cp = pytest.importorskip("cupy")

import cuzarr  # noqa: E402
from cuzarr.storage import GpuMemoryStore  # noqa: E402


def test_values_live_on_the_device_and_read_back():
    store = GpuMemoryStore()
    data = np.arange(1000, dtype="float32").reshape(10, 100)
    a = cuzarr.create_array(store, shape=data.shape, chunks=(5, 50), dtype=data.dtype)
    a[...] = data
    assert all(isinstance(v, cp.ndarray) for v in store._store_dict.values())
    np.testing.assert_array_equal(a[...], data)
    with cuzarr.config.enable_gpu():
        out = cuzarr.open_array(store)[...]
    assert isinstance(out, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(out), data)


def test_from_dict_copies_host_values():
    host = {}
    cuzarr.create_array(host, shape=(8,), chunks=(4,), dtype="i2")[...] = np.arange(8)
    store = GpuMemoryStore.from_dict(host)
    np.testing.assert_array_equal(cuzarr.open_array(store)[...], np.arange(8))
    z = zarr.storage.GpuMemoryStore.from_dict(
        {k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in host.items()}
    )
    np.testing.assert_array_equal(zarr.open_array(z, mode="r")[...].get(), np.arange(8))
