"""``copy_store``: the keys below a path of one store copied to another, as they
are stored (no decoding), as zarr-python 2's ``copy_store``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cuzarr.copying.log import log_writer, summary
from cuzarr.copying.progress import reporter
from cuzarr.errors import CopyError
from cuzarr.storage.base import Store
from cuzarr.storage.common import StorePath, join_path, make_store, normalize_path

__all__ = ["copy_store"]

_BATCH = 256  # keys read and written together


def _patterns(p: str | Sequence[str] | None, flags: int) -> list[re.Pattern[str]]:
    if p is None:
        return []
    return [re.compile(x, flags) for x in ([p] if isinstance(p, str) else p)]


def copy_store(
    source: Any,
    dest: Any,
    source_path: str = "",
    dest_path: str = "",
    excludes: str | Sequence[str] | None = None,
    includes: str | Sequence[str] | None = None,
    flags: int = 0,
    if_exists: str = "raise",
    dry_run: bool = False,
    log: Any = None,
    *,
    progress: Any = False,
) -> tuple[int, int, int]:
    """Copy the stored keys below ``source_path`` of ``source`` to ``dest_path``
    of ``dest``, bytes as they are (any format, no decoding).

    Parameters
    ----------
    source, dest : store-like
        Stores, paths, URLs or dicts (``source`` is only read).
    source_path, dest_path : str
        Where to copy from and to ('' is the root).
    excludes : str or list of str, optional
        Regular expressions; a key one of them matches (``re.search``) is not
        copied...
    includes : str or list of str, optional
        ...unless one of these matches it too.
    flags : int
        ``re`` flags for both.
    if_exists : {"raise", "replace", "skip"}
        A key already in ``dest``: ``CopyError`` before anything is copied, copied
        over, or left as it is.
    dry_run : bool
        Count (and log) only; nothing is read or written.
    log : callable, path or file, optional
        Receives a line per key and a summary.
    progress : bool or callable
        True: a progress bar on stderr counting the bytes copied (the total from
        the source's key sizes). A callable is called as ``progress(done_bytes,
        total_bytes)`` after each batch of keys instead.

    Returns
    -------
    (int, int, int)
        Keys copied, keys skipped, bytes copied.
    """

    if if_exists not in ("raise", "replace", "skip"):
        raise ValueError(f"if_exists must be 'raise', 'replace' or 'skip', not {if_exists!r}")
    src = make_store(source, mode="r")
    # a dry run writes nothing, but its destination need not exist yet (a new zip)
    dst = make_store(dest, mode="a")
    try:
        return _copy_keys(
            src, dst, source_path, dest_path, excludes, includes, flags, if_exists, dry_run, log,
            progress,
        )  # fmt: skip
    finally:
        # the stores made here from paths, URLs or dicts (a zip is finished on close)
        for store, given in ((src, source), (dst, dest)):
            if not isinstance(given, (Store, StorePath)):
                store.close()


def _copy_keys(
    src: Any,
    dst: Any,
    source_path: str,
    dest_path: str,
    excludes: Any,
    includes: Any,
    flags: int,
    if_exists: str,
    dry_run: bool,
    log: Any,
    progress: Any,
) -> tuple[int, int, int]:
    from cuzarr.runtime.sync import sync

    exc, inc = _patterns(excludes, flags), _patterns(includes, flags)
    src_prefix = normalize_path(source_path)
    dst_prefix = normalize_path(dest_path)

    async def plan() -> tuple[list[tuple[str, str]], set[str]]:
        pre = src_prefix + "/" if src_prefix else ""
        keys = sorted([k async for k in src.list_prefix(pre)])
        pairs = []
        for key in keys:
            if any(p.search(key) for p in exc) and not any(p.search(key) for p in inc):
                continue
            pairs.append((key, join_path(dst_prefix, key[len(pre) :])))
        existing: set[str] = set()
        if if_exists != "replace" and pairs:
            found = await _exist(dst, [d for _, d in pairs])
            existing = {d for (_, d), f in zip(pairs, found, strict=True) if f}
        return pairs, existing

    pairs, existing = sync(plan())
    if existing and if_exists == "raise":
        first = min(existing)
        raise CopyError(f"key {first!r} exists in the destination (and {len(existing) - 1} more)")
    n_copied = n_skipped = n_bytes = 0
    with log_writer(log) as write:
        todo = []
        for key, dkey in pairs:
            label = key if key == dkey else f"{key} -> {dkey}"
            if dkey in existing:
                write(f"skip {label}")
                n_skipped += 1
            else:
                write(f"copy {label}")
                todo.append((key, dkey))
                n_copied += 1
        if not dry_run:
            step = None
            if progress not in (None, False):
                total = sum(sync(_sizes(src, [k for k, _ in todo])))
                step = reporter(progress, total, "copy")
            n_bytes = sync(_copy(src, dst, todo, step))
        write(summary(dry_run, n_copied, n_skipped, n_bytes))
    return n_copied, n_skipped, n_bytes


async def _exist(store: Any, keys: list[str]) -> list[bool]:
    import asyncio

    return list(await asyncio.gather(*(store.exists(k) for k in keys)))


async def _sizes(store: Any, keys: list[str]) -> list[int]:
    import asyncio

    return list(await asyncio.gather(*(store.getsize(k) for k in keys)))


async def _copy(src: Any, dst: Any, pairs: list[tuple[str, str]], step: Any) -> int:
    n = 0
    for i in range(0, len(pairs), _BATCH):
        batch = pairs[i : i + _BATCH]
        values = await src.get_many([k for k, _ in batch])
        items = []
        for (key, dkey), value in zip(batch, values, strict=True):
            if value is None:
                raise CopyError(f"key {key!r} vanished from the source during the copy")
            items.append((dkey, value))
            n += len(value)
        await dst.set_many(items)
        if step is not None:
            step(sum(len(v) for _, v in items))
    return n
