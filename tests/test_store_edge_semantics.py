"""Store edge cases found by a storage audit: "/" names no directory, a failed or
symlinked delete never passes for a done one, set_if_not_exists never replaces a
value, listings stay inside the root, options that would do nothing are refused."""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
import zipfile

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import StoreKeyError
from cuzarr.runtime.sync import sync
from cuzarr.storage import LocalStore, MemoryStore, WrapperStore


def _stores(tmp_path):
    from cuzarr.storage import ZipStore

    return {
        "memory": MemoryStore(),
        "local": LocalStore(tmp_path / "local"),
        "zip": ZipStore(tmp_path / "z.zip", mode="w"),
    }


async def _keys(store):
    return sorted([k async for k in store.list()])


@pytest.mark.parametrize("kind", ["memory", "local", "zip"])
def test_delete_dir_of_a_slash_deletes_nothing_as_zarr(tmp_path, kind):
    store = _stores(tmp_path)[kind]
    sync(store.set("a/b", b"1"))
    sync(store.set("c", b"2"))
    sync(store.delete_dir("/"))
    sync(store.delete_dir("//"))
    assert sync(_keys(store)) == ["a/b", "c"]
    z = zarr.storage.MemoryStore()
    from zarr.core.buffer import default_buffer_prototype

    sync(z.set("a/b", default_buffer_prototype().buffer.from_bytes(b"1")))
    sync(z.delete_dir("/"))
    assert sync(_keys(z)) == ["a/b"]
    sync(store.delete_dir("a"))
    assert sync(_keys(store)) == ["c"]


def test_overwrite_through_a_symlinked_array_directory(tmp_path):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    os.symlink(root / "real", root / "x")
    a = cuzarr.create_array(str(root), name="x", shape=(8,), chunks=(4,), dtype="i4")
    a[:] = np.arange(8) + 1
    b = cuzarr.create_array(
        str(root), name="x", shape=(8,), chunks=(4,), dtype="i4", fill_value=0, overwrite=True
    )
    np.testing.assert_array_equal(b[:], np.zeros(8))  # the old chunks are gone
    assert os.path.islink(root / "x") and os.listdir(root / "real") == ["zarr.json"]


def test_delete_dir_refuses_a_symlink_out_of_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"precious")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    store = LocalStore(root)
    with pytest.raises(StoreKeyError):
        sync(store.delete_dir("link"))
    with pytest.raises(StoreKeyError):
        sync(store.delete_dir("link/sub"))
    assert (outside / "keep").read_bytes() == b"precious"


def test_clear_and_delete_dir_root_keep_the_root_directory(tmp_path):
    store = LocalStore(tmp_path / "r")
    sync(store.set("a/b", b"1"))
    sync(store.set("c", b"2"))
    sync(store.clear())
    assert (tmp_path / "r").is_dir() and not os.listdir(tmp_path / "r")
    sync(store.set("a/b", b"1"))
    sync(store.delete_dir(""))
    assert (tmp_path / "r").is_dir() and sync(_keys(store)) == []
    sync(store.delete_dir("missing/dir"))  # nothing there: not an error
    sync(store.set("k", b"v"))
    sync(store.delete_dir("k"))  # a key, not a directory: nothing below it
    assert sync(_keys(store)) == ["k"]


@pytest.mark.parametrize("kind", ["local", "zip"])
def test_set_if_not_exists_never_replaces_a_value(tmp_path, kind):
    """Racing writers of one key: once any call has returned, the value stays (a
    check-then-set lets a writer that checked early replace it)."""
    store = _stores(tmp_path)[kind]
    nthreads, nkeys = 8, 40
    seen: dict[int, list[bytes]] = {k: [] for k in range(nkeys)}
    barrier = threading.Barrier(nthreads)

    def writer(t: int) -> None:
        async def run() -> None:
            for k in range(nkeys):
                await store.set_if_not_exists(f"k/{k}", b"v%d" % t)
                seen[k].append(await store.get(f"k/{k}"))

        barrier.wait()
        asyncio.run(run())

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(nkeys):
        final = sync(store.get(f"k/{k}"))
        assert seen[k] == [final] * nthreads, (k, seen[k], final)
    sync(store.set_if_not_exists("k/0", b"other"))
    assert sync(store.get("k/0")) == seen[0][0]
    if kind == "local":
        leftovers = [n for _, _, fs in os.walk(tmp_path / "local") for n in fs if "tmp" in n]
        assert not leftovers


def test_fsspec_listing_stays_inside_the_root(tmp_path):
    from cuzarr.storage import FsspecStore

    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_bytes(b"s")
    store = FsspecStore.from_url(f"file://{tmp_path}/root")
    sync(store.set("in", b"1"))
    for call in (lambda: store.list_dir(".."), lambda: store.list_prefix("../")):
        with pytest.raises(StoreKeyError):
            sync(_keys_of(call()))
    assert sync(_keys_of(store.list_dir(""))) == ["in"]


async def _keys_of(it):
    return [k async for k in it]


