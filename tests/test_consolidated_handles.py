"""Members of a consolidated group handle: pickling, deletes and replacement."""

from __future__ import annotations


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
