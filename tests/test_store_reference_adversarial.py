"""Review of the Parquet references and the gen section: the chunk grid against
fsspec's LazyReferenceMapper (keys out of the grid, malformed keys, 3-d arrays
with chunks that do not divide, zero-length dimensions, dotted names in nested
groups), cuzarr's own Parquet reader on corrupt and adversarial record files (run
in a child process: a crash must not take the test run with it), files written by
pyarrow, malformed cells, the record cache under concurrency, and the bounds on
what a gen section may make the evaluator build."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import cuzarr
from cuzarr.errors import MetadataError
from cuzarr.runtime.sync import sync
from cuzarr.storage import ReferenceStore
from cuzarr.storage import reference_parquet as rp

fsspec = pytest.importorskip("fsspec")
fastparquet = pytest.importorskip("fastparquet")
pd = pytest.importorskip("pandas")

from fsspec.implementations.reference import LazyReferenceMapper  # noqa: E402

from _reference_helpers import zarray  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")


async def _collect(it):
    return [k async for k in it]


# -- the chunk grid --------------------------------------------------------------


def _grid_refs(tmp_path):
    """A 3-d array (chunks that divide no dimension) named with a dot in a nested
    group, a 0-d array and one with a zero-length dimension, chunks inline and in
    a blob, some missing; record size 5 (dividing no grid)."""
    shape, chunks = (5, 7, 3), (2, 3, 2)
    data = np.arange(np.prod(shape), dtype="<i4").reshape(shape)
    want = np.full(shape, -1, dtype="<i4")
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    refs = {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "g/.zgroup": json.dumps({"zarr_format": 2}),
        "g/h/.zgroup": json.dumps({"zarr_format": 2}),
        "g/h/a.b/.zarray": zarray(shape, chunks, fill=-1),
        "s/.zarray": zarray((), (), "<f8"),
        "z0/.zarray": zarray((0, 4), (2, 2)),
        "s/0": np.array(2.5).tobytes(),
    }
    blob = bytearray(b"head")
    for k, idx in enumerate(np.ndindex(*grid)):
        if k % 4 == 1:
            continue  # missing: the fill value
        sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        block = np.zeros(chunks, "<i4")
        part = data[sel]
        block[tuple(slice(0, n) for n in part.shape)] = part
        want[sel] = part
        key = "g/h/a.b/" + ".".join(map(str, idx))
        if k % 3 == 0:
            refs[key] = block.tobytes()
        else:
            refs[key] = [str(tmp_path / "blob.bin"), len(blob), block.nbytes]
            blob += block.tobytes()
    (tmp_path / "blob.bin").write_bytes(bytes(blob))
    root = tmp_path / "refs.parq"
    out = LazyReferenceMapper.create(str(root), record_size=5)
    for key in sorted(refs, key=lambda k: (".z" not in k, k)):
        out[key] = refs[key]
    out.flush()
    return root, refs, want


def test_chunk_keys_map_to_rows_as_fsspec_maps_them(tmp_path):
    root, refs, want = _grid_refs(tmp_path)
    store = ReferenceStore(str(root))
    fs = fsspec.filesystem("reference", fo=str(root), remote_protocol="file")
    chunk_keys = sorted(k for k in refs if ".z" not in k)
    assert sync(store.get_many(chunk_keys)) == [fs.cat_file(k) for k in chunk_keys]
    np.testing.assert_array_equal(cuzarr.open_array(store, path="g/h/a.b", mode="r")[...], want)
    assert cuzarr.open_array(store, path="s", mode="r")[...] == 2.5
    assert cuzarr.open_array(store, path="z0", mode="r").shape == (0, 4)
    listed = sync(_collect(store.list()))
    assert sorted(listed) == sorted({*refs, ".zmetadata"})
    assert sorted(sync(_collect(store.list_dir("g/h")))) == [".zgroup", "a.b"]

    # keys out of the grid: fsspec's ravel_multi_index wraps them onto another
    # chunk's row; here they are no chunk at all
    lazy = LazyReferenceMapper(str(root))
    wrapped = "g/h/a.b/0.3.0"  # dimension 1 has 3 chunks
    assert lazy[wrapped] == lazy["g/h/a.b/1.0.0"]
    out_of_grid = [wrapped, "g/h/a.b/3.0.0", "g/h/a.b/0.0.2", "z0/0.0", "s/1", "s/0.0"]
    malformed = ["g/h/a.b/-1.0.0", "g/h/a.b/01.0.0", "g/h/a.b/+1.0.0", "g/h/a.b/0.0"]
    malformed += ["g/h/a.b/\uff11.0.0", "g/h/a.b/0.0.0.0", "g/h/a.b/", "g/h/a.b/.zattrs"]
    malformed += ["g/h/a.b/" + "9" * 5000 + ".0.0", "g/h/a.b/0_0.0.0", "g/h/a.b/ 0.0.0"]
    absent = out_of_grid + malformed
    assert sync(store.get_many(absent)) == [None] * len(absent)
    assert not any(sync(store.exists(k)) for k in absent)


# -- cuzarr's Parquet reader -------------------------------------------------------


def _record_bytes(n=40, compression=None, categorical=False):
    """A record file as fsspec writes it with fastparquet (columns path, offset,
    size, raw; nulls in path and raw), uncompressed unless asked."""
    paths = [None if i % 4 in (0, 1) else f"/data/file{i % 3}.nc" for i in range(n)]
    df = pd.DataFrame(
        {
            "path": pd.Series(paths, dtype=object),
            "offset": np.arange(n, dtype=np.int64) * 10,
            "size": np.full(n, 4, dtype=np.int64),
            "raw": pd.Series([b"\x01\x02\x03\x04" if i % 4 == 1 else None for i in range(n)]),
        }
    )
    if categorical:
        df["path"] = df["path"].astype("category")
    with tempfile.TemporaryDirectory() as d:
        fastparquet.write(
            f"{d}/r.parq",
            df,
            compression=compression,
            object_encoding={"raw": "bytes", "path": "utf8"},
            has_nulls=["path", "raw"],
            stats=False,
        )
        return Path(f"{d}/r.parq").read_bytes(), df


@pytest.mark.parametrize("compression", [None, "SNAPPY", "ZSTD", "GZIP"])
@pytest.mark.parametrize("categorical", [False, True])
def test_reader_reads_what_fastparquet_writes(compression, categorical):
    data, df = _record_bytes(compression=compression, categorical=categorical)
    cols, names = rp._read_columns(data, 40)
    assert names == ["path", "offset", "size", "raw"]
    assert cols["path"] == [None if isinstance(p, float) else p for p in df["path"].tolist()]
    assert cols["offset"] == df["offset"].tolist()
    assert cols["raw"] == df["raw"].tolist()


def test_more_rows_than_the_record_size_is_refused():
    data, _ = _record_bytes()
    with pytest.raises(ValueError, match="more than the record size 39"):
        rp._read_columns(data, 39)


# written by pyarrow 26 (pq.write_table, write_statistics=False) from
# _pyarrow_table(): snappy, data pages v2, dictionaries, 64-byte pages, row groups
# of 15; and gzip, data pages v1, no dictionary, row groups of 25
_PYARROW_FILES = [
    (
        "UEFSMRUEFVoVOkwVBhUAEgAALTgLAAAAL2RhdGEvZjEubmMdDwAyNg8ADDAubmMVBhUSFRJcFR4VBhUeFRAV"
        "BhUAEhwAAAAF3nsCBSSSSQAVBBXwARWWAUwVHhUAEgAAeAAADQEAZA0IAMgNCAQsAQkJAJANCAD0DQgEWAIJ"
        "GAC8DQgEIAMJEASEAwkIAOgNCARMBAkQALANCDwUBQAAAAAAAHgFAAAAAAAAFQYVGBUYXBUeFQAVHhUQFQQV"
        "ABIcAAAAHgEEBRAyVHaYutwOFQQVIBUkTBUEFQASAAAQPAAAAAAAAAAAZAAAAAAAAAAVBhUMFQxcFR4VABUe"
        "FRAVBBUAEhwAAAAeAQEF3nsVBBUoFSxMFQYVABIAABRMAAAAAAUAAAAFBQUFBQMAAAAKCgoVBhUOFQ5cFR4V"
        "GBUeFRAVBhUAEhwAAAAFIQQCAyQAFQQVWhU6TBUGFQASAAAtOAsAAAAvZGF0YS9mMS5uYx0PADI2DwAMMC5u"
        "YxUGFRIVElwVHhUGFR4VEBUGFQASHAAAAAXeewIFJJJJABUEFfABFZwBTBUeFQASAAB4CNwFAAUBBEAGBQcE"
        "AKQNCAQIBwkQAGwNCADQDQgENAgJGACYDQgA/A0IBGAJCRgAxA0IBCgKCRAAjA0IPPAKAAAAAAAAVAsAAAAA"
        "AAAVBhUYFRhcFR4VABUeFRAVBBUAEhwAAAAeAQQFEDJUdpi63A4VBBUgFSRMFQQVABIAABA8AAAAAAAAAABk"
        "AAAAAAAAABUGFQwVDFwVHhUAFR4VEBUEFQASHAAAAB4BAQXeexUEFS4VMkwVBhUAEgAAF1gBAAAADwYAAAAU"
        "FBQUFBQEAAAAGRkZGRUGFQ4VDlwVHhUYFR4VEBUGFQASHAAAAAUhBAIDJAAVBBVaFTpMFQYVABIAAC04CwAA"
        "AC9kYXRhL2YxLm5jHQ8AMjYPAAwwLm5jFQYVDhUOXBUUFQQVFBUQFQYVABIcAAAABd4DAgMkkhUEFaABFXBM"
        "FRQVABIAAFAIuAsABQEEHAwFBwQAgA0IAOQNCARIDQkYAKwNCAQQDgkQAHQNCDzYDgAAAAAAADwPAAAAAAAA"
        "FQYVGBUYXBUUFQAVFBUQFQQVABIcAAAAFAEEBRAyVHaYAAAAFQQVIBUkTBUEFQASAAAQPAAAAAAAAAAAZAAA"
        "AAAAAAAVBhUMFQxcFRQVABUUFRAVBBUAEhwAAAAUAQEF3gMVBBUUFRhMFQQVABIAAAokAgAAAB4eAAAAABUG"
        "FQwVDFwVFBUQFRQVEBUGFQASHAAAAAUhAAEDAhUEGVw1ABgGc2NoZW1hFQgAFQwlAhgEcGF0aCUATBwAAAAV"
        "BCUCGAZvZmZzZXQAFQQlAhgEc2l6ZQAVDCUCGANyYXcAFlAZPBlMJgAcFQwZNQAGEBkYBHBhdGgVAhYeFrgB"
        "FpgBJl4mCCksFQQVABUCABUAFRAVAgA8FogCGQYZJgYYAAAAJgAcFQQZNQAGEBkYBm9mZnNldBUCFh4W2AIW"
        "/gEm1gImoAEpLBUEFQAVAgAVABUQFQIAPCkGGSYAHgAAACYAHBUEGTUABhAZGARzaXplFQIWHhZ4Fnwm3gMm"
        "ngMpLBUEFQAVAgAVABUQFQIAPCkGGSYAHgAAACYAHBUMGTUABhAZGANyYXcVAhYeFoIBFoYBJuIEJpoEKSwV"
        "BBUAFQIAFQAVEBUCADwWEBkGGSYYBgAAABaKBhYeJggWmAUAGUwmABwVDBk1AAYQGRgEcGF0aBUCFh4WuAEW"
        "mAEm9gUmoAUpLBUEFQAVAgAVABUQFQIAPBaIAhkGGSYGGAAAACYAHBUEGTUABhAZGAZvZmZzZXQVAhYeFtgC"
        "FoQCJvQHJrgGKSwVBBUAFQIAFQAVEBUCADwpBhkmAB4AAAAmABwVBBk1AAYQGRgEc2l6ZRUCFh4WeBZ8JvwI"
        "JrwIKSwVBBUAFQIAFQAVEBUCADwpBhkmAB4AAAAmABwVDBk1AAYQGRgDcmF3FQIWHhaIARaMASaGCia4CSks"
        "FQQVABUCABUAFRAVAgA8FhYZBhkmGAYAAAAWkAYWHiagBRakBQAZTCYAHBUMGTUABhAZGARwYXRoFQIWFBa0"
        "ARaUASaaCybECiksFQQVABUCABUAFRAVAgA8FrABGQYZJgQQAAAAJgAcFQQZNQAGEBkYBm9mZnNldBUCFhQW"
        "hgIW1gEm5gwm2AspLBUEFQAVAgAVABUQFQIAPCkGGSYAFAAAACYAHBUEGTUABhAZGARzaXplFQIWFBZ4Fnwm"
        "7g0mrg0pLBUEFQAVAgAVABUQFQIAPCkGGSYAFAAAACYAHBUMGTUABhAZGANyYXcVAhYUFmwWcCbeDiaqDiks"
        "FQQVABUCABUAFRAVAgA8FgQZBhkmEAQAAAAWngUWFCbEChbWBAAZHBgMQVJST1c6c2NoZW1hGOwCLy8vLy93"
        "Z0JBQUFRQUFBQUFBQUtBQXdBQmdBRkFBZ0FDZ0FBQUFBQkJBQU1BQUFBQ0FBSUFBQUFCQUFJQUFBQUJBQUFB"
        "QVFBQUFDc0FBQUFZQUFBQUN3QUFBQUVBQUFBZFAvLy93QUFBUVFRQUFBQUZBQUFBQVFBQUFBQUFBQUFBd0FB"
        "QUhKaGR3QmcvLy8vbVAvLy93QUFBUUlRQUFBQUdBQUFBQVFBQUFBQUFBQUFCQUFBQUhOcGVtVUFBQUFBMFAv"
        "Ly93QUFBQUZBQUFBQXlQLy8vd0FBQVFJUUFBQUFJQUFBQUFRQUFBQUFBQUFBQmdBQUFHOW1abk5sZEFBQUNB"
        "QU1BQWdBQndBSUFBQUFBQUFBQVVBQUFBQVFBQlFBQ0FBR0FBY0FEQUFBQUJBQUVBQUFBQUFBQVFVUUFBQUFI"
        "QUFBQUFRQUFBQUFBQUFBQkFBQUFIQmhkR2dBQUFBQUJBQUVBQVFBQUFBPQAYIHBhcnF1ZXQtY3BwLWFycm93"
        "IHZlcnNpb24gMjYuMC4xGUwcAAAcAAAcAAAcAAAA7gQAAFBBUjE="
    ),
    (
        "UEFSMRUAFeoEFXwsFTIVABUGFQYcAAAAH4sIAAAAAAACA2NlYGDgvFf9npEbyNBPSSxJ1E8z1MtLRuIaoXIN"
        "ULmGpMjiN8qIAqPo6mYAzeb+wjUBAAAVABWcAxXKASwVMhUAFQYVBhwAAAAfiwgAAAAAAAIDY2JgYDBiZICC"
        "FCh9AkrrQGUmQOkvUDqCCULvgdIKzBC6BUq/gNI+LBB6A5QWYYXQFVD6DpR2YIPQS6A0BzuEzoHSF6C0CQeE"
        "ngGl/0DpBE4IDQCeT8lIzgAAABUAFZwDFUQsFTIVABUGFQYcAAAAH4sIAAAAAAACA2NiYGAwYmSAghQC9GBX"
        "BwAU3UJDzgAAABUAFVgVYiwVMhUAFQYVBhwAAAAfiwgAAAAAAAIDY2VgYOBUbBFgAAFWEAYBZiCDi4uLEUjx"
        "swEJETAAANBaTYQsAAAAFQAV9gIVciwVHhUAFQYVBhwAAAAfiwgAAAAAAAIDY2ZgYGC9V80NpPRTEksS9dOM"
        "9PKSkbgGqFxDVK4RKbL4jTIg1SgAMOKQyrsAAAAVABX8ARWUASwVHhUAFQYVBhwAAAAfiwgAAAAAAAIDY2Jg"
        "YJBjPMLJAAYaXBC6B0p/gNIh3BB6B5SW4YHQDVD6CZT24IXQa6C0AB+ELoHSN6C0DT+EBgCBpbcqfgAAABUA"
        "FfwBFUQsFR4VABUGFQYcAAAAH4sIAAAAAAACA2NiYGCQY2SAghQCNLXVAQCDRwtMfgAAABUAFTIVTiwVHhUA"
        "FQYVBhwAAAAfiwgAAAAAAAIDY2ZgYGBVZGEBUpJAwASk5eSABAMAWFbfkRkAAAAVBBlcNQAYBnNjaGVtYRUI"
        "ABUMJQIYBHBhdGglAEwcAAAAFQQlAhgGb2Zmc2V0ABUEJQIYBHNpemUAFQwlAhgDcmF3ABZQGSwZTCYAHBUM"
        "GSUGABkYBHBhdGgVBBYyFpIFFqQBJghJHBUAFQAVAgA8FrgDGQYZJgooAAAAJgAcFQQZJQYAGRgGb2Zmc2V0"
        "FQQWMhbGAxb0ASasAUkcFQAVABUCADwpBhkmADIAAAAmABwVBBklBgAZGARzaXplFQQWMhbEAxZsJqADSRwV"
        "ABUAFQIAPCkGGSYAMgAAACYAHBUMGSUGABkYA3JhdxUEFjIWfhaIASaMBEkcFQAVABUCADwWHhkGGSYoCgAA"
        "ABaaDRYyJggWjAUAGUwmABwVDBklBgAZGARwYXRoFQQWHhaeAxaaASaUBUkcFQAVABUCADwWiAIZBhkmBhgA"
        "AAAmABwVBBklBgAZGAZvZmZzZXQVBBYeFqYCFr4BJq4GSRwVABUAFQIAPCkGGSYAHgAAACYAHBUEGSUGABkY"
        "BHNpemUVBBYeFqQCFmwm7AdJHBUAFQAVAgA8KQYZJgAeAAAAJgAcFQwZJQYAGRgDcmF3FQQWHhZYFnQm2AhJ"
        "HBUAFQAVAgA8FgwZBhkmGAYAAAAWwAgWHiaUBRa4BAAZHBgMQVJST1c6c2NoZW1hGOwCLy8vLy93Z0JBQUFR"
        "QUFBQUFBQUtBQXdBQmdBRkFBZ0FDZ0FBQUFBQkJBQU1BQUFBQ0FBSUFBQUFCQUFJQUFBQUJBQUFBQVFBQUFD"
        "c0FBQUFZQUFBQUN3QUFBQUVBQUFBZFAvLy93QUFBUVFRQUFBQUZBQUFBQVFBQUFBQUFBQUFBd0FBQUhKaGR3"
        "QmcvLy8vbVAvLy93QUFBUUlRQUFBQUdBQUFBQVFBQUFBQUFBQUFCQUFBQUhOcGVtVUFBQUFBMFAvLy93QUFB"
        "QUZBQUFBQXlQLy8vd0FBQVFJUUFBQUFJQUFBQUFRQUFBQUFBQUFBQmdBQUFHOW1abk5sZEFBQUNBQU1BQWdB"
        "QndBSUFBQUFBQUFBQVVBQUFBQVFBQlFBQ0FBR0FBY0FEQUFBQUJBQUVBQUFBQUFBQVFVUUFBQUFIQUFBQUFR"
        "QUFBQUFBQUFBQkFBQUFIQmhkR2dBQUFBQUJBQUVBQVFBQUFBPQAYIHBhcnF1ZXQtY3BwLWFycm93IHZlcnNp"
        "b24gMjYuMC4xGUwcAAAcAAAcAAAcAAAAmgMAAFBBUjE="
    ),
]


def _pyarrow_table(n=40):
    paths = [None if i % 5 == 0 else f"/data/f{i % 3}.nc" for i in range(n)]
    raws = [None if i % 5 else bytes([i]) * (i % 7) for i in range(n)]
    offsets = [100 * i for i in range(n)]
    sizes = [0 if i % 5 == 0 else 100 for i in range(n)]
    return {"path": paths, "offset": offsets, "size": sizes, "raw": raws}


@pytest.mark.parametrize("which", [0, 1])
def test_reader_reads_what_pyarrow_writes(which):
    data = base64.b64decode("".join(_PYARROW_FILES[which]))
    cols, names = rp._read_columns(data, 40)
    want = _pyarrow_table()
    assert names == list(want)
    assert {c: cols[c] for c in want} == want
    rec = rp._decode_record(data, 40)
    assert rp._row(rec, 0, "x/0") == b""  # raw of length 0, as fsspec reads it
    assert rp._row(rec, 1, "x/1") == ("/data/f1.nc", 100, 100)


def test_corrupt_record_files_raise_and_never_crash(tmp_path):
    """fastparquet trusts the lengths, counts and indices inside a page (a value
    length of 2**31 in an uncompressed page crashes it); pyarrow, which cuzarr
    reads records with, checks them. In a child process with a 1 GiB address-space
    cap, with a mutation fuzz of valid record files."""
    seeds = [_record_bytes()[0], _record_bytes(categorical=True)[0]]
    seeds.append(_record_bytes(compression="ZSTD", categorical=True)[0])
    for i, s in enumerate(seeds):
        (tmp_path / f"seed{i}.parq").write_bytes(s)
    # the crafted case: the length of the first path, 2**31 - 16
    value = b"/data/file2.nc"
    crafted = seeds[0].replace(
        len(value).to_bytes(4, "little") + value, b"\xf0\xff\xff\x7f" + value, 1
    )
    assert crafted != seeds[0]
    (tmp_path / "crafted.parq").write_bytes(crafted)
    script = textwrap.dedent(
        """
        import random, resource, sys, time
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from cuzarr.errors import MetadataError
        from cuzarr.storage import reference_parquet as rp
        d = Path(sys.argv[1])
        try:
            rp._decode_record((d / "crafted.parq").read_bytes(), 40)
            print("crafted: decoded")
        except Exception as e:
            print("crafted:", type(e).__name__, e)
        seeds = [(d / f"seed{i}.parq").read_bytes() for i in range(3)]
        rng = random.Random(1)
        outcomes = {}
        stop = time.monotonic() + 20
        for it in range(1500):
            if time.monotonic() > stop:
                break
            b = bytearray(rng.choice(seeds))
            for _ in range(rng.choice([1, 1, 2, 4])):
                i = rng.randrange(len(b))
                if rng.random() < 0.7:
                    b[i] = rng.randrange(256)
                else:
                    b[i : i + 4] = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 0x80]).to_bytes(4, "little")
            t = time.monotonic()
            try:
                rp._decode_record(bytes(b), 40)
                kind = "ok"
            except (ValueError, MetadataError, Exception) as e:
                kind = type(e).__name__
            assert time.monotonic() - t < 5, "slow decode"
            outcomes[kind] = outcomes.get(kind, 0) + 1
        print("fuzz:", sorted(outcomes.items()))
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "crafted: ArrowInvalid" in r.stdout, r.stdout
    assert "fuzz: " in r.stdout and "ok" in r.stdout


