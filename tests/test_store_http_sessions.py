"""HTTP stores of the same options share one filesystem (session, warm connection
pool) on cuzarr's loop: a real keep-alive HTTP server on 127.0.0.1 counts the
connections each read opens."""

from __future__ import annotations

import asyncio
import http.server
import pathlib
import threading

import numpy as np
import pytest
import zarr

import cuzarr
from _http_handler import QuietHandler
from cuzarr.runtime.sync import sync
from cuzarr.storage.fsspec import HTTPStore
from cuzarr.storage.http import _http_client
from cuzarr.storage.http_sessions import shared_http_fs


class _FilesHandler(QuietHandler):
    """Serves the files below ``root`` over HTTP/1.1 keep-alive; counts connections."""

    root: pathlib.Path
    connections = 0
    lock = threading.Lock()

    def setup(self):
        super().setup()
        with _FilesHandler.lock:
            _FilesHandler.connections += 1

    def do_GET(self):
        path = self.root / self.path.split("?", 1)[0].lstrip("/")
        if not path.is_file():
            self._send(404, b"")
        else:
            self._send(200, path.read_bytes())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    data = np.arange(40 * 40, dtype="int32").reshape(40, 40)
    z = zarr.create_array(str(root / "a.zarr"), shape=data.shape, dtype="int32", chunks=(10, 10))
    z[:] = data
    handler = type("Handler", (_FilesHandler,), {"root": root})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/a.zarr", data
    server.shutdown()
    server.server_close()


def test_reopened_url_reuses_the_warm_connections(site):
    url, data = site
    np.testing.assert_array_equal(cuzarr.open_array(url, mode="r")[...], data)  # 16 chunks
    before = _FilesHandler.connections
    for _ in range(3):  # fresh stores, as xr.open_dataset(url) per task makes
        np.testing.assert_array_equal(cuzarr.open_array(url, mode="r")[...], data)
    assert _FilesHandler.connections == before  # no new connection: the pool is shared


def test_sharing_takes_equal_plain_options_only():
    async def fs_for(options):
        return shared_http_fs("http", options, (_http_client,))

    a = sync(fs_for({"get_client": _http_client, "client_kwargs": {"headers": {"x": "1"}}}))
    b = sync(fs_for({"client_kwargs": {"headers": {"x": "1"}}, "get_client": _http_client}))
    c = sync(fs_for({"get_client": _http_client, "client_kwargs": {"headers": {"x": "2"}}}))
    assert a is b and a is not c
    # an object that is not plain data (a credentials provider, a client) may print
    # like another and differ: never shared
    assert sync(fs_for({"client_kwargs": {"auth": object()}})) is None
    assert sync(fs_for({"get_client": lambda **kw: None})) is None


def test_other_loops_keep_their_own_filesystem(site):
    url, _ = site

    async def read():
        store = HTTPStore(url)
        assert shared_http_fs("http", store.storage_options, (_http_client,)) is None
        return await store.get("zarr.json")

    on_own_loop = asyncio.run(read())
    assert on_own_loop is not None and on_own_loop == sync(HTTPStore(url).get("zarr.json"))
