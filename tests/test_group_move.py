"""Group.move: members (arrays, groups with what is below) to another path of the
group; zarr-python 3.4 reads the result (its own Group.move raises
NotImplementedError)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import ContainsArrayError, ContainsGroupError, NodeNotFoundError


def _tree(root: Path, fmt: int) -> cuzarr.Group:
    g = cuzarr.open_group(str(root), mode="w", zarr_format=fmt)
    sub = g.create_group("sub", attributes={"k": 1})
    a = sub.create_array("x", shape=(10, 4), chunks=(3, 2), dtype="int32")
    a[...] = np.arange(40).reshape(10, 4)
    a.attrs["units"] = "m"
    g.create_array("y", shape=(5,), chunks=(5,), dtype="f4")[...] = 1.5
    return g


@pytest.mark.parametrize("fmt", [2, 3])
def test_move_group_and_array(tmp_path: Path, fmt: int) -> None:
    g = _tree(tmp_path / "t", fmt)
    g.move("sub", "moved/deeper")
    g.move("y", "moved/y2")
    assert sorted(g.keys()) == ["moved"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_group(str(tmp_path / "t"), mode="r")
        x = z["moved/deeper/x"]
        np.testing.assert_array_equal(x[...], np.arange(40).reshape(10, 4))
        assert dict(x.attrs) == {"units": "m"}
        assert dict(z["moved/deeper"].attrs) == {"k": 1}
        np.testing.assert_array_equal(z["moved/y2"][...], 1.5)
        assert sorted(z.keys()) == ["moved"]
    assert not (tmp_path / "t" / "sub").exists()


def test_move_refuses(tmp_path: Path) -> None:
    g = _tree(tmp_path / "t", 3)
    with pytest.raises(NodeNotFoundError):
        g.move("nothing", "z")
    with pytest.raises(ContainsArrayError):
        g.move("sub", "y")
    g.create_group("other")
    with pytest.raises(ContainsGroupError):
        g.move("y", "other")
    with pytest.raises(ValueError, match="inside itself"):
        g.move("sub", "sub/inner")
    with pytest.raises(cuzarr.errors.ReadOnlyError):
        cuzarr.open_group(str(tmp_path / "t"), mode="r").move("y", "y3")
    # nothing moved by the refusals
    np.testing.assert_array_equal(g["sub/x"][0], [0, 1, 2, 3])
    assert isinstance(NodeNotFoundError("x"), ValueError)  # as zarr-python 2's errors


def test_move_keeps_consolidated_metadata_true(tmp_path: Path) -> None:
    _tree(tmp_path / "t", 3)
    cuzarr.consolidate_metadata(str(tmp_path / "t"))
    g = cuzarr.open_group(str(tmp_path / "t"), mode="r+")
    g.move("sub/x", "x")
    assert "x" in g and "sub/x" not in g
    reopened = cuzarr.open_group(str(tmp_path / "t"), mode="r")
    flat = reopened.metadata.consolidated_metadata.flattened_metadata
    assert sorted(flat) == ["sub", "x", "y"]
    np.testing.assert_array_equal(reopened["x"][9], [36, 37, 38, 39])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zflat = zarr.open_group(str(tmp_path / "t"), mode="r").metadata.consolidated_metadata
    assert sorted(zflat.flattened_metadata) == ["sub", "x", "y"]


def test_move_in_a_memory_store_and_async() -> None:
    import asyncio

    store: dict = {}
    g = cuzarr.open_group(store, mode="w")
    g.create_array("a", shape=(3,), dtype="u1")[...] = 7
    asyncio.run(g._async_group.move("a", "b"))
    assert sorted(store) == ["b/c/0", "b/zarr.json", "zarr.json"]
    assert g["b"][...].tolist() == [7, 7, 7]


def test_local_move_is_one_rename(tmp_path: Path, monkeypatch) -> None:
    """On a local store a member moves with one directory rename: the chunk
    files keep their inodes and no key is copied (atomic, whatever its size)."""
    import cuzarr.core.move as move_module

    g = _tree(tmp_path / "t", 3)
    before = (tmp_path / "t" / "sub" / "x" / "c" / "0" / "0").stat().st_ino

    async def no_copies(sp_src, sp_dst):
        raise AssertionError("a local move copies nothing")

    monkeypatch.setattr(move_module, "_copy_keys", no_copies)
    g.move("sub", "moved/deeper")
    assert (tmp_path / "t" / "moved" / "deeper" / "x" / "c" / "0" / "0").stat().st_ino == before
    assert not (tmp_path / "t" / "sub").exists()
    # the store's path caches named the old places: reads see the new ones
    np.testing.assert_array_equal(g["moved/deeper/x"][...], np.arange(40).reshape(10, 4))
    assert "sub" not in g


def test_local_move_copies_where_one_rename_cannot(tmp_path: Path) -> None:
    """A member that is a symlinked directory (inside the root), or a
    destination directory already holding stray files, are moved by copying."""
    g = _tree(tmp_path / "t", 3)
    real = tmp_path / "t" / "real_sub"
    (tmp_path / "t" / "sub").rename(real)
    (tmp_path / "t" / "sub").symlink_to(real, target_is_directory=True)
    g = cuzarr.open_group(str(tmp_path / "t"), mode="r+")
    g.move("sub", "copied")
    assert not (tmp_path / "t" / "copied").is_symlink()
    np.testing.assert_array_equal(g["copied/x"][...], np.arange(40).reshape(10, 4))
    stray = tmp_path / "t" / "y2"
    stray.mkdir()
    (stray / "notes.txt").write_text("not zarr")
    g.move("y", "y2")
    np.testing.assert_array_equal(g["y2"][...], 1.5)
    assert (stray / "notes.txt").read_text() == "not zarr"


def test_rename_dir_refusals(tmp_path: Path) -> None:
    import asyncio

    from cuzarr.storage import LocalStore

    store = LocalStore(str(tmp_path / "s"))
    asyncio.run(store.set("a/b/c", b"1"))
    asyncio.run(store.set("d/e", b"2"))
    run = lambda s, d: asyncio.run(store.rename_dir(s, d))  # noqa: E731
    assert not run("a", "d")  # a destination exists
    assert not run("missing", "z")  # nothing at the source
    assert not run("a", "")  # not the root
    assert not run("a", "q/r")  # the destination's parent must exist
    with pytest.raises(cuzarr.errors.StoreKeyError):
        run("a", "../outside")
    assert run("a/b", "d/b")
    assert asyncio.run(store.get("d/b/c")) == b"1" and asyncio.run(store.get("a/b/c")) is None
    with pytest.raises(cuzarr.errors.ReadOnlyError):
        asyncio.run(LocalStore(str(tmp_path / "s"), read_only=True).rename_dir("d", "z"))
