"""xarray backend: ``xr.open_dataset(path, engine="cuzarr")``.

Variables are lazily indexed: xarray hands our ``BackendArray`` outer
(orthogonal) indexers, which become ``oindex`` reads of just the needed chunks.
Dimension names come from v3 ``dimension_names`` or the v2 ``_ARRAY_DIMENSIONS``
attribute (as written by xarray); CF decoding is xarray's own, through the same
path (``StoreBackendEntrypoint``) and the same conventions as xarray's zarr
backend, so both engines open a store to identical datasets and encodings.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray
from xarray.backends import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.core import indexing

from cuzarr.api.synchronous import open_group
from cuzarr.buffer import is_device_array
from cuzarr.core.group import Group
from cuzarr.errors import GroupNotFoundError
from cuzarr.integrations.dask import register_tokenizers
from cuzarr.metadata.xarray_fill import decode_fill_attr
from cuzarr.runtime.sync import on_loop, sync

__all__ = ["CuzarrBackendArray", "CuzarrBackendEntrypoint", "open_dataset"]


class CuzarrBackendArray(BackendArray):
    """A cuzarr array as a lazily indexed xarray backend array.

    Reads are outer (orthogonal) indexing of the array, synchronous
    (``__getitem__``) or awaited (``async_getitem``, which ``Dataset.load_async``
    and xarray's async indexing use). The wrapped array is private
    (``get_array()`` returns it, as xarray's zarr backend does): xarray and dask
    take a public ``.array`` for the duck array a wrapper holds, and would
    inspect or evaluate the cuzarr array itself.
    """

    def __init__(self, array: Any, prototype: Any = None) -> None:
        self._array = array
        self.prototype = prototype
        self.shape = array.shape
        self.dtype = _string_dtype(array.dtype) if array.dtype.kind == "T" else array.dtype

    def get_array(self) -> Any:
        """The ``cuzarr.Array`` this variable reads."""
        return self._array

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw_indexing_method
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        """``self[key]``, awaited: the read runs on cuzarr's event loop, so the
        variables a ``Dataset.load_async`` loads at once share that loop and its
        one limit on concurrent store requests (``async.concurrency``)."""
        return await indexing.async_explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._async_raw_indexing_method
        )

    def _raw_indexing_method(self, key: tuple[Any, ...]) -> Any:
        if any(isinstance(k, np.ndarray) for k in key):
            out = self._array.get_orthogonal_selection(key, prototype=self.prototype)
        else:
            out = self._array.get_basic_selection(key, prototype=self.prototype)
        return self._result(out)

    async def _async_raw_indexing_method(self, key: tuple[Any, ...]) -> Any:
        a = self._array.async_array
        if any(isinstance(k, np.ndarray) for k in key):
            read = a.get_orthogonal_selection(key, prototype=self.prototype)
        else:
            read = a.get_basic_selection(key, prototype=self.prototype)
        return self._result(await on_loop(read))

    def _result(self, out: Any) -> Any:
        if is_device_array(out):  # prototype="gpu": a CuPy-backed variable
            return out
        if self.dtype.kind in "TO":  # a 0-d read may come back as a str scalar
            return np.asarray(out, dtype=self.dtype)
        return np.asarray(out)


@functools.cache
def _keeps_string_dtype() -> bool:
    """Whether this xarray's zarr backend keeps numpy's StringDType for string
    arrays (newer versions) rather than turning them into object arrays."""
    try:
        from xarray.backends.zarr import ZarrArrayWrapper
    except ImportError:  # pragma: no cover
        return False
    return hasattr(ZarrArrayWrapper, "_preserve_string_dtype")


def _string_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if _keeps_string_dtype() else np.dtype(object)


def _dims(arr: Any, name: str) -> tuple[str, ...]:
    names = arr.metadata.dimension_names
    if names is None:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    if names is None and arr.zarr_format == 2:
        names = _nczarr_dims(arr)
    if names is None and arr.ndim == 0:  # xarray writes no dimension_names for 0-d arrays
        names = ()
    if names is None or any(n is None for n in names):
        raise ValueError(
            f"array {name!r} has no dimension names (v3 dimension_names or v2 _ARRAY_DIMENSIONS)"
        )
    return tuple(names)


def _nczarr_dims(arr: Any) -> tuple[str, ...] | None:
    """The dimension names of a v2 array written by netCDF-C (NCZarr): the last
    parts of the ``dimrefs`` in its ``.zarray`` (xarray's zarr backend reads them
    too); ``None`` when it has none."""
    key = f"{arr.path}/.zarray" if arr.path else ".zarray"
    try:
        raw = sync(arr.store.get(key))
        refs = json.loads(bytes(raw))["_NCZARR_ARRAY"]["dimrefs"] if raw is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        return None
    if len(refs) != arr.ndim:
        return None
    return tuple(r.rstrip("/").rsplit("/", 1)[-1] for r in refs)


def _variables(
    group: Any, drop: set[str], prototype: Any = None, fill_mask: bool | None = None
) -> dict[str, Any]:
    """The group's arrays as undecoded variables, with the attributes and encoding
    xarray's zarr backend gives them (``ZarrStore.open_store_variable``)."""
    import xarray as xr

    out: dict[str, Any] = {}
    for name, arr in group.arrays():
        if name in drop:
            continue
        dims = _dims(arr, name)
        attrs = dict(arr.attrs)
        if arr.zarr_format == 2:  # xarray hides these in v2 (in v3 they are data)
            attrs.pop("_ARRAY_DIMENSIONS", None)
            attrs = {k: v for k, v in attrs.items() if not k.lower().startswith("_nc")}
        backend = CuzarrBackendArray(arr, prototype)
        data = indexing.LazilyIndexedArray(backend)
        chunks = _compact(arr.chunks)
        encoding: dict[str, Any] = {
            "chunks": chunks,
            # as xarray's zarr backend: the (inner) chunks, also for sharded arrays
            "preferred_chunks": dict(zip(dims, chunks, strict=True)),
        }
        if backend.dtype.kind == "T":  # keeps the variable a StringDType one
            encoding["dtype"] = backend.dtype
        encoding["compressors"] = _codecs_for_encoding(arr.compressors, arr.zarr_format)
        encoding["filters"] = _codecs_for_encoding(arr.filters, arr.zarr_format)
        encoding["shards"] = _compact(arr.shards) if arr.shards else None
        if arr.zarr_format == 3:
            (serializer,) = _codecs_for_encoding((arr.serializer,), 3)
            encoding["serializer"] = serializer
        # xarray's convention (use_zarr_fill_value_as_mask, by default True for v2
        # and False for v3): the array's fill_value is its _FillValue; otherwise a
        # v3 array keeps it in the encoding, and a _FillValue attribute (as
        # xarray encodes it) is the mask.
        fill = arr.fill_value
        if fill_mask if fill_mask is not None else arr.zarr_format == 2:
            if fill is not None:
                attrs["_FillValue"] = fill
        else:
            if arr.zarr_format == 3:
                encoding["fill_value"] = fill
            if "_FillValue" in attrs:
                attrs["_FillValue"] = decode_fill_attr(attrs["_FillValue"], arr.dtype)
        out[name] = xr.Variable(dims, data, attrs, encoding)
    return out


def _codecs_for_encoding(codecs: Iterable[Any], zarr_format: int) -> tuple[Any, ...]:
    """Codecs as a variable's ``encoding`` holds them: v2 numcodecs objects as they
    are, v3 codecs as their metadata dicts, which zarr-python (``ds.to_zarr``) takes."""
    if zarr_format == 2:
        return tuple(codecs)
    return tuple(c.to_json() if hasattr(c, "to_json") else c for c in codecs)


def _compact(sizes: tuple[Any, ...]) -> tuple[Any, ...]:
    """Chunk sizes as xarray's zarr backend reports them: an int along a regular
    dimension, the tuple of sizes along a rectilinear one."""
    out: list[Any] = []
    for s in sizes:
        if not isinstance(s, tuple):
            out.append(s)
        elif not s:
            out.append((0,))
        elif len(set(s[:-1])) <= 1 and s[-1] <= s[0]:
            out.append(s[0])
        else:
            out.append(s)
    return tuple(out)


class _CuzarrDataStore(AbstractDataStore):
    """A cuzarr group as an xarray data store (read only), so decoding takes
    xarray's own path for stores, as with ``engine="zarr"``."""

    def __init__(
        self, group: Any, drop: set[str], prototype: Any = None, fill_mask: bool | None = None
    ) -> None:
        self.group = group
        self.drop = drop
        self.prototype = prototype
        self.fill_mask = fill_mask

    def get_variables(self) -> dict[str, Any]:
        return _variables(self.group, self.drop, self.prototype, self.fill_mask)

    def get_attrs(self) -> dict[str, Any]:
        return {k: v for k, v in self.group.attrs.items() if not k.lower().startswith("_nc")}

    def get_dimensions(self) -> dict[str, int]:  # pragma: no cover - unused by xarray's reader
        dims: dict[str, int] = {}
        for name, arr in self.group.arrays():
            dims.update(zip(_dims(arr, name), arr.shape, strict=True))
        return dims

    def close(self) -> None:
        pass


def _open_group_dataset(
    group: Any,
    *,
    drop_variables: Iterable[str] | None,
    decode_kwargs: dict[str, Any],
    prototype: Any = None,
    fill_mask: bool | None = None,
) -> Any:
    from xarray.backends import StoreBackendEntrypoint

    if isinstance(drop_variables, str):
        drop_variables = [drop_variables]
    drop = set(drop_variables or ())
    store = _CuzarrDataStore(group, drop, prototype, fill_mask)
    return StoreBackendEntrypoint().open_dataset(
        store, drop_variables=drop_variables, **decode_kwargs
    )


def _open_root(
    obj: Any,
    group: str | None,
    consolidated: bool | None,
    zarr_format: int | None,
    storage_options: dict[str, Any] | None,
) -> Any:
    if not isinstance(obj, (str, os.PathLike)) and importlib.util.find_spec("dask"):
        # xarray names the dask arrays of open_dataset(obj, chunks=...) after
        # tokenize(obj): for a cuzarr store or group, by reference, not by value
        register_tokenizers()
    path = (group or "").strip("/") or None
    if isinstance(obj, Group):
        return obj[path] if path else obj

    def open_at(at: str | None, use_consolidated: bool | None) -> Any:
        return open_group(
            obj,
            mode="r",
            path=at,
            zarr_format=zarr_format,
            storage_options=storage_options,
            use_consolidated=use_consolidated,
        )

    if consolidated is not False and not _holds_consolidated(obj):
        consolidated = False  # as engine="zarr": such a store (Icechunk) holds none
    if path is None or consolidated is False:
        g = open_at(path, consolidated)
        if consolidated is None and g.async_group.consolidated is None:
            _warn_unconsolidated()
        return g
    # As engine="zarr": a group below the root is described by the metadata
    # consolidated at the root of the store (where ds.to_zarr(group=...) puts it).
    try:
        root = open_at(None, None)
    except GroupNotFoundError:  # no group at the root
        return open_at(path, consolidated)
    if root.async_group.consolidated is None:  # none there: the group's own, if any
        g = open_at(path, consolidated)
        if consolidated is None and g.async_group.consolidated is None:
            _warn_unconsolidated()
        return g
    if consolidated is None and path not in root:  # stale: ask the store
        return open_at(path, None)
    return root[path]


def _holds_consolidated(obj: Any) -> bool:
    """Whether the store may hold consolidated metadata: False where it says it
    cannot (``supports_consolidated_metadata``, zarr-python's and cuzarr's stores)."""
    return bool(getattr(obj, "supports_consolidated_metadata", True))


def _warn_unconsolidated() -> None:
    """engine="zarr"'s warning (same words) when ``consolidated=None`` found no
    consolidated metadata and read the store's own."""
    warnings.warn(
        "Failed to open Zarr store with consolidated metadata, but successfully read "
        "with non-consolidated metadata. This is typically much slower for opening a "
        "dataset. To silence this warning, consider:\n"
        "1. Consolidating metadata in this existing store with "
        "cuzarr.consolidate_metadata() (or zarr.consolidate_metadata()).\n"
        "2. Explicitly setting consolidated=False, to avoid trying to read "
        "consolidated metadata, or\n"
        "3. Explicitly setting consolidated=True, to raise an error in this case "
        "instead of falling back to non-consolidated metadata.",
        RuntimeWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside cuzarr, xarray and the
    standard library (as xarray's own warnings point at the user's call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cuzarr/
    ours = (package + os.sep, os.path.dirname(xarray.__file__ or "") + os.sep)
    stdlib = os.path.dirname(os.__file__) + os.sep
    frame, level = sys._getframe(1), 1  # level 1: the frame that calls warnings.warn
    while frame is not None:
        name = frame.f_code.co_filename
        in_stdlib = name.startswith(stdlib) and "-packages" not in name[len(stdlib) :]
        if not (name.startswith(ours) or in_stdlib):
            break
        frame, level = frame.f_back, level + 1
    return level


class CuzarrBackendEntrypoint(BackendEntrypoint):
    """``engine="cuzarr"`` for ``xr.open_dataset`` and ``xr.open_datatree``."""

    description = "Open Zarr v2/v3 stores with cuzarr"
    url = "https://github.com/cuzarr/cuzarr"
    supports_groups = True  # open_datatree / open_groups (xarray's engine guess needs it)
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "group",
        "mask_and_scale",
        "decode_times",
        "use_cftime",
        "decode_timedelta",
        "concat_characters",
        "decode_coords",
        "prototype",
        "consolidated",
        "zarr_format",
        "storage_options",
        "use_zarr_fill_value_as_mask",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, (str, os.PathLike)):
            s = os.fspath(filename_or_obj)
            return s.rstrip("/").endswith(".zarr") or os.path.exists(os.path.join(s, "zarr.json"))
        return False

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Iterable[str] | None = None,
        group: str | None = None,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        prototype: Any = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        storage_options: dict[str, Any] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
    ) -> Any:
        """Open a group as a Dataset. ``prototype="gpu"`` makes variables load as
        CuPy arrays (decoded on the GPU); ``None`` follows ``cuzarr.config``.
        ``consolidated``, ``zarr_format`` and ``storage_options`` mean what they do
        for ``engine="zarr"``, ``use_zarr_fill_value_as_mask`` what it does for
        ``xr.open_zarr`` (xarray's ``open_dataset`` drops it); ``filename_or_obj``
        may also be a ``cuzarr.Group``."""
        g = _open_root(filename_or_obj, group, consolidated, zarr_format, storage_options)
        kw = dict(
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
        return _open_group_dataset(
            g,
            drop_variables=drop_variables,
            decode_kwargs=kw,
            prototype=prototype,
            fill_mask=use_zarr_fill_value_as_mask,
        )

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Iterable[str] | None = None,
        group: str | None = None,
        prototype: Any = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        storage_options: dict[str, Any] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        **decode_kwargs: Any,
    ) -> dict[str, Any]:
        """Every group below ``group`` (the root by default) as a Dataset, keyed by
        its path from there; the arguments mean what they do for ``open_dataset``
        (``filename_or_obj`` may be a ``cuzarr.Group`` here too)."""
        # group=: that group is the tree's root, as with engine="zarr"
        root = _open_root(filename_or_obj, group, consolidated, zarr_format, storage_options)
        kw = dict(
            drop_variables=drop_variables,
            decode_kwargs=decode_kwargs,
            prototype=prototype,
            fill_mask=use_zarr_fill_value_as_mask,
        )
        out = {"/": _open_group_dataset(root, **kw)}
        for name, node in root.members(max_depth=None):
            if isinstance(node, Group):
                out["/" + name] = _open_group_dataset(node, **kw)
        return out

    def open_datatree(self, filename_or_obj: Any, **kwargs: Any) -> Any:
        import xarray as xr

        return xr.DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))


def open_dataset(path: Any, **kwargs: Any) -> Any:
    """Shorthand for ``xr.open_dataset(path, engine="cuzarr", **kwargs)``."""
    import xarray as xr

    return xr.open_dataset(path, engine="cuzarr", **kwargs)
