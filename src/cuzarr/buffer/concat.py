"""Buffers laid end to end without copying them into one."""

from __future__ import annotations

from typing import Any

__all__ = ["Concat", "joined"]


class Concat:
    """Buffers laid end to end, not yet joined: a shard's inner chunks and index.

    A store that can write several buffers in one call (``LocalStore``, with
    ``os.writev``) takes it as it is; everywhere else the engine hands over
    ``bytes(concat)``. Joining a 22 MiB shard into fresh memory cost ~14 ms of
    page faults before its file write, with the other cores idle.
    """

    __slots__ = ("nbytes", "parts")

    def __init__(self, parts: Any) -> None:
        flat: list[Any] = []
        for p in parts:
            if isinstance(p, Concat):
                flat.extend(p.parts)
            elif len(p):
                flat.append(p)
        self.parts = flat
        self.nbytes = sum(len(memoryview(p).cast("B")) for p in flat)

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


def joined(value: Any) -> Any:
    """``value`` as one buffer (a :class:`Concat` joined; anything else as it is)."""
    return bytes(value) if isinstance(value, Concat) else value
