"""HTTPStore against a real HTTP server on 127.0.0.1, over data written by zarr-python."""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import ReadOnlyError
from cuzarr.runtime.sync import sync
from cuzarr.storage import RangeByteRequest, SuffixByteRequest
from cuzarr.storage.fsspec import FsspecStore, HTTPStore, RemoteStoreError, RetryPolicy


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler plus single ``Range: bytes=a-b`` / ``-n`` / ``a-`` requests."""

    protocol_version = "HTTP/1.1"
    fail_paths: dict[str, int] = {}  # path -> remaining 503 answers
    ranges_served = 0
    heads_served = 0

    def do_HEAD(self):
        type(self).heads_served += 1
        return super().do_HEAD()

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        left = self.fail_paths.get(self.path, 0)
        if left:
            type(self).fail_paths[self.path] = left - 1
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if rng is None or not os.path.isfile(path):
            return super().do_GET()
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        with open(path, "rb") as f:
            data = f.read()
        size = len(data)
        if m.group(1):
            start = int(m.group(1))
            end = int(m.group(2)) + 1 if m.group(2) else size
        else:
            start, end = max(0, size - int(m.group(2))), size
        end = min(end, size)
        if start >= size:
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        type(self).ranges_served += 1
        body = data[start:end]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class PlainHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(directory, handler):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(directory))
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    data = np.arange(20 * 30, dtype="int32").reshape(20, 30)
    # v3 group, consolidated, with a sharded array; v2 group not consolidated.
    g3 = zarr.open_group(str(root / "v3.zarr"), mode="w", zarr_format=3)
    g3.attrs["title"] = "v3"
    a = g3.create_array("a", shape=data.shape, dtype="int32", chunks=(5, 7))
    a[:] = data
    s = g3.create_array("s", shape=data.shape, dtype="int32", chunks=(5, 5), shards=(10, 10))
    s[:] = data
    zarr.consolidate_metadata(str(root / "v3.zarr"))
    g2 = zarr.open_group(str(root / "v2.zarr"), mode="w", zarr_format=2)
    b = g2.create_array("b", shape=data.shape, dtype="float64", chunks=(6, 6))
    b[:] = data * 0.5
    g2.create_group("sub").attrs["k"] = 1
    servers = [_serve(root, RangeHandler), _serve(root, PlainHandler)]
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    yield {"root": root, "range": urls[0], "plain": urls[1], "data": data}
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.mark.parametrize("kind", ["range", "plain"])
def test_consolidated_v3_group(site, kind):
    g = cuzarr.open_group(f"{site[kind]}/v3.zarr", mode="r")
    assert g.attrs["title"] == "v3"
    assert sorted(g.keys()) == ["a", "s"]
    np.testing.assert_array_equal(g["a"][:], site["data"])
    np.testing.assert_array_equal(g["s"][3:17, 2:29], site["data"][3:17, 2:29])
    np.testing.assert_array_equal(g["s"][4, 4], site["data"][4, 4])


def test_sharded_reads_use_ranges(site):
    before = RangeHandler.ranges_served
    a = cuzarr.open_array(f"{site['range']}/v3.zarr", path="s", mode="r")
    np.testing.assert_array_equal(a[0:3, 0:3], site["data"][0:3, 0:3])
    assert RangeHandler.ranges_served > before


@pytest.mark.parametrize("kind", ["range", "plain"])
def test_v2_without_consolidation(site, kind):
    a = cuzarr.open_array(f"{site[kind]}/v2.zarr/b", mode="r")
    np.testing.assert_array_equal(a[:], site["data"] * 0.5)
    a2 = cuzarr.open_array(f"{site[kind]}/v2.zarr", path="b")
    assert a2.shape == (20, 30)
    # Listing falls back to the server's directory index pages.
    g = cuzarr.open_group(f"{site[kind]}/v2.zarr", mode="r")
    assert sorted(g.keys()) == ["b", "sub"]
    assert g["sub"].attrs["k"] == 1


@pytest.mark.parametrize("kind", ["range", "plain"])
def test_store_byte_ranges_and_missing(site, kind):
    store = HTTPStore(f"{site[kind]}/v2.zarr")
    raw = (site["root"] / "v2.zarr" / "b" / ".zarray").read_bytes()
    assert sync(store.get("b/.zarray")) == raw
    assert sync(store.get("b/.zarray", byte_range=RangeByteRequest(2, 9))) == raw[2:9]
    assert sync(store.get("b/.zarray", byte_range=SuffixByteRequest(5))) == raw[-5:]
    assert sync(store.get("missing/key")) is None
    assert sync(store.exists("b/.zarray"))
    assert not sync(store.exists("nope"))
    got = sync(store.get_many(["b/.zarray", "nope", "b/0.0"]))
    assert got[0] == raw and got[1] is None and got[2] is not None


def test_read_only(site):
    store = HTTPStore(f"{site['range']}/v2.zarr")
    assert store.read_only
    with pytest.raises(ReadOnlyError):
        sync(store.set("x", b"1"))
    a = cuzarr.open_array(f"{site['range']}/v2.zarr/b")
    with pytest.raises(ReadOnlyError):
        a[0, 0] = 1


@pytest.mark.parametrize("how", ["from_url", "open_array"])
def test_http_urls_give_an_http_store(site, how):
    """FsspecStore.from_url (and a URL passed as the store) makes an HTTPStore for
    http(s) URLs: storage/http.py registers it with fsspec_store.py's URL_STORES."""
    url = f"{site['range']}/v2.zarr"
    if how == "from_url":
        store, key = FsspecStore.from_url(url, read_only=False), "b/.zarray"
    else:
        store, key = cuzarr.open_array(f"{url}/b", mode="r").store, ".zarray"
    assert type(store) is HTTPStore
    assert store.read_only and not store.supports_writes
    assert sync(store.get(key)) == (site["root"] / "v2.zarr" / "b" / ".zarray").read_bytes()


