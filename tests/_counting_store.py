"""Real stores that also record every ``get`` (key, byte range), for tests that
check how often chunks are fetched."""

from __future__ import annotations

from cuzarr.storage import LocalStore, MemoryStore


class _CountsGets:
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gets: list[tuple[str, object]] = []

    async def get(self, key, prototype=None, byte_range=None):
        self.gets.append((key, byte_range))
        return await super().get(key, prototype, byte_range)


class CountingMemoryStore(_CountsGets, MemoryStore):
    """A real in-memory store that records every ``get`` (the base class routes
    ``get_many`` through it)."""


class CountingLocalStore(_CountsGets, LocalStore):
    """A real local-directory store that records every ``get``."""