def _record_dir(tmp_path, name, df, record_size=4, **write):
    root = tmp_path / name
    (root / "x").mkdir(parents=True)
    meta = {"metadata": {"x/.zarray": json.loads(zarray([len(df)], [1]))}}
    (root / ".zmetadata").write_text(json.dumps({**meta, "record_size": record_size}))
    fastparquet.write(str(root / "x" / "refs.0.parq"), df, stats=False, **write)
    return ReferenceStore(str(root))


def test_malformed_cells_raise_metadata_error_naming_the_key(tmp_path):
    ok = {"path": ["/a", "/b"], "offset": [0, 8], "size": [8, 8]}
    # raw holding numbers: not read as their bytes
    store = _record_dir(tmp_path, "r1", pd.DataFrame({**ok, "raw": [5, None]}))
    with pytest.raises(MetadataError, match=r"reference 'x/0': 'raw' holds 5"):
        sync(store.get("x/0"))
    # a path that is not UTF-8
    df = pd.DataFrame({**ok, "path": [b"/a\xff", b"/b"], "raw": [None, None]})
    store = _record_dir(tmp_path, "r2", df, object_encoding={"path": "bytes", "raw": "bytes"})
    with pytest.raises(MetadataError, match=r"reference 'x/0': path is not UTF-8"):
        sync(store.get("x/0"))
    # NaN and negative offsets and sizes
    df = pd.DataFrame({"path": ["/a", "/b"], "offset": [np.nan, 8.0], "size": [8.0, -8.0]})
    store = _record_dir(tmp_path, "r3", df)
    with pytest.raises(
        MetadataError, match=r"reference 'x/0': .*non-negative integers, got (nan|None)"
    ):
        sync(store.get("x/0"))
    with pytest.raises(MetadataError, match=r"reference 'x/1': .*non-negative integers, got -8"):
        sync(store.get("x/1"))
    # more rows in the row groups than a record holds (a reader sizes its
    # output by them: a small file could claim millions)
    data, _ = _record_bytes(n=4)
    pf = fastparquet.ParquetFile(io.BytesIO(data))
    fmd = pf.fmd
    fmd.row_groups = list(fmd.row_groups) * 3
    foot = fmd.to_bytes()
    n = int.from_bytes(data[-8:-4], "little")
    evil = data[: len(data) - 8 - n] + foot + len(foot).to_bytes(4, "little") + b"PAR1"
    with pytest.raises(ValueError, match="12 rows, more than the record size 10"):
        rp._read_columns(evil, 10)
    assert len(rp._read_columns(evil, 12)[0]["path"]) == 12


