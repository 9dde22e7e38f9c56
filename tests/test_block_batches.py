"""Batched decode/encode of small whole chunks (core.blocks.BlockDecoder/BlockEncoder):
reads and writes whose whole chunks land on a chunk-aligned grid of the output
(or value) go through one gather/scatter per batch. Same answers as numpy and as
zarr-python, with edge chunks, partial chunks, missing chunks, unaligned
requests, both orders and byte orders, and extension dtypes mixed in."""

from __future__ import annotations

import ml_dtypes
import numcodecs
import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.storage import LocalStore


def _arr(tmp_path, dtype, zarr_format=3, order="C", compressor="zstd", shape=(70, 45),
         chunks=(8, 4)):
    comp = {"zstd": ({"name": "zstd", "configuration": {"level": 1}} if zarr_format == 3
                     else numcodecs.Zstd(1)), "none": None}[compressor]
    kw = {"order": order} if zarr_format == 2 else {}
    return cuzarr.create_array(LocalStore(tmp_path / "a"), shape=shape, chunks=chunks,
                               dtype=dtype, compressors=comp, zarr_format=zarr_format,
                               fill_value=0, **kw)


CASES = [
    ("<u2", 3, "C", "zstd"), ("<f8", 3, "C", "none"), (">i4", 2, "C", "zstd"),
    ("<f4", 2, "F", "zstd"), (">f8", 2, "F", "none"), ("|b1", 3, "C", "zstd"),
    ("<c8", 3, "C", "zstd"),
]


@pytest.mark.parametrize("dtype, zf, order, comp", CASES)
def test_block_paths_match_numpy_and_zarr(tmp_path, dtype, zf, order, comp):
    a = _arr(tmp_path, dtype, zf, order, comp)
    rng = np.random.default_rng(1)
    data = (rng.standard_normal(a.shape) * 100).astype(dtype)
    expect = np.zeros(a.shape, dtype)
    a[...] = data
    expect[...] = data
    a[16:40, 8:24] = 0  # whole chunks back to the fill: deleted through the batch path
    expect[16:40, 8:24] = 0
    a[3:61, 5:43] = data[:58, :38]  # unaligned: whole chunks inside, partial ones around
    expect[3:61, 5:43] = data[:58, :38]
    np.testing.assert_array_equal(a[...], expect)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], expect)
    for sel in [(slice(4, 66), slice(2, 44)), (slice(8, 64), slice(None)),
                (slice(1, 70, 1), slice(4, 40)), (slice(None, None, -1), slice(None))]:
        np.testing.assert_array_equal(a[sel], expect[sel])
    out = np.zeros((56, 45), dtype)
    a.get_basic_selection((slice(8, 64), slice(None)), out=out)
    np.testing.assert_array_equal(out, expect[8:64])


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e5m2])
def test_block_paths_extension_dtypes(tmp_path, dtype):
    a = _arr(tmp_path, dtype)
    data = np.linspace(-4, 4, a.size).reshape(a.shape).astype(dtype)
    a[...] = data
    np.testing.assert_array_equal(a[...].view("u1"), data.view("u1"))
    np.testing.assert_array_equal(a[8:40, 4:20].view("u1"), data[8:40, 4:20].view("u1"))


def test_block_read_with_missing_and_corrupt_chunks(tmp_path):
    a = _arr(tmp_path, "<u2")
    a[...] = 7
    (tmp_path / "a" / "c" / "2" / "3").unlink()  # missing: fill value
    expect = np.full(a.shape, 7, "<u2")
    expect[16:24, 12:16] = 0
    np.testing.assert_array_equal(a[...], expect)
    (tmp_path / "a" / "c" / "4" / "5").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    with pytest.raises(cuzarr.errors.CodecError, match="c/4/5"):
        a[...]


@pytest.mark.parametrize("separator", ["/", "."])
@pytest.mark.parametrize(
    "sel", [(slice(None),) * 3, (slice(3, 17), slice(None, None, -2), slice(5, 6))]
)
def test_chunk_keys_of_a_slice_product_match_the_per_item_keys(separator, sel):
    from cuzarr.core import engine
    from cuzarr.indexing.selection import normalize_numpy

    g = cuzarr.create_group({})
    a = g.create_array(
        "sub/x", shape=(20, 11, 9), chunks=(4, 3, 2), dtype="u1",
        chunk_key_encoding={"name": "default", "separator": separator},
    )
    meta = a.metadata
    plan = normalize_numpy(sel, a.shape, meta.chunk_grid.dims(a.shape))
    items = engine.chunk_items(plan.projections)
    assert items.dims is not None
    keys = engine.chunk_keys(a.async_array.store_path, meta, items)
    assert keys == engine.chunk_keys(a.async_array.store_path, meta, list(items))
    assert keys[0] == "sub/x/c" + separator + separator.join(map(str, items[0][0]))


