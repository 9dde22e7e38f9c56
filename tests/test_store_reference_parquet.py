"""ReferenceStore over Parquet ("lazy") kerchunk references, as fsspec's
LazyReferenceMapper and kerchunk's refs_to_dataframe write them, with fsspec's
ReferenceFileSystem + zarr-python and numpy as the oracles: several variables,
several record files per variable, missing chunks and records, inline chunks,
whole-file references, 0-d and one-chunk arrays, nested groups, HDF5 files
translated by kerchunk, xarray, targets and references over HTTP and S3, and the
errors for broken reference directories."""

from __future__ import annotations

import asyncio
import json
import pickle
import sys

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import MetadataError
from cuzarr.runtime.sync import sync
from cuzarr.storage import RangeByteRequest, ReferenceStore

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("fastparquet")
pytest.importorskip("kerchunk")

from fsspec.implementations.reference import (  # noqa: E402
    LazyReferenceMapper,
    ReferenceFileSystem,
)
from kerchunk.df import refs_to_dataframe  # noqa: E402

from _reference_helpers import zarray  # noqa: E402
from test_store_reference_spec import _RangeHandler  # noqa: E402

# fsspec writes (and reads, as the oracle) through pandas' fastparquet engine,
# which pandas 3 deprecates; cuzarr calls fastparquet itself
pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

# name -> (shape, chunks, dtype, compressor, fill value)
_SPECS = {
    "t": ((20,), (3,), "<i2", {"id": "zlib", "level": 1}, 0),
    "grid": ((7, 9), (2, 4), "<f4", None, -1.0),
    "big": ((80,), (2,), "|u1", None, 7),  # one target only: a categorical path column
    "scalar": ((), (), "<f8", None, 0.0),
    "one": ((5,), (5,), ">i4", None, 0),
    "grp/sub/x": ((4, 4), (2, 2), "<i8", {"id": "zstd", "level": 1}, 0),
    "empty": ((6,), (2,), "<i4", None, 3),  # no chunk at all: no record file
}


def _fate(name, k):
    if name == "empty" or k % 5 == 1:
        return "missing"
    if name == "big":
        return "blob"
    if k % 5 == 3:
        return "inline"
    if k % 7 == 4:
        return "whole"
    return "blob"


