"""``cuzarr bench``: a quick local write/read throughput check."""

from __future__ import annotations

import argparse
import time

import numpy as np

from cuzarr.cli.display import human

__all__ = ["cmd_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Write and read back a zstd-compressed uint16 array in a temporary
    directory, and print the throughputs.

    Parameters
    ----------
    args : argparse.Namespace
        ``size_mib``, as :func:`~cuzarr.cli.parser.build_parser` parses it.

    Returns
    -------
    int
        The exit status: 0, or 1 if the data read back differs.
    """
    import tempfile

    import cuzarr

    if args.size_mib < 1:
        raise ValueError(f"--size-mib must be at least 1, got {args.size_mib}")
    shape = (args.size_mib * 512, 1024)  # uint16 rows of 2 KiB: 512 a MiB
    rng = np.random.default_rng(0)
    data = np.cumsum(rng.integers(-2, 3, size=shape, dtype=np.int16), axis=1).astype(np.uint16)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        a = cuzarr.create_array(
            d,
            shape=shape,
            chunks=(512, 1024),
            dtype="u2",
            compressors=[{"name": "zstd", "configuration": {"level": 1}}],
        )
        a[...] = data
        tw = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = a[...]
        tr = time.perf_counter() - t0
        ok = np.array_equal(back, data)
    print(
        f"write {data.nbytes / tw / 1e9:.2f} GB/s, read {data.nbytes / tr / 1e9:.2f} GB/s "
        f"({human(data.nbytes)}, {a.nchunks} chunks, verified={ok})"
    )
    return 0 if ok else 1
