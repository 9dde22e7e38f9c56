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
