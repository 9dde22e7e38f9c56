"""The async Store interface: MemoryStore and LocalStore against real dicts and
real directories."""

import asyncio
import os

import numpy as np
import pytest

import cuzarr
from cuzarr import errors
from cuzarr.storage import (
    LocalStore,
    MemoryStore,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from cuzarr.storage.local import TEMP_PREFIX


def run(coro):
    return asyncio.run(coro)


async def alist(it):
    return [x async for x in it]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    if request.param == "memory":
        return MemoryStore()
    return LocalStore(tmp_path / "store")


# --------------------------------------------------------------------------------------
# get / set / delete / exists


def test_get_set_delete_exists(store):
    async def main():
        assert await store.get("a") is None
        assert not await store.exists("a")
        await store.set("a", b"hello")
        assert await store.exists("a")
        assert await store.get("a") == b"hello"
        assert isinstance(await store.get("a"), bytes)
        await store.set("a", b"world!")  # overwrite
        assert await store.get("a") == b"world!"
        await store.set("dir/sub/b", bytearray(b"\x00\x01"))
        await store.set("dir/c", memoryview(b"mv"))
        assert await store.get("dir/sub/b") == b"\x00\x01"
        assert await store.get("dir/c") == b"mv"
        assert not await store.exists("dir")  # a directory is not a key
        assert await store.get("dir") is None
        await store.delete("a")
        assert await store.get("a") is None
        assert not await store.exists("a")
        await store.delete("a")  # deleting an absent key is fine
        await store.delete("never/existed")
        await store.set("empty", b"")
        assert await store.get("empty") == b""
        assert await store.exists("empty")

    run(main())


def test_set_values_are_copied(store):
    async def main():
        buf = bytearray(b"abc")
        await store.set("k", buf)
        buf[0] = ord("z")
        assert await store.get("k") == b"abc"

    run(main())


def test_list_prefix_dir(store):
    keys = ["zarr.json", "a/zarr.json", "a/c/0/0", "a/c/0/1", "a/c/1/0", "b/x", "ab"]

    async def main():
        for k in keys:
            await store.set(k, k.encode())
        assert sorted(await alist(store.list())) == sorted(keys)
        assert sorted(await alist(store.list_prefix("a/"))) == [
            "a/c/0/0",
            "a/c/0/1",
            "a/c/1/0",
            "a/zarr.json",
        ]
        assert sorted(await alist(store.list_prefix("a"))) == sorted(
            k for k in keys if k.startswith("a")
        )
        assert sorted(await alist(store.list_prefix("a/c/0/"))) == ["a/c/0/0", "a/c/0/1"]
        assert sorted(await alist(store.list_prefix(""))) == sorted(keys)
        assert await alist(store.list_prefix("nope/")) == []
        assert sorted(await alist(store.list_dir(""))) == ["a", "ab", "b", "zarr.json"]
        assert sorted(await alist(store.list_dir("a"))) == ["c", "zarr.json"]
        assert sorted(await alist(store.list_dir("a/"))) == ["c", "zarr.json"]
        assert sorted(await alist(store.list_dir("a/c"))) == ["0", "1"]
        assert sorted(await alist(store.list_dir("a/c/0"))) == ["0", "1"]
        assert await alist(store.list_dir("nope")) == []
        assert not await store.is_empty("")
        assert await store.is_empty("nope/")
        await store.delete_dir("a")
        assert sorted(await alist(store.list())) == ["ab", "b/x", "zarr.json"]
        await store.clear()
        assert await alist(store.list()) == []

    run(main())


def test_list_dir_no_duplicates(store):
    async def main():
        for i in range(5):
            await store.set(f"d/{i}/x", b"1")
        names = await alist(store.list_dir("d"))
        assert sorted(names) == ["0", "1", "2", "3", "4"]
        assert len(names) == len(set(names))

    run(main())


# --------------------------------------------------------------------------------------
# byte ranges


DATA = bytes(range(256)) * 4  # 1024 bytes


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (None, DATA),
        (RangeByteRequest(0, 10), DATA[0:10]),
        (RangeByteRequest(10, 20), DATA[10:20]),
        (RangeByteRequest(1000, 1024), DATA[1000:1024]),
        (RangeByteRequest(1000, 2000), DATA[1000:]),  # past the end: truncated
        (RangeByteRequest(5, 5), b""),
        (RangeByteRequest(2000, 3000), b""),
        (OffsetByteRequest(0), DATA),
        (OffsetByteRequest(1000), DATA[1000:]),
        (OffsetByteRequest(1024), b""),
        (OffsetByteRequest(5000), b""),
        (SuffixByteRequest(10), DATA[-10:]),
        (SuffixByteRequest(1024), DATA),
        (SuffixByteRequest(5000), DATA),
        (SuffixByteRequest(0), b""),
    ],
)
def test_byte_ranges(store, req, expected):
    async def main():
        await store.set("k", DATA)
        assert await store.get("k", byte_range=req) == expected
        assert await store.get("k", None, req) == expected
        assert await store.get("missing", byte_range=req) is None

    run(main())