def _build(where, url_of):
    """The arrays of _SPECS as kerchunk references (v0) to a packed blob and small
    whole files in ``where``; ``url_of(name)`` is how a reference names the file
    ``name`` of ``where``. Returns (refs, expected arrays, keys that exist)."""
    import numcodecs

    rng = np.random.default_rng(7)
    blob = bytearray(b"HEADER--" * 3)
    (where / "whole").mkdir(exist_ok=True)
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        ".zattrs": json.dumps({"title": "parquet"}),
        "grp/.zgroup": json.dumps({"zarr_format": 2}),
        "grp/sub/.zgroup": json.dumps({"zarr_format": 2}),
        "grp/sub/.zattrs": json.dumps({"level": 2}),
    }
    expected, present = {}, set(refs)
    for name, (shape, chunks, dtype, comp, fill) in _SPECS.items():
        codec = numcodecs.get_codec(comp) if comp else None
        refs[f"{name}/.zarray"] = json.dumps(
            {
                "zarr_format": 2,
                "shape": list(shape),
                "chunks": list(chunks),
                "dtype": dtype,
                "compressor": comp,
                "fill_value": fill,
                "filters": None,
                "order": "C",
            }
        )
        refs[f"{name}/.zattrs"] = json.dumps({"units": name})
        present |= {f"{name}/.zarray", f"{name}/.zattrs"}
        data = rng.integers(0, 100, shape).astype(dtype)
        want = data.copy()
        grid = [-(-s // c) for s, c in zip(shape, chunks)]
        for k, idx in enumerate(np.ndindex(*grid)):
            sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
            key = f"{name}/" + (".".join(map(str, idx)) or "0")
            fate = _fate(name, k)
            if fate == "missing":
                want[sel] = fill
                continue
            block = np.zeros(chunks, dtype)
            part = data[sel]
            block[tuple(slice(0, n) for n in part.shape)] = part
            enc = bytes(codec.encode(block.tobytes())) if codec else block.tobytes()
            present.add(key)
            if fate == "inline":
                refs[key] = enc
            elif fate == "whole":
                fname = f"whole/{name.replace('/', '_')}.{k}.bin"
                (where / fname).write_bytes(enc)
                refs[key] = [url_of(fname)]
            else:
                refs[key] = [url_of("blob.bin"), len(blob), len(enc)]
                blob += enc + b"\xee" * 3
        expected[name] = want
    (where / "blob.bin").write_bytes(bytes(blob))
    return refs, expected, present


def _write(refs, root, record_size, writer):
    if writer == "kerchunk":
        refs_to_dataframe(refs, str(root), record_size=record_size)
    else:
        out = LazyReferenceMapper.create(str(root), record_size=record_size)
        for key in sorted(refs, key=lambda k: (".z" not in k, k)):  # metadata first
            out[key] = refs[key]
        out.flush()


class _OracleReferences(ReferenceFileSystem):
    """fsspec's ReferenceFileSystem, but a missing row reads as a missing key.

    pandas 3 gives NaN, not None, for a null string cell (always with pyarrow
    installed, and for fastparquet's categorical columns); fsspec's ``cat`` skips
    it, but ``_cat_file``, which zarr-python calls, takes the NaN for a URL and
    raises TypeError."""

    async def _cat_file(self, path, start=None, end=None, **kwargs):
        url, _, _ = self._cat_common(path, start=start, end=end)
        if not isinstance(url, (bytes, str)):
            raise FileNotFoundError(path)
        return await super()._cat_file(path, start=start, end=end, **kwargs)


def _oracle_array(fo, name, **kw):
    # remote_protocol given: fsspec would otherwise scan every reference for one
    fs = _OracleReferences(fo=str(fo), asynchronous=True, **kw)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    return zarr.open_array(store, path=name, mode="r", zarr_format=2)


def _check(group, expected, oracle=None):
    assert sorted(group.array_keys()) == sorted(n for n in expected if "/" not in n)
    assert dict(group.attrs) == {"title": "parquet"}
    assert dict(group["grp/sub"].attrs) == {"level": 2}
    for name, want in expected.items():
        a = group[name]
        assert (a.shape, a.dtype) == (want.shape, want.dtype), name
        np.testing.assert_array_equal(a[...], want)
        sel = tuple(slice(1, None, 2) for _ in want.shape)
        np.testing.assert_array_equal(a[sel], want[sel])
        assert a.attrs["units"] == name
        if oracle is not None:
            z = oracle(name)
            assert z.fill_value == a.fill_value, name
            np.testing.assert_array_equal(a[...], z[...])


async def _collect(it):
    return [k async for k in it]


@pytest.mark.parametrize("writer", ["kerchunk", "lazy"])
@pytest.mark.parametrize("record_size", [3, 50])
def test_parquet_references_match_fsspec_and_numpy(tmp_path, writer, record_size):
    refs, expected, present = _build(tmp_path, lambda f: str(tmp_path / f))
    root = tmp_path / "refs.parq"
    _write(refs, root, record_size, writer)
    if record_size == 3:
        # several record files per variable; none for a record without references
        # (chunk 6 of "t" is missing) nor for a variable without chunks
        assert (root / "t" / "refs.1.parq").exists() and not (root / "t" / "refs.2.parq").exists()
        assert not (root / "empty").exists()
    else:  # the writer's categorical path column, with NaN for rows without one
        import fastparquet

        df = fastparquet.ParquetFile(str(root / "big" / "refs.0.parq")).to_pandas()
        assert df["path"].dtype == "category"

    def oracle(name):
        return _oracle_array(root, name, remote_protocol="file")

    store = ReferenceStore(str(root))
    _check(cuzarr.open_group(store, mode="r"), expected, oracle)
    # members found by listing, not from the .zmetadata fsspec serves
    _check(cuzarr.open_group(store, mode="r", use_consolidated=False), expected)
    for fo in (f"reference://{root}", f"reference://{root}/", f"reference://file://{root}"):
        _check(cuzarr.open_group(fo, mode="r"), expected)
    g = cuzarr.open_group("reference://", storage_options={"fo": str(root)}, mode="r")
    _check(g, expected)
    a = cuzarr.open_array(f"reference://{root}", path="grid", mode="r")
    assert a.nchunks_initialized == sum(k.startswith("grid/") and ".z" not in k for k in present)

    # listing: the keys that exist (and .zmetadata, as fsspec serves it)
    assert sorted(sync(_collect(store.list()))) == sorted(present | {".zmetadata"})
    assert sorted(sync(_collect(store.list_prefix("grp/")))) == sorted(
        k for k in present if k.startswith("grp/")
    )
    assert sorted(sync(_collect(store.list_dir("")))) == sorted(
        {".zgroup", ".zattrs", ".zmetadata", "grp", *(n for n in _SPECS if "/" not in n)}
    )
    assert sorted(sync(_collect(store.list_dir("grp/sub/x/")))) == sorted(
        k.rsplit("/", 1)[1] for k in present if k.startswith("grp/sub/x/")
    )
    assert sorted(sync(_collect(store.list_dir("empty")))) == [".zarray", ".zattrs"]

    # the store interface: values, ranges inside references, absent keys
    fs = fsspec.filesystem("reference", fo=str(root), remote_protocol="file")
    chunk_keys = sorted(k for k in present if ".z" not in k)
    ours = sync(store.get_many(chunk_keys))
    assert ours == [fs.cat_file(k) for k in chunk_keys]
    for key, value in zip(chunk_keys, ours):
        assert sync(store.get(key, byte_range=RangeByteRequest(1, 3))) == value[1:3]
    absent = ["t/1", "t/7", "t/01", "t/0.0", "grid/4.0", "grid/0", "empty/0", "nope/0", "x"]
    assert sync(store.get_many(absent)) == [None] * len(absent)
    assert not any(sync(store.exists(k)) for k in absent)
    assert sync(store.exists("t/0")) and sync(store.exists("grp/sub/.zattrs"))
    assert json.loads(sync(store.get("t/.zarray")))["chunks"] == [3]


def test_relative_paths_resolve_as_fsspec_resolves_them(tmp_path, monkeypatch):
    """fsspec resolves a relative path against the working directory; cuzarr, as
    for a JSON reference file, against the directory holding the references: the
    same file when references and targets share a directory."""
    d = tmp_path / "d"
    d.mkdir()
    refs, expected, _ = _build(d, lambda f: f)
    _write(refs, d / "refs.parq", 4, "kerchunk")
    monkeypatch.chdir(d)
    for name in ("t", "grid", "scalar"):
        np.testing.assert_array_equal(
            _oracle_array("refs.parq", name, remote_protocol="file")[...], expected[name]
        )
    _check(cuzarr.open_group("reference://refs.parq", mode="r"), expected)
    monkeypatch.chdir(tmp_path)  # elsewhere: still the directory of the references
    _check(cuzarr.open_group(ReferenceStore(str(d / "refs.parq")), mode="r"), expected)


@pytest.mark.parametrize("inline", [0, 300])
def test_kerchunk_hdf5_parquet_references_match_fsspec(tmp_path, inline):
    """An HDF5 file translated by kerchunk, then written as Parquet references:
    reads as the JSON references do, and as fsspec reads the Parquet ones."""
    import h5py
    import kerchunk.hdf as hdf

    rng = np.random.default_rng(0)
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "t"
        d = rng.integers(0, 100, (13, 7)).astype("i2")
        f.create_dataset("chunked", data=d, chunks=(5, 3))
        f.create_dataset("gz", data=d.astype("f8"), chunks=(4, 4), compression="gzip", shuffle=True)
        f.create_dataset("contig", data=d)
        f.create_dataset("fill", shape=(10,), dtype="f4", chunks=(3,), fillvalue=-1.5)
        f.create_group("grp/sub").create_dataset(
            "x", data=np.arange(100.0).reshape(10, 10), chunks=(3, 4)
        )
        f.create_dataset("scalar", data=3.5)
    refs = hdf.SingleHdf5ToZarr(str(path), inline_threshold=inline).translate()
    root = tmp_path / "refs.parq"
    refs_to_dataframe(refs, str(root), record_size=5)
    ours = cuzarr.open_group(f"reference://{root}", mode="r")
    theirs_json = cuzarr.open_group(ReferenceStore(refs), mode="r")
    names = ["chunked", "gz", "contig", "fill", "grp/sub/x", "scalar"]
    for name in names:
        a = ours[name]
        np.testing.assert_array_equal(a[...], theirs_json[name][...])
        np.testing.assert_array_equal(
            a[...], _oracle_array(root, name, remote_protocol="file")[...]
        )
        assert dict(a.attrs) == dict(theirs_json[name].attrs)
    np.testing.assert_array_equal(ours["fill"][...], np.full(10, -1.5, "f4"))  # no chunks written
    assert ours["scalar"][...] == 3.5
    assert dict(ours.attrs) == {"title": "t"}


def test_xarray_opens_parquet_references(tmp_path):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset(
        {
            "temp": (("time", "x"), np.arange(60.0, dtype="f4").reshape(6, 10), {"units": "K"}),
            "flag": (("x",), np.arange(10, dtype="i1")),
        },
        coords={"time": np.arange(6), "x": np.linspace(0, 1, 10)},
        attrs={"title": "xr"},
    )
    src = tmp_path / "src.zarr"
    ds.to_zarr(
        src,
        zarr_format=2,
        consolidated=False,
        encoding={"temp": {"chunks": (2, 4)}, "flag": {"chunks": (3,)}},
    )
    refs = {}
    for p in sorted(src.rglob("*")):
        if p.is_file():
            key = p.relative_to(src).as_posix()
            raw = p.read_bytes()
            refs[key] = raw.decode() if "/.z" in f"/{key}" else [str(p), 0, len(raw)]
    root = tmp_path / "refs.parq"
    refs_to_dataframe(refs, str(root), record_size=2)
    for obj in (f"reference://{root}", ReferenceStore(str(root))):
        got = xr.open_dataset(obj, engine="cuzarr")
        xr.testing.assert_identical(got.load(), ds)


@pytest.fixture
def counted_http(tmp_path):
    """A directory served over HTTP (with range requests) that records the paths
    of the requests it answers."""
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    root.mkdir()

    class Counted(_RangeHandler):
        seen: list = []

        def do_GET(self):
            Counted.seen.append(self.path)
            super().do_GET()

        def do_HEAD(self):
            Counted.seen.append(self.path)
            super().do_HEAD()

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Counted, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}", Counted.seen
    finally:
        server.shutdown()
        server.server_close()


def test_http_references_are_read_lazily_once_per_record(counted_http):
    root, base, seen = counted_http
    refs, expected, present = _build(root, lambda f: f"{base}/{f}")
    _write(refs, root / "refs.parq", 3, "kerchunk")
    _write(refs, root / "refs", 3, "lazy")  # no suffix: found by its .zmetadata

    def records(name):
        return sorted(p for p in seen if p.startswith(f"/refs.parq/{name}/refs."))

    store = ReferenceStore(f"{base}/refs.parq")
    assert not [p for p in seen if ".parq/" in p.split("refs.parq", 1)[-1]]  # none read yet
    a = cuzarr.open_array(store, path="t", mode="r")
    assert a[4] == expected["t"][4]
    assert records("t") == ["/refs.parq/t/refs.0.parq"]  # only the record of chunk 1
    np.testing.assert_array_equal(a[...], expected["t"])
    np.testing.assert_array_equal(a[...], expected["t"])
    assert records("t") == [f"/refs.parq/t/refs.{i}.parq" for i in range(3)]  # each once

    # a batch of lookups, and concurrent ones: one request per record file
    seen.clear()
    store = ReferenceStore(f"{base}/refs.parq")
    keys = [f"grid/{i}.{j}" for i in range(4) for j in range(3)]
    values = sync(store.get_many(keys))
    assert records("grid") == [f"/refs.parq/grid/refs.{i}.parq" for i in range(4)]
    seen.clear()
    store = ReferenceStore(f"{base}/refs.parq")

    async def concurrently():
        return await asyncio.gather(*(store.get(k) for k in keys))

    assert sync(concurrently()) == values
    assert records("grid") == [f"/refs.parq/grid/refs.{i}.parq" for i in range(4)]

    # a bounded cache: one record kept, so a second pass reads them again
    seen.clear()
    small = ReferenceStore(f"{base}/refs.parq", cache_size=1)
    a = cuzarr.open_array(small, path="grid", mode="r")
    np.testing.assert_array_equal(a[...], expected["grid"])
    np.testing.assert_array_equal(a[...], expected["grid"])
    # (the record read last may still be there for the second pass)
    assert 4 < len(records("grid")) <= 8 and len(small._lazy._cache) == 1

    for fo in (f"reference://{base}/refs.parq", f"reference://{base}/refs"):
        _check(cuzarr.open_group(fo, mode="r"), expected)
    for name in ("t", "grid", "grp/sub/x"):
        z = _oracle_array(
            f"{base}/refs.parq", name, remote_protocol="http", remote_options={"asynchronous": True}
        )
        np.testing.assert_array_equal(z[...], expected[name])
    # a listing reads each record of the listed array once
    seen.clear()
    listed = sync(_collect(ReferenceStore(f"{base}/refs.parq").list_dir("grid")))
    assert sorted(listed) == sorted(k[5:] for k in present if k.startswith("grid/"))
    assert records("grid") == [f"/refs.parq/grid/refs.{i}.parq" for i in range(4)]
    assert not records("t")


def test_s3_references_and_targets(tmp_path):
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from _moto_helpers import moto_s3_server

    bucket = "cuzarr-test-store-reference-parquet"
    with moto_s3_server() as port:
        opts = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "x", "secret": "x"}
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **opts)
        fs.mkdir(bucket)
        local = tmp_path / "up"
        local.mkdir()
        refs, expected, _ = _build(local, lambda f: f"s3://{bucket}/{f}")
        _write(refs, local / "refs.parq", 4, "kerchunk")
        fs.put(str(local) + "/", f"{bucket}/", recursive=True)
        store = ReferenceStore(f"s3://{bucket}/refs.parq", target_options=opts, remote_options=opts)
        _check(cuzarr.open_group(store, mode="r"), expected)
        g = cuzarr.open_group(
            f"reference://s3://{bucket}/refs.parq",
            storage_options={"target_options": opts, "remote_options": opts},
            mode="r",
        )
        np.testing.assert_array_equal(g["grp/sub/x"][...], expected["grp/sub/x"])
        # a corrupt record file there: the key is named
        fs.pipe(f"{bucket}/refs.parq/t/refs.1.parq", b"not parquet")
        a = cuzarr.open_array(
            ReferenceStore(f"s3://{bucket}/refs.parq", target_options=opts, remote_options=opts),
            path="t",
            mode="r",
        )
        np.testing.assert_array_equal(a[:12], expected["t"][:12])
        with pytest.raises(MetadataError, match=r"key 't/4'.*refs\.1\.parq"):
            a[...]


