"""cuzarr: Zarr v2/v3 arrays on the host (numpy) and the GPU (CuPy).

The API mirrors zarr-python 3: ``create_array``, ``open_array``, ``open_group``,
``open``, ``create_group``, ``array``, ``zeros``... See ``docs/`` for the guide.
"""

from cuzarr import buffer, dtype, errors, storage
from cuzarr.api.synchronous import (
    array,
    consolidate_metadata,
    create,
    create_array,
    create_group,
    create_hierarchy,
    empty,
    empty_like,
    from_array,
    full,
    full_like,
    group,
    load,
    ones,
    ones_like,
    open,
    open_array,
    open_consolidated,
    open_group,
    open_like,
    save,
    save_array,
    save_group,
    tree,
    zeros,
    zeros_like,
)
from cuzarr.config import config
from cuzarr.copying import copy, copy_all, copy_store
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.array_config import ArrayConfig
from cuzarr.core.group import AsyncGroup, Group
from cuzarr.core.lazy import LazyArray, read_many
from cuzarr.diagnostics import print_debug_info, set_format, set_log_level
from cuzarr.integrations.dask import from_dask, to_dask

__version__ = "0.1.0"

__all__ = [
    "Array",
    "ArrayConfig",
    "AsyncArray",
    "AsyncGroup",
    "Group",
    "LazyArray",
    "__version__",
    "array",
    "buffer",
    "config",
    "consolidate_metadata",
    "copy",
    "copy_all",
    "copy_store",
    "create",
    "create_array",
    "create_group",
    "create_hierarchy",
    "dtype",
    "empty",
    "empty_like",
    "errors",
    "from_array",
    "from_dask",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_like",
    "print_debug_info",
    "read_many",
    "save",
    "save_array",
    "save_group",
    "set_format",
    "set_log_level",
    "storage",
    "to_dask",
    "tree",
    "zeros",
    "zeros_like",
]
