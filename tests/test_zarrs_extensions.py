"""What zarrs writes under names registered in zarr-extensions: the v3
``bitround`` codec reads and writes; the ``optional`` data type (its
specification is not stable yet) is refused with an error naming it."""

from __future__ import annotations

import json

import ml_dtypes
import numcodecs
import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.codecs import BitRoundCodec
from cuzarr.codecs.base import ChunkSpec
from cuzarr.errors import MetadataError, UnsupportedExtensionError
from cuzarr.metadata.dtypes import parse_data_type


def _zarr_json(path, data_type, codecs, shape=(6, 4), chunks=(3, 4), fill=0):
    path.mkdir(parents=True)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": {},
    }
    (path / "zarr.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("keepbits", [1, 4, 9])
def test_bitround_floats_match_numcodecs(tmp_path, dtype, keepbits):
    data = (np.random.default_rng(keepbits).standard_normal((6, 4)) * 300).astype(dtype)
    # numcodecs hands back the rounded bit patterns as integers
    rounded = np.asarray(numcodecs.BitRound(keepbits).encode(data)).view(dtype).reshape(data.shape)
    # an array as zarrs writes it: codec name "bitround", chunks already rounded
    path = tmp_path / "zarrs.zarr"
    codecs = [
        {"name": "bitround", "configuration": {"keepbits": keepbits}},
        {"name": "bytes", "configuration": {"endian": "little"}},
    ]
    _zarr_json(path, dtype, codecs)
    for i in range(2):
        (path / "c" / str(i)).mkdir(parents=True)
        (path / "c" / str(i) / "0").write_bytes(
            rounded[3 * i : 3 * i + 3].astype(f"<{rounded.dtype.str[1:]}").tobytes()
        )
    a = cuzarr.open_array(str(path), mode="r")
    np.testing.assert_array_equal(a[...], rounded)
    assert a.metadata.codecs[0] == BitRoundCodec(keepbits)
    # cuzarr writing through the codec stores numcodecs' rounding, under the name
    out = tmp_path / "cuzarr.zarr"
    b = cuzarr.create_array(
        str(out),
        shape=data.shape,
        chunks=(3, 4),
        dtype=dtype,
        filters=[{"name": "bitround", "configuration": {"keepbits": keepbits}}],
        compressors=None,
    )
    b[...] = data
    assert (out / "c" / "1" / "0").read_bytes() == (path / "c" / "1" / "0").read_bytes()
    assert json.loads((out / "zarr.json").read_text())["codecs"][0] == codecs[0]


def test_bitround_alias_as_zarr_python_writes_it(tmp_path):
    # zarr-python 3.4.2 knows the codec only as numcodecs.bitround: the same
    # rounding under either name
    data = np.linspace(0, 1000, 40, dtype="float32").reshape(8, 5)
    z = zarr.create_array(
        str(tmp_path / "z.zarr"),
        shape=data.shape,
        chunks=(4, 5),
        dtype="f4",
        filters=[zarr.codecs.numcodecs.BitRound(keepbits=6)],
        compressors=None,
    )
    z[...] = data
    c = cuzarr.create_array(
        str(tmp_path / "c.zarr"),
        shape=data.shape,
        chunks=(4, 5),
        dtype="f4",
        filters=[BitRoundCodec(6)],
        compressors=None,
    )
    c[...] = data
    for key in ("c/0/0", "c/1/0"):
        assert (tmp_path / "z.zarr" / key).read_bytes() == (tmp_path / "c.zarr" / key).read_bytes()
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "z.zarr"))[...], c[...])


def _zarrs_int_round(v: int, keepbits: int, width: int) -> int:
    """zarrs' integer rounding of one bit pattern, written out bit by bit."""
    maxbits = v.bit_length()
    if keepbits >= maxbits:
        return v
    maskbits = maxbits - keepbits
    mask = (((1 << width) - 1) >> maskbits) << maskbits
    total = min(v + ((v >> maskbits) & 1) + (1 << (maskbits - 1)) - 1, (1 << width) - 1)
    return total & mask


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64"])
def test_bitround_integers_from_the_most_significant_bit(dtype):
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    values = np.array(
        [
            0,
            1,
            2,
            3,
            5,
            7,
            9,
            100,
            127,
            info.max,
            info.max - 1,
            info.min,
            -1 if info.min else 6,
            -100 if info.min else 200,
        ],
        dtype=dt,
    )
    width = dt.itemsize * 8
    ut = np.dtype(f"u{dt.itemsize}")
    for keepbits in (1, 2, 3, 5):
        got = BitRoundCodec(keepbits).encode(
            values, ChunkSpec(values.shape, parse_data_type(dt, 3))
        )
        want = [_zarrs_int_round(int(v), keepbits, width) for v in values.view(ut)]
        assert got.view(ut).tolist() == want, keepbits


def test_bitround_other_types_and_config():
    spec = ChunkSpec((4,), parse_data_type("complex64", 3))
    c = np.array([1.2345 + 6.789j, -3.3 + 0j, 0j, 1e30 - 1e-30j], dtype="c8")
    got = BitRoundCodec(5).encode(c, spec)
    parts = numcodecs.BitRound(5).encode(c.view("f4"))
    assert got.view("u4").tolist() == np.asarray(parts).view("u4").tolist()
    bf = np.array([1.5, 3.14159, -2.71], dtype=ml_dtypes.bfloat16)
    got = BitRoundCodec(2).encode(bf, ChunkSpec((3,), parse_data_type(bf.dtype, 3)))
    # bfloat16 is float32's upper half: its rounding is float32's, truncated
    via_f32 = np.asarray(numcodecs.BitRound(2).encode(bf.astype("f4"))).view("f4")
    via_f32 = via_f32.astype(ml_dtypes.bfloat16)
    assert got.view("u2").tolist() == via_f32.view("u2").tolist()
    assert got.view("u2").tolist() != bf.view("u2").tolist()
    with pytest.raises(MetadataError, match="keepbits"):
        cuzarr.codecs.codec_from_json({"name": "bitround", "configuration": {"keepbits": 0}})
    with pytest.raises(MetadataError, match="keepbits"):
        cuzarr.codecs.codec_from_json({"name": "bitround"})
    with pytest.raises(MetadataError, match="bitround"):
        cuzarr.create_array({}, shape=(3,), dtype="bool", filters=[BitRoundCodec(2)])


def test_optional_data_type_is_named_in_the_error(tmp_path):
    path = tmp_path / "opt.zarr"
    _zarr_json(
        path,
        {"name": "optional", "configuration": {"name": "uint8"}},
        [{"name": "optional", "configuration": {"mask_codecs": [], "data_codecs": []}}],
        fill=None,
    )
    with pytest.raises(UnsupportedExtensionError, match="zarr-extensions 'optional' data type"):
        cuzarr.open_array(str(path), mode="r")
