"""Exceptions raised by cuzarr.

Each class derives from the builtin exception a caller would naturally catch, so
``except FileNotFoundError`` keeps working for code written against other libraries.
"""

from __future__ import annotations

__all__ = [
    "ArrayFoundError",
    "ArrayIndexError",
    "ArrayNotFoundError",
    "BaseZarrError",
    "BoundsCheckError",
    "ByteRangeError",
    "ChecksumError",
    "ChunkNotFoundError",
    "CodecError",
    "ContainsArrayAndGroupError",
    "ContainsArrayError",
    "ContainsGroupError",
    "CopyError",
    "CuzarrError",
    "DataTypeValidationError",
    "DeadlockError",
    "GroupFoundError",
    "GroupNotFoundError",
    "IndexTypeError",
    "MetadataError",
    "MetadataValidationError",
    "NegativeStepError",
    "NodeNotFoundError",
    "NodeTypeValidationError",
    "PickleCodecDisabledError",
    "ReadOnlyError",
    "SliceStepError",
    "StoreKeyError",
    "StoreTimeoutError",
    "UnknownCodecError",
    "UnstableSpecificationWarning",
    "UnsupportedExtensionError",
    "VindexInvalidSelectionError",
    "ZarrDeprecationWarning",
    "ZarrFutureWarning",
    "ZarrRuntimeWarning",
    "ZarrUserWarning",
]


class CuzarrError(Exception):
    """Base class of every cuzarr-specific exception."""


class BaseZarrError(CuzarrError, ValueError):
    """The errors zarr-python derives from ``ValueError`` (its ``BaseZarrError``):
    code written against zarr-python that catches ``ValueError`` catches these."""


class NodeNotFoundError(BaseZarrError, FileNotFoundError):
    """No array or group exists at the requested path."""


class ArrayNotFoundError(NodeNotFoundError):
    """No array exists at the requested path."""


class GroupNotFoundError(NodeNotFoundError):
    """No group exists at the requested path."""


class ContainsArrayError(BaseZarrError, FileExistsError):
    """An array already exists where a new node was to be created (or where a
    group was to be opened)."""


class ContainsGroupError(BaseZarrError, FileExistsError):
    """A group already exists where a new node was to be created."""


class ContainsArrayAndGroupError(BaseZarrError):
    """Metadata of both an array and a group lie at one path."""


class MetadataError(BaseZarrError):
    """Metadata is malformed, inconsistent or unsupported."""


# zarr-python's name for the same class of errors
MetadataValidationError = MetadataError


class UnsupportedExtensionError(MetadataError):
    """Metadata names an extension marked ``must_understand`` that cuzarr lacks."""


class NodeTypeValidationError(MetadataError):
    """``node_type`` in metadata is missing or not what the caller asked for."""


class ArrayFoundError(GroupNotFoundError, ContainsArrayError):
    """A group was to be opened where an array lies: a ``GroupNotFoundError``, and
    the ``ContainsArrayError`` zarr-python raises there."""


class GroupFoundError(ArrayNotFoundError, NodeTypeValidationError):
    """An array was to be opened where a group lies: an ``ArrayNotFoundError``, and
    the ``NodeTypeValidationError`` zarr-python raises there."""


class DataTypeValidationError(MetadataError):
    """A data type that is not valid (zarr-python's name)."""


class PickleCodecDisabledError(BaseZarrError):
    """zarr-python's refusal of the pickle codec; cuzarr never unpickles chunks."""


class CodecError(BaseZarrError):
    """A chunk could not be encoded or decoded (corrupt, truncated, wrong size)."""


def keyed(e: CodecError, key: str) -> CodecError:
    """The same error, its message prefixed with the store key it concerns
    (the engine's drivers know the key, the codecs that raise do not)."""
    if str(e).startswith(f"{key}: "):
        return e
    return type(e)(f"{key}: {e}")


class UnknownCodecError(MetadataError):
    """A codec named in metadata (or passed by the caller) is not known."""


class ChecksumError(CodecError):
    """A stored checksum does not match the data it protects."""


class ChunkNotFoundError(BaseZarrError):
    """A chunk that must exist is missing (zarr-python's name; cuzarr reads a
    missing chunk as the fill value)."""


class ReadOnlyError(BaseZarrError, PermissionError):
    """A write was attempted through a read-only store or array (a
    ``PermissionError``, and the ``ValueError`` zarr-python raises)."""


class StoreKeyError(BaseZarrError):
    """A store key is invalid, e.g. it would resolve outside the store root."""


class StoreTimeoutError(CuzarrError, TimeoutError):
    """A store request ran past its time limit (``storage.timeout``: the total
    time of one request, retries included; ``storage.read_timeout``: the longest
    wait for the next bytes of an answer). The message names the key and the limit."""


class ByteRangeError(BaseZarrError):
    """A byte request with a negative offset, end or length: the store API gives
    them no meaning (a range whose end is at or before its start is just empty)."""


class CopyError(CuzarrError, RuntimeError):
    """``copy``, ``copy_all`` or ``copy_store`` found something in the way at the
    destination (with ``if_exists="raise"``), as zarr-python 2's ``CopyError``."""


class DeadlockError(CuzarrError, RuntimeError):
    """A synchronous call made from inside a running event loop needs chunks that
    an async operation of that same loop is writing: the loop cannot go on while
    the call blocks it, so the call would wait forever. Await the async API there."""


class BoundsCheckError(CuzarrError, IndexError):
    """A selection lies outside the array's bounds or is malformed."""


# zarr-python's names for kinds of bad selections: all IndexErrors
ArrayIndexError = BoundsCheckError


class NegativeStepError(BoundsCheckError):
    """zarr-python refuses negative slice steps with it; cuzarr takes them."""


class VindexInvalidSelectionError(BoundsCheckError):
    """A coordinate selection (``vindex``) with something other than integer
    arrays or one boolean mask."""


class SliceStepError(BoundsCheckError, ValueError):
    """A slice with step zero: an ``IndexError`` like every bad selection, and a
    ``ValueError`` as numpy raises for it."""


class IndexTypeError(BoundsCheckError, TypeError):
    """Slice bounds that are not integers: an ``IndexError`` like every bad
    selection, and a ``TypeError`` as numpy raises for them."""


class ZarrUserWarning(UserWarning):
    """Warnings about how the library is used (zarr-python's class)."""


class ZarrDeprecationWarning(DeprecationWarning):
    """zarr-python's class for deprecations."""


class ZarrFutureWarning(FutureWarning):
    """zarr-python's class for coming changes."""


class UnstableSpecificationWarning(ZarrFutureWarning):
    """A data type or codec whose specification may still change."""


class ZarrRuntimeWarning(RuntimeWarning):
    """zarr-python's class for run-time warnings."""
