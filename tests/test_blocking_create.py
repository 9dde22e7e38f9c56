"""Creating arrays and groups through the sync API runs in the calling thread
on stores with blocking I/O (memory, local files), with the same result as on
cuzarr's event loop; other stores and overwrites still take the loop."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import zarr

import cuzarr
from cuzarr.api import asynchronous as ca
from cuzarr.errors import ContainsArrayError, ContainsGroupError, ReadOnlyError
from cuzarr.runtime import sync as sync_mod
from cuzarr.storage import LocalStore, MemoryStore


class _LoopHeld:
    """Keeps cuzarr's event loop busy until released: a call that needs the loop
    cannot finish meanwhile."""

    def __enter__(self) -> _LoopHeld:
        self.release = threading.Event()
        started = threading.Event()

        async def hold() -> None:
            started.set()
            self.release.wait(30)  # blocks the loop thread itself

        self.fut = asyncio.run_coroutine_threadsafe(hold(), sync_mod.get_loop())
        assert started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.fut.result(10)


def _in_thread_with_timeout(fn, timeout=5.0):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    return out


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else LocalStore(tmp_path / "s")


def test_create_array_and_group_need_no_event_loop(store):
    with _LoopHeld():
        done = _in_thread_with_timeout(
            lambda: (
                cuzarr.create_array(store, name="g/a", shape=(4, 6), chunks=(2, 3), dtype="i2"),
                cuzarr.create_group(store, path="h/i", attributes={"x": 1}),
            )
        )
        assert done, "create_array/create_group waited on the event loop"
        a, h = done[0]
        g = cuzarr.open_group(store, path="g", mode="r")
        done2 = _in_thread_with_timeout(
            lambda: (cuzarr.open_group(store, path="g").create_array(
                "b", shape=(3,), chunks=(2,), dtype="f4"
            ), cuzarr.open_group(store, path="g").create_group("sub"))
        )
        assert done2, "Group.create_array/create_group waited on the event loop"
    assert a.shape == (4, 6) and h.attrs["x"] == 1
    assert sorted(g.keys()) == ["a", "b", "sub"]
    # zarr-python reads what was written, implied parents included
    z = zarr.open_group(_zarr_store(store), mode="r")
    assert sorted(z["g"].keys()) == ["a", "b", "sub"]
    assert dict(z["h/i"].attrs) == {"x": 1}
    assert z["g/a"].shape == (4, 6) and z["g/a"].dtype == np.int16


def _zarr_store(store):
    if isinstance(store, LocalStore):
        return str(store.root)
    from zarr.core.buffer import cpu

    return zarr.storage.MemoryStore(
        {k: cpu.Buffer.from_bytes(bytes(v)) for k, v in store._store_dict.items()}
    )


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_documents_equal_those_written_on_the_loop(zarr_format):
    inline, looped = MemoryStore(), MemoryStore()
    kw = dict(shape=(5, 7), chunks=(2, 4), dtype="u2", zarr_format=zarr_format,
              attributes={"units": "µm"}, fill_value=3)
    cuzarr.create_array(inline, name="p/q/a", **kw)
    cuzarr.runtime.sync.sync(ca.create_array(looped, name="p/q/a", **kw))
    cuzarr.create_group(inline, path="p/r", zarr_format=zarr_format, attributes={"k": [1]})
    cuzarr.runtime.sync.sync(
        ca.create_group(looped, path="p/r", zarr_format=zarr_format, attributes={"k": [1]})
    )
    assert inline._store_dict == looped._store_dict


def test_errors_are_the_loops(store):
    cuzarr.create_array(store, name="a", shape=(3,), dtype="i4")
    cuzarr.create_group(store, path="g")
    with pytest.raises(ContainsArrayError, match=repr(store).replace("(", r"\(")[:20]):
        cuzarr.create_array(store, name="a", shape=(3,), dtype="i4")
    with pytest.raises(ContainsGroupError):
        cuzarr.create_group(store, path="g")
    with pytest.raises(ContainsArrayError):  # nothing inside an array
        cuzarr.create_group(store, path="a/x")
    ro = store.with_read_only(True)
    with pytest.raises(ReadOnlyError):
        cuzarr.create_array(ro, name="b", shape=(3,), dtype="i4")
    with pytest.raises(ValueError, match="dtype"):
        cuzarr.create_array(store, name="c", shape=(3,))
    # nothing was left behind by the refused calls
    assert sorted(cuzarr.open_group(store, mode="r").keys()) == ["a", "g"]


def test_overwrite_and_data_take_the_loop_and_work(store):
    a = cuzarr.create_array(store, name="a", shape=(3,), dtype="i4")
    a[...] = [1, 2, 3]
    b = cuzarr.create_array(store, name="a", shape=(2,), dtype="f8", overwrite=True)
    assert b.shape == (2,) and b.dtype == np.float64
    assert b.nchunks_initialized == 0  # the old chunks went with the old array
    c = cuzarr.create_array(store, name="d", data=np.arange(10, dtype="i8"), chunks=(4,))
    np.testing.assert_array_equal(c[...], np.arange(10))
    g = cuzarr.create_group(store, path="g")
    g.create_array("x", data=np.ones(3))
    g2 = cuzarr.open_group(store, path="g").create_group("x", overwrite=True)
    assert g2.attrs.asdict() == {}
    assert list(cuzarr.open_group(store, path="g").group_keys()) == ["x"]


class _OverridingStore(MemoryStore):
    """A store whose ``get`` is its own: it has no blocking I/O to use."""

    calls = 0

    async def get(self, key, prototype=None, byte_range=None):
        type(self).calls += 1
        return await super().get(key, prototype, byte_range)


def test_store_without_blocking_io_still_sees_every_call():
    st = _OverridingStore()
    cuzarr.create_array(st, name="a/b", shape=(3,), dtype="i4")
    assert _OverridingStore.calls > 0
    assert cuzarr.open_array(st, path="a/b", mode="r").shape == (3,)


def test_concurrent_creates_from_threads(tmp_path):
    st = LocalStore(tmp_path / "t")
    errors: list = []

    def make(i: int) -> None:
        try:
            for k in range(20):
                cuzarr.create_array(st, name=f"t{i}/a{k}", shape=(k + 1,), dtype="i4")
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    z = zarr.open_group(str(tmp_path / "t"), mode="r")
    assert sorted(z.group_keys()) == ["t0", "t1", "t2", "t3"]
    assert all(z[f"t{i}/a{k}"].shape == (k + 1,) for i in range(4) for k in range(20))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attribute_updates_need_no_event_loop(store, zarr_format):
    a = cuzarr.create_array(store, name="g/a", shape=(3,), dtype="i4", zarr_format=zarr_format)
    g = cuzarr.open_group(store, path="g", zarr_format=zarr_format)
    cuzarr.consolidate_metadata(store, path="g")
    gc = cuzarr.open_group(store, path="g", use_consolidated=True)
    with _LoopHeld():
        done = _in_thread_with_timeout(
            lambda: (
                a.attrs.update({"units": "µm", "n": 1}),
                a.update_attributes({"m": [1, 2]}),
                g.attrs.__setitem__("title", "x"),
                gc.update_attributes({"c": True}),
                a.attrs.__delitem__("n"),
            )
        )
        assert done, "attribute updates waited on the event loop"
    z = zarr.open_group(_zarr_store(store), path="g", mode="r", use_consolidated=False)
    assert dict(z["a"].attrs) == {"units": "µm", "m": [1, 2]}
    assert dict(z.attrs) == {"c": True}  # gc replaced what g wrote: its own view
    if zarr_format == 2:  # the group's own entry in .zmetadata follows
        zc = zarr.open_group(_zarr_store(store), path="g", mode="r", use_consolidated=True)
        assert dict(zc.attrs) == {"c": True}
    with pytest.raises(ReadOnlyError):
        cuzarr.open_array(store, path="g/a", mode="r").attrs["x"] = 1
    with pytest.raises(ValueError):  # NaN is refused before anything is written
        a.attrs["bad"] = float("nan")
    assert cuzarr.open_array(store, path="g/a").attrs.asdict() == {"units": "µm", "m": [1, 2]}


class _SetCountingStore(MemoryStore):
    sets: list = []

    async def set(self, key, value, byte_range=None):
        type(self).sets.append(key)
        return await super().set(key, value, byte_range)


def test_attribute_update_through_a_store_with_its_own_set():
    st = _SetCountingStore()
    a = cuzarr.create_array(st, name="a", shape=(3,), dtype="i4")
    _SetCountingStore.sets.clear()
    a.attrs["k"] = 1
    assert _SetCountingStore.sets == ["a/zarr.json"]
    assert cuzarr.open_array(st, path="a").attrs["k"] == 1


def test_require_group_and_array_need_no_event_loop(store):
    root = cuzarr.create_group(store)
    root.create_group("old").create_array("x", shape=(4,), dtype="i2")
    cuzarr.consolidate_metadata(store)
    cons = cuzarr.open_group(store, use_consolidated=True)
    with _LoopHeld():
        done = _in_thread_with_timeout(
            lambda: (
                root.require_group("old"),
                root.require_group("new"),
                cons.require_group("new2"),
                root.require_group("old").require_array("x", shape=(4,), dtype="i2"),
                root.require_array("made", shape=(3,), dtype="f4"),
            )
        )
        assert done, "require_group/require_array waited on the event loop"
    old, new, new2, x, made = done[0]
    assert old.path == "old" and new.path == "new" and new2.path == "new2"
    assert x.shape == (4,) and made.dtype == np.float32
    assert sorted(cuzarr.open_group(store, use_consolidated=False).keys()) == [
        "made", "new", "new2", "old",
    ]
    with pytest.raises(TypeError, match="shape"):
        root.require_array("made", shape=(5,), dtype="f4")
    with pytest.raises(TypeError):  # an array is in the way
        root.require_group("made")
    with pytest.raises(TypeError):  # a group is in the way
        root.require_array("new", shape=(3,), dtype="f4")
