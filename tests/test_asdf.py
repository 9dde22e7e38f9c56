"""ASDF interop: cuzarr arrays inside ASDF files, and ASDF files read as Zarr."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

asdf = pytest.importorskip("asdf")

import cuzarr  # noqa: E402
from cuzarr.errors import MetadataError  # noqa: E402
from cuzarr.integrations.asdf import (  # noqa: E402
    ASDF_ZARR_TAG,
    CUZARR_TAG,
    embed,
    reference,
)
from cuzarr.storage import AsdfStore, ReferenceStore  # noqa: E402
from cuzarr.storage.asdf import read_asdf_blocks  # noqa: E402

DTYPES = ["<i4", ">i8", "<u2", "<f4", ">f8", "|b1", "<c16", "|i1"]


@pytest.fixture
def count_reads(monkeypatch):
    """Count (path, offset, length) of every local byte-range read the reference store makes."""
    calls: list[tuple[str, int | None, int | None]] = []
    orig = ReferenceStore._read_local

    def spy(path, offset, length):
        calls.append((path, offset, length))
        return orig(path, offset, length)

    monkeypatch.setattr(ReferenceStore, "_read_local", staticmethod(spy))
    return calls


def _tree_text(path) -> str:
    return open(path, "rb").read().split(b"\n...\n")[0].decode()


def _value(dtype, shape):
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return (np.arange(n) % 3 == 0).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (np.arange(n) + 1j * np.arange(n)[::-1]).astype(dtype).reshape(shape)
    return (np.arange(n) % 100).astype(dtype).reshape(shape)


# -- cuzarr arrays in ASDF files ---------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_embedded_roundtrip(tmp_path, dtype, zarr_format):
    value = _value(dtype, (9, 7))
    a = cuzarr.create_array(
        {},
        shape=value.shape,
        chunks=(4, 3),
        dtype=dtype,
        zarr_format=zarr_format,
        attributes={"units": "m", "n": [1, 2]},
    )
    a[:] = value
    path = tmp_path / "f.asdf"
    asdf.AsdfFile({"a": a, "meta": {"k": 1}}).write_to(path)
    assert CUZARR_TAG in _tree_text(path)
    # one block per stored chunk
    assert len(read_asdf_blocks(path)) == a.nchunks_initialized
    with asdf.open(path) as af:
        b = af["a"]
        assert isinstance(b, cuzarr.Array)
        assert b.zarr_format == zarr_format
        assert b.dtype == a.dtype
        assert dict(b.attrs) == {"units": "m", "n": [1, 2]}
        np.testing.assert_array_equal(b[:], value)
    # lazy and by byte range: still readable after the file is closed
    np.testing.assert_array_equal(b[1:5, 2], value[1:5, 2])


@pytest.mark.parametrize("compressors", [None, {"name": "gzip", "configuration": {"level": 5}}])
def test_embedded_compressions_and_missing_chunks(tmp_path, compressors):
    a = cuzarr.create_array({}, shape=(20,), chunks=(5,), dtype="f4", compressors=compressors)
    a[5:10] = 3.0  # chunks 0, 2, 3 stay empty (fill value)
    asdf.AsdfFile({"a": embed(a)}).write_to(tmp_path / "f.asdf")
    assert len(read_asdf_blocks(tmp_path / "f.asdf")) == 1
    with asdf.open(tmp_path / "f.asdf") as af:
        np.testing.assert_array_equal(af["a"][:], a[:])


def test_embedded_partial_read_touches_only_needed_blocks(tmp_path, count_reads):
    value = np.arange(100 * 10, dtype="i4").reshape(100, 10)
    a = cuzarr.create_array({}, shape=value.shape, chunks=(10, 10), dtype="i4")
    a[:] = value
    asdf.AsdfFile({"a": a}).write_to(tmp_path / "f.asdf")
    blocks = read_asdf_blocks(tmp_path / "f.asdf")
    with asdf.open(tmp_path / "f.asdf") as af:
        b = af["a"]
        count_reads.clear()
        np.testing.assert_array_equal(b[25:35], value[25:35])
    offsets = sorted(off for _, off, _ in count_reads)
    assert offsets == [blocks[2].data_offset, blocks[3].data_offset]


def test_sharded_and_rectilinear_embedded(tmp_path):
    s = cuzarr.create_array({}, shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="u2")
    s[:] = np.arange(256).reshape(16, 16)
    r = cuzarr.create_array({}, shape=(10,), chunks=[[1, 2, 7]], dtype="i8")
    r[:] = np.arange(10)
    asdf.AsdfFile({"s": s, "r": r}).write_to(tmp_path / "f.asdf")
    with asdf.open(tmp_path / "f.asdf") as af:
        np.testing.assert_array_equal(af["s"][3:13, 5], s[3:13, 5])
        np.testing.assert_array_equal(af["r"][:], r[:])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_reference_roundtrip(tmp_path, zarr_format):
    store = tmp_path / "data.zarr"
    a = cuzarr.create_array(
        str(store), name="g/x", shape=(6, 4), chunks=(2, 2), dtype=">i4", zarr_format=zarr_format
    )
    a[:] = np.arange(24).reshape(6, 4)
    path = tmp_path / "f.asdf"
    asdf.AsdfFile({"x": a}).write_to(path)  # auto: a store with a path is referenced
    text = _tree_text(path)
    assert str(store) in text and "g/x" in text
    assert read_asdf_blocks(path) == []
    a[0, 0] = 99  # the file holds a reference: later writes show through
    with asdf.open(path) as af:
        b = af["x"]
        assert b.path == "g/x" and b.read_only
        np.testing.assert_array_equal(b[:], a[:])


def test_reference_relative_url(tmp_path):
    a = cuzarr.create_array(str(tmp_path / "d.zarr"), shape=(3,), chunks=(2,), dtype="u1")
    a[:] = [1, 2, 3]
    asdf.AsdfFile({"x": reference(a, "d.zarr")}).write_to(tmp_path / "f.asdf")
    assert "store: d.zarr" in _tree_text(tmp_path / "f.asdf")
    with asdf.open(tmp_path / "f.asdf") as af:
        np.testing.assert_array_equal(af["x"][:], [1, 2, 3])


def test_embed_a_local_array(tmp_path):
    a = cuzarr.create_array(str(tmp_path / "d.zarr"), shape=(5,), chunks=(2,), dtype="u1")
    a[:] = np.arange(5)
    asdf.AsdfFile({"x": embed(a)}).write_to(tmp_path / "f.asdf")
    import shutil

    shutil.rmtree(tmp_path / "d.zarr")
    with asdf.open(tmp_path / "f.asdf") as af:
        np.testing.assert_array_equal(af["x"][:], np.arange(5))


def test_rewrite(tmp_path):
    a = cuzarr.create_array({}, shape=(12,), chunks=(5,), dtype="i2", compressors=None)
    a[:] = np.arange(12)
    asdf.AsdfFile({"a": a}).write_to(tmp_path / "f.asdf")
    with asdf.open(tmp_path / "f.asdf") as af:
        af.write_to(tmp_path / "g.asdf")  # chunks copied from the first file's blocks
    with asdf.open(tmp_path / "g.asdf") as af:
        np.testing.assert_array_equal(af["a"][:], np.arange(12))


def test_embedded_from_file_object(tmp_path):
    import io

    a = cuzarr.create_array({}, shape=(7,), chunks=(3,), dtype="f8")
    a[:] = np.linspace(0, 1, 7)
    buf = io.BytesIO()
    asdf.AsdfFile({"a": a}).write_to(buf)
    buf.seek(0)
    with asdf.open(buf) as af:
        # no file path: chunks are read through asdf's block callbacks
        assert type(af["a"].store).__name__ == "_BlockStore"
        np.testing.assert_array_equal(af["a"][:], a[:])


# -- asdf-zarr's tag ------------------------------------------------------------------
def test_asdf_zarr_tag_embedded(tmp_path):
    a = cuzarr.create_array(
        {}, shape=(7, 5), chunks=(3, 2), dtype="<i4", zarr_format=2, attributes={"a": 1}
    )
    a[:3] = 1  # only the first chunk row is stored
    path = tmp_path / "f.asdf"
    asdf.AsdfFile({"z": embed(a, tag="asdf-zarr")}).write_to(path)
    text = _tree_text(path)
    assert ASDF_ZARR_TAG in text and ".zarray" in text and "chunk_block_map" in text
    # the layout asdf-zarr reads: an int32 block shaped like the chunk grid
    with asdf.open(path, _force_raw_types=True) as af:
        node = af.tree["z"]
        zarray = node[".zarray"]
        cb = af._blocks.blocks[node["chunk_block_map"]].data
        block_map = np.frombuffer(bytes(cb), dtype="int32").reshape(3, 3)
        assert zarray["chunks"] == [3, 2]
        assert (block_map[0] >= 0).all() and (block_map[1:] == -1).all()
    with asdf.open(path) as af:
        np.testing.assert_array_equal(af["z"][:], a[:])
        assert dict(af["z"].attrs) == {"a": 1}


def test_asdf_zarr_tag_reference_and_kvstore(tmp_path):
    a = cuzarr.create_array(
        str(tmp_path / "d.zarr"), shape=(4,), chunks=(2,), dtype="u1", zarr_format=2
    )
    a[:] = [4, 3, 2, 1]
    asdf.AsdfFile({"z": reference(a, tag="asdf-zarr")}).write_to(tmp_path / "f.asdf")
    assert "DirectoryStore" in _tree_text(tmp_path / "f.asdf")
    with asdf.open(tmp_path / "f.asdf") as af:
        np.testing.assert_array_equal(af["z"][:], [4, 3, 2, 1])
    # A KVStore node, as asdf-zarr writes for in-memory zarr 2 stores it does not convert.
    zarray = {
        "zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<i2", "fill_value": 0,
        "order": "C", "filters": None, "compressor": None,
    }  # fmt: skip
    text = (
        "#ASDF 1.0.0\n#ASDF_STANDARD 1.5.0\n%YAML 1.1\n%TAG ! tag:stsci.edu:asdf/\n"
        "--- !core/asdf-1.1.0\n"
        f"z: !<{ASDF_ZARR_TAG}>\n"
        "  store:\n    type_string: KVStore\n    map:\n"
        f"      .zarray: '{json.dumps(zarray)}'\n"
        "      '0': !!binary AQACAAMA\n...\n"
    )
    (tmp_path / "kv.asdf").write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with asdf.open(tmp_path / "kv.asdf") as af:
            np.testing.assert_array_equal(af["z"][:], [1, 2, 3])


def test_asdf_zarr_tag_refuses_v3():
    a = cuzarr.create_array({}, shape=(2,), dtype="u1")
    with pytest.raises(ValueError, match="v2"):
        embed(a, tag="asdf-zarr")


# -- ASDF files as Zarr stores ----------------------------------------------------------
@pytest.mark.parametrize("compression", [None, "zlib", "bzp2"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_store_plain_asdf_file(tmp_path, compression, zarr_format):
    tree = {
        "x": np.arange(50, dtype="i8"),
        "g": {
            "y": np.linspace(0, 1, 24, dtype=">f8").reshape(4, 6),
            "b": np.array([True, False, True]),
            "units": "K",
            "inline": np.arange(4, dtype="i2"),
        },
        "meta": {"exposure": 2.5, "flags": [1, 2], "when": {"nan": float("nan")}},
        "scalar": np.array(7, dtype="<u4"),
        "c": np.arange(6, dtype=">c8").reshape(2, 3) * (1 + 2j),
    }
    af = asdf.AsdfFile(tree)
    af.set_array_storage(af["g"]["inline"], "inline")
    path = tmp_path / "f.asdf"
    af.write_to(path, all_array_compression=compression)
    store = AsdfStore(path, zarr_format=zarr_format)
    root = cuzarr.open_group(store, mode="r", zarr_format=zarr_format)
    assert sorted(root.keys()) == ["c", "g", "scalar", "x"]
    assert root.attrs["meta"] == {"exposure": 2.5, "flags": [1, 2]}
    with asdf.open(path) as ref:
        for name in ["x", "g/y", "g/b", "g/inline", "scalar", "c"]:
            a = cuzarr.open_array(store, path=name, mode="r", zarr_format=zarr_format)
            expected = ref[name] if "/" not in name else ref["g"][name.split("/")[1]]
            np.testing.assert_array_equal(a[...], np.asarray(expected))
            assert (
                a.dtype == np.asarray(expected).dtype.newbyteorder("=")
                or a.dtype == np.asarray(expected).dtype
            )
    y = cuzarr.open_array(store, path="g/y", mode="r")
    assert dict(y.attrs) == {"units": "K"}


def test_store_lz4_is_refused(tmp_path):
    pytest.importorskip("lz4")
    asdf.AsdfFile({"x": np.arange(10), "y": np.ones(3)}).write_to(
        tmp_path / "f.asdf", all_array_compression="lz4"
    )
    with pytest.raises(MetadataError, match="lz4"):
        AsdfStore(tmp_path / "f.asdf")
    store = AsdfStore(tmp_path / "f.asdf", on_unsupported="skip")
    assert sorted(store.skipped) == ["x", "y"]


def test_store_row_chunks_read_only_needed_ranges(tmp_path, count_reads):
    value = np.arange(100 * 8, dtype="<f4").reshape(100, 8)
    asdf.AsdfFile({"x": value}).write_to(tmp_path / "f.asdf")
    (block,) = read_asdf_blocks(tmp_path / "f.asdf")
    for zf in (2, 3):
        store = AsdfStore(tmp_path / "f.asdf", chunk_rows=30, zarr_format=zf)
        a = cuzarr.open_array(store, path="x", mode="r")
        np.testing.assert_array_equal(a[:], value)
        count_reads.clear()
        np.testing.assert_array_equal(a[35:50], value[35:50])
        assert [(off, n) for _, off, n in count_reads] == [(block.data_offset + 30 * 32, 30 * 32)]
        count_reads.clear()
        np.testing.assert_array_equal(a[95:], value[95:])  # the short last chunk
        assert [(off, n) for _, off, n in count_reads] == [(block.data_offset + 90 * 32, 10 * 32)]


def test_store_views_offsets_fortran_streamed_exploded(tmp_path):
    base = np.arange(40, dtype="i4").reshape(8, 5)
    tree = {
        "base": base,
        "view": base[2:6],
        "fort": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    }
    asdf.AsdfFile(tree).write_to(tmp_path / "v.asdf")
    store = AsdfStore(tmp_path / "v.asdf")
    with asdf.open(tmp_path / "v.asdf") as ref:
        for name in tree:
            got = cuzarr.open_array(store, path=name, mode="r")[:]
            np.testing.assert_array_equal(got, np.asarray(ref[name]))
    # streamed block: rows appended after the tree
    af = asdf.AsdfFile({"s": asdf.tags.core.Stream([3], np.float64)})
    with open(tmp_path / "s.asdf", "wb") as f:
        af.write_to(f)
        for i in range(4):
            f.write(np.full(3, i, np.float64).tobytes())
    s = cuzarr.open_array(AsdfStore(tmp_path / "s.asdf"), path="s", mode="r")
    assert s.shape == (4, 3)
    np.testing.assert_array_equal(s[:, 0], [0, 1, 2, 3])
    # exploded: each block in its own file next to the tree
    asdf.AsdfFile({"e": np.arange(6, dtype="u2")}).write_to(
        tmp_path / "ex.asdf", all_array_storage="external"
    )
    e = cuzarr.open_array(AsdfStore(tmp_path / "ex.asdf"), path="e", mode="r")
    np.testing.assert_array_equal(e[:], np.arange(6))


def test_store_with_views_and_dask(tmp_path):
    da = pytest.importorskip("dask.array")
    value = np.arange(60, dtype="i2").reshape(12, 5)
    asdf.AsdfFile({"x": value}).write_to(tmp_path / "f.asdf")
    a = cuzarr.open_array(AsdfStore(tmp_path / "f.asdf", chunk_rows=4), path="x", mode="r")
    np.testing.assert_array_equal(a.lazy[2:9:2, 1].read(), value[2:9:2, 1])
    d = da.from_array(a, chunks=(4, 5))
    assert int(d.sum().compute()) == int(value.sum())


def test_store_is_read_only_and_references(tmp_path):
    asdf.AsdfFile({"x": np.arange(3)}).write_to(tmp_path / "f.asdf")
    store = AsdfStore(tmp_path / "f.asdf")
    assert store.read_only
    with pytest.raises(PermissionError):
        a = cuzarr.open_array(store, path="x", mode="r")
        a[0] = 1
    refs = store.to_references()
    again = cuzarr.open_array(ReferenceStore(json.loads(json.dumps(refs))), path="x", mode="r")
    np.testing.assert_array_equal(again[:], [0, 1, 2])


def test_store_unsupported_dtype(tmp_path):
    rec = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    asdf.AsdfFile({"r": rec}).write_to(tmp_path / "f.asdf")
    with pytest.raises(MetadataError, match="data type"):
        AsdfStore(tmp_path / "f.asdf")


def test_store_strings_v2(tmp_path):
    asdf.AsdfFile({"s": np.array([b"ab", b"cde"]), "u": np.array(["x", "yz"])}).write_to(
        tmp_path / "f.asdf"
    )
    store = AsdfStore(tmp_path / "f.asdf", zarr_format=2)
    np.testing.assert_array_equal(
        cuzarr.open_array(store, path="s", mode="r")[:], np.array([b"ab", b"cde"])
    )
    np.testing.assert_array_equal(
        cuzarr.open_array(store, path="u", mode="r")[:], np.array(["x", "yz"])
    )


def test_asdf_extension_registered():
    exts = [e.extension_uri for e in asdf.get_config().extensions]
    assert "asdf://cuzarr.dev/cuzarr/extensions/cuzarr-1.0.0" in exts
    assert asdf.get_config().resource_manager["asdf://cuzarr.dev/cuzarr/schemas/zarr_array-1.0.0"]


def test_embedded_readable_after_close_with_space_in_file_name(tmp_path):
    """asdf hands out a percent-encoded file URL ('my%20obs.asdf')."""
    a = cuzarr.create_array({}, shape=(5,), chunks=(2,), dtype="i2")
    a[:] = np.arange(5)
    b = cuzarr.create_array(str(tmp_path / "d.zarr"), shape=(3,), chunks=(2,), dtype="u1")
    b[:] = [1, 2, 3]
    path = tmp_path / "my obs.asdf"
    asdf.AsdfFile({"a": a, "r": reference(b, "d.zarr")}).write_to(path)
    with asdf.open(path) as af:
        x, r = af["a"], af["r"]
    np.testing.assert_array_equal(x[:], np.arange(5))
    np.testing.assert_array_equal(r[:], [1, 2, 3])
