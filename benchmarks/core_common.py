"""bench_core.py's constants, data and selections: what every part of the harness
(the driver, its worker processes, the reports) shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA_DIR = REPO / ".bench_data"

COLS = 16384  # columns of the big array
CHUNKS = (512, 1024)  # 1 MiB uint16 chunks
TINY_CHUNKS = (32, 32)  # 2 KiB uint16 chunks
TINY_GRID_COLS = 200
SHARD_INNER = (256, 256)  # 128 KiB uint16 inner chunks
SHARD_MAX = (2048, 8192)  # 32 MiB uint16 shards (smaller only if the array is)
RANDOM_N = 1000  # random small reads from the sharded array
RANDOM_WIN = 16  # ... of RANDOM_WIN x RANDOM_WIN elements each
VINDEX_POINTS = 100_000
DTYPE = "uint16"
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 1}}

LIB_CONTENDERS = ["cuzarr", "zarr", "zarr-fused", "zarrs", "tensorstore"]
PEERS = ["zarr", "zarr-fused", "zarrs", "tensorstore"]
LIMIT_CONTENDERS = ["limit:numcodecs", "limit:zstandard", "limit:libzstd", "limit:assemble"]
# limit:assemble = limit:libzstd (or limit:numcodecs) plus what any full read must also do: copy each
# decoded chunk into its place in one fresh output array (no Zarr machinery); for write, what any
# writer must also do: copy each chunk out of the source and write it to a file of its own
ASSEMBLE = "limit:assemble"
DECODE_LIMITS = ["limit:numcodecs", "limit:zstandard", "limit:libzstd"]
SEL_UNITS = ["sel-strided", "sel-rows", "sel-oindex", "sel-vindex"]
SHARD_UNITS = ["shard-write", "shard-read", "shard-random"]
ONE_SHARD_MAX = (4096, 8192)  # "one-shard": an array that is one 64 MiB shard
# a "unit" is what one process measures (in --isolation measurement); "tiny" and
# "one-shard" yield two table rows each (their write, then their read), every other
# unit one row of its own name.
UNITS = ["write", "read", "tiny", *SHARD_UNITS, "one-shard", *SEL_UNITS]
WORKLOADS = UNITS
ALIASES = {
    "all": UNITS,
    "core": ["write", "read", "tiny"],
    "shard": [*SHARD_UNITS, "one-shard"],
    "sel": SEL_UNITS,
    "select": SEL_UNITS,
}
ROWS_OF_UNIT = {
    "tiny": ["tiny-write", "tiny-read"],
    "one-shard": ["one-shard-write", "one-shard-read"],
}
ROW_ORDER = [
    "write", "read", "tiny-write", "tiny-read", *SHARD_UNITS,
    "one-shard-write", "one-shard-read", *SEL_UNITS,
]  # fmt: skip
# a unit that reads a store needs the unit that writes it (run untimed as set-up if
# it was not selected)
NEEDS = {
    "read": "write",
    **{u: "write" for u in SEL_UNITS},
    "shard-read": "shard-write",
    "shard-random": "shard-write",
}
LIMIT_UNITS = ["write", "read", "tiny", "shard-read"]  # units with limit:* rows

FULL_READS = ["read", "tiny-read", "shard-read"]  # rows with an RSS/out column
RSS_GOAL_ROWS = ["read", "shard-read"]  # the >= 256 MiB reads the RSS goal is about
WRITE_UNITS = {"write": "", "shard-write": "_shard"}  # unit -> store suffix
RESULT_TAG = "BENCH_RESULT "
JSON_TAG = "BENCH_JSON "

PIPELINES = {
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarr-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
}


def limit_units(contender: str) -> list[str]:
    return ["write", "read"] if contender == ASSEMBLE else LIMIT_UNITS


def rows_of(unit: str) -> list[str]:
    return ROWS_OF_UNIT.get(unit, [unit])


def expand_units(spec: str) -> list[str]:
    """'a,b,c' (units or aliases) -> units in canonical order."""
    want: set[str] = set()
    for w in (w.strip() for w in spec.split(",")):
        if not w:
            continue
        if w in ALIASES:
            want.update(ALIASES[w])
        elif w in UNITS:
            want.add(w)
        elif w in ("tiny-write", "tiny-read"):
            want.add("tiny")
        elif w in ("one-shard-write", "one-shard-read"):
            want.add("one-shard")
        else:
            raise ValueError(f"unknown workload {w!r} (known: {UNITS}, aliases {list(ALIASES)})")
    return [u for u in UNITS if u in want]


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def smooth_noise(shape: tuple[int, int], seed: int, block_rows: int = 512) -> np.ndarray:
    """Random walk along rows (steps in [-3, 3], halved): zstd-1 gets ~2.9x."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=np.uint16)
    for r0 in range(0, shape[0], block_rows):
        r1 = min(r0 + block_rows, shape[0])
        steps = rng.integers(-3, 4, size=(r1 - r0, shape[1]), dtype=np.int16)
        walk = np.cumsum(steps, axis=1, dtype=np.int16)
        walk //= 2
        out[r0:r1] = walk.view(np.uint16)
    return out


