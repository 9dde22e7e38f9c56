"""Exceptions raised by cuzarr.

Each class derives from the builtin exception a caller would naturally catch, so
``except FileNotFoundError`` keeps working for code written against other libraries.
"""

from __future__ import annotations

__all__ = [
    "ArrayNotFoundError",
    "BoundsCheckError",
    "ByteRangeError",
    "ChecksumError",
    "CodecError",
    "ContainsArrayError",
    "ContainsGroupError",
    "CuzarrError",
    "GroupNotFoundError",
    "IndexTypeError",
    "MetadataError",
    "NodeNotFoundError",
    "NodeTypeValidationError",
    "ReadOnlyError",
    "SliceStepError",
    "StoreKeyError",
    "UnknownCodecError",
    "UnsupportedExtensionError",
]


class CuzarrError(Exception):
    """Base class of every cuzarr-specific exception."""


class NodeNotFoundError(CuzarrError, FileNotFoundError):
    """No array or group exists at the requested path."""


class ArrayNotFoundError(NodeNotFoundError):
    """No array exists at the requested path."""


class GroupNotFoundError(NodeNotFoundError):
    """No group exists at the requested path."""


class ContainsArrayError(CuzarrError, FileExistsError):
    """An array already exists where a new node was to be created."""


class ContainsGroupError(CuzarrError, FileExistsError):
    """A group already exists where a new node was to be created."""


class MetadataError(CuzarrError, ValueError):
    """Metadata is malformed, inconsistent or unsupported."""


class UnsupportedExtensionError(MetadataError):
    """Metadata names an extension marked ``must_understand`` that cuzarr lacks."""


class NodeTypeValidationError(MetadataError):
    """``node_type`` in metadata is missing or not what the caller asked for."""


class CodecError(CuzarrError, ValueError):
    """A chunk could not be encoded or decoded (corrupt, truncated, wrong size)."""


class UnknownCodecError(MetadataError):
    """A codec named in metadata (or passed by the caller) is not known."""


class ChecksumError(CodecError):
    """A stored checksum does not match the data it protects."""


class ReadOnlyError(CuzarrError, PermissionError):
    """A write was attempted through a read-only store or array."""


class StoreKeyError(CuzarrError, ValueError):
    """A store key is invalid, e.g. it would resolve outside the store root."""


class ByteRangeError(CuzarrError, ValueError):
    """A byte request with a negative offset, end or length: the store API gives
    them no meaning (a range whose end is at or before its start is just empty)."""


class BoundsCheckError(CuzarrError, IndexError):
    """A selection lies outside the array's bounds or is malformed."""


class SliceStepError(BoundsCheckError, ValueError):
    """A slice with step zero: an ``IndexError`` like every bad selection, and a
    ``ValueError`` as numpy raises for it."""


class IndexTypeError(BoundsCheckError, TypeError):
    """Slice bounds that are not integers: an ``IndexError`` like every bad
    selection, and a ``TypeError`` as numpy raises for them."""
