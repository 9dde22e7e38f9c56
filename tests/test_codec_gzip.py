"""The gzip codec's multi-member reader keeps its output bound for every member."""

from __future__ import annotations

import gzip
import zlib

import pytest

from cuzarr.codecs import compressors
from cuzarr.codecs.compressors import GzipCodec
from cuzarr.errors import CodecError


def test_gzip_member_after_an_oversized_first_one_is_not_decompressed_unbounded(monkeypatch):
    """A first gzip member that already decodes to bound + 1 bytes, then a second
    (a decompression bomb): the bound must still hold for the second member. The
    multi-member reader asked zlib for ``bound - total + 1`` = 0 bytes there, which
    zlib reads as "no limit", and inflated the whole bomb before refusing it."""
    bound = 10
    bomb = gzip.compress(b"\0" * (8 << 20))
    data = gzip.compress(b"x" * (bound + 1)) + bomb
    asked: list[int] = []
    real = zlib.decompressobj

    class Recording:
        def __init__(self, wbits):
            self._d = real(wbits)

        def decompress(self, buf, max_length=0):
            asked.append(max_length)
            return self._d.decompress(buf, max_length)

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(compressors.zlib, "decompressobj", Recording)
    with pytest.raises(CodecError, match="more than the 10 bytes"):
        GzipCodec().decode(data, None, size_hint=bound)
    assert asked and 0 not in asked, asked
