"""Creating nodes in the calling thread (``core/blocking.run_blocking``) behaves as
the loop did: an operation that goes on on the loop is made once (its arguments
used once), store subclasses that override a batch method see every metadata
call, and the thread checks hold."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

import cuzarr
from cuzarr.core import create as create_mod
from cuzarr.runtime import sync as sync_mod
from cuzarr.storage import LocalStore, MemoryStore, WrapperStore


class _NoBlockingIO(MemoryStore):
    """Overrides ``get``: no blocking I/O, every create goes to the loop."""

    async def get(self, key, prototype=None, byte_range=None):
        return await super().get(key, prototype, byte_range)


def _stores(tmp_path):
    return [MemoryStore(), LocalStore(tmp_path / "l"), _NoBlockingIO()]


@pytest.mark.parametrize("overwrite", [False, True])
def test_iterator_arguments_are_used_once(tmp_path, overwrite):
    # An overwrite (or a store without blocking I/O) goes on on the loop: the
    # coroutine made for the calling thread must be the one that goes on, not a
    # second one over exhausted iterators (a 0-d array, attributes dropped).
    for store in _stores(tmp_path):
        a = cuzarr.create_array(
            store, name="a", shape=iter([2, 3]), chunks=iter([1, 3]), dtype="i4",
            dimension_names=iter(["y", "x"]), attributes=iter([("k", 1)]),
            overwrite=overwrite,
        )
        assert a.shape == (2, 3) and a.chunks == (1, 3)
        assert a.metadata.dimension_names == ("y", "x") and dict(a.attrs) == {"k": 1}
        g = cuzarr.create_group(store, path="g", attributes=iter([("a", 2)]),
                                overwrite=overwrite)
        assert dict(g.attrs) == {"a": 2}
        b = g.create_array("b", shape=iter([4]), dtype="f4",
                           dimension_names=iter(["t"]), overwrite=overwrite)
        assert b.shape == (4,) and b.metadata.dimension_names == ("t",)
        h = g.create_group("h", attributes=iter([("z", 0)]), overwrite=overwrite)
        assert dict(h.attrs) == {"z": 0}
        again = cuzarr.open_array(store, path="g/b", mode="r")
        assert again.shape == (4,)


def test_metadata_is_built_once_when_going_to_the_loop(monkeypatch):
    calls = []
    real = create_mod.build_array_metadata

    def counting(**kw):
        calls.append(1)
        return real(**kw)

    monkeypatch.setattr(create_mod, "build_array_metadata", counting)
    store = MemoryStore()
    cuzarr.create_array(store, name="a", shape=(3,), dtype="i4")
    cuzarr.create_array(store, name="a", shape=(3,), dtype="i4", overwrite=True)
    cuzarr.create_array(_NoBlockingIO(), name="a", shape=(3,), dtype="i4")
    assert len(calls) == 3


def _counting(base):
    class Counting(base):
        seen: list = []

        async def set_many(self, items):
            type(self).seen.extend(k for k, _ in items)
            await super().set_many(items)

        async def get_partial_values(self, prototype, key_ranges):
            key_ranges = list(key_ranges)
            type(self).seen.extend(k for k, _ in key_ranges)
            return await super().get_partial_values(prototype, key_ranges)

        async def get_many(self, keys, prototype=None):
            type(self).seen.extend(keys)
            return await super().get_many(keys, prototype)

    Counting.seen = []
    return Counting


@pytest.mark.parametrize("kind", ["memory", "local", "wrapped-memory", "wrapped-local"])
def test_subclasses_overriding_batch_methods_see_metadata_calls(tmp_path, kind):
    # sync_io() only looks at get/set/delete; before the calling-thread path, the
    # metadata of a new node went through the store's async get_many/set_many
    base = MemoryStore if "memory" in kind else LocalStore
    cls = _counting(base)
    store = cls() if base is MemoryStore else cls(tmp_path / "s")
    if kind.startswith("wrapped"):
        store = WrapperStore(store)
    cuzarr.create_array(store, name="p/a", shape=(3,), dtype="i4")
    cuzarr.create_group(store, path="p/g")
    assert "p/a/zarr.json" in cls.seen and "p/g/zarr.json" in cls.seen
    assert cuzarr.open_array(store, path="p/a", mode="r").shape == (3,)


class _WrapperWithOwnSetMany(WrapperStore):
    seen: list = []

    async def set_many(self, items):
        type(self).seen.extend(k for k, _ in items)
        await super().set_many(items)


def test_wrapper_overriding_set_many_sees_metadata_writes():
    _WrapperWithOwnSetMany.seen = []
    store = _WrapperWithOwnSetMany(MemoryStore())
    cuzarr.create_group(store, path="x/y")
    assert "x/y/zarr.json" in _WrapperWithOwnSetMany.seen


def test_plain_stores_still_create_in_the_calling_thread(tmp_path):
    from cuzarr.core import blocking

    for store in (MemoryStore(), LocalStore(tmp_path / "p"), WrapperStore(MemoryStore())):
        assert blocking._facade_sio(store) is not None
    assert blocking._facade_sio(_NoBlockingIO()) is None


def test_from_a_thread_running_its_own_loop():
    async def main():
        s = MemoryStore()
        a = cuzarr.create_array(s, name="x/a", shape=(3,), dtype="i4")
        g = cuzarr.create_group(s, path="g")
        b = g.create_array("b", shape=(2,), dtype="f4", overwrite=True)
        c = cuzarr.create_array(_NoBlockingIO(), name="c", shape=(2,), dtype="u1")
        a[:] = 7
        return a[...], b.shape, c.shape

    got, bshape, cshape = asyncio.run(main())
    np.testing.assert_array_equal(got, 7)
    assert bshape == (2,) and cshape == (2,)


def test_from_cuzarrs_own_loop_raises_as_before():
    async def inside():
        out = []
        for call in (
            lambda: cuzarr.create_array(MemoryStore(), shape=(3,), dtype="i4"),
            lambda: cuzarr.create_group(MemoryStore()),
        ):
            try:
                call()
            except RuntimeError as e:
                out.append(str(e))
        return out

    fut = asyncio.run_coroutine_threadsafe(inside(), sync_mod.get_loop())
    msgs = fut.result(10)
    assert len(msgs) == 2 and all("own event loop" in m for m in msgs)


def test_errors_after_going_to_the_loop_are_the_loops():
    from cuzarr.errors import ContainsArrayError, ReadOnlyError

    st = _NoBlockingIO()
    cuzarr.create_array(st, name="a", shape=(3,), dtype="i4")
    with pytest.raises(ContainsArrayError, match="already exists"):
        cuzarr.create_array(st, name="a", shape=(3,), dtype="i4")
    with pytest.raises(ContainsArrayError, match="inside the array"):
        cuzarr.create_group(st, path="a/b")
    with pytest.raises(ReadOnlyError):
        cuzarr.create_group(st.with_read_only(True), path="z")


_FORK_WITH_LOCK_HELD = """
import os, sys, threading
import cuzarr
from cuzarr.runtime import tasks

cuzarr.create_array({}, name="x", shape=(4,), dtype="i4")  # the parent's pools run
tasks._io_pool_lock.acquire()  # as the loop thread holds it in every in_thread call
pid = os.fork()
if pid == 0:
    a = cuzarr.create_array(sys.argv[1], name="a", shape=(4,), dtype="i4")
    a[...] = 3
    print("child", int(cuzarr.open_array(sys.argv[1], path="a")[...].sum()), flush=True)
    os._exit(0)
tasks._io_pool_lock.release()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_forked_child_does_not_wait_on_the_parents_pool_lock(tmp_path):
    """A child forked while a parent thread held the store-I/O pool's lock makes
    its own lock: its first cuzarr call does not hang."""
    import subprocess

    p = subprocess.run(
        [sys.executable, "-c", _FORK_WITH_LOCK_HELD, str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "child 12" in p.stdout
