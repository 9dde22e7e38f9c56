"""``attrs``: a write-through mapping of a node's user attributes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

__all__ = ["Attributes"]


class Attributes(MutableMapping[str, Any]):
    """Dict-like view of attributes; every change is saved at once."""

    def __init__(
        self, get: Callable[[], dict[str, Any]], put: Callable[[dict[str, Any]], None]
    ) -> None:
        self._get = get
        self._put = put

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        d = dict(self._get())
        d[key] = value
        self._put(d)

    def __delitem__(self, key: str) -> None:
        d = dict(self._get())
        del d[key]
        self._put(d)

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._get()))

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attributes):
            other = other.asdict()
        return self.asdict() == other

    def asdict(self) -> dict[str, Any]:
        """A plain copy of the attributes."""
        return dict(self._get())

    def put(self, d: dict[str, Any]) -> None:
        """Replace all attributes with ``d``."""
        self._put(dict(d))

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        d = dict(self._get())
        d.update(*args, **kwargs)
        self._put(d)
