"""xarray's async loading (``Dataset.load_async``, async indexing) through
engine="cuzarr": values against engine="zarr" (zarr-python) and numpy, the reads
of all variables on cuzarr's one event loop under its one concurrency limit,
host and (emulated) device reads, and the consolidated-metadata fallback and
errors as engine="zarr" has them."""

from __future__ import annotations

import asyncio
import threading
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

import cuzarr
from cuzarr.errors import GroupNotFoundError
from cuzarr.gpu.executor import HostExecutor
from cuzarr.integrations.xarray import CuzarrBackendArray
from cuzarr.runtime import sync as cuzarr_sync
from cuzarr.storage import LocalStore

N_VARS = 20


def _dataset(n_vars: int = 4) -> xr.Dataset:
    rng = np.random.default_rng(7)
    data = {
        f"v{i}": (("t", "x"), rng.standard_normal((12, 10)).astype("f4"), {"units": "K"})
        for i in range(n_vars)
    }
    data["n"] = (("t",), np.arange(12, dtype="i8"))
    return xr.Dataset(data, coords={"t": np.arange(12), "x": np.linspace(0, 1, 10)})


def _write(path, fmt: int, n_vars: int = 4, consolidated: bool = True) -> xr.Dataset:
    ds = _dataset(n_vars)
    enc = {k: {"chunks": (4, 5)} for k in ds.data_vars if k.startswith("v")}
    ds.to_zarr(path, zarr_format=fmt, encoding=enc, consolidated=consolidated, mode="w")
    return ds


@pytest.mark.parametrize("fmt", [2, 3])
def test_load_async_equals_load_and_zarr_engine(tmp_path, fmt):
    path = tmp_path / "d.zarr"
    expected = _write(path, fmt)
    got = asyncio.run(xr.open_dataset(path, engine="cuzarr").load_async())
    sync_loaded = xr.open_dataset(path, engine="cuzarr").load()
    ref = asyncio.run(xr.open_dataset(path, engine="zarr").load_async())
    xr.testing.assert_identical(got, ref)
    xr.testing.assert_identical(got, sync_loaded)
    xr.testing.assert_identical(got, expected)
    assert all(isinstance(v.data, np.ndarray) for v in got.variables.values())


INDEXERS = [
    {"t": slice(1, 11, 3), "x": 4},  # basic
    {"t": [0, 5, 11], "x": slice(None, None, -2)},  # outer
    {"t": xr.DataArray([1, 3, 9], dims="p"), "x": xr.DataArray([0, 9, 4], dims="p")},  # vectorized
    {"t": 3, "x": 2},  # a scalar
]


@pytest.mark.parametrize("indexer", INDEXERS, ids=["basic", "outer", "vectorized", "scalar"])
def test_async_indexing_like_sync_indexing(tmp_path, indexer):
    path = tmp_path / "d.zarr"
    expected = _write(path, 3)
    ds = xr.open_dataset(path, engine="cuzarr")

    async def load() -> xr.Dataset:
        return await ds.isel(indexer).load_async()

    got = asyncio.run(load())
    xr.testing.assert_identical(got, ds.isel(indexer).load())
    xr.testing.assert_identical(got, expected.isel(indexer))


class _InFlight(LocalStore):
    """A real local store that also records, for each ``get``, the thread and
    loop it ran on and how many gets were in flight at once (each get holds
    its slot for a few milliseconds, as a remote store's request would). The
    counts are in a shared dict: the store a read-only open uses is a copy."""

    def __init__(self, root):
        super().__init__(root)
        self.count = {"now": 0, "peak": 0}
        self.loops: set[int] = set()
        self.threads: set[str] = set()
        self.keys: list[str] = []

    async def get(self, key, prototype=None, byte_range=None):
        self.loops.add(id(asyncio.get_running_loop()))
        self.threads.add(threading.current_thread().name)
        self.keys.append(key)
        c = self.count
        c["now"] += 1
        c["peak"] = max(c["peak"], c["now"])
        try:
            await asyncio.sleep(0.005)
            return await super().get(key, prototype, byte_range)
        finally:
            c["now"] -= 1


@pytest.mark.parametrize("limit", [3, 64])
def test_concurrent_variables_share_one_loop_and_one_limit(tmp_path, limit):
    path = tmp_path / "d.zarr"
    expected = _write(path, 3, n_vars=N_VARS)
    store = _InFlight(path)
    ds = xr.open_dataset(store, engine="cuzarr")
    store.keys.clear()
    store.count["peak"] = 0
    store.loops.clear()
    with cuzarr.config.set({"async.concurrency": limit}):
        got = asyncio.run(ds.load_async())
    xr.testing.assert_identical(got, expected)
    chunk_keys = [k for k in store.keys if "/c/" in k]
    assert len(chunk_keys) == len(set(chunk_keys)) == N_VARS * 3 * 2 + 1  # each chunk once
    # every read ran on cuzarr's event loop (one loop for all variables) ...
    assert store.loops == {id(cuzarr_sync.get_loop())}
    assert store.threads == {"cuzarr-io"}
    # ... under its one limit, which the variables' reads fill together
    # (one variable alone has 6 chunks)
    assert store.count["peak"] == min(limit, len(chunk_keys))


def test_sync_loads_read_one_variable_at_a_time(tmp_path):
    # the contrast to the test above: Dataset.load() reads variable after variable
    path = tmp_path / "d.zarr"
    _write(path, 3, n_vars=N_VARS)
    store = _InFlight(path)
    ds = xr.open_dataset(store, engine="cuzarr")
    store.count["peak"] = 0
    ds.load()
    assert store.count["peak"] <= 6


