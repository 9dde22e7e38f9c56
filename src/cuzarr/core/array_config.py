"""``ArrayConfig``: the runtime configuration of an array (zarr-python's ``config=``)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

from cuzarr.config import config as _global_config
from cuzarr.config import flag
from cuzarr.errors import ZarrUserWarning

__all__ = ["ArrayConfig", "config_dict", "parse_array_config"]

# zarr-python's per-array keys with no per-array counterpart here, and their
# defaults there: cuzarr's global sharding.coalesce_* settings do their work
_ZARR_PYTHON_ONLY = {
    "sharding_coalesce_max_gap_bytes": (1 << 20, "sharding.coalesce_max_gap"),
    "sharding_coalesce_max_bytes": (16 << 20, "sharding.coalesce_max_size"),
}


@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    """Runtime settings of an array, not stored in its metadata.

    Parameters
    ----------
    order : {"C", "F"}
        Memory layout of the arrays that reads return (for Zarr v3; a v2 array's order
        is stored in its metadata).
    write_empty_chunks : bool
        Store chunks that equal the fill value (False: such chunks are deleted).
    read_missing_chunks : bool
        Read chunks that are not stored as the fill value (False: reading one
        raises ``ChunkNotFoundError``; in a sharded array, a shard not stored).
    """

    order: str = "C"
    write_empty_chunks: bool = False
    read_missing_chunks: bool = True

    def __post_init__(self) -> None:
        if self.order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {self.order!r}")
        if not isinstance(self.write_empty_chunks, bool):
            raise TypeError(f"write_empty_chunks must be a bool, got {self.write_empty_chunks!r}")
        if not isinstance(self.read_missing_chunks, bool):
            raise TypeError(f"read_missing_chunks must be a bool, got {self.read_missing_chunks!r}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain ``dict``.

        Returns
        -------
        dict
            ``{"order": ..., "write_empty_chunks": ..., "read_missing_chunks": ...}``.
        """
        return dataclasses.asdict(self)


def parse_array_config(value: ArrayConfig | Mapping[str, Any] | None) -> ArrayConfig:
    """An ``ArrayConfig`` from an ``ArrayConfig``, a ``dict`` or ``None``.

    Parameters
    ----------
    value : ArrayConfig, dict or None
        Missing keys come from ``cuzarr.config`` (``array.order``,
        ``array.write_empty_chunks``, ``array.read_missing_chunks``); unknown keys raise.

    Returns
    -------
    ArrayConfig
    """
    if isinstance(value, ArrayConfig):
        return value
    d = dict(value or {})
    unknown = set(d) - {"order", "write_empty_chunks", "read_missing_chunks"}
    if unknown:
        raise ValueError(f"unknown array config keys: {sorted(unknown)}")
    d.setdefault("order", _global_config.get("array.order", "C") or "C")
    d.setdefault("write_empty_chunks", flag("array.write_empty_chunks"))
    d.setdefault("read_missing_chunks", flag("array.read_missing_chunks", True))
    return ArrayConfig(**d)


def config_dict(value: Any) -> dict[str, Any]:
    """The keys of an array config given as a ``dict``, a cuzarr ``ArrayConfig``
    or zarr-python's ``ArrayConfig`` (``None``: none).

    zarr-python's ``sharding_coalesce_*`` keys are dropped (they tune reads, not
    their results), with a ``ZarrUserWarning`` when set to other than
    zarr-python's defaults: cuzarr tunes that globally.
    """
    if value is None:
        return {}
    if isinstance(value, ArrayConfig):
        return value.to_dict()
    if isinstance(value, Mapping):
        d = dict(value)
    elif callable(getattr(value, "to_dict", None)):  # zarr-python's ArrayConfig
        d = dict(value.to_dict())
    else:
        raise TypeError(f"an array config must be a dict or an ArrayConfig, not {value!r}")
    for key, (default, ours) in _ZARR_PYTHON_ONLY.items():
        if key in d and d.pop(key) != default:
            warnings.warn(
                f"array config {key!r} has no per-array effect in cuzarr; set "
                f"cuzarr.config {ours!r} instead",
                ZarrUserWarning,
                stacklevel=3,
            )
    return d
