"""Codec interfaces and the registry of v3 codec names.

A codec is one of three kinds, as in the v3 spec: array->array (e.g. transpose),
array->bytes (exactly one per pipeline, e.g. ``bytes``) and bytes->bytes
(compressors, checksums). Codec methods are synchronous and run in the codec
thread pool; they never do I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cuzarr.errors import MetadataError, UnknownCodecError
from cuzarr.metadata.dtypes import DataType
from cuzarr.metadata.named import parse_named

__all__ = [
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BytesBytesCodec",
    "ChunkSpec",
    "Codec",
    "codec_from_json",
    "register_codec",
]


@dataclass(frozen=True)
class ChunkSpec:
    """What a codec needs to know about the chunk it transforms."""

    shape: tuple[int, ...]
    dtype: DataType
    fill_value: Any = None

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.dtype.item_size


class Codec:
    """Base class of all codecs."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The codec's entry in a v3 ``codecs`` list."""
        conf = self.configuration()
        return (
            {"name": self.name, "configuration": conf} if conf is not None else {"name": self.name}
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`to_json` under zarr-python's name."""
        return self.to_json()

    def configuration(self) -> dict[str, Any] | None:
        return {}

    def evolve(self, spec: ChunkSpec) -> Codec:
        """Fill in parameters that depend on the array (e.g. blosc's typesize)."""
        return self

    def validate(self, spec: ChunkSpec) -> None:
        """Raise ``MetadataError`` if this codec cannot handle ``spec``."""

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_json() == other.to_json()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(repr(self.to_json()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.configuration()})"


class ArrayArrayCodec(Codec, ABC):
    kind = "array_array"

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The spec of the array this codec produces from an array of ``spec``."""
        return spec

    @abstractmethod
    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Transform a chunk array of ``spec``."""

    @abstractmethod
    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Invert ``encode``; ``spec`` is this codec's *input* spec."""


class ArrayBytesCodec(Codec, ABC):
    kind = "array_bytes"

    @abstractmethod
    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> bytes:
        """Serialize a chunk array of ``spec`` to bytes."""

    @abstractmethod
    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        """Deserialize bytes to a chunk array of ``spec``."""


class BytesBytesCodec(Codec, ABC):
    kind = "bytes_bytes"

    @abstractmethod
    def encode(self, data: Any, spec: ChunkSpec) -> Any:
        """Transform encoded bytes (compress, checksum...)."""

    @abstractmethod
    def decode(
        self, data: Any, spec: ChunkSpec, size_hint: int | None = None, limit: int | None = None
    ) -> Any:
        """Invert ``encode``.

        ``size_hint`` is the exact decoded size when known; ``limit`` an upper
        bound otherwise. Decoders refuse (``CodecError``) to produce more, before
        allocating it where the format says how much it holds.
        """


_REGISTRY: dict[str, Callable[[dict[str, Any]], Codec]] = {}


def register_codec(name: str, factory: Callable[[dict[str, Any]], Codec]) -> None:
    """Make ``name`` resolvable in v3 ``codecs`` lists."""
    _REGISTRY[name] = factory


def codec_from_json(obj: Any) -> Codec:
    """Build a codec from its v3 JSON (``{"name": ..., "configuration": ...}``)."""
    if isinstance(obj, str):
        obj = {"name": obj}
    name, conf = parse_named(obj, "codec entry")
    from cuzarr.codecs import _load_builtin_codecs

    _load_builtin_codecs()
    factory = _REGISTRY.get(name)
    if factory is None:
        if name.startswith("numcodecs."):
            from cuzarr.codecs.numcodecs_bridge import numcodecs_v3_codec

            return numcodecs_v3_codec(name, conf)
        raise UnknownCodecError(f"unknown codec {name!r}")
    try:
        return factory(conf)
    except (TypeError, ValueError, KeyError) as e:
        if isinstance(e, MetadataError):
            raise
        raise MetadataError(f"invalid configuration for codec {name!r}: {conf!r} ({e})") from e
