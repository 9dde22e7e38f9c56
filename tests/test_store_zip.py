"""ZipStore: read/write, and interop with zarr-python's ZipStore both ways."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import ReadOnlyError
from cuzarr.runtime.sync import sync
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
    # a read-only store over a path that does not exist is refused, creating nothing
    with pytest.raises(FileNotFoundError):
        ZipStore(tmp_path / "none.zip")
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

    class ReadOnlyFile:  # read/seek/tell, no write(): readable only
        def __init__(self, data):
            self._b = io.BytesIO(data)
            self.read, self.seek, self.tell = self._b.read, self._b.seek, self._b.tell

    with pytest.raises(TypeError, match="write"):
        ZipStore(ReadOnlyFile(path.read_bytes()), mode="a")
    ro_obj = ZipStore(ReadOnlyFile(path.read_bytes()))
    assert sorted(cuzarr.open_array(ro_obj, mode="r")[1, :]) == [5, 6, 7, 8, 9]
    with pytest.raises(TypeError, match="read/seek/tell"):
        ZipStore(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(ZipStore(io.BytesIO(path.read_bytes())))
    with pytest.raises(cuzarr.storage.ZipStoreError):
        sync(ZipStore(io.BytesIO(b"not a zip")).get("zarr.json"))


# -- a missing archive opened read-only ------------------------------------------


def test_read_only_store_over_a_missing_file_raises_file_not_found(tmp_path):
    """zipfile's (and zarr-python's) mode "r" raises for a missing file; cuzarr used
    to read it as an empty archive, so ``open_array("typo.zip", mode="r")`` said "no
    array found" instead of naming the missing file."""
    missing = tmp_path / "missing.zip"
    with pytest.raises(FileNotFoundError) as info:
        ZipStore(missing)
    assert info.value.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        ZipStore(missing, mode="a", read_only=True)
    with pytest.raises(FileNotFoundError):
        zarr.open_array(zarr.storage.ZipStore(missing, mode="r"), mode="r")  # the oracle
    for opener in (cuzarr.open_array, cuzarr.open_group, cuzarr.open):
        with pytest.raises(FileNotFoundError, match=r"missing\.zip") as info:
            opener(str(missing), mode="r")
        assert not isinstance(info.value, cuzarr.errors.NodeNotFoundError)
    (tmp_path / "dir.zip").mkdir()
    with pytest.raises(IsADirectoryError):
        ZipStore(tmp_path / "dir.zip")
    assert not missing.exists()  # nothing was created
    # a writable store still starts a missing archive on its first write
    cuzarr.create_array(str(missing), shape=(2,), dtype="i1")[:] = 1
    np.testing.assert_array_equal(cuzarr.open_array(str(missing), mode="r")[:], [1, 1])


# -- writing into a file object --------------------------------------------------


def _entries(data: bytes) -> list[str]:
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        return zf.namelist()


def _zarr_reads(data: bytes, path: str = "") -> np.ndarray:
    import io

    z = zarr.storage.ZipStore(io.BytesIO(data), mode="r")
    try:
        return zarr.open_array(z, mode="r", path=path)[...]
    finally:
        z.close()


def test_writes_into_a_seekable_file_object(tmp_path):
    """Modes "w"/"x" write into an io.BytesIO as zarr-python does; as with a path,
    the object holds a complete archive after every write call, rewrites and
    deletes are compacted away, and close() leaves the caller's object open."""
    import io

    buf = io.BytesIO(b"old bytes that the new archive replaces" * 50)
    store = ZipStore(buf, mode="w")
    assert not store.read_only and store.supports_deletes
    a = cuzarr.create_array(store, shape=(10,), chunks=(4,), dtype="i4", fill_value=0)
    a[:] = np.arange(1, 11)
    assert sorted(_entries(buf.getvalue())) == ["c/0", "c/1", "c/2", "zarr.json"]
    np.testing.assert_array_equal(_zarr_reads(buf.getvalue()), np.arange(1, 11))
    a[1:3] = 70  # read-modify-write: reads back what it wrote, a superseding entry
    assert sorted(_entries(buf.getvalue())) == ["c/0", "c/0", "c/1", "c/2", "zarr.json"]
    store.close()
    assert not buf.closed
    assert sorted(_entries(buf.getvalue())) == ["c/0", "c/1", "c/2", "zarr.json"]  # compacted
    a[4:8] = 0  # all fill value: the chunk is deleted (the archive rewritten at once)
    expect = np.array([1, 70, 70, 4, 0, 0, 0, 0, 9, 10])
    assert sorted(_entries(buf.getvalue())) == ["c/0", "c/2", "zarr.json"]
    np.testing.assert_array_equal(_zarr_reads(buf.getvalue()), expect)
    store.close()
    # used again after close(): appends to the archive (mode "w" was the first open)
    a[9] = 100
    store.close()
    expect[9] = 100
    np.testing.assert_array_equal(_zarr_reads(buf.getvalue()), expect)
    # copies share the archive; a read-only copy of a writable one can be made writable
    ro = store.with_read_only(True)
    with pytest.raises(ReadOnlyError):
        sync(ro.set("k", b"v"))
    sync(ro.with_read_only(False).set("k", b"v"))
    assert sync(store.get("k")) == b"v"
    # mode "x" is "w" for an object (zipfile has no file to find there)
    fresh = io.BytesIO()
    with ZipStore(fresh, mode="x") as x:
        cuzarr.create_array(x, shape=(3,), dtype="u1")[:] = 5
    np.testing.assert_array_equal(_zarr_reads(fresh.getvalue()), [5, 5, 5])
    # a root overwrite clears the archive in place
    with ZipStore(fresh, mode="a") as again:
        cuzarr.create_array(again, shape=(2,), dtype="i2", overwrite=True)[:] = 3
    assert sorted(_entries(fresh.getvalue())) == ["c/0", "zarr.json"]
    np.testing.assert_array_equal(_zarr_reads(fresh.getvalue()), [3, 3])


