"""Every numcodecs compressor decodes at most the chunk's size (codecs/bounded.py),
in v2 and v3 arrays, for inner chunks of shards and for whole shards (a
compressor after ``sharding_indexed``, bounded by the largest shard possible).

Bombs (a few hundred bytes to ~2 MB that inflate to 2 GiB) are read in a child
process whose address space is capped 512 MiB above what it maps: the read must
end in a ``CodecError`` about the size, not in ``MemoryError``. Before
codecs/bounded.py, zlib, bz2, lzma and LZ4 decoded the whole stream first.
"""

from __future__ import annotations

import bz2
import lzma
import os
import re
import sys
import zlib

import numcodecs
import numcodecs.zarr3
import numpy as np
import pytest
import zarr

import cuzarr
from _memcap import MiB, attempt, run_child
from cuzarr.codecs.bounded import bunzip2, check_lz4_header, gunzip, inflate, unxz
from cuzarr.codecs.checksum import crc32c
from cuzarr.errors import CodecError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc: Linux")

KINDS = ("zlib", "bz2", "lzma", "lz4")
BOMB = 2 << 30  # bytes a bomb inflates to
N = 4096  # elements (uint8) per chunk


def _codec(kind: str) -> object:
    return {
        "zlib": numcodecs.Zlib(level=1),
        "bz2": numcodecs.BZ2(level=1),
        "lzma": numcodecs.LZMA(),
        "lz4": numcodecs.LZ4(),
    }[kind]


def _conf(codec: object) -> dict:
    conf = dict(codec.get_config())  # type: ignore[attr-defined]
    conf.pop("id")
    return conf


def _zlib_bomb(n_mib: int) -> bytes:
    """One zlib stream of ``n_mib`` MiB of zeros, built from one full-flushed
    deflate block repeated (byte-aligned, no back references across it)."""
    z = bytes(MiB)
    c = zlib.compressobj(9)
    head = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush()[:-4]
    adler = 1
    for _ in range(n_mib):
        adler = zlib.adler32(z, adler)
    return head + block * (n_mib - 1) + end + adler.to_bytes(4, "big")


def bomb(kind: str) -> bytes:
    """A valid stream of ``kind`` that inflates to 2 GiB of zeros."""
    if kind == "zlib":
        return _zlib_bomb(BOMB // MiB)
    if kind == "bz2":
        one = bz2.compress(bytes(32 * MiB), 9)  # concatenated streams, as bz2 reads them
        return one * (BOMB // (32 * MiB))
    if kind == "lzma":
        one = lzma.compress(bytes(16 * MiB))  # concatenated xz streams
        return one * (BOMB // (16 * MiB))
    return (BOMB - 1).to_bytes(4, "little") + bytes(16)  # LZ4: the header's size


def _chunk_file(root: str) -> str:
    names = [
        os.path.join(r, f)
        for r, _, fs in os.walk(root)
        for f in fs
        if f not in ("zarr.json", ".zarray", ".zattrs", ".zgroup")
    ]
    assert len(names) == 1, names
    return names[0]


def _plant(root: str, layout: str, payload: bytes) -> None:
    path = _chunk_file(root)
    if layout == "shard":
        # two inner chunks; the first is the bomb, the second is missing
        index = (0).to_bytes(8, "little") + len(payload).to_bytes(8, "little")
        index += b"\xff" * 16
        payload = payload + index + crc32c(index).to_bytes(4, "little")
    with open(path, "wb") as f:
        f.write(payload)


def _create(path: str, kind: str, layout: str) -> cuzarr.Array:
    comp = _codec(kind)
    if layout == "v2":
        return cuzarr.create_array(
            path, shape=(N,), chunks=(N,), dtype="u1", zarr_format=2, compressors=[comp]
        )
    if layout == "v3":
        return cuzarr.create_array(path, shape=(N,), chunks=(N,), dtype="u1", compressors=[comp])
    if layout == "shard":
        return cuzarr.create_array(
            path, shape=(2 * N,), chunks=(N,), shards=(2 * N,), dtype="u1", compressors=[comp]
        )
    # "outer": the compressor applies to whole shards (after sharding_indexed)
    sharding = {
        "name": "sharding_indexed",
        "configuration": {"chunk_shape": [N], "codecs": [{"name": "bytes"}]},
    }
    return cuzarr.create_array(
        path, shape=(2 * N,), chunks=(2 * N,), dtype="u1", serializer=sharding, compressors=[comp]
    )


def child_bombs(layout: str, workdir: str) -> dict[str, dict]:
    """In the child: each compressor's bomb read through ``layout`` under the cap."""
    out = {}
    for kind in KINDS:
        root = os.path.join(workdir, kind)
        a = _create(root, kind, layout)
        a[:] = 7
        assert (a[:] == 7).all()  # a real chunk reads (and warms the thread pools)
        _plant(root, layout, bomb(kind))
        a = cuzarr.open_array(root)  # the codecs as the metadata names them
        out[kind] = attempt(lambda a=a: a[:])
    return out


@pytest.mark.parametrize("layout", ["v2", "v3", "shard", "outer"])
def test_compressor_bombs_fail_fast_under_a_memory_cap(layout, tmp_path):
    res = run_child("test_bounded_decoding", "child_bombs", layout, str(tmp_path))
    for kind, r in res.items():
        print(f"bomb {layout}/{kind}: {r}")
        assert r["error"] == "CodecError", (kind, r)
        # refused by the bound, not a MemoryError wrapped by the codec
        assert r["cause"] != "MemoryError", (kind, r)
        assert re.search(r"more than the \d+ (bytes )?allowed|lz4 chunk holds", r["message"]), r
        assert r["peak_mib"] < 256, (kind, r)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", [2, 3])
def test_bounded_compressors_read_like_zarr_python(kind, fmt, tmp_path):
    """The bounded decoders read zarr-python's chunks, and zarr-python reads cuzarr's."""
    data = (np.arange(3 * N) % 251).astype("u1")
    comp = _codec(kind)
    kw = {"compressors": [comp]}
    # zarr-python's v3 arrays take numcodecs' zarr3 wrappers
    zcomp = comp if fmt == 2 else getattr(numcodecs.zarr3, type(comp).__name__)(**_conf(comp))
    z = zarr.create_array(
        str(tmp_path / "z"),
        shape=data.shape,
        chunks=(N,),
        dtype="u1",
        zarr_format=fmt,
        compressors=[zcomp],
    )
    z[:] = data
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "z"))[:], data)
    a = cuzarr.create_array(
        str(tmp_path / "c"), shape=data.shape, chunks=(N,), dtype="u1", zarr_format=fmt, **kw
    )
    a[:] = data
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "c"))[:], data)
    np.testing.assert_array_equal(a[:], data)


