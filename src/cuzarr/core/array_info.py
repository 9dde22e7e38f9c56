"""``ArrayInfo``: the summary ``Array.info`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ArrayInfo"]


@dataclass
class ArrayInfo:
    """Summary of an array (``Array.info``)."""

    type: str
    zarr_format: int
    data_type: str
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    order: str
    read_only: bool
    store_type: str
    codecs: str
    count_bytes: int
    nchunks: int
    fill_value: Any = None
    shard_shape: Any = None
    nshards: int | None = None
    # Filled in by ``Array.info_complete()`` only (they need store requests).
    count_bytes_stored: int | None = None
    count_chunks_initialized: int | None = None
    count_shards_initialized: int | None = None

    def __repr__(self) -> str:
        rows: list[tuple[str, Any]] = [
            ("Type", self.type),
            ("Zarr format", self.zarr_format),
            ("Data type", self.data_type),
            ("Fill value", self.fill_value),
            ("Shape", self.shape),
        ]
        if self.shard_shape is not None:
            rows.append(("Shard shape", self.shard_shape))
        rows += [
            ("Chunk shape", self.chunk_shape),
            ("Order", self.order),
            ("Read-only", self.read_only),
            ("Store type", self.store_type),
            ("Codecs", self.codecs),
            ("No. bytes", f"{self.count_bytes} ({_human(self.count_bytes)})"),
            ("No. chunks", self.nchunks),
        ]
        if self.shard_shape is not None:
            rows.append(("No. shards", self.nshards))
        if self.count_bytes_stored is not None:
            stored = self.count_bytes_stored
            rows.append(("No. bytes stored", f"{stored} ({_human(stored)})"))
            if stored:
                rows.append(("Storage ratio", f"{self.count_bytes / stored:.2f}"))
        if self.count_chunks_initialized is not None:
            rows.append(("Chunks initialized", self.count_chunks_initialized))
        if self.count_shards_initialized is not None and self.shard_shape is not None:
            rows.append(("Shards initialized", self.count_shards_initialized))
        return "\n".join(f"{k:<19}: {v}" for k, v in rows)

    __str__ = __repr__


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1024
    return str(n)  # pragma: no cover
