"""Differential fuzzing of sharded arrays (``sharding_indexed``): cuzarr vs
zarr-python vs tensorstore vs a numpy model.

One random layout (1-3 dims, zero-length dims and non-dividing edges, inner
chunk and shard shapes, dtype, fill value, index location, inner codecs from
bytes/transpose/crc32c/gzip/zstd and now and then a nested sharding codec,
index codecs with or without crc32c, write_empty_chunks, ``shards=`` or an
explicit sharding serializer, zarr-python's inner-chunk write order) and one
random sequence of writes (ints, slices with steps, orthogonal, coordinate and
mask selections, whole-array writes, writes of the fill value that drop inner
chunks or whole shards, writes by each library into the OTHER's store) and
resizes, applied to a cuzarr array and a zarr-python array, each in its own
directory, and to a numpy model. After every step:

- the data each library reads from BOTH directories (whole, and random partial
  selections, negative steps included, that go through cuzarr's partial shard
  reads) equals the model, and tensorstore reads both directories alike where
  it handles the case;
- the set of stored keys, and in each shard the set of stored inner chunks and
  their decoded contents, are the same;
- shard files are byte-identical where the codecs are deterministic; a shard
  whose bytes differ only in the order of its inner chunks is spec-valid (the
  spec allows any order: zarr-python writes other orders when asked) and is
  counted in ``ORDER_ONLY``.

At the end one shard is corrupted in both stores alike (a byte of its index
flipped, bytes cut off, or emptied): cuzarr may raise nothing but CodecError,
and with a crc32c index codec (or a shard shorter than its index) both
libraries must raise.

Known and accepted:
- after a shrink and a grow, cells of shards that were cut, not deleted, keep
  their old values (as in tests/test_mutation_fuzz.py); there the model knows
  nothing and only cuzarr == zarr-python is checked;
- zarr-python's gzip writes the time into its header: no byte comparison;
- python-zstandard and numcodecs may emit different valid zstd frames at one
  level (``ZSTD_DIFF``);
- nested sharding with write_empty_chunks: zarr-python stores only the nested
  chunks a write touches, cuzarr all of them (``NESTED_WEC``; decoded alike);
- tensorstore refuses bytes->bytes codecs after a nested sharding codec (the
  spec allows them) and fixed-length string dtypes: skipped there.

The seeded tests below are bounded; for long runs::

    python tests/test_sharding_fuzz.py --cases 2000 --seed 0
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import cuzarr
from _interop_helpers import resize_as_cuzarr
from cuzarr.codecs.base import ChunkSpec
from cuzarr.codecs.sharding import ShardingCodec
from cuzarr.errors import CodecError

try:  # optional third reader
    import tensorstore as ts
except ImportError:  # pragma: no cover
    ts = None

DTYPES = ["i1", "u1", "u2", "i4", "i8", "f2", "f4", "f8", "bool", "c8", "c16", "S3", "U2"]

ORDER_ONLY: list[str] = []
ZSTD_DIFF: list[str] = []
NESTED_WEC: list[str] = []
TS_SKIPPED: list[str] = []
STATS = {"cases": 0, "steps": 0, "partial_reads": 0, "byte_compares": 0, "corruptions": 0}


# ------------------------------------------------------------------------ helpers


def same(x: Any, y: Any) -> bool:
    """Equal arrays, NaN == NaN (complex too), same shape."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return False
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        return bool(
            np.all(
                (x == y)
                | (np.isnan(x.real) & np.isnan(y.real))
                | (np.isnan(x.imag) & np.isnan(y.imag))
            )
            if x.dtype.kind == "c" or y.dtype.kind == "c"
            else np.all((x == y) | (np.isnan(x) & np.isnan(y)))
        )
    return bool(np.array_equal(x, y))


def first_diffs(x: Any, y: Any) -> Any:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return f"shapes {x.shape} != {y.shape}"
    bad = np.ones(x.shape, bool)
    for p in np.ndindex(*x.shape):
        bad[p] = not same(x[p], y[p])
    return [(p.tolist(), x[tuple(p)], y[tuple(p)]) for p in np.argwhere(bad)[:5]]