def test_get_partial_values(store):
    async def main():
        await store.set("a", DATA)
        await store.set("b/c", b"0123456789")
        reqs = [
            ("a", RangeByteRequest(0, 4)),
            ("b/c", SuffixByteRequest(3)),
            ("missing", None),
            ("b/c", None),
            ("a", OffsetByteRequest(1020)),
            ("b/c", RangeByteRequest(2, 5)),
        ]
        out = await store.get_partial_values(None, reqs)
        assert out == [DATA[:4], b"789", None, b"0123456789", DATA[1020:], b"234"]
        assert await store.get_partial_values(None, []) == []
        many = [("a", RangeByteRequest(i, i + 1)) for i in range(100)]
        assert await store.get_partial_values(None, many) == [DATA[i : i + 1] for i in range(100)]

    run(main())


def test_get_many_set_many_delete_many(store):
    async def main():
        items = [(f"g/{i}", str(i).encode() * (i + 1)) for i in range(100)]
        await store.set_many(items)
        keys = [k for k, _ in items] + ["g/missing"]
        out = await store.get_many(keys)
        assert out == [v for _, v in items] + [None]
        assert await store.get_many([]) == []
        await store.delete_many([f"g/{i}" for i in range(0, 100, 2)] + ["g/missing"])
        remaining = sorted(await alist(store.list()))
        assert remaining == sorted(f"g/{i}" for i in range(1, 100, 2))
        await store.set_many([])
        await store.delete_many([])

    run(main())


def test_set_if_not_exists(store):
    async def main():
        await store.set_if_not_exists("k", b"1")
        await store.set_if_not_exists("k", b"2")
        assert await store.get("k") == b"1"

    run(main())


# --------------------------------------------------------------------------------------
# read-only


def test_with_read_only(store):
    async def main():
        await store.set("k", b"v")
        ro = store.with_read_only(True)
        assert ro.read_only
        assert not store.read_only
        assert await ro.get("k") == b"v"
        assert await ro.exists("k")
        assert await alist(ro.list()) == ["k"]
        for op in (
            lambda: ro.set("k", b"x"),
            lambda: ro.set("new", b"x"),
            lambda: ro.delete("k"),
            lambda: ro.set_many([("k", b"x")]),
            lambda: ro.delete_many(["k"]),
            lambda: ro.delete_dir(""),
            lambda: ro.clear(),
        ):
            with pytest.raises(errors.ReadOnlyError):
                await op()
        assert await store.get("k") == b"v"
        assert not await store.exists("new")
        # same data: a write through the writable store shows in the read-only one
        await store.set("k", b"w")
        assert await ro.get("k") == b"w"
        rw = ro.with_read_only(False)
        await rw.set("k", b"z")
        assert await store.get("k") == b"z"

    run(main())


def test_read_only_constructor(tmp_path):
    async def main():
        s = LocalStore(tmp_path, read_only=True)
        with pytest.raises(errors.ReadOnlyError):
            await s.set("k", b"v")
        m = MemoryStore({"k": b"v"}, read_only=True)
        with pytest.raises(PermissionError):
            await m.set("k", b"x")
        assert await m.get("k") == b"v"

    run(main())
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------
# LocalStore specifics


