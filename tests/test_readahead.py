"""Read-ahead of a device read's batches (cuzarr.core.readahead,
``gpu.read_ahead``): the read is right, its errors surface as without it, and
the staging buffers read ahead come back to their pool however the read ends."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuzarr
from cuzarr.core.readahead import ReadAhead
from cuzarr.gpu.staging import host_staging
from cuzarr.storage import LocalStore


def _array(tmp_path, shape=(64, 256)):
    data = np.cumsum(np.random.default_rng(2).standard_normal(shape), axis=1).astype("<f4")
    a = cuzarr.create_array(LocalStore(tmp_path), shape=shape, dtype=data.dtype,
                            chunks=(2, 256), compressors={"name": "zstd",
                                                          "configuration": {"level": 1}})
    a[...] = data
    return a, data


# batches of 4 chunks of 2 KiB: 8 batches a read
SMALL = {"gpu.emulate": True, "gpu.read_batch_bytes": 8 << 10, "gpu.read_workers": 2,
         "threading.max_workers": 2}


@pytest.mark.parametrize("ahead", [1, 3])
@pytest.mark.parametrize("sel", [np.s_[...], np.s_[5:61, 3:200], np.s_[::-1, 7]])
def test_read_ahead_reads_what_numpy_has(tmp_path, ahead, sel):
    a, data = _array(tmp_path)
    with cuzarr.config.set({**SMALL, "gpu.read_ahead": ahead}):
        np.testing.assert_array_equal(a[sel], data[sel])


def test_read_ahead_fetches_off_the_worker_threads(tmp_path, monkeypatch):
    """The batches' files are read on store I/O threads, not by the workers
    (but the first batch each of the two worker loops takes: nothing was
    taken before it to read it ahead)."""
    from cuzarr.gpu import reader as reader_module

    a, data = _array(tmp_path)
    threads = []
    real = reader_module.DeviceReader.fetch_into

    def spy(self, get_into, keys, kind):
        threads.append(threading.current_thread().name)
        return real(self, get_into, keys, kind)

    monkeypatch.setattr(reader_module.DeviceReader, "fetch_into", spy)
    with cuzarr.config.set({**SMALL, "gpu.read_ahead": 2}):
        np.testing.assert_array_equal(a[...], data)
    off = [t for t in threads if t.startswith("cuzarr-store-io")]
    assert len(threads) == 8 and len(off) >= len(threads) - 2


def test_read_ahead_error_names_the_chunk_and_returns_staging(tmp_path):
    """A corrupt chunk raises its CodecError as without read-ahead, and every
    staging buffer of the read (read ahead, or of the failed batch) is back in
    the pool when it has raised."""
    a, _ = _array(tmp_path)
    path = tmp_path / "c" / "5" / "0"
    raw = bytearray(path.read_bytes())
    raw[0] ^= 0xFF  # the zstd magic
    path.write_bytes(bytes(raw))
    made = []
    real = host_staging._alloc
    host_staging.clear()
    host_staging._alloc = lambda n: made.append(n) or real(n)
    try:
        with cuzarr.config.set({**SMALL, "gpu.read_ahead": 3}):
            with pytest.raises(cuzarr.errors.CodecError, match="c/5/0"):
                a[...]
            assert made and host_staging.free_bytes == sum(made)
            with pytest.raises(cuzarr.errors.CodecError, match="c/5/0"):
                a[...]
            assert host_staging.free_bytes == sum(made)
    finally:
        host_staging._alloc = real


def test_read_ahead_takes_batches_it_did_not_read_ahead():
    """A batch split otherwise than read ahead, or asked for once closed, is
    fetched by its taker; what was read ahead and never taken is released."""
    fetched, released = [], []

    def fetch(lo, hi):
        fetched.append((lo, hi))
        return (lo, hi)

    ra = ReadAhead(fetch, released.append, 10, 4, 1)
    assert ra.take(0, 4) == (0, 4)
    assert ra.take(4, 6) == (4, 6)  # not the split read ahead (4, 8)
    ra.close()
    assert ra.take(8, 10) == (8, 10)
    assert (4, 8) in released or (4, 8) not in fetched  # dropped: released or never read
    assert fetched.count((8, 10)) >= 1 and (0, 4) not in released
