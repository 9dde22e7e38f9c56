"""cuzarr_block_checksums on the device (needs a GPU): chunk CRC-32 / Adler-32 of a
CuPy buffer equal zlib's of the same bytes."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

from cuzarr.gpu.checksums import device_chunk_checksums  # noqa: E402

if cp.cuda.runtime.getDeviceCount() == 0:  # pragma: no cover
    pytest.skip("no CUDA device", allow_module_level=True)


@pytest.mark.parametrize("kind", ["crc32", "adler32"])
@pytest.mark.parametrize("block", [4096, 16384])
def test_device_chunk_checksums(kind, block):
    rng = np.random.default_rng(7)
    lengths = [0, 1, 3, 16383, 16384, 16385, 1 << 20, 123_457] + [1 << 20] * 30
    host = rng.integers(0, 256, sum(lengths) + 5 * len(lengths) + 3, dtype=np.uint8)
    host[:100_000] = 0
    host[-100_000:] = 0xFF
    offs = 3 + np.concatenate([[0], np.cumsum(np.array(lengths) + 5)[:-1]])
    dev = cp.asarray(host)
    stream = cp.cuda.Stream(non_blocking=True)
    got = device_chunk_checksums(dev, offs, lengths, kind, stream=stream, block=block)
    f = zlib.crc32 if kind == "crc32" else zlib.adler32
    assert got.tolist() == [f(host[o : o + n]) for o, n in zip(offs.tolist(), lengths)]


def test_device_chunk_checksums_views():
    # a view of a larger buffer, non-uint8 dtype; offsets are relative to the view
    base = cp.arange(1 << 18, dtype=cp.uint32)
    view = base[1000:]
    raw = cp.asnumpy(view).view(np.uint8)
    offs, lens = [0, 5, 70_000], [65_536, 3, 100_000]
    for kind, f in (("crc32", zlib.crc32), ("adler32", zlib.adler32)):
        got = device_chunk_checksums(view, offs, lens, kind)
        assert got.tolist() == [f(raw[o : o + n]) for o, n in zip(offs, lens)]
    with pytest.raises(ValueError):
        device_chunk_checksums(view, [0], [view.nbytes + 1], "crc32")
