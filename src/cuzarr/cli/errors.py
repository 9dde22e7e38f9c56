"""Errors as the command line reports them: the copy's own error, and messages
cleaned of the stores' temporary file names."""

from __future__ import annotations

from cuzarr.errors import CopyError as _LibraryCopyError

__all__ = ["CopyError", "user_message"]


class CopyError(_LibraryCopyError):
    """A copy that failed after it began writing; the message names the destination."""


def user_message(e: BaseException) -> str:
    """``str(e)`` with the stores' temporary files named as the paths they stand for.

    A local store writes ``dir/.cuzarr-tmp-<hex>-name`` and renames it to
    ``dir/name``; a zip store rewrites ``x.zip`` through ``x.zip.cuzarr-tmp``.
    The user knows their destination path, not our temporaries.

    Parameters
    ----------
    e : BaseException
        The error to report.

    Returns
    -------
    str
        Its message, temporary names replaced by the paths they stand for.
    """
    import re

    from cuzarr.storage.local import TEMP_PREFIX

    text = str(e)
    if ".cuzarr-tmp" not in text:
        return text
    text = re.sub(re.escape(TEMP_PREFIX) + r"[0-9a-f]+-", "", text)
    text = re.sub(r"\.cuzarr-tmp(?=['\"\s]|$)", "", text)
    # a failed rename of a temporary onto its path now reads "'p' -> 'p'"
    return re.sub(r"""('[^']*'|"[^"]*") -> \1""", r"\1", text)
