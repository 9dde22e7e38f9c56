"""The ``scale_offset`` and ``cast_value`` codecs against zarr-python 3.4 (whose
``cast_value`` runs on the cast-value-rs package): codec by codec on random
values, special values and every rounding and out-of-range mode, and end to
end through stores written by one library and read by the other.

One deliberate difference: the spec says ``out_of_range: "clamp"`` treats
infinities as out of the range of an integer type (so they clamp to its
minimum or maximum); cast-value-rs refuses them. cuzarr follows the spec.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import zarr
from zarr.codecs.cast_value import CastValue
from zarr.codecs.scale_offset import ScaleOffset

import cuzarr
from cuzarr.codecs.base import ChunkSpec, codec_from_json
from cuzarr.codecs.value_codecs import CastValueCodec, ScaleOffsetCodec
from cuzarr.errors import CodecError, MetadataError
from cuzarr.metadata.dtypes import parse_data_type

ROUNDINGS = ["nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"]
INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "float32", "float64"]
SPECIALS = [
    0.5, -0.5, 1.5, -2.5, 255.5, 256.0, -129.0, 1e300, -1e300, np.inf, -np.inf, np.nan,
    65504.0, 65519.0, 65520.0, 65536.0, 3.4028235e38, 3.4028236e38, 2.0**63, 2.0**64,
    -(2.0**63), 5e-8, -6e-8, 2.0**-24, 3 * 2.0**-25, 1e-46, 16777217.0, 2.0**53 + 1, -0.0,
]  # fmt: skip
INT_SPECIALS = [0, 1, -1, 2**24 + 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 65519, 65520]


def _spec(arr: np.ndarray, dtype: str, fill=0) -> ChunkSpec:
    return ChunkSpec(arr.shape, parse_data_type(dtype, 3), fill)


def _zarr_cast(x, target, rounding, oor, smap=None, direction="encode"):
    c = CastValue(data_type=target, rounding=rounding, out_of_range=oor, scalar_map=smap)
    return c._do_cast(
        x, target_dtype=c.dtype.to_native_dtype(), scalar_map=c._get_scalar_map(direction)
    )


def _outcome(fn, *args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args), None
    except (ValueError, OverflowError, TypeError) as e:
        return None, e


def _nd(x):
    return zarr.core.buffer.default_buffer_prototype().nd_buffer.from_ndarray_like(x)


def _values(rng, dtype: str, n: int = 16) -> np.ndarray:
    if dtype.startswith("float"):
        kind = rng.integers(4)
        if kind == 0:
            x = rng.normal(0, 10, n)
        elif kind == 1:
            x = rng.normal(0, 1e5, n)
        elif kind == 2:
            x = np.round(rng.normal(0, 100, n) * 2) / 2  # ties
        else:
            x = rng.choice(np.array(SPECIALS), n)
        with np.errstate(all="ignore"):
            return x.astype(dtype)
    info = np.iinfo(dtype)
    kind = rng.integers(3)
    if kind == 0:
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if kind == 1:
        return rng.integers(-300, 300, n).clip(info.min, info.max).astype(dtype)
    picks = rng.choice(np.array(INT_SPECIALS, dtype=object), n)
    return np.array([min(max(int(v), int(info.min)), int(info.max)) for v in picks], dtype=dtype)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    u = f"u{a.dtype.itemsize}"
    return bool(np.array_equal(a.view(u), b.view(u)) or np.array_equal(a, b, equal_nan=True))


@pytest.mark.parametrize("seed", range(6))
def test_cast_value_matches_zarr_python(seed):
    """Random values (specials included) and every rounding and out-of-range
    mode: the same result, or an error from both."""
    rng = np.random.default_rng(seed)
    cases = 0
    while cases < 400:
        src, dst = rng.choice(INTS + FLOATS), rng.choice(INTS + FLOATS)
        rounding = rng.choice(ROUNDINGS)
        oor = rng.choice([None, "clamp", "wrap"])
        if oor == "wrap" and dst in FLOATS:
            continue
        x = _values(rng, src)
        z, ze = _outcome(_zarr_cast, x, dst, rounding, oor)
        c, ce = _outcome(CastValueCodec(dst, rounding, oor).encode, x, _spec(x, src))
        if ze is not None and ce is None and oor == "clamp" and dst in INTS:
            # the spec's clamping of infinities into integer types
            assert np.isinf(x.astype(np.float64)).any(), (src, dst, x, ze)
            info = np.iinfo(dst)
            fin = np.isfinite(x.astype(np.float64))
            ref = _zarr_cast(np.where(fin, x, 0).astype(x.dtype), dst, rounding, oor)
            edges = np.array([info.min, info.max], dtype=dst)
            want = np.where(fin, ref, np.where(x > 0, edges[1], edges[0])).astype(dst)
            assert _same(c, want)
            cases += 1
            continue
        assert (ze is None) == (ce is None), (src, dst, rounding, oor, x, ze, ce)
        if ce is not None:
            assert isinstance(ce, CodecError)
        else:
            assert _same(z, c), (src, dst, rounding, oor, x, z, c)
        cases += 1


@pytest.mark.parametrize("src,dst", [("float64", "uint8"), ("float32", "int16"), ("int32", "uint8")])
def test_cast_value_scalar_map_matches_zarr_python(src, dst):
    smap = {"encode": [["NaN", 0], [1.5, 7]] if src.startswith("float") else [[-1, 255], [300, 0]]}
    rng = np.random.default_rng(3)
    x = rng.normal(100, 200, 64).astype(src)  # finite: clamped alike
    x[:4] = [np.nan if src.startswith("float") else -1, 1.5 if src.startswith("float") else 300, 3, 4]
    want = _zarr_cast(x, dst, "nearest-even", "clamp", smap)
    got = CastValueCodec(dst, "nearest-even", "clamp", smap).encode(x, _spec(x, src))
    assert _same(want, got)


@pytest.mark.parametrize("seed", range(4))
def test_scale_offset_matches_zarr_python(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(300):
        dtype = rng.choice(INTS + ["float32", "float64"])
        x = _values(rng, dtype)
        if dtype in INTS:
            info = np.iinfo(dtype)
            off = int(rng.integers(max(info.min, -1000), min(info.max, 1000), endpoint=True))
            scale = int(rng.choice([1, 2, 3, -1, -4, 10, 1000]))
            if info.min == 0 and scale < 0:
                scale = -scale
        else:
            off, scale = float(rng.normal(0, 100)), float(rng.choice([0.1, 0.5, 3.0, -2.0, 1e-3]))
        zc = ScaleOffset(offset=off, scale=scale)
        zspec = zarr.core.array_spec.ArraySpec(
            shape=x.shape,
            dtype=zarr.core.dtype.get_data_type_from_native_dtype(np.dtype(dtype)),
            fill_value=0,
            config=zarr.core.array_spec.ArrayConfig.from_dict({}),
            prototype=zarr.core.buffer.default_buffer_prototype(),
        )
        cc = ScaleOffsetCodec(off, scale)
        spec = _spec(x, dtype)
        # encoding, and decoding the same values as if stored
        for zfn, cfn, exact in (
            (zc._encode_sync, cc.encode, lambda v, o=off, k=scale: (v - o) * k),
            (zc._decode_sync, cc.decode, lambda v, o=off, k=scale: v // k + o),
        ):
            z, ze = _outcome(zfn, _nd(x), zspec)
            c, ce = _outcome(cfn, x, spec)
            if dtype in ("int64", "uint64") and ze is None and ce is not None:
                # zarr-python's int64 arithmetic wraps silently; the true results
                # (Python integers) are out of range, as cuzarr says
                info = np.iinfo(dtype)
                true = [exact(int(v)) for v in x.tolist()]
                assert any(not info.min <= t <= info.max for t in true), (dtype, off, scale, x)
                continue
            assert (ze is None) == (ce is None), (dtype, off, scale, x, ze, ce)
            if ce is None:
                assert _same(np.asarray(z.as_ndarray_like()), c), (dtype, off, scale, x)


CHAINS = {
    # numcodecs.fixedscaleoffset's replacement, as the spec shows it
    "scale-offset+cast": (
        "float32",
        [
            {"name": "scale_offset", "configuration": {"offset": 10, "scale": 0.1}},
            {"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "wrap"}},
        ],
    ),
    "cast-clamp": (
        "float64",
        [
            {
                "name": "cast_value",
                "configuration": {"data_type": "int16", "rounding": "towards-zero", "out_of_range": "clamp"},
            }
        ],
    ),
    "int-scale": ("int32", [{"name": "scale_offset", "configuration": {"offset": -5, "scale": 3}}]),
}  # fmt: skip


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("writer", ["cuzarr", "zarr"])
def test_arrays_with_value_codecs_read_alike(tmp_path, chain, writer):
    dtype, filters = CHAINS[chain]
    rng = np.random.default_rng(5)
    if dtype == "int32":
        data = rng.integers(-1000, 1000, (20, 30)).astype(dtype)
    else:
        data = rng.normal(10, 8, (20, 30)).astype(dtype)
    def write(lib, path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = lib.create_array(
                path, shape=data.shape, chunks=(8, 16), dtype=dtype, filters=filters, fill_value=10
            )
            a[:, :25] = data[:, :25]

    path = str(tmp_path / "a")
    write(cuzarr if writer == "cuzarr" else zarr, path)
    got_c = cuzarr.open_array(path, mode="r")[...]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got_z = zarr.open_array(path, mode="r")[...]
    np.testing.assert_array_equal(got_c, got_z)
    assert got_c.dtype == np.dtype(dtype)
    # the unwritten columns read as the fill value, through the codecs' fill mapping
    np.testing.assert_array_equal(got_c[:, 25:], np.full((20, 5), 10, dtype=dtype))
    if writer == "cuzarr":
        # zarr-python writes the same chunk bytes from the same data
        write(zarr, str(tmp_path / "z"))
        for key in ("c/0/0", "c/1/1", "c/2/0"):
            assert (tmp_path / "a" / key).read_bytes() == (tmp_path / "z" / key).read_bytes()
        meta = json.loads((tmp_path / "a" / "zarr.json").read_text())
        names = [c["name"] for c in meta["codecs"]]
        assert names[: len(filters)] == [f["name"] for f in filters]


def test_value_codec_errors_are_clear(tmp_path):
    x = np.array([1.0, np.nan])
    with pytest.raises(CodecError, match="NaN"):
        CastValueCodec("uint8").encode(x, _spec(x, "float64"))
    y = np.array([1.0, 300.0])
    with pytest.raises(CodecError, match="outside the range of uint8"):
        CastValueCodec("uint8").encode(y, _spec(y, "float64"))
    i = np.array([5, 7], dtype="int16")
    with pytest.raises(CodecError, match="multiple of scale"):
        ScaleOffsetCodec(0, 2).decode(i, _spec(i, "int16"))
    with pytest.raises(CodecError, match="outside the range of dtype int16"):
        ScaleOffsetCodec(0, 1000).encode(i * 10, _spec(i, "int16"))
    for bad in (
        {"name": "cast_value", "configuration": {}},
        {"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "up"}},
        {"name": "cast_value", "configuration": {"data_type": "float32", "out_of_range": "wrap"}},
        {"name": "cast_value", "configuration": {"data_type": "uint8", "extra": 1}},
        {"name": "cast_value", "configuration": {"data_type": "string"}},
        {"name": "scale_offset", "configuration": {"offset": 1, "scale": 2, "more": 3}},
        {"name": "scale_offset", "configuration": {"offset": [1], "scale": 2}},
    ):
        with pytest.raises(MetadataError):
            codec_from_json(bad)
    with pytest.raises((MetadataError, ValueError)):
        cuzarr.create_array(
            str(tmp_path / "z"), shape=(4,), dtype="int8",
            filters=[{"name": "scale_offset", "configuration": {"offset": 0, "scale": 0}}],
        )  # fmt: skip
    with pytest.raises((MetadataError, ValueError)):
        cuzarr.create_array(
            str(tmp_path / "n"), shape=(4,), dtype="float32", fill_value=float("nan"),
            filters=[{"name": "cast_value", "configuration": {"data_type": "uint8"}}],
        )  # fmt: skip


@pytest.mark.parametrize("target", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_cast_value_to_small_floats_rounds_as_asked(target):
    """No peer writes these: nearest-even agrees with ml_dtypes' own cast, and
    the directed modes bracket the value (each result is the nearest
    representable value on its side)."""
    import ml_dtypes

    dt = np.dtype(getattr(ml_dtypes, target))
    top = float(ml_dtypes.finfo(dt).max)
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.normal(0, 3, 500), rng.normal(0, top / 4, 100)])
    x = x[np.abs(x) < top * 0.9]
    spec = _spec(x, "float64")
    ne = CastValueCodec(target).encode(x, spec)
    np.testing.assert_array_equal(ne.astype(np.float64), x.astype(dt).astype(np.float64))
    down = CastValueCodec(target, "towards-negative").encode(x, spec).astype(np.float64)
    up = CastValueCodec(target, "towards-positive").encode(x, spec).astype(np.float64)
    zero = CastValueCodec(target, "towards-zero").encode(x, spec).astype(np.float64)
    assert (down <= x).all() and (up >= x).all()
    assert ((down == up) == (down == x)).all()  # equal exactly when x is representable
    np.testing.assert_array_equal(zero, np.where(x >= 0, down, up))
    for y in (down, up):  # nothing representable lies between x and the result
        np.testing.assert_array_equal(y.astype(dt).astype(np.float64), y)


def test_cast_value_to_small_integer_types():
    x = np.array([1.3, 2.5, -3.7, 7.0, 9.2, -12.0])
    spec = _spec(x, "float64")
    got = CastValueCodec("int4", out_of_range="clamp").encode(x, spec)
    assert got.dtype.name == "int4"
    np.testing.assert_array_equal(got.astype(int), [1, 2, -4, 7, 7, -8])
    wrapped = CastValueCodec("uint4", out_of_range="wrap").encode(x, spec)
    np.testing.assert_array_equal(wrapped.astype(int), [1, 2, 12, 7, 9, 4])
    with pytest.raises(CodecError, match="outside the range of int4"):
        CastValueCodec("int4").encode(x, spec)
    i = np.array([-3, 0, 5], dtype="int32")
    back = CastValueCodec("int4").decode(CastValueCodec("int4").encode(i, _spec(i, "int32")), _spec(i, "int32"))
    np.testing.assert_array_equal(back, i)


def test_small_integer_fill_values_are_json_integers():
    store: dict = {}
    a = cuzarr.create_array(store, shape=(4,), dtype="int4", fill_value=3)
    assert json.loads(store["zarr.json"])["fill_value"] == 3
    assert isinstance(json.loads(store["zarr.json"])["fill_value"], int)
    np.testing.assert_array_equal(cuzarr.open_array(store)[...].astype(int), [3, 3, 3, 3])
    assert a.fill_value == 3


def test_cast_value_of_a_uint64_fill_past_int64(tmp_path):
    filters = [{"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "clamp"}}]
    a = cuzarr.create_array(
        str(tmp_path / "a"), shape=(3,), dtype="uint64", fill_value=2**64 - 5, filters=filters
    )
    a[1] = 7
    z = zarr.create_array(
        str(tmp_path / "z"), shape=(3,), dtype="uint64", fill_value=2**64 - 5, filters=filters
    )
    z[1] = 7
    # the fill elements of the written chunk clamp to 255, in both libraries
    np.testing.assert_array_equal(a[...], np.array([255, 7, 255], dtype="uint64"))
    np.testing.assert_array_equal(z[...], a[...])
    zero_d = np.array(2**64 - 5, dtype="uint64")
    got = CastValueCodec("uint8", out_of_range="clamp").encode(zero_d, _spec(zero_d, "uint64"))
    assert got.shape == () and got == 255


def test_cast_value_to_a_type_without_zero_or_negatives():
    x = np.array([0.0, -1.0, 2.0**-128, 4.0])
    spec = _spec(x, "float64")
    with pytest.raises(CodecError, match="outside the range of float8_e8m0fnu"):
        CastValueCodec("float8_e8m0fnu").encode(x, spec)
    got = CastValueCodec("float8_e8m0fnu", out_of_range="clamp").encode(x, spec)
    np.testing.assert_array_equal(got.astype(np.float64), [2.0**-127, 2.0**-127, 2.0**-127, 4.0])


def test_scale_offset_takes_big_endian_input():
    x = np.array([1.5, -2.0, 7.25], dtype=">f8")
    c = ScaleOffsetCodec(0.5, 4.0)
    enc = c.encode(x, _spec(x, "float64"))
    np.testing.assert_array_equal(enc, (x.astype("<f8") - 0.5) * 4.0)
    np.testing.assert_array_equal(c.decode(enc.astype(">f8"), _spec(x, "float64")), x)