@pytest.mark.parametrize("chunks", [(64, 128), (128, 256)])  # 16 KiB and 64 KiB of <u2
@pytest.mark.parametrize("zf, comp", [(3, "zstd"), (2, "zstd"), (3, "none")])
def test_block_reads_of_larger_chunks(tmp_path, chunks, zf, comp):
    """Batched chunks large enough to be decompressed in place into the batch
    buffer; two arrays read in turn by the same threads (the buffer is reused):
    each read gets its own values, and a corrupt chunk in such a batch names its
    key."""
    a = _arr(tmp_path, "<u2", zf, "C", comp, shape=(520, 1100), chunks=chunks)
    rng = np.random.default_rng(2)
    data = np.cumsum(rng.integers(-3, 4, a.shape), axis=1).astype("<u2")
    a[...] = data
    b = cuzarr.create_array(LocalStore(tmp_path / "b"), shape=a.shape, chunks=chunks,
                            dtype="<u2", zarr_format=zf, fill_value=0)
    b[...] = data[::-1]
    for _ in range(2):
        np.testing.assert_array_equal(a[...], data)
        np.testing.assert_array_equal(b[...], data[::-1])
    np.testing.assert_array_equal(a[10:500, 7:1090], data[10:500, 7:1090])
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], data)
    key = "c/1/2" if zf == 3 else "1.2"
    (tmp_path / "a" / key).write_bytes(
        b"\x28\xb5\x2f\xfd garbage" if comp == "zstd" else b"short"
    )
    with pytest.raises(cuzarr.errors.CodecError, match=key.replace(".", r"\.")):
        a[...]


@pytest.mark.parametrize("level, checksum", [(1, False), (3, True)])
def test_batch_encoded_frames_equal_one_chunk_frames(level, checksum):
    """The batched zstd encode (one python-zstandard call per batch) stores the
    same frames, byte for byte, as compressing each chunk on its own: content
    size declared, checksum as configured."""
    import zstandard

    store = {}
    data = np.cumsum(np.random.default_rng(level).integers(-3, 4, (64, 96)), axis=1).astype("<u2")
    comp = {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}
    a = cuzarr.create_array(store, shape=data.shape, chunks=(16, 16), dtype=data.dtype,
                            compressors=comp, fill_value=0)
    a[...] = data
    one = zstandard.ZstdCompressor(level=level, write_checksum=checksum, write_content_size=True)
    for i in range(4):
        for j in range(6):
            chunk = np.ascontiguousarray(data[16 * i : 16 * i + 16, 16 * j : 16 * j + 16])
            assert bytes(store[f"c/{i}/{j}"]) == one.compress(chunk.tobytes()), (i, j)
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.MemoryStore(
        {k: zarr.core.buffer.cpu.Buffer.from_bytes(bytes(v)) for k, v in store.items()}), mode="r")[...], data)


def test_is_fill_answers_early_and_right_for_large_chunks():
    from cuzarr.buffer.chunks import is_fill as _is_fill
    from cuzarr.metadata.dtypes import parse_data_type

    dt = parse_data_type("uint16", 3)
    a = np.zeros((512, 1024), dtype="u2")
    assert _is_fill(a, 0, dt)
    a[0, 5] = 1  # in the probed leading rows
    assert not _is_fill(a, 0, dt)
    a[0, 5] = 0
    a[-1, -1] = 7  # past them: the full comparison still finds it
    assert not _is_fill(a, 0, dt)
    v = np.zeros((1024, 2048), dtype="u2")[::2, 3:1027]  # a strided view
    assert _is_fill(v, 0, dt)
    v[400, 1000] = 2
    assert not _is_fill(v, 0, dt)
    f = np.full((300, 300), np.nan, dtype="f4")
    ft = parse_data_type("float32", 3)
    assert _is_fill(f, np.float32("nan"), ft)
    f[299, 0] = 1.0
    assert not _is_fill(f, np.float32("nan"), ft)