def test_retries_transient_errors(site):
    RangeHandler.fail_paths["/v2.zarr/b/.zarray"] = 2
    store = HTTPStore(f"{site['range']}/v2.zarr", retry=RetryPolicy(retries=3, backoff=0.001))
    assert sync(store.get("b/.zarray")) is not None
    RangeHandler.fail_paths["/v2.zarr/b/.zarray"] = 5
    store = HTTPStore(f"{site['range']}/v2.zarr", retry=RetryPolicy(retries=1, backoff=0.001))
    with pytest.raises(RemoteStoreError, match=r"b/\.zarray"):
        sync(store.get("b/.zarray"))
    RangeHandler.fail_paths.clear()


def test_permanent_error_names_key(site):
    store = HTTPStore("http://127.0.0.1:1/nothing", retry=RetryPolicy(retries=0))
    with pytest.raises(RemoteStoreError, match=r"zarr\.json"):
        sync(store.get("zarr.json"))


@pytest.mark.parametrize("n", [1, 5, 10**6])
def test_fsspec_http_suffix_is_one_request(site, n):
    """A suffix read through fsspec's HTTP filesystem is one ``Range: bytes=-N``
    GET: no size lookup first (what a shard index read costs on S3, GCS, HTTP)."""
    import fsspec

    from cuzarr.storage import FsspecStore

    fs = fsspec.filesystem("http", skip_instance_cache=True)
    store = FsspecStore(fs, path=f"{site['range']}/v2.zarr", read_only=True)
    raw = (site["root"] / "v2.zarr" / "b" / ".zarray").read_bytes()
    heads, ranges = RangeHandler.heads_served, RangeHandler.ranges_served
    assert sync(store.get("b/.zarray", byte_range=SuffixByteRequest(n))) == raw[-n:]
    assert RangeHandler.heads_served == heads
    assert RangeHandler.ranges_served == ranges + 1
    assert sync(store.get("missing", byte_range=SuffixByteRequest(n))) is None


ODD_NAMES = ["sp ace", "hash#x", "q?x", "pct%20x", "plus+x", "ünï"]


@pytest.fixture(scope="module")
def odd_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd")
    for fmt in (2, 3):
        g = zarr.open_group(str(root / f"v{fmt}.zarr"), mode="w", zarr_format=fmt)
        for i, name in enumerate(ODD_NAMES):
            g.create_array(name, shape=(4,), dtype="i4", chunks=(2,))[:] = i + 1
    zarr.consolidate_metadata(str(root / "v3.zarr"))
    server = _serve(root, PlainHandler)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("fmt", [2, 3])
def test_keys_needing_percent_encoding(odd_site, fmt):
    """'#', '?' and '%' in a key are part of the name (they used to cut the URL or
    be taken as an escape, and the array read as all fill value); names listed
    from index pages are the decoded ones. v3 is consolidated, v2 is listed."""
    g = cuzarr.open_group(f"{odd_site}/v{fmt}.zarr", mode="r")
    assert sorted(g.keys()) == sorted(ODD_NAMES)
    for i, name in enumerate(ODD_NAMES):
        assert g[name][:].tolist() == [i + 1] * 4, name
        a = cuzarr.open_array(f"{odd_site}/v{fmt}.zarr", path=name, mode="r")
        assert a[:].tolist() == [i + 1] * 4, name
    store = HTTPStore(f"{odd_site}/v{fmt}.zarr")
    assert sync(store.exists("hash#x/c/0" if fmt == 3 else "hash#x/0"))
    assert not sync(store.exists("hash"))


class NoSuffixHandler(RangeHandler):
    """Answers 416 to suffix ranges (``bytes=-N``), with or without the size."""

    with_size = False
    seen: list = []

    def do_GET(self):
        rng = self.headers.get("Range") or ""
        type(self).seen.append((self.command, rng))
        path = self.translate_path(self.path)
        if rng.startswith("bytes=-") and os.path.isfile(path):
            self.send_response(416)
            if self.with_size:
                self.send_header("Content-Range", f"bytes */{os.path.getsize(path)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        return super().do_GET()

    def do_HEAD(self):
        type(self).seen.append((self.command, ""))
        return super().do_HEAD()


@pytest.mark.parametrize("with_size", [False, True])
def test_server_refusing_suffix_ranges(site, with_size):
    """A 416 to ``bytes=-N`` (the shard index read) falls back to the size (from
    the 416's Content-Range, else a HEAD) and a plain range: it used to read as
    empty, and every sharded read failed with 'shard index has 0 bytes'."""
    handler = type("H", (NoSuffixHandler,), {"with_size": with_size, "seen": []})
    server = _serve(site["root"], handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        a = cuzarr.open_array(f"{url}/v3.zarr", path="s", mode="r")
        handler.seen.clear()
        np.testing.assert_array_equal(a[4, 4], site["data"][4, 4])
        assert all(r for m, r in handler.seen if m == "GET")  # never the whole shard
        assert ("HEAD", "") in handler.seen or with_size
        np.testing.assert_array_equal(a[:], site["data"])
        store = HTTPStore(f"{url}/v2.zarr")
        raw = (site["root"] / "v2.zarr" / "b" / ".zarray").read_bytes()
        assert sync(store.get("b/.zarray", byte_range=SuffixByteRequest(5))) == raw[-5:]
        assert sync(store.get("b/.zarray", byte_range=SuffixByteRequest(10**6))) == raw
        assert sync(store.get("nope", byte_range=SuffixByteRequest(5))) is None
    finally:
        server.shutdown()
        server.server_close()
