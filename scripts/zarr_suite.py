"""Run zarr-python's own test suite with a chosen codec pipeline.

    python scripts/zarr_suite.py [--pipeline cuzarr|default|fused|zarrs] [--subset ci|full]
                                 [--src DIR] [pytest args...]

The tests come from zarr-python's sdist of the installed version (``--src``:
an unpacked sdist; else it is fetched with ``pip download`` into
``$TMPDIR/zarr-src``). ``tests/zarr_suite/cuzarr_pipeline_plugin.py`` sets
``codec_pipeline.path`` for every test. ``--subset ci`` (the default) runs the
array, indexing, codec, sharding and v2 tests in a few minutes on two cores;
``full`` adds zarr's whole ``tests`` folder. With the cuzarr pipeline, the
tests listed in ``tests/zarr_suite/differences.py`` (zarr-python internals,
each explained there) are deselected, and any other failure fails the run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import zarr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zarr_suite"))
from differences import KNOWN  # noqa: E402

SUBSETS = {
    "ci": ["tests/test_indexing.py", "tests/test_codecs", "tests/test_v2.py"],
    "array": ["tests/test_array.py"],
    "full": ["tests"],
}


def zarr_sources(src: str | None) -> Path:
    """An unpacked sdist of the installed zarr-python."""
    if src:
        return Path(src)
    base = Path(tempfile.gettempdir()) / "zarr-src"
    tree = base / f"zarr-{zarr.__version__}"
    if not tree.exists():
        base.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"zarr=={zarr.__version__}",
             "--no-binary", ":all:", "--no-deps", "-d", str(base)],
            check=True,
        )  # fmt: skip
        with tarfile.open(base / f"zarr-{zarr.__version__}.tar.gz") as tar:
            tar.extractall(base, filter="data")
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="cuzarr")
    parser.add_argument("--subset", default="ci", choices=sorted(SUBSETS))
    parser.add_argument("--src")
    args, rest = parser.parse_known_args()
    tree = zarr_sources(args.src)
    env = dict(os.environ, CUZARR_ZARR_PIPELINE=args.pipeline)
    paths = [str(ROOT / "src"), str(ROOT / "tests" / "zarr_suite"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    known: list[str] = []
    if args.pipeline == "cuzarr":
        # the listed differences, each explained there (none for other pipelines)
        known = [f"--deselect={node}" for node in KNOWN]
    cmd = [
        sys.executable, "-m", "pytest", *SUBSETS[args.subset], "-p", "cuzarr_pipeline_plugin",
        "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-o", "log_cli=false", *known, *rest,
    ]  # fmt: skip
    return subprocess.call(cmd, cwd=tree, env=env)


if __name__ == "__main__":
    sys.exit(main())