def big_shape(size_mib: int) -> tuple[int, int]:
    rows = max(1, (size_mib * 2**20) // (2 * COLS))
    return (rows, COLS)


def tiny_shape(nchunks: int) -> tuple[int, int]:
    cols = min(TINY_GRID_COLS, nchunks)
    rows = -(-nchunks // cols)
    return (rows * TINY_CHUNKS[0], cols * TINY_CHUNKS[1])


def tiny_source(shape: tuple[int, int]) -> np.ndarray:
    return smooth_noise(shape, seed=1)


def shard_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """SHARD_MAX, shrunk (in whole inner chunks) for arrays smaller than that."""
    return tuple(  # type: ignore[return-value]
        max(inner, min(mx, (n // inner) * inner))
        for n, inner, mx in zip(shape, SHARD_INNER, SHARD_MAX)
    )


def one_shard_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """ONE_SHARD_MAX, or the big array's shape where that is smaller (in whole
    inner chunks)."""
    return tuple(  # type: ignore[return-value]
        max(inner, min(mx, (n // inner) * inner))
        for n, inner, mx in zip(shape, SHARD_INNER, ONE_SHARD_MAX)
    )


def random_windows(shape: tuple[int, int], n: int = RANDOM_N, w: int = RANDOM_WIN):
    """Top-left corners of ``n`` random ``w x w`` windows (deterministic)."""
    rng = np.random.default_rng(5)
    ys = rng.integers(0, shape[0] - w + 1, n)
    xs = rng.integers(0, shape[1] - w + 1, n)
    return [(int(y), int(x)) for y, x in zip(ys, xs)]


def windows_chunks_touched(shape, chunks, n: int = RANDOM_N, w: int = RANDOM_WIN) -> float:
    """Mean number of chunks one random window touches."""
    tot = 0
    for y, x in random_windows(shape, n, w):
        tot += ((y + w - 1) // chunks[0] - y // chunks[0] + 1) * (
            (x + w - 1) // chunks[1] - x // chunks[1] + 1
        )
    return tot / n


def selection(name: str, shape: tuple[int, int]) -> tuple[str, tuple]:
    """(kind, selection) of a sel-* workload; kind is basic, oindex or vindex."""
    rows, cols = shape
    if name == "sel-strided":
        return "basic", (slice(None, None, 7), slice(None, None, 13))
    if name == "sel-rows":
        r0 = min(1000, rows // 8)
        r1 = min(5000, max(r0 + 1, rows * 5 // 8))
        return "basic", (slice(r0, r1, 3), slice(None))
    if name == "sel-oindex":
        rng = np.random.default_rng(11)
        i = np.sort(rng.choice(rows, max(1, rows // 8), replace=False))
        j = np.sort(rng.choice(cols, max(1, cols // 8), replace=False))
        return "oindex", (i, j)
    if name == "sel-vindex":
        rng = np.random.default_rng(12)
        i = rng.integers(0, rows, VINDEX_POINTS)
        j = rng.integers(0, cols, VINDEX_POINTS)
        return "vindex", (i, j)
    raise ValueError(name)


def expected_selection(src: np.ndarray, kind: str, sel: tuple) -> np.ndarray:
    if kind == "basic":
        return np.asarray(src[sel])
    if kind == "oindex":
        return np.asarray(src[np.ix_(*sel)])
    return np.asarray(src[sel])  # vindex: numpy advanced indexing of int arrays


def selection_stats(name: str, shape: tuple[int, int]) -> tuple[int, int]:
    """(output bytes, chunks touched) of a sel-* workload on the CHUNKS grid."""
    kind, sel = selection(name, shape)
    idx = []
    for ax, s in enumerate(sel):
        idx.append(np.arange(shape[ax])[s] if isinstance(s, slice) else np.asarray(s))
    if kind == "vindex":
        ncc = -(-shape[1] // CHUNKS[1])
        touched = len(np.unique((idx[0] // CHUNKS[0]) * ncc + idx[1] // CHUNKS[1]))
        return len(idx[0]) * 2, int(touched)
    touched = len(np.unique(idx[0] // CHUNKS[0])) * len(np.unique(idx[1] // CHUNKS[1]))
    return len(idx[0]) * len(idx[1]) * 2, int(touched)


def split_chunks(data: np.ndarray, chunks: tuple[int, int]) -> list[bytes]:
    out = []
    for i in range(0, data.shape[0], chunks[0]):
        for j in range(0, data.shape[1], chunks[1]):
            out.append(np.ascontiguousarray(data[i : i + chunks[0], j : j + chunks[1]]).tobytes())
    return out


# --------------------------------------------------------------------------
