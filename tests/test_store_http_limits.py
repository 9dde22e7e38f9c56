"""HTTPStore's limits against a real HTTP server on 127.0.0.1: transport
compression (``Content-Encoding``) is inflated at most ``storage.max_inflated_bytes``,
and a read that trickles or stalls ends at ``storage.timeout`` /
``storage.read_timeout`` with a ``StoreTimeoutError`` naming the key and the limit.

Before: aiohttp inflated any ``Content-Encoding: gzip`` answer in full (a 2 MB
answer became 2 GiB), and a server sending a byte every 0.1 s held a read for as
long as it liked (aiohttp's 300 s per attempt, times 4 attempts).
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import os
import sys
import threading
import time
import zlib

import numpy as np
import pytest

import cuzarr
from _http_handler import QuietHandler
from _memcap import MiB, attempt, run_child
from cuzarr.config import config
from cuzarr.errors import StoreTimeoutError
from cuzarr.runtime.sync import sync
from cuzarr.storage import RangeByteRequest
from cuzarr.storage.fsspec import (
    HTTPStore,
    RemoteTimeoutError,
    RetryPolicy,
    TransportEncodingError,
)

FAST = RetryPolicy(retries=1, backoff=0.01)
BOMB_MIB = 2048


def _gzip_bomb(n_mib: int) -> bytes:
    """gzip of ``n_mib`` MiB of zeros: one full-flushed deflate block repeated."""
    z = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush()[:-8]
    crc = 0
    for _ in range(n_mib):
        crc = zlib.crc32(z, crc)
    size = (n_mib * MiB) & 0xFFFFFFFF
    return head + block * (n_mib - 1) + end + crc.to_bytes(4, "little") + size.to_bytes(4, "little")


class LimitHandler(QuietHandler):
    """Files from ``root``; ``modes[path]`` changes how one is answered:
    ``gzip``/``deflate`` (compressed whatever the client asked), ``bomb`` (the gzip
    bomb), ``trickle`` (a byte every 0.1 s), ``stall`` (headers, then nothing),
    ``br`` (an encoding cuzarr does not decode)."""

    root = ""
    modes: dict[str, str] = {}
    accept: list[str] = []
    requests: dict[str, int] = {}
    bomb = b""

    def do_GET(self):
        path = self.path.split("?")[0]
        type(self).accept.append(self.headers.get("Accept-Encoding", ""))
        type(self).requests[path] = type(self).requests.get(path, 0) + 1
        file = os.path.join(self.root, path.lstrip("/"))
        if not os.path.isfile(file):
            return self._send(404, b"")
        with open(file, "rb") as f:
            data = f.read()
        mode = self.modes.get(path)
        if mode == "gzip":
            return self._send(200, gzip.compress(data), [("Content-Encoding", "gzip")])
        if mode == "deflate":
            return self._send(200, zlib.compress(data), [("Content-Encoding", "deflate")])
        if mode == "br":
            return self._send(200, data, [("Content-Encoding", "br")])
        if mode == "gzip-range":
            body = gzip.compress(data)[:10]
            hdrs = [("Content-Encoding", "gzip"), ("Content-Range", f"bytes 0-9/{len(data)}")]
            return self._send(206, body, hdrs)
        if mode == "bomb":
            with contextlib.suppress(OSError):  # the client stops reading at its limit
                self._send(200, self.bomb, [("Content-Encoding", "gzip")])
            return None
        if mode in ("trickle", "stall"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                if mode == "stall":
                    time.sleep(20)
                for b in data[:200]:  # at most ~20 s
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(0.1)
                self.wfile.write(data[200:])
            except OSError:
                pass  # the client gave up
            return None
        return self._send(200, data)

    do_HEAD = do_GET


@pytest.fixture
def server(tmp_path):
    handler = type(
        "H", (LimitHandler,), {"root": str(tmp_path), "modes": {}, "accept": [], "requests": {}}
    )
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield handler, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _array(tmp_path, name="a") -> np.ndarray:
    data = np.arange(1000, dtype="i4")
    a = cuzarr.create_array(
        str(tmp_path / name), shape=(1000,), chunks=(1000,), dtype="i4", compressors=None
    )
    a[:] = data
    return data


def test_identity_is_asked_for_and_compressed_answers_still_read(server, tmp_path):
    handler, url = server
    data = _array(tmp_path)
    handler.modes.update({"/a/zarr.json": "gzip", "/a/c/0": "deflate"})
    a = cuzarr.open_array(HTTPStore(f"{url}/a", retry=FAST))
    np.testing.assert_array_equal(a[:], data)
    assert handler.accept and set(handler.accept) == {"identity"}


def test_encoded_range_answers_and_unknown_encodings_are_refused(server, tmp_path):
    handler, url = server
    _array(tmp_path)
    store = HTTPStore(f"{url}/a", retry=FAST)
    handler.modes["/a/c/0"] = "br"
    with pytest.raises(TransportEncodingError, match=r"'c/0'.*Content-Encoding: br"):
        sync(store.get("c/0"))
    handler.modes["/a/c/0"] = "gzip-range"
    with pytest.raises(TransportEncodingError, match="byte range with Content-Encoding: gzip"):
        sync(store.get("c/0", byte_range=RangeByteRequest(0, 10)))


def test_inflating_past_the_limit_is_refused(server, tmp_path):
    handler, url = server
    _array(tmp_path)
    handler.modes["/a/c/0"] = "gzip"
    store = HTTPStore(f"{url}/a", retry=FAST)
    with (
        config.set({"storage.max_inflated_bytes": 3999}),
        pytest.raises(TransportEncodingError, match="more than 3999 bytes"),
    ):
        sync(store.get("c/0"))
    with config.set({"storage.max_inflated_bytes": 4000}):
        assert len(sync(store.get("c/0"))) == 4000


def child_http_bomb(url: str) -> dict:
    """In the child: read the array whose chunk is answered by the gzip bomb."""
    a = cuzarr.open_array(HTTPStore(url, retry=FAST))
    return attempt(lambda: a[:])


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc: Linux")
def test_transport_compression_bomb_fails_fast_under_a_memory_cap(server, tmp_path):
    handler, url = server
    _array(tmp_path)
    handler.bomb = _gzip_bomb(BOMB_MIB)
    handler.modes["/a/c/0"] = "bomb"
    r = run_child("test_store_http_limits", "child_http_bomb", f"{url}/a")
    print(f"HTTP gzip bomb ({len(handler.bomb)} bytes on the wire, {BOMB_MIB} MiB inflated): {r}")
    assert r["error"] == "TransportEncodingError", r
    assert "storage.max_inflated_bytes" in r["message"] and "'c/0'" in r["message"], r
    assert handler.requests["/a/c/0"] == 1  # not retried


def test_trickling_read_ends_at_the_total_timeout(server, tmp_path):
    handler, url = server
    _array(tmp_path)
    handler.modes["/a/c/0"] = "trickle"
    store = HTTPStore(f"{url}/a", retry=FAST, storage_options={"timeout": 1.0})
    t0 = time.perf_counter()
    with pytest.raises(StoreTimeoutError, match=r"'c/0'.*within 1 s .*storage\.timeout") as e:
        sync(store.get("c/0"))
    print(f"trickle: StoreTimeoutError after {time.perf_counter() - t0:.2f} s")
    assert isinstance(e.value, RemoteTimeoutError)
    # the config key does the same for stores without their own limit
    with (
        config.set({"storage.timeout": 0.5}),
        pytest.raises(StoreTimeoutError, match=r"within 0\.5 s"),
    ):
        sync(HTTPStore(f"{url}/a", retry=FAST).get("c/0"))


def test_stalled_read_ends_at_the_read_timeout_on_every_attempt(server, tmp_path):
    handler, url = server
    _array(tmp_path)
    handler.modes["/a/c/0"] = "stall"
    store = HTTPStore(f"{url}/a", retry=FAST, storage_options={"read_timeout": 0.3})
    t0 = time.perf_counter()
    with pytest.raises(StoreTimeoutError, match=r"'c/0'.*after 2 attempts.*read timeout 0\.3 s"):
        sync(store.get("c/0"))
    print(f"stall: StoreTimeoutError after {time.perf_counter() - t0:.2f} s")
    assert handler.requests["/a/c/0"] == 2  # retried once, as a transient fault


def test_default_limits_and_bad_values():
    store = HTTPStore("http://127.0.0.1:1/x")
    assert store._limit("timeout") == 300.0 and store._limit("read_timeout") == 30.0
    assert config.get("storage.max_inflated_bytes") == 128 * MiB
    with config.set({"storage.timeout": None}):
        assert store._limit("timeout") is None
    with pytest.raises(ValueError, match="positive"):
        HTTPStore("http://127.0.0.1:1/x", storage_options={"timeout": -1})
    with pytest.raises(ValueError, match="number of seconds"):
        HTTPStore("http://127.0.0.1:1/x", storage_options={"read_timeout": "soon"})
