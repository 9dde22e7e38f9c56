"""HTTPStore against real HTTP servers on 127.0.0.1 that answer ``Range`` requests
wrongly: a 206 must hold the bytes asked for, or the read fails, naming the key.

A caching proxy (or a buggy server) can answer ``bytes=100-199`` with ``206`` and
``Content-Range: bytes 0-99/1000``; such an answer used to be returned as if it
were the range asked for, and decoded as a wrong shard index or a wrong chunk.
"""

from __future__ import annotations

import http.server
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

import cuzarr
from _http_handler import QuietHandler
from cuzarr.errors import CodecError
from cuzarr.runtime.sync import sync
from cuzarr.storage import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from cuzarr.storage.base import slice_bytes
from cuzarr.storage.fsspec import (
    HTTPStore,
    RangeMismatchError,
    RemoteStoreError,
    RetryPolicy,
    TruncatedRangeError,
)

BLOB = bytes(range(256)) * 4  # 1024 bytes, every window distinct


class Handler(QuietHandler):
    """Serves ``files`` (URL path -> bytes); answers single ``Range`` requests as
    ``mode`` says (``honest`` is RFC 9110)."""

    files: dict[str, bytes] = {}
    mode = "honest"
    ranged = 0  # 206 answers sent

    def do_HEAD(self):
        data = self.files.get(self.path)
        if data is None:
            return self._send(404, b"")
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self):
        data = self.files.get(self.path)
        if data is None:
            return self._send(404, b"")
        rng = self.headers.get("Range")
        if not rng:
            return self._send(200, data)
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        size = len(data)
        suffix = not m.group(1)
        if suffix:
            start, end = max(0, size - int(m.group(2))), size
        else:
            start = int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
        if start >= size:
            return self._send(416, b"", [("Content-Range", f"bytes */{size}")])
        first, last, total, body = self.answer(data, start, end, suffix)
        headers = []
        mode = self.mode
        if mode == "multipart":
            boundary = "XYZ"
            part = (
                (
                    f"--{boundary}\r\nContent-Type: application/octet-stream\r\n"
                    f"Content-Range: bytes {first}-{last - 1}/{size}\r\n\r\n"
                ).encode()
                + body
                + f"\r\n--{boundary}--\r\n".encode()
            )
            headers.append(("Content-Type", f"multipart/byteranges; boundary={boundary}"))
            body = part
        elif not mode.startswith("no_cr"):
            headers.append(("Content-Range", f"bytes {first}-{last - 1}/{total}"))
        type(self).ranged += 1
        self._send(206, body, headers)

    def answer(self, data, start, end, suffix):
        """(first, last (exclusive), complete length, body) of the 206 sent."""
        size = len(data)
        mode = self.mode
        first, last = start, end
        if (mode == "shift_ranges" and not suffix) or mode == "shifted":
            # the same length, elsewhere (a cache keyed without the Range header)
            d = 7 if start >= 7 else -7
            first, last = start - d, min(size, end - d)
        elif mode in ("wider", "no_cr_whole"):
            first, last = 0, size
        elif mode == "padded":
            first, last = max(0, start - 5), min(size, end + 5)
        elif mode == "short_suffix" and suffix:
            first = min(end - 1, start + 3)  # 3 bytes fewer than asked
        body = data[first:last]
        if mode == "truncated":
            body = body[: len(body) // 2]  # Content-Length matches, Content-Range does not
        total = "*" if mode == "star" else size
        return first, last, total, body


def _serve(files: dict[str, bytes], mode: str):
    handler = type("H", (Handler,), {"files": files, "mode": mode, "ranged": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server, handler, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def serve():
    servers = []

    def start(files, mode):
        server, handler, url = _serve(files, mode)
        servers.append(server)
        return handler, url

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _store(url: str) -> HTTPStore:
    return HTTPStore(url, retry=RetryPolicy(retries=1, backoff=0.001))


REQUESTS = [
    RangeByteRequest(100, 200),
    RangeByteRequest(0, 16),
    RangeByteRequest(1000, 1100),  # runs past the end
    OffsetByteRequest(900),
    SuffixByteRequest(24),
    SuffixByteRequest(5000),  # longer than the value
]


@pytest.mark.parametrize("mode", ["honest", "wider", "padded", "no_cr"])
@pytest.mark.parametrize("req", REQUESTS, ids=repr)
def test_answers_holding_the_range_are_sliced(serve, mode, req):
    """A 206 whose Content-Range holds the range asked for (exactly, or more of
    the value) gives exactly the bytes asked for; so does one without
    Content-Range whose body has the length asked for (where the request may run
    past the end, the value's size from a HEAD decides)."""
    handler, url = serve({"/d/k": BLOB}, mode)
    got = sync(_store(f"{url}/d").get("k", byte_range=req))
    assert got == slice_bytes(BLOB, req)
    assert handler.ranged == 1


@pytest.mark.parametrize("req", REQUESTS[:4], ids=repr)
def test_unknown_complete_length_is_placed_by_the_range(serve, req):
    """``Content-Range: bytes a-b/*``: a range or an offset can still be placed."""
    _, url = serve({"/d/k": BLOB}, "star")
    if isinstance(req, RangeByteRequest) and req.end > len(BLOB):
        with pytest.raises(RangeMismatchError, match="bytes 1000-1023/\\*"):
            sync(_store(f"{url}/d").get("k", byte_range=req))
        return
    assert sync(_store(f"{url}/d").get("k", byte_range=req)) == slice_bytes(BLOB, req)


def test_unknown_complete_length_cannot_place_a_suffix(serve):
    _, url = serve({"/d/k": BLOB}, "star")
    with pytest.raises(RangeMismatchError, match=r"bytes=-24.*without the value's size"):
        sync(_store(f"{url}/d").get("k", byte_range=SuffixByteRequest(24)))


@pytest.mark.parametrize(
    ("mode", "req", "answered"),
    [
        ("shifted", RangeByteRequest(100, 200), "Content-Range 'bytes 93-192/1024'"),
        ("shifted", RangeByteRequest(0, 16), "Content-Range 'bytes 7-22/1024'"),
        ("shifted", OffsetByteRequest(900), "Content-Range 'bytes 893-1016/1024'"),
        ("shifted", SuffixByteRequest(24), "Content-Range 'bytes 993-1016/1024'"),
        ("short_suffix", SuffixByteRequest(24), "Content-Range 'bytes 1003-1023/1024'"),
        ("no_cr_whole", RangeByteRequest(100, 200), "no Content-Range and 1024 bytes"),
        ("no_cr_whole", SuffixByteRequest(24), "no Content-Range and 1024 bytes"),
        ("no_cr_whole", OffsetByteRequest(900), "no Content-Range and 1024 bytes"),
        ("multipart", RangeByteRequest(100, 200), "multipart/byteranges"),
        (
            "truncated",
            RangeByteRequest(100, 200),
            "'bytes 100-199/1024' .100 bytes. and a body of 50",
        ),
    ],
)
def test_answers_not_holding_the_range_raise(serve, mode, req, answered):
    """A 206 with other bytes than asked for is a RangeMismatchError naming the key,
    the range asked for and the one answered; it used to be returned as the range."""
    from cuzarr.storage.http import _range_header

    handler, url = serve({"/d/sub/k": BLOB}, mode)
    with pytest.raises(RangeMismatchError) as info:
        sync(_store(f"{url}/d").get("sub/k", byte_range=req))
    msg = str(info.value)
    assert "'sub/k'" in msg and _range_header(req) in msg
    assert re.search(answered, msg), msg
    assert isinstance(info.value, RemoteStoreError)
    assert isinstance(info.value, CodecError) == (mode == "truncated")
    assert isinstance(info.value, TruncatedRangeError) == (mode == "truncated")
    assert handler.ranged == 1  # not retried: the same proxy would answer the same


def test_whole_reads_are_unaffected(serve):
    _, url = serve({"/d/k": BLOB}, "shifted")
    assert sync(_store(f"{url}/d").get("k")) == BLOB
    assert sync(_store(f"{url}/d").get("nope", byte_range=RangeByteRequest(1, 5))) is None


# -- a sharded array over such servers ----------------------------------------------
SHAPE, CHUNKS, SHARDS = (16, 16), (2, 2), (8, 8)
GOOD = ("honest", "wider", "padded", "no_cr")
BAD = ("shifted", "shift_ranges", "short_suffix", "no_cr_whole", "multipart", "truncated")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """An uncompressed sharded v3 array written by zarr-python: a wrong inner-chunk
    range decodes without complaint (the bytes codec only checks the length)."""
    root = tmp_path_factory.mktemp("sharded")
    data = np.random.default_rng(3).integers(0, 2**31, SHAPE).astype("int32")
    z = zarr.create_array(
        str(root / "s.zarr"),
        shape=SHAPE,
        dtype="int32",
        chunks=CHUNKS,
        shards=SHARDS,
        compressors=None,
    )
    z[:] = data
    files = {
        "/" + p.relative_to(root).as_posix(): p.read_bytes()
        for p in Path(root).rglob("*")
        if p.is_file()
    }
    return files, data


@pytest.mark.parametrize("mode", GOOD + BAD)
def test_sharded_reads_are_exact_or_refused(serve, sharded, mode):
    """Single inner chunks of a sharded array (a suffix request for the shard
    index, then a range for the chunk): exact data from a server whose 206s hold
    what was asked, a RangeMismatchError naming the shard key from one whose 206s
    do not; never wrong data (``shift_ranges`` used to return it silently)."""
    files, data = sharded
    handler, url = serve(files, mode)
    a = cuzarr.open_array(_store(f"{url}/s.zarr"), mode="r")
    for sel in [(3, 3), (9, 14), (slice(4, 6), slice(10, 12)), (15, 0)]:
        before = handler.ranged
        if mode in GOOD:
            np.testing.assert_array_equal(a[sel], data[sel])
            assert handler.ranged > before  # ranged reads, not whole shards
            continue
        with pytest.raises(RangeMismatchError) as info:
            got = a[sel]
            pytest.fail(f"{mode}: a read returned {got!r} (expected {data[sel]!r})")
        r, c = (s.start if isinstance(s, slice) else s for s in sel)
        assert f"'c/{r // SHARDS[0]}/{c // SHARDS[1]}'" in str(info.value)