def stored(root: Path) -> dict[str, bytes]:
    """Chunk keys (relative, '/'-joined) and their bytes; metadata left out."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            rel = p.relative_to(root).as_posix()
            if rel != "zarr.json":
                out[rel] = p.read_bytes()
    return out


# ------------------------------------------------------------------------ layouts


def random_inner_codecs(
    rng: np.random.Generator, ndim: int, dtype: str, inner: tuple[int, ...]
) -> tuple[list, bool]:
    """Inner codec JSON and whether their output is deterministic across libraries."""
    codecs: list[Any] = []
    if ndim > 1 and rng.random() < 0.3:
        codecs.append(
            {"name": "transpose", "configuration": {"order": rng.permutation(ndim).tolist()}}
        )
    kind, size = np.dtype(dtype).kind, np.dtype(dtype).itemsize
    if (size > 1 and kind != "S") or kind == "U":  # endian only where bytes have an order
        codecs.append(
            {"name": "bytes", "configuration": {"endian": str(rng.choice(["little", "big"]))}}
        )
    else:
        codecs.append({"name": "bytes"})
    if rng.random() < 0.08 and all(c % 2 == 0 for c in inner):
        # nested sharding: the inner chunks are shards themselves
        nested = {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [c // 2 for c in inner],
                "codecs": codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_location": str(rng.choice(["start", "end"])),
            },
        }
        codecs = [nested]
    b2b: list[Any] = []
    r = rng.random()
    if r < 0.25:
        b2b.append({"name": "gzip", "configuration": {"level": int(rng.integers(0, 10))}})
    elif r < 0.55:
        b2b.append(
            {
                "name": "zstd",
                "configuration": {
                    "level": int(rng.integers(-2, 8)),
                    "checksum": bool(rng.random() < 0.5),
                },
            }
        )
    if rng.random() < 0.35:
        b2b.insert(int(rng.integers(0, len(b2b) + 1)), {"name": "crc32c"})
    # zarr-python's gzip writes the time into the gzip header: not byte-comparable
    return codecs + b2b, not any(c["name"] == "gzip" for c in b2b)


def random_layout(rng: np.random.Generator) -> dict[str, Any]:
    ndim = int(rng.integers(1, 4))
    inner = tuple(int(rng.integers(1, 4 if ndim > 1 else 6)) for _ in range(ndim))
    mult = tuple(int(rng.integers(1, 4)) for _ in range(ndim))
    shard = tuple(c * m for c, m in zip(inner, mult, strict=True))
    shape = tuple(0 if rng.random() < 0.08 else int(rng.integers(1, 2 * s + 3)) for s in shard)
    dtype = str(rng.choice(DTYPES))
    kind = np.dtype(dtype).kind
    fills: list[Any] = [None, "zero", "other"]
    if kind in "fc":
        fills.append("nan")
    fill = fills[int(rng.integers(0, len(fills)))]
    codecs, deterministic = random_inner_codecs(rng, ndim, dtype, inner)
    r = rng.random()
    index_codecs: list[Any]
    if r < 0.5:
        index_codecs = [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "crc32c"},
        ]
    elif r < 0.75:
        index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    else:
        index_codecs = [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "crc32c"}]
    return {
        "shape": shape,
        "inner": inner,
        "shard": shard,
        "dtype": dtype,
        "fill": fill,
        "codecs": codecs,
        "index_codecs": index_codecs,
        "index_location": str(rng.choice(["start", "end"])),
        "wec": bool(rng.random() < float(os.environ.get("SHFUZZ_WEC", "0.35"))),
        # shards= with default index codecs, or an explicit sharding serializer
        "via_shards_kw": bool(rng.random() < 0.25) and codecs[0]["name"] != "sharding_indexed",
        "deterministic": deterministic,
        # zarr-python's layout of inner chunks in its shards (all spec-valid)
        "zarr_order": str(
            rng.choice(
                ["morton", "lexicographic", "colexicographic", "unordered"], p=[0.7, 0.1, 0.1, 0.1]
            )
        ),
    }


def fill_value(lay: dict[str, Any]) -> Any:
    f, dt = lay["fill"], lay["dtype"]
    if f is None:
        return None
    if dt == "bool":
        return f == "other"
    if dt.startswith("S"):
        return b"" if f == "zero" else b"ab"
    if dt.startswith("U"):
        return "" if f == "zero" else "x"
    if f == "nan":
        return float("nan")
    if f == "zero":
        return 0
    return 7


def create_kwargs(lay: dict[str, Any], lib: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"shape": lay["shape"], "dtype": lay["dtype"]}
    f = fill_value(lay)
    if f is not None:
        kw["fill_value"] = f
    if lay["via_shards_kw"]:
        # inner codecs through filters/serializer/compressors; default index codecs
        codecs = lay["codecs"]
        kw["chunks"] = lay["inner"]
        kw["shards"] = lay["shard"]
        kw["filters"] = [c for c in codecs if c["name"] == "transpose"]
        kw["serializer"] = next(c for c in codecs if c["name"] == "bytes")
        kw["compressors"] = [c for c in codecs if c["name"] not in ("transpose", "bytes")]
    else:
        kw["chunks"] = lay["shard"]
        kw["compressors"] = None
        kw["filters"] = None
        if lib == "zarr":
            kw["serializer"] = zarr.codecs.ShardingCodec(
                chunk_shape=lay["inner"],
                codecs=lay["codecs"],
                index_codecs=lay["index_codecs"],
                index_location=lay["index_location"],
                subchunk_write_order=lay["zarr_order"],
            )
        else:
            kw["serializer"] = ShardingCodec(
                lay["inner"], lay["codecs"], lay["index_codecs"], lay["index_location"]
            )
    if lay["wec"]:
        if lib == "cuzarr":
            kw["write_empty_chunks"] = True
        else:
            kw["config"] = {"write_empty_chunks": True}
    return kw


def random_values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], fill: Any) -> Any:
    r = rng.random()
    if r < 0.2:
        return fill  # a scalar fill: inner chunks / shards may become empty
    shp: tuple[int, ...] = () if r < 0.28 else shape
    n = int(np.prod(shp))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        v = rng.random(n) < 0.5
    elif dt.kind == "S":
        v = np.array([b"", b"a", b"ab", b"xyz", b"\x00b"], dtype="S3")[rng.integers(0, 5, n)]
    elif dt.kind == "U":
        v = np.array(["", "a", "x", "zz", "\u00e9"], dtype="U2")[rng.integers(0, 5, n)]
    elif dt.kind == "u":
        v = rng.integers(0, 100, n)
    elif dt.kind == "i":
        v = rng.integers(-50, 50, n)
    elif dt.kind == "f":
        v = rng.integers(-5, 5, n).astype("f8")
        v[rng.random(n) < 0.15] = np.nan
    else:
        v = rng.integers(-5, 5, n) + 1j * rng.integers(-5, 5, n)
        v[rng.random(n) < 0.1] = complex(np.nan, 0)
    v = np.asarray(v).astype(dt)
    if n and rng.random() < 0.5:
        v[rng.random(n) < 0.6] = fill
    v = v.reshape(shp)
    return v[()] if shp == () else v


def random_basic_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    sel: list[Any] = []
    for s in shape:
        r = rng.random()
        if s and r < 0.2:
            sel.append(int(rng.integers(-s, s)))
        elif r < 0.35:
            sel.append(slice(None))
        else:
            a = int(rng.integers(0, s + 1))
            b = int(rng.integers(a, s + 2))
            step = int(rng.choice([1, 1, 1, 2, 3]))
            sel.append(slice(a, b, step))
    return tuple(sel)


def random_orthogonal_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    sel: list[Any] = []
    for s in shape:
        if s and rng.random() < 0.6:
            k = int(rng.integers(1, min(s, 4) + 1))
            sel.append(np.sort(rng.choice(s, size=k, replace=False)))
        else:
            sel.append(slice(None))
    return tuple(sel)


# ------------------------------------------------------------------------ the case


class Case:
    def __init__(self, lay: dict[str, Any], tmp: Path, rng: np.random.Generator) -> None:
        self.lay = lay
        self.rng = rng
        self.cdir, self.zdir = tmp / "c", tmp / "z"
        self.log: list[str] = [f"layout {lay}"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.z = zarr.create_array(str(self.zdir), **create_kwargs(lay, "zarr"))
        self.a = cuzarr.create_array(str(self.cdir), **create_kwargs(lay, "cuzarr"))
        zmeta = json.loads((self.zdir / "zarr.json").read_text())
        cmeta = json.loads((self.cdir / "zarr.json").read_text())
        for k in ("codecs", "data_type", "chunk_grid", "shape"):
            assert zmeta[k] == cmeta[k], self.fail(
                f"metadata {k}: zarr {zmeta[k]} cuzarr {cmeta[k]}"
            )
        fz, fc = self.z.fill_value, self.a.fill_value
        assert same(np.asarray(fz, dtype=lay["dtype"]), np.asarray(fc, dtype=lay["dtype"])), (
            self.fail(f"fill_value zarr {fz!r} cuzarr {fc!r}")
        )
        self.fill = np.asarray(fz, dtype=lay["dtype"])[()]
        self.model = np.full(lay["shape"], self.fill, dtype=lay["dtype"])
        self.known = np.ones(lay["shape"], bool)
        self.shrunk = False

    def fail(self, msg: str) -> str:
        return msg + "\n  " + "\n  ".join(self.log[:1] + self.log[1:][-12:])

    # -- operations
    def write(self, sel: Any, value: Any, how: str = "basic", cross: bool = False) -> None:
        """Write through both libraries, each into its own store or (``cross``)
        into the other's, through a fresh handle."""
        self.log.append(f"{how} write {'(crossed) ' if cross else ''}{sel!r} = {value!r}")
        a, z = self.a, self.z
        if cross:
            cfg = {"write_empty_chunks": self.lay["wec"]}
            a = cuzarr.open_array(str(self.zdir), mode="r+", config=cfg)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                z = zarr.open_array(str(self.cdir), mode="r+", config=cfg)
        if how in ("vindex", "mask"):
            a.vindex[sel] = value
            z.vindex[sel] = value
            self.model[sel] = value
            self.known[sel] = True
        elif how == "oindex":
            a.oindex[sel] = value
            z.oindex[sel] = value
            self.model[
                np.ix_(*[np.arange(s)[x] for s, x in zip(self.model.shape, sel, strict=True)])
            ] = value
            self.known[
                np.ix_(*[np.arange(s)[x] for s, x in zip(self.model.shape, sel, strict=True)])
            ] = True
        else:
            a[sel] = value
            z[sel] = value
            self.model[sel] = value
            self.known[sel] = True

    def resize(self, new_shape: tuple[int, ...]) -> None:
        self.log.append(f"resize {self.model.shape} -> {new_shape}")
        self.a.resize(new_shape)
        resize_as_cuzarr(self.z, new_shape)
        old = self.model
        if any(n < o for n, o in zip(new_shape, old.shape, strict=True)):
            self.shrunk = True
        model = np.full(new_shape, self.fill, dtype=old.dtype)
        known = np.zeros(new_shape, bool) if self.shrunk else np.ones(new_shape, bool)
        common = tuple(slice(0, min(n, o)) for n, o in zip(new_shape, old.shape, strict=True))
        model[common] = old[common]
        known[common] = self.known[common]
        self.model, self.known = model, known

    # -- comparisons
    def read_all(self) -> dict[str, np.ndarray]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reads = {
                "cuzarr handle": self.a[...],
                "cuzarr<-cuzarr store": cuzarr.open_array(str(self.cdir), mode="r")[...],
                "cuzarr<-zarr store": cuzarr.open_array(str(self.zdir), mode="r")[...],
                "zarr handle": self.z[...],
                "zarr<-cuzarr store": zarr.open_array(str(self.cdir), mode="r")[...],
            }
        return reads

    def check(self, step: str) -> None:
        self.log.append(f"check after {step}")
        STATS["steps"] += 1
        reads = self.read_all()
        ref = reads["zarr handle"]
        for name, got in reads.items():
            assert same(got, ref), self.fail(f"{name} != zarr handle: {first_diffs(got, ref)}")
        k = self.known
        assert same(ref[k], self.model[k]), self.fail(
            f"zarr != model: {first_diffs(np.where(k, ref, self.model), self.model)}"
        )
        self.check_partial_reads(ref)
        self.check_tensorstore(ref)
        self.check_stored()

    def check_partial_reads(self, ref: np.ndarray) -> None:
        shape = ref.shape
        if 0 in shape:
            return
        ca = cuzarr.open_array(str(self.cdir), mode="r")
        cz = cuzarr.open_array(str(self.zdir), mode="r")
        for _ in range(3):
            sel = random_basic_selection(self.rng, shape)
            want = ref[sel]
            for name, arr in (("cuzarr store", ca), ("zarr store", cz)):
                got = arr[sel]
                assert same(got, want), self.fail(
                    f"partial read {sel!r} of {name}: {first_diffs(got, want)}"
                )
            nsel = tuple(
                slice(None, None, -int(self.rng.integers(1, 4))) if isinstance(x, slice) else x
                for x in sel
            )
            got = cz[nsel]
            assert same(got, ref[nsel]), self.fail(
                f"negative-step read {nsel!r}: {first_diffs(got, ref[nsel])}"
            )
            osel = random_orthogonal_selection(self.rng, shape)
            want = ref[np.ix_(*[np.arange(s)[x] for s, x in zip(shape, osel, strict=True)])]
            got = cz.oindex[osel]
            assert same(got, want), self.fail(f"oindex read {osel!r}: {first_diffs(got, want)}")
            STATS["partial_reads"] += 3

    def check_tensorstore(self, ref: np.ndarray) -> None:
        if ts is None:
            return
        if np.dtype(self.lay["dtype"]).kind in "SU":
            TS_SKIPPED.append(self.lay["dtype"])
            return
        codecs = self.lay["codecs"]
        if codecs[0]["name"] == "sharding_indexed" and len(codecs) > 1:
            # tensorstore refuses bytes->bytes codecs after a (nested) sharding
            # codec; the spec allows them
            TS_SKIPPED.append("nested sharding + bytes->bytes")
            return
        for d in (self.cdir, self.zdir):
            t = ts.open(
                {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(d)}},
                open=True,
                read=True,
            ).result()
            got = t.read().result()
            assert same(got, ref), self.fail(f"tensorstore <- {d.name}: {first_diffs(got, ref)}")

    def check_stored(self) -> None:
        cs, zs = stored(self.cdir), stored(self.zdir)
        assert sorted(cs) == sorted(zs), self.fail(
            f"stored keys: cuzarr only {sorted(set(cs) - set(zs))}, zarr only {sorted(set(zs) - set(cs))}"
        )
        codec = self.a._async_array._shard_codec or self.a._async_array.metadata.codecs[0]
        shard_shape = tuple(self.lay["shard"])
        spec = ChunkSpec(
            shard_shape, self.a._async_array.metadata.dtype, self.a._async_array.metadata.read_fill
        )
        inner = codec.inner_pipeline(spec)
        for key in cs:
            STATS["byte_compares"] += 1
            if cs[key] == zs[key]:
                continue
            parts = []
            for data in (cs[key], zs[key]):
                index, mv = codec.split(data, shard_shape)
                parts.append(
                    {
                        c: bytes(mv[int(o) : int(o) + int(n)])
                        for c in np.ndindex(*index.shape[:-1])
                        for o, n in [index[c]]
                        if o != 2**64 - 1
                    }
                )
            chunks_c, chunks_z = parts
            assert sorted(chunks_c) == sorted(chunks_z), self.fail(
                f"shard {key}: inner chunks stored: cuzarr only {sorted(set(chunks_c) - set(chunks_z))}"
                f", zarr only {sorted(set(chunks_z) - set(chunks_c))}"
            )
            for c in chunks_c:
                dc = inner.decode(chunks_c[c], codec.chunk_shape)
                dz = inner.decode(chunks_z[c], codec.chunk_shape)
                assert same(dc, dz), self.fail(
                    f"shard {key} inner chunk {c}: {first_diffs(dc, dz)}"
                )
            if not self.lay["deterministic"]:
                continue
            if self.lay["wec"] and self.lay["codecs"][0]["name"] == "sharding_indexed":
                # nested shards with write_empty_chunks: zarr-python stores only the
                # nested chunks a write touches, cuzarr every one (decoded alike)
                NESTED_WEC.append(key)
                continue
            if chunks_c != chunks_z and any(c["name"] == "zstd" for c in self.lay["codecs"]):
                # python-zstandard (small inputs) and numcodecs' libzstd may emit
                # different, equally valid frames at the same level; decoded alike
                ZSTD_DIFF.append(key)
                continue
            assert chunks_c == chunks_z, self.fail(f"shard {key}: inner chunk bytes differ")
            assert len(cs[key]) == len(zs[key]), self.fail(f"shard {key}: sizes differ")
            ORDER_ONLY.append(key)

    def check_corruption(self) -> None:
        """Corrupt one shard in both stores alike: flip a byte of its index, cut
        bytes off its index's end of the file, or empty it. cuzarr may only raise
        CodecError (or read on, where nothing can tell: no crc32c); with a crc32c
        index codec, or a shard shorter than its index, both libraries raise."""
        lay = self.lay
        names = (
            ["bytes", "crc32c"]
            if lay["via_shards_kw"]
            else [c["name"] for c in lay["index_codecs"]]
        )
        cs = stored(self.cdir)
        if not cs:
            return
        key = sorted(cs)[int(self.rng.integers(0, len(cs)))]
        codec = self.a._async_array._shard_codec or self.a._async_array.metadata.codecs[0]
        n_index = codec.index_nbytes(tuple(lay["shard"]))
        loc = "end" if lay["via_shards_kw"] else lay["index_location"]
        mode = str(self.rng.choice(["flip", "flip", "cut", "empty"]))
        cut = int(self.rng.integers(1, n_index + 8))
        at = int(self.rng.integers(0, n_index))
        for d in (self.cdir, self.zdir):
            p = d / key
            data = bytearray(p.read_bytes())
            if mode == "flip":
                base = 0 if loc == "start" else len(data) - n_index
                data[base + at] ^= 0x20
            elif mode == "cut":
                data = data[cut:] if loc == "start" else data[: max(0, len(data) - cut)]
            else:
                data = bytearray()
            p.write_bytes(bytes(data))
        must_raise = "crc32c" in names or mode == "empty" or len(data) < n_index
        STATS["corruptions"] += 1
        self.log.append(f"corrupted {key}: {mode} (cut {cut}, at {at}), must raise: {must_raise}")
        coords = tuple(int(c) for c in key.split("/")[1:])
        region = tuple(
            slice(c * s, min((c + 1) * s, n))
            for c, s, n in zip(coords, lay["shard"], self.model.shape, strict=True)
        )
        one = tuple(slice(r.start, r.start + 1) for r in region)
        for d in (self.cdir, self.zdir):
            for sel in (region, one, Ellipsis):
                try:
                    cuzarr.open_array(str(d), mode="r")[sel]
                except CodecError:
                    pass
                except Exception as e:
                    raise AssertionError(
                        self.fail(f"cuzarr raised {e!r} reading {sel} of {d.name}")
                    ) from e
                else:
                    assert not must_raise, self.fail(f"cuzarr read {sel} of corrupt {d.name}")
                if must_raise:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        with pytest.raises(Exception):  # noqa: B017 - zarr raises its own types
                            zarr.open_array(str(d), mode="r")[sel]


