"""A synchronous write made from inside a running event loop, while an async write
of that same loop holds the chunk it needs, raises DeadlockError instead of
hanging; without such a conflict the same mix of sync and async calls works."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

import cuzarr
from cuzarr.api import asynchronous as ca
from cuzarr.errors import DeadlockError


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    if request.param == "memory":
        return cuzarr.storage.MemoryStore()
    return cuzarr.storage.LocalStore(tmp_path / "s")


def test_conflicting_sync_write_in_a_loop_raises(store):
    async def main():
        a = await ca.create_array(store, shape=(4, 10), chunks=(1, 10), dtype="f8")
        sa = cuzarr.open_array(store, mode="r+")
        sa[1] = 1  # no conflict: fine
        # what an async read-modify-write of chunk 0 holds while it encodes
        async with a.store_path.store.lock_keys(["c/0/0"]):
            with pytest.raises(DeadlockError, match=r"(?i)await the async API"):
                sa[0, :3] = -1  # needs c/0/0: its holder waits for this loop
            sa[2] = 2  # other chunks still write
        sa[0, :3] = -1  # released: fine
        return sa[...]

    # a regression would hang the sync call: the timeout turns that into a failure
    with cuzarr.config.set({"async.timeout": 20}):
        got = asyncio.run(main())
    expected = np.zeros((4, 10))
    expected[0, :3], expected[1], expected[2] = -1, 1, 2
    np.testing.assert_array_equal(got, expected)


_AUDIT_CASE = """
import asyncio, sys
import cuzarr
from cuzarr.api import asynchronous as ca
from cuzarr.errors import DeadlockError

cuzarr.config.set({"threading.max_workers": 8})

async def main():
    s = cuzarr.storage.MemoryStore() if sys.argv[1] == "memory" else cuzarr.storage.LocalStore(sys.argv[2])
    a = await ca.create_array(s, shape=(4, 400, 400), chunks=(1, 400, 400), dtype="f8",
                              compressors=None, overwrite=True)
    sa = cuzarr.open_array(s, mode="r+")

    async def poke():
        for _ in range(300):
            sa[:, :2, :2] = -1  # sync, blocking this loop
            await asyncio.sleep(0)

    await asyncio.gather(poke(), *(a.setitem((slice(None), slice(i, 400 - i)), i)
                                   for i in range(1, 12)))

try:
    asyncio.run(main())
    print("ended: finished")
except DeadlockError:
    print("ended: DeadlockError")
"""


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_the_audit_case_ends(kind, tmp_path):
    """Sync writes from a coroutine racing async writes of the same chunks hung 1
    run in 3 (5 in 5 with 8 workers); now every run ends, with DeadlockError where
    the conflict happens. In a subprocess: a hang fails the test, not the run."""
    for _ in range(3):
        r = subprocess.run(
            [sys.executable, "-c", _AUDIT_CASE, kind, str(tmp_path / "s")],
            capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 0 and "ended:" in r.stdout, r.stderr[-2000:]


def test_sync_and_async_calls_in_one_loop_without_conflict(store):
    async def main():
        a = await ca.create_array(store, shape=(8, 100), chunks=(1, 100), dtype="i4")
        sa = cuzarr.open_array(store, mode="r+")

        async def sync_rows():
            for i in range(4):
                sa[i] = i  # sync writes of rows 0-3 while async writes do rows 4-7
                await asyncio.sleep(0)

        await asyncio.gather(sync_rows(), *(a.setitem(i, i) for i in range(4, 8)))
        return sa[...]

    got = asyncio.run(asyncio.wait_for(main(), 60))
    np.testing.assert_array_equal(got, np.repeat(np.arange(8), 100).reshape(8, 100))


@pytest.mark.parametrize("waiter", ["waiting", "cancelled"])
def test_lock_owner_records_of_multi_run_lockers(tmp_path, waiter):
    """LocalStore takes a batch's locks run by run. A task B that holds the first
    run and waits for the second (held by A) already holds the first ("waiting");
    if B is then cancelled (as gather_or_cancel cancels a sibling batch), A's
    record of the second must stay ("cancelled": B once erased it, and the sync
    call hung)."""
    from cuzarr.storage.local import locks as local

    store = cuzarr.storage.LocalStore(tmp_path / "s")
    keys = ["c/0/0", "c/1/0"]
    k_first, k_second = sorted(keys, key=lambda k: local.lock_runs(store, [k]))
    assert len(local.lock_runs(store, keys)) == 2

    async def main():
        await ca.create_array(store, shape=(4, 10), chunks=(1, 10), dtype="f8")
        sa = cuzarr.open_array(store, mode="r+")
        held = asyncio.Event()

        async def a_holds_second():
            async with store.lock_keys([k_second]):
                held.set()
                await asyncio.sleep(0.5)

        async def b_holds_first_waits_second():
            await held.wait()
            async with store.lock_keys(keys):
                pass

        a = asyncio.create_task(a_holds_second())
        b = asyncio.create_task(b_holds_first_waits_second())
        await asyncio.sleep(0.05)
        if waiter == "cancelled":
            b.cancel()
            await asyncio.gather(b, return_exceptions=True)
        target = k_first if waiter == "waiting" else k_second
        with pytest.raises(DeadlockError):
            sa[int(target.split("/")[1]), :3] = -1
        await asyncio.gather(a, b, return_exceptions=True)

    with cuzarr.config.set({"async.timeout": 20}):
        asyncio.run(main())


def test_no_write_of_a_failed_call_lands_after_it_raised():
    """One failing batch cancels the call's other batches and waits for them."""
    import time

    landed: list[float] = []

    class Flaky(cuzarr.storage.MemoryStore):
        async def set(self, key, value):
            if key == "c/0":
                raise OSError("disk on fire")
            if key.startswith("c/"):
                await asyncio.sleep(0.2)
            await super().set(key, value)
            landed.append(time.monotonic())

    store = Flaky()
    a = cuzarr.create_array(store, shape=(40,), chunks=(1,), dtype="i4")
    landed.clear()
    with pytest.raises(OSError, match="fire"):
        a[...] = 1
    raised = time.monotonic()
    time.sleep(0.5)
    assert all(t <= raised for t in landed), (len(landed), raised)
