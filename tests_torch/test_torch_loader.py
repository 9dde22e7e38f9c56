"""cuzarr.torch against the real PyTorch (CPU build), in the Python 3.11 env.

scripts/test.sh runs this directory with .venv311 (torch 2.13.0 CPU wheel).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import cuzarr
from cuzarr.storage import LocalStore
from cuzarr.torch import ArrayDataset, PrefetchingLoader


class CountingStore(LocalStore):
    gets = 0

    async def get(self, key, prototype=None, byte_range=None):
        type(self).gets += 1
        return await super().get(key, prototype, byte_range)


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(100, 8, 8), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(100,), dtype=np.int64)
    a = cuzarr.create_array(str(tmp_path / "images"), shape=images.shape, chunks=(10, 8, 8), dtype="u1")
    a[...] = images
    b = cuzarr.create_array(str(tmp_path / "labels"), shape=labels.shape, chunks=(25,), dtype="i8")
    b[...] = labels
    return tmp_path, a, b, images, labels


def test_dataset_items_and_batches(data):
    _, a, b, images, labels = data
    ds = ArrayDataset(a, b)
    assert len(ds) == 100
    x, y = ds[7]
    assert torch.equal(x, torch.from_numpy(images[7])) and int(y) == labels[7]
    loader = DataLoader(ds, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    seen = 0
    for xb, yb in loader:
        assert xb.shape[1:] == (8, 8) and xb.dtype == torch.uint8
        for x, y in zip(xb, yb, strict=True):
            idx = int(np.flatnonzero((images == x.numpy()).all(axis=(1, 2)))[0])
            assert labels[idx] == int(y)
        seen += len(xb)
    assert seen == 100


def test_dataloader_with_worker_processes(data):
    _, a, b, images, labels = data
    loader = DataLoader(ArrayDataset(a, b), batch_size=10, num_workers=2)
    xs, ys = zip(*loader, strict=True)
    np.testing.assert_array_equal(torch.cat(xs).numpy(), images)
    np.testing.assert_array_equal(torch.cat(ys).numpy(), labels)


def test_batch_reads_each_chunk_once(data):
    tmp_path = data[0]
    a = cuzarr.open_array(CountingStore(tmp_path / "images"))
    ds = ArrayDataset(a)
    CountingStore.gets = 0
    ds.read_batch([0, 1, 2, 3, 9, 50, 51])  # chunks 0 and 5
    assert CountingStore.gets == 2


def test_prefetching_loader(data):
    _, a, b, _, labels = data
    batches = list(PrefetchingLoader(ArrayDataset(a, b), batch_size=32, shuffle=True, seed=1))
    assert [len(x) for x, _ in batches] == [32, 32, 32, 4]
    got = torch.cat([y for _, y in batches]).numpy()
    assert sorted(got.tolist()) == sorted(labels.tolist())


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_arrays_become_torch_tensors(tmp_path, name):
    """bfloat16 / float8 arrays (ml_dtypes) reach torch as the same torch dtype,
    bit for bit: torch.from_numpy alone refuses them."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, name))
    data = (np.arange(-12, 12) / 4).astype(dt).reshape(6, 4)
    a = cuzarr.create_array(str(tmp_path / name), shape=data.shape, chunks=(4, 3), dtype=dt)
    a[...] = data
    (x,) = ArrayDataset(a)[2]
    assert x.dtype == getattr(torch, name)
    xs = torch.cat([x for (x,) in DataLoader(ArrayDataset(a), batch_size=4)])
    assert xs.dtype == getattr(torch, name)
    np.testing.assert_array_equal(xs.view(torch.uint8).numpy(), data.view(np.uint8))
    (pb,) = next(iter(PrefetchingLoader(ArrayDataset(a), batch_size=6)))
    assert torch.equal(pb.view(torch.uint8), xs.view(torch.uint8))


def test_prefetching_loader_len_keeps_the_shuffled_order(data):
    """len() of a shuffled PrefetchingLoader draws no permutation: calling it does
    not change the order of the next epoch."""
    _, a, b, _, _ = data
    ds = ArrayDataset(a, b)
    ref = [y.tolist() for _, y in PrefetchingLoader(ds, batch_size=32, shuffle=True, seed=5)]
    loader = PrefetchingLoader(ds, batch_size=32, shuffle=True, seed=5)
    assert len(loader) == 4
    assert len(PrefetchingLoader(ds, batch_size=32, drop_last=True)) == 3
    assert [y.tolist() for _, y in loader] == ref
    with pytest.raises(ValueError, match="batch_size"):
        PrefetchingLoader(ds, batch_size=0)


def test_big_endian_arrays_become_native_tensors(tmp_path):
    # torch.from_numpy refuses big-endian arrays; v2 ">f4" and N5 arrays are such
    values = np.linspace(-3, 3, 60, dtype=">f4").reshape(20, 3)
    a = cuzarr.create_array(str(tmp_path / "be"), shape=values.shape, chunks=(5, 3),
                            dtype=">f4", zarr_format=2)
    a[...] = values
    assert a[...].dtype == np.dtype(">f4")
    n5 = cuzarr.create_array(str(tmp_path / "x.n5"), name="v", shape=(20,), chunks=(5,),
                             dtype="i2")
    n5[...] = np.arange(20)
    ds = ArrayDataset(a, cuzarr.open_array(str(tmp_path / "x.n5"), path="v"))
    x, y = ds[4]
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(values[4].astype("<f4")))
    assert y.dtype == torch.int16 and int(y) == 4
    xb, yb = next(iter(PrefetchingLoader(ds, batch_size=8)))
    assert torch.equal(xb, torch.from_numpy(values[:8].astype("<f4")))
    assert yb.tolist() == list(range(8))
