"""members() of a group with consolidated metadata: same answer as zarr-python,
in work linear in the number of members (issue 28, item 7)."""

from __future__ import annotations

import itertools
import sys

import pytest
import zarr

import cuzarr
from cuzarr.core.consolidated import split_consolidated


def _hierarchy(store, n: int, zarr_format: int = 3) -> None:
    """``n`` groups under the root, each with one array and one subgroup."""
    root = cuzarr.create_group(store, zarr_format=zarr_format, overwrite=True)
    for i in range(n):
        g = root.create_group(f"g{i}")
        g.create_array("a", shape=(2,), dtype="i1")
        g.create_group("s")
    cuzarr.consolidate_metadata(store)


def _calls(fn) -> int:
    """Python and C function calls made by ``fn()`` (its work, not its time)."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return count


@pytest.mark.parametrize("max_depth", [0, None])
def test_members_of_a_consolidated_group_is_linear(max_depth):
    # Each doubling of the members must about double the work. One scan of every
    # key per group member (the quadratic version) made the ratio ~3.5 here.
    work = []
    for n in (100, 200, 400):
        d: dict = {}
        _hierarchy(d, n)
        g = cuzarr.open_group(d, mode="r")
        assert g._async_group.consolidated is not None
        members = g.members(max_depth=max_depth)
        assert len(members) == (n if max_depth == 0 else 3 * n)
        work.append(_calls(lambda g=g: g.members(max_depth=max_depth)))
    ratios = [b / a for a, b in itertools.pairwise(work)]
    assert all(r < 2.4 for r in ratios), (work, ratios)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_members_match_zarr_python(tmp_path, zarr_format):
    path = str(tmp_path / "h.zarr")
    _hierarchy(path, 5, zarr_format)
    g = cuzarr.open_group(path, mode="r")
    z = zarr.open_group(path, mode="r", use_consolidated=True)
    for depth in (0, 1, None):
        ours = [(k, type(v).__name__) for k, v in g.members(max_depth=depth)]
        theirs = sorted((k, type(v).__name__) for k, v in z.members(max_depth=depth))
        assert ours == theirs
    # a member group keeps its part of the snapshot: its own members need no store
    sub = dict(g.members())["g3"]
    assert sub._async_group.consolidated is not None
    assert [k for k, _ in sub.members(max_depth=None)] == ["a", "s"]


def test_split_consolidated_keeps_each_groups_descendants():
    cons = {"a": 1, "a/b": 2, "a/b/c": 3, "d": 4, "ab": 5}
    assert split_consolidated(cons) == {
        "a": {"b": 2, "b/c": 3}, "a/b": {"c": 3}
    }
    assert split_consolidated(cons, 0) == {"a": {"b": 2, "b/c": 3}}
