"""Copying Zarr data: :func:`copy` and :func:`copy_all` (arrays and groups, into a
group), :func:`copy_store` (stored keys as they are), and the block-wise array
copy with its metadata conversion that ``cuzarr copy`` uses too."""

from cuzarr.api.asynchronous import register_copy_functions
from cuzarr.copying.nodes import copy, copy_all
from cuzarr.copying.store import copy_store

# the awaitable cuzarr.api.asynchronous.copy & co. run these
register_copy_functions(copy, copy_all, copy_store)

__all__ = ["copy", "copy_all", "copy_store"]
