"""The mode and the zarr format an open or a creation asks for, with
zarr-python's defaults."""

from __future__ import annotations

from typing import Any

from cuzarr.config import config as cuzarr_config
from cuzarr.storage.base import Store
from cuzarr.storage.common import StorePath, only_zarr_format

__all__ = ["FORMAT_DEFAULT", "check_mode", "resolve_mode", "zarr_format_for"]


_MODES = ("r", "r+", "a", "w", "w-")


def check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


def resolve_mode(mode: str | None, store: Any) -> str:
    """``mode``, checked; ``None`` (zarr-python's default) is ``"r"`` for a read-only
    store object and ``"a"`` otherwise, as in zarr-python."""
    if mode is None:
        st = store.store if isinstance(store, StorePath) else store
        return "r" if isinstance(st, Store) and st.read_only else "a"
    check_mode(mode)
    return mode


class _DefaultFormat(int):
    """``create_array``'s default ``zarr_format`` (3, as in zarr-python) that
    knows it was not given: a store with one possible layout picks its own."""

    def __repr__(self) -> str:
        return "3"


FORMAT_DEFAULT: int = _DefaultFormat(3)


def zarr_format_for(zarr_format: int | None, store: Any = None) -> int:
    """``zarr_format``, or config ``default_zarr_format`` (3) where it is None;
    where ``store`` can hold one format only (N5), that one unless given."""
    if zarr_format is None or isinstance(zarr_format, _DefaultFormat):
        only = only_zarr_format(store)
        if only is not None:
            return only
    if isinstance(zarr_format, _DefaultFormat):
        return 3
    if zarr_format is not None:
        return zarr_format
    fmt = cuzarr_config.get("default_zarr_format")
    if fmt not in (2, 3):
        raise ValueError(f"config default_zarr_format must be 2 or 3, not {fmt!r}")
    return int(fmt)
