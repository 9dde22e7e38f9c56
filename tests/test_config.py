"""cuzarr.config: zarr-python's keys, reset(), unknown keys, read_missing_chunks.

zarr-python 3.4 is the oracle: the same settings give the same arrays, layouts
and errors.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarr.errors

import cuzarr
from cuzarr.errors import ChunkNotFoundError, ZarrUserWarning


def test_reset_restores_defaults() -> None:
    before = cuzarr.config.get("async.concurrency")
    cuzarr.config.set({"async.concurrency": before + 7, "array.order": "F"})
    try:
        assert cuzarr.config.get("async.concurrency") == before + 7
    finally:
        cuzarr.config.reset()
    assert cuzarr.config.get("async.concurrency") == before
    assert cuzarr.config.get("array.order") == "C"
    assert cuzarr.config.get("array.read_missing_chunks") is True


@pytest.mark.parametrize(
    "setting",
    [
        {"array.order": "F"},
        {"array.write_empty_chunks": True},
        {"array.read_missing_chunks": False},
        {"async.concurrency": 4, "async.timeout": 30.0},
        {"threading.max_workers": 2},
        {"json_indent": 4},
        {"array": {"order": "F"}},
        {"gpu": {"emulate": False}},
        {"storage.retries": 5},
    ],
)
def test_known_keys_do_not_warn(setting: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with cuzarr.config.set(setting):
            pass
        with cuzarr.config.set(array__order="F"):
            pass


def test_unknown_keys_warn() -> None:
    cases = [
        ({"array.ordr": "F"}, "'array.ordr'"),
        ({"async": {"concurency": 3}}, "'async.concurency'"),
        # zarr-python keys without a counterpart say what to use instead
        ({"array.sharding_coalesce_max_gap_bytes": 1}, "sharding.coalesce_max_gap"),
        ({"codec_pipeline": {"path": "x.Y"}}, "codec pipeline"),
    ]
    for setting, match in cases:
        with pytest.warns(ZarrUserWarning, match=match), cuzarr.config.set(setting):
            pass
    with (
        pytest.warns(ZarrUserWarning, match="'async.concurency'"),
        cuzarr.config.set(async__concurency=3),
    ):
        pass
    assert cuzarr.config.get("array.ordr", None) is None  # the with block undid it


@pytest.mark.parametrize("fmt", [2, 3])
def test_global_order_applies_at_create(tmp_path: Path, fmt: int) -> None:
    data = np.arange(24, dtype="int32").reshape(4, 6)
    with cuzarr.config.set({"array.order": "F"}), zarr.config.set({"array.order": "F"}):
        a = cuzarr.create_array(
            str(tmp_path / "cz"), shape=data.shape, dtype=data.dtype, chunks=(2, 3), zarr_format=fmt
        )
        z = zarr.create_array(
            str(tmp_path / "zp"), shape=data.shape, dtype=data.dtype, chunks=(2, 3), zarr_format=fmt
        )
        a[...] = data
        z[...] = data
        assert a.order == z.order == "F"
        out = a[...]
        assert out.flags.f_contiguous == z[...].flags.f_contiguous
        np.testing.assert_array_equal(out, data)
    if fmt == 2:  # stored in .zarray: the chunk bytes are in Fortran order in both
        cz = json.loads((tmp_path / "cz" / ".zarray").read_text())
        zp = json.loads((tmp_path / "zp" / ".zarray").read_text())
        assert cz["order"] == zp["order"] == "F"
        assert (tmp_path / "cz" / "0.0").read_bytes() == (tmp_path / "zp" / "0.0").read_bytes()
    # an explicit order wins over the global one
    with cuzarr.config.set({"array.order": "F"}):
        b = cuzarr.create_array({}, shape=(4,), dtype="int32", order="C", zarr_format=fmt)
    assert b.order == "C"


def test_global_order_applies_when_a_v3_array_opens(tmp_path: Path) -> None:
    data = np.arange(12.0).reshape(3, 4)
    cuzarr.create_array(str(tmp_path / "a"), data=data, chunks=(2, 2))
    with cuzarr.config.set({"array.order": "F"}), zarr.config.set({"array.order": "F"}):
        a = cuzarr.open_array(str(tmp_path / "a"))
        z = zarr.open_array(str(tmp_path / "a"))
        assert a.order == z.order == "F"
        assert a[...].flags.f_contiguous and z[...].flags.f_contiguous
        np.testing.assert_array_equal(a[...], data)


def test_write_empty_chunks_global_as_zarr_python(tmp_path: Path) -> None:
    for lib in (cuzarr, zarr):
        with lib.config.set({"array.write_empty_chunks": True}):
            a = lib.create_array(str(tmp_path / lib.__name__), shape=(8,), chunks=(2,), dtype="i2")
            a[...] = 0
    names = {
        lib.__name__: sorted(p.name for p in (tmp_path / lib.__name__ / "c").iterdir())
        for lib in (cuzarr, zarr)
    }
    assert names["cuzarr"] == names["zarr"] == ["0", "1", "2", "3"]


def _partly_written(lib, path: Path, **kw):
    a = lib.create_array(str(path), shape=(4, 4), chunks=(2, 2), dtype="int16", fill_value=-1, **kw)
    a[:2, :2] = 7
    return a


def test_read_missing_chunks_per_array_as_zarr_python(tmp_path: Path) -> None:
    cfg = {"read_missing_chunks": False}
    a = _partly_written(cuzarr, tmp_path / "cz", config=cfg)
    z = _partly_written(zarr, tmp_path / "zp", config=cfg)
    assert a.config.read_missing_chunks is z.config.read_missing_chunks is False
    np.testing.assert_array_equal(a[:2, :2], z[:2, :2])  # stored chunks read
    with pytest.raises(zarr.errors.ChunkNotFoundError):
        z[...]
    with pytest.raises(ChunkNotFoundError, match=r"c/1/1") as info:
        a[...]
    assert isinstance(info.value, ValueError)  # as zarr-python's
    with pytest.raises(ChunkNotFoundError):
        a.oindex[[0, 3], :]
    with pytest.raises(ChunkNotFoundError):
        a.lazy[2:, 2:].read()
    # writes into missing chunks still work (read-modify-write fills them)
    a[3, 3] = 1
    assert a[2:, 2:].tolist() == [[-1, -1], [-1, 1]]
    # opened with the setting, and the default again
    b = cuzarr.open_array(str(tmp_path / "zp"), config=cfg)
    with pytest.raises(ChunkNotFoundError):
        b[...]
    assert (
        cuzarr.open_array(str(tmp_path / "zp"))[...].tolist()
        == z.with_config({"read_missing_chunks": True})[...].tolist()
    )
    # with_config and ArrayConfig
    c = b.with_config({"read_missing_chunks": True})
    assert c[3, 3] == -1
    d = cuzarr.open_array(
        str(tmp_path / "zp"), config=cuzarr.ArrayConfig(read_missing_chunks=False)
    )
    with pytest.raises(ChunkNotFoundError):
        d[3, 3]


def test_read_missing_chunks_global(tmp_path: Path) -> None:
    a = _partly_written(cuzarr, tmp_path / "a")
    with cuzarr.config.set({"array.read_missing_chunks": False}):
        with pytest.raises(ChunkNotFoundError):
            a[...]
        np.testing.assert_array_equal(a[:2, :2], 7)
        # an array's own setting wins over the global one
        assert a.with_config({"read_missing_chunks": True})[3, 3] == -1
    assert a[3, 3] == -1


def test_read_missing_chunks_sharded_as_zarr_python(tmp_path: Path) -> None:
    """A missing shard is an error; an inner chunk missing from a stored shard
    reads as the fill value (zarr-python: the setting is about store keys)."""
    cfg = {"read_missing_chunks": False}
    arrays = [
        lib.create_array(
            str(tmp_path / lib.__name__),
            shape=(8, 8),
            chunks=(2, 2),
            shards=(4, 4),
            dtype="int8",
            fill_value=3,
            config=cfg,
        )
        for lib in (cuzarr, zarr)
    ]
    for arr in arrays:
        arr[0, 0] = 1
    a, z = arrays
    np.testing.assert_array_equal(a[:4, :4], z[:4, :4])
    with pytest.raises(zarr.errors.ChunkNotFoundError):
        z[...]
    with pytest.raises(ChunkNotFoundError, match=r"c/\d/\d"):
        a[...]
    with pytest.raises(ChunkNotFoundError):
        a[4:, 4:]


def test_array_config_rejects_bad_values() -> None:
    with pytest.raises(TypeError, match="read_missing_chunks"):
        cuzarr.ArrayConfig(read_missing_chunks="no")
    with pytest.raises(ValueError, match="unknown array config keys"):
        cuzarr.create_array({}, shape=(2,), dtype="i1", config={"read_missing": False})


def test_zarr_python_array_config_objects_accepted(tmp_path: Path) -> None:
    from zarr.core.array_spec import ArrayConfig as ZarrArrayConfig

    cfg = ZarrArrayConfig.from_dict(
        {"order": "F", "write_empty_chunks": True, "read_missing_chunks": False}
    )
    a = cuzarr.create_array(
        str(tmp_path / "a"), shape=(2, 2), chunks=(1, 2), dtype="i1", config=cfg
    )
    assert a.config == cuzarr.ArrayConfig("F", True, False)
    with pytest.raises(ChunkNotFoundError):
        cuzarr.open_array(str(tmp_path / "a"), config=cfg)[...]
    # zarr-python's per-array sharding keys: their defaults pass, others warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuzarr.open_array(str(tmp_path / "a"), config={"sharding_coalesce_max_bytes": 16 << 20})
    with pytest.warns(ZarrUserWarning, match="sharding.coalesce_max_gap"):
        cuzarr.open_array(str(tmp_path / "a"), config={"sharding_coalesce_max_gap_bytes": 1})


def test_setting_reads_what_config_get_reads(monkeypatch) -> None:
    """``config.setting`` (the per-batch lookup) answers as ``config.get`` does:
    defaults, ``config.set`` overrides and their undoing, sections, keys it does
    not know, and boolean words from the environment through ``flag``."""
    from cuzarr.config import config, flag, setting

    for key in ("gpu.read_batch_bytes", "codecs.zstd_system_library", "gpu", "json_indent"):
        assert setting(key) == config.get(key)
    assert setting("gpu.no_such_key", 7) == 7
    assert setting("no_section.x", "d") == "d"
    with config.set({"gpu.read_batch_bytes": 1 << 20, "codecs.zstd_system_library": "off"}):
        assert setting("gpu.read_batch_bytes") == 1 << 20
        assert flag("codecs.zstd_system_library", True) is False
    assert setting("gpu.read_batch_bytes") == 32 << 20
    assert flag("codecs.zstd_system_library", True) is True