def test_concatenated_streams_read_as_the_standard_library_reads_them():
    a, b = b"x" * 1000, b"y" * 500
    assert bunzip2(bz2.compress(a) + bz2.compress(b), 1500) == a + b
    assert bunzip2(bz2.compress(a) + b"junk", 1000) == a  # trailing garbage: ignored
    assert unxz(lzma.compress(a) + lzma.compress(b), 1500) == a + b
    assert inflate(zlib.compress(a) + b"junk", 1000) == a
    assert gunzip(zlib.compress(a, wbits=31) + zlib.compress(b, wbits=31), 1500) == a + b
    for fn, data in [
        (bunzip2, bz2.compress(a) + bz2.compress(b)),
        (unxz, lzma.compress(a) + lzma.compress(b)),
        (gunzip, zlib.compress(a, wbits=31) + zlib.compress(b, wbits=31)),
        (inflate, zlib.compress(a + b)),
    ]:
        with pytest.raises(CodecError, match="more than the 1499 bytes allowed"):
            fn(data, 1499)


def test_truncated_and_corrupt_streams_are_codec_errors():
    a = bytes(range(256)) * 8
    for fn, data in [
        (bunzip2, bz2.compress(a)),
        (unxz, lzma.compress(a)),
        (inflate, zlib.compress(a)),
        (gunzip, zlib.compress(a, wbits=31)),
    ]:
        with pytest.raises(CodecError, match="truncated"):
            fn(data[:-8], len(a))
        with pytest.raises(CodecError):
            fn(b"\x00garbage" + data, len(a))


def test_lz4_header_is_checked_before_decoding():
    enc = numcodecs.LZ4().encode(bytes(100))
    check_lz4_header(enc, 100, 100)
    with pytest.raises(CodecError, match="holds 100 bytes, expected 99"):
        check_lz4_header(enc, 99, None)
    with pytest.raises(CodecError, match="more than the 99 allowed"):
        check_lz4_header(enc, None, 99)
    with pytest.raises(CodecError, match="shorter than its header"):
        check_lz4_header(b"\x01", None, 99)


def test_lzma_dictionary_is_limited_with_the_output():
    """liblzma allocates the dictionary the header asks for: a hostile 1.5 GiB
    one (patched into an .lzma header, which has no checksum) is refused by the
    decoder's memory limit."""
    data = bytearray(lzma.compress(b"abc", format=lzma.FORMAT_ALONE))
    data[1:5] = (1536 * MiB).to_bytes(4, "little")
    with pytest.raises(CodecError, match="lzma decompression failed"):
        unxz(data, 3, lzma.FORMAT_ALONE)
    assert unxz(lzma.compress(b"abc", format=lzma.FORMAT_ALONE), 3, lzma.FORMAT_ALONE) == b"abc"
