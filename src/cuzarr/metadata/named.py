"""The ``{"name": ..., "configuration": {...}}`` objects of v3 metadata (codecs,
chunk grids): their name and configuration, checked."""

from __future__ import annotations

from typing import Any

from cuzarr.errors import MetadataError

__all__ = ["parse_named"]


def parse_named(obj: Any, what: str) -> tuple[str, dict[str, Any]]:
    """``(name, configuration)`` of the v3 object ``obj`` (configuration optional:
    ``{}``); a ``MetadataError`` naming ``what`` where ``obj`` is not such an object."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise MetadataError(f"invalid {what} {obj!r}")
    name = obj["name"]
    conf = obj.get("configuration") or {}
    if not isinstance(conf, dict):
        raise MetadataError(f"{what} {name!r}: configuration must be an object, got {conf!r}")
    return name, conf
