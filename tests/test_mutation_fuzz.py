"""Differential fuzzing of mutation sequences: cuzarr vs zarr-python vs a numpy model.

One random layout, one random sequence of mutations (writes through basic,
orthogonal, coordinate and mask selections, resizes, appends, attribute
changes, reopening), applied to a cuzarr array, a zarr-python array (each in
its own directory) and a numpy model. After every step: the data each library
reads from BOTH directories, the metadata documents field by field, and the
set of stored chunk keys must agree.

Hierarchies get the same treatment (groups, arrays, attributes,
``consolidate_metadata``, further changes, deletes, ``require_array``), compared
through ``open_consolidated`` and plain opens, by both libraries, of both stores.

Known and accepted: after a shrink then a grow, chunks that were partly cut
keep their old values (zarr-python and tensorstore do the same); there the
model knows nothing and only cuzarr == zarr-python is checked.

The seeded tests below are bounded; for long runs::

    python tests/test_mutation_fuzz.py --arrays 3000 --groups 1000 --seed 0
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr

import cuzarr
from _interop_helpers import resize_as_cuzarr

META_NAMES = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}

DTYPES = ["i2", "u1", "f4", "f8", "bool", "c8", "c16", "M8[s]", "m8[ms]", "U3", "str"]


ZARR_ISSUES: list[str] = []
SKIPS: list[str] = []
CUZARR_ONLY: list[int] = []
BOTH_RAISED: list[str] = []
STALE_ZARR_HANDLES: list[int] = []



def _pick(rng: np.random.Generator, ops: list) -> Any:
    """One operation of ``ops`` ((operation, weight) pairs), drawn by weight."""
    w = np.array([p for _, p in ops], float)
    return ops[int(rng.choice(len(ops), p=w / w.sum()))][0]

class Skip(Exception):
    """zarr-python cannot build this layout: not a cuzarr bug."""


# ------------------------------------------------------------------------ helpers


def stored_keys(root: Path) -> set[str]:
    out = set()
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n in META_NAMES or n.startswith(".cuzarr"):
                continue
            out.add(str((Path(dirpath) / n).relative_to(root)).replace(os.sep, "/"))
    return out


def meta_docs(root: Path) -> dict[str, Any]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n in META_NAMES:
                p = Path(dirpath) / n
                doc = json.loads(p.read_text())
                if n == ".zattrs" and doc == {}:
                    continue  # zarr-python writes an empty .zattrs, cuzarr none: same attrs
                rel = str(p.relative_to(root))
                if rel != n and n == ".zmetadata":
                    continue  # zarr-python writes one at subgroups deleting members
                if rel != n and n == "zarr.json":
                    doc.pop("consolidated_metadata", None)  # (v3: the same)
                cm = doc.get("consolidated_metadata") if n == "zarr.json" else None
                for entry in ((cm or {}).get("metadata") or {}).values():
                    # zarr-python gives every subgroup entry an empty nested
                    # consolidated_metadata; cuzarr writes none
                    if entry.get("node_type") == "group":
                        entry.pop("consolidated_metadata", None)
                if n == ".zmetadata":
                    md = doc.get("metadata", {})
                    for k in list(md):
                        if k.endswith(".zattrs") and md[k] == {}:
                            del md[k]
                        elif k.endswith(".zgroup") and isinstance(md[k], dict):
                            # zarr-python puts a (non-spec) consolidated_metadata
                            # key into subgroups' .zgroup entries
                            md[k].pop("consolidated_metadata", None)
                out[str(p.relative_to(root)).replace(os.sep, "/")] = doc
    return out


def diff_docs(a: Any, b: Any, path: str = "") -> list[str]:
    """Field-by-field differences of two JSON documents."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}/{k}: missing in cuzarr (zarr: {b[k]!r})")
            elif k not in b:
                out.append(f"{path}/{k}: missing in zarr (cuzarr: {a[k]!r})")
            else:
                out += diff_docs(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += diff_docs(x, y, f"{path}[{i}]")
        return out
    if a != b and not (a != a and b != b):  # NaN
        return [f"{path}: cuzarr {a!r} != zarr {b!r}"]
    return []


def same_data(x: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None) -> bool:
    x = np.asarray(x)
    y = np.asarray(y)
    if x.shape != y.shape:
        return False
    if mask is not None:
        x = x[mask]
        y = y[mask]
    if x.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    if x.dtype.kind in "mM":
        return bool(np.all((x == y) | (np.isnat(x) & np.isnat(y))))
    return bool(np.array_equal(x, y))


def where_differ(x: Any, y: Any) -> Any:
    """The first few positions where two same-shaped arrays differ (NaN == NaN)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return f"shapes {x.shape} / {y.shape}"
    if x.dtype.kind in "fc":
        bad = ~((x == y) | (np.isnan(x) & np.isnan(y)))
    elif x.dtype.kind in "mM":
        bad = ~((x == y) | (np.isnat(x) & np.isnat(y)))
    else:
        bad = x != y
    return [(tuple(int(i) for i in p), x[tuple(p)], y[tuple(p)]) for p in np.argwhere(bad)[:6]]


# ------------------------------------------------------------------------ layouts


def random_layout(rng: np.random.Generator, rectilinear: bool = True) -> dict[str, Any]:
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(0, 9)) for _ in range(ndim))
    dtype = str(rng.choice(DTYPES))
    fmt = int(rng.choice([2, 3]))
    chunks = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
    lay: dict[str, Any] = {
        "fmt": fmt,
        "shape": shape,
        "dtype": dtype,
        "chunks": chunks,
        "shards": None,
        "order": str(rng.choice(["C", "F"])),
        "wec": bool(rng.random() < 0.4),
        "comp": str(rng.choice(["none", "zstd", "auto"])),
        "key": None,
        "fill": "default",
        "rect": None,
    }
    kind = np.dtype(dtype).kind if dtype != "str" else "T"
    fills = ["default", "zero", "nonzero"]
    if kind in "fc":
        fills.append("nan")
    lay["fill"] = str(rng.choice(fills))
    if fmt == 2:
        lay["key"] = str(rng.choice([".", "/"]))
    else:
        lay["key"] = str(rng.choice(["default/", "default.", "v2.", "v2/"]))
        r = rng.random()
        if r < 0.35:
            mult = tuple(int(rng.integers(1, 4)) for _ in range(ndim))
            lay["shards"] = tuple(c * m for c, m in zip(chunks, mult, strict=True))
            lay["index_loc"] = str(rng.choice(["start", "end"]))
        elif r < 0.5 and rectilinear:
            rect = []
            for s in shape:
                edges, tot = [], 0
                while tot < max(s, 1):
                    e = int(rng.integers(1, 5))
                    edges.append(e)
                    tot += e
                if rng.random() < 0.7 and tot > s:  # exact cover (zarr-python needs it)
                    edges[-1] -= tot - s
                    edges = [e for e in edges if e] or [1]
                rect.append(edges if rng.random() < 0.8 else int(rng.integers(1, 5)))
            lay["rect"] = rect
    return lay


def fill_for(lay: dict[str, Any]) -> Any:
    f = lay["fill"]
    dt = lay["dtype"]
    if f == "default":
        return None
    if dt == "str" or dt.startswith("U"):
        return {"zero": "", "nonzero": "ab"}.get(f)
    if dt == "bool":
        return f == "nonzero"
    if f == "nan":
        return float("nan")
    if f == "zero":
        return 0
    return 3


def model_fill(lay: dict[str, Any]) -> Any:
    """The fill value as both libraries report it (for the model's new cells)."""
    dt = lay["dtype"]
    f = fill_for(lay)
    if f is None:
        if dt == "str":
            return ""
        return np.zeros((), dtype=dt)[()]
    if dt.startswith(("M", "m")):
        return np.array(f, dtype="i8").astype(dt)[()]
    return np.array(f, dtype=np_dtype(lay))[()]


def np_dtype(lay: dict[str, Any]) -> np.dtype:
    return np.dtype(object) if lay["dtype"] == "str" else np.dtype(lay["dtype"])


def random_values(
    rng: np.random.Generator, lay: dict[str, Any], shape: tuple[int, ...], fill: Any
) -> Any:
    dt = lay["dtype"]
    r = rng.random()
    if r < 0.2:
        return fill  # scalar fill: chunks may become empty
    if r < 0.3:
        shape_s: tuple[int, ...] = ()
    else:
        shape_s = shape
    n = int(np.prod(shape_s))
    if dt == "bool":
        v = rng.random(n) < 0.5
    elif dt in ("str",) or dt.startswith("U"):
        words = np.array(["", "a", "ab", "xyz", "é", "b c"], dtype=object)
        v = words[rng.integers(0, len(words), n)]
        if dt != "str":
            v = v.astype(dt)
    elif dt.startswith(("M", "m")):
        v = rng.integers(-3, 50, n).astype(dt)
    else:
        kind = np.dtype(dt).kind
        if kind == "u":
            v = rng.integers(0, 100, n)
        elif kind == "i":
            v = rng.integers(-50, 50, n)
        elif kind == "f":
            v = rng.integers(-5, 5, n).astype("f8")
            v[rng.random(n) < 0.2] = np.nan
        else:
            v = rng.integers(-5, 5, n) + 1j * rng.integers(-5, 5, n)
            v[rng.random(n) < 0.1] = complex(np.nan, 0)
        v = v.astype(dt)
    # mix in fill-valued runs
    if n and rng.random() < 0.5:
        v[rng.random(n) < 0.6] = fill
    v = v.reshape(shape_s)
    return v[()] if shape_s == () else v


# ------------------------------------------------------------------------ array runner


def create_kwargs(lay: dict[str, Any], lib: str) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "shape": lay["shape"],
        "dtype": str if lay["dtype"] == "str" else lay["dtype"],
        "zarr_format": lay["fmt"],
        "order": lay["order"],
    }
    f = fill_for(lay)
    if f is not None:
        kw["fill_value"] = f
    if lay["rect"] is not None:
        kw["chunks"] = lay["rect"]
    else:
        kw["chunks"] = lay["chunks"]
    if lay["shards"] is not None:
        kw["shards"] = lay["shards"]
    comp = lay["comp"]
    if comp == "none":
        kw["compressors"] = None
    elif comp == "zstd":
        kw["compressors"] = (
            numcodecs.Zstd(level=1)
            if lay["fmt"] == 2
            else {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
        )
    key = lay["key"]
    if lay["fmt"] == 2:
        if lib == "cuzarr":
            kw["dimension_separator"] = key
        else:
            kw["chunk_key_encoding"] = {"name": "v2", "separator": key}
    else:
        name, sep = key[:-1], key[-1]
        kw["chunk_key_encoding"] = {"name": name, "separator": sep}
    if lay["wec"]:
        if lib == "cuzarr":
            kw["write_empty_chunks"] = True
        else:
            kw["config"] = {"write_empty_chunks": True}
    return kw


class ArrayCase:
    def __init__(self, lay: dict[str, Any], tmp: Path, rng: np.random.Generator) -> None:
        self.lay = lay
        self.rng = rng
        self.cdir = tmp / "c"
        self.zdir = tmp / "z"
        self.log: list[str] = [f"layout {lay}"]
        self.fill = model_fill(lay)
        self.model = np.full(lay["shape"], self.fill, dtype=np_dtype(lay))
        self.known = np.ones(lay["shape"], bool)
        self.shrunk = False
        self.use_zarr = True
        self.model_ok = True
        ckw = create_kwargs(lay, "cuzarr")
        zkw = create_kwargs(lay, "zarr")
        if lay["shards"] is not None and lay.get("index_loc") == "start":
            inner = self._inner_codecs()
            sc = {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(lay["chunks"]),
                    "codecs": inner,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "start",
                },
            }
            for kw in (ckw, zkw):
                kw.pop("shards")
                kw.pop("compressors", None)
                kw["chunks"] = lay["shards"]
                kw["serializer"] = sc
                kw["compressors"] = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with zarr.config.set({"array.rectilinear_chunks": True}):
                    self.z = zarr.create_array(str(self.zdir), **zkw)
            except Exception as e:
                if lay["rect"] is None:
                    raise Skip(f"zarr cannot create: {e!r}") from e
                # overflowing rectilinear edges: cuzarr and the model only
                self.use_zarr = False
                self.z = None
        self.a = cuzarr.create_array(str(self.cdir), **ckw)
        if not self.use_zarr:
            CUZARR_ONLY.append(1)
            self.fill = self.a.fill_value
            self.model[...] = self.fill
            return
        fz, fc = self.z.fill_value, self.a.fill_value
        assert same_data(np.asarray([fc], dtype=np_dtype(lay)), np.asarray([fz], np_dtype(lay))), (
            f"fill_value cuzarr {fc!r} != zarr {fz!r} for {lay}"
        )
        if fz is not None:
            self.fill = fz
            self.model[...] = fz

    def _inner_codecs(self) -> list[Any]:
        dt = self.lay["dtype"]
        ser = (
            {"name": "vlen-utf8"}
            if dt == "str"
            else {"name": "bytes", "configuration": {"endian": "little"}}
        )
        if dt == "bool" or dt == "u1":
            ser = {"name": "bytes"} if dt in ("bool", "u1") else ser
        out = [ser]
        if self.lay["comp"] != "none":
            out.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
        return out

    # -- comparison
    def check(self, step: str) -> None:
        self.log.append(step)
        lay = self.lay
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not self.use_zarr:
                reads = {
                    "cuzarr handle": self.a[...],
                    "cuzarr reopened": cuzarr.open_array(str(self.cdir), mode="r")[...],
                }
                ref = self.a[...]
            else:
                with zarr.config.set({"array.rectilinear_chunks": True}):
                    reads = {
                        "cuzarr handle": self.a[...],
                        "cuzarr<-zarr store": cuzarr.open_array(str(self.zdir), mode="r")[...],
                        "zarr handle": self.z[...],
                        "zarr<-cuzarr store": zarr.open_array(str(self.cdir), mode="r")[...],
                    }
                ref = reads["zarr handle"]
        for name, got in reads.items():
            assert np.asarray(got).shape == self.model.shape, self.fail(
                f"{name}: shape {np.asarray(got).shape} != model {self.model.shape}"
            )
            assert same_data(got, ref), self.fail(
                f"{name} != zarr handle at {where_differ(got, ref)}\n{got!r}\n{ref!r}"
            )
            assert same_data(got, self.model, self.known), self.fail(
                f"{name} != model\n{got!r}\n{self.model!r}"
            )
        if not self.use_zarr:
            assert self.a.shape == self.model.shape, self.fail("shape")
            return
        assert self.a.shape == self.z.shape == self.model.shape, self.fail("shape")
        dc = meta_docs(self.cdir)
        dz = meta_docs(self.zdir)
        d = diff_docs(dc, dz)
        assert not d, self.fail("metadata differs:\n" + "\n".join(d))
        kc, kz = stored_keys(self.cdir), stored_keys(self.zdir)
        assert kc == kz, self.fail(
            f"chunk keys differ: only cuzarr {sorted(kc - kz)}, only zarr {sorted(kz - kc)}"
        )
        assert self.a.nchunks_initialized == self.z.nchunks_initialized, self.fail(
            f"nchunks_initialized {self.a.nchunks_initialized} != {self.z.nchunks_initialized}"
        )
        assert dict(self.a.attrs) == dict(self.z.attrs), self.fail("attrs")
        _ = lay

    def fail(self, msg: str) -> str:
        return msg + "\n--- steps:\n" + "\n".join(self.log[-30:])

    # -- operations
    def _both(self, fn: Any) -> None:
        err_c = err_z = None
        try:
            fn(self.a, "c")
        except Exception as e:
            err_c = e
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if self.z is None:
                    pass  # cuzarr only: every generated operation is valid
                else:
                    with zarr.config.set({"array.rectilinear_chunks": True}):
                        fn(self.z, "z")
            except Exception as e:
                err_z = e
        if err_c is None and err_z is not None and self.model_ok:
            # numpy accepts the operation, zarr-python refuses it: a zarr-python bug
            ZARR_ISSUES.append(f"{err_z!r} <- {self.log[-1][:200]}")
            raise Skip("zarr-python refused a valid operation")
        if (err_c is None) != (err_z is None):
            raise AssertionError(self.fail(f"only one raised: cuzarr {err_c!r}, zarr {err_z!r}"))
        if err_c is not None:
            self.log.append(f"  both raised: {err_c!r} / {err_z!r}")
            BOTH_RAISED.append(f"{err_c!r} / {err_z!r}"[:200])
            raise _BothRaised()

    def random_slice(self, n: int) -> Any:
        r = self.rng.random()
        if r < 0.15 and n:
            return int(self.rng.integers(-n, n))
        start = int(self.rng.integers(0, n + 1))
        stop = int(self.rng.integers(start, n + 2))
        step = int(self.rng.choice([1, 1, 1, 2, 3]))
        return slice(start, stop, step)

    def op_basic(self) -> None:
        sel = tuple(self.random_slice(n) for n in self.model.shape)
        tshape = np.zeros(self.model.shape, bool)[sel].shape
        v = random_values(self.rng, self.lay, tshape, self.fill)
        self.log.append(f"a[{sel}] = {v!r}")

        def f(x: Any, _: str) -> None:
            x[sel] = v

        self._both(f)
        self.model[sel] = v
        self.known[sel] = True

    def op_oindex(self) -> None:
        sel = []
        for n in self.model.shape:
            r = self.rng.random()
            if r < 0.35 and n:
                k = int(self.rng.integers(1, n + 1))
                sel.append(np.sort(self.rng.choice(n, k, replace=False)))
            elif r < 0.6 and n:  # zarr-python: an empty mask on an empty dim raises
                sel.append(self.rng.random(n) < 0.5)
            else:
                s = self.random_slice(n)
                sel.append(s)
        sel_t = tuple(sel)
        np_sel = np.ix_(
            *[
                np.arange(n)[s] if not isinstance(s, int) else np.array([s])
                for s, n in zip(sel_t, self.model.shape, strict=True)
            ]
        )
        full_shape = self.model[np_sel].shape
        tshape = tuple(d for d, s in zip(full_shape, sel_t, strict=True) if not isinstance(s, int))
        v = random_values(self.rng, self.lay, tshape, self.fill)
        self.log.append(f"a.oindex[{sel_t}] = {v!r}")

        def f(x: Any, _: str) -> None:
            x.oindex[sel_t] = v

        self._both(f)
        vv = np.asarray(v, dtype=self.model.dtype) if not np.isscalar(v) else v
        if not np.isscalar(vv) and np.ndim(vv):
            vv = np.asarray(vv).reshape(full_shape)
        self.model[np_sel] = vv
        self.known[np_sel] = True

    def op_vindex(self) -> None:
        shape = self.model.shape
        if self.model.size == 0:
            return
        k = int(self.rng.integers(1, min(self.model.size, 6) + 1))
        flat = self.rng.choice(self.model.size, k, replace=False)
        coords = np.unravel_index(flat, shape)
        v = random_values(self.rng, self.lay, (k,), self.fill)
        self.log.append(f"a.vindex[{coords}] = {v!r}")

        def f(x: Any, _: str) -> None:
            x.vindex[coords] = v

        self._both(f)
        self.model[coords] = v
        self.known[coords] = True

    def op_fancy(self) -> None:
        """``a[sel] = v`` with numpy advanced indexing (index arrays or a mask,
        mixed with ints and slices): cuzarr's own path; zarr-python gets the same
        points through ``vindex``."""
        shape = self.model.shape
        if self.model.size == 0:
            return
        sel: list[Any] = []
        if self.rng.random() < 0.25:
            sel.append(self.rng.random(shape) < 0.6)  # a mask over every dimension
        else:
            adv = int(self.rng.integers(0, len(shape)))
            k = int(self.rng.integers(1, shape[adv] + 1))
            for d, n in enumerate(shape):
                if d == adv:
                    idx = self.rng.choice(n, k, replace=False)  # no repeats: order-free
                    sel.append(np.sort(idx) if self.rng.random() < 0.5 else idx)
                elif self.rng.random() < 0.3:
                    sel.append(int(self.rng.integers(0, n)))
                else:
                    sel.append(self.random_slice(n))
        sel_t = tuple(sel)
        coords = tuple(g[sel_t].reshape(-1) for g in np.indices(shape))
        if not coords[0].size:
            return
        tshape = self.model[sel_t].shape
        v = random_values(self.rng, self.lay, tshape, self.fill)
        vflat = v if np.isscalar(v) or np.ndim(v) == 0 else np.asarray(v).reshape(-1)
        self.log.append(f"a[{sel_t}] = {v!r}")

        def f(x: Any, who: str) -> None:
            if who == "c":
                x[sel_t] = v
            else:
                x.vindex[coords] = vflat

        self._both(f)
        self.model[sel_t] = v
        self.known[sel_t] = True

    def op_mask(self) -> None:
        mask = self.rng.random(self.model.shape) < 0.3
        k = int(mask.sum())
        v = random_values(self.rng, self.lay, (k,), self.fill)
        self.log.append(f"a.vindex[mask {np.argwhere(mask).tolist()}] = {v!r}")

        def f(x: Any, who: str) -> None:
            if self.rng.random() < 0.5 and who == "c":
                x.set_mask_selection(mask, v)
            else:
                x.vindex[mask] = v

        self._both(f)
        self.model[mask] = v
        self.known[mask] = True

    def _reshape_model(self, new_shape: tuple[int, ...]) -> None:
        old = self.model
        new = np.full(new_shape, self.fill, dtype=old.dtype)
        known = np.ones(new_shape, bool)
        common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new_shape, strict=True))
        new[common] = old[common]
        if self.shrunk:
            known[...] = False
            known[common] = self.known[common]
        else:
            known[common] = self.known[common]
        if any(n < o for n, o in zip(new_shape, old.shape, strict=True)):
            self.shrunk = True
        self.model = new
        self.known = known

    def op_resize(self) -> None:
        r = self.rng.random()
        shape = self.model.shape
        if r < 0.15:
            new = tuple(0 if self.rng.random() < 0.6 else s for s in shape)
        else:
            new = tuple(int(max(0, s + self.rng.integers(-4, 5))) for s in shape)
        self.log.append(f"resize {shape} -> {new}")
        self._both(lambda x, who: x.resize(new) if who == "c" else resize_as_cuzarr(x, new))
        self._reshape_model(new)

    def op_append(self) -> None:
        ax = int(self.rng.integers(0, self.model.ndim))
        n = int(self.rng.integers(0, 5))
        shape = list(self.model.shape)
        shape[ax] = n
        v = random_values(self.rng, self.lay, tuple(shape), self.fill)
        v = np.broadcast_to(np.asarray(v, dtype=self.model.dtype), shape).copy()
        self.log.append(f"append axis={ax} {v!r}")
        self._both(lambda x, _: x.append(v, axis=ax))
        old = self.model.shape
        new = tuple(s + (n if d == ax else 0) for d, s in enumerate(old))
        self._reshape_model(new)
        sel = tuple(slice(old[d], None) if d == ax else slice(None) for d in range(len(old)))
        self.model[sel] = v
        self.known[sel] = True

    def op_blocks(self) -> None:
        if self.lay["rect"] is not None or self.lay["shards"] is not None:
            # sharded: cuzarr's blocks are inner chunks (docs/views.md), zarr-python's shards
            return
        cshape = self.lay["chunks"]
        sel = []
        for n, c in zip(self.model.shape, cshape, strict=True):
            nb = -(-n // c)
            if nb and self.rng.random() < 0.5:
                sel.append(int(self.rng.integers(0, nb)))
            else:
                b0 = int(self.rng.integers(0, nb + 1))
                sel.append(slice(b0, int(self.rng.integers(b0, nb + 1))))
        sel_t = tuple(sel)
        np_sel = tuple(
            slice(s * c, min(n, (s + 1) * c))
            if isinstance(s, int)
            else slice(s.start * c, min(n, s.stop * c))
            for s, c, n in zip(sel_t, cshape, self.model.shape, strict=True)
        )
        tshape = np.zeros(self.model.shape, bool)[np_sel].shape
        v = random_values(self.rng, self.lay, tshape, self.fill)
        self.log.append(f"a.blocks[{sel_t}] = {v!r}")

        def f(x: Any, _: str) -> None:
            x.blocks[sel_t] = v

        self._both(f)
        self.model[np_sel] = v
        self.known[np_sel] = True

    def op_attrs(self) -> None:
        r = self.rng.random()
        key = str(self.rng.choice(["a", "b", "c"]))
        val = [int(self.rng.integers(0, 9)), "s", None, {"x": [1, 2]}][int(self.rng.integers(0, 4))]
        if r < 0.3:
            self.log.append(f"attrs[{key}] = {val!r}")
            self._both(lambda x, _: x.attrs.__setitem__(key, val))
        elif r < 0.55:
            self.log.append(f"update_attributes({key}: {val!r})")
            self._both(lambda x, _: x.update_attributes({key: val, "u": 1}))
        elif r < 0.8:
            self.log.append(f"attrs.put({key}: {val!r})")
            self._both(lambda x, _: x.attrs.put({key: val}))
        else:
            if key in self.a.attrs:
                self.log.append(f"del attrs[{key}]")
                self._both(lambda x, _: x.attrs.__delitem__(key))

    def op_reopen(self) -> None:
        self.log.append("reopen")
        cfg = {"write_empty_chunks": self.lay["wec"]}
        self.a = cuzarr.open_array(str(self.cdir), mode="r+").with_config(cfg)
        if self.use_zarr:
            with zarr.config.set({"array.rectilinear_chunks": True}):
                self.z = zarr.open_array(str(self.zdir), mode="r+", config=cfg)

    def step(self) -> None:
        ops = [
            (self.op_basic, 5),
            (self.op_oindex, 2),
            (self.op_vindex, 2),
            (self.op_mask, 1),
            (self.op_fancy, 1.5),
            (self.op_resize, 2),
            (self.op_append, 2),
            (self.op_attrs, 1),
            (self.op_blocks, 1),
            (self.op_reopen, 0.5),
        ]
        op = _pick(self.rng, ops)
        with contextlib.suppress(_BothRaised):
            op()
        self.check(op.__name__)


class _BothRaised(Exception):
    pass


def run_array_sequence(seed: int, tmp: Path, nsteps: int = 12) -> None:
    rng = np.random.default_rng(seed)
    lay = random_layout(rng)
    d = tmp / f"arr{seed}"
    d.mkdir()
    try:
        case = ArrayCase(lay, d, rng)
        case.check("create")
        for _ in range(nsteps):
            case.step()
    except Skip as e:
        SKIPS.append(str(e)[:150])
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------ hierarchies

NAMES = ["a", "b", "c"]


def _call_both(log: list[str], fc: Any, fz: Any) -> bool:
    """Run one operation on both libraries; True when it succeeded on both.
    Both must succeed, or both fail with the same builtin error class."""
    err_c = err_z = None
    try:
        fc()
    except Exception as e:
        err_c = e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fz()
        except Exception as e:
            err_z = e
    if (err_c is None and "not found in consolidated metadata" in str(err_z)) or (
        type(err_z).__name__.startswith("Contains") and "require" in log[-1]
    ):
        # zarr-python: a group handle holding consolidated metadata does not see
        # the nodes created through it since
        ZARR_ISSUES.append(f"{err_z!r} <- {log[-1][:200]}")
        raise Skip("zarr-python stale consolidated handle")
    if (err_c is None) != (err_z is None):
        raise AssertionError(
            f"only one raised: cuzarr {err_c!r}, zarr {err_z!r}\n" + "\n".join(log[-30:])
        )
    if err_c is not None:
        BOTH_RAISED.append(f"{type(err_c).__name__} / {type(err_z).__name__}")
        log.append(f"  both raised {err_c!r} / {err_z!r}")
        # Same class name (cuzarr.errors.X mirrors zarr.errors.X), or cuzarr's error
        # is an instance of the builtin zarr-python raises.
        same = type(err_c).__name__ == type(err_z).__name__ or (
            type(err_z).__module__ == "builtins" and isinstance(err_c, type(err_z))
        )
        assert same, f"error classes differ: cuzarr {err_c!r}, zarr {err_z!r}\n" + "\n".join(
            log[-30:]
        )
        return False
    return True


def tree(lib: Any, root: Path, consolidated: bool | None) -> dict[str, Any]:
    """Every node under ``root`` as one library sees it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if consolidated:
            g = lib.open_consolidated(str(root), mode="r")
        else:
            g = lib.open_group(str(root), mode="r", use_consolidated=consolidated)
        out: dict[str, Any] = {"": ("group", dict(g.attrs))}
        for path, node in g.members(max_depth=None):
            if isinstance(node, (zarr.Array, cuzarr.Array)):
                out[path] = ("array", dict(node.attrs), tuple(node.shape), str(node.dtype))
            else:
                out[path] = ("group", dict(node.attrs))
    return out


class GroupCase:
    def __init__(self, fmt: int, tmp: Path, rng: np.random.Generator) -> None:
        self.fmt = fmt
        self.rng = rng
        self.cdir = tmp / "c"
        self.zdir = tmp / "z"
        self.log: list[str] = [f"group fmt {fmt}"]
        self.gc = cuzarr.create_group(str(self.cdir), zarr_format=fmt)
        self.gz = zarr.create_group(str(self.zdir), zarr_format=fmt)
        self.consolidated = False
        # path -> kind, for plain opens
        self.nodes: dict[str, str] = {"": "group"}

    def fail(self, msg: str) -> str:
        return msg + "\n--- steps:\n" + "\n".join(self.log[-40:])

    def check(self, just_consolidated: bool = False) -> None:
        dc = meta_docs(self.cdir)
        dz = meta_docs(self.zdir)
        if not just_consolidated:
            # Consolidated metadata is a snapshot: compared right after
            # consolidate_metadata. Later, zarr-python refreshes parts of it from
            # whatever its handles hold in memory; cuzarr leaves it alone (v2
            # root attributes and deletions excepted, as zarr-python).
            for docs in (dc, dz):
                docs.pop(".zmetadata", None)
                if "zarr.json" in docs:
                    docs["zarr.json"].pop("consolidated_metadata", None)
        d = diff_docs(dc, dz)
        if (
            d
            and self.log[-1].startswith("del ")
            and all(".zattrs" in x or "zarr.json/attributes" in x for x in d)
        ):
            # zarr-python: deleting through a consolidated group handle rewrites
            # the group's attributes from that handle (clobbering newer ones)
            ZARR_ISSUES.append("zarr-python delitem on a consolidated root rewrites stale attrs")
            raise Skip("zarr-python clobbered root attributes")
        assert not d, self.fail("metadata differs:\n" + "\n".join(d))
        kc, kz = stored_keys(self.cdir), stored_keys(self.zdir)
        assert kc == kz, self.fail(f"keys: only cuzarr {kc - kz}, only zarr {kz - kc}")
        modes: list[bool | None] = [False]
        if just_consolidated:
            modes += [None, True]
        for mode in modes:
            views = {
                f"{lib.__name__}<-{where}": tree(lib, root, mode)
                for lib in (cuzarr, zarr)
                for where, root in (("c", self.cdir), ("z", self.zdir))
            }
            ref = views["cuzarr<-c"]
            if views["zarr<-z"] != ref and views["cuzarr<-z"] == views["zarr<-c"] == ref:
                # zarr-python misreads its own store (it wrote nested
                # consolidated_metadata into a subgroup's document)
                ZARR_ISSUES.append("zarr-python reads its own store wrongly")
                raise Skip("zarr-python misreads its own store")
            if mode is False:
                kinds = {p: t[0] for p, t in ref.items()}
                assert kinds == self.nodes, self.fail(f"plain tree {ref} != model {self.nodes}")
                if {p: t[0] for p, t in views["zarr<-z"].items()} != self.nodes:
                    ZARR_ISSUES.append("zarr-python hierarchy diverged (stale consolidated handle)")
                    raise Skip("zarr-python diverged from the model")
            for name, v in views.items():
                assert v == ref, self.fail(
                    f"use_consolidated={mode}: {name}\n{v}\n!= cuzarr<-c\n{ref}"
                )

    def pick(self, kind: str | None = None) -> str:
        cands = sorted(p for p, k in self.nodes.items() if kind is None or k == kind)
        return cands[int(self.rng.integers(0, len(cands)))]

    def handles(self) -> tuple[Any, Any]:
        """The root group of each library: the long-lived handle, or a fresh open
        (which picks up consolidated metadata when there is some)."""
        if self.rng.random() < 0.5:
            held = "consolidated" if self.gc.async_group.consolidated is not None else "plain"
            self.log[-1] += f"  [long-lived {held} handles]"
            return self.gc, self.gz
        self.log[-1] += "  [fresh handles]"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (
                cuzarr.open_group(str(self.cdir), mode="r+"),
                zarr.open_group(str(self.zdir), mode="r+"),
            )

    @staticmethod
    def child(g: Any, path: str) -> Any:
        return g if path == "" else g[path]

    def join(self, parent: str, name: str) -> str:
        return f"{parent}/{name}" if parent else name

    def op_create_group(self) -> None:
        parent = self.pick("group")
        name = str(self.rng.choice(NAMES))
        self.log.append(f"create_group {parent!r}/{name}")
        hc, hz = self.handles()
        hc, hz = self._unless_zarr_stale(hc, hz, parent)
        if _call_both(
            self.log,
            lambda: self.child(hc, parent).create_group(name),
            lambda: self.child(hz, parent).create_group(name),
        ):
            self.nodes[self.join(parent, name)] = "group"

    def array_kwargs(self) -> dict[str, Any]:
        shape = (int(self.rng.integers(0, 6)),)
        return {
            "shape": shape,
            "dtype": str(self.rng.choice(["i4", "f8"])),
            "chunks": (int(self.rng.integers(1, 4)),),
            # zarr-python's Group.create_array defaults v2 to Blosc, its
            # create_array to Zstd: cuzarr follows create_array; be explicit here
            "compressors": None,
        }

    def op_create_array(self) -> None:
        parent = self.pick("group")
        name = str(self.rng.choice(NAMES))
        kw = self.array_kwargs()
        data = np.arange(kw["shape"][0]).astype(kw["dtype"])
        self.log.append(f"create_array {parent!r}/{name} {kw}")
        hc, hz = self.handles()
        hc, hz = self._unless_zarr_stale(hc, hz, parent)

        def mk(h: Any) -> None:
            a = self.child(h, parent).create_array(name, **kw)
            a[...] = data

        if _call_both(self.log, lambda: mk(hc), lambda: mk(hz)):
            self.nodes[self.join(parent, name)] = "array"

    def op_require_array(self) -> None:
        parent = self.pick("group")
        name = str(self.rng.choice(NAMES))
        path = self.join(parent, name)
        kw = self.array_kwargs()
        if self.nodes.get(path) == "array" and self.rng.random() < 0.6:
            a = cuzarr.open_array(str(self.cdir), path=path, mode="r")
            kw["shape"] = a.shape
            if self.rng.random() < 0.7:
                kw["dtype"] = str(a.dtype)
            elif self.rng.random() < 0.5:
                kw["dtype"] = str(self.rng.choice(["i2", "f4", "i8", "u1"]))  # castable or not
        if self.rng.random() < 0.3:
            kw["exact"] = bool(self.rng.random() < 0.5)
        self.log.append(f"require_array {parent!r}/{name} {kw}")
        hc, hz = self.handles()
        hc, hz = self._unless_zarr_stale(hc, hz, self.join(parent, name))
        if _call_both(
            self.log,
            lambda: self.child(hc, parent).require_array(name, **kw),
            lambda: self.child(hz, parent).require_array(name, **kw),
        ):
            self.nodes.setdefault(path, "array")

    def _unless_zarr_stale(
        self, hc: Any, hz: Any, path: str, full: bool = False
    ) -> tuple[Any, Any]:
        """The handles to use: zarr-python trusts a group handle's consolidated
        metadata (a snapshot) where cuzarr asks the store (``require_*`` hand back
        or check a member as it was before a delete or replace; attribute changes
        through a member got from the snapshot rewrite its old metadata). When
        zarr-python's handle sees the node at ``path`` (or a group above it)
        otherwise than its store does, both libraries get plain handles instead
        (tests/test_mutation_fuzz.py::test_require_on_stale_consolidated_handle_asks_the_store
        covers cuzarr there)."""

        def view(g: Any, last: bool) -> Any:
            # groups above the node: their kind; the node: kind, shape, dtype
            # (and with ``full``, as attribute changes rewrite it: all metadata)
            try:
                n = g[path]
            except Exception as e:
                return type(e).__name__
            if isinstance(n, zarr.Array):
                if not last:
                    return "array"
                out: Any = ("array", tuple(n.shape), str(n.dtype))
                return out + (n.chunks, dict(n.attrs)) if full else out
            return ("group", dict(n.attrs)) if last and full else "group"

        if not path:
            return hc, hz
        parts = path.split("/")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = zarr.open_group(str(self.zdir), mode="r", use_consolidated=False)
            stale = False
            for k in range(1, len(parts) + 1):  # the node and the groups above it
                path = "/".join(parts[:k])
                last = k == len(parts)
                stale = stale or view(hz, last) != view(store, last)
        if not stale:
            return hc, hz
        ZARR_ISSUES.append("zarr-python acts on a stale consolidated snapshot")
        STALE_ZARR_HANDLES.append(1)
        self.log[-1] += " [zarr-python's snapshot stale: plain handles instead]"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (
                cuzarr.open_group(str(self.cdir), mode="r+", use_consolidated=False),
                zarr.open_group(str(self.zdir), mode="r+", use_consolidated=False),
            )

    def op_require_group(self) -> None:
        parent = self.pick("group")
        name = str(self.rng.choice(NAMES))
        self.log.append(f"require_group {parent!r}/{name}")
        hc, hz = self.handles()
        hc, hz = self._unless_zarr_stale(hc, hz, self.join(parent, name))
        if _call_both(
            self.log,
            lambda: self.child(hc, parent).require_group(name),
            lambda: self.child(hz, parent).require_group(name),
        ):
            self.nodes.setdefault(self.join(parent, name), "group")

    def op_attrs(self) -> None:
        path = self.pick()
        key = str(self.rng.choice(["x", "y"]))
        val = [int(self.rng.integers(0, 9)), "s", [1, None]][int(self.rng.integers(0, 3))]
        r = self.rng.random()
        if r < 0.3:
            self.log.append(f"{path!r}.attrs[{key}] = {val!r}")
            fn: Any = lambda n: n.attrs.__setitem__(key, val)  # noqa: E731
        elif r < 0.55:
            self.log.append(f"{path!r}.update_attributes({key}: {val!r})")
            fn = lambda n: n.update_attributes({key: val})  # noqa: E731
        elif r < 0.8:
            self.log.append(f"{path!r}.attrs.put({key}: {val!r})")
            fn = lambda n: n.attrs.put({key: val})  # noqa: E731
        else:
            self.log.append(f"del {path!r}.attrs[{key}]")
            fn = lambda n: n.attrs.__delitem__(key)  # noqa: E731
        hc, hz = self.handles()
        hc, hz = self._unless_zarr_stale(hc, hz, path, full=True)
        _call_both(self.log, lambda: fn(self.child(hc, path)), lambda: fn(self.child(hz, path)))

    def op_consolidate(self) -> None:
        self.log.append("consolidate_metadata")
        _call_both(
            self.log,
            lambda: cuzarr.consolidate_metadata(str(self.cdir)),
            lambda: zarr.consolidate_metadata(str(self.zdir)),
        )
        self.consolidated = True
        if self.rng.random() < 0.5:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.gc = cuzarr.open_group(str(self.cdir), mode="r+")
                self.gz = zarr.open_group(str(self.zdir), mode="r+")

    def op_delete(self) -> None:
        if len(self.nodes) == 1:
            return
        path = self.pick()
        if path == "":
            return
        parent, _, name = path.rpartition("/")
        self.log.append(f"del {parent!r}[{name!r}]")
        hc, hz = self.handles()
        if _call_both(
            self.log,
            lambda: self.child(hc, parent).__delitem__(name),
            lambda: self.child(hz, parent).__delitem__(name),
        ):
            for p in list(self.nodes):
                if p == path or p.startswith(path + "/"):
                    del self.nodes[p]

    def op_reopen(self) -> None:
        self.log.append("reopen roots")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.gc = cuzarr.open_group(str(self.cdir), mode="r+")
            self.gz = zarr.open_group(str(self.zdir), mode="r+")

    def step(self) -> None:
        ops = [
            (self.op_create_group, 2),
            (self.op_create_array, 2),
            (self.op_require_array, 1.5),
            (self.op_require_group, 0.7),
            (self.op_attrs, 2),
            (self.op_consolidate, 1),
            (self.op_delete, 1),
            (self.op_reopen, 0.5),
        ]
        op = _pick(self.rng, ops)
        op()
        self.check(op == self.op_consolidate)


def run_group_sequence(seed: int, tmp: Path, nsteps: int = 12) -> None:
    rng = np.random.default_rng(10**6 + seed)
    d = tmp / f"grp{seed}"
    d.mkdir()
    try:
        case = GroupCase(int(rng.choice([2, 3])), d, rng)
        case.check()
        for _ in range(nsteps):
            case.step()
    except Skip as e:
        SKIPS.append(str(e)[:150])
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------ regressions
# Each found by the fuzzer above; each failed before its fix.


def _both_libs(tmp_path, **kw):
    return {
        "cuzarr": cuzarr.create_array(str(tmp_path / "c"), **kw),
        "zarr": zarr.create_array(str(tmp_path / "z"), **kw),
    }


def _shrink_with_zarr_python(tmp_path, arrays, shape):
    """Shrink both arrays with zarr-python, which leaves the part of the edge
    chunks past the new end in place (cuzarr's own shrink sets it to the fill
    value): the stale elements cuzarr's writes then meet in a store zarr-python
    shrank. Returns the arrays reopened."""
    for name in arrays:
        zarr.open_array(str(tmp_path / name[0]), mode="r+").resize(shape)
    return {
        "cuzarr": cuzarr.open_array(str(tmp_path / "c"), mode="r+"),
        "zarr": zarr.open_array(str(tmp_path / "z"), mode="r+"),
    }


def test_index_array_write_into_cut_edge_chunk_keeps_stale_elements_like_zarr(tmp_path):
    """An index array covering a chunk cut by a shrink read-modify-writes it, as
    zarr-python does: the elements past the end survive (and the key stays)."""
    arrays = _both_libs(
        tmp_path, shape=(2, 2), dtype="f8", chunks=(1, 2), fill_value=0, compressors=None
    )
    for a in arrays.values():
        a[...] = 1
    arrays = _shrink_with_zarr_python(tmp_path, arrays, (2, 1))
    for a in arrays.values():
        a.oindex[np.array([True, False]), np.array([0])] = 0
    assert stored_keys(tmp_path / "c") == stored_keys(tmp_path / "z") == {"c/0/0", "c/1/0"}
    for a in arrays.values():
        a.resize((2, 2))
    np.testing.assert_array_equal(arrays["cuzarr"][...], arrays["zarr"][...])
    np.testing.assert_array_equal(arrays["cuzarr"][...], [[0, 1], [1, 1]])


def test_stepped_slice_write_into_cut_edge_chunk_keeps_stale_elements_like_zarr(tmp_path):
    """A stepped slice never covers a chunk (zarr-python): with another dimension
    cut at the edge, the stale elements there survive the write."""
    arrays = _both_libs(
        tmp_path, shape=(3, 2), dtype="i4", chunks=(1, 2), fill_value=0, compressors=None
    )
    for a in arrays.values():
        a[...] = 1
    arrays = _shrink_with_zarr_python(tmp_path, arrays, (3, 1))
    for a in arrays.values():
        a[0:3:2, 0:1] = 0
    assert stored_keys(tmp_path / "c") == stored_keys(tmp_path / "z")
    for a in arrays.values():
        a.resize((3, 2))
    np.testing.assert_array_equal(arrays["cuzarr"][...], arrays["zarr"][...])
    np.testing.assert_array_equal(arrays["cuzarr"][...], [[0, 1], [1, 1], [0, 1]])


def test_covering_write_into_cut_edge_shard_keeps_stale_inner_chunks_like_zarr(tmp_path):
    """zarr-python updates shards in place: a write covering what is left of a
    shard cut by a shrink keeps its inner chunks past the end (and the key)."""
    arrays = _both_libs(
        tmp_path,
        shape=(8,),
        dtype="i4",
        chunks=(1,),
        shards=(3,),
        fill_value=0,
        compressors=None,
    )
    for a in arrays.values():
        a[...] = 1
    arrays = _shrink_with_zarr_python(tmp_path, arrays, (4,))
    for a in arrays.values():
        a[3:4] = 0
    assert stored_keys(tmp_path / "c") == stored_keys(tmp_path / "z") == {"c/0", "c/1"}
    for a in arrays.values():
        a.resize((8,))
    np.testing.assert_array_equal(arrays["cuzarr"][...], arrays["zarr"][...])
    np.testing.assert_array_equal(arrays["cuzarr"][...], [1, 1, 1, 0, 1, 1, 0, 0])


def test_fancy_setitem_writes_only_chunks_with_selected_points(tmp_path):
    """``a[mask] = v`` (cuzarr's bounding-block path) leaves chunks of the bounding
    block that hold no selected point alone, as zarr-python's vindex: with
    write_empty_chunks no fill-valued chunk appears there (fuzz array seed 279)."""
    kw = {"shape": (2, 2), "dtype": "i4", "chunks": (1, 1), "fill_value": 0}
    c = cuzarr.create_array(str(tmp_path / "c"), write_empty_chunks=True, **kw)
    z = zarr.create_array(str(tmp_path / "z"), config={"write_empty_chunks": True}, **kw)
    mask = np.array([[True, False], [False, True]])
    c[mask] = [1, 2]
    z.vindex[mask] = [1, 2]
    assert stored_keys(tmp_path / "c") == stored_keys(tmp_path / "z") == {"c/0/0", "c/1/1"}
    # and a chunk stored as all fill stays stored (write_empty_chunks off now)
    c2 = cuzarr.open_array(str(tmp_path / "c"), mode="r+").with_config({"write_empty_chunks": True})
    c2[0, 1] = 0
    c2.with_config({"write_empty_chunks": False})[np.array([0, 1]), np.array([0, 1])] = [3, 4]
    assert "c/0/1" in stored_keys(tmp_path / "c")
    np.testing.assert_array_equal(c2[...], [[3, 0], [0, 4]])


@pytest.mark.parametrize("shards", [None, (4, 4)])
def test_fancy_setitem_reads_only_partly_covered_chunks(shards):
    """Index arrays covering whole chunks (in bounds, not cut) write them without
    reading them; a chunk they cover in part is read (once per inner chunk)."""
    from cuzarr.storage import MemoryStore

    class Counting(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.gets: list[str] = []

        async def get(self, key, prototype=None, byte_range=None):  # type: ignore[no-untyped-def]
            self.gets.append(key)
            return await super().get(key, prototype, byte_range)

    store = Counting()
    a = cuzarr.create_array(
        store, shape=(8, 8), dtype="i4", chunks=(2, 2), shards=shards, fill_value=0
    )
    a[...] = 1
    ref = np.ones((8, 8), "i4")
    store.gets.clear()
    rows = np.array([0, 1, 2, 3])  # whole chunks, and a whole shard
    a[rows] = 7
    ref[rows] = 7
    assert [k for k in store.gets if not k.endswith("zarr.json")] == []
    a[rows, 1:] = 9  # column 0 of each touched chunk is not selected: read
    ref[rows, 1:] = 9
    assert [k for k in store.gets if not k.endswith("zarr.json")]
    np.testing.assert_array_equal(a[...], ref)
    store.gets.clear()
    a[np.array([[True] * 8] * 4 + [[False] * 8] * 4)] = 5  # a mask covering rows 0-3
    ref[:4] = 5
    assert [k for k in store.gets if not k.endswith("zarr.json")] == []
    np.testing.assert_array_equal(a[...], ref)


def test_fancy_setitem_into_cut_edge_chunk_keeps_stale_elements_like_zarr(tmp_path):
    """``a[idx] = v`` covering a chunk cut by a shrink read-modify-writes it, as
    zarr-python's vindex does: the elements past the end survive."""
    arrays = _both_libs(
        tmp_path, shape=(4, 3), dtype="i4", chunks=(2, 2), fill_value=0, compressors=None
    )
    for a in arrays.values():
        a[...] = 1
    arrays = _shrink_with_zarr_python(tmp_path, arrays, (3, 2))
    arrays["cuzarr"][np.array([0, 1, 2])] = 0
    arrays["zarr"].vindex[np.repeat([0, 1, 2], 2), np.tile([0, 1], 3)] = 0
    assert stored_keys(tmp_path / "c") == stored_keys(tmp_path / "z")
    for a in arrays.values():
        a.resize((4, 3))
    np.testing.assert_array_equal(arrays["cuzarr"][...], arrays["zarr"][...])


def test_consolidated_v2_root_attrs_follow_updates_like_zarr(tmp_path):
    """v2: a consolidated root's attribute updates reach its .zmetadata entry (as
    v3, where both live in zarr.json, and as zarr-python)."""
    for lib, d in ((cuzarr, tmp_path / "c"), (zarr, tmp_path / "z")):
        lib.create_group(str(d), zarr_format=2).create_group("s")
        lib.consolidate_metadata(str(d))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = lib.open_group(str(d), mode="r+")
            g.attrs["x"] = 1
            g.update_attributes({"y": 2})
    for d in ("c", "z"):
        zm = json.loads((tmp_path / d / ".zmetadata").read_text())
        assert zm["metadata"][".zattrs"] == {"x": 1, "y": 2}
        for lib in (cuzarr, zarr):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = lib.open_consolidated(str(tmp_path / d), mode="r").attrs
            assert dict(got) == {"x": 1, "y": 2}


@pytest.mark.parametrize("fmt", [2, 3])
def test_delete_member_newer_than_consolidated_metadata(tmp_path, fmt):
    """A group handle opened from consolidated metadata deletes a member created
    after consolidating (it is in the store), as zarr-python does."""
    g = cuzarr.create_group(str(tmp_path), zarr_format=fmt)
    g.create_group("old")
    cuzarr.consolidate_metadata(str(tmp_path))
    g.create_array("new", shape=(2,), dtype="i4")
    h = cuzarr.open_group(str(tmp_path), mode="r+")
    del h["new"]
    assert "new" not in cuzarr.open_group(str(tmp_path), mode="r", use_consolidated=False)
    with pytest.raises(KeyError):
        del h["missing"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_require_on_consolidated_handle_finds_newer_members(tmp_path, fmt):
    """require_group / require_array on a handle holding consolidated metadata
    return members created since (instead of failing to create them again)."""
    g = cuzarr.create_group(str(tmp_path), zarr_format=fmt)
    cuzarr.consolidate_metadata(str(tmp_path))
    h = cuzarr.open_group(str(tmp_path), mode="r+")
    g.create_group("g")
    g.create_array("a", shape=(2,), dtype="i4")
    assert h.require_group("g").path == "g"
    assert h.require_array("a", shape=(2,), dtype="i4").shape == (2,)


@pytest.mark.parametrize("fmt", [2, 3])
def test_require_on_stale_consolidated_handle_asks_the_store(tmp_path, fmt):
    """require_group / require_array on a handle whose consolidated metadata
    predates a delete (fuzz group seeds 9190 and 9184): the store decides. A
    member deleted since is created again, not handed back as a node that no
    longer exists; an array replaced since is compared by its stored shape.
    (zarr-python trusts the snapshot here: the fuzzer skips those steps.)"""
    g = cuzarr.create_group(str(tmp_path), zarr_format=fmt)
    g.create_group("a").create_array("b", shape=(2,), dtype="f8")
    g.create_array("x", shape=(3,), dtype="i4")
    cuzarr.consolidate_metadata(str(tmp_path))
    h1, h2 = (cuzarr.open_group(str(tmp_path), mode="r+") for _ in range(2))
    assert h1.async_group.consolidated is not None
    plain = cuzarr.open_group(str(tmp_path), mode="r+", use_consolidated=False)
    del plain["a"]
    del plain["x"]
    plain.create_array("x", shape=(5,), dtype="i4")
    assert h1.require_group("a").path == "a"
    assert "a" in cuzarr.open_group(str(tmp_path), mode="r", use_consolidated=False)
    with pytest.raises(TypeError):
        h2.require_array("x", shape=(3,), dtype="i4")
    assert h2.require_array("x", shape=(5,), dtype="i4").shape == (5,)


def test_require_over_the_other_node_kind_raises_type_error_like_zarr():
    """require_group over an array and require_array over a group raise TypeError
    (zarr-python's class), still cuzarr's Contains*Error too."""
    from cuzarr import errors

    g = cuzarr.create_group({})
    g.create_array("a", shape=(1,), dtype="i1")
    g.create_group("b")
    with pytest.raises(TypeError):
        g.require_group("a")
    with pytest.raises(errors.ContainsArrayError):
        g.require_group("a")
    with pytest.raises(TypeError):
        g.require_array("b", shape=(1,))
    with pytest.raises(errors.ContainsGroupError):
        g.require_array("b", shape=(1,))


# ------------------------------------------------------------------------ tests

ARRAY_SEEDS = int(os.environ.get("CUZARR_MUTATION_SEEDS", "60"))


@pytest.mark.parametrize("block", range(4))
def test_array_mutation_sequences(tmp_path, block):
    for seed in range(block, ARRAY_SEEDS, 4):
        run_array_sequence(seed, tmp_path)


GROUP_SEEDS = int(os.environ.get("CUZARR_MUTATION_GROUP_SEEDS", "30"))


@pytest.mark.parametrize("block", range(2))
def test_group_mutation_sequences(tmp_path, block):
    for seed in range(block, GROUP_SEEDS, 2):
        run_group_sequence(seed, tmp_path)


# ------------------------------------------------------------------------ long runs


def main(argv: list[str]) -> None:
    import argparse
    import traceback

    p = argparse.ArgumentParser()
    p.add_argument("--arrays", type=int, default=1000)
    p.add_argument("--groups", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--short", action="store_true")
    p.add_argument(
        "--emulate", action="store_true", help="cuzarr writes through the device path (gpu.emulate)"
    )
    args = p.parse_args(argv)
    if args.emulate:
        cuzarr.config.set({"gpu.emulate": True})
    tmp = Path(tempfile.mkdtemp())
    fails = 0
    for s in range(args.seed, args.seed + args.arrays):
        try:
            run_array_sequence(s, tmp, args.steps)
        except Exception as exc:
            fails += 1
            print(f"=== array seed {s}")
            if args.short:
                print(type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
            else:
                traceback.print_exc(limit=1)
    print(f"arrays: {args.arrays} sequences, {fails} failures, {len(CUZARR_ONLY)} cuzarr-only")
    if args.emulate:
        from cuzarr.gpu.writer import HostEncoder

        print("device path (emulated):", dict(HostEncoder.stats))
    gfails = 0
    for s in range(args.seed, args.seed + args.groups):
        try:
            run_group_sequence(s, tmp, args.steps)
        except Exception as exc:
            gfails += 1
            print(f"=== group seed {s}")
            if args.short:
                print(type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
            else:
                traceback.print_exc(limit=1)
    print(
        f"groups: {args.groups} sequences, {gfails} failures, "
        f"{len(STALE_ZARR_HANDLES)} steps on plain handles (zarr-python's snapshot stale)"
    )
    import collections

    for k, v in collections.Counter(SKIPS).most_common():
        print(f"skipped x{v}: {k}")
    for k, v in collections.Counter(BOTH_RAISED).most_common():
        print(f"both raised x{v}: {k}")
    for z in sorted(set(ZARR_ISSUES)):
        print("zarr-python issue:", z)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