def test_huge_integers_in_json_are_metadata_errors(tmp_path):
    big = "1" * 5000  # past Python's int digit limit: json raises a bare ValueError
    root = tmp_path / "refs.parq"
    root.mkdir()
    (root / ".zmetadata").write_text(
        '{"metadata": {"x/.zarray": {"shape": [' + big + '], "chunks": [1]}}, "record_size": 4}'
    )
    with pytest.raises(MetadataError, match=r"\.zmetadata: not JSON"):
        ReferenceStore(str(root))
    (tmp_path / "refs.json").write_text('{"x/0": ["f", ' + big + ", 1]}")
    with pytest.raises(MetadataError, match="not a JSON reference file"):
        ReferenceStore(str(tmp_path / "refs.json"))


# -- the record cache ----------------------------------------------------------------


def test_record_cache_under_concurrent_reads(tmp_path, monkeypatch):
    root = tmp_path / "refs.parq"
    out = LazyReferenceMapper.create(str(root), record_size=4)
    out["x/.zarray"] = zarray([16], [1], "|u1")
    for i in range(16):
        out[f"x/{i}"] = bytes([i])
    out.flush()
    reads = []
    read = rp.ParquetReferences._read

    async def slow(self, rel):
        reads.append(rel)
        await asyncio.sleep(0.05)
        return await read(self, rel)

    monkeypatch.setattr(rp.ParquetReferences, "_read", slow)
    want = [bytes([i]) for i in range(16)]
    store = ReferenceStore(str(root), cache_size=1)  # records evicted while in use

    async def scenario():
        got = await asyncio.gather(*(store.get(f"x/{i}") for i in range(16)))
        assert got == want and sorted(reads) == [f"x/refs.{r}.parq" for r in range(4)]
        # the reader cancelled: a task waiting on its read reads it itself
        fresh = ReferenceStore(str(root))
        reads.clear()
        first = asyncio.ensure_future(fresh.get("x/0"))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(fresh.get("x/1"))
        await asyncio.sleep(0.01)
        first.cancel()
        assert await second == b"\x01" and reads == ["x/refs.0.parq"] * 2
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(scenario())
    # threads sharing the store through the sync API
    store = ReferenceStore(str(root), cache_size=2)
    results, errors = [], []

    def work():
        try:
            results.append([sync(store.get(f"x/{i}")) for i in range(16)])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [want] * 6


