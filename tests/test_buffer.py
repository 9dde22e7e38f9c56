"""Buffer prototypes on a machine without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import cuzarr
import cuzarr.buffer.gpu as bgpu


class _CudaError(RuntimeError):
    pass


class _NoDeviceCupy:
    """CuPy installed, no device: every allocation fails inside CUDA."""

    class cuda:
        class runtime:
            @staticmethod
            def getDeviceCount() -> int:
                raise _CudaError("cudaErrorNoDevice: no CUDA-capable device is detected")

    @staticmethod
    def empty(*args, **kwargs):
        _NoDeviceCupy.cuda.runtime.getDeviceCount()

    zeros = asarray = empty


@pytest.fixture
def no_device(monkeypatch):
    monkeypatch.setattr(bgpu, "import_cupy", lambda: _NoDeviceCupy)
    monkeypatch.setattr(bgpu, "_DEVICE_SEEN", False, raising=False)


def test_gpu_requested_without_a_device_says_so(no_device):
    a = cuzarr.create_array({}, shape=(10, 4), chunks=(3, 4), dtype="i4")
    a[...] = np.arange(40).reshape(10, 4)
    match = "no usable CUDA device"
    with pytest.raises(RuntimeError, match=match):
        a.get_basic_selection(slice(0, 3), prototype="gpu")
    with pytest.raises(RuntimeError, match=match):
        cuzarr.read_many([a.lazy[[1, 2]], a.lazy[[2, 9]]], prototype="gpu")
    with pytest.raises(RuntimeError, match=match):
        cuzarr.open_array(a.store, meta_array="gpu")[0:2]
    before = cuzarr.config.get("buffer")
    with pytest.raises(RuntimeError, match=match), cuzarr.config.enable_gpu():
        a[0:2]
    assert cuzarr.config.get("buffer") == before
    # np.asarray always reads to the host, GPU enabled or not
    with cuzarr.config.enable_gpu():
        np.testing.assert_array_equal(np.asarray(a), np.arange(40).reshape(10, 4))


def test_group_meta_array_reaches_every_array_got_through_it(no_device):
    # open_group(meta_array=...) chooses where the member arrays' reads land, as
    # open_array(meta_array=...) does for one array: here the GPU, which is missing
    store: dict = {}
    g = cuzarr.open_group(store, mode="w")
    g.create_group("sub").create_array("b", shape=(4,), dtype="i4")[...] = 1
    g.create_array("a", shape=(4,), dtype="i4")[...] = 2
    gpu = cuzarr.open_group(store, meta_array="gpu")
    made = gpu.create_array("c", shape=(2,), dtype="i4")
    reached = [
        gpu["a"],
        gpu["sub"]["b"],
        gpu["sub/b"],
        made,
        gpu.create_group("d").create_array("e", shape=(1,), dtype="u1"),
    ]
    reached += [m for _, m in gpu.members(max_depth=None) if isinstance(m, cuzarr.Array)]
    assert len(reached) == 9  # a, c, sub/b, d/e got from the store too
    for a in reached:
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            a[0:1]
    np.testing.assert_array_equal(cuzarr.open_group(store)["a"][...], [2, 2, 2, 2])


def test_group_meta_array_survives_consolidated_metadata_and_open(no_device):
    store: dict = {}
    g = cuzarr.open_group(store, mode="w")
    g.create_group("sub").create_array("b", shape=(2,), dtype="i4")
    g.create_array("y", shape=(2,), dtype="i4")
    cuzarr.consolidate_metadata(store)
    gpu = cuzarr.open_group(store, meta_array="gpu")
    reached = [
        gpu.require_array("y", shape=(2,), dtype="i4"),
        gpu.require_group("sub")["b"],
        gpu.require_group("sub").require_array("b", shape=(2,), dtype="i4"),
        cuzarr.open(store, path="y", meta_array="gpu"),
        cuzarr.open(store, meta_array="gpu")["sub/b"],
    ]
    for a in reached:
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            a[0:1]
