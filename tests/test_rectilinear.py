"""Variable-size chunks: the zarr-extensions ``rectilinear`` grid and ZEP0003 v2 form.

Interoperability with zarr-python 3.4 both ways (it gates the grid behind
``array.rectilinear_chunks``), metadata forms (ints, edge lists, run-length
pairs, edges past the shape), every indexing mode across irregular chunk
boundaries against numpy (hypothesis), resize/append, sharding with a
rectilinear grid of shards, and the v2 ``chunks: [[...], n]`` form.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuzarr
from _interop_helpers import DTYPES, assert_data_equal, make_data, zarrlike_dtype
from cuzarr.errors import MetadataError
from cuzarr.metadata.chunk_grid import (
    RectilinearChunkGrid,
    compress_rle,
    expand_rle,
    parse_chunk_grid,
)

CORE_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "M8[ns]",
    "m8[ms]",
    "U4",
    "vstr",
]


@pytest.fixture
def zflag():
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


def random_edges(rng, size: int) -> list[int]:
    """Random edge lengths covering ``size`` exactly, with some repeats (for RLE)."""
    edges: list[int] = []
    total = 0
    while total < max(size, 1):
        e = (
            int(rng.choice([1, 2, 3, 3, 3, 5, 7]))
            if rng.random() < 0.8
            else edges[-1]
            if edges
            else 2
        )
        e = min(e, max(size, 1) - total)
        edges.append(e)
        total += e
    return edges


def random_chunks(rng, shape):
    """Per dimension: an edge list, or (sometimes) a bare int."""
    return [
        int(rng.integers(1, max(2, s))) if rng.random() < 0.25 else random_edges(rng, s)
        for s in shape
    ]


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n == "zarr.json" or n.startswith(".cuzarr"):  # metadata, store locks
                continue
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


# ----------------------------------------------------------------- metadata forms


def test_parse_every_form():
    g = parse_chunk_grid(
        {
            "name": "rectilinear",
            "configuration": {
                "kind": "inline",
                "chunk_shapes": [4, [1, 2, 3], [[4, 2]], [[1, 3], 3]],
            },
        },
        4,
        (10, 6, 8, 6),
    )
    assert g.chunk_shapes == (4, (1, 2, 3), (4, 4), (1, 1, 1, 3))
    assert g.grid_shape((10, 6, 8, 6)) == (3, 3, 2, 4)
    assert g.stored_chunk_shape((2, 1, 0, 3)) == (4, 2, 4, 3)
    # edges past the shape: chunks starting outside the array are not in the grid
    assert g.grid_shape((10, 2, 3, 1)) == (3, 2, 1, 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "inline", "chunk_shapes": [[1, 2]]},  # does not cover 10
        {"kind": "file", "chunk_shapes": [[10]]},
        {"chunk_shapes": [[10]]},
        {"kind": "inline", "chunk_shapes": [[]]},
        {"kind": "inline", "chunk_shapes": [[[2, 0], 10]]},
        {"kind": "inline", "chunk_shapes": [[[2, 3, 4]]]},
        {"kind": "inline", "chunk_shapes": [[0, 10]]},
        {"kind": "inline", "chunk_shapes": [0]},
        {"kind": "inline", "chunk_shapes": [[10], 3]},
    ],
)
def test_parse_rejects(bad):
    with pytest.raises(MetadataError):
        parse_chunk_grid({"name": "rectilinear", "configuration": bad}, 1, (10,))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=30))
def test_rle_matches_zarr_python(edges):
    from zarr.core.common import compress_rle as z_compress
    from zarr.core.metadata.v3 import RectilinearChunkGridMetadata

    assert compress_rle(edges) == z_compress(edges)
    assert expand_rle(compress_rle(edges), 0) == tuple(edges)
    ours = RectilinearChunkGrid((tuple(edges), 3)).to_json()
    theirs = json.loads(
        json.dumps(RectilinearChunkGridMetadata(chunk_shapes=(tuple(edges), 3)).to_dict())
    )
    assert ours == theirs


def test_create_errors():
    with pytest.raises(ValueError, match="sum to"):
        cuzarr.create_array({}, shape=(10,), dtype="i4", chunks=[[1, 2]])
    with pytest.raises(ValueError):
        cuzarr.create_array({}, shape=(10,), dtype="i4", chunks=[[]])
    with pytest.raises(ValueError, match="multiples"):
        cuzarr.create_array({}, shape=(12,), dtype="i4", chunks=(4,), shards=[[8, 3, 1]])
    with pytest.raises(ValueError, match="regular"):
        cuzarr.create_array({}, shape=(12,), dtype="i4", chunks=[[4, 8]], shards=(12,))


def test_chunks_properties():
    a = cuzarr.create_array({}, shape=(10, 7), dtype="i4", chunks=[[1, 2, 2, 5], 5])
    assert a.chunks == ((1, 2, 2, 5), (5, 2))
    assert a.read_chunk_sizes == a.write_chunk_sizes == a.dask_chunks == a.chunks
    assert a.nchunks == 8 and a.cdata_shape == (4, 2)
    assert a.shards is None
    r = cuzarr.create_array({}, shape=(10, 7), dtype="i4", chunks=(4, 7))
    assert r.chunks == (4, 7)
    assert r.dask_chunks == ((4, 4, 2), (7,))
    s = cuzarr.create_array({}, shape=(10, 7), dtype="i4", chunks=(2, 7), shards=(4, 7))
    assert s.dask_chunks == ((2,) * 5, (7,)) and s.write_chunk_sizes == ((4, 4, 2), (7,))
    e = cuzarr.create_array({}, shape=(0, 3), dtype="i4", chunks=[[2], 3])
    assert e.dask_chunks == ((), (3,)) and e.nchunks == 0
    # *_like copies the grid
    z = cuzarr.zeros_like(a)
    assert z.chunks == a.chunks


# ----------------------------------------------------------------- interop


@pytest.mark.parametrize("key", CORE_DTYPES)
def test_cuzarr_writes_zarr_reads(tmp_path, zflag, key, rng):
    dt = DTYPES[key]
    shape = (int(rng.integers(1, 14)), int(rng.integers(1, 9)))
    chunks = random_chunks(rng, shape)
    data = make_data(dt, shape, rng)
    a = cuzarr.create_array(
        str(tmp_path / "c"), shape=shape, dtype=zarrlike_dtype(cuzarr, dt), chunks=chunks
    )
    a[...] = data
    z = zarr.create_array(
        str(tmp_path / "z"), shape=shape, dtype=zarrlike_dtype(zarr, dt), chunks=chunks
    )
    # same metadata document as zarr-python writes
    mine = json.loads((tmp_path / "c" / "zarr.json").read_text())
    theirs = json.loads((tmp_path / "z" / "zarr.json").read_text())
    assert mine["chunk_grid"] == theirs["chunk_grid"]
    z[...] = data
    assert _files(tmp_path / "c") == _files(tmp_path / "z")
    assert_data_equal(zarr.open_array(str(tmp_path / "c"), mode="r")[...], data, dt)


@pytest.mark.parametrize("key", CORE_DTYPES)
def test_zarr_writes_cuzarr_reads(tmp_path, zflag, key, rng):
    dt = DTYPES[key]
    shape = (int(rng.integers(1, 20)),) + ((int(rng.integers(1, 6)),) if rng.random() < 0.5 else ())
    chunks = random_chunks(rng, shape)
    data = make_data(dt, shape, rng)
    z = zarr.create_array(
        str(tmp_path / "z"), shape=shape, dtype=zarrlike_dtype(zarr, dt), chunks=chunks
    )
    z[...] = data
    a = cuzarr.open_array(str(tmp_path / "z"), mode="r")
    assert_data_equal(a[...], data, dt)
    assert a.read_chunk_sizes == z.read_chunk_sizes


def test_handwritten_forms_and_overflow_both_ways(tmp_path, zflag, rng):
    """The brief's example grid (with edges past the shape), written by each library
    into the same document: chunks are stored at their full edge length, and the
    bytes match."""
    shape = (10, 5, 7, 4)
    doc = json.loads(
        json.dumps(
            cuzarr.create_array(
                str(tmp_path / "tmpl"),
                shape=shape,
                dtype="u2",
                chunks=(1, 1, 1, 1),
                compressors=None,
            ).metadata.to_dict()
        )
    )
    doc["chunk_grid"] = {
        "name": "rectilinear",
        "configuration": {"kind": "inline", "chunk_shapes": [4, [1, 2, 3], [[4, 2]], [[1, 3], 3]]},
    }
    data = rng.integers(0, 1000, size=shape).astype("u2")
    for name in ("c", "z"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "zarr.json").write_text(json.dumps(doc))
    cuzarr.open_array(str(tmp_path / "c"))[...] = data
    zarr.open_array(str(tmp_path / "z"))[...] = data
    assert _files(tmp_path / "c") == _files(tmp_path / "z")
    # a chunk running past the end is stored padded (edge 3 at offset 3 of 5)
    assert len((tmp_path / "c" / "c" / "0" / "2" / "0" / "3").read_bytes()) == 4 * 3 * 4 * 3 * 2
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "z"))[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"))[...], data)
    a = cuzarr.open_array(str(tmp_path / "c"))
    z = zarr.open_array(str(tmp_path / "c"))
    assert a.read_chunk_sizes == z.read_chunk_sizes
    assert a.nchunks == z.nchunks


def test_resize_append_like_zarr(tmp_path, zflag, rng):
    chunks = [[2, 2, 2, 3, 3, 8], 4]
    data = rng.integers(0, 100, size=(20, 10)).astype("i4")
    a = cuzarr.create_array(str(tmp_path / "c"), shape=(20, 10), dtype="i4", chunks=chunks)
    z = zarr.create_array(str(tmp_path / "z"), shape=(20, 10), dtype="i4", chunks=chunks)
    a[...] = data
    z[...] = data
    model = data

    def same():
        ga = json.loads((tmp_path / "c" / "zarr.json").read_text())["chunk_grid"]
        gz = json.loads((tmp_path / "z" / "zarr.json").read_text())["chunk_grid"]
        assert ga == gz
        assert a.shape == z.shape == model.shape
        np.testing.assert_array_equal(a[...], model)
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"))[...], model)
        np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "z"))[...], model)
        assert a.read_chunk_sizes == z.read_chunk_sizes

    extra = rng.integers(0, 100, size=(5, 10)).astype("i4")
    a.append(extra)
    z.append(extra)
    model = np.concatenate([model, extra])
    same()
    extra = rng.integers(0, 100, size=(25, 3)).astype("i4")
    a.append(extra, axis=1)
    z.append(extra, axis=1)
    model = np.concatenate([model, extra], axis=1)
    same()
    a.resize((12, 13))
    z.resize((12, 13))
    model = model[:12]
    same()
    # chunks past the shape are gone
    assert not [k for k in _files(tmp_path / "c") if k.startswith(("c/5/", "c/6/"))]
    a.resize((40, 13))
    z.resize((40, 13))
    model = np.concatenate([model, np.zeros((28, 13), "i4")])
    same()
    a[30:, 2:] = 7
    z[30:, 2:] = 7
    model[30:, 2:] = 7
    same()


def test_sharded_rectilinear_both_ways(tmp_path, zflag, rng):
    data = rng.integers(0, 250, size=(24, 10)).astype("u1")
    kw = dict(shape=(24, 10), dtype="u1", chunks=(4, 5), shards=[[8, 4, 12], 10])
    a = cuzarr.create_array(str(tmp_path / "c"), **kw)
    z = zarr.create_array(str(tmp_path / "z"), **kw)
    assert json.loads((tmp_path / "c" / "zarr.json").read_text()) == json.loads(
        (tmp_path / "z" / "zarr.json").read_text()
    )
    a[...] = data
    z[...] = data
    assert _files(tmp_path / "c") == _files(tmp_path / "z")
    assert a.chunks == (4, 5) and a.shards == ((8, 4, 12), (10,))
    assert a.read_chunk_sizes == z.read_chunk_sizes
    b = cuzarr.open_array(str(tmp_path / "z"))
    np.testing.assert_array_equal(b[3:21:2, ::-3], data[3:21:2, ::-3])
    np.testing.assert_array_equal(b.blocks[2, 1], data[8:12, 5:10])  # blocks: inner chunks
    np.testing.assert_array_equal(b.vindex[[0, 23, 9], [9, 0, 4]], data[[0, 23, 9], [9, 0, 4]])
    b[5:13, 1] = 255
    data[5:13, 1] = 255
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z"))[...], data)


def test_sharded_bad_edges_metadata(tmp_path, zflag):
    kw = dict(shape=(24, 10), dtype="u1", chunks=(4, 5), shards=[[8, 4, 12], 10])
    zarr.create_array(str(tmp_path / "z"), **kw)
    doc = json.loads((tmp_path / "z" / "zarr.json").read_text())
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = [[8, 6, 10], 10]
    (tmp_path / "z" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match="divisible"):
        cuzarr.open_array(str(tmp_path / "z"))


# ----------------------------------------------------------------- v2 (ZEP0003)


def test_v2_zep0003_read(tmp_path):
    import numcodecs

    shape = (10, 10)
    data = np.arange(100, dtype="<i4").reshape(shape)
    root = tmp_path / "v2"
    root.mkdir()
    (root / ".zarray").write_text(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": [10, 10],
                "chunks": [[1, 2, 2, 5], 5],
                "dtype": "<i4",
                "compressor": {"id": "zlib", "level": 1},
                "fill_value": 0,
                "order": "C",
                "filters": None,
            }
        )
    )
    offs = [0, 1, 3, 5, 10]
    comp = numcodecs.Zlib(level=1)
    for i in range(4):
        for j in range(2):
            block = np.ascontiguousarray(data[offs[i] : offs[i + 1], 5 * j : 5 * j + 5])
            if (i, j) != (2, 1):  # one missing chunk reads as the fill value
                (root / f"{i}.{j}").write_bytes(comp.encode(block.tobytes()))
    model = data.copy()
    model[3:5, 5:] = 0
    a = cuzarr.open_array(str(root), mode="r")
    assert a.chunks == ((1, 2, 2, 5), (5, 5))
    np.testing.assert_array_equal(a[...], model)
    np.testing.assert_array_equal(a.vindex[[0, 4, 9], [9, 6, 0]], model[[0, 4, 9], [9, 6, 0]])
    np.testing.assert_array_equal(a.blocks[3, 1], model[5:, 5:])


def test_v2_zep0003_write_roundtrip(tmp_path):
    a = cuzarr.create_array(
        str(tmp_path / "v2"), shape=(9, 4), dtype="f8", chunks=[[4, 4, 1], 3], zarr_format=2
    )
    data = np.arange(36.0).reshape(9, 4)
    a[...] = data
    doc = json.loads((tmp_path / "v2" / ".zarray").read_text())
    assert doc["chunks"] == [[4, 4, 1], 3]
    b = cuzarr.open_array(str(tmp_path / "v2"))
    np.testing.assert_array_equal(b[...], data)
    b.append(np.ones((2, 4)))
    assert json.loads((tmp_path / "v2" / ".zarray").read_text())["chunks"] == [[4, 4, 1, 2], 3]
    np.testing.assert_array_equal(b[...], np.concatenate([data, np.ones((2, 4))]))


# ----------------------------------------------------------------- selections vs numpy


@st.composite
def grids(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0 if ndim > 1 else 1, 9)) for _ in range(ndim))
    chunks = []
    for s in shape:
        if draw(st.booleans()) and s > 0 and draw(st.booleans()):
            chunks.append(draw(st.integers(1, max(1, s))))
        else:
            edges = draw(st.lists(st.integers(1, 4), min_size=1, max_size=12))
            while sum(edges) < s:
                edges.append(draw(st.integers(1, 4)))
            chunks.append(edges)  # may overflow the shape
    return shape, chunks


def _slice(draw, n):
    start = draw(st.none() | st.integers(-n - 2, n + 2))
    stop = draw(st.none() | st.integers(-n - 2, n + 2))
    step = draw(st.none() | st.integers(-4, 4).filter(lambda x: x != 0))
    return slice(start, stop, step)


@st.composite
def basic_selections(draw, shape):
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "slice", "int", "all"]))
        if kind == "int" and n > 0:
            sel.append(draw(st.integers(-n, n - 1)))
        elif kind == "all":
            sel.append(slice(None))
        else:
            sel.append(_slice(draw, n))
    return tuple(sel)


@st.composite
def ortho_selections(draw, shape):
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "ints", "mask", "int"]))
        if kind == "ints" and n > 0:
            sel.append(np.array(draw(st.lists(st.integers(-n, n - 1), max_size=8)), dtype=np.intp))
        elif kind == "mask":
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
        elif kind == "int" and n > 0:
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(_slice(draw, n))
    return tuple(sel)


def _points(draw, shape, k):
    return tuple(
        np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)), dtype=np.intp)
        for n in shape
    )


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _array(shape, chunks, data):
    a = cuzarr.create_array({}, shape=shape, dtype="i4", chunks=chunks, fill_value=-1)
    a[...] = data
    return a


@SETTINGS
@given(grids(), st.data())
def test_basic_read_write(g, d):
    shape, chunks = g
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    a = _array(shape, chunks, data)
    for _ in range(3):
        sel = d.draw(basic_selections(shape))
        np.testing.assert_array_equal(a[sel], data[sel])
        v = -np.arange(data[sel].size, dtype="i4").reshape(data[sel].shape) - 5
        a[sel] = v
        data[sel] = v
        np.testing.assert_array_equal(a[...], data)


@SETTINGS
@given(grids(), st.data())
def test_orthogonal_read_write(g, d):
    shape, chunks = g
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    a = _array(shape, chunks, data)
    for _ in range(3):
        sel = d.draw(ortho_selections(shape))
        idx = [
            np.arange(n)[s]
            if isinstance(s, slice)
            else np.flatnonzero(s)
            if isinstance(s, np.ndarray) and s.dtype == bool
            else np.atleast_1d(np.asarray(s, dtype=np.intp))
            for s, n in zip(sel, shape)
        ]
        out_shape = [len(i) for i, s in zip(idx, sel) if not isinstance(s, int)]
        want = data[np.ix_(*idx)].reshape(out_shape)
        np.testing.assert_array_equal(a.oindex[sel], want)
        a.oindex[sel] = -7
        data[np.ix_(*idx)] = -7
        np.testing.assert_array_equal(a[...], data)


@SETTINGS
@given(grids(), st.data())
def test_vindex_masks_fancy(g, d):
    shape, chunks = g
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    a = _array(shape, chunks, data)
    if all(n > 0 for n in shape):
        k = d.draw(st.integers(0, 10))
        pts = _points(d.draw, shape, k)
        np.testing.assert_array_equal(a.vindex[pts], data[pts])
        a.vindex[pts] = -3
        data[pts] = -3
        # numpy-mode fancy indexing (one int array on the first dimension)
        idx = pts[0]
        np.testing.assert_array_equal(a[idx], data[idx])
        np.testing.assert_array_equal(a[pts], data[pts])
    mask = np.array(
        d.draw(st.lists(st.booleans(), min_size=data.size, max_size=data.size)), dtype=bool
    ).reshape(shape)
    np.testing.assert_array_equal(a.vindex[mask], data[mask])
    np.testing.assert_array_equal(a[mask], data[mask])
    a[mask] = 11
    data[mask] = 11
    np.testing.assert_array_equal(a[...], data)


@SETTINGS
@given(grids(), st.data())
def test_blocks(g, d):
    shape, chunks = g
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    a = _array(shape, chunks, data)
    sizes = a.read_chunk_sizes
    if any(len(s) == 0 for s in sizes):
        return
    bi = tuple(d.draw(st.integers(0, len(s) - 1)) for s in sizes)
    offs = [np.concatenate([[0], np.cumsum(s)]) for s in sizes]
    region = tuple(slice(int(o[i]), int(o[i + 1])) for o, i in zip(offs, bi))
    np.testing.assert_array_equal(a.blocks[bi], data[region])
    a.blocks[bi] = 99
    data[region] = 99
    np.testing.assert_array_equal(a[...], data)
    # block slices
    b0 = d.draw(st.integers(0, len(sizes[0]) - 1))
    b1 = d.draw(st.integers(b0, len(sizes[0])))
    sel = (slice(b0, b1),)
    np.testing.assert_array_equal(a.blocks[sel], data[int(offs[0][b0]) : int(offs[0][b1])])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 7),
    st.integers(-45, 45),
    st.integers(-45, 45),
    st.integers(-6, 6).filter(lambda x: x != 0),
)
def test_edge_projection_matches_regular(size, chunk, start, stop, step):
    """The rectilinear slice projection gives what the regular fast path gives
    when the edges are regular."""
    from cuzarr.indexing.projection import project_array, project_slice
    from cuzarr.metadata.chunk_grid import DimGrid

    reg = DimGrid(size, chunk)
    n = -(-size // chunk)
    rect = RectilinearChunkGrid(((chunk,) * n,)).dims((size,))[0]
    r = slice(start, stop, step).indices(size)
    a, b = project_slice(*r, reg), project_slice(*r, rect)
    assert (a.chunks, a.chunk_sels, a.out_sels, a.complete, a.out_len) == (
        b.chunks,
        b.chunk_sels,
        b.out_sels,
        b.complete,
        b.out_len,
    )
    idx = np.arange(size)[slice(*r)]
    pa, pb = project_array(np.unique(idx), reg), project_array(np.unique(idx), rect)
    assert pa.chunks == pb.chunks and pa.complete == pb.complete


def test_orthogonal_selection_landing_on_scattered_output_rows():
    # rows 1..2 are one contiguous run of chunk 1, but land on output rows 0 and 2:
    # with index arrays on both dimensions they must index orthogonally
    a = cuzarr.create_array({}, shape=(3, 5), chunks=[[1, 2], [1, 1, 1, 1, 1]], dtype="i4")
    data = np.arange(15, dtype="i4").reshape(3, 5)
    a[...] = data
    sel = (np.array([1, 0, -1]), np.array([1, 0]))
    np.testing.assert_array_equal(a.oindex[sel], data[np.ix_(*sel)])
    a.oindex[sel] = np.array([[10, 11], [12, 13], [14, 15]], dtype="i4")
    data[np.ix_(*sel)] = [[10, 11], [12, 13], [14, 15]]
    np.testing.assert_array_equal(a[...], data)


def test_growing_rectilinear_shards_refuses_partial_inner_chunks_before_saving(tmp_path, zflag):
    """zarr-python refuses a new shard edge that holds no whole number of inner
    chunks; so does cuzarr, before anything changes (the append's data was lost,
    or the grid was saved and could no longer be opened)."""
    s = str(tmp_path / "g")
    a = cuzarr.create_array(s, shape=(8,), dtype="i4", chunks=(4,), shards=[[4, 4]], fill_value=0)
    a[:] = np.arange(8)
    with pytest.raises(cuzarr.errors.MetadataError, match="not divisible"):
        a.append(np.array([7, 7, 7], "i4"))
    assert a.shape == (8,) and a.shards == ((4, 4),)
    b = cuzarr.open_array(s)
    assert b.shape == (8,)
    np.testing.assert_array_equal(b[...], np.arange(8))
    a.append(np.full(4, 7, "i4"))  # a whole inner chunk: fine
    assert a.shards == ((4, 4, 4),)
    np.testing.assert_array_equal(zarr.open_array(s, mode="r")[...], np.r_[np.arange(8), [7] * 4])
    c = cuzarr.create_array({}, shape=(2,), chunks=(2,), shards=[[2]], dtype="i1")
    with pytest.raises(cuzarr.errors.MetadataError):
        c.resize((5,))
    assert c.shape == (2,) and cuzarr.open_array(c.store).shape == (2,)


def test_metadata_that_would_overflow_or_explode_is_refused():
    """Found by the metadata fuzzer: a v2 ZEP0003 edge of 2**70 raised OverflowError;
    a run-length count of 10**9 would expand into gigabytes of edges."""
    from cuzarr.metadata.array import parse_array_metadata_v2
    from cuzarr.metadata.chunk_grid import MAX_EDGES, parse_chunk_grid

    v2 = {"zarr_format": 2, "shape": [10, 10], "dtype": "<i4", "fill_value": 0,
          "order": "C", "compressor": None, "filters": None}
    for chunks in ([[2**70], 4], [[2**63], 4], [[2**61, 2**61, 2**61], 4]):
        with pytest.raises(cuzarr.errors.MetadataError, match="2\\*\\*62"):
            parse_array_metadata_v2({**v2, "chunks": chunks})
    for count in (10**9, MAX_EDGES + 1):
        grid = {"name": "rectilinear",
                "configuration": {"kind": "inline", "chunk_shapes": [[[1, count]]]}}
        with pytest.raises(cuzarr.errors.MetadataError, match="chunk edges"):
            parse_chunk_grid(grid, 1, (10,))
