"""ReferenceStore audited against the kerchunk reference spec (v0 and v1), with
fsspec's ReferenceFileSystem + zarr-python as the oracle: hand-built references
to real local files and to an HTTP server on 127.0.0.1 (inline data, base64,
byte ranges, whole files, templates, JSON-object metadata, Zarr v2 and a
sharded v3 array), and the errors for broken references."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import MetadataError
from cuzarr.runtime.sync import sync
from cuzarr.storage import RangeByteRequest, ReferenceStore, SuffixByteRequest

fsspec = pytest.importorskip("fsspec")


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single ``Range: bytes=a-b`` requests (fsspec's HTTP
    filesystem, the oracle's, needs them)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if rng is None or not rng.startswith("bytes=") or "," in rng:
            return super().do_GET()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return super().do_GET()
        first, _, last = rng[len("bytes=") :].partition("-")
        if first:
            start, end = int(first), (int(last) + 1 if last else len(data))
        else:
            start, end = max(0, len(data) - int(last)), len(data)
        end = min(end, len(data))
        if start >= len(data):
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:end]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_RangeHandler, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _zarray(shape, chunks, dtype, compressor=None, fill_value=0, order="C"):
    return {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(chunks),
        "dtype": dtype,
        "compressor": compressor,
        "fill_value": fill_value,
        "filters": None,
        "order": order,
    }


def _pack(arrays, blob_path, url_for_blob):
    """Zarr v2 arrays (name -> (data, chunks, dtype, compressor)) packed into one
    binary file behind a header, with gaps; references as kerchunk writes them."""
    import numcodecs

    blob = bytearray(b"HEADER--" * 5)
    refs = {".zgroup": json.dumps({"zarr_format": 2}), ".zattrs": json.dumps({"title": "t"})}
    for name, (data, chunks, dtype, comp) in arrays.items():
        codec = numcodecs.get_codec(comp) if comp else None
        refs[f"{name}/.zarray"] = json.dumps(_zarray(data.shape, chunks, dtype, comp))
        refs[f"{name}/.zattrs"] = json.dumps({"units": name})
        grid = [-(-s // c) for s, c in zip(data.shape, chunks)]
        for idx in np.ndindex(*grid):
            if sum(idx) == 1:
                continue  # a missing chunk: the fill value
            block = np.zeros(chunks, dtype)
            sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
            part = data[sel]
            block[tuple(slice(0, n) for n in part.shape)] = part
            raw = block.tobytes()
            enc = bytes(codec.encode(raw)) if codec else raw
            key = f"{name}/" + ".".join(map(str, idx))
            if len(enc) < 40 and sum(idx) % 2 == 0:
                refs[key] = "base64:" + base64.b64encode(enc).decode()  # inline
            else:
                refs[key] = [url_for_blob, len(blob), len(enc)]
                blob += enc + b"\xff" * 5
    blob_path.write_bytes(bytes(blob))
    return refs


def _arrays():
    rng = np.random.default_rng(0)
    out = {}
    for i, dt in enumerate(["<u1", "<i2", ">u4", "<i8", "<f4", ">f8"]):
        shape = [(13,), (7, 5), (3, 4, 5)][i % 3]
        chunks = [(4,), (3, 2), (2, 3, 2)][i % 3]
        comp = [None, {"id": "zlib", "level": 1}, {"id": "zstd", "level": 3}][i % 3]
        out[f"a{i}"] = (rng.integers(0, 100, shape).astype(dt), chunks, dt, comp)
    return out


def _oracle(refs, **kw):
    fs = fsspec.filesystem("reference", fo=refs, asynchronous=True, **kw)
    return zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r")


def _compare(oracle, ours, names):
    assert sorted(oracle.array_keys()) == sorted(ours.array_keys()) == sorted(names)
    assert dict(oracle.attrs) == dict(ours.attrs)
    for name in names:
        z, c = oracle[name], ours[name]
        assert (z.shape, z.dtype, z.fill_value) == (c.shape, c.dtype, c.fill_value)
        np.testing.assert_array_equal(c[...], z[...])
        sel = tuple(slice(1, None, 2) for _ in z.shape)
        np.testing.assert_array_equal(c[sel], z[sel])
        assert dict(z.attrs) == dict(c.attrs)


@pytest.mark.parametrize("version", [0, 1])
def test_local_references_match_fsspec(tmp_path, version):
    arrays = _arrays()
    blob = tmp_path / "blob.bin"
    url = "{{u}}" if version == 1 else str(blob)
    refs = _pack(arrays, blob, url)
    refs["a0/.zattrs"] = {"units": "a0"}  # a JSON-object value, as some writers keep them
    doc = {"version": 1, "templates": {"u": str(blob)}, "refs": refs} if version else refs
    (tmp_path / "refs.json").write_text(json.dumps(doc))
    oracle = _oracle(doc)
    for fo in (doc, str(tmp_path / "refs.json"), f"file://{tmp_path / 'refs.json'}"):
        _compare(oracle, cuzarr.open_group(ReferenceStore(fo), mode="r"), list(arrays))
    # chunks (0, 1) and (1, 0) have no reference: the fill value
    a1 = cuzarr.open_group(ReferenceStore(doc), mode="r")["a1"]
    np.testing.assert_array_equal(a1[0:3, 2:4], 0)
    np.testing.assert_array_equal(a1[3:6, 0:2], 0)
    assert a1.nchunks_initialized == a1.nchunks - 2


@pytest.mark.parametrize("version", [0, 1])
def test_http_references_match_fsspec(http_root, version):
    root, base = http_root
    arrays = _arrays()
    url = "{{u}}" if version == 1 else f"{base}/blob.bin"
    refs = _pack(arrays, root / "blob.bin", url)
    (root / "whole.bin").write_bytes(np.arange(6, dtype="<i2").tobytes())
    refs["w/.zarray"] = json.dumps(_zarray((6,), (6,), "<i2"))
    refs["w/0"] = ["{{u2}}" if version else f"{base}/whole.bin"]  # a whole-file reference
    doc = (
        {
            "version": 1,
            "templates": {"u": f"{base}/blob.bin", "u2": f"{base}/whole.bin"},
            "refs": refs,
        }
        if version
        else refs
    )
    oracle = _oracle(doc, remote_protocol="http", remote_options={"asynchronous": True})
    ours = cuzarr.open_group(ReferenceStore(doc), mode="r")
    _compare(oracle, ours, [*arrays, "w"])
    np.testing.assert_array_equal(ours["w"][...], np.arange(6))
    # byte ranges inside a reference (and of a whole-file one) as slices of it
    store = ReferenceStore(doc)
    key = next(k for k, v in refs.items() if isinstance(v, list) and len(v) == 3)
    whole = sync(store.get(key))
    assert sync(store.get(key, byte_range=RangeByteRequest(1, 4))) == whole[1:4]
    assert sync(store.get(key, byte_range=SuffixByteRequest(3))) == whole[-3:]
    assert (
        sync(store.get("w/0", byte_range=RangeByteRequest(2, 6)))
        == (root / "whole.bin").read_bytes()[2:6]
    )


def test_sharded_v3_array_through_ranges_matches_fsspec(tmp_path):
    """A sharded v3 array packed into one file: the shard index and inner chunks
    are suffix and range reads inside each reference."""
    src = tmp_path / "src.zarr"
    g = zarr.open_group(str(src), mode="w")
    data = np.arange(30 * 17, dtype="f4").reshape(30, 17)
    a = g.create_array("sh", shape=data.shape, dtype="f4", chunks=(4, 5), shards=(8, 10))
    a[...] = data
    blob = bytearray(b"JUNK" * 3)
    refs = {}
    for p in sorted(src.rglob("*")):
        if p.is_file():
            key, raw = str(p.relative_to(src)), p.read_bytes()
            if key.endswith("zarr.json"):
                refs[key] = json.loads(raw)
            else:
                refs[key] = ["{{u}}", len(blob), len(raw)]
                blob += raw + b"\0" * 3
    (tmp_path / "blob.bin").write_bytes(bytes(blob))
    doc = {"version": 1, "templates": {"u": str(tmp_path / "blob.bin")}, "refs": refs}
    oracle = _oracle(doc)["sh"]
    ours = cuzarr.open_group(ReferenceStore(doc), mode="r")["sh"]
    np.testing.assert_array_equal(ours[...], oracle[...])
    np.testing.assert_array_equal(ours[3:11, 4:13], data[3:11, 4:13])


@pytest.mark.parametrize("where", ["local", "http"])
def test_reference_past_the_end_of_its_target_is_an_error(tmp_path, http_root, where):
    """A target shorter than its reference (truncated or replaced since the
    references were made) used to read short, and decode as other values."""
    root, base = http_root
    (root / "f.bin").write_bytes(np.arange(10, dtype="<i4").tobytes())  # 40 bytes
    url = str(root / "f.bin") if where == "local" else f"{base}/f.bin"
    za = json.dumps(_zarray((8,), (8,), "<i4"))
    for offset, length, got in [(8, 36, 32), (100, 32, 0)]:
        store = ReferenceStore({"x/.zarray": za, "x/0": [url, offset, length]})
        with pytest.raises(
            MetadataError, match=rf"key 'x/0'.*{offset}-{offset + length}.*{got} of"
        ):
            sync(store.get("x/0"))
        with pytest.raises(MetadataError, match="key 'x/0'"):
            cuzarr.open_array(store, path="x", mode="r")[...]
    # a range inside the reference that the target cuts short, too
    store = ReferenceStore({"x/0": [url, 8, 36]})
    assert sync(store.get("x/0", byte_range=RangeByteRequest(0, 8))) == bytes(
        np.arange(2, 4, dtype="<i4")
    )
    with pytest.raises(MetadataError, match="key 'x/0'"):
        sync(store.get("x/0", byte_range=RangeByteRequest(30, 36)))


def test_malformed_references_name_the_key(tmp_path):
    good = str(tmp_path / "f.bin")
    cases = [
        ([good, "a", 4], "non-negative integers, got 'a'"),
        ([good, -4, 4], "non-negative integers, got -4"),
        ([good, 0, True], "non-negative integers, got True"),
        ([good, 4], r"expected \[url\] or \[url, offset, length\]"),
        ([], r"expected \[url\]"),
        ([1, 2, 3], r"expected \[url\]"),
        ("base64:!!not base64!!", "invalid base64"),
        (5, "unsupported value 5"),
    ]
    for value, message in cases:
        for doc in ({"x/0": value}, {"version": 1, "refs": {"x/0": value}}):
            with pytest.raises(MetadataError, match=f"reference 'x/0': .*{message}"):
                ReferenceStore(doc)
    with pytest.raises(MetadataError, match="'refs' must be a JSON object"):
        ReferenceStore({"version": 1, "refs": [1]})
    # base64 with line breaks (some encoders wrap lines) still decodes
    wrapped = base64.encodebytes(bytes(range(100))).decode()
    assert sync(ReferenceStore({"k": "base64:" + wrapped}).get("k")) == bytes(range(100))


def test_unreadable_targets_name_the_key(tmp_path, http_root):
    _root, base = http_root
    store = ReferenceStore({"x/0": [str(tmp_path)], "y/0": [f"{base}/gone.bin", 0, 4]})
    with pytest.raises(IsADirectoryError, match=r"key 'x/0'.*reading reference target"):
        sync(store.get("x/0"))
    with pytest.raises(FileNotFoundError, match=r"key 'y/0': reference target .*gone\.bin"):
        sync(store.get("y/0"))


def test_relative_targets_resolve_against_a_file_url_reference(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.bin").write_bytes(b"abcdef")
    (tmp_path / "d" / "refs.json").write_text(json.dumps({"k": ["t.bin", 1, 3], "w": ["t.bin"]}))
    monkeypatch.chdir(tmp_path)  # not the reference file's directory
    for fo in (str(tmp_path / "d" / "refs.json"), f"file://{tmp_path / 'd' / 'refs.json'}"):
        store = ReferenceStore(fo)
        assert sync(store.get("k")) == b"bcd"
        assert sync(store.get("w")) == b"abcdef"


@pytest.mark.parametrize("inline", [0, 300])
def test_kerchunk_hdf5_references_match_fsspec(tmp_path, http_root, inline):
    """References kerchunk makes for an HDF5 file (chunked, gzip+shuffle,
    contiguous, scalar, fill values, nested groups), local and over HTTP."""
    import h5py  # test dependencies: the peers that make the reference files
    import kerchunk.hdf as hdf
    root, base = http_root
    rng = np.random.default_rng(0)
    with h5py.File(root / "data.h5", "w") as f:
        f.attrs["title"] = "t"
        for dt in ["u1", "i2", "u4", "i8", "f4", ">f8"]:
            d = rng.integers(0, 100, (13, 7)).astype(dt)
            f.create_dataset(f"chunked_{dt[-2:]}", data=d, chunks=(5, 3))
            f.create_dataset(
                f"gz_{dt[-2:]}", data=d, chunks=(4, 4), compression="gzip", shuffle=True
            )
            f.create_dataset(f"contig_{dt[-2:]}", data=d)
        f.create_dataset("fill", shape=(10,), dtype="f4", chunks=(3,), fillvalue=-1.5)
        g = f.create_group("grp/sub")
        g.create_dataset("x", data=np.arange(100.0).reshape(10, 10), chunks=(3, 4))
        g.attrs["units"] = "m"
        f.create_dataset("scalar", data=3.5)

    def arrays(group, prefix=""):
        out = {}
        for k, v in group.members():
            out.update({prefix + k: v} if hasattr(v, "shape") else arrays(v, prefix + k + "/"))
        return out

    for url, kw in [
        (str(root / "data.h5"), {}),
        (f"{base}/data.h5", {"remote_protocol": "http", "remote_options": {"asynchronous": True}}),
    ]:
        refs = hdf.SingleHdf5ToZarr(url, inline_threshold=inline).translate()
        theirs = arrays(_oracle(refs, **kw))
        ours = arrays(cuzarr.open_group(ReferenceStore(refs), mode="r"))
        assert sorted(theirs) == sorted(ours) and len(ours) == 21
        for name, z in theirs.items():
            c = ours[name]
            assert (z.shape, z.dtype) == (c.shape, c.dtype), name
            np.testing.assert_array_equal(c[...], z[...])
            assert dict(c.attrs) == dict(z.attrs), name


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_reference_files_read_as_fsspec_reads_them(tmp_path, suffix):
    import bz2
    import gzip
    import lzma

    import zstandard

    z = zarr.create_array(str(tmp_path / "src.zarr"), shape=(6,), chunks=(3,), dtype="i4",
                          compressors=None, attributes={"a": 1})
    z[...] = np.arange(6)
    refs = {"version": 1, "refs": {
        "zarr.json": (tmp_path / "src.zarr" / "zarr.json").read_text(),
        "c/0": [str(tmp_path / "src.zarr" / "c" / "0")],
        "c/1": [str(tmp_path / "src.zarr" / "c" / "1")],
    }}
    data = json.dumps(refs).encode()
    pack = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
            ".zst": zstandard.ZstdCompressor().compress}[suffix]
    path = tmp_path / f"refs.json{suffix}"
    path.write_bytes(pack(data))
    ours = cuzarr.open_array(ReferenceStore(str(path)), mode="r")
    fs = fsspec.filesystem("reference", fo=str(path), asynchronous=True,
                           target_options={"compression": "infer"})
    theirs = zarr.open_array(zarr.storage.FsspecStore(fs, read_only=True, path=""), mode="r")
    np.testing.assert_array_equal(ours[...], theirs[...])
    assert dict(ours.attrs) == {"a": 1}
