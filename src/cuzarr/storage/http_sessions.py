"""HTTP filesystems shared by the HTTP stores of the same options on cuzarr's loop.

Each store used to build its own fsspec ``HTTPFileSystem`` (and with it an
aiohttp session and connection pool) per event loop. Opening the same URL again
-- ``xr.open_dataset(url)`` per task, a fresh ``cuzarr.open_array(url)`` per
request -- then started with no open connection: a concurrent read of many
chunks paid a TCP (and TLS) handshake per request first, where zarr-python,
through fsspec's instance cache, reuses its warm pool. On cuzarr's own
background loop, which lives as long as the process, stores whose storage
options are plain data (or cuzarr's own session factory) now share one
filesystem per options: its session stays open and its pool warm between
stores. Options holding other objects (credentials providers, custom clients)
keep a filesystem of their own, since two such objects may print alike and
differ; so do other loops (a user's loop may close, and its session with it).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from cuzarr.runtime.sync import get_loop

__all__ = ["shared_http_fs"]

# The most filesystems kept for reuse: the least recently used one beyond it is
# forgotten here (the stores still holding it keep using it; fsspec closes its
# session once the last of them lets it go).
MAX_SHARED = 16

_shared: OrderedDict[tuple[Any, ...], tuple[asyncio.AbstractEventLoop, Any]] = OrderedDict()
_lock = threading.Lock()
_PLAIN = (str, int, float, bool, type(None), bytes)


def _plain_key(value: Any, factories: tuple[Callable[..., Any], ...]) -> Any:
    """A hashable key equal for equal plain data, or ``None`` when ``value``
    holds anything else (``factories``: functions compared by identity)."""
    if isinstance(value, _PLAIN):
        return (type(value).__name__, value)
    if any(value is f for f in factories):
        return ("factory", id(value))
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            kv = _plain_key(v, factories)
            if not isinstance(k, str) or kv is None:
                return None
            items.append((k, kv))
        return ("dict", tuple(sorted(items)))
    if isinstance(value, list | tuple):
        parts = tuple(_plain_key(v, factories) for v in value)
        return None if any(p is None for p in parts) else (type(value).__name__, parts)
    return None


def shared_http_fs(
    protocol: str, storage_options: dict[str, Any], factories: tuple[Callable[..., Any], ...]
) -> Any | None:
    """The shared async HTTP filesystem for these options on cuzarr's loop (built
    on first use), or ``None`` where none may be shared: another loop is running,
    or the options hold objects other than plain data and ``factories``."""
    if asyncio.get_running_loop() is not get_loop():
        return None
    opts = _plain_key(storage_options, factories)
    if opts is None:
        return None
    loop = get_loop()
    key = (protocol, opts)
    with _lock:
        entry = _shared.get(key)
        if entry is not None and entry[0] is loop:  # (after a fork: another loop)
            _shared.move_to_end(key)
            return entry[1]
    import fsspec

    cls = fsspec.get_filesystem_class(protocol)
    fs = cls(asynchronous=True, loop=loop, skip_instance_cache=True, **storage_options)
    with _lock:
        entry = _shared.get(key)
        if entry is None or entry[0] is not loop:
            entry = _shared[key] = (loop, fs)
        _shared.move_to_end(key)
        while len(_shared) > MAX_SHARED:
            _shared.popitem(last=False)
    return entry[1]
