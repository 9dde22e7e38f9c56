"""Rectilinear grids keep run-length edges as runs (metadata/chunk_grid.py EdgeRuns).

A 285-byte ``zarr.json`` naming 2 dimensions of 2**24 - 1 edges used to expand
them into Python tuples and prefix sums: 10-14 s and 0.9-1.8 GB to open. Now a
run costs the same whatever its count; the bomb opens, writes and reads in a
child process whose address space is capped 512 MiB above what it maps.
"""

from __future__ import annotations

import json
import os
import pickle
import sys

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.core.common import compress_rle as z_compress

import cuzarr
from _memcap import attempt, run_child
from cuzarr.metadata.chunk_grid import EdgeRuns, RectilinearChunkGrid, parse_chunk_grid

N = 2**24 - 1


def _bomb_doc(ndim: int) -> str:
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [N] * ndim,
        "data_type": "uint8",
        "chunk_grid": {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": [[[1, N]]] * ndim},
        },
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
    }
    return json.dumps(doc, separators=(",", ":"))


def child_open_bomb(ndim: str, workdir: str) -> dict:
    """In the child: open the bomb array, write its last element, read it back."""
    nd = int(ndim)
    os.makedirs(os.path.join(workdir, "a"))
    with open(os.path.join(workdir, "a", "zarr.json"), "w") as f:
        f.write(_bomb_doc(nd))
    got: dict = {}

    def use() -> None:
        a = cuzarr.open_array(os.path.join(workdir, "a"))
        last = (N - 1,) * nd
        a[last] = 5
        got["last"] = int(a[last])
        got["corner"] = int(a[(slice(N - 3, N),) * nd].sum())
        got["grid"] = list(a.metadata.chunk_grid.grid_shape(a.shape))
        got["info"] = "<variable>" in str(a.info)

    res = attempt(use)
    res.update(got)
    res["doc_bytes"] = len(_bomb_doc(nd))
    return res


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc: Linux")
@pytest.mark.parametrize("ndim", [2, 3])
def test_run_length_bomb_opens_cheaply_under_a_memory_cap(ndim, tmp_path):
    r = run_child("test_rectilinear_runs", "child_open_bomb", str(ndim), str(tmp_path))
    print(f"rectilinear bomb, {ndim} dims: {r}")
    assert r["error"] is None, r
    assert r["last"] == 5 and r["corner"] == 5, r
    assert r["grid"] == [N] * ndim
    assert r["info"], r
    assert r["peak_mib"] < 128, r


def _expanded(runs: list[tuple[int, int]]) -> list[int]:
    return [s for s, c in runs for _ in range(c)]


run_lists = st.lists(st.tuples(st.integers(1, 7), st.integers(1, 6)), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(run_lists, st.data())
def test_edge_runs_answer_like_the_expanded_edges(runs, data):
    edges = _expanded(runs)
    offs = np.concatenate([[0], np.cumsum(edges)])
    r = EdgeRuns([s for s, _ in runs], [c for _, c in runs])
    assert len(r) == len(edges) and r.total == offs[-1]
    assert r.expand() == tuple(edges)
    assert r == EdgeRuns.from_edges(edges)
    k = data.draw(st.integers(0, len(edges)))
    assert r.expand(k) == tuple(edges[:k])
    for i in range(len(edges)):
        assert r.edge(i) == edges[i]
        assert r.offset(i) == offs[i]
    assert r.offset(len(edges)) == offs[-1]
    positions = np.arange(int(offs[-1]))
    want = np.searchsorted(offs, positions, side="right") - 1
    np.testing.assert_array_equal(r.index_of(positions), want)
    assert [r.locate(int(p)) for p in positions] == want.tolist()
    # the JSON form is zarr-python's run-length encoding of the edges
    assert r.to_json() == z_compress(edges)


def test_grid_equality_pickling_and_expanded_form():
    g = parse_chunk_grid(
        {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": [[[2, 3], 1, 1], 4]},
        },
        2,
    )
    assert g == RectilinearChunkGrid(((2, 2, 2, 1, 1), 4))
    assert hash(g) == hash(RectilinearChunkGrid(((2, 2, 2, 1, 1), 4)))
    assert pickle.loads(pickle.dumps(g)) == g
    assert g.chunk_shapes == ((2, 2, 2, 1, 1), 4)
    assert g.chunk_shape == (2, 4)
    assert g.to_json()["configuration"]["chunk_shapes"] == [[[2, 3], [1, 2]], 4]
    assert g.resized((8, 4), (10, 4)).chunk_shapes == ((2, 2, 2, 1, 1, 2), 4)


@pytest.fixture
def zflag():
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


def test_long_runs_read_and_write_like_zarr_python(tmp_path, zflag):
    """A grid of long runs, written by cuzarr and read by zarr-python, and back."""
    spec = [[[3, 40], [5, 7], 2, [1, 9]], [[4, 6], 1]]
    shape = (3 * 40 + 5 * 7 + 2 + 9, 25)
    data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": "int32",
        "chunk_grid": {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": spec},
        },
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    for who in ("c", "z"):
        os.makedirs(tmp_path / who)
        (tmp_path / who / "zarr.json").write_text(json.dumps(doc))
    a = cuzarr.open_array(str(tmp_path / "c"))
    a[:] = data
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"))[:], data)
    z = zarr.open_array(str(tmp_path / "z"))
    z[:] = data
    b = cuzarr.open_array(str(tmp_path / "z"))
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[100:170:3, 2:23], data[100:170:3, 2:23])
    np.testing.assert_array_equal(
        b.vindex[[0, 119, 120, 155, 165], [0, 23, 24, 3, 5]],
        data[[0, 119, 120, 155, 165], [0, 23, 24, 3, 5]],
    )
    assert sorted(os.listdir(tmp_path / "c" / "c")) == sorted(os.listdir(tmp_path / "z" / "c"))


def test_info_shows_a_rectilinear_grid_as_zarr_python_does(tmp_path, zflag):
    shape, chunks = (10, 6), [[2, 2, 2, 4], [3, 3]]
    z = zarr.create_array(str(tmp_path / "z"), shape=shape, chunks=chunks, dtype="i1")
    a = cuzarr.open_array(str(tmp_path / "z"))
    line = [x for x in str(a.info).splitlines() if x.startswith("Chunk shape")]
    assert line == [x for x in str(z.info).splitlines() if x.startswith("Chunk shape")]
    assert line == ["Chunk shape        : <variable>"]