def test_broken_record_files_name_the_key(tmp_path):
    refs, expected, _ = _build(tmp_path, lambda f: str(tmp_path / f))
    root = tmp_path / "refs.parq"
    _write(refs, root, 3, "kerchunk")
    store = ReferenceStore(str(root))
    (root / "t" / "refs.1.parq").write_bytes(b"PAR1 this is not parquet PAR1")
    a = cuzarr.open_array(store, path="t", mode="r")
    np.testing.assert_array_equal(a[:9], expected["t"][:9])  # record 0 only: read lazily
    with pytest.raises(MetadataError, match=r"key 't/3'.*refs\.1\.parq.*unreadable"):
        a[...]
    with pytest.raises(MetadataError, match=r"key 't/4'.*refs\.1\.parq"):
        sync(store.get("t/4"))
    with pytest.raises(MetadataError, match=r"refs\.1\.parq"):
        sync(_collect(store.list_prefix("t/")))
    # a record file that cannot be read at all
    (root / "grid" / "refs.2.parq").unlink()
    (root / "grid" / "refs.2.parq").mkdir()
    with pytest.raises(IsADirectoryError, match=r"key 'grid/2\.0'.*refs\.2\.parq"):
        sync(store.get("grid/2.0"))
    # a record file that is gone reads as a record without references, as in fsspec
    # (whose writer makes no file for those)
    (root / "t" / "refs.1.parq").unlink()
    store = ReferenceStore(str(root))
    fs = fsspec.filesystem("reference", fo=str(root), remote_protocol="file")
    assert sync(store.get("t/4")) is None and not fs.exists("t/4")
    want = expected["t"].copy()
    want[9:18] = 0
    np.testing.assert_array_equal(cuzarr.open_array(store, path="t", mode="r")[...], want)
    # a target that is gone, and a malformed row
    (tmp_path / "blob.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"key 't/0': reference target .*blob\.bin"):
        sync(store.get("t/0"))
    bad = tmp_path / "bad.parq"
    out = LazyReferenceMapper.create(str(bad), record_size=4)
    out["x/.zarray"] = zarray([8], [4])
    out["x/0"] = [str(tmp_path / "whole" / "t.0.bin"), -4, 16]
    out.flush()
    with pytest.raises(MetadataError, match=r"reference 'x/0': .*non-negative integers, got -4"):
        sync(ReferenceStore(str(bad)).get("x/0"))


def _zmeta(root, text):
    root.mkdir(exist_ok=True)
    (root / ".zmetadata").write_text(text)
    return str(root)


def test_malformed_zmetadata_raises_metadata_error(tmp_path):
    za = json.loads(zarray([8], [4]))
    cases = [
        ("{nope", r"\.zmetadata: not JSON"),
        ("[1, 2]", "'metadata' object"),
        (json.dumps({"record_size": 4}), "'metadata' object"),
        (json.dumps({"metadata": [], "record_size": 4}), "'metadata' object"),
        (json.dumps({"metadata": {}}), "'record_size' must be a positive integer, got None"),
        (json.dumps({"metadata": {}, "record_size": 0}), "positive integer, got 0"),
        (json.dumps({"metadata": {}, "record_size": True}), "positive integer, got True"),
        (
            json.dumps({"metadata": {"x/.zarray": [1]}, "record_size": 4}),
            r"reference 'x/\.zarray': must be a JSON object",
        ),
        (
            json.dumps({"metadata": {"x/.zarray": {**za, "shape": [8, 2]}}, "record_size": 4}),
            r"reference 'x/\.zarray': 'shape' and 'chunks'",
        ),
        (
            json.dumps({"metadata": {"x/.zarray": {**za, "chunks": [0]}}, "record_size": 4}),
            r"reference 'x/\.zarray': 'shape' and 'chunks'",
        ),
        (
            json.dumps(
                {"metadata": {"x/.zarray": {**za, "dimension_separator": "/"}}, "record_size": 4}
            ),
            r"reference 'x/\.zarray': dimension_separator '/'",
        ),
    ]
    for i, (text, message) in enumerate(cases):
        root = _zmeta(tmp_path / f"r{i}.parq", text)
        with pytest.raises(MetadataError, match=message):
            ReferenceStore(root)
        with pytest.raises(MetadataError, match=message):
            cuzarr.open_group(f"reference://{root}", mode="r")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MetadataError, match=r"no \.zmetadata"):
        ReferenceStore(str(tmp_path / "empty"))


