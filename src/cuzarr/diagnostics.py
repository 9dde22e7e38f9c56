"""``print_debug_info()``, ``set_log_level()`` and ``set_format()``, as in zarr-python."""

from __future__ import annotations

import logging
import sys
from typing import Literal

__all__ = ["print_debug_info", "set_format", "set_log_level"]

_logger = logging.getLogger("cuzarr")

_REQUIRED = ["numpy", "numcodecs", "zstandard", "google-crc32c", "donfig", "fsspec"]
_OPTIONAL = [
    "cupy-cuda13x",
    "nvidia-nvcomp-cu13",
    "kvikio-cu13",
    "ml_dtypes",
    "zarr",
    "s3fs",
    "gcsfs",
    "obstore",
    "dask",
    "xarray",
    "tensorstore",
]


def _print_packages(packages: list[str]) -> None:
    # imported here, not at import time: importlib.metadata costs ~30 ms there,
    # for a function run only when a bug is reported
    from importlib.metadata import PackageNotFoundError, version

    missing = []
    for name in packages:
        try:
            print(f"{name}: {version(name)}")
        except PackageNotFoundError:
            missing.append(name)
    if missing:
        print("\n**Not Installed:**")
        for name in missing:
            print(name)


def print_debug_info() -> None:
    """Print the platform, Python, cuzarr and dependency versions, for bug reports."""
    import platform  # see _print_packages

    print(f"platform: {platform.platform()}")
    print(f"python: {platform.python_version()}")
    print(f"cuzarr: {sys.modules['cuzarr'].__version__}\n")
    print("**Required dependencies:**")
    _print_packages(_REQUIRED)
    print("\n**Optional dependencies:**")
    _print_packages(_OPTIONAL)


def _handler() -> logging.Handler:
    """cuzarr's stream handler, added on first use."""
    if not _logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s")
        )
        _logger.addHandler(handler)
    return _logger.handlers[0]


def set_log_level(
    level: Literal["NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
) -> None:
    """Set the level of cuzarr's ``logging`` logger (``"cuzarr"``) and of its
    handler, adding a stream handler the first time (as zarr-python does for
    ``"zarr"``).

    Parameters
    ----------
    level : str
        A ``logging`` level name.
    """
    _logger.setLevel(level)
    _handler().setLevel(level)


def set_format(log_format: str) -> None:
    """Set the format of cuzarr's log messages (its stream handler's formatter).

    Parameters
    ----------
    log_format : str
        A ``logging.Formatter`` format string.
    """
    _handler().setFormatter(logging.Formatter(fmt=log_format))