def test_local_store_files_on_disk(tmp_path):
    store = LocalStore(tmp_path / "root")

    async def main():
        await store.set("a/b/c", b"xyz")
        await store.set("top", b"t")

    run(main())
    assert (tmp_path / "root" / "a" / "b" / "c").read_bytes() == b"xyz"
    assert (tmp_path / "root" / "top").read_bytes() == b"t"
    # and files written by others are visible
    (tmp_path / "root" / "a" / "ext").write_bytes(b"e")
    assert run(store.get("a/ext")) == b"e"


def _temp_files(root):
    return [p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX)]


def test_local_store_atomic_no_temp_left(tmp_path):
    root = tmp_path / "root"
    store = LocalStore(root)

    async def main():
        await store.set("k", b"1" * 10000)
        await store.set_many([(f"d/{i}", bytes([i]) * 1000) for i in range(50)])
        await store.set_many([(f"big/{i}", bytes([i]) * (1 << 20)) for i in range(3)])
        await store.set("k", b"2")

    run(main())
    assert _temp_files(root) == []
    a = cuzarr.create_array(store, name="arr", shape=(100, 100), dtype="f8", chunks=(10, 10))
    a[...] = np.random.default_rng(0).random((100, 100))
    a[5:55, 5:55] = 0
    a.resize((50, 50))
    a.attrs["x"] = "y"
    assert _temp_files(root) == []


def test_local_store_list_hides_temp_files(tmp_path):
    root = tmp_path / "root"
    store = LocalStore(root)
    run(store.set("a/real", b"1"))
    (root / f"{TEMP_PREFIX}planted").write_bytes(b"junk")
    (root / "a" / f"{TEMP_PREFIX}abc-real").write_bytes(b"junk")

    async def main():
        assert sorted(await alist(store.list())) == ["a/real"]
        assert sorted(await alist(store.list_prefix(""))) == ["a/real"]
        assert sorted(await alist(store.list_prefix("a/"))) == ["a/real"]
        assert sorted(await alist(store.list_dir(""))) == ["a"]
        assert sorted(await alist(store.list_dir("a"))) == ["real"]

    run(main())


def test_local_store_temp_files_not_members(tmp_path):
    root = tmp_path / "root"
    g = cuzarr.create_group(root)
    g.create_array("x", shape=(3,), dtype="i4")
    (root / f"{TEMP_PREFIX}zzz").mkdir()
    (root / f"{TEMP_PREFIX}zzz" / "zarr.json").write_bytes((root / "x" / "zarr.json").read_bytes())
    (root / f"{TEMP_PREFIX}file").write_bytes(b"junk")
    assert list(cuzarr.open_group(root, mode="r").keys()) == ["x"]


def test_local_store_overwrite_replaces_whole_value(tmp_path):
    store = LocalStore(tmp_path)
    run(store.set("k", b"a" * 1000))
    run(store.set("k", b"b" * 10))
    assert (tmp_path / "k").read_bytes() == b"b" * 10


def test_local_store_concurrent_writers_same_key(tmp_path):
    store = LocalStore(tmp_path)
    values = [bytes([i]) * 100_000 for i in range(20)]

    async def main():
        await asyncio.gather(*(store.set("k", v) for v in values))

    run(main())
    assert (tmp_path / "k").read_bytes() in values  # one whole value, never a mix
    assert _temp_files(tmp_path) == []


def test_local_store_pathlike_and_str(tmp_path):
    a = cuzarr.create_array(str(tmp_path / "s"), shape=(3,), dtype="i2")
    a[:] = [1, 2, 3]
    b = cuzarr.open_array(tmp_path / "s", mode="r")
    assert isinstance(b.store, LocalStore)
    np.testing.assert_array_equal(b[:], [1, 2, 3])


def test_local_store_cleanup_temporaries(tmp_path):
    store = LocalStore(tmp_path)
    run(store.set("a/b", b"1"))
    (tmp_path / "a" / f"{TEMP_PREFIX}x").write_bytes(b"junk")
    assert store.cleanup_temporaries() == 1
    assert _temp_files(tmp_path) == []
    assert run(store.get("a/b")) == b"1"


def test_local_store_get_missing_parent_is_none(tmp_path):
    store = LocalStore(tmp_path / "does" / "not" / "exist")

    async def main():
        assert await store.get("a/b") is None
        assert not await store.exists("a/b")
        assert await alist(store.list()) == []
        assert await alist(store.list_dir("")) == []
        assert await store.is_empty()

    run(main())