def test_appends_to_an_archive_in_a_file_object(tmp_path):
    import io

    path = tmp_path / "z.zip"
    z = zarr.storage.ZipStore(path, mode="w")
    zarr.create_array(z, shape=(6,), chunks=(3,), dtype="i8")[:] = 1
    z.close()
    with open(path, "r+b") as f:  # a real file, readable and seekable
        store = ZipStore(f, mode="a")
        a = cuzarr.open_array(store)
        a[4:] = 9
        # the file on disk is a complete archive between write calls
        np.testing.assert_array_equal(_zarr_reads(path.read_bytes()), [1, 1, 1, 1, 9, 9])
        store.close()
        assert not f.closed
    assert sorted(_entries(path.read_bytes())) == ["c/0", "c/1", "zarr.json"]
    np.testing.assert_array_equal(_zarr_reads(path.read_bytes()), [1, 1, 1, 1, 9, 9])
    # an empty object is an empty archive
    empty = io.BytesIO()
    with ZipStore(empty, mode="a") as s:
        sync(s.set("k", b"v"))
    assert _entries(empty.getvalue()) == ["k"]
    # bytes that are not an archive: refused untouched (zipfile would append a new
    # archive after them)
    junk = io.BytesIO(b"not a zip archive" * 10)
    with pytest.raises(cuzarr.storage.ZipStoreError):
        ZipStore(junk, mode="a")
    assert junk.getvalue() == b"not a zip archive" * 10
    # a read-only store over an object opened "a" writes nothing
    ro = ZipStore(io.BytesIO(path.read_bytes()), mode="a", read_only=True)
    with pytest.raises(ReadOnlyError):
        sync(ro.set("k", b"v"))


def test_writes_into_a_write_only_file(tmp_path):
    """A file opened "wb" is seekable but not readable: the archive is complete on
    disk after each write call, but values written cannot be read back."""
    import io

    path = tmp_path / "w.zip"
    with open(path, "wb") as f:
        store = ZipStore(f, mode="w")
        a = cuzarr.create_array(store, shape=(8,), chunks=(4,), dtype="f4")
        a[:] = np.arange(8)
        f.flush()
        np.testing.assert_array_equal(_zarr_reads(path.read_bytes()), np.arange(8))
        with pytest.raises(io.UnsupportedOperation, match="read back"):
            a[1] = 5
        store.close()
    np.testing.assert_array_equal(_zarr_reads(path.read_bytes()), np.arange(8))


def test_streams_into_a_non_seekable_pipe():
    """zipfile writes to a non-seekable stream in mode "w"; so does ZipStore now.
    Entries stream out as they are written, the central directory at close();
    chunks written cannot be read back, deleted, or reopened. Metadata documents
    are kept, so a hierarchy can be built (zarr-python fails there)."""
    import io
    import os
    import threading

    rfd, wfd = os.pipe()
    received = bytearray()

    def drain():
        with os.fdopen(rfd, "rb") as r:
            while chunk := r.read(65536):
                received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        with os.fdopen(wfd, "wb") as pipe:
            assert not pipe.seekable()
            store = ZipStore(pipe, mode="w")
            assert not store.supports_deletes
            with pytest.raises(io.UnsupportedOperation):
                ZipStore(pipe, mode="a")
            g = cuzarr.create_group(store, attributes={"k": 1})
            a = g.create_array("x", shape=(12,), chunks=(4,), dtype="i2", fill_value=0)
            a[:] = np.arange(12)  # whole chunks: nothing to read back
            assert sorted(g.keys()) == ["x"]  # names are known without reading
            with pytest.raises(io.UnsupportedOperation, match="read back"):
                a[1] = 7  # read-modify-write of a chunk already streamed out
            with pytest.raises(io.UnsupportedOperation, match="delete"):
                a[0:4] = 0  # a chunk of fill values would be deleted
            store.close()
            assert not pipe.closed
            with pytest.raises(io.UnsupportedOperation, match="after close"):
                sync(store.get("zarr.json"))
    finally:
        reader.join(timeout=30)
    data = bytes(received)
    assert sorted(_entries(data)) == ["x/c/0", "x/c/1", "x/c/2", "x/zarr.json", "zarr.json"]
    np.testing.assert_array_equal(_zarr_reads(data, "x"), np.arange(12))
    np.testing.assert_array_equal(
        cuzarr.open_array(ZipStore(io.BytesIO(data)), path="x", mode="r")[...], np.arange(12)
    )
