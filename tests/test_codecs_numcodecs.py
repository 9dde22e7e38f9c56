"""cuzarr.codecs.numcodecs against zarr-python's zarr.codecs.numcodecs (the oracle).

Each case is built twice from the same parameters, once from each library's module:
the metadata and the chunk bytes must be identical, and each library reads what
the other wrote. zarr-python's codec objects (and numcodecs.zarr3's) are accepted
by cuzarr wherever a codec is taken.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarr.codecs.numcodecs as zn

import cuzarr
from cuzarr.codecs import numcodecs as nc
from cuzarr.errors import MetadataError

pytest.importorskip("zfpy")
pytest.importorskip("pcodec")

rng = np.random.default_rng(29)


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.3
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    return rng.integers(0, 200, shape).astype(dtype)


# (id, dtype, codec arguments built from a module holding the numcodecs classes)
CASES = {
    "delta-bz2": (
        "int32",
        lambda m: {"filters": [m.Delta(dtype="int32")], "compressors": [m.BZ2(level=5)]},
    ),
    "delta-astype": (
        "int64",
        lambda m: {
            "filters": [m.Delta(dtype="int64", astype="int16")],
            "compressors": [m.Zlib(level=1)],
        },
    ),
    "bitround-zlib": (
        "float32",
        lambda m: {"filters": [m.BitRound(keepbits=10)], "compressors": [m.Zlib(level=3)]},
    ),
    "fixedscaleoffset": (
        "float64",
        lambda m: {
            "filters": [m.FixedScaleOffset(offset=0, scale=10, astype="int32")],
            "compressors": [m.Shuffle(), m.LZMA()],
        },
    ),
    "quantize-lz4": (
        "float64",
        lambda m: {"filters": [m.Quantize(digits=2)], "compressors": [m.LZ4()]},
    ),
    "packbits": ("bool", lambda m: {"filters": [m.PackBits()], "compressors": [m.Zstd(level=3)]}),
    "astype": (
        "float64",
        lambda m: {"filters": [m.AsType(encode_dtype="float32")], "compressors": [m.GZip(level=4)]},
    ),
    "checksums": (
        "uint16",
        lambda m: {
            "compressors": [
                m.Blosc(cname="zstd", clevel=3, shuffle=2),
                m.CRC32(),
                m.CRC32C(),
                m.Adler32(),
                m.Fletcher32(),
                m.JenkinsLookup3(),
            ]
        },
    ),
    "zfpy": ("float64", lambda m: {"serializer": m.ZFPY(mode=4), "compressors": None}),
    "pcodec": ("int64", lambda m: {"serializer": m.PCodec(level=8), "compressors": None}),
}
SHAPE, CHUNKS = (20, 12), (8, 5)


def _create(lib, path: Path, dtype: str, kwargs: dict):
    return lib.create_array(
        str(path), shape=SHAPE, dtype=dtype, chunks=CHUNKS, fill_value=0, **kwargs
    )


def _without_gzip_mtime(raw: bytes) -> bytes:
    """``raw`` with the modification time of a gzip header zeroed: two writers
    a second apart stamp different times on the same bytes."""
    if raw[:3] == b"\x1f\x8b\x08" and len(raw) >= 10:
        return raw[:4] + b"\0\0\0\0" + raw[8:]
    return raw


def _chunk_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): _without_gzip_mtime(p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def _codecs_json(root: Path) -> list:
    return json.loads((root / "zarr.json").read_text())["codecs"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_metadata_and_bytes_as_zarr_python(tmp_path: Path, case: str) -> None:
    dtype, make = CASES[case]
    data = _data(dtype, SHAPE)
    a = _create(cuzarr, tmp_path / "cz", dtype, make(nc))
    a[...] = data
    z = _create(zarr, tmp_path / "zp", dtype, make(zn))
    z[...] = data
    assert _codecs_json(tmp_path / "cz") == _codecs_json(tmp_path / "zp")
    assert _chunk_files(tmp_path / "cz") == _chunk_files(tmp_path / "zp")
    # each reads the other's array, with the values the writer reads back
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "cz"), mode="r")[...], z[...])
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "zp"), mode="r")[...], a[...])


@pytest.mark.parametrize("case", sorted(CASES))
def test_zarr_python_codec_objects_accepted(tmp_path: Path, case: str) -> None:
    dtype, make = CASES[case]
    data = _data(dtype, SHAPE)
    a = _create(cuzarr, tmp_path / "with_zn", dtype, make(zn))
    a[...] = data
    b = _create(cuzarr, tmp_path / "with_nc", dtype, make(nc))
    b[...] = data
    assert _codecs_json(tmp_path / "with_zn") == _codecs_json(tmp_path / "with_nc")
    np.testing.assert_array_equal(a[...], b[...])


def test_lossless_cases_roundtrip_exactly(tmp_path: Path) -> None:
    for case in ("delta-bz2", "delta-astype", "packbits", "checksums", "pcodec"):
        dtype, make = CASES[case]
        data = _data(dtype, SHAPE)
        a = _create(cuzarr, tmp_path / case, dtype, make(nc))
        a[...] = data
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / case))[...], data)


def test_numcodecs_zarr3_objects_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import numcodecs.zarr3 as z3

        filters = [z3.Delta(dtype="int32")]
        compressors = [z3.BZ2(level=1), z3.CRC32()]
    a = cuzarr.create_array(
        {}, shape=(30,), dtype="int32", chunks=(7,), filters=filters, compressors=compressors
    )
    a[...] = np.arange(30, dtype="int32")
    assert [c.to_dict() for c in a.metadata.codecs] == [
        {"name": "numcodecs.delta", "configuration": {"dtype": "int32"}},
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.bz2", "configuration": {"level": 1}},
        {"name": "numcodecs.crc32", "configuration": {}},
    ]
    np.testing.assert_array_equal(a[...], np.arange(30))


def test_v3_codecs_list_takes_zarr_python_codecs() -> None:
    codecs = [zn.Delta(dtype="int16"), zarr.codecs.BytesCodec(), zn.Zlib(level=2)]
    a = cuzarr.create(shape=(10,), dtype="int16", chunks=(4,), codecs=codecs, store={})
    a[...] = np.arange(10, dtype="int16")
    assert [c.name for c in a.metadata.codecs] == ["numcodecs.delta", "bytes", "numcodecs.zlib"]
    np.testing.assert_array_equal(a[...], np.arange(10))


def test_v2_array_takes_zarr_python_numcodecs_objects(tmp_path: Path) -> None:
    a = cuzarr.create_array(
        str(tmp_path / "a"),
        shape=(10,),
        dtype="int16",
        chunks=(4,),
        zarr_format=2,
        filters=[zn.Delta(dtype="int16")],
        compressors=zn.Zlib(level=2),
    )
    a[...] = np.arange(10, dtype="int16")
    meta = json.loads((tmp_path / "a" / ".zarray").read_text())
    assert meta["compressor"] == {"id": "zlib", "level": 2}
    assert meta["filters"] == [{"id": "delta", "dtype": "<i2", "astype": "<i2"}]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"))[...], np.arange(10))


def test_codec_objects_mirror_zarr_python() -> None:
    d = nc.Delta(dtype="int32")
    assert d.to_dict() == zn.Delta(dtype="int32").to_dict()
    assert nc.Delta.from_dict(d.to_dict()) == d
    assert repr(d) == "Delta(codec_name='numcodecs.delta', codec_config={'dtype': 'int32'})"
    assert sorted(nc.__all__) == sorted(n for n in zn.__all__ if not n.startswith("_"))


def test_bad_configuration_is_a_metadata_error() -> None:
    with pytest.raises(MetadataError, match=r"numcodecs\.quantize"):
        cuzarr.create_array({}, shape=(4,), dtype="int32", filters=[nc.Quantize(digits=2)])
    with pytest.raises(MetadataError, match=r"numcodecs\.zlib"):
        cuzarr.create_array({}, shape=(4,), dtype="int32", compressors=[nc.Zlib(lvl=2)])
    with pytest.raises(MetadataError, match="bool"):
        cuzarr.create_array({}, shape=(4,), dtype="int32", filters=[nc.PackBits()])
    with pytest.raises(ValueError, match="codec id"):
        nc.Delta(id="zlib")


def test_bad_configuration_in_stored_metadata(tmp_path: Path) -> None:
    a = cuzarr.create_array(
        str(tmp_path / "a"), shape=(4,), dtype="int32", compressors=[nc.Zlib(level=1)]
    )
    meta = json.loads((tmp_path / "a" / "zarr.json").read_text())
    meta["codecs"][1]["configuration"] = {"bogus": 1}
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(meta))
    del a
    with pytest.raises(MetadataError, match=r"numcodecs\.zlib"):
        cuzarr.open_array(str(tmp_path / "a"))


def test_zarr_codecs_names_are_there() -> None:
    import cuzarr.codecs as cc

    # the names of zarr.codecs' public classes, except two typing helpers
    wanted = set(zarr.codecs.__all__) - {"ShardingCodecIndexLocation", "SubchunkWriteOrder"}
    assert wanted <= set(cc.__all__)
    a = cuzarr.create_array(
        {},
        shape=(4,),
        dtype="float32",
        filters=[cc.ScaleOffset(offset=1, scale=10), cc.CastValue(data_type="int16")],
    )
    z = zarr.create_array(
        {},
        shape=(4,),
        dtype="float32",
        filters=[
            zarr.codecs.ScaleOffset(offset=1, scale=10),
            zarr.codecs.CastValue(data_type="int16"),
        ],
    )
    assert [c.to_dict() for c in a.metadata.codecs] == [c.to_dict() for c in z.metadata.codecs]
