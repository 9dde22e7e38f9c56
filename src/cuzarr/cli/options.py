"""The values of ``cuzarr copy``'s options (``--chunks``, ``--shards``,
``--compressor``), parsed from their text.

They are parsed by the command, not by argparse ``type=`` callables, so that
each error reads as ``cuzarr: error: ...`` with the whole explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PerArray", "parse_compressor", "parse_ints", "parse_per_array", "parse_shards"]


def parse_ints(text: str | None) -> tuple[int, ...] | None:
    """A shape option (``--chunks``): ``256,256`` or ``256x256``.

    Parameters
    ----------
    text : str or None
        The option's text; ``None`` when it was not given.

    Returns
    -------
    tuple of int or None
        The sizes (``-1``: the whole extent of the dimension), or ``None``.

    Raises
    ------
    ValueError
        If it is not a list of positive integers (or ``-1``).
    """
    if text is None:
        return None
    try:
        out = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or any(v == 0 or v < -1 for v in out):
        raise ValueError(
            f"expected positive integers like 256,256 (-1: the whole extent), got {text!r}"
        )
    return out


def parse_shards(text: str | None) -> tuple[int, ...] | str | None:
    """The ``--shards`` option (``text`` as for :func:`parse_ints`).

    Returns
    -------
    tuple of int, "none" or None
        A shard shape (``-1``: one shard along the dimension), ``"none"`` (no
        sharding), or ``None`` (keep the source's).

    Raises
    ------
    ValueError
        If it is neither a shape nor ``none``.
    """
    if text is not None and text.strip().lower() in ("none", "null"):
        return "none"
    try:
        return parse_ints(text)
    except ValueError:
        raise ValueError(
            f"--shards takes positive integers like 4096,4096 (-1: one shard along the "
            f"dimension) or none (no sharding), got {text!r}"
        ) from None


def parse_compressor(text: str | None, zarr_format: int) -> Any:
    """The ``--compressor`` option: ``zstd[:level]``, ``gzip[:level]``,
    ``blosc[:cname]`` or ``none``.

    Parameters
    ----------
    text : str or None
        The option's text; ``None`` when it was not given.
    zarr_format : int
        The destination's format (numcodecs codecs serve both).

    Returns
    -------
    numcodecs codec, None or "source"
        The compressor, ``None`` (no compression), or ``"source"`` (keep the
        source's compressors).

    Raises
    ------
    ValueError
        For an unknown compressor, or a level or blosc compressor out of range.
    """
    if text is None:
        return "source"
    name, _, arg = text.partition(":")
    name = name.lower()
    if name in ("none", "null", ""):
        return None
    import numcodecs

    try:
        if name == "zstd":
            level = int(arg or 1)
            if not -131072 <= level <= 22:
                raise ValueError
            return numcodecs.Zstd(level=level)
        if name == "gzip":
            level = int(arg or 5)
            if not 0 <= level <= 9:
                raise ValueError
            return numcodecs.GZip(level=level)
    except ValueError:
        raise ValueError(
            f"compressor {text!r}: the level must be an integer (zstd -131072..22, gzip 0..9)"
        ) from None
    if name == "blosc":
        from numcodecs import blosc

        cname = arg or "lz4"
        if cname not in blosc.list_compressors():
            raise ValueError(
                f"compressor {text!r}: blosc compressors are {', '.join(blosc.list_compressors())}"
            )
        return numcodecs.Blosc(cname=cname, clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    raise ValueError(
        f"unknown compressor {text!r} (zstd[:level], gzip[:level], blosc[:cname], none)"
    )


@dataclass
class PerArray:
    """``--chunks``/``--shards`` values given per array: by name
    (``temperature=512,512``) or for every array of a rank (``512,512``: each
    2-d array). A value that is not a shape (``none``) applies to every array."""

    option: str
    by_name: dict[str, Any] = field(default_factory=dict)
    by_rank: dict[int, Any] = field(default_factory=dict)
    every: Any = None

    def given(self) -> bool:
        return bool(self.by_name or self.by_rank or self.every is not None)

    def values(self) -> list[Any]:
        """Every value given."""
        out = list(self.by_name.values()) + list(self.by_rank.values())
        return out + ([self.every] if self.every is not None else [])

    def for_array(self, name: str, ndim: int) -> Any:
        """The value for the array ``name`` (its path below the copied node) of
        ``ndim`` dimensions; None: keep the source's."""
        if name in self.by_name:
            return self.by_name[name]
        if ndim in self.by_rank:
            return self.by_rank[ndim]
        return self.every

    def check(self, arrays: Sequence[tuple[str, int]], single: bool) -> None:
        """Refuse names that are no copied array, shapes of another rank than
        the array they name, and (a group's copy) ranks no array has; one array
        copied takes a plain shape of its own rank only."""
        ranks = {n: d for n, d in arrays}
        for name, v in self.by_name.items():
            if name not in ranks:
                known = ", ".join(sorted(n for n in ranks if n)) or "none"
                raise ValueError(
                    f"{self.option} {name}=...: no array {name!r} is copied (arrays: {known})"
                )
            if isinstance(v, tuple) and len(v) != ranks[name]:
                raise ValueError(
                    f"{self.option} has {len(v)} value(s), but {name} has "
                    f"{ranks[name]} dimension(s)"
                )
        for rank in self.by_rank:
            if single and arrays[0][1] != rank:
                raise ValueError(
                    f"{self.option} has {rank} value(s), but "
                    f"{arrays[0][0] or 'the array'} has {arrays[0][1]} dimension(s)"
                )
            if not any(d == rank for _, d in arrays):
                raise ValueError(
                    f"{self.option} has {rank} value(s), but no copied array "
                    f"has {rank} dimension(s) (give NAME=... for one array)"
                )


def parse_per_array(
    texts: Sequence[str] | None, option: str, parse: Callable[[str], Any]
) -> PerArray:
    """``--chunks``/``--shards``, given any number of times: ``SHAPE`` (for
    every array of that rank), ``NAME=SHAPE`` (for one array, ``NAME`` its
    path below the copied node), or what ``parse`` returns other than a shape
    (``none``: for every array).

    Raises
    ------
    ValueError
        If a value does not parse, or two values name the same array or rank.
    """
    out = PerArray(option)
    for text in texts or []:
        name, sep, spec = text.rpartition("=")
        value = parse(spec)
        if sep:
            name = name.strip().strip("/")
            if name in out.by_name:
                raise ValueError(f"{option} gives {name!r} twice")
            out.by_name[name] = value
        elif isinstance(value, tuple):
            if len(value) in out.by_rank:
                raise ValueError(f"{option} gives two shapes of {len(value)} dimension(s)")
            out.by_rank[len(value)] = value
        else:
            if out.every is not None:
                raise ValueError(f"{option} gives {text!r} twice")
            out.every = value
    return out