# -- gen bounds --------------------------------------------------------------------


def _gen(key, dims, **extra):
    entry = {"key": key, "url": "f.bin", "dimensions": dims, **extra}
    return {"version": 1, "templates": {"u": "a" * 10000}, "refs": {}, "gen": [entry]}


@pytest.mark.parametrize(
    ("key", "dims", "message"),
    [
        ("k/{{ '%0999999999d' % i }}", {"i": [1]}, "field width or precision over 65536"),
        ("k/{{ '%.999999999f' % i }}", {"i": [1]}, "field width or precision over 65536"),
        ("k/{{ '%%%0999999999d' % i }}", {"i": [1]}, "field width or precision"),
        ("k/{{ '%(a)0999999999d' % i }}", {"i": [{"a": 1}]}, "got str and dict"),
        ("k/{{ i * 1000000000 }}", {"i": [[1, 2]]}, "got list and int"),
        ("k/{{ i + i }}", {"i": [[1]]}, "got list and list"),
        ("k/{{ u + u + u + u + u + u + u }}", {"i": [1]}, "string over 65536 characters"),
        ("k/{{ i * i * i * i * i * i * i * i }}", {"i": [10**300]}, "number over 4096 bits"),
        ("k/{{ i }}", {"i": {"stop": 10**12}}, "makes over 10000000 references"),
        ("k/{{ i }}", {"i": {"stop": 10**30}}, "makes over 10000000 references"),
        ("k/{{ i }}.{{ j }}", {"i": {"stop": 10**4}, "j": {"stop": 10**4}}, "over 10000000"),
    ],
)
def test_gen_bounds_what_an_entry_may_build(key, dims, message):
    t = time.monotonic()
    with pytest.raises(MetadataError, match=message):
        ReferenceStore(_gen(key, dims))
    assert time.monotonic() - t < 5


def test_gen_within_the_bounds_renders_as_jinja():
    pytest.importorskip("jinja2")  # fsspec's renderer: the oracle
    doc = _gen(
        "k/{{ '%03d' % i }}.{{ '%s' % j }}.{{ '%%' + '%5.1f' % (i / 2) }}.{{ i * 7 // 2 }}",
        {"i": {"stop": 3}, "j": [[1, 2], "x"]},
        offset="{{ i * 1000 }}",
        length="{{ 10 }}",
    )
    fs = fsspec.filesystem("reference", fo=doc, simple_templates=False)
    want = {k: (v[0], v[1], v[2]) for k, v in fs.references.items()}
    store = ReferenceStore(doc)
    assert store._refs == want and len(want) == 6
    # a dimension without values makes nothing, however long the others
    empty = _gen("k/{{i}}.{{j}}", {"i": {"stop": 10**30}, "j": []})
    assert sync(_collect(ReferenceStore(empty).list())) == []
