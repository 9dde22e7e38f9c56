"""zarr-python's codecs and stores as cuzarr's.

:func:`translate` turns an array's zarr-python codec chain (bound to its chunk
spec) into a cuzarr codec pipeline, through the codecs' JSON: every codec
cuzarr knows is rebuilt as cuzarr's; any other makes the array fall back to
zarr-python's pipeline (a debug log), or, with ``codec_pipeline.strict`` set
in zarr's config, an error. :func:`store_for` gives the cuzarr store that
drives a zarr-python store.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ShardingCodec as ZarrShardingCodec
from zarr.codecs._v2 import V2Codec
from zarr.storage import LocalStore as ZarrLocalStore

from cuzarr.codecs.base import codec_from_json
from cuzarr.codecs.pipeline import V2Pipeline, V3Pipeline
from cuzarr.codecs.sharding import ShardingCodec, sharding_codec
from cuzarr.errors import CodecError, MetadataError
from cuzarr.metadata.dtypes import from_json_v2, from_json_v3
from cuzarr.storage.local import LocalStore
from cuzarr.storage.zarr_python import ZarrPythonStore

__all__ = ["Translated", "store_for", "translate"]

log = logging.getLogger("cuzarr.zarr_pipeline")

STRICT_KEY = "codec_pipeline.strict"


@dataclass(frozen=True)
class Translated:
    """An array's codecs as a cuzarr pipeline, with its numpy data type."""

    pipeline: Any
    np_dtype: np.dtype
    itemsize: int
    #: the sharding codec, where it is the array's only codec (partial shard I/O)
    shard_codec: ShardingCodec | None = None


def strict() -> bool:
    """zarr's ``codec_pipeline.strict``: an untranslatable codec is an error."""
    return bool(zarr.config.get(STRICT_KEY, False))


def translate(codecs: list[Any], spec: Any) -> Translated | None:
    """The cuzarr pipeline of zarr-python ``codecs`` bound to chunk ``spec``;
    None (zarr-python's pipeline does the work) where cuzarr cannot run them."""
    try:
        np_dtype = np.dtype(spec.dtype.to_native_dtype())
        _check_runtime_options(codecs)
        if len(codecs) == 1 and isinstance(codecs[0], V2Codec):
            pipeline = _v2(codecs[0], spec)
        else:
            dtype = from_json_v3(spec.dtype.to_json(zarr_format=3))
            cz = [codec_from_json(c.to_dict()) for c in codecs]
            pipeline = V3Pipeline(cz, dtype, spec.fill_value, tuple(spec.shape))
    except (CodecError, MetadataError, ValueError, TypeError, KeyError, NotImplementedError) as e:
        names = [type(c).__name__ for c in codecs]
        if strict():
            raise CodecError(
                f"cuzarr's codec pipeline cannot run codecs {names} "
                f"(data type {spec.dtype}): {e}. Unset zarr's {STRICT_KEY!r} config to let "
                "zarr-python's own pipeline handle such arrays."
            ) from e
        log.debug("codecs %s go to zarr-python's pipeline: %s", names, e)
        return None
    return Translated(pipeline, np_dtype, max(1, np_dtype.itemsize), sharding_codec(pipeline))


def _check_runtime_options(codecs: list[Any]) -> None:
    """Refuse what zarr-python's codecs do beyond their JSON, which cuzarr's
    codecs would not do alike: inner chunks laid out in another order than
    morton (``subchunk_write_order``, nested shards too), and pickled v2 data,
    which zarr-python gates by its own ``allow_unsafe_pickle_decode`` config."""
    for c in codecs:
        order = getattr(c, "subchunk_write_order", "morton")
        if order != "morton":
            raise ValueError(f"sharding subchunk_write_order={order!r} (cuzarr writes morton)")
        if isinstance(c, ZarrShardingCodec):
            _check_runtime_options([*c.codecs, *c.index_codecs])
        if isinstance(c, V2Codec):
            for n in [*(c.filters or ()), c.compressor]:
                if n is not None and n.codec_id == "pickle":
                    raise ValueError("pickle (zarr-python's allow_unsafe_pickle_decode gate)")


def _v2(codec: V2Codec, spec: Any) -> V2Pipeline:
    """A v2 array's filters and compressor as cuzarr's v2 pipeline."""
    obj = spec.dtype.to_json(zarr_format=2)
    name = obj["name"] if isinstance(obj, dict) else obj
    object_codec = obj.get("object_codec_id") if isinstance(obj, dict) else None
    dtype = from_json_v2(name, object_codec)
    return V2Pipeline(dtype, spec.order, list(codec.filters or []), codec.compressor)


_lock = threading.Lock()
# zarr-python store -> the cuzarr store that drives it (keyed by id, checked by
# a weak reference: zarr's stores are not all hashable)
_stores: dict[int, tuple[weakref.ref[Any], Any]] = {}


def store_for(zstore: Any) -> Any:
    """The cuzarr store for zarr-python store ``zstore``: cuzarr's own local
    store (blocking batch I/O, worker loops) for a ``LocalStore``, else the
    zarr-python store itself behind cuzarr's store interface (its async API)."""
    with _lock:
        hit = _stores.get(id(zstore))
        if hit is not None and hit[0]() is zstore:
            return hit[1]
        if type(zstore) is ZarrLocalStore:
            store: Any = LocalStore(Path(zstore.root))
            if zstore.read_only:
                store = store.with_read_only(True)
        else:
            store = ZarrPythonStore(zstore)
        for k in [k for k, (ref, _) in _stores.items() if ref() is None]:
            del _stores[k]
        _stores[id(zstore)] = (weakref.ref(zstore), store)
        return store
