"""v2 chunks through array-aware numcodecs compressors (zfpy): cuzarr hands them
the chunk in its shape, as zarr-python does, so the stored bytes are numcodecs'
own and zfp compresses in N-d blocks."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr

import cuzarr

zfpy = pytest.importorskip("numcodecs.zfpy")


def _chunk_bytes(path, key: str) -> bytes:
    return (path / key).read_bytes()


@pytest.mark.parametrize("shape", [(8, 8), (6, 5, 4), (37,)])
@pytest.mark.parametrize("mode", [{"mode": 4, "tolerance": 1e-3}, {"mode": 3, "rate": 8}])
def test_zfpy_chunk_bytes_match_numcodecs(tmp_path, shape, mode):
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape).cumsum(axis=-1)
    codec = zfpy.ZFPY(**mode)
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(
        str(path), shape=shape, chunks=shape, dtype="f8", zarr_format=2, compressors=codec
    )
    a[...] = data
    key = ".".join("0" * len(shape))
    assert _chunk_bytes(path, key) == bytes(codec.encode(data))
    # zarr-python writes the very same chunk
    zpath = tmp_path / "z.zarr"
    z = zarr.create_array(
        str(zpath), shape=shape, chunks=shape, dtype="f8", zarr_format=2, compressors=codec
    )
    z[...] = data
    assert _chunk_bytes(path, key) == _chunk_bytes(zpath, key)
    # and each reads the other's
    expect = codec.decode(codec.encode(data))
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], expect)
    np.testing.assert_array_equal(cuzarr.open_array(str(zpath), mode="r")[...], expect)


def test_zfpy_is_nd_not_flat(tmp_path):
    # a smooth 2-D field: N-d zfp blocks beat a raveled 1-D stream
    x = np.linspace(0, 1, 64)
    data = np.sin(x[:, None] * 3) * np.cos(x[None, :] * 5)
    codec = zfpy.ZFPY(mode=4, tolerance=1e-6)
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(
        str(path),
        shape=data.shape,
        chunks=data.shape,
        dtype="f8",
        zarr_format=2,
        compressors=codec,
    )
    a[...] = data
    stored = (path / "0.0").read_bytes()
    assert len(stored) == len(bytes(codec.encode(data)))
    assert len(stored) < len(bytes(codec.encode(data.ravel())))
    assert zfpy.ZFPY().decode(stored).shape == data.shape


def test_zfpy_partial_chunks_and_edges(tmp_path):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((10, 7))
    codec = zfpy.ZFPY(mode=4, tolerance=1e-4)
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(
        str(path),
        shape=data.shape,
        chunks=(4, 4),
        dtype="f8",
        zarr_format=2,
        compressors=codec,
    )
    a[...] = data
    zpath = tmp_path / "z.zarr"
    z = zarr.create_array(
        str(zpath),
        shape=data.shape,
        chunks=(4, 4),
        dtype="f8",
        zarr_format=2,
        compressors=codec,
    )
    z[...] = data
    for i in range(3):
        for j in range(2):
            assert (path / f"{i}.{j}").read_bytes() == (zpath / f"{i}.{j}").read_bytes()
    np.testing.assert_allclose(a[...], data, atol=1e-4)


def test_zfpy_f_order(tmp_path):
    # numcodecs' zfpy refuses F-order input (zarr-python cannot write these);
    # cuzarr compresses the C-contiguous transposed view, and both libraries
    # read the chunk back in memory order
    rng = np.random.default_rng(2)
    data = rng.standard_normal((6, 9))
    codec = zfpy.ZFPY(mode=4, tolerance=1e-5)
    path = tmp_path / "a.zarr"
    a = cuzarr.create_array(
        str(path),
        shape=data.shape,
        chunks=data.shape,
        dtype="f8",
        zarr_format=2,
        compressors=codec,
        order="F",
    )
    a[...] = data
    assert (path / "0.0").read_bytes() == bytes(codec.encode(np.ascontiguousarray(data.T)))
    np.testing.assert_allclose(a[...], data, atol=1e-5)
    np.testing.assert_allclose(zarr.open_array(str(path), mode="r")[...], data, atol=1e-5)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [None, "zlib", "blosc"])
def test_shaped_chunks_keep_bytes_of_byte_codecs(tmp_path, order, compressor):
    # compressors that see bytes (and no compressor) store the same bytes as
    # zarr-python in either order

    comp = {None: None, "zlib": numcodecs.Zlib(1), "blosc": numcodecs.Blosc()}[compressor]
    filters = [numcodecs.Delta(dtype="i4")]
    data = np.arange(5 * 6, dtype="i4").reshape(5, 6) ** 2
    paths = {}
    for lib in (cuzarr, zarr):
        p = tmp_path / f"{lib.__name__}.zarr"
        arr = lib.create_array(
            str(p),
            shape=data.shape,
            chunks=(5, 6),
            dtype="i4",
            zarr_format=2,
            compressors=comp,
            filters=filters,
            order=order,
        )
        arr[...] = data
        paths[lib] = p
    assert (paths[cuzarr] / "0.0").read_bytes() == (paths[zarr] / "0.0").read_bytes()
    np.testing.assert_array_equal(cuzarr.open_array(str(paths[zarr]))[...], data)