def test_without_a_parquet_engine_the_extra_is_named(tmp_path, monkeypatch):
    root = _zmeta(tmp_path / "refs.parq", json.dumps({"metadata": {}, "record_size": 4}))
    assert sync(ReferenceStore(root).get(".zmetadata")) is not None
    # (cramjam: fastparquet's codecs, which cuzarr's own Parquet reader uses)
    for name in ("cramjam", "pyarrow"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails
    with pytest.raises(ImportError, match=r"cuzarr\[kerchunk\]"):
        ReferenceStore(root)


def test_pickled_store_reads_the_same(tmp_path):
    refs, expected, _ = _build(tmp_path, lambda f: str(tmp_path / f))
    root = tmp_path / "refs.parq"
    _write(refs, root, 3, "kerchunk")
    store = ReferenceStore(str(root))
    np.testing.assert_array_equal(cuzarr.open_array(store, path="t", mode="r")[...], expected["t"])
    again = pickle.loads(pickle.dumps(store))
    _check(cuzarr.open_group(again, mode="r"), expected)


def test_references_written_with_pyarrow(tmp_path):
    """fsspec's other writer: dictionary-encoded columns, other page layouts."""
    pytest.importorskip("pyarrow")
    refs, expected, present = _build(tmp_path, lambda f: str(tmp_path / f))
    root = tmp_path / "refs.parq"
    out = LazyReferenceMapper.create(str(root), record_size=4, engine="pyarrow")
    for key in sorted(refs, key=lambda k: (".z" not in k, k)):
        out[key] = refs[key]
    out.flush()
    store = ReferenceStore(str(root))
    _check(cuzarr.open_group(store, mode="r"), expected)
    assert sorted(sync(_collect(store.list()))) == sorted(present | {".zmetadata"})
    # and cuzarr's own reader (used where pyarrow is not installed)
    from cuzarr.storage import reference_parquet

    store._lazy = reference_parquet.ParquetReferences(str(root), None, 128)
    store._lazy._engine = "builtin"
    _check(cuzarr.open_group(store, mode="r"), expected)
