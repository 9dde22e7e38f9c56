"""A store over a directory of the local filesystem (see ``store``).

Modules: ``files`` (the system calls: temporaries, reads, writes), ``locks``
(per-key write locks shared by threads and processes), ``mounts`` (which file
system a directory is on), ``store`` (``LocalStore``).
"""

from cuzarr.storage.local.files import LOCK_NAME, TEMP_PREFIX
from cuzarr.storage.local.store import LocalFile, LocalStore

__all__ = ["LOCK_NAME", "TEMP_PREFIX", "LocalFile", "LocalStore"]
