"""FsspecStore over a real S3 API: moto's server, reached through s3fs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from _moto_helpers import free_port, moto_s3_server

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

import zarr  # noqa: E402

import cuzarr  # noqa: E402
from cuzarr.runtime.sync import sync  # noqa: E402
from cuzarr.storage import (  # noqa: E402
    FsspecStore,
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
)

BUCKET = "cuzarr-test-store-s3"


@pytest.fixture(scope="module")
def s3(request):
    moto = contextlib.ExitStack()
    port = moto.enter_context(moto_s3_server())
    endpoint = f"http://127.0.0.1:{port}"
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="x", secret="x", skip_instance_cache=True)
    # moto's backends are per process, shared by every server it starts: a bucket
    # name of this module's own avoids clashing with other tests' buckets.
    fs.mkdir(BUCKET)
    opts = {"endpoint_url": endpoint, "key": "x", "secret": "x"}
    yield {"opts": opts, "fs": fs}
    moto.close()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_write_read(s3, zarr_format):
    url = f"s3://{BUCKET}/rw{zarr_format}.zarr"
    data = np.arange(12 * 10, dtype="int16").reshape(12, 10)
    a = cuzarr.create_array(
        url,
        shape=data.shape,
        dtype="int16",
        chunks=(5, 4),
        zarr_format=zarr_format,
        storage_options=s3["opts"],
        attributes={"a": 1},
    )
    a[:] = data
    b = cuzarr.open_array(url, mode="r", storage_options=s3["opts"])
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[3:11, 1:7], data[3:11, 1:7])
    assert b.attrs["a"] == 1
    assert b.nchunks_initialized == 9
    # zarr-python reads what cuzarr wrote there
    z = zarr.open_array(url, mode="r", storage_options=s3["opts"])
    np.testing.assert_array_equal(z[:], data)


def test_sharded(s3):
    url = f"s3://{BUCKET}/sharded.zarr"
    data = np.random.default_rng(1).integers(0, 1000, (20, 18)).astype("uint32")
    a = cuzarr.create_array(
        url,
        shape=data.shape,
        dtype="uint32",
        chunks=(4, 4),
        shards=(8, 8),
        storage_options=s3["opts"],
    )
    a[:] = data
    a[2:6, 3:5] = 7
    data[2:6, 3:5] = 7
    b = cuzarr.open_array(url, mode="r", storage_options=s3["opts"])
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[9:13, 1:3], data[9:13, 1:3])
    z = zarr.open_array(url, mode="r", storage_options=s3["opts"])
    np.testing.assert_array_equal(z[:], data)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_groups_list_and_consolidated(s3, zarr_format):
    url = f"s3://{BUCKET}/group{zarr_format}.zarr"
    g = cuzarr.create_group(url, zarr_format=zarr_format, storage_options=s3["opts"])
    g.create_array("x", shape=(4,), dtype="f8", chunks=(2,))[:] = [1, 2, 3, 4]
    g.create_group("sub").create_array("y", shape=(3,), dtype="i1", chunks=(3,))[:] = 5
    g2 = cuzarr.open_group(url, mode="r", storage_options=s3["opts"])
    assert sorted(g2.keys()) == ["sub", "x"]
    store = FsspecStore.from_url(url, storage_options=s3["opts"])
    keys = sorted(_aiter(store.list()))
    assert "x/c/0" in keys or "x/0" in keys
    assert sorted(_aiter(store.list_dir(""))) == sorted(n for n in keys_top(keys))
    cuzarr.consolidate_metadata(store)
    g3 = cuzarr.open_group(url, mode="r", storage_options=s3["opts"])
    assert g3.consolidated is not None if hasattr(g3, "consolidated") else True
    np.testing.assert_array_equal(g3["sub/y"][:], [5, 5, 5])
    zg = zarr.open_group(url, mode="r", storage_options=s3["opts"])
    np.testing.assert_array_equal(zg["x"][:], [1, 2, 3, 4])


def keys_top(keys):
    return {k.split("/", 1)[0] for k in keys}


def _aiter(it):
    async def collect():
        return [k async for k in it]

    return sync(collect())


def test_store_interface(s3):
    store = FsspecStore.from_url(f"s3://{BUCKET}/raw", storage_options=s3["opts"])
    sync(store.set("a/b", b"0123456789"))
    assert sync(store.get("a/b")) == b"0123456789"
    assert sync(store.get("a/b", byte_range=RangeByteRequest(2, 5))) == b"234"
    assert sync(store.exists("a/b"))
    assert not sync(store.exists("a"))
    assert sync(store.get("nope")) is None
    assert sync(store.get_many(["a/b", "nope"])) == [b"0123456789", None]
    sync(store.delete("a/b"))
    sync(store.delete("a/b"))  # absent: not an error
    assert sync(store.get("a/b")) is None
    ro = FsspecStore.from_url(f"s3://{BUCKET}/raw", storage_options=s3["opts"], read_only=True)
    with pytest.raises(PermissionError):
        sync(ro.set("k", b"v"))


DATA = bytes(range(256)) * 4


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        (RangeByteRequest(1000, 2000), DATA[1000:]),
        (OffsetByteRequest(1000), DATA[1000:]),
        (SuffixByteRequest(10), DATA[-10:]),
        (SuffixByteRequest(1024), DATA),
        (SuffixByteRequest(5000), DATA),  # longer than the object: all of it
        (SuffixByteRequest(0), b""),
    ],
)
def test_byte_ranges(s3, req, expected):
    store = FsspecStore.from_url(f"s3://{BUCKET}/ranges", storage_options=s3["opts"])
    sync(store.set("k", DATA))
    assert sync(store.get("k", byte_range=req)) == expected
    assert sync(store.get("missing", byte_range=req)) is None


def test_write_to_a_missing_bucket_is_a_remote_store_error_naming_the_key(s3):
    from cuzarr.storage import BucketNotFoundError, RemoteStoreError

    # the metadata documents are read (concurrently) before anything is written:
    # whichever key fails first is named, and the bucket
    with pytest.raises(
        (RemoteStoreError, BucketNotFoundError),
        match=r"key '(zarr\.json|\.zarray|\.zgroup|\.zattrs)'.*bucket 'no-such-bucket' does not exist",
    ):
        cuzarr.create_array(
            "s3://no-such-bucket/x.zarr", shape=(4,), dtype="u1", storage_options=s3["opts"]
        )
    # reads of the same missing bucket still say "not found"
    with pytest.raises(FileNotFoundError):
        cuzarr.open_array("s3://no-such-bucket/x.zarr", mode="r", storage_options=s3["opts"])


@pytest.mark.parametrize(("client_retries", "attempts"), [(2, 1), (1, 3)])
def test_dead_endpoint_is_not_retried_on_top_of_botocore(client_retries, attempts):
    # botocore already retried the connection (unless told not to): cuzarr does not
    # multiply its attempts; with botocore's retries off, cuzarr's policy applies
    from cuzarr.storage import FsspecStore, RemoteStoreError
    from cuzarr.storage.fsspec import RetryPolicy

    port = free_port()  # nothing listens there
    opts = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "key": "x",
        "secret": "x",
        "config_kwargs": {"retries": {"total_max_attempts": client_retries}},
    }
    store = FsspecStore.from_url(
        "s3://bucket/x.zarr",
        storage_options=opts,
        retry=RetryPolicy(retries=2, backoff=0.001, max_backoff=0.002),
    )
    with pytest.raises(RemoteStoreError, match="EndpointConnectionError") as info:
        cuzarr.open_array(store, mode="r")
    assert ("after 3 attempts" in str(info.value)) == (attempts == 3)


@pytest.fixture
def counted(s3):
    """storage_options through a proxy in front of moto that counts (method, path)."""
    import http.client
    import http.server
    import threading
    from collections import Counter

    upstream = s3["opts"]["endpoint_url"].rsplit(":", 1)
    seen: Counter = Counter()

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen[self.command, self.path.split("?", 1)[0]] += 1
            conn = http.client.HTTPConnection(upstream[0][7:], int(upstream[1]), timeout=10)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    opts = dict(s3["opts"], endpoint_url=f"http://127.0.0.1:{server.server_address[1]}")
    yield opts, seen
    server.shutdown()


def test_whole_chunk_reads_are_one_get_each(counted):
    """No HEAD before each GET (s3fs asks for the size to split large objects)."""
    opts, seen = counted
    url = f"s3://{BUCKET}/one_get.zarr"
    a = cuzarr.create_array(url, shape=(40,), chunks=(10,), dtype="i4", storage_options=opts)
    a[:] = np.arange(40, dtype="i4")
    seen.clear()
    b = cuzarr.open_array(url, mode="r", storage_options=opts)
    np.testing.assert_array_equal(b[:], np.arange(40))
    chunk_requests = {k: n for k, n in seen.items() if "/c/" in k[1]}
    assert chunk_requests == {("GET", f"/{BUCKET}/one_get.zarr/c/{i}"): 1 for i in range(4)}


def test_nbytes_stored_asks_sizes_and_reads_no_chunk(counted, s3):
    opts, seen = counted
    url = f"s3://{BUCKET}/sizes.zarr"
    a = cuzarr.create_array(url, shape=(40,), chunks=(10,), dtype="i4", storage_options=opts)
    a[:] = np.arange(40, dtype="i4")
    seen.clear()
    n = a.nbytes_stored()
    fs = s3["fs"]
    assert n == sum(fs.size(p) for p in fs.find(f"{BUCKET}/sizes.zarr"))
    assert not any(m == "GET" and "/c/" in path for m, path in seen)


@pytest.mark.parametrize(
    "req",
    [
        RangeByteRequest(5, 5),
        RangeByteRequest(5, 3),
        RangeByteRequest(100, 200),
        RangeByteRequest(150, 200),
        OffsetByteRequest(100),
        OffsetByteRequest(0),
    ],
)
def test_empty_and_past_the_end_ranges_are_sliced(s3, req):
    """Ranges follow slice semantics, as in every other store: an empty range used
    to return the whole object (S3 ignores 'bytes=5-4'), and one starting at or past
    the end (or any range of an empty object) raised RemoteStoreError (a 416)."""
    from cuzarr.storage.base import slice_bytes

    store = FsspecStore.from_url(f"s3://{BUCKET}/slices", storage_options=s3["opts"])
    data = bytes(range(100))
    sync(store.set_many([("k", data), ("empty", b"")]))
    assert sync(store.get("k", byte_range=req)) == slice_bytes(data, req)
    assert sync(store.get("empty", byte_range=req)) == b""
    assert sync(store.get("missing", byte_range=req)) is None


# -- a missing bucket --------------------------------------------------------------

MISSING = "cuzarr-test-no-such-bucket"


def test_missing_bucket_reads_and_lists_raise_bucket_not_found(s3):
    """A missing bucket used to list and read as an empty store: open_group said "no
    group found" (as zarr-python still does) and writes failed late. Reads, listings
    and checks now raise BucketNotFoundError (a FileNotFoundError naming the bucket);
    a missing key in an existing bucket is still just missing."""
    import pickle

    from cuzarr.errors import GroupNotFoundError, NodeNotFoundError
    from cuzarr.storage import RemoteStoreError
    from cuzarr.storage.fsspec import BucketNotFoundError

    url = f"s3://{MISSING}/x.zarr"
    store = FsspecStore.from_url(url, storage_options=s3["opts"])
    calls = {
        "get": lambda: sync(store.get("zarr.json")),
        "get range": lambda: sync(store.get("c/0", byte_range=RangeByteRequest(0, 4))),
        "get suffix": lambda: sync(store.get("c/0", byte_range=SuffixByteRequest(4))),
        "get empty range": lambda: sync(store.get("c/0", byte_range=RangeByteRequest(3, 3))),
        "get_many": lambda: sync(store.get_many(["a", "b"])),
        "exists": lambda: sync(store.exists("zarr.json")),
        "getsize": lambda: sync(store.getsize("zarr.json")),
        "list": lambda: _aiter(store.list()),
        "list_prefix": lambda: _aiter(store.list_prefix("a/")),
        "list_dir": lambda: _aiter(store.list_dir("")),
        "set": lambda: sync(store.set("k", b"v")),
        "delete": lambda: sync(store.delete("k")),
        "delete_many": lambda: sync(store.delete_many(["k", "l"])),
        "delete_dir": lambda: sync(store.delete_dir("g")),
    }
    for what, call in calls.items():
        with pytest.raises(BucketNotFoundError, match=MISSING) as info:
            call()
        assert info.value.bucket == MISSING, what
        assert isinstance(info.value, FileNotFoundError)
        assert isinstance(info.value, RemoteStoreError)
    for opener in (cuzarr.open_group, cuzarr.open_array, cuzarr.open):
        with pytest.raises(BucketNotFoundError, match=f"bucket '{MISSING}' does not exist"):
            opener(url, mode="r", storage_options=s3["opts"])
    with pytest.raises(BucketNotFoundError):
        cuzarr.open_group(url, mode="a", storage_options=s3["opts"])  # not a late write error
    with pytest.raises(BucketNotFoundError):
        cuzarr.create_array(url, shape=(2,), dtype="u1", storage_options=s3["opts"], overwrite=True)
    err = pickle.loads(pickle.dumps(info.value))
    assert isinstance(err, BucketNotFoundError) and err.bucket == MISSING
    # a missing key (and prefix) in a bucket that exists is no error
    here = FsspecStore.from_url(f"s3://{BUCKET}/nothing-here.zarr", storage_options=s3["opts"])
    assert sync(here.get("zarr.json")) is None
    assert sync(here.get("c/0", byte_range=SuffixByteRequest(4))) is None
    assert not sync(here.exists("zarr.json"))
    assert _aiter(here.list()) == [] and _aiter(here.list_dir("")) == []
    sync(here.delete("zarr.json"))  # absent keys: deleting them is no error
    sync(here.delete_many(["zarr.json", "c/0"]))
    with pytest.raises(FileNotFoundError) as info:
        sync(here.getsize("zarr.json"))
    assert not isinstance(info.value, BucketNotFoundError)
    with pytest.raises(GroupNotFoundError):
        cuzarr.open_group(here, mode="r")
    with pytest.raises(NodeNotFoundError):
        cuzarr.open(here, mode="r")


def test_missing_bucket_check_costs_one_request_per_store(counted):
    """Reads and listings learn about a missing bucket from the error S3 already sends
    (NoSuchBucket vs NoSuchKey): no extra request. Only ``exists`` (a HEAD, whose 404
    has no body) asks once per store, on its first miss: one HeadBucket."""
    from cuzarr.storage.fsspec import BucketNotFoundError

    opts, seen = counted
    store = FsspecStore.from_url(f"s3://{BUCKET}/cost.zarr", storage_options=opts)
    sync(store.set("present", b"1"))
    seen.clear()
    assert [sync(store.get(f"missing{i}")) for i in range(3)] == [None] * 3
    assert sync(store.get("present")) == b"1"
    assert sum(seen.values()) == 4  # one GET each, nothing else
    seen.clear()
    assert sync(store.exists("present"))
    assert not any(sync(store.exists(f"missing{i}")) for i in range(3))
    head_bucket = ("HEAD", f"/{BUCKET}")
    assert seen[head_bucket] == 1  # once, on the first miss
    seen.clear()
    gone = FsspecStore.from_url(f"s3://{MISSING}/cost.zarr", storage_options=opts)
    with pytest.raises(BucketNotFoundError):
        sync(gone.get("zarr.json"))
    assert sum(seen.values()) == 1  # the GET alone told


# -- zarr-python's constructor signature --------------------------------------------


def _params(fn):
    import inspect

    return [
        (p.name, p.default)
        for p in inspect.signature(fn).parameters.values()
        if p.kind is p.POSITIONAL_OR_KEYWORD
    ]


def test_constructor_and_factories_take_zarr_python_arguments(s3):
    """FsspecStore(fs, read_only=False, path="/", allowed_exceptions=...) and the
    from_url/from_mapper/from_upath factories, positionally as in zarr-python; cuzarr's
    older FsspecStore(fs, path, read_only=...) and its keywords still work."""
    import fsspec

    from cuzarr.errors import ReadOnlyError

    ours, theirs = _params(FsspecStore), _params(zarr.storage.FsspecStore)
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    assert ours[1:] == theirs[1:]  # (fs may be None here: from protocol= and storage_options=)
    for name in ("from_url", "from_mapper", "from_upath"):
        ours, theirs = (
            _params(getattr(FsspecStore, name)),
            _params(getattr(zarr.storage.FsspecStore, name)),
        )
        assert [n for n, _ in ours[1:]] == [n for n, _ in theirs[1:]], name
        assert [d for _, d in ours[1:]] == [d for _, d in theirs[1:]], name

    url = f"s3://{BUCKET}/signature.zarr"
    a = cuzarr.create_array(url, shape=(6,), chunks=(3,), dtype="i2", storage_options=s3["opts"])
    a[:] = np.arange(6)
    fs, root = s3["fs"], f"{BUCKET}/signature.zarr"

    ro = FsspecStore(fs, True, root)  # zarr-python's positional order
    assert ro.read_only and ro.path == root and ro.fs is fs
    np.testing.assert_array_equal(cuzarr.open_array(ro, mode="r")[:], np.arange(6))
    with pytest.raises(ReadOnlyError):
        sync(ro.set("k", b"v"))
    kw = FsspecStore(fs=fs, read_only=False, path=root)
    assert not kw.read_only and kw.path == root
    legacy = FsspecStore(fs, root, read_only=True)  # cuzarr's older order
    assert legacy.read_only and legacy.path == root
    with pytest.raises(TypeError):
        FsspecStore(fs, root, False)
    from pathlib import PurePosixPath

    assert FsspecStore(fs, PurePosixPath(root)).path == root  # never a read_only flag

    # allowed_exceptions: what a read may raise for a missing key
    strict = FsspecStore(fs, False, root, ())
    assert strict.allowed_exceptions == ()
    with pytest.raises(FileNotFoundError):
        sync(strict.get("no-such-key"))
    assert sync(kw.get("no-such-key")) is None

    store = FsspecStore.from_url(url, s3["opts"], True)  # positional, as zarr-python
    assert store.read_only
    np.testing.assert_array_equal(cuzarr.open_array(store, mode="r")[:], np.arange(6))
    assert FsspecStore.from_url(url, s3["opts"], False, ()).allowed_exceptions == ()

    mapper = fsspec.get_mapper(url, **s3["opts"])
    m = FsspecStore.from_mapper(mapper, read_only=True)
    assert m.read_only and m.path == root
    np.testing.assert_array_equal(cuzarr.open_array(m, mode="r")[:], np.arange(6))
    mem = fsspec.get_mapper("memory://cuzarr-from-mapper/x.zarr")
    cuzarr.create_array(FsspecStore.from_mapper(mem), shape=(3,), dtype="u1")[:] = 7
    zm = zarr.storage.FsspecStore.from_mapper(
        fsspec.get_mapper("memory://cuzarr-from-mapper/x.zarr")
    )
    np.testing.assert_array_equal(zarr.open_array(zm, mode="r")[:], [7, 7, 7])


class _UPathLike:
    """What ``FsspecStore.from_upath`` reads of a ``upath.UPath`` (its filesystem
    and path): universal_pathlib is not a dependency of cuzarr's tests."""

    def __init__(self, url: str, **opts):
        import fsspec

        self.fs = fsspec.filesystem("s3", **opts)
        self.path = url.removeprefix("s3://")


def test_from_upath(s3):
    url = f"s3://{BUCKET}/upath.zarr"
    cuzarr.create_array(url, shape=(4,), dtype="f4", storage_options=s3["opts"])[:] = 2.5
    p = _UPathLike(url, **s3["opts"])
    store = FsspecStore.from_upath(p, read_only=True)
    assert store.read_only and store.path == f"{BUCKET}/upath.zarr"
    np.testing.assert_array_equal(cuzarr.open_array(store, mode="r")[:], [2.5] * 4)
