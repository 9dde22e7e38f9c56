"""``copy`` and ``copy_all``: arrays and groups copied into a group, as
zarr-python 2's functions of those names (zarr-python 3 only raises
``NotImplementedError`` for them). Sources may be cuzarr or zarr-python nodes,
h5py files, groups and datasets, or numpy arrays."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cuzarr.copying.log import log_writer, summary
from cuzarr.copying.progress import reporter
from cuzarr.errors import CopyError, GroupNotFoundError

__all__ = ["copy", "copy_all"]

_IF_EXISTS = ("raise", "replace", "skip", "skip_initialized")
_BLOCK_BYTES = 64 << 20  # memory per copy step of foreign sources


class _Copy:
    """One copy call: its options and its counts."""

    def __init__(
        self,
        write: Callable[[str], None],
        shallow: bool,
        without_attrs: bool,
        if_exists: str,
        dry_run: bool,
        create_kws: dict[str, Any],
    ) -> None:
        if if_exists not in _IF_EXISTS:
            raise ValueError(f"if_exists must be one of {_IF_EXISTS}, not {if_exists!r}")
        self.write, self.shallow, self.without_attrs = write, shallow, without_attrs
        self.if_exists, self.dry_run, self.create_kws = if_exists, dry_run, create_kws
        self.copied = self.skipped = self.nbytes = 0
        self.planned = 0  # bytes of the arrays to copy, dry runs included
        self.step: Callable[[int], None] | None = None  # progress, per block

    def node(self, source: Any, dest: Any, name: str, root: bool, label: str) -> None:
        """Copy ``source`` to ``dest[name]``; ``label`` is where it goes, for
        the log and errors (its path below the group copied into)."""
        if _is_array(source):
            self.array(source, dest, name, label)
        elif root or not self.shallow:
            self.group(source, dest, name, label)

    def _existing(self, dest: Any, name: str) -> Any:
        if dest is None:
            return None
        from cuzarr.runtime.sync import sync

        return sync(dest.async_group.get(name))

    def _refuse_or_skip(self, existing: Any, label: str) -> bool:
        """Whether to skip ``label`` (``CopyError`` for ``if_exists="raise"``)."""
        if existing is None:
            return False
        if self.if_exists == "raise":
            raise CopyError(f"an object {label!r} already exists in the destination group")
        if self.if_exists == "skip":
            return True
        if self.if_exists == "skip_initialized":
            from cuzarr.core.array import AsyncArray

            a = existing
            return isinstance(a, AsyncArray) and _initialized(a)
        return False

    def array(self, source: Any, dest: Any, name: str, label: str) -> None:
        existing = self._existing(dest, name)
        if self._refuse_or_skip(existing, label):
            self.write(f"skip {label} {tuple(source.shape)} {np.dtype(source.dtype)}")
            self.skipped += 1
            return
        self.write(f"copy {label} {tuple(source.shape)} {np.dtype(source.dtype)}")
        self.copied += 1
        self.planned += math.prod(source.shape) * np.dtype(source.dtype).itemsize
        if self.dry_run:
            return
        src = _as_cuzarr(source)
        if src is not None and not self.create_kws:
            dst = self._copy_metadata(src, dest, name, existing is not None)
            from cuzarr.copying.array_copy import copy_data

            copy_data(src, dst, _BLOCK_BYTES, self.step or False)
        else:
            dst = self._create_like(source, dest, name, existing is not None)
            _copy_values(source, dst, self.step)
        self.nbytes += math.prod(source.shape) * np.dtype(source.dtype).itemsize

    def _copy_metadata(self, src: Any, dest: Any, name: str, replace: bool) -> Any:
        """A copy of the cuzarr array ``src`` keeping all its metadata (layout,
        codecs, fill value; converted to the group's Zarr format)."""
        from cuzarr.copying.metadata import destination_metadata

        meta = destination_metadata(src, zarr_format=dest.metadata.zarr_format)
        if self.without_attrs:
            meta = meta.evolve(attributes={})
        made = dict(dest.create_hierarchy({name: meta}, overwrite=replace))
        dst = made[name]
        if src.async_array.write_empty_chunks:
            dst = dst.with_config({"write_empty_chunks": True})
        return dst

    def _create_like(self, source: Any, dest: Any, name: str, replace: bool) -> Any:
        chunks = getattr(source, "chunks", None)
        kw: dict[str, Any] = {
            "shape": tuple(source.shape),
            "dtype": _element_type(np.dtype(source.dtype)),
            "chunks": chunks if _int_tuple(chunks, len(source.shape)) else "auto",
        }
        fill = getattr(source, "fill_value", getattr(source, "fillvalue", None))
        if fill is not None:
            kw["fill_value"] = fill
        if not self.without_attrs:
            kw["attributes"] = _json_attrs(getattr(source, "attrs", {}))
        kw.update(self.create_kws)
        return dest.create_array(name, overwrite=replace, **kw)

    def group(self, source: Any, dest: Any, name: str, label: str) -> None:
        existing = self._existing(dest, name)
        from cuzarr.core.group import AsyncGroup

        grp = None
        if existing is not None:
            if self.if_exists == "raise":
                raise CopyError(f"an object {label!r} already exists in the destination group")
            if self.if_exists == "skip":
                self.write(f"skip {label}")
                self.skipped += 1
                return
        self.write(f"copy {label}")
        self.copied += 1
        # listed before the copy is made: a copy into the source itself is not
        # one of the members to copy
        keys = _keys(source)
        if not self.dry_run:
            if isinstance(existing, AsyncGroup):
                grp = dest[name]  # copied into, as zarr-python 2 did
            else:
                grp = dest.create_group(name, overwrite=existing is not None)
            if not self.without_attrs:
                grp.attrs.update(_json_attrs(getattr(source, "attrs", {})))
        elif isinstance(existing, AsyncGroup):
            grp = dest[name]
        for key in keys:
            self.node(source[key], grp, key, root=False, label=f"{label}/{key}")


def _dry_pass(
    job: _Copy, progress: Any, run: Callable[[_Copy], None]
) -> Callable[[int], None] | None:
    """A dry run of the copy before it writes: with ``if_exists="raise"`` the
    ``CopyError`` of a node in the way comes before anything is written, and
    with ``progress`` it counts the bytes to copy. Returns the progress step."""
    if job.dry_run or (job.if_exists != "raise" and progress in (None, False)):
        return None
    dry = _Copy(lambda message: None, job.shallow, job.without_attrs, job.if_exists, True,
                job.create_kws)  # fmt: skip
    run(dry)
    return reporter(progress, dry.planned, "copy")


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _keys(group: Any) -> list[str]:
    return sorted(group.keys())


def _int_tuple(chunks: Any, ndim: int) -> bool:
    return (
        isinstance(chunks, tuple)
        and len(chunks) == ndim
        and all(isinstance(c, (int, np.integer)) and c > 0 for c in chunks)
    )


def _initialized(a: Any) -> bool:
    from cuzarr.runtime.sync import sync

    return sync(a.nchunks_initialized()) == a.nchunks


def _as_cuzarr(source: Any) -> Any:
    """``source`` as a cuzarr ``Array`` when it is one, or a zarr-python array
    (reopened through its own store object); None for other sources."""
    from cuzarr.core.array import Array

    if isinstance(source, Array):
        return source
    if type(source).__module__.startswith("zarr.") and hasattr(source, "store_path"):
        from cuzarr.api.synchronous import open_array

        sp = source.store_path
        return open_array(sp.store, path=sp.path, mode="r")
    return None


def _copy_values(source: Any, dst: Any, step: Callable[[int], None] | None) -> None:
    """Values of any array-like with ``__getitem__`` (h5py, numpy, zarr-python),
    one block of whole destination chunks at a time."""
    from cuzarr.copying.array_copy import _copy_blocks

    for sel in _copy_blocks(dst, _BLOCK_BYTES):
        block = np.asarray(source[sel])
        dst[sel] = block
        if step is not None:
            step(block.nbytes)


def _element_type(dt: np.dtype) -> Any:
    """The data type of a copy of a source of dtype ``dt``: an object dtype (h5py's
    variable-length strings, numpy object arrays) names no Zarr data type by
    itself; h5py's says ``str`` or ``bytes`` in its metadata, and other object
    sources are taken for strings."""
    if dt.kind != "O":
        return dt
    return bytes if (dt.metadata or {}).get("vlen") is bytes else str


def _json_attrs(attrs: Any) -> dict[str, Any]:
    """Attributes as JSON values (h5py gives numpy scalars, arrays and bytes)."""
    if not isinstance(attrs, Mapping) and hasattr(attrs, "asdict"):
        attrs = attrs.asdict()
    return {str(k): _jsonable(v) for k, v in dict(attrs).items()}


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()] if v.ndim else _jsonable(v[()])
    if isinstance(v, np.generic):
        return _jsonable(v.item())
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def _source(source: Any) -> Any:
    """The node to copy: paths, stores and dicts of stored bytes are opened; a
    dict of arrays (and dicts) is itself a group-like source."""
    stored = isinstance(source, dict) and all(
        isinstance(v, (bytes, bytearray, memoryview)) for v in source.values()
    )
    if isinstance(source, str) or hasattr(source, "__fspath__") or stored:
        from cuzarr.api.synchronous import open as open_node

        return open_node(source, mode="r")
    return source


