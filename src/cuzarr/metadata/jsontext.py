"""Indented JSON text for metadata documents, byte for byte ``json.dumps``'s.

``json.dumps(indent=...)`` leaves the C encoder for a pure-Python generator
chain, which was a quarter of ``create_array``'s time in memory. Metadata
documents are small trees of dicts, lists and scalars, which a plain recursive
function lays out several times faster; anything unusual (a type the fast path
does not know, a key of another type, a cycle) goes back to ``json.dumps``, so
the text and the errors stay the standard library's.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps_indented"]

_float_repr = float.__repr__
_int_repr = int.__repr__
_MAX_DEPTH = 64  # deeper than any metadata; deeper trees (or cycles) go to json.dumps


class _Fallback(Exception):
    """The fast path met something only ``json.dumps`` handles as it should."""


def dumps_indented(obj: Any, indent: int) -> str:
    """``json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)``.

    Parameters
    ----------
    obj : Any
        A JSON-compatible tree.
    indent : int
        Spaces per level (non-negative).

    Returns
    -------
    str
        The same text as ``json.dumps`` writes, and the same exceptions for what
        it refuses (``ValueError`` for NaN and infinities, ``TypeError`` for
        other objects).
    """
    parts: list[str] = []
    try:
        _encode(obj, parts, "\n", " " * indent, 0)
    except _Fallback:
        return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)
    return "".join(parts)


def _scalar(o: Any) -> str:
    t = type(o)
    if t is str:
        return encode_basestring(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if t is int:
        return _int_repr(o)
    if t is float:
        if o != o or o in (float("inf"), float("-inf")):
            raise _Fallback  # json.dumps raises its own ValueError
        return _float_repr(o)
    raise _Fallback


def _encode(o: Any, parts: list[str], nl: str, step: str, depth: int) -> None:
    t = type(o)
    if t is dict:
        opener, closer = "{", "}"
    elif t is list or t is tuple:
        opener, closer = "[", "]"
    else:
        parts.append(_scalar(o))
        return
    if not o:
        parts.append(opener + closer)
        return
    if depth >= _MAX_DEPTH:
        raise _Fallback
    inner = nl + step
    sep = "," + inner
    lead = inner
    parts.append(opener)
    append = parts.append
    keyed = t is dict
    for k, v in o.items() if keyed else ((None, v) for v in o):
        append(lead)
        if keyed:
            if type(k) is not str:
                raise _Fallback  # json's key conversions and errors
            append(encode_basestring(k))
            append(": ")
        tv = type(v)
        if tv is dict or tv is list or tv is tuple:
            _encode(v, parts, inner, step, depth + 1)
        else:
            append(_scalar(v))
        lead = sep
    append(nl)
    append(closer)