@pytest.mark.parametrize("store", [{}, None, "store"])
def test_storage_options_that_would_do_nothing_are_refused(tmp_path, store):
    if store == "store":
        store = MemoryStore()
    with pytest.raises(TypeError, match="storage_options"):
        cuzarr.create_array(store, shape=(2,), dtype="i4", storage_options={"anon": True})
    with pytest.raises(TypeError, match="storage_options"):
        cuzarr.create_array(str(tmp_path / "p"), shape=(2,), dtype="i4", storage_options={"a": 1})


def test_memory_store_sizes_of_array_values():
    d = {"k": np.arange(4, dtype="i8")}
    store = MemoryStore(d)
    assert sync(store.getsize("k")) == 32 == len(sync(store.get("k")))
    assert sync(store.getsize_prefix("")) == 32


def test_wrapper_overrides_see_set_if_not_exists_clear_and_getsize(tmp_path):
    calls: list[tuple[str, str]] = []

    class Watching(WrapperStore):
        async def get(self, key, prototype=None, byte_range=None):
            calls.append(("get", key))
            return await super().get(key, prototype, byte_range)

        async def set(self, key, value):
            calls.append(("set", key))
            await super().set(key, value.upper())

        async def delete(self, key):
            calls.append(("delete", key))
            await super().delete(key)

    inner = LocalStore(tmp_path / "w")
    w = Watching(inner)
    sync(w.set_if_not_exists("a", b"abc"))
    sync(w.set_if_not_exists("a", b"xyz"))
    assert sync(inner.get("a")) == b"ABC"
    assert sync(w.getsize("a")) == 3 and ("get", "a") in calls
    sync(w.clear())
    assert ("delete", "a") in calls and sync(_keys(inner)) == []


def test_zip_store_keeps_its_compression_through_pickling(tmp_path):
    from cuzarr.storage import ZipStore

    path = tmp_path / "c.zip"
    store = ZipStore(path, mode="w", compression=zipfile.ZIP_DEFLATED)
    sync(store.set("a", b"x" * 1000))
    other = pickle.loads(pickle.dumps(store))
    sync(other.set("b", b"y" * 1000))
    store.close()
    with zipfile.ZipFile(path) as zf:
        assert {i.filename: i.compress_type for i in zf.infolist()} == {
            "a": zipfile.ZIP_DEFLATED,
            "b": zipfile.ZIP_DEFLATED,
        }


def test_delete_dir_checks_symlinks_afresh_and_refuses_links_to_parents(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"precious")
    root = tmp_path / "root"
    store = LocalStore(root)
    sync(store.set("a/x", b"1"))
    sync(store.set("b/y", b"2"))
    # a directory the store object has already checked, swapped for a link out
    (root / "a" / "x").unlink()
    (root / "a").rmdir()
    os.symlink(outside, root / "a")
    with pytest.raises(StoreKeyError):
        sync(store.delete_dir("a"))
    assert (outside / "keep").read_bytes() == b"precious"
    os.symlink(root, root / "loop")
    with pytest.raises(StoreKeyError):
        sync(store.delete_dir("loop"))
    assert sync(store.get("b/y")) == b"2"


def test_delete_dir_goes_on_past_entries_that_vanish(tmp_path, monkeypatch):
    store = LocalStore(tmp_path / "v")
    for i in range(20):
        sync(store.set(f"g/c/{i}", b"x"))
    real_unlink = os.unlink
    gone = []

    def racing_unlink(path, *a, **kw):
        if not gone:  # another deleter got there first
            gone.append(path)
            real_unlink(path, *a, **kw)
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, "unlink", racing_unlink)
    sync(store.delete_dir("g"))
    monkeypatch.undo()
    assert gone and sync(_keys(store)) == [] and not (tmp_path / "v" / "g").exists()


@pytest.mark.parametrize("err", ["EPERM", "ENOSYS", "EXDEV"])
def test_set_if_not_exists_without_hard_links(tmp_path, monkeypatch, err):
    import errno

    def no_link(*a, **kw):
        raise OSError(getattr(errno, err), "no hard links here")

    monkeypatch.setattr(os, "link", no_link)
    store = LocalStore(tmp_path / "n")
    sync(store.set_if_not_exists("k", b"first"))
    sync(store.set_if_not_exists("k", b"second"))
    assert sync(store.get("k")) == b"first"
    assert os.listdir(tmp_path / "n") == ["k"]  # no temporaries left


def test_file_object_zip_store_copies_stay_read_only(tmp_path):
    import io

    from cuzarr.storage import LoggingStore, ZipStore, ZipStoreError

    path = tmp_path / "f.zip"
    with ZipStore(path, mode="w") as w:
        cuzarr.create_array(w, shape=(3,), dtype="i1")[...] = 4
    store = ZipStore(io.BytesIO(path.read_bytes()))
    ro = store.with_read_only(True)
    np.testing.assert_array_equal(cuzarr.open_array(ro, mode="r")[...], [4, 4, 4])
    with pytest.raises(ZipStoreError):
        store.with_read_only(False)
    log = LoggingStore(store, log_level="WARNING")
    np.testing.assert_array_equal(cuzarr.open_array(log, mode="r")[...], [4, 4, 4])
    with pytest.raises(ZipStoreError):
        store._h.compact()
