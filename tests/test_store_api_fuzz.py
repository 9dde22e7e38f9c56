"""Differential fuzzing of cuzarr's stores against zarr-python's ``MemoryStore``.

Random, seeded sequences of store calls (set, set_if_not_exists, delete,
delete_dir, exists, get with whole / ranged / offset / suffix requests -- some
of them zarr-python's own request objects --, get_partial_values, getsize,
getsize_prefix, list, list_prefix, list_dir, is_empty, clear, and writes through
a read-only view) run on a cuzarr store and on zarr-python's in-memory store,
the model. Results must agree (listings order-insensitively); where zarr raises,
cuzarr must raise an instance of the same builtin class, or the class DESIGN.md
names (``ReadOnlyError``, a ``PermissionError``, for writes through a read-only
store, where zarr raises ``ValueError``).

Deliberate differences, documented in docs/storage.md and kept out of the
random part: cuzarr refuses keys with empty, '.' or '..' components, a leading
'/', backslashes or NUL (``StoreKeyError``, a ``ValueError``), where zarr's
``MemoryStore`` takes any string; file-backed stores cannot hold both ``a`` and
``a/b`` (the keys are drawn so that never happens) and list an emptied
directory in ``list_dir``, as zarr's ``LocalStore`` does; zarr's
``MemoryStore.clear`` ignores ``read_only`` (cuzarr refuses, as zarr's
``LocalStore`` does); a byte request with a negative field raises
``ByteRangeError`` in every cuzarr store (zarr's ``MemoryStore`` slices Python-style,
its ``LocalStore`` raises or reads nothing).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import random
import zipfile

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
zs = pytest.importorskip("zarr.storage")
zabc = pytest.importorskip("zarr.abc.store")
from zarr.core.buffer import cpu  # noqa: E402

import cuzarr  # noqa: E402
from cuzarr import errors  # noqa: E402
from cuzarr.storage import (  # noqa: E402
    FsspecStore,
    LocalStore,
    MemoryStore,
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
)
from cuzarr.storage.zip import ZipStore  # noqa: E402

PROTO = cpu.buffer_prototype
KINDS = ["memory", "local", "zip", "fsspec-memory", "fsspec-file"]
# more with CUZARR_STORE_FUZZ_SEQUENCES (e.g. 1500 for a long run)
SEQUENCES = int(os.environ.get("CUZARR_STORE_FUZZ_SEQUENCES", "150"))
OPS_PER_SEQUENCE = 30

# Directory segments and leaf names are disjoint, so no key is ever both a value
# and a directory (a filesystem cannot hold 'a' and 'a/b'); 'c0'/'c00', 'a'/'ab'
# are prefixes of each other as strings.
DIRS = ["a", "ab", "é", "x y", "..d", "d..", "c"]
LEAVES = ["zarr.json", "a.b", "c0", "c00", "日本", "..l", "l..", " s", ".z", "0"]


def run(coro):
    return asyncio.run(coro)


def make_store(kind, tmp_path, name):
    if kind == "memory":
        return MemoryStore()
    if kind == "local":
        return LocalStore(tmp_path / name)
    if kind == "zip":
        return ZipStore(tmp_path / f"{name}.zip", mode="w")
    if kind == "fsspec-memory":
        return FsspecStore.from_url(f"memory://cuzarr-fuzz/{tmp_path.name}/{name}")
    return FsspecStore.from_url(f"file://{tmp_path}/{name}")


def _key(r):
    return "/".join([r.choice(DIRS) for _ in range(r.choice([0, 0, 1, 1, 2]))] + [r.choice(LEAVES)])


def _prefix(r):
    c = r.random()
    if c < 0.15:
        return ""
    k = _key(r)
    if c < 0.5:
        return k + "/"
    if c < 0.8:
        return k
    k = k[: r.randint(0, len(k))]  # a part of a name
    return "" if any(p in (".", "..") for p in k.split("/")) else k


def _range(r):
    """(cuzarr request, zarr request, use zarr's object for cuzarr too)."""
    c = r.randint(0, 3)
    if c == 0:
        return None, None
    if c == 1:
        s = r.randint(0, 12)
        # empty, zero-length and past-the-end ranges; never a negative end
        # (ByteRangeError in every cuzarr store, see test_negative_byte_requests)
        e = max(0, s + r.randint(-2, 12))
        return RangeByteRequest(s, e), zabc.RangeByteRequest(s, e)
    if c == 2:
        o = r.randint(0, 14)
        return OffsetByteRequest(o), zabc.OffsetByteRequest(o)
    s = r.randint(0, 14)
    return SuffixByteRequest(s), zabc.SuffixByteRequest(s)


OPS = (
    ["set"] * 4
    + ["set_if_not_exists", "delete", "delete", "delete_dir", "exists", "get", "get", "get"]
    + ["get_partial_values", "getsize", "getsize_prefix", "list", "list_prefix", "list_dir"]
    + ["is_empty", "clear"]
)
RO_OPS = ["set", "set_if_not_exists", "delete", "delete_dir", "clear", "get", "exists"]
WRITES = {"set", "set_if_not_exists", "delete", "delete_dir", "clear"}


def gen_ops(r, n):
    ops = []
    for _ in range(n):
        name = r.choice(OPS)
        if name == "clear" and r.random() > 0.2:
            name = "get"
        read_only = r.random() < 0.08
        if read_only:
            name = r.choice(RO_OPS)
        value = bytes(r.randrange(256) for _ in range(r.choice([0, 1, 5, 10])))
        ranges = [(_key(r), _range(r)) for _ in range(r.randint(0, 4))]
        ops.append(
            {
                "name": name,
                "read_only": read_only,
                "key": _key(r),
                "value": value,
                "prefix": _prefix(r),
                "range": _range(r),
                "ranges": ranges,
                "zarr_requests": r.random() < 0.5,
            }
        )
    return ops


def _bytes(v):
    if v is None:
        return None
    return v.to_bytes() if hasattr(v, "to_bytes") else bytes(v)


async def apply(store, op, is_cuzarr):
    """Run ``op``; its result, or ("raised", exception)."""
    name = op["name"]
    which = 1 if (not is_cuzarr or op["zarr_requests"]) else 0
    value = op["value"] if is_cuzarr else cpu.Buffer.from_bytes(op["value"])
    if op["read_only"]:
        store = store.with_read_only(True)
        assert store.read_only
    key, prefix = op["key"], op["prefix"]
    try:
        if name == "set":
            return await store.set(key, value)
        if name == "set_if_not_exists":
            return await store.set_if_not_exists(key, value)
        if name == "delete":
            return await store.delete(key)
        if name == "delete_dir":
            return await store.delete_dir(prefix)
        if name == "clear":
            return await store.clear()
        if name == "exists":
            return await store.exists(key)
        if name == "get":
            return _bytes(await store.get(key, PROTO, op["range"][which]))
        if name == "get_partial_values":
            reqs = [(k, rng[which]) for k, rng in op["ranges"]]
            return [_bytes(v) for v in await store.get_partial_values(PROTO, reqs)]
        if name == "getsize":
            return await store.getsize(key)
        if name == "getsize_prefix":
            return await store.getsize_prefix(prefix)
        if name == "list":
            return sorted([k async for k in store.list()])
        if name == "list_prefix":
            return sorted([k async for k in store.list_prefix(prefix)])
        if name == "list_dir":
            return sorted([k async for k in store.list_dir(prefix)])
        if name == "is_empty":
            return await store.is_empty(prefix)
    except Exception as e:  # compared below
        return ("raised", e)
    raise AssertionError(name)


def _raised(r):
    return isinstance(r, tuple) and len(r) == 2 and r[0] == "raised"


async def _empty_dirs_only(model, prefix, extra):
    """Whether every name in ``extra`` is a directory holding no key in the model
    (file-backed stores list a directory their last key was deleted from)."""
    p = prefix.rstrip("/")
    p = p + "/" if p else ""
    keys = [k async for k in model.list()]
    return not any(k == p + n or k.startswith(p + n + "/") for k in keys for n in extra)


async def check_sequence(store, ops, kind):
    model = zs.MemoryStore()
    for i, op in enumerate(ops):
        got = await apply(store, op, True)
        ro_write = op["read_only"] and op["name"] in WRITES
        # zarr's MemoryStore.clear ignores read_only (its LocalStore refuses):
        # the model is not asked, and cuzarr must refuse every write.
        want = ("raised", ValueError()) if ro_write else await apply(model, op, False)
        where = f"{kind} op {i}: {op}"
        if ro_write:
            assert _raised(got) and isinstance(got[1], errors.ReadOnlyError), (where, got)
            continue
        if _raised(want):
            assert _raised(got) and isinstance(got[1], type(want[1])), (where, got, want)
            continue
        assert not _raised(got), (where, got, want)
        if (
            op["name"] == "list_dir"
            and kind in ("local", "fsspec-file")
            and set(want) <= set(got)
            and await _empty_dirs_only(model, op["prefix"], set(got) - set(want))
        ):
            continue
        assert got == want, (where, got, want)


@pytest.mark.parametrize("kind", KINDS)
def test_store_api_differential_fuzz(kind, tmp_path):
    """Seeded random call sequences agree with zarr-python's MemoryStore
    (SEQUENCES x OPS_PER_SEQUENCE calls per store kind)."""
    r = random.Random(f"store-api-fuzz-{kind}")

    async def main():
        for s in range(SEQUENCES):
            store = make_store(kind, tmp_path, f"s{s}")
            try:
                await check_sequence(store, gen_ops(r, OPS_PER_SEQUENCE), kind)
            finally:
                store.close()

    run(main())


# --------------------------------------------------------------------------------------
# Regressions found by the fuzzer


@pytest.mark.parametrize("kind", KINDS)
def test_zarr_byte_request_objects_accepted(kind, tmp_path):
    """zarr-python's RangeByteRequest / OffsetByteRequest / SuffixByteRequest work
    with every cuzarr store, in get and get_partial_values (they raised
    TypeError: unsupported byte range)."""
    store = make_store(kind, tmp_path, "s")

    async def main():
        await store.set("k", b"0123456789")
        reqs = [
            (zabc.RangeByteRequest(2, 5), b"234"),
            (zabc.RangeByteRequest(8, 20), b"89"),
            (zabc.RangeByteRequest(5, 5), b""),
            (zabc.OffsetByteRequest(7), b"789"),
            (zabc.OffsetByteRequest(12), b""),
            (zabc.SuffixByteRequest(3), b"789"),
            (zabc.SuffixByteRequest(0), b""),
            (zabc.SuffixByteRequest(30), b"0123456789"),
        ]
        for req, want in reqs:
            assert _bytes(await store.get("k", None, req)) == want, req
        got = await store.get_partial_values(
            None, [("k", r) for r, _ in reqs] + [("no", reqs[0][0])]
        )
        assert [_bytes(v) for v in got] == [w for _, w in reqs] + [None]
        assert isinstance(zabc.RangeByteRequest(1, 2), RangeByteRequest)
        assert not isinstance(zabc.RangeByteRequest(1, 2), OffsetByteRequest)
        assert not isinstance(OffsetByteRequest(1), SuffixByteRequest)

    try:
        run(main())
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_suffix_request_longer_than_value(kind, tmp_path):
    """A suffix longer than the value is the whole value (MemoryStore returned
    the last len(value) - suffix bytes: data[-2:] for a 12-byte suffix of 10)."""
    store = make_store(kind, tmp_path, "s")

    async def main():
        await store.set("k", b"0123456789")
        assert await store.get("k", None, SuffixByteRequest(12)) == b"0123456789"
        assert await store.get("k", None, SuffixByteRequest(10)) == b"0123456789"
        got = await store.get_partial_values(None, [("k", SuffixByteRequest(25))])
        assert got == [b"0123456789"]

    try:
        run(main())
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_is_empty_and_getsize_prefix_take_directories(kind, tmp_path):
    """A prefix without a trailing '/' names a directory, as in zarr-python:
    is_empty('a') ignores 'ab' and getsize_prefix('a') does not count 'ab'
    (both counted every key starting with the string)."""
    store = make_store(kind, tmp_path, "s")

    async def main():
        await store.set("ab", b"123")
        await store.set("a0/x", b"1")
        assert await store.is_empty("a")
        assert await store.is_empty("a/")
        assert not await store.is_empty("")
        assert not await store.is_empty("a0")
        assert await store.getsize_prefix("a") == 0
        assert await store.getsize_prefix("a0") == 1
        assert await store.getsize_prefix("a0/") == 1
        assert await store.getsize_prefix("") == 4
        z = zs.MemoryStore()
        await z.set("ab", cpu.Buffer.from_bytes(b"123"))
        assert await z.is_empty("a") and await z.getsize_prefix("a") == 0

    try:
        run(main())
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_set_if_not_exists_refused_on_read_only_store(kind, tmp_path):
    """set_if_not_exists through a read-only store raises ReadOnlyError even when
    the key exists (it returned silently then, as if it had been allowed)."""
    store = make_store(kind, tmp_path, "s")

    async def main():
        await store.set("k", b"1")
        ro = store.with_read_only(True)
        with pytest.raises(errors.ReadOnlyError):
            await ro.set_if_not_exists("k", b"2")
        with pytest.raises(errors.ReadOnlyError):
            await ro.set_if_not_exists("new", b"2")
        assert await store.get("k") == b"1"
        assert not await store.exists("new")

    try:
        run(main())
    finally:
        store.close()


def test_fsspec_file_empty_range_is_empty(tmp_path):
    """A range that ends before it starts reads b'' over file:// (fsspec's local
    filesystem raised 'read length must be non-negative', reported as a
    RemoteStoreError), as it does in every other store."""
    store = FsspecStore.from_url(f"file://{tmp_path}/s")

    async def main():
        await store.set("k", b"0123456789")
        assert await store.get("k", None, RangeByteRequest(6, 4)) == b""
        assert await store.get("k", None, RangeByteRequest(4, 4)) == b""
        got = await store.get_partial_values(
            None, [("k", RangeByteRequest(6, 4)), ("k", RangeByteRequest(1, 3)), ("no", None)]
        )
        assert got == [b"", b"12", None]
        assert await store.get("missing", None, RangeByteRequest(6, 4)) is None

    run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_stores_are_context_managers_and_open(kind, tmp_path):
    """Every store works in a ``with`` block and through ``await Store.open(...)``,
    as zarr-python's do (only ZipStore was a context manager)."""
    store = make_store(kind, tmp_path, "s")
    with store as s:
        assert s is store
        run(s.set("k", b"v"))
    assert run(store.get("k")) == b"v"  # usable again after close, as in zarr

    opened = run(MemoryStore.open(read_only=True))
    assert isinstance(opened, MemoryStore) and opened.read_only
    local = run(LocalStore.open(tmp_path / "opened"))
    assert isinstance(local, LocalStore) and not local.read_only


# --------------------------------------------------------------------------------------
# Guards: behaviour that already agreed, or differs on purpose (docs/storage.md)

BAD_KEYS = ["/a", "a/", "a//b", "../x", "a/../b", "./a", "a/.", "", "a\\b", "a\x00b", "..", "."]


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_keys_refused_never_outside_root(kind, tmp_path):
    store = make_store(kind, tmp_path / "root", "s")
    (tmp_path / "root").mkdir(exist_ok=True)
    (tmp_path / "x").write_bytes(b"outside")

    async def main():
        for key in BAD_KEYS:
            for write in (store.set, store.set_if_not_exists):
                with pytest.raises(errors.StoreKeyError):
                    await write(key, b"v")
            # reads of such a key either refuse (ValueError) or find nothing
            for read in (store.get, store.exists):
                try:
                    got = await read(key)
                except ValueError:
                    continue
                assert got in (None, False), (key, got)
        assert [k async for k in store.list()] == []

    try:
        run(main())
    finally:
        store.close()
    assert (tmp_path / "x").read_bytes() == b"outside"


@pytest.mark.parametrize("kind", ["local", "zip", "fsspec-file"])
def test_pickle_and_equality(kind, tmp_path):
    store = make_store(kind, tmp_path, "s")
    run(store.set("a/b", b"xy"))
    other = pickle.loads(pickle.dumps(store))
    assert other == store
    assert run(other.get("a/b")) == b"xy"
    ro = store.with_read_only(True)
    assert ro.read_only and not store.read_only
    assert ro == store  # equality is the data's location, not the flag
    store.close()


def test_memory_store_equality_is_the_mapping():
    d = {}
    a, b = MemoryStore(d), MemoryStore(d)
    assert a == b and a == a.with_read_only(True)
    assert MemoryStore() != MemoryStore()  # zarr compares contents: documented
    c = pickle.loads(pickle.dumps(a))
    assert c != a and c._store_dict == a._store_dict


def test_zip_archives_interoperate_with_zarr(tmp_path):
    path = tmp_path / "c.zip"

    async def main():
        with ZipStore(path, mode="w") as c:
            await c.set("k", b"1")
            await c.set("k", b"2")
        z = zs.ZipStore(path, mode="r")
        assert (await z.get("k", PROTO)).to_bytes() == b"2"
        z.close()
        with zipfile.ZipFile(path) as zf:
            assert zf.namelist() == ["k"]

    run(main())


def test_objects_that_are_no_store_are_refused_clearly():
    """Something that is no store of either library (nor a path, URL or mapping)
    is a TypeError naming its type, not a wrong result. (zarr-python's stores are
    driven through ZarrPythonStore: tests/test_store_zarr_python.py.)"""

    class NotAStore:
        pass

    with pytest.raises(TypeError, match="NotAStore"):
        cuzarr.create_array(NotAStore(), shape=(4,), dtype="i4")
    assert isinstance(cuzarr.create_array(zs.MemoryStore(), shape=(4,), dtype="i4").store,
                      cuzarr.storage.ZarrPythonStore)


class RecordingMemoryStore(MemoryStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = []

    async def get(self, key, prototype=None, byte_range=None):
        self.reads.append((key, byte_range))
        return await super().get(key, prototype, byte_range)


def test_subclass_overriding_get_sees_sharded_reads():
    store = RecordingMemoryStore()
    a = cuzarr.create_array(store, shape=(16,), dtype="i4", chunks=(2,), shards=(8,))
    a[:] = np.arange(16)
    b = cuzarr.open_array(store, mode="r")
    store.reads.clear()
    assert b[3] == 3
    chunk_reads = [(k, r) for k, r in store.reads if k.startswith("c/")]
    assert chunk_reads and all(r is not None for _, r in chunk_reads)  # index + inner chunk
    store.reads.clear()
    np.testing.assert_array_equal(b[:], np.arange(16))
    assert {k for k, _ in store.reads} == {"c/0", "c/1"}
    stored = dict(store._store_dict)
    store.reads.clear()
    a2 = cuzarr.open_array(store, mode="r+")
    a2[5] = -1  # a partial write reads the shard through get
    assert any(k == "c/0" for k, _ in store.reads)
    assert stored["c/1"] == store._store_dict["c/1"]


@pytest.mark.parametrize("kind", KINDS)
def test_negative_byte_requests_are_refused_alike(tmp_path, kind):
    """Stores had answered ``RangeByteRequest(0, -1)`` differently (Python slicing
    in memory, nothing from files, archives and fsspec): now every one refuses a
    negative field, through ``get`` and ``get_partial_values`` alike."""
    from cuzarr.errors import ByteRangeError

    store = make_store(kind, tmp_path, "neg")

    async def main():
        await store.set("k", b"0123456789")
        for req in (
            RangeByteRequest(0, -1),
            RangeByteRequest(-3, 4),
            OffsetByteRequest(-2),
            SuffixByteRequest(-1),
            zabc.RangeByteRequest(0, -2),
        ):
            with pytest.raises(ByteRangeError, match="offsets, ends and lengths are >= 0"):
                await store.get("k", None, req)
            with pytest.raises(ValueError):
                await store.get_partial_values(None, [("k", None), ("k", req)])
        # an end at or before the start is just empty, everywhere
        assert await store.get("k", None, RangeByteRequest(6, 4)) == b""
        assert await store.get("k", None, RangeByteRequest(0, 0)) == b""

    try:
        run(main())
    finally:
        store.close()
