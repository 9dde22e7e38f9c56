"""Regressions found reviewing ba15e6d..a45b683 (each test failed before its fix)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from cuzarr.codecs import compressors
from cuzarr.codecs.compressors import GzipCodec
from cuzarr.errors import CodecError


def test_gzip_member_after_an_oversized_first_one_is_not_decompressed_unbounded(monkeypatch):
    """A first gzip member that already decodes to bound + 1 bytes, then a second
    (a decompression bomb): the bound must still hold for the second member. The
    multi-member reader asked zlib for ``bound - total + 1`` = 0 bytes there, which
    zlib reads as "no limit", and inflated the whole bomb before refusing it."""
    bound = 10
    bomb = gzip.compress(b"\0" * (8 << 20))
    data = gzip.compress(b"x" * (bound + 1)) + bomb
    asked: list[int] = []
    real = zlib.decompressobj

    class Recording:
        def __init__(self, wbits):
            self._d = real(wbits)

        def decompress(self, buf, max_length=0):
            asked.append(max_length)
            return self._d.decompress(buf, max_length)

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(compressors.zlib, "decompressobj", Recording)
    with pytest.raises(CodecError, match="more than 10 bytes"):
        GzipCodec().decode(data, None, size_hint=bound)
    assert asked and 0 not in asked, asked


# ---------------------------------------------------------------------------------
# Regressions found reviewing a45b683..2446249
# ---------------------------------------------------------------------------------


def _consolidated_hierarchy(n_arrays: int = 1, attrs: dict | None = None, store=None):
    import cuzarr
    from cuzarr.storage import MemoryStore

    store = MemoryStore() if store is None else store
    g = cuzarr.create_group(store)
    for i in range(n_arrays):
        g.create_array(f"a{i}", shape=(4,), dtype="i4", attributes=attrs or {})
    sub = g.create_group("s")
    sub.create_array("z", shape=(2,), dtype="i4")
    cuzarr.consolidate_metadata(store)
    return store, cuzarr.open_consolidated(store, mode="a")


def test_chunks_touched_by_a_fancy_write_are_found_without_a_big_temporary():
    """The fancy setitem's per-chunk count summed a block-sized bool mask into intp
    along the first axis first: ~10x the time of ``mask.sum()`` (9 s, and twice the
    old peak memory, for ``a[mask] = v`` on a 20000 x 20000 array; the whole write
    took 4 s before). A logical_or reduce, last axis first, needs no such copy."""
    import numpy as np

    from cuzarr.core import array as array_mod

    find = getattr(array_mod, "_any_per_chunk", None) or array_mod._count_per_chunk

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


def test_pickled_member_of_a_consolidated_group_does_not_carry_the_hierarchy(tmp_path):
    """A member got through a consolidated handle keeps (dict, key) sinks into the
    handle's consolidated dict; pickled (dask tasks, worker processes), each array
    and group dragged every entry of the hierarchy along: 243 KB instead of ~2 KB
    for 200 arrays with 1 KB of attributes."""
    import pickle

    import numpy as np

    _store, h = _consolidated_hierarchy(200, {"blob": "x" * 1000}, str(tmp_path / "h"))
    a = h["a0"]._async_array
    s = h["s"]
    z = s["z"]._async_array
    for node in (a, s, z, s._async_group):
        assert len(pickle.dumps(node)) < 20_000, type(node)
    z2 = pickle.loads(pickle.dumps(z))
    assert z2.shape == (2,)
    s2 = pickle.loads(pickle.dumps(s))
    s2["z"][:] = np.arange(2)
    assert list(s["z"][:]) == [0, 1]


def test_member_changes_after_a_delete_still_reach_the_consolidated_handle():
    """``del h[name]`` replaced the handle's consolidated dict with a new one, so
    members got before it published their changes into a dict nobody reads: the
    next lookup saw the old attributes, and an update through it wrote them back
    over the new ones (the very bug the write-through was made for)."""
    import cuzarr

    store, h = _consolidated_hierarchy(2)
    a = h["a0"]
    del h["a1"]
    a.attrs["x"] = 1
    assert dict(h["a0"].attrs) == {"x": 1}
    h["a0"].attrs["y"] = 2
    assert dict(cuzarr.open_array(store, path="a0").attrs) == {"x": 1, "y": 2}


def test_require_array_over_a_group_replaced_by_an_array_drops_its_members():
    """``require_array`` reads the store and writes the array it finds into the
    handle's snapshot; where the snapshot held a group there, its members stayed,
    so the handle listed (and opened) nodes below an array that do not exist."""
    import cuzarr

    store, h = _consolidated_hierarchy(1)
    g = cuzarr.open_group(store, use_consolidated=False)
    del g["s"]
    g.create_array("s", shape=(3,), dtype="i4")
    h.require_array("s", shape=(3,), dtype="i4")
    assert [k for k, _ in h.members(max_depth=None)] == ["a0", "s"]
    assert "s/z" not in h


def test_open_array_creating_a_v3_array_takes_filters():
    # DESIGN.md: filters are accepted for both formats. open_array(mode="w")
    # had come to go through the legacy create(), which refuses v3 filters.
    import numpy as np

    import cuzarr

    delta = {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}
    for mode in ("w", "a"):
        a = cuzarr.open_array({}, mode=mode, shape=(4,), dtype="i4", filters=[delta])
        a[...] = [1, 2, 3, 4]
        assert a.metadata.zarr_format == 3
        np.testing.assert_array_equal(a[...], [1, 2, 3, 4])
        assert len(a.filters) == 1


def test_zero_d_empty_dimension_names_left_out_as_zarr_does(tmp_path):
    import json

    import zarr

    import cuzarr

    docs = []
    for lib, d in ((cuzarr, tmp_path / "c"), (zarr, tmp_path / "z")):
        lib.create_array(str(d), shape=(), dtype="i4", dimension_names=[])
        docs.append(json.loads((d / "zarr.json").read_text()))
    assert "dimension_names" not in docs[0]
    assert docs[0].keys() == docs[1].keys()
    a = cuzarr.open_array(tmp_path / "c", mode="r")
    assert a.metadata.dimension_names is None
    with pytest.raises(ValueError, match="dimension_names"):
        cuzarr.create_array(tmp_path / "bad", shape=(2,), dtype="i4", dimension_names=[])