def _dest_group(dest: Any, dry_run: bool) -> Any:
    from cuzarr.core.group import Group

    if isinstance(dest, Group):
        return dest
    from cuzarr.api.synchronous import open_group

    if type(dest).__module__.startswith("zarr.") and hasattr(dest, "store_path"):
        # a zarr-python group: the same node, through its own store object
        sp = dest.store_path
        return open_group(sp.store, path=sp.path, mode="r" if dry_run else "a")

    if dry_run:
        try:
            return open_group(dest, mode="r")
        except GroupNotFoundError:
            return None
    return open_group(dest, mode="a")


def copy(
    source: Any,
    dest: Any,
    name: str | None = None,
    shallow: bool = False,
    without_attrs: bool = False,
    log: Any = None,
    if_exists: str = "raise",
    dry_run: bool = False,
    *,
    progress: Any = False,
    **create_kws: Any,
) -> tuple[int, int, int]:
    """Copy an array or a group (with everything below it) into the group ``dest``.

    Parameters
    ----------
    source : Array, Group, zarr-python node, h5py object, numpy array or store-like
        What to copy (a path or store opens the node there, read-only).
    dest : Group or store-like
        The group to copy into (opened, or created, when a store-like).
    name : str, optional
        The copy's name in ``dest``; default: the source's own name.
    shallow : bool
        Copy a group's arrays but none of its subgroups.
    without_attrs : bool
        Leave the attributes out.
    log : callable, path or file, optional
        Receives a line per node and a summary.
    if_exists : {"raise", "replace", "skip", "skip_initialized"}
        What to do with a node of the same name in ``dest``: ``CopyError``;
        replace it (a group is copied into); leave it; or leave arrays whose
        chunks are all stored and replace the others.
    dry_run : bool
        Count (and log) only; nothing is written.
    progress : bool or callable
        True: a progress bar on stderr counting the bytes of array data copied
        (uncompressed). A callable is called as ``progress(done_bytes,
        total_bytes)`` after each block instead.
    **create_kws
        Arguments for creating the arrays (``chunks``, ``compressors``...): given,
        the copies are made with :meth:`Group.create_array` from the source's shape,
        dtype and these; else a cuzarr or zarr-python array's whole metadata
        (chunks, shards, codecs, fill value) is kept, converted to ``dest``'s Zarr
        format.

    Returns
    -------
    (int, int, int)
        Nodes copied, nodes skipped, bytes of array data copied (uncompressed).
    """
    source = _source(source)
    if name is None:
        base = getattr(source, "basename", None)
        full = getattr(source, "name", None)
        name = base if base is not None else (full.rsplit("/", 1)[-1] if full else None)
    if not name:
        raise TypeError("name must be given for a source without one (a root group)")
    grp = _dest_group(dest, dry_run)
    options = (shallow, without_attrs, if_exists, dry_run, create_kws)
    step = _dry_pass(
        _Copy(lambda m: None, *options),
        progress,
        lambda j: j.node(source, grp, name, root=True, label=name),
    )
    with log_writer(log) as write:
        job = _Copy(write, *options)
        job.step = step
        job.node(source, grp, name, root=True, label=name)
        write(summary(dry_run, job.copied, job.skipped, job.nbytes))
    return job.copied, job.skipped, job.nbytes


