"""The v3 ``transpose`` codec."""

from __future__ import annotations

from typing import Any

import numpy as np

from cuzarr.codecs.base import ArrayArrayCodec, ChunkSpec, register_codec
from cuzarr.errors import MetadataError

__all__ = ["TransposeCodec"]


class TransposeCodec(ArrayArrayCodec):
    """Permute chunk axes: encoded axis ``i`` is input axis ``order[i]``."""

    name = "transpose"

    def __init__(self, order: Any) -> None:
        if isinstance(order, str):
            # Early v3 drafts allowed "C"/"F"; resolved against ndim in evolve().
            if order not in ("C", "F"):
                raise MetadataError(f"transpose order must be a permutation, got {order!r}")
            self.order: tuple[int, ...] | str = order
        else:
            self.order = tuple(int(i) for i in order)

    def configuration(self) -> dict[str, Any]:
        return {"order": list(self.order) if not isinstance(self.order, str) else self.order}

    def evolve(self, spec: ChunkSpec) -> TransposeCodec:
        if isinstance(self.order, str):
            n = len(spec.shape)
            return TransposeCodec(range(n) if self.order == "C" else range(n - 1, -1, -1))
        return self

    def validate(self, spec: ChunkSpec) -> None:
        if isinstance(self.order, str):
            return
        if sorted(self.order) != list(range(len(spec.shape))):
            raise MetadataError(
                f"transpose order {list(self.order)} is not a permutation of {len(spec.shape)} axes"
            )

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        order = self.evolve(spec).order
        return ChunkSpec(tuple(spec.shape[i] for i in order), spec.dtype, spec.fill_value)

    def encode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return arr.transpose(self.evolve(spec).order)

    def decode(self, arr: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return arr.transpose(np.argsort(self.evolve(spec).order))


register_codec("transpose", lambda c: TransposeCodec(c["order"]))