def test_load_async_cancelled_stops_reads(tmp_path):
    path = tmp_path / "d.zarr"
    _write(path, 3, n_vars=N_VARS)
    store = _InFlight(path)
    ds = xr.open_dataset(store, engine="cuzarr")

    async def cancel_soon() -> None:
        task = asyncio.ensure_future(ds.load_async())
        await asyncio.sleep(0.002)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with cuzarr.config.set({"async.concurrency": 2}):
        asyncio.run(cancel_soon())
        # the cancellation reaches cuzarr's loop a moment later (reads already
        # let through by then may still start); after that, nothing more is read
        cuzarr_sync.sync(asyncio.sleep(0.1))
        n = len(store.keys)
        cuzarr_sync.sync(asyncio.sleep(0.2))
    assert len(store.keys) == n < N_VARS * 6
    assert store.count["now"] == 0


class _Slow(LocalStore):
    """A real local store whose data variables' chunk reads take a second (a
    stalled remote; the coordinates, which open_dataset loads, read at once)."""

    async def get(self, key, prototype=None, byte_range=None):
        if key.startswith("v") and "/c/" in key:
            await asyncio.sleep(1.0)
        return await super().get(key, prototype, byte_range)


def test_load_async_honours_async_timeout(tmp_path):
    path = tmp_path / "d.zarr"
    _write(path, 3)
    ds = xr.open_dataset(_Slow(path), engine="cuzarr")
    with (
        cuzarr.config.set({"async.timeout": 0.1}),
        pytest.raises(TimeoutError, match=r"async\.timeout"),
    ):
        asyncio.run(ds.load_async())


def test_async_load_from_a_thread_with_its_own_loop(tmp_path):
    # two user loops at once (two threads): both are served, values intact
    path = tmp_path / "d.zarr"
    expected = _write(path, 2)
    results: list[xr.Dataset] = []

    def worker() -> None:
        results.append(asyncio.run(xr.open_dataset(path, engine="cuzarr").load_async()))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    for r in results:
        xr.testing.assert_identical(r, expected)


def test_load_async_device_read_path_emulated(tmp_path):
    # gpu.emulate: the reads take the device path (the GPU reader's plan and
    # batches), run on the host; values as the host path and engine="zarr"
    path = tmp_path / "d.zarr"
    expected = _write(path, 3)
    HostExecutor.stats.clear()
    with cuzarr.config.set({"gpu.emulate": True}):
        got = asyncio.run(xr.open_dataset(path, engine="cuzarr").load_async())
    assert sum(HostExecutor.stats.values()) > 0
    xr.testing.assert_identical(got, expected)


def test_backend_array_keeps_the_cuzarr_array_private(tmp_path):
    path = tmp_path / "d.zarr"
    _write(path, 3)
    ds = xr.open_dataset(path, engine="cuzarr")
    backend = ds["v0"].variable._data
    while hasattr(backend, "array"):  # xarray's wrappers, down to the backend array
        backend = backend.array
    assert isinstance(backend, CuzarrBackendArray)
    assert not hasattr(backend, "array")  # xarray takes .array for a wrapped duck array
    assert isinstance(backend.get_array(), cuzarr.Array)


@pytest.mark.parametrize("fmt", [2, 3])
def test_unconsolidated_fallback_warns_like_zarr_engine(tmp_path, fmt):
    path = tmp_path / "d.zarr"
    expected = _write(path, fmt, consolidated=False)
    for engine in ("zarr", "cuzarr"):
        with pytest.warns(RuntimeWarning, match="Failed to open Zarr store with consolidated") as w:
            ds = xr.open_dataset(path, engine=engine)
        assert w[0].filename == __file__  # points at the caller, as engine="zarr"'s
        xr.testing.assert_identical(ds.load(), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning when asked for unconsolidated
        xr.open_dataset(path, engine="cuzarr", consolidated=False)
    consolidated = tmp_path / "c.zarr"
    _write(consolidated, fmt, consolidated=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none when there is consolidated metadata
        xr.open_dataset(consolidated, engine="cuzarr")


class _NoConsolidated(zarr.storage.WrapperStore):
    """A zarr-python store that cannot hold consolidated metadata (as Icechunk's)."""

    supports_consolidated_metadata = False

    def __init__(self, store, *, read_only: bool = False) -> None:
        self._store = store.with_read_only(read_only=read_only)

    def with_read_only(self, read_only: bool = False):
        return type(self)(self._store, read_only=read_only)


@pytest.mark.parametrize("consolidated", [True, None, False])
def test_store_without_consolidated_metadata_support(consolidated):
    store = _NoConsolidated(zarr.storage.MemoryStore({}))
    expected = _dataset()
    expected.to_zarr(store, consolidated=consolidated)
    assert not cuzarr.open_group(store, mode="r").store.supports_consolidated_metadata
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as engine="zarr": no fallback warning here
        got = xr.open_dataset(store, engine="cuzarr", consolidated=consolidated)
        ref = xr.open_dataset(store, engine="zarr", consolidated=consolidated)
    xr.testing.assert_identical(got.load(), ref.load())
    xr.testing.assert_identical(got, expected)


@pytest.mark.parametrize("group", [None, "sub/g"])
def test_missing_store_or_group_says_it_does_not_exist(tmp_path, group):
    missing = tmp_path / "missing.zarr"
    with pytest.raises(GroupNotFoundError, match="does not exist") as e:
        xr.open_dataset(missing, engine="cuzarr", group=group)
    assert isinstance(e.value, FileNotFoundError)
    assert str(missing) in str(e.value)
    if group:
        assert repr(group) in str(e.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        xr.open_zarr(missing)  # engine="zarr"'s words, which users match on