def copy_all(
    source: Any,
    dest: Any,
    shallow: bool = False,
    without_attrs: bool = False,
    log: Any = None,
    if_exists: str = "raise",
    dry_run: bool = False,
    *,
    progress: Any = False,
    **create_kws: Any,
) -> tuple[int, int, int]:
    """Copy every child of the group ``source`` (and its attributes) into the
    group ``dest``; the arguments are those of :func:`copy`.

    Returns
    -------
    (int, int, int)
        Nodes copied, nodes skipped, bytes of array data copied (uncompressed).
    """
    source = _source(source)
    grp = _dest_group(dest, dry_run)

    def children(job: _Copy) -> None:
        for key in _keys(source):
            job.node(source[key], grp, key, root=False, label=key)

    options = (shallow, without_attrs, if_exists, dry_run, create_kws)
    step = _dry_pass(_Copy(lambda m: None, *options), progress, children)
    with log_writer(log) as write:
        job = _Copy(write, *options)
        job.step = step
        for key in _keys(source):
            job.node(source[key], grp, key, root=False, label=key)
        if not dry_run and not without_attrs:
            grp.attrs.update(_json_attrs(getattr(source, "attrs", {})))
        write(summary(dry_run, job.copied, job.skipped, job.nbytes))
    return job.copied, job.skipped, job.nbytes
