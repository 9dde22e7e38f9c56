"""Chunk key encodings: chunk grid coordinates -> store keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuzarr.errors import MetadataError

__all__ = ["ChunkKeyEncoding", "parse_chunk_key_encoding"]


@dataclass(frozen=True)
class ChunkKeyEncoding:
    """``default`` (v3: ``c/1/2``) or ``v2`` (``1.2``) with a separator."""

    name: str = "default"
    separator: str = "/"

    def __post_init__(self) -> None:
        if self.name not in ("default", "v2"):
            raise MetadataError(f"unknown chunk_key_encoding {self.name!r}")
        if self.separator not in ("/", "."):
            raise MetadataError(f"chunk key separator must be '/' or '.', got {self.separator!r}")

    def encode(self, coords: tuple[int, ...]) -> str:
        """The key (relative to the array) of the chunk at ``coords``."""
        sep = self.separator
        if self.name == "default":
            return "c" + "".join(sep + str(c) for c in coords) if coords else "c"
        return sep.join(map(str, coords)) if coords else "0"

    def make_encoder(self, prefix: str) -> Any:
        """A fast ``coords -> full key`` function with ``prefix`` ('' or 'path/')."""
        sep = self.separator
        if self.name == "default":
            head = prefix + "c"
            return lambda coords: head + "".join([sep + str(c) for c in coords])
        if prefix:
            return lambda coords: prefix + (sep.join(map(str, coords)) if coords else "0")
        return lambda coords: sep.join(map(str, coords)) if coords else "0"

    def decode(self, key: str) -> tuple[int, ...] | None:
        """Chunk coordinates of a key, or ``None`` if it is not a chunk key."""
        try:
            if self.name == "default":
                if key == "c":
                    return ()
                if not key.startswith("c" + self.separator):
                    return None
                return tuple(int(p) for p in key[2:].split(self.separator))
            return tuple(int(p) for p in key.split(self.separator))
        except ValueError:
            return None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"separator": self.separator}}


def parse_chunk_key_encoding(value: Any, zarr_format: int = 3) -> ChunkKeyEncoding:
    """Accept a dict, a ``ChunkKeyEncoding``, a separator string, or ``None``."""
    if value is None:
        return ChunkKeyEncoding("default", "/") if zarr_format == 3 else ChunkKeyEncoding("v2", ".")
    if isinstance(value, ChunkKeyEncoding):
        return value
    if isinstance(value, str):
        if value in ("/", "."):
            return ChunkKeyEncoding("default" if zarr_format == 3 else "v2", value)
        return ChunkKeyEncoding(value, "/" if value == "default" else ".")
    if isinstance(value, dict):
        name = value.get("name")
        conf = value.get("configuration") or {}
        if not isinstance(conf, dict):
            raise MetadataError(f"chunk_key_encoding configuration must be an object: {value!r}")
        sep = conf.get("separator", value.get("separator"))
        if sep is None:
            sep = "/" if name == "default" else "."
        return ChunkKeyEncoding(name, sep)
    raise MetadataError(f"invalid chunk_key_encoding {value!r}")
