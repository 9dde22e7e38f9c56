"""The v3 ``crc32c`` codec: a little-endian CRC32C appended to the bytes."""

from __future__ import annotations

from typing import Any

from cuzarr.codecs.base import BytesBytesCodec, ChunkSpec, register_codec
from cuzarr.errors import ChecksumError

__all__ = ["Crc32cCodec", "crc32c"]

try:
    import google_crc32c as _g

    def crc32c(data: Any) -> int:
        """CRC32C (Castagnoli) of a bytes-like object."""
        return _g.value(bytes(data) if not isinstance(data, (bytes, bytearray)) else data)

except ImportError:  # pragma: no cover - fallback binding
    import crc32c as _c

    def crc32c(data: Any) -> int:
        return _c.crc32c(data)


class Crc32cCodec(BytesBytesCodec):
    """Append a CRC32C on encode, verify and strip it on decode."""

    name = "crc32c"

    def configuration(self) -> dict[str, Any] | None:
        return None

    def encode(self, data: Any, spec: ChunkSpec) -> bytes:
        b = bytes(data)
        return b + crc32c(b).to_bytes(4, "little")

    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        mv = memoryview(data)
        if len(mv) < 4:
            raise ChecksumError(f"chunk of {len(mv)} bytes is too short to hold a crc32c")
        payload = mv[:-4]
        stored = int.from_bytes(mv[-4:], "little")
        if crc32c(payload) != stored:
            raise ChecksumError("crc32c checksum mismatch: the chunk is corrupted")
        return payload


register_codec("crc32c", lambda c: Crc32cCodec())
