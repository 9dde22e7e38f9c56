"""ZipStore: read/write, and interop with zarr-python's ZipStore both ways."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.core.sync import sync
from cuzarr.errors import ReadOnlyError
from cuzarr.storage import RangeByteRequest, ZipStore


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_cuzarr_writes_zarr_reads(tmp_path, zarr_format):
    path = tmp_path / "out.zip"
    data = np.arange(15 * 8, dtype="f4").reshape(15, 8)
    store = ZipStore(path, mode="w")
    g = cuzarr.create_group(store, zarr_format=zarr_format, attributes={"k": "v"})
    a = g.create_array("a", shape=data.shape, dtype="f4", chunks=(4, 3))
    a[:] = data
    if zarr_format == 3:
        s = g.create_array("s", shape=data.shape, dtype="f4", chunks=(2, 2), shards=(4, 4))
        s[:] = data
    store.close()
    zs = zarr.storage.ZipStore(path, mode="r")
    zg = zarr.open_group(zs, mode="r")
    assert zg.attrs["k"] == "v"
    np.testing.assert_array_equal(zg["a"][:], data)
    if zarr_format == 3:
        np.testing.assert_array_equal(zg["s"][:], data)
    zs.close()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_writes_cuzarr_reads(tmp_path, zarr_format):
    path = tmp_path / "in.zip"
    data = np.arange(100, dtype="i8").reshape(10, 10)
    zs = zarr.storage.ZipStore(path, mode="w")
    zg = zarr.open_group(zs, mode="w", zarr_format=zarr_format)
    za = zg.create_array("x", shape=data.shape, dtype="i8", chunks=(3, 3))
    za[:] = data
    zs.close()
    # str path ending in .zip opens as a zip store
    g = cuzarr.open_group(str(path), mode="r")
    assert isinstance(g.store_path.store, ZipStore)
    np.testing.assert_array_equal(g["x"][:], data)
    np.testing.assert_array_equal(cuzarr.open_array(str(path), path="x")[2:7, 1], data[2:7, 1])


def test_str_path_valid_while_open(tmp_path):
    """The file is a complete zip after every write, before close()."""
    path = str(tmp_path / "live.zip")
    a = cuzarr.create_array(path, shape=(6,), dtype="u1", chunks=(2,))
    a[:] = [1, 2, 3, 4, 5, 6]
    z = zarr.open_array(zarr.storage.ZipStore(path, mode="r"), mode="r")
    np.testing.assert_array_equal(z[:], [1, 2, 3, 4, 5, 6])
    # a second cuzarr store over the same path sees the same data
    np.testing.assert_array_equal(cuzarr.open_array(path, mode="r")[:], [1, 2, 3, 4, 5, 6])


def test_rewrite_and_delete_then_close_compacts(tmp_path):
    path = tmp_path / "dup.zip"
    store = ZipStore(path, mode="a")
    sync(store.set("k", b"one"))
    sync(store.set("k", b"two"))
    sync(store.set("gone", b"x"))
    assert sync(store.get("k")) == b"two"
    with zipfile.ZipFile(path) as zf:  # valid zip, last entry wins
        assert zf.read("k") == b"two"
    sync(store.delete("gone"))
    assert sync(store.get("gone")) is None
    assert not sync(store.exists("gone"))
    with zipfile.ZipFile(path) as zf:
        assert "gone" not in zf.namelist()
    store.close()
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["k"]
        assert zf.read("k") == b"two"


def test_overwrite_array(tmp_path):
    path = str(tmp_path / "ow.zip")
    a = cuzarr.create_array(path, shape=(4,), dtype="i4", chunks=(2,))
    a[:] = 1
    a[:] = 2
    b = cuzarr.create_array(path, shape=(3,), dtype="i2", chunks=(3,), overwrite=True)
    b[:] = 9
    b.store.close()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert len(names) == len(set(names))
    np.testing.assert_array_equal(cuzarr.open_array(path, mode="r")[:], [9, 9, 9])


def test_interface(tmp_path):
    path = tmp_path / "i.zip"
    with ZipStore(path, mode="w") as store:
        sync(store.set("a/b", b"0123456789"))
        sync(store.set("a/c", b"x"))
        assert sync(store.get("a/b", byte_range=RangeByteRequest(3, 6))) == b"345"
        assert sync(store.get("missing")) is None

        async def lists():
            return (
                sorted([k async for k in store.list()]),
                sorted([k async for k in store.list_dir("a")]),
                sorted([k async for k in store.list_prefix("a/")]),
            )

        assert sync(lists()) == (["a/b", "a/c"], ["b", "c"], ["a/b", "a/c"])
    ro = ZipStore(path, mode="r")
    assert sync(ro.get("a/c")) == b"x"
    with pytest.raises(ReadOnlyError):
        sync(ro.set("z", b"1"))
    # reading a path that does not exist creates nothing
    none = ZipStore(tmp_path / "none.zip")
    assert sync(none.get("zarr.json")) is None
    assert not (tmp_path / "none.zip").exists()


def test_default_mode_is_read_only_as_in_zarr_python(tmp_path):
    path = tmp_path / "d.zip"
    with ZipStore(path, mode="w") as w:
        sync(w.set("k", b"v"))
    store = ZipStore(path)
    assert store.read_only and store.mode == "r"
    assert sync(store.get("k")) == b"v"
    with pytest.raises(ReadOnlyError):
        sync(store.set("k", b"w"))
    assert not ZipStore(path, mode="a").read_only
    assert ZipStore(path, mode="a", read_only=True).read_only
    assert ZipStore(path, mode="r", read_only=False).read_only


def test_torn_archive_recovers_on_open_for_writing(tmp_path):
    """A writer killed mid-write leaves entries, then a torn new entry over the
    old central directory: zipfile cannot open that, and its mode "a" would start
    a new archive after it (every key lost). Opening for writing rebuilds the
    archive from the complete entries; every chunk reads the old or new value."""
    from cuzarr.storage.zip import ZipStoreError

    path = tmp_path / "t.zip"
    with ZipStore(path, mode="w") as store:
        cuzarr.create_array(store, shape=(20,), dtype="i4", chunks=(4,))[:] = 1
    old = path.read_bytes()
    start_dir = zipfile.ZipFile(path).start_dir
    store = ZipStore(path, mode="a")
    cuzarr.open_array(store)[0:4] = 2  # appended over the old central directory
    new = path.read_bytes()  # before close() compacts
    store.close()
    torn = 0
    for k in range(start_dir + 1, len(new), 7):
        path.write_bytes(new[:k] + old[k:])  # the file as a kill at byte k leaves it
        try:
            zipfile.ZipFile(path).close()
        except zipfile.BadZipFile:
            torn += 1
            with pytest.raises(ZipStoreError, match="mode 'a'"):
                cuzarr.open_array(ZipStore(path, mode="r"))
        store = ZipStore(path, mode="a")
        got = cuzarr.open_array(store)[:]
        store.close()
        assert got[0] in (1, 2) and (got[:4] == got[0]).all(), (k, got)
        np.testing.assert_array_equal(got[4:], 1)
    assert torn > 5


def test_damaged_zip_raises_cuzarr_errors(tmp_path):
    from cuzarr.errors import ChecksumError
    from cuzarr.storage.zip import ZipStoreError

    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip at all" * 10)
    for mode in ("r", "a"):
        with pytest.raises(ZipStoreError) as info:
            cuzarr.open_array(str(junk), mode=mode)
        assert isinstance(info.value, OSError) and isinstance(info.value, zipfile.BadZipFile)
    assert junk.read_bytes() == b"not a zip at all" * 10  # never replaced
    empty = tmp_path / "empty.zip"  # e.g. from tempfile: an empty archive
    empty.write_bytes(b"")
    cuzarr.create_array(str(empty), shape=(4,), dtype="i4")[:] = 3
    np.testing.assert_array_equal(cuzarr.open_array(str(empty), mode="r")[:], 3)
    path = tmp_path / "flip.zip"
    with ZipStore(path, mode="w") as store:
        cuzarr.create_array(store, shape=(8,), dtype="i4", chunks=(8,), compressors=None)[:] = 5
    raw = bytearray(path.read_bytes())
    info0 = zipfile.ZipFile(path).getinfo("c/0")
    raw[info0.header_offset + 30 + len("c/0") + 2] ^= 1  # a byte of the chunk
    path.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="c/0"):
        cuzarr.open_array(ZipStore(path, mode="r"))[:]


def test_read_only_new_archive_mode_is_refused(tmp_path):
    path = tmp_path / "keep.zip"
    a = cuzarr.create_array(ZipStore(path, mode="w"), shape=(4,), chunks=(2,), dtype="i1")
    a[:] = 1
    a.store_path.store.close()
    for mode in ("w", "x"):
        with pytest.raises((ValueError, FileExistsError)):
            ZipStore(path, mode=mode, read_only=True)
    np.testing.assert_array_equal(cuzarr.open_array(str(path), mode="r")[:], [1, 1, 1, 1])


def test_file_object_archives_read_as_in_zarr_python(tmp_path):
    import io
    import pickle

    path = tmp_path / "f.zip"
    z = zarr.storage.ZipStore(path, mode="w")
    za = zarr.create_array(z, shape=(6, 5), chunks=(4, 4), dtype="i2")
    za[...] = np.arange(30, dtype="i2").reshape(6, 5)
    z.close()
    buf = io.BytesIO(path.read_bytes())
    store = ZipStore(buf)
    assert store.read_only
    np.testing.assert_array_equal(
        cuzarr.open_array(store, mode="r")[...], np.arange(30, dtype="i2").reshape(6, 5)
    )
    assert sync(store.get("zarr.json", byte_range=cuzarr.storage.RangeByteRequest(0, 1))) == b"{"
    with pytest.raises(ReadOnlyError):
        sync(store.set("k", b"v"))
    store.close()
    assert not buf.closed  # the caller's object
    with open(path, "rb") as f:
        assert sorted(cuzarr.open_array(ZipStore(f), mode="r")[0, :]) == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="reading"):
        ZipStore(io.BytesIO(), mode="a")
    with pytest.raises(TypeError, match="read/seek/tell"):
        ZipStore(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(ZipStore(io.BytesIO(path.read_bytes())))
    with pytest.raises(cuzarr.storage.ZipStoreError):
        sync(ZipStore(io.BytesIO(b"not a zip")).get("zarr.json"))