def test_local_store_key_under_file_is_none(tmp_path):
    store = LocalStore(tmp_path)
    run(store.set("f", b"1"))
    assert run(store.get("f/g")) is None


# --------------------------------------------------------------------------------------
# dict as store


def test_dict_store_sees_keys():
    d = {}
    a = cuzarr.create_array(d, shape=(4, 4), dtype="i4", chunks=(2, 2), fill_value=0)
    assert "zarr.json" in d
    a[0:2, 0:2] = 1
    assert "c/0/0" in d
    assert set(d) == {"zarr.json", "c/0/0"}
    a[2:, 2:] = 5
    assert set(d) == {"zarr.json", "c/0/0", "c/1/1"}
    a[0:2, 0:2] = 0  # back to fill value: deleted
    assert set(d) == {"zarr.json", "c/1/1"}
    # values are bytes
    assert all(isinstance(v, bytes) for v in d.values())


def test_dict_store_v2_keys():
    d = {}
    a = cuzarr.create_array(
        d, shape=(4, 4), dtype="i4", chunks=(2, 2), zarr_format=2, attributes={"a": 1}
    )
    a[...] = 1
    assert set(d) == {".zarray", ".zattrs", "0.0", "0.1", "1.0", "1.1"}


def test_dict_store_written_by_caller_is_read():
    d = {}
    a = cuzarr.create_array(d, shape=(4,), dtype="<i4", chunks=(4,), compressors=None)
    d["c/0"] = np.arange(4, dtype="<i4").tobytes()
    np.testing.assert_array_equal(a[:], np.arange(4))


def test_memory_store_shared_dict():
    d = {}
    s1 = MemoryStore(d)
    s2 = MemoryStore(d)
    run(s1.set("k", b"v"))
    assert run(s2.get("k")) == b"v"
    assert d == {"k": b"v"}


# --------------------------------------------------------------------------------------
# a Store subclass sees every read


