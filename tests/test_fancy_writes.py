"""Fancy (mask, orthogonal, vindex) writes: the chunks they touch, and values against numpy."""

from __future__ import annotations


def test_chunks_touched_by_a_fancy_write_are_found_without_a_big_temporary():
    """The fancy setitem's per-chunk count summed a block-sized bool mask into intp
    along the first axis first: ~10x the time of ``mask.sum()`` (9 s, and twice the
    old peak memory, for ``a[mask] = v`` on a 20000 x 20000 array; the whole write
    took 4 s before). A logical_or reduce, last axis first, needs no such copy."""
    import numpy as np

    from cuzarr.indexing import projection as array_mod

    find = array_mod.any_per_chunk

    def _any_per_chunk(mask, labels):
        return find(mask, labels) > 0

    rng = np.random.default_rng(0)
    mask = rng.random((4000, 4000)) < 0.001
    labels = [np.arange(4000) // 100, np.arange(4000) // 100]
    want = mask.reshape(40, 100, 40, 100).any(axis=(1, 3))
    assert np.array_equal(_any_per_chunk(mask, labels), want)
    # labels out of order (a negative-step slice): the same answer, reordered
    rev = [labels[0][::-1], labels[1]]
    assert np.array_equal(_any_per_chunk(mask[::-1], rev), want)

    # The slow version cast the whole mask to intp for its reduceat: a temporary
    # 8x the mask's size. Measured as memory, not time (no timing in tests).
    import tracemalloc

    tracemalloc.start()
    try:
        _any_per_chunk(mask, labels)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < mask.nbytes, (peak, mask.nbytes)


def test_fancy_writes_still_match_numpy_after_the_faster_chunk_search():
    import numpy as np

    import cuzarr
    from cuzarr.storage import MemoryStore

    rng = np.random.default_rng(1)
    for shards in (None, (4, 6)):
        a = cuzarr.create_array(
            MemoryStore(), shape=(9, 11), chunks=(2, 3), shards=shards, dtype="i4", fill_value=-1
        )
        ref = np.full((9, 11), -1, dtype="i4")
        for _ in range(20):
            m = rng.random((9, 11)) < rng.choice([0.0, 0.05, 0.5])
            a[m] = 5
            ref[m] = 5
            rows = rng.integers(-9, 9, 4)
            a[rows, ::-2] = 7
            ref[rows, ::-2] = 7
            pts = (rng.integers(0, 9, 6), rng.integers(0, 11, 6))
            v = rng.integers(0, 100, 6).astype("i4")
            a.vindex[pts] = v
            ref[pts] = v
            assert np.array_equal(a[...], ref)
