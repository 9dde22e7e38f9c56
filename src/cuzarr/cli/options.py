"""The values of ``cuzarr copy``'s options (``--chunks``, ``--shards``,
``--compressor``), parsed from their text.

They are parsed by the command, not by argparse ``type=`` callables, so that
each error reads as ``cuzarr: error: ...`` with the whole explanation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["parse_compressor", "parse_ints", "parse_shards"]


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
    """The ``--shards`` option.

    Parameters
    ----------
    text : str or None
        The option's text; ``None`` when it was not given.

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