def run_case(seed: int, tmp: Path, steps: int = 8) -> None:
    rng = np.random.default_rng(seed)
    lay = random_layout(rng)
    case = Case(lay, tmp, rng)
    case.check("create")
    dtype = lay["dtype"]
    for i in range(steps):
        shape = case.model.shape
        r = rng.random()
        if r < 0.45:
            sel = random_basic_selection(rng, shape)
            tshape = case.model[sel].shape
            case.write(sel, random_values(rng, dtype, tshape, case.fill), cross=rng.random() < 0.3)
        elif r < 0.6:
            sel = random_orthogonal_selection(rng, shape)
            tshape = case.model[
                np.ix_(*[np.arange(s)[x] for s, x in zip(shape, sel, strict=True)])
            ].shape
            case.write(sel, random_values(rng, dtype, tshape, case.fill), "oindex")
        elif r < 0.64 and case.model.size:
            n = int(rng.integers(1, min(case.model.size, 6) + 1))
            flat = rng.choice(case.model.size, size=n, replace=False)
            sel = np.unravel_index(flat, shape)
            case.write(sel, random_values(rng, dtype, (n,), case.fill), "vindex")
        elif r < 0.67 and case.model.size:
            mask = rng.random(shape) < 0.3
            case.write(mask, random_values(rng, dtype, (int(mask.sum()),), case.fill), "mask")
        elif r < 0.72:
            case.write(Ellipsis, random_values(rng, dtype, shape, case.fill))
        elif r < 0.85:
            # fill over a whole shard-aligned region: drops inner chunks / shards
            sel = []
            for s, sh in zip(shape, lay["shard"], strict=True):
                n = -(-s // sh)
                a = int(rng.integers(0, n + 1))
                b = int(rng.integers(a, n + 1))
                unit = sh if rng.random() < 0.6 else lay["inner"][len(sel)]
                sel.append(slice(a * unit, b * unit))
            case.write(tuple(sel), case.fill)
        else:
            new = tuple(
                max(0, s + int(rng.integers(-sh, sh + 1)))
                for s, sh in zip(shape, lay["shard"], strict=True)
            )
            case.resize(new)
        case.check(f"step {i}")
    case.check_corruption()
    STATS["cases"] += 1


# ------------------------------------------------------------------------ tests


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("seed", range(120))
def test_sharding_fuzz(tmp_path, seed):
    run_case(seed, tmp_path, steps=6)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("seed", range(5000, 5040))
def test_sharding_fuzz_inner_chunks_coded_in_parallel(tmp_path, monkeypatch, seed):
    """The same fuzzing with every shard's inner chunks encoded and decoded by
    several worker loops at once (``workers.share``), whatever their size."""
    from cuzarr.codecs import sharding

    monkeypatch.setattr(sharding, "SHARE_MIN_NBYTES", 0)
    run_case(seed, tmp_path, steps=6)


@pytest.mark.parametrize("index_location", ["start", "end"])
def test_write_empty_chunks_stores_only_touched_inner_chunks_like_zarr(tmp_path, index_location):
    """write_empty_chunks=True keeps fill-valued inner chunks a write touches, but
    a write into a new (or cut, edge) shard stored every inner chunk of it: ones
    the selection never reached and ones wholly past the array end. zarr-python
    stores only the touched inner chunks."""
    kw = dict(shape=(5, 7), chunks=(4, 6), dtype="i2", fill_value=3, compressors=None, filters=None)
    z = zarr.create_array(
        tmp_path / "z",
        serializer=zarr.codecs.ShardingCodec(chunk_shape=(2, 2), index_location=index_location),
        config={"write_empty_chunks": True},
        **kw,
    )
    a = cuzarr.create_array(
        tmp_path / "c",
        serializer=ShardingCodec((2, 2), index_location=index_location),
        write_empty_chunks=True,
        **kw,
    )
    for arr in (z, a):
        arr[0, 0] = 1  # one inner chunk of a new shard
        arr[4, 6] = 3  # the fill, into the corner shard cut by the array's end
        arr[4:, :2] = 5  # a cut shard: its inner chunks of rows 6-7 lie past the end
    codec = a._async_array._shard_codec
    zs, cs = stored(tmp_path / "z"), stored(tmp_path / "c")
    assert sorted(cs) == sorted(zs) == ["c/0/0", "c/1/0", "c/1/1"]
    for key in cs:
        present = [
            {c for c in np.ndindex(2, 3) if codec.split(d, (4, 6))[0][c][0] != 2**64 - 1}
            for d in (cs[key], zs[key])
        ]
        assert present[0] == present[1], (key, present)
        assert cs[key] == zs[key], key
    assert codec.split(cs["c/1/1"], (4, 6))[0][0, 0, 0] != 2**64 - 1  # a touched fill chunk


@pytest.mark.parametrize("mask", [False, True])
def test_pointwise_write_touches_only_the_inner_chunks_of_its_points(tmp_path, mask):
    """A vindex (or mask) write into a stored shard re-encoded every inner chunk
    in the product of the points' rows and columns; with write_empty_chunks the
    untouched ones, equal to the fill, were then stored (zarr-python: not)."""
    kw = dict(shape=(2, 2), chunks=(2, 2), dtype="f4", fill_value=7.0, compressors=None)
    z = zarr.create_array(
        tmp_path / "z",
        serializer=zarr.codecs.ShardingCodec(chunk_shape=(1, 1)),
        config={"write_empty_chunks": True},
        **kw,
    )
    a = cuzarr.create_array(
        tmp_path / "c", serializer=ShardingCodec((1, 1)), write_empty_chunks=True, **kw
    )
    sel = np.array([[False, True], [True, False]]) if mask else ([1, 0], [0, 1])
    for arr in (z, a):
        arr[0, 0] = 1.0
        arr.vindex[sel] = [2.0, 7.0]
    codec = a._async_array._shard_codec
    zs, cs = stored(tmp_path / "z"), stored(tmp_path / "c")
    present = [
        {c for c in np.ndindex(2, 2) if codec.split(d["c/0/0"], (2, 2))[0][c][0] != 2**64 - 1}
        for d in (cs, zs)
    ]
    assert present[0] == present[1] == {(0, 0), (0, 1), (1, 0)}
    assert cs == zs
    np.testing.assert_array_equal(a[...], z[...])


def _one_shard_without_index_checksum(tmp_path, location: str):
    """An 8-element i4 array in one shard of 4 inner chunks, index codecs
    ``bytes`` only (no crc32c) at ``location``; the shard file's path."""
    a = cuzarr.create_array(
        tmp_path / "c",
        shape=(8,),
        chunks=(8,),
        dtype="i4",
        compressors=None,
        serializer=ShardingCodec((2,), None, [{"name": "bytes"}], location),
    )
    a[...] = np.arange(8)
    return tmp_path / "c" / "c" / "0"


@pytest.mark.parametrize("sel", [slice(0, 1), slice(None)])
def test_corrupt_index_without_checksum_raises_codec_error(tmp_path, sel):
    """An index without crc32c, shifted by a byte (a shard cut at its start),
    holds exabyte-sized ranges: reading one asked the local store for them and
    raised MemoryError; it is a CodecError (the range is read short, or the
    shifted entries overlap)."""
    shard = _one_shard_without_index_checksum(tmp_path, "start")
    shard.write_bytes(shard.read_bytes()[1:])
    with pytest.raises(CodecError, match=r"could not be read in full|overlapping"):
        cuzarr.open_array(tmp_path / "c", mode="r")[sel]


@pytest.mark.parametrize("sel", [slice(0, 1), slice(None)])
def test_index_offset_past_2_63_raises_codec_error(tmp_path, sel):
    """An index (no crc32c) whose offset has its top bit set: a partial read
    passed it to os.preadv and raised OverflowError; it is a CodecError."""
    shard = _one_shard_without_index_checksum(tmp_path, "end")
    data = bytearray(shard.read_bytes())
    data[len(data) - 64 + 7] ^= 0x80  # the high byte of inner chunk 0's offset
    shard.write_bytes(bytes(data))
    with pytest.raises(CodecError, match="past the end"):
        cuzarr.open_array(tmp_path / "c", mode="r")[sel]


# ------------------------------------------------------------------------ long runs


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args(argv)
    failures = 0
    for s in range(args.seed, args.seed + args.cases):
        tmp = Path(tempfile.mkdtemp(prefix="shfuzz"))
        try:
            run_case(s, tmp, args.steps)
        except Exception as e:
            failures += 1
            print(f"--- seed {s}: {type(e).__name__}: {e}"[:3000])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        STATS,
        f"failures={failures}",
        f"order-only shards={len(ORDER_ONLY)}",
        f"zstd frame differences={len(ZSTD_DIFF)}",
        f"tensorstore skipped={len(TS_SKIPPED)}",
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
