"""``cuzarr bench``: a quick local write/read throughput check."""

from __future__ import annotations

import argparse
import time

import numpy as np

from cuzarr.cli.display import Progress, human

__all__ = ["cmd_bench"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Write and read back a zstd-compressed uint16 array in a temporary
    directory, and print the throughputs (with progress bars on a terminal).

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
        # in steps of 32 MiB (32 chunks), with a bar on a terminal for a long
        # run going; each step is whole chunks, as one call would write them
        rows = 32 * 512
        bar = Progress(data.nbytes, "write", unit="B")
        for i in range(0, shape[0], rows):
            a[i : i + rows] = data[i : i + rows]
            bar.update(data[i : i + rows].nbytes)
        tw = time.perf_counter() - t0
        back = np.empty_like(data)
        bar = Progress(data.nbytes, "read", unit="B")
        t0 = time.perf_counter()
        for i in range(0, shape[0], rows):
            back[i : i + rows] = a[i : i + rows]
            bar.update(back[i : i + rows].nbytes)
        tr = time.perf_counter() - t0
        ok = np.array_equal(back, data)
    print(
        f"write {data.nbytes / tw / 1e9:.2f} GB/s, read {data.nbytes / tr / 1e9:.2f} GB/s "
        f"({human(data.nbytes)}, {a.nchunks} chunks, verified={ok})"
    )
    return 0 if ok else 1
