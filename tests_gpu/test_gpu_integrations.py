"""xarray variables and torch batches on the GPU (needs a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuzarr  # noqa: E402


def test_xarray_variables_as_cupy(tmp_path):
    xr = pytest.importorskip("xarray")
    g = cuzarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    t = g.create_array("t", shape=(40, 30), chunks=(10, 10), dtype="f4",
                       dimension_names=["y", "x"])
    data = np.arange(1200, dtype="f4").reshape(40, 30)
    t[...] = data
    from cuzarr.integrations.xarray import CuzarrBackendEntrypoint

    # The class itself (engine="cuzarr" needs the installed entry point).
    ds = xr.open_dataset(str(tmp_path / "d.zarr"), engine=CuzarrBackendEntrypoint,
                         prototype="gpu", mask_and_scale=False)
    sub = ds["t"].isel(y=slice(5, 25), x=[1, 7, 29]).load()
    assert isinstance(sub.data, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(sub.data), data[5:25][:, [1, 7, 29]])


def test_xarray_load_async_as_cupy(tmp_path):
    # Dataset.load_async with prototype="gpu": every variable decoded on the
    # device, the reads on cuzarr's loop, as with the host output
    import asyncio

    xr = pytest.importorskip("xarray")
    from cuzarr.integrations.xarray import CuzarrBackendEntrypoint

    g = cuzarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    rng = np.random.default_rng(1)
    expected = {}
    for i in range(6):
        a = g.create_array(f"v{i}", shape=(40, 30), chunks=(10, 10), dtype="f4",
                           dimension_names=["y", "x"])
        expected[f"v{i}"] = rng.standard_normal((40, 30)).astype("f4")
        a[...] = expected[f"v{i}"]
    ds = xr.open_dataset(str(tmp_path / "d.zarr"), engine=CuzarrBackendEntrypoint,
                         prototype="gpu", mask_and_scale=False)

    async def load():
        return await ds.isel(y=slice(3, 33), x=[0, 9, 29]).load_async()

    got = asyncio.run(load())
    for name, data in expected.items():
        assert isinstance(got[name].data, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(got[name].data), data[3:33][:, [0, 9, 29]])


def test_torch_dataset_on_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from cuzarr.torch import ArrayDataset, PrefetchingLoader

    x = cuzarr.create_array(str(tmp_path / "x"), shape=(256, 8, 8), chunks=(32, 8, 8),
                            dtype="f4")
    y = cuzarr.create_array(str(tmp_path / "y"), shape=(256,), chunks=(64,), dtype="i8")
    xs = np.random.default_rng(0).standard_normal((256, 8, 8)).astype("f4")
    x[...] = xs
    y[...] = np.arange(256)
    ds = ArrayDataset(x, y, device="cuda")
    seen = 0
    for bx, by in PrefetchingLoader(ds, batch_size=64, shuffle=True, seed=1):
        assert bx.device.type == "cuda" and by.device.type == "cuda"
        np.testing.assert_array_equal(bx.cpu().numpy(), xs[by.cpu().numpy()])
        seen += len(by)
    assert seen == 256
