"""cuzarr: Zarr v2/v3 arrays on the host (numpy) and the GPU (CuPy).

The API mirrors zarr-python 3: ``create_array``, ``open_array``, ``open_group``,
``open``, ``create_group``, ``array``, ``zeros``... See ``docs/`` for the guide.
"""

from cuzarr import errors, storage
from cuzarr.api.synchronous import (
    array,
    consolidate_metadata,
    create_array,
    create_group,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    open,
    open_array,
    open_consolidated,
    open_group,
    zeros,
    zeros_like,
)
from cuzarr.config import config
from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.group import AsyncGroup, Group
from cuzarr.core.lazy import LazyArray, read_many

__version__ = "0.1.0"

__all__ = [
    "Array",
    "AsyncArray",
    "AsyncGroup",
    "Group",
    "LazyArray",
    "__version__",
    "array",
    "config",
    "consolidate_metadata",
    "create_array",
    "create_group",
    "empty",
    "empty_like",
    "errors",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "read_many",
    "storage",
    "zeros",
    "zeros_like",
]
