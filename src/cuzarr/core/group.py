"""Groups: ``Group``, the synchronous twin of ``AsyncGroup`` (``cuzarr.core.async_group``),
which this module exports too."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from cuzarr.core.array import Array, AsyncArray
from cuzarr.core.async_group import AsyncGroup
from cuzarr.core.blocking import run_blocking
from cuzarr.core.group_info import GroupInfo
from cuzarr.core.sync_node import SyncNode
from cuzarr.runtime.sync import sync

__all__ = ["AsyncGroup", "Group", "GroupInfo"]


_MISSING = object()

# The numpy-style entries of the legacy makers' keywords (``zeros`` ... ``empty_like``).
_MAKER_PARAMS = {
    "name": ("name : str", "Name of the array."),
    "shape": ("shape : int or tuple of int", "Shape."),
    "fill_value": ("fill_value : scalar", "The fill value."),
    "data": ("data : array-like", "The model."),
}


def _array_maker(
    method: str, summary: str, kwargs_doc: str = ":func:`cuzarr.create` arguments."
) -> Any:
    """The ``Group`` method ``method``: ``AsyncGroup``'s of that name run to completion,
    its array wrapped as an :class:`Array`.

    The eight legacy makers differ only in their keywords (all keyword-only), which
    pass through unchanged; the method keeps the async twin's signature (with
    ``Array`` returned) and gets a numpy-style docstring built from it.
    """
    sig = inspect.signature(getattr(AsyncGroup, method))

    def make(self: Group, **kwargs: Any) -> Array:
        return Array(sync(getattr(self._async_group, method)(**kwargs)))

    lines = [summary, "", "Parameters", "----------"]
    for p in sig.parameters:
        if p in _MAKER_PARAMS:
            lines += [_MAKER_PARAMS[p][0], "    " + _MAKER_PARAMS[p][1]]
    lines += ["**kwargs", "    " + kwargs_doc, "", "Returns", "-------", "Array"]
    make.__doc__ = "\n".join(lines)
    make.__name__ = method
    make.__qualname__ = f"Group.{method}"
    make.__signature__ = sig.replace(return_annotation="Array")  # type: ignore[attr-defined]
    return make


class Group(SyncNode):
    """A Zarr group with a synchronous, dict-like interface."""

    def __init__(self, async_group: AsyncGroup) -> None:
        self._async_group = async_group

    _node = property(lambda self: self._async_group)  # for SyncNode

    def __repr__(self) -> str:
        return f"<Group {self._async_group.store_path}>"

    @property
    def async_group(self) -> AsyncGroup:
        return self._async_group

    zarr_format = property(lambda self: self._async_group.zarr_format)
    path = property(lambda self: self._async_group.path)
    name = property(lambda self: self._async_group.name)
    basename = property(lambda self: self._async_group.basename)
    store = property(lambda self: self._async_group.store)
    store_path = property(lambda self: self._async_group.store_path)
    metadata = property(lambda self: self._async_group.metadata)
    read_only = property(lambda self: self._async_group.read_only)

    async def update_attributes_async(self, new_attributes: dict[str, Any]) -> Group:
        """:meth:`update_attributes` for a caller on an event loop: awaited there,
        it runs on that loop (zarr-python's ``Group.update_attributes_async``)."""
        await self._async_group.update_attributes(new_attributes)
        return self

    @property
    def synchronizer(self) -> None:
        """Always None (zarr-python's legacy attribute)."""
        return None

    @staticmethod
    def from_store(
        store: Any,
        *,
        attributes: dict[str, Any] | None = None,
        zarr_format: int = 3,
        overwrite: bool = False,
    ) -> Group:
        """Create a group at the root of ``store``, as zarr-python's
        ``Group.from_store``."""
        made = AsyncGroup.from_store(
            store, attributes=attributes, zarr_format=zarr_format, overwrite=overwrite
        )
        return Group(sync(made))

    @staticmethod
    def open(store: Any, zarr_format: int | None = None) -> Group:
        """Open the group at the root of ``store`` (any store-like; ``zarr_format``
        None finds either format), as zarr-python's ``Group.open``."""
        return Group(sync(AsyncGroup.open(store, zarr_format)))

    @staticmethod
    def _wrap(node: AsyncArray | AsyncGroup) -> Array | Group:
        return Array(node) if isinstance(node, AsyncArray) else Group(node)

    def __getitem__(self, path: str) -> Array | Group:
        ag = self._async_group
        node = ag._getitem_inline(path)  # no trip through the event loop
        return self._wrap(node if node is not None else sync(ag.getitem(path)))

    def __contains__(self, member: object) -> bool:
        if not isinstance(member, str):
            return False
        ag = self._async_group
        try:
            if ag._getitem_inline(member) is not None:
                return True
        except KeyError:
            return False
        return sync(ag.contains(member))

    def __delitem__(self, key: str) -> None:
        sync(self._async_group.delitem(key))

    def move(self, source: str, dest: str) -> None:
        """Move the member ``source`` (an array or a group, with everything below
        it) to the path ``dest`` of this group, creating the groups above ``dest``.

        Parameters
        ----------
        source, dest : str
            Paths relative to this group.

        Raises
        ------
        NodeNotFoundError
            Nothing is at ``source``.
        ContainsArrayError, ContainsGroupError
            A node is at ``dest`` already.
        """
        sync(self._async_group.move(source, dest))

    def __setitem__(self, key: str, value: Any) -> None:
        """``group[key] = data``: a new array ``key`` holding ``data``, with default
        settings (use :meth:`create_array` for others); replaces any node there."""
        sync(self._async_group.setitem(key, value))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        """Names of the direct children, sorted."""
        ag = self._async_group
        cons = ag.consolidated
        if cons is not None:
            return ag._consolidated_keys(cons)
        return [k for k, _ in sync(ag.members())]

    def members(
        self, max_depth: int | None = 0, *, use_consolidated_for_children: bool = True
    ) -> tuple[tuple[str, Array | Group], ...]:
        """Child nodes as (relative path, node); ``max_depth=None`` recurses fully.
        ``use_consolidated_for_children`` is accepted as in zarr-python (child
        groups are listed from the store either way)."""
        del use_consolidated_for_children
        ag = self._async_group
        cons = ag.consolidated
        if cons is not None:
            if max_depth is not None and max_depth < 0:
                ag.members(max_depth)  # raises the ValueError
            found = ag._consolidated_members(max_depth, cons)
        else:
            found = sync(ag.members(max_depth))
        wrap = self._wrap
        return tuple((k, wrap(v)) for k, v in found)

    def arrays(self) -> Iterator[tuple[str, Array]]:
        for k, v in self.members():
            if isinstance(v, Array):
                yield k, v

    def groups(self) -> Iterator[tuple[str, Group]]:
        for k, v in self.members():
            if isinstance(v, Group):
                yield k, v

    def array_keys(self) -> Iterator[str]:
        for k, _ in self.arrays():
            yield k

    def group_keys(self) -> Iterator[str]:
        for k, _ in self.groups():
            yield k

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create an array named ``name`` in this group: the keyword arguments of
        :meth:`AsyncGroup.create_array` (those of :func:`cuzarr.create_array`;
        ``dtype`` is required unless ``data`` is given)."""

        def make() -> Any:
            return self._async_group.create_array(name, **kwargs)

        # without data, only metadata is written: in this thread where the store allows
        return Array(sync(make()) if kwargs.get("data") is not None else run_blocking(make))

    def create_group(self, name: str, **kwargs: Any) -> Group:
        return Group(run_blocking(lambda: self._async_group.create_group(name, **kwargs)))

    def require_group(self, name: str, **kwargs: Any) -> Group:
        return Group(run_blocking(lambda: self._async_group.require_group(name, **kwargs)))

    def require_array(self, name: str, **kwargs: Any) -> Array:
        def make() -> Any:
            return self._async_group.require_array(name, **kwargs)

        # without data, only metadata is read or written: in this thread where it can
        return Array(sync(make()) if kwargs.get("data") is not None else run_blocking(make))

    def create_hierarchy(
        self, nodes: dict[str, Any], *, overwrite: bool = False
    ) -> Iterator[tuple[str, Array | Group]]:
        """Create the nodes ``nodes`` (paths relative to this group, to metadata)
        and the missing groups between; yields ``(path, Array | Group)`` for each
        (a generator, as zarr-python's: the nodes are made when it is iterated).
        See :func:`cuzarr.create_hierarchy`."""

        async def collect() -> list[tuple[str, Any]]:
            made = self._async_group.create_hierarchy(nodes, overwrite=overwrite)
            return [x async for x in made]

        for path, node in sync(collect()):
            yield path, self._wrap(node)

    # -- zarr-python compatibility --------------------------------------------------
    def get(self, path: str, default: Any = None) -> Array | Group | Any:
        """The member at ``path`` (may contain ``/``), or ``default`` if there is none.

        Parameters
        ----------
        path : str
            Path relative to this group.
        default : object, optional
            Returned when nothing is at ``path``.

        Returns
        -------
        Array, Group or ``default``
        """
        node = sync(self._async_group.get(path, _MISSING))
        return default if node is _MISSING else self._wrap(node)

    def get_array(self, path: str) -> Array:
        """The array at ``path``, relative to this group (``ArrayNotFoundError`` /
        ``ContainsGroupError`` otherwise)."""
        return Array(sync(self._async_group.get_array(path)))

    def get_group(self, path: str) -> Group:
        """The group at ``path``, relative to this group (``GroupNotFoundError`` /
        ``ContainsArrayError`` otherwise)."""
        return Group(sync(self._async_group.get_group(path)))

    def nmembers(self, max_depth: int | None = 0) -> int:
        """Number of members.

        Parameters
        ----------
        max_depth : int or None
            0 (default) counts the children, None the whole hierarchy below.

        Returns
        -------
        int
        """
        return sync(self._async_group.nmembers(max_depth))

    def array_values(self) -> Iterator[Array]:
        """The child arrays (an iterator of :class:`Array`)."""
        return (v for _, v in self.arrays())

    def group_values(self) -> Iterator[Group]:
        """The child groups (an iterator of :class:`Group`)."""
        return (v for _, v in self.groups())

    def require_groups(self, *names: str) -> tuple[Group, ...]:
        """Open or create a child group for each name.

        Parameters
        ----------
        *names : str
            Group names.

        Returns
        -------
        tuple of Group
        """
        return tuple(Group(g) for g in sync(self._async_group.require_groups(*names)))

    def create(self, name: str, **kwargs: Any) -> Array:
        """Alias of :meth:`create_array` (zarr-python's legacy name).

        Parameters
        ----------
        name : str
            Name of the array.
        **kwargs
            :func:`cuzarr.create_array` arguments (``compressor=`` is accepted too).

        Returns
        -------
        Array
        """
        return self.create_array(name, **kwargs)

    # zarr-python's legacy makers: ``AsyncGroup``'s, run to completion (see _array_maker)
    zeros = _array_maker(
        "zeros",
        "A new array ``name`` that reads as zeros.",
        ":func:`cuzarr.create` arguments (the zarr format is the group's).",
    )
    ones = _array_maker("ones", "A new array ``name`` that reads as ones (see :meth:`zeros`).")
    full = _array_maker(
        "full", "A new array ``name`` that reads as ``fill_value`` (see :meth:`zeros`)."
    )
    empty = _array_maker("empty", "A new array ``name`` with nothing written (see :meth:`zeros`).")
    zeros_like = _array_maker(
        "zeros_like",
        "A new array ``name`` of zeros like ``data`` (shape, dtype, chunks; for an\n"
        "array of the group's format also its codecs and order).",
        ":func:`cuzarr.create` arguments, overriding those taken from ``data``.",
    )
    ones_like = _array_maker(
        "ones_like", "A new array ``name`` of ones like ``data`` (see :meth:`zeros_like`)."
    )
    full_like = _array_maker(
        "full_like",
        "A new array ``name`` like ``data`` reading as ``fill_value`` (default: the\n"
        "fill value of ``data``; see :meth:`zeros_like`).",
    )
    empty_like = _array_maker(
        "empty_like",
        "A new array ``name`` like ``data`` with nothing written (see :meth:`zeros_like`).",
    )

    @property
    def info(self) -> GroupInfo:
        """Summary of the group without store requests (see :meth:`info_complete`)."""
        return self._async_group.info

    def info_complete(self) -> GroupInfo:
        """Summary of the group with its member counts (lists the hierarchy).

        Returns
        -------
        GroupInfo
        """
        return sync(self._async_group.info_complete())

    def tree(
        self,
        expand: bool | None = None,
        level: int | None = None,
        *,
        max_nodes: int = 500,
        plain: bool = False,
    ) -> str:
        """A text rendering of the hierarchy below this group (a ``str`` that also
        shows as the tree at the prompt).

        Parameters
        ----------
        expand
            Accepted for zarr-python compatibility (it only affects its HTML rendering).
        level
            The ``max_depth`` of ``members``: 0 shows only the children, as in zarr-python.
        max_nodes
            Show at most this many nodes (the first in path order), under a line
            saying the tree was truncated, as zarr-python does.
        plain
            Accepted for zarr-python compatibility: the text never has ANSI styling.
        """
        return sync(self._async_group.tree(expand, level, max_nodes=max_nodes, plain=plain))


# help() and signature-reading tools see the keywords the sync method forwards
Group.create_array.__signature__ = inspect.signature(AsyncGroup.create_array).replace(  # type: ignore[attr-defined]
    return_annotation="Array"
)
