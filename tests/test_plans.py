"""The plan drivers (``core.plans``) answering requests with a store's blocking
batch I/O: ``Get(reuse=True)`` of several keys lands the values, in C where
built, in the calling thread's reused buffer (each at a 64-byte boundary) and
answers as ``get_many`` does; a plain read's batches decoded together ask for
them that way."""

from __future__ import annotations

import threading

import numpy as np

import cuzarr
from cuzarr.core import plans
from cuzarr.core.plans import Get, run_inline
from cuzarr.runtime import native
from cuzarr.storage import LocalStore, MemoryStore


def _plan(keys, reuse):
    values = yield Get(keys, reuse=reuse)
    return [None if v is None else bytes(v) for v in values], values


def _store(tmp_path):
    sio = LocalStore(tmp_path).sync_io()
    sio.set_many([(f"k{j}", bytes([j]) * (1000 + 37 * j)) for j in range(9)])
    return sio


def test_reused_get_of_several_keys_answers_as_get_many(tmp_path):
    sio = _store(tmp_path)
    keys = ["k3", "missing", "k0", "k8", "k5"]
    want = sio.get_many(keys)
    got, values = run_inline(_plan(keys, True), sio)
    assert got == [None if w is None else bytes(w) for w in want]
    assert native.available()
    views = [v for v in values if v is not None]
    # in one buffer of this thread's, each value 64-byte aligned
    assert all(np.frombuffer(v, np.uint8).ctypes.data % 64 == 0 for v in views)
    assert np.frombuffer(views[0], np.uint8).ctypes.data % 4096 == 0


def test_reused_get_buffers_are_per_thread(tmp_path):
    sio = _store(tmp_path)
    first = run_inline(_plan(["k1", "k2"], True), sio)[1]
    addr = np.frombuffer(first[0], np.uint8).ctypes.data
    other: list[int] = []

    def read():
        vals = run_inline(_plan(["k1", "k2"], True), sio)[1]
        other.append(np.frombuffer(vals[0], np.uint8).ctypes.data)

    t = threading.Thread(target=read)
    t.start()
    t.join()
    assert other and other[0] != addr
    assert bytes(first[0]) == bytes([1]) * 1037  # untouched by the other thread


def test_stores_without_get_into_answer_reused_gets_with_get_many():
    store = MemoryStore()
    sio = store.sync_io()
    sio.set_many([("a", b"xx"), ("b", b"yyy")])
    assert sio.get_into is None
    assert run_inline(_plan(["a", "c", "b"], True), sio)[0] == [b"xx", None, b"yyy"]


def test_batched_host_reads_ask_for_reused_gets(tmp_path, monkeypatch):
    a = cuzarr.create_array(LocalStore(tmp_path / "a"), shape=(64, 2048), chunks=(1, 2048),
                            dtype="<f4", fill_value=0)
    data = np.random.default_rng(0).standard_normal(a.shape).astype("<f4")
    a[...] = data
    seen: list[tuple[int, bool]] = []
    real = plans._answer_inline

    def spy(req, sio):
        if type(req) is Get:
            seen.append((len(req.keys), req.reuse))
        return real(req, sio)

    monkeypatch.setattr(plans, "_answer_inline", spy)
    np.testing.assert_array_equal(a[...], data)
    assert seen and all(reuse for _, reuse in seen) and max(n for n, _ in seen) > 1