class CountingMemoryStore(MemoryStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gets = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append(key)
        return await super().get(key, prototype, byte_range)


class CountingLocalStore(LocalStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gets = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append(key)
        return await super().get(key, prototype, byte_range)


class CountingMinimalStore(Store):
    """A store written from scratch against the abstract interface."""

    def __init__(self, read_only=False):
        super().__init__(read_only=read_only)
        self.data = {}
        self.gets = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append(key)
        v = self.data.get(key)
        if v is None or byte_range is None:
            return v
        from cuzarr.storage.base import slice_bytes

        return slice_bytes(v, byte_range)

    async def exists(self, key):
        return key in self.data

    async def set(self, key, value):
        self._check_writable()
        self.data[key] = bytes(value)

    async def delete(self, key):
        self._check_writable()
        self.data.pop(key, None)

    def list(self):
        async def gen():
            for k in list(self.data):
                yield k

        return gen()


@pytest.mark.parametrize("kind", ["memory", "local", "minimal"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_store_subclass_sees_every_read(tmp_path, kind, zarr_format):
    if kind == "memory":
        store = CountingMemoryStore()
    elif kind == "local":
        store = CountingLocalStore(tmp_path)
    else:
        store = CountingMinimalStore()
    data = np.arange(10 * 12, dtype="i4").reshape(10, 12)
    a = cuzarr.create_array(
        store, name="arr", shape=(10, 12), dtype="i4", chunks=(3, 4), zarr_format=zarr_format
    )
    a[...] = data
    # 4 x 3 = 12 chunks; nothing written came from a read of the old chunks (all complete)
    store.gets.clear()
    b = cuzarr.open_array(store, path="arr", mode="r")
    meta_reads = len(store.gets)
    assert meta_reads >= 1
    store.gets.clear()
    np.testing.assert_array_equal(b[...], data)
    chunk_gets = [k for k in store.gets]
    assert len(chunk_gets) == 12
    assert len(set(chunk_gets)) == 12
    assert all(k.startswith("arr/") for k in chunk_gets)
    store.gets.clear()
    np.testing.assert_array_equal(b[0:3, 0:4], data[0:3, 0:4])
    assert len(store.gets) == 1
    store.gets.clear()
    np.testing.assert_array_equal(b.oindex[[0, 9], [0, 11]], data[np.ix_([0, 9], [0, 11])])
    assert len(store.gets) == 4
    store.gets.clear()
    np.testing.assert_array_equal(b.vindex[[0, 1, 2], [0, 1, 2]], data[[0, 1, 2], [0, 1, 2]])
    assert len(store.gets) == 1
    store.gets.clear()
    np.testing.assert_array_equal(b.blocks[1, 2], data[3:6, 8:12])
    assert len(store.gets) == 1
    # a partial write reads the chunk it modifies, through get
    c = cuzarr.open_array(store, path="arr", mode="r+")
    store.gets.clear()
    c[0, 0] = -1
    assert any(k.startswith("arr/") and k.endswith(("0/0", "0.0")) for k in store.gets)


def test_store_subclass_sees_metadata_reads():
    store = CountingMemoryStore()
    g = cuzarr.create_group(store)
    g.create_array("x", shape=(2,), dtype="i4")
    store.gets.clear()
    cuzarr.open_group(store, mode="r")["x"]
    assert any(k.endswith("zarr.json") for k in store.gets)


def test_minimal_store_full_round_trip():
    store = CountingMinimalStore()
    g = cuzarr.create_group(store, attributes={"a": 1})
    a = g.create_array("x", shape=(5, 5), dtype="f4", chunks=(2, 2))
    a[...] = np.eye(5, dtype="f4")
    g2 = cuzarr.open_group(store, mode="r")
    assert g2.attrs["a"] == 1
    assert list(g2.keys()) == ["x"]
    np.testing.assert_array_equal(g2["x"][...], np.eye(5))
    a[...] = 0
    assert a.nchunks_initialized == 0
    assert sorted(store.data) == ["x/zarr.json", "zarr.json"]


@pytest.mark.parametrize("chain", ["", "simplecache::"])
def test_fsspec_file_url_writes_into_new_directories(tmp_path, chain):
    """An FsspecStore over file:// (plain or chained) creates the directories a key
    needs: every write into a fresh directory used to fail with 'the bucket or
    path does not exist'."""
    from cuzarr.storage import FsspecStore

    store = FsspecStore.from_url(f"{chain}file://{tmp_path}/new.zarr")
    g = cuzarr.create_group(store)
    a = g.create_array("a/b", shape=(6,), dtype="i2", chunks=(4,))
    a[:] = np.arange(6)
    assert sorted(p.name for p in (tmp_path / "new.zarr" / "a" / "b" / "c").iterdir()) == ["0", "1"]
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "new.zarr"), path="a/b")[:], np.arange(6))


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_getsize_and_getsize_prefix(tmp_path, kind):
    from cuzarr.runtime.sync import sync
    from cuzarr.storage import LocalStore, MemoryStore

    store = MemoryStore() if kind == "memory" else LocalStore(tmp_path / "s")
    sync(store.set("a/x", b"12345"))
    sync(store.set("a/y", b"12"))
    sync(store.set("ab/z", b"1"))
    assert sync(store.getsize("a/x")) == 5
    assert sync(store.getsize_prefix("a/")) == 7
    assert sync(store.getsize_prefix("")) == 8
    with pytest.raises(FileNotFoundError):
        sync(store.getsize("a/missing"))


# --------------------------------------------------------------------------------------
# LocalStore's small-file fast paths


@pytest.mark.parametrize(
    "sizes",
    [
        [10, 0, 65536, 5],  # empty file; one exactly the first read's size
        [70_000, 3, 200_000, 65535, 1 << 20],  # larger than the first read, then mixed
        [65537, 65536, 65538],
    ],
)
def test_local_store_whole_reads_any_size(tmp_path, sizes):
    """Batch reads of whole files (open, one read, close) return every byte of
    files shorter, equal to and longer than the size the first read asks for."""
    store = LocalStore(tmp_path / "s")
    rng = np.random.default_rng(len(sizes))
    items = [(f"c/{i}", rng.integers(0, 256, n, dtype=np.uint8).tobytes()) for i, n in enumerate(sizes)]
    run(store.set_many(items))
    sio = store.sync_io()
    keys = [k for k, _ in items] + ["c/missing", "nodir/x", "c"]
    got = sio.get_many(keys)
    assert got[: len(items)] == [v for _, v in items]
    assert got[len(items) :] == [None, None, None]  # missing, missing parent, a directory
    assert run(store.get_many(keys)) == got


def test_local_store_whole_reads_symlinks(tmp_path):
    """The batch read follows a symlink only inside the root, as ``get`` does."""
    root = tmp_path / "s"
    store = LocalStore(root)
    run(store.set("c/0", b"inside"))
    (tmp_path / "outside").write_bytes(b"secret")
    os.symlink(root / "c" / "0", root / "c" / "in")
    os.symlink(tmp_path / "outside", root / "c" / "out")
    sio = store.sync_io()
    assert sio.get_many(["c/in"]) == [b"inside"]
    with pytest.raises(errors.StoreKeyError):
        sio.get_many(["c/0", "c/out"])


def test_local_store_temp_name_collision_keeps_the_other_file(tmp_path, monkeypatch):
    """A temporary name that exists already (another writer's) is skipped, never
    removed, and the write goes through under the next name."""
    from cuzarr.storage.local import store as local_store

    root = tmp_path / "s"
    store = LocalStore(root)
    run(store.set("c/0", b"old"))
    taken = root / "c" / f"{TEMP_PREFIX}taken-0"
    taken.write_bytes(b"someone else's")
    names = iter([taken.name, f"{TEMP_PREFIX}free-0"])
    monkeypatch.setattr(local_store, "_temp_name", lambda name: next(names))
    run(store.set("c/0", b"new"))
    assert (root / "c" / "0").read_bytes() == b"new"
    assert taken.read_bytes() == b"someone else's"


def test_local_store_temp_names_differ_after_fork(tmp_path):
    """A forked child draws its own temporary-name token (the counter is copied)."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from cuzarr.storage.local import files as local\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.write(w, local._temp_name('x').encode()); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "child = os.read(r, 200).decode()\n"
        "mine = local._temp_name('x')\n"
        "assert child.startswith(local.TEMP_PREFIX) and mine.startswith(local.TEMP_PREFIX)\n"
        "assert child[:32] != mine[:32], (child, mine)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


_KEY_CHARS = "ab0_-.:/\\ Cé\x00"


@pytest.mark.parametrize("seed", range(3))
def test_local_store_plain_key_fast_path_matches_checks(tmp_path, seed):
    """Keys taking the regex fast path get exactly the path (and keys it rejects
    exactly the error) that the general checks give."""
    from cuzarr.storage.local import paths as local

    class Key(str):
        pass  # not exactly str: always the general checks

    store = LocalStore(tmp_path / "s")
    rng = np.random.default_rng(seed)
    keys = ["c/0/1", "zarr.json", ".zarray", "a/.cuzarr-tmp-x", "a" * 255, "a" * 256, "c/0."]
    keys += ["".join(rng.choice(list(_KEY_CHARS), rng.integers(1, 9))) for _ in range(3000)]
    fast = 0
    for k in keys:
        try:
            want = store._key_path(Key(k))
        except errors.StoreKeyError:
            want = None
        if local._PLAIN_KEY.fullmatch(k):
            fast += 1
            assert want is not None, k
        try:
            got = store._key_path(k)
        except errors.StoreKeyError:
            got = None
        assert got == want, k
    assert fast > 100


def test_local_store_whole_reads_survive_short_reads(tmp_path, monkeypatch):
    """A read may return less than asked before a file's end (FUSE file systems
    with ``direct_io`` return at most their request size): batch reads keep
    reading until a read returns nothing, for values and for whole arrays."""
    store = LocalStore(tmp_path / "s")
    rng = np.random.default_rng(3)
    sizes = [0, 100, 4096, 4097, 20_000, 65_536, 70_000, 300_000]
    items = [(f"c/{i}", rng.integers(0, 256, n, dtype=np.uint8).tobytes()) for i, n in enumerate(sizes)]
    run(store.set_many(items))
    data = np.cumsum(rng.integers(-3, 4, (96, 300)), axis=1).astype("<u2")
    arrays = {}
    for name, comp in [("raw", None), ("zstd", [{"name": "zstd", "configuration": {"level": 1}}])]:
        arrays[name] = cuzarr.create_array(tmp_path / name, shape=data.shape, chunks=(64, 128),
                                           dtype=data.dtype, compressors=comp, fill_value=0)
        arrays[name][...] = data
    from cuzarr.storage.local import mounts as local

    # a file system not known to read in full (FUSE, NFS, ...): short reads are
    # confirmed; then every read is cut to 4 KiB, as FUSE with direct_io may do
    monkeypatch.setattr(local, "_FULL_READ_FS", frozenset())
    monkeypatch.setattr(local, "_fs_full", {})
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 4096)))
    assert store.sync_io().get_many([k for k, _ in items]) == [v for _, v in items]
    for name in arrays:
        np.testing.assert_array_equal(cuzarr.open_array(tmp_path / name, mode="r")[...], data)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_local_store_device_planted_as_key_reads_as_before(tmp_path):
    """A character device planted under a key reads as its fstat size (nothing),
    as a single ``get`` reads it; never its endless stream."""
    import stat

    store = LocalStore(tmp_path / "s")
    run(store.set("c/0", b"x"))
    os.mknod(tmp_path / "s" / "c" / "z", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    assert store.sync_io().get_many(["c/0", "c/z"]) == [b"x", b""]
    assert run(store.get("c/z")) == b""


def test_custom_store_typed_buffers_in_batched_reads():
    """A store whose ``get`` returns typed buffers (numpy int8 views) still reads
    through the batched small-chunk path."""

    class Int8Store(MemoryStore):
        async def get(self, key, prototype=None, byte_range=None):
            v = await super().get(key, prototype, byte_range)
            return v if v is None or key.endswith(".json") else np.frombuffer(v, np.int8)

    st = Int8Store()
    ref = np.arange(64 * 64, dtype=np.uint8).reshape(64, 64)
    cuzarr.create_array(st, shape=ref.shape, dtype="uint8", chunks=(8, 8), compressors=None)[:] = ref
    np.testing.assert_array_equal(cuzarr.open_array(st, mode="r")[:], ref)


def test_local_store_knows_which_file_systems_read_in_full(tmp_path):
    """Short reads are taken as the end only on local file systems known to
    read in full; /proc (or anything not found) gets the confirming read."""
    from cuzarr.storage.local import mounts as local

    if not os.path.exists("/proc/self/mountinfo"):
        assert local._reads_full(str(tmp_path)) is False
        return
    assert local._reads_full("/proc") is False
    assert local._reads_full(str(tmp_path / "missing")) is None
    kind = local._fs_type(os.stat(tmp_path).st_dev)
    assert local._reads_full(str(tmp_path)) is (kind in local._FULL_READ_FS)
    store = LocalStore(tmp_path / "s")
    run(store.set("c/0", b"x"))
    assert store.sync_io().get_many(["c/0"]) == [b"x"]
    assert store._confirm_dirs == {str(tmp_path / "s" / "c"): kind not in local._FULL_READ_FS}


def test_local_store_confirms_short_reads_per_directory(tmp_path, monkeypatch):
    """A mount point inside a store's tree (a FUSE file system under one group,
    say) gets the confirming read there, and only there."""
    from cuzarr.storage.local import mounts as local

    store = LocalStore(tmp_path / "s")
    rng = np.random.default_rng(5)
    items = [(f"{d}/c/{i}", rng.integers(0, 256, 9000 + i, dtype=np.uint8).tobytes())
             for d in ("disk", "fuse") for i in range(6)]
    run(store.set_many(items))
    fuse_dir = str(tmp_path / "s" / "fuse")
    real_full = local._reads_full
    monkeypatch.setattr(
        local, "_reads_full", lambda d: False if d.startswith(fuse_dir) else real_full(d)
    )
    if not real_full(str(tmp_path)):
        pytest.skip("the test directory's own file system is not known to read in full")
    real_read = os.read
    cut: list[int] = []

    def short_read(fd, n):
        # files under fuse/ read at most 4 KiB a call, as FUSE with direct_io may
        path = os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else ""
        if path.startswith(fuse_dir):
            cut.append(fd)
            n = min(n, 4096)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", short_read)
    got = LocalStore(tmp_path / "s").sync_io().get_many([k for k, _ in items])
    assert got == [v for _, v in items]
    s2 = LocalStore(tmp_path / "s")
    s2.sync_io().get_many([k for k, _ in items])
    assert s2._confirm_dirs == {
        str(tmp_path / "s" / "disk" / "c"): False,
        str(tmp_path / "s" / "fuse" / "c"): True,
    }
