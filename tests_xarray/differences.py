"""The Zarr test classes of xarray's test_backends.py that run with reads through
cuzarr, and every test among them whose result differs from engine="zarr"'s, each
with its reason. ``cuzarr_reads`` marks the listed tests ``xfail(strict=True)``: a
listed test that starts to pass fails the run, so the list stays exact.

Keys are (test class, or None for every selected class; test name, where ``*``
stands for any text, e.g. in the parameters).
"""

from __future__ import annotations

SELECTED_CLASSES = frozenset(
    {
        "TestZarrDirectoryStore",
        "TestZarrWriteEmpty",
        "TestZarrDictStore",
        "TestZarrNoConsolidatedMetadataSupport",
    }
)

_MASK = (
    "deliberate: cuzarr honours use_zarr_fill_value_as_mask=False (a v2 array's "
    "fill_value is then no _FillValue), which engine='zarr' drops; the test expects "
    "the v2 fill_value as _FillValue regardless (docs/integrations.md)"
)
_MOCKS_ZARR = (
    "inspects zarr-python objects: patches zarr.AsyncArray.getitem (or zarr's "
    "AsyncOIndex/AsyncVIndex) and asserts zarr-python made the reads; cuzarr reads "
    "the same values (the test's own comparison of them is not reached)"
)
_CODEC_OBJECTS = (
    "inspects zarr-python objects: compares encoding['compressors'] with zarr-python "
    "codec instances (zarr.codecs.BloscCodec); cuzarr reports v3 codecs as their "
    "metadata dicts, which to_zarr and zarr-python take alike (docs/integrations.md)"
)

DIFFERENCES: dict[tuple[str | None, str], str] = {
    (None, "test_zarr_fill_value_setting[2-*]"): _MASK,
    ("TestZarrDictStore", "test_async_load_multiple_variables*"): _MOCKS_ZARR,
    ("TestZarrDictStore", "test_concurrent_load_multiple_objects*"): _MOCKS_ZARR,
    ("TestZarrDictStore", "test_indexing[*]"): _MOCKS_ZARR,
    (None, "test_compressor_encoding[3]"): _CODEC_OBJECTS,
}
