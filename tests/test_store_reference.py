"""ReferenceStore over hand-built kerchunk references (v0 and v1)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import cuzarr
from cuzarr.errors import ReadOnlyError
from cuzarr.runtime.sync import sync
from cuzarr.storage import RangeByteRequest, ReferenceStore


def _archive(tmp_path):
    """A 'legacy' binary file of raw little-endian blocks at offsets, with a header."""
    data = np.arange(8 * 6, dtype="<i4").reshape(8, 6)
    blob = bytearray(b"HDR!" * 4)  # 16 bytes of unrelated header
    refs = {}
    for i in range(2):
        for j in range(2):
            block = np.ascontiguousarray(data[i * 4 : (i + 1) * 4, j * 3 : (j + 1) * 3])
            refs[f"{i}.{j}"] = (len(blob), block.nbytes)
            blob += block.tobytes()
            blob += b"\0" * 7  # padding between blocks
    path = tmp_path / "legacy.bin"
    path.write_bytes(bytes(blob))
    return data, path, refs


def _zarray(shape, chunks, dtype="<i4"):
    return json.dumps(
        {
            "zarr_format": 2,
            "shape": shape,
            "chunks": chunks,
            "dtype": dtype,
            "compressor": None,
            "fill_value": 0,
            "filters": None,
            "order": "C",
        }
    )


def test_v0_references(tmp_path):
    data, path, blocks = _archive(tmp_path)
    refs = {".zgroup": '{"zarr_format": 2}', "x/.zarray": _zarray([8, 6], [4, 3])}
    refs["x/.zattrs"] = '{"units": "K"}'
    for k, (off, n) in blocks.items():
        refs[f"x/{k}"] = [str(path), off, n]
    store = ReferenceStore(refs)
    g = cuzarr.open_group(store, mode="r")
    assert list(g.keys()) == ["x"]
    np.testing.assert_array_equal(g["x"][:], data)
    np.testing.assert_array_equal(g["x"][3:6, 2:5], data[3:6, 2:5])
    assert g["x"].attrs["units"] == "K"


def test_v1_templates_inline_and_json_file(tmp_path):
    data, path, blocks = _archive(tmp_path)
    small = np.array([1.5, -2.0, 3.25], dtype="<f8")
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "x/.zarray": _zarray([8, 6], [4, 3]),
        "small/.zarray": _zarray([3], [3], "<f8"),
        "small/0": "base64:" + base64.b64encode(small.tobytes()).decode(),
        "text/.zarray": _zarray([4], [4], "|u1"),
        "text/0": "abcd",
        "whole/.zarray": _zarray([4], [4], "|u1"),
    }
    for k, (off, n) in blocks.items():
        refs[f"x/{k}"] = ["{{u}}", off, n]
    (tmp_path / "whole.bin").write_bytes(bytes([9, 8, 7, 6]))
    refs["whole/0"] = ["whole.bin"]  # relative to the reference file
    doc = {"version": 1, "templates": {"u": str(path)}, "refs": refs}
    ref_path = tmp_path / "refs.json"
    ref_path.write_text(json.dumps(doc))
    for store in (ReferenceStore(str(ref_path)), f"reference://{ref_path}"):
        g = cuzarr.open_group(store, mode="r")
        np.testing.assert_array_equal(g["x"][:], data)
        np.testing.assert_array_equal(g["small"][:], small)
        np.testing.assert_array_equal(g["text"][:], np.frombuffer(b"abcd", "u1"))
        np.testing.assert_array_equal(g["whole"][:], [9, 8, 7, 6])


def test_store_interface(tmp_path):
    data, path, blocks = _archive(tmp_path)
    off, n = blocks["0.0"]
    store = ReferenceStore({"a": [str(path), off, n], "b": "hello"})
    raw = sync(store.get("a"))
    assert raw == data[:4, :3].tobytes()
    assert sync(store.get("a", byte_range=RangeByteRequest(4, 8))) == raw[4:8]
    assert sync(store.get("b", byte_range=RangeByteRequest(1, 3))) == b"el"
    assert sync(store.get("zzz")) is None
    assert sync(store.exists("b")) and not sync(store.exists("c"))
    with pytest.raises(ReadOnlyError):
        sync(store.set("c", b"1"))


def test_missing_target_names_the_key_and_is_not_read_as_fill(tmp_path):
    data, path, blocks = _archive(tmp_path)
    refs = {".zgroup": '{"zarr_format": 2}', "x/.zarray": _zarray([8, 6], [4, 3])}
    for k, (off, n) in blocks.items():
        refs[f"x/{k}"] = [str(path), off, n]
    refs["x/1.1"] = [str(tmp_path / "gone.bin"), 0, 48]
    store = ReferenceStore(refs)
    with pytest.raises(FileNotFoundError, match=r"'x/1\.1'.*gone\.bin"):
        sync(store.get("x/1.1"))
    a = cuzarr.open_array(store, path="x", mode="r")
    np.testing.assert_array_equal(a[:4, :], data[:4, :])  # other chunks still read
    with pytest.raises(FileNotFoundError, match="gone"):
        a[...]


def test_http_targets(tmp_path):
    """Targets behind a URL go through the fsspec/HTTP stores."""
    import functools
    import http.server
    import threading

    data, _path, blocks = _archive(tmp_path)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/legacy.bin"
        refs = {".zgroup": '{"zarr_format": 2}', "x/.zarray": _zarray([8, 6], [4, 3])}
        for k, (off, n) in blocks.items():
            refs[f"x/{k}"] = [url, off, n]
        np.testing.assert_array_equal(cuzarr.open_array(ReferenceStore(refs), path="x")[:], data)
    finally:
        server.shutdown()
        server.server_close()


def test_unreadable_reference_files_raise_metadata_error(tmp_path):
    from cuzarr.errors import MetadataError

    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "refs.parq").mkdir()
    for name in ("bad.json", "list.json", "refs.parq"):
        with pytest.raises(MetadataError, match="JSON"):
            cuzarr.open_group(f"reference://{tmp_path / name}", mode="r")
