"""Keys as paths below a local store's root: the checks that keep every read,
write and delete inside it (malformed, reserved and escaping keys refused; no
symlink leading out of the root followed), with the results cached per store.
"""

from __future__ import annotations

import os
import re
import stat

from cuzarr.errors import StoreKeyError
from cuzarr.storage.base import normalize_key
from cuzarr.storage.local.files import _RESERVED

__all__ = ["KeyPaths"]

# Keys made of plain names (chunk keys, most metadata keys) pass every check of
# ``LocalStore._key_path`` by construction: ASCII letters, digits, '_', '-' and
# inner '.', no component starting with '.' (so no '.', '..' or reserved name),
# none empty or longer than 255, no ':' (drive letters) or backslashes. One
# regex match instead of the general checks (~2 us a key, twice per written key).
_PLAIN_KEY = re.compile(r"[\w\-][\w.\-]{0,254}(?:/[\w\-][\w.\-]{0,254})*", re.ASCII)
# Keys whose checked paths a LocalStore keeps (then it starts over).
_PATHS_MAX = 1 << 16


def _is_real_dir(path: str) -> bool:
    """Whether ``path`` is a directory itself (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


class KeyPaths:
    """The key checks of ``LocalStore`` (a mixin: the store sets ``_root_str``,
    ``_root_prefix``, ``_real_root``, ``_safe_dirs`` and ``_paths``)."""

    _root_str: str
    _root_prefix: str
    _real_root: str | None
    _safe_dirs: set[str]
    _paths: dict[str, str]

    def _path(self, key: str) -> str:
        path = self._paths.get(key) if type(key) is str else None
        if path is not None:
            return path
        path = self._key_path(key)
        directory = os.path.dirname(path)
        if directory not in self._safe_dirs:
            self._check_dir(key, directory)
        if directory in self._safe_dirs:
            if len(self._paths) >= _PATHS_MAX:
                self._paths.clear()
            self._paths[key] = path
        return path

    def _key_path(self, key: str) -> str:
        """``key``'s path below the root, from the key alone (no symlink checks):
        refuses keys that are malformed, reserved, or lead outside the root."""
        if type(key) is str and _PLAIN_KEY.fullmatch(key):
            return self._root_prefix + key
        normalize_key(key)
        for part in key.split("/"):
            if part.startswith(_RESERVED):
                raise StoreKeyError(f"key {key!r} uses a name reserved for cuzarr's temporaries")
            if len(part) > 255 or (len(part) >= 2 and part[1] == ":" and part[0].isalpha()):
                # Too long for any filesystem; or a Windows drive ('C:') component.
                raise StoreKeyError(f"invalid store key {key!r}")
        path = os.path.join(self._root_str, key)
        # normalize_key already rejects '..', '.', empty parts, backslashes and
        # absolute keys, so the join stays below the root; checked again here as
        # a plain prefix test (os.path.commonpath cost ~3 us a key).
        if not path.startswith(self._root_prefix):
            raise StoreKeyError(f"key {key!r} resolves outside the store root")
        return path

    def _check_dir(self, key: str, directory: str) -> None:
        """Refuse a key whose directory resolves (through symlinks) outside the root."""
        if self._real_root is None:
            self._real_root = os.path.realpath(self._root_str)
        parent = os.path.dirname(directory)
        if len(parent) > len(self._root_str) and parent not in self._safe_dirs:
            self._note_safe(parent)
        if parent in self._safe_dirs and _is_real_dir(directory):
            # a directory, not a symlink, in a checked one: its real path is
            # below the root too (one lstat; chunk keys of one directory per
            # chunk row made a first read resolve every one of them)
            self._safe_dirs.add(directory)
            return
        # Only existing components can be symlinks: check the deepest existing
        # ancestor (a new array's chunk directories do not exist yet, and a full
        # realpath of them on every write cost ~8% of a write's CPU time).
        existing = directory
        while (
            existing not in self._safe_dirs
            and len(existing) > len(self._root_str)
            and not os.path.lexists(existing)
        ):
            existing = os.path.dirname(existing)
        if existing in self._safe_dirs:
            return
        real = self._realpath_below_root(existing)
        if real != self._real_root and not real.startswith(os.path.join(self._real_root, "")):
            raise StoreKeyError(f"key {key!r} resolves outside the store root (symlink)")
        if os.path.isdir(existing):
            # Cache only what exists. A directory swapped for a symlink later, while
            # this store object is in use, goes unnoticed (docs/reliability.md).
            self._safe_dirs.add(existing)

    def _note_safe(self, directory: str) -> None:
        """Keep ``directory`` as checked where it is an existing directory whose
        real path lies below the root (nothing kept, nothing raised otherwise)."""
        try:
            real = self._realpath_below_root(directory)
        except (OSError, ValueError):
            return
        assert self._real_root is not None
        if real.startswith(os.path.join(self._real_root, "")) and os.path.isdir(directory):
            self._safe_dirs.add(directory)

    def _realpath_below_root(self, path: str) -> str:
        """``os.path.realpath(path)`` of an existing ``path`` inside the root (no
        '..' parts), resolved from the root's real path already known: only the
        parts below the root are looked at (a store opened by path name, as every
        ``open_array(str)`` does, resolved the root's parts twice)."""
        assert self._real_root is not None
        rel = path[len(self._root_prefix) :] if path.startswith(self._root_prefix) else None
        if rel is None or path == self._root_str:
            return os.path.realpath(path)
        real = self._real_root
        for part in rel.split("/") if os.sep == "/" else rel.replace("\\", "/").split("/"):
            if not part:
                continue
            candidate = os.path.join(real, part)
            # a symlink is resolved whole (its target may lie anywhere); its
            # parent is a real path already
            real = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
        return real

    def _check_file(self, key: str, path: str) -> None:
        """A symlinked file is followed only if it stays below the root."""
        if self._real_root is None:
            self._real_root = os.path.realpath(self._root_str)
        real = os.path.realpath(path)
        if not real.startswith(os.path.join(self._real_root, "")):
            raise StoreKeyError(f"key {key!r} is a symlink leading outside the store root")

    def _dir_path(self, prefix: str) -> str:
        """The directory ``prefix`` names, refused (``StoreKeyError``) if it is, or
        passes through, a symlink leading out of the root."""
        prefix = prefix.strip("/")
        if not prefix:
            return self._root_str
        base = self._path(prefix)
        self._check_dir(prefix, base)
        return base
