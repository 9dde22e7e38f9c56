"""WrapperStore and LoggingStore: every operation reaches the wrapped store; a
subclass that overrides get sees every read; LoggingStore logs and counts calls."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.errors import ReadOnlyError
from cuzarr.runtime.sync import sync
from cuzarr.storage import LocalStore, LoggingStore, MemoryStore, WrapperStore


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(params=["memory", "local"])
def inner(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(tmp_path / "s")


def test_wrapper_round_trip_keeps_fast_paths(inner, tmp_path):
    w = WrapperStore(inner)
    assert w.sync_io() is not None  # a plain wrapper keeps the wrapped store's fast paths
    data = np.arange(600, dtype="i4").reshape(20, 30)
    a = cuzarr.create_array(w, shape=data.shape, chunks=(7, 8), dtype="i4")
    a[...] = data
    a[3:9, 4:25] = -data[3:9, 4:25]
    expected = data.copy()
    expected[3:9, 4:25] *= -1
    np.testing.assert_array_equal(cuzarr.open_array(inner, mode="r")[...], expected)
    np.testing.assert_array_equal(cuzarr.open_array(w, mode="r")[...], expected)
    keys = sorted(sync(_collect(w.list())))
    assert keys == sorted(sync(_collect(inner.list())))
    assert sorted(sync(_collect(w.list_dir("c")))) == sorted(sync(_collect(inner.list_dir("c"))))
    assert sync(w.exists("zarr.json")) and not sync(w.exists("nope"))
    assert sync(w.get("zarr.json", byte_range=cuzarr.storage.RangeByteRequest(0, 1))) == b"{"
    if isinstance(inner, LocalStore):
        # a zarr-python reader of the same directory agrees
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "s"), mode="r")[...], expected)


async def _collect(it):
    return [k async for k in it]


def test_subclass_overriding_get_sees_every_read(inner):
    class Counting(WrapperStore):
        def __init__(self, store):
            super().__init__(store)
            self.keys: list[str] = []

        async def get(self, key, prototype=None, byte_range=None):
            self.keys.append(key)
            return await super().get(key, prototype, byte_range)

    a = cuzarr.create_array(inner, shape=(40, 40), chunks=(10, 10), dtype="u2")
    a[...] = np.arange(1600, dtype="u2").reshape(40, 40)
    c = Counting(inner)
    assert c.sync_io() is None
    b = cuzarr.open_array(c, mode="r")
    c.keys.clear()
    np.testing.assert_array_equal(b[5:25, :], np.arange(1600, dtype="u2").reshape(40, 40)[5:25])
    assert sorted(c.keys) == sorted(f"c/{i}/{j}" for i in range(3) for j in range(4))


def test_sharded_write_through_an_overriding_subclass_gets_bytes(tmp_path):
    seen: list[type] = []

    class Checking(WrapperStore):
        async def set(self, key, value):
            seen.append(type(value))
            await super().set(key, value)

    inner = LocalStore(tmp_path / "sh")
    a = cuzarr.create_array(
        Checking(inner), shape=(256, 256), chunks=(64, 64), shards=(256, 256), dtype="f4"
    )
    data = np.random.default_rng(0).random((256, 256), dtype="f4")
    a[...] = data
    assert seen and all(t in (bytes, bytearray, memoryview) for t in seen), seen
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "sh"), mode="r")[...], data)


def test_read_only_wrappers(inner):
    cuzarr.create_array(inner, shape=(4,), chunks=(2,), dtype="i1")[...] = 1
    ro = WrapperStore(inner).with_read_only(True)
    assert type(ro) is WrapperStore and ro.read_only
    with pytest.raises(ReadOnlyError):
        sync(ro.set("x", b"1"))
    with pytest.raises(ReadOnlyError):
        cuzarr.open_array(ro, mode="r+")[0] = 5
    np.testing.assert_array_equal(cuzarr.open_array(ro, mode="r")[...], [1, 1, 1, 1])
    assert WrapperStore(inner) == WrapperStore(inner)
    assert "wrapping-" in str(WrapperStore(inner))


def test_logging_store_logs_and_counts(inner):
    rec = _Records()
    log = LoggingStore(inner, log_level="INFO", log_handler=rec)
    a = cuzarr.create_array(log, shape=(30, 30), chunks=(10, 10), dtype="f8")
    a[...] = np.ones((30, 30))
    assert log.counter["set"] >= 9 + 1  # 9 chunks and the metadata document
    b = cuzarr.open_array(log, mode="r")  # a read-only copy that logs to the same counter
    log.counter.clear()
    rec.messages.clear()
    np.testing.assert_array_equal(b[:15, :], np.ones((15, 30)))
    chunk_gets = [m for m in rec.messages if m.startswith(" Calling") and ".get(c/" in m]
    assert len(chunk_gets) == 6  # rows 0-1 of chunks x 3 columns
    assert log.counter["get"] == 6
    assert any(m.startswith("Finished") and "[" in m for m in rec.messages)
    assert type(inner).__name__ + ".get(c/0/0)" in " ".join(rec.messages)
    # listings are logged too, and a read-only copy keeps logging
    keys = sync(_collect(log.list_prefix("c/")))
    assert len(keys) == 9 and log.counter["list_prefix"] == 1
    ro = log.with_read_only(True)
    assert isinstance(ro, LoggingStore) and ro.read_only


def test_logging_store_open_constructs_the_wrapped_store(tmp_path):
    s = sync(LoggingStore.open(LocalStore, tmp_path / "o", log_level="WARNING"))
    assert isinstance(s._store, LocalStore) and s.logger.level == logging.WARNING
    cuzarr.create_array(s, shape=(3,), dtype="i2")[...] = 7
    np.testing.assert_array_equal(cuzarr.open_array(str(tmp_path / "o"))[...], [7, 7, 7])


def test_wrapper_refuses_what_is_not_a_store():
    with pytest.raises(TypeError):
        WrapperStore({})  # type: ignore[arg-type]


def test_logging_store_log_takes_zarr_pythons_hint_and_names_the_caller():
    import asyncio

    from cuzarr.storage import LoggingStore, MemoryStore

    class Mine(LoggingStore):
        async def custom(self):
            with self.log("hint"):  # zarr-python's call: the method is the caller's name
                return 1

    s = Mine(MemoryStore(), log_level="WARNING")
    asyncio.run(s.custom())
    asyncio.run(s.set("a", b"1"))
    assert dict(s.counter) == {"custom": 1, "set": 1}
