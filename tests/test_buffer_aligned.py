"""Page-aligned read destinations (``cuzarr.buffer.aligned``): the staging pool's
blocks and a local store's per-thread read buffer start on a page, so that the
kernel's copy of a file read into them never runs in its slow, aliased case."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuzarr
from cuzarr.buffer.aligned import PAGE, empty_aligned, is_aligned
from cuzarr.gpu.staging import HostStaging
from cuzarr.storage.local import files


@pytest.mark.parametrize("n", [0, 1, 17, PAGE, (1 << 20) + 3])
def test_empty_aligned_starts_on_a_page_and_owns_its_views(n):
    a = empty_aligned(n)
    assert a.dtype == np.uint8 and a.shape == (n,) and a.flags.writeable
    assert is_aligned(a) and a.ctypes.data % PAGE == 0
    assert a[: n // 2].base is a  # slices point back to it, as to a fresh np.empty
    a[:] = 7
    assert int(a.sum()) == 7 * n


def test_smaller_alignments_and_bad_ones():
    for align in (16, 64, 1 << 16):
        assert empty_aligned(100, align).ctypes.data % align == 0
    with pytest.raises(ValueError, match="power of two"):
        empty_aligned(10, 48)
    with pytest.raises(ValueError, match="power of two"):
        empty_aligned(10, 0)


def test_the_host_staging_pool_lends_page_aligned_blocks_and_takes_them_back():
    pool = HostStaging(keep_bytes=8 << 20)
    a = pool.take(3 << 20)
    assert is_aligned(a)
    pool.give(a)
    assert pool.free_bytes == 4 << 20
    b = pool.take((2 << 20) + 5)  # the same 4 MiB size class
    assert is_aligned(b) and b.base is a.base and pool.free_bytes == 0


def test_local_reads_land_in_a_page_aligned_thread_buffer(tmp_path):
    data = np.arange(300_000, dtype=np.int32).reshape(600, 500)
    a = cuzarr.create_array(tmp_path / "a.zarr", shape=data.shape, chunks=(100, 500),
                            dtype=data.dtype, compressors=None)
    a[...] = data
    seen = []

    def read():
        np.testing.assert_array_equal(a[...], data)
        seen.append(np.frombuffer(files._thread_buffer(1), np.uint8))

    t = threading.Thread(target=read)
    t.start()
    t.join()
    read()
    assert len(seen) == 2 and all(is_aligned(s) for s in seen)
    assert seen[0].ctypes.data != seen[1].ctypes.data  # one buffer per thread


def test_thread_buffer_is_reused_per_thread_and_grows_within_its_limit():
    from cuzarr.buffer.aligned import ThreadBuffer

    tb = ThreadBuffer(least=4096, keep_max=1 << 20)
    a = tb.get(100)
    assert len(a) == 4096 and is_aligned(a) and tb.get(4000) is a  # reused
    b = tb.get(10_000)  # grown, by a quarter more
    assert len(b) == 12_500 and is_aligned(b) and tb.get(12_000) is b
    huge = tb.get(2 << 20)  # beyond keep_max: a buffer of its own, not kept
    assert len(huge) == 2 << 20 and is_aligned(huge) and tb.get(100) is b
    other = []
    t = threading.Thread(target=lambda: other.append(tb.get(100)))
    t.start()
    t.join()
    assert other[0] is not b and len(other[0]) == 4096
