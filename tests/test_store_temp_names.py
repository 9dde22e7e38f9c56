"""Errors of writes that go through temporaries name the user's key and path.

A LocalStore writes each value to ``<dir>/.cuzarr-tmp-<hex>-<name>`` and renames
it into place; a path ZipStore rewrites ``x.zip`` through ``x.zip.cuzarr-tmp``.
When such a write fails, the error says which key (and file, or archive) it was
about, with the same class and errno as the system call's error (chained from
it), and no temporary is left behind. Every failure here is a real one: files
and directories in the way, names too long, read-only directories (skipped as
root), and a full disk simulated with ``RLIMIT_FSIZE`` (which binds root too)
in a child process.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile

import numpy as np
import pytest

import cuzarr
from cuzarr.runtime.sync import sync
from cuzarr.storage import LocalStore, ZipStore
from cuzarr.storage.local import TEMP_PREFIX
from cuzarr.storage.zip import ZipStoreError

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file semantics")
pytestmark = posix_only


def _temps(root) -> list[str]:
    """Temporaries of either store anywhere below ``root``."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        out += [os.path.join(dirpath, n) for n in files + dirs if ".cuzarr-tmp" in n]
    return out


def _check_names_key(e: BaseException, key: str, path: str) -> None:
    assert isinstance(e, OSError), repr(e)
    assert e.filename == path, (e.filename, path)
    assert getattr(e, "filename2", None) is None
    assert repr(key) in str(e), str(e)
    assert TEMP_PREFIX not in str(e), str(e)
    # chained from the system call's own error, same errno
    assert isinstance(e.__cause__, OSError) and e.__cause__.errno == e.errno


def _write(store: LocalStore, how: str, key: str, value: bytes) -> None:
    if how == "set":
        sync(store.set(key, value))
    elif how == "set_if_not_exists":
        sync(store.set_if_not_exists(key, value))
    elif how == "set_many":  # the batched path (more than one item)
        sync(store.set_many([("ok/0", b"fine"), (key, value), ("ok/1", b"fine")]))
    else:  # the engine's synchronous batches
        store.sync_io().set_many([("ok/0", b"fine"), (key, value)])


WAYS = ["set", "set_if_not_exists", "set_many", "sync_io"]


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("key", ["f/0", "f/g/0"])
def test_local_file_in_place_of_a_directory_names_the_key(tmp_path, how, key):
    root = tmp_path / "s.zarr"
    store = LocalStore(root)
    sync(store.set("f", b"a file where a directory is needed"))
    if how in ("set_many", "sync_io"):
        sync(store.set("ok/0", b"fine"))  # the batch's directory is known and safe
    with pytest.raises(NotADirectoryError) as info:
        _write(store, how, key, b"value")
    _check_names_key(info.value, key, str(root / key))
    assert (root / "f").read_bytes() == b"a file where a directory is needed"
    assert _temps(tmp_path) == []


@pytest.mark.parametrize("how", ["set", "set_many", "sync_io"])
def test_local_directory_in_place_of_the_file_names_the_key(tmp_path, how):
    """The rename onto the key's path fails (EISDIR): both the one-key write and
    the batch loop's own rename report the key, not ``tmp -> path``."""
    root = tmp_path / "s.zarr"
    store = LocalStore(root)
    sync(store.set("ok/0", b"fine"))
    os.makedirs(root / "ok" / "1" / "inner")
    (root / "ok" / "1" / "inner" / "keep").write_bytes(b"keep")
    key = "ok/1"
    with pytest.raises(IsADirectoryError) as info:
        if how == "set":
            sync(store.set(key, b"v"))
        elif how == "set_many":
            sync(store.set_many([("ok/0", b"new"), (key, b"v"), ("ok/2", b"w")]))
        else:
            store.sync_io().set_many([("ok/0", b"new"), (key, b"v")])
    _check_names_key(info.value, key, str(root / key))
    assert (root / "ok" / "1" / "inner" / "keep").read_bytes() == b"keep"
    assert _temps(tmp_path) == []


def test_local_array_write_into_a_directory_names_the_chunk(tmp_path):
    """What a user of an array sees: the chunk's key and file."""
    root = tmp_path / "x.zarr"
    a = cuzarr.create_array(LocalStore(root), shape=(8,), chunks=(2,), dtype="i4")
    os.makedirs(root / "c" / "2" / "junk")
    with pytest.raises(IsADirectoryError) as info:
        a[:] = np.arange(8)
    _check_names_key(info.value, "c/2", str(root / "c" / "2"))
    assert _temps(tmp_path) == []


@pytest.mark.parametrize("how", WAYS)
def test_local_long_names_write_and_too_long_names_name_the_key(tmp_path, how):
    """A name of 240 bytes is a valid file name; its temporary's name (about
    45 bytes longer) is not: such keys could not be written at all, and the
    error named the temporary. Now the temporary gets a shorter name. A name
    over 255 bytes fails with ENAMETOOLONG naming the key's own path."""
    root = tmp_path / "s.zarr"
    store = LocalStore(root)
    sync(store.set("ok/0", b"fine"))
    key = "ok/" + "x" * 240
    _write(store, how, key, b"long")
    assert sync(store.get(key)) == b"long"
    assert (root / "ok" / ("x" * 240)).read_bytes() == b"long"
    too_long = "ok/" + "\u00e9" * 200  # 200 characters, 400 bytes in UTF-8
    with pytest.raises(OSError) as info:
        _write(store, how, too_long, b"v")
    assert info.value.errno == errno.ENAMETOOLONG
    _check_names_key(info.value, too_long, str(root / too_long))
    assert _temps(tmp_path) == []


def _as_unprivileged(fn, *args):
    """``fn(*args)`` in a forked child that, when this process is root (which
    writes into read-only directories), first becomes ``nobody``: the error it
    raises, as (class name, errno, filename, filename2, message, cause errno)."""
    import multiprocessing as mp

    def child(conn):
        import cuzarr.runtime.sync as s

        s._pool = None  # the pool's threads did not survive the fork
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            fn(*args)
            conn.send(None)
        except BaseException as e:
            cause = e.__cause__
            conn.send((type(e).__name__, getattr(e, "errno", None), getattr(e, "filename", None),
                       getattr(e, "filename2", None), str(e), getattr(cause, "errno", None)))

    parent, sent = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=child, args=(sent,))
    p.start()
    got = parent.recv()
    p.join(30)
    return got


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("how", WAYS)
def test_local_read_only_directory_names_the_key(how):
    # a world-traversable directory (pytest's is root's own), so that the child
    # reaches the read-only one when it runs as nobody
    base = tempfile.mkdtemp()
    try:
        os.chmod(base, 0o755)
        root = os.path.join(base, "s.zarr")
        store = LocalStore(root)
        sync(store.set("ok/0", b"fine"))
        sync(store.set("ro/0", b"old"))
        os.chmod(root, 0o777)
        os.chmod(os.path.join(root, "ok"), 0o777)
        os.chmod(os.path.join(root, "ro"), 0o555)
        got = _as_unprivileged(_write, LocalStore(root), how, "ro/1", b"v")
        assert got is not None, "the write into a read-only directory passed"
        name, err, filename, filename2, message, cause = got
        assert (name, err, cause) == ("PermissionError", errno.EACCES, errno.EACCES)
        assert filename == os.path.join(root, "ro", "1") and filename2 is None
        assert "'ro/1'" in message and TEMP_PREFIX not in message
        assert sorted(os.listdir(os.path.join(root, "ro"))) == ["0"]
        assert _temps(base) == []
    finally:
        os.chmod(os.path.join(base, "s.zarr", "ro"), 0o755)
        shutil.rmtree(base)


def _run_limited(script: str, *args: str) -> dict:
    """Run ``script`` in a child; ``limit(n)`` there caps the size of files it
    writes at ``n`` bytes (a full disk: writes past it fail with EFBIG),
    ``limit(None)`` lifts the cap. It prints one JSON line, read back here."""
    pytest.importorskip("resource")
    prelude = textwrap.dedent(
        """
        import json, os, resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        _soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)

        def limit(n):
            resource.setrlimit(resource.RLIMIT_FSIZE, (_soft if n is None else n, _hard))

        def describe(e):
            return {"type": type(e).__name__, "errno": e.errno, "filename": e.filename,
                    "msg": str(e), "cause": repr(e.__cause__)}
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_local_full_disk_names_the_key_and_keeps_the_old_value(tmp_path):
    """A write that runs out of room (EFBIG here, as ENOSPC would) said only
    "[Errno 27] File too large", naming no file at all."""
    root = tmp_path / "s.zarr"
    got = _run_limited(
        """
        from cuzarr.runtime.sync import sync
        from cuzarr.storage import LocalStore
        store = LocalStore(sys.argv[1])
        sync(store.set_many([("c/0", b"old0"), ("c/1", b"old1")]))
        out = {}
        limit(4096)
        for how in ("set", "set_many", "sync_io"):
            big = b"x" * 10000
            try:
                if how == "set":
                    sync(store.set("c/0", big))
                elif how == "set_many":
                    sync(store.set_many([("c/1", big), ("c/0", big)]))
                else:
                    store.sync_io().set_many([("c/0", big), ("c/1", big)])
            except OSError as e:
                out[how] = describe(e)
        limit(None)
        print(json.dumps(out))
        """,
        str(root),
    )
    assert set(got) == {"set", "set_many", "sync_io"}, got
    for how, e in got.items():
        key = "c/1" if how == "set_many" else "c/0"
        assert e["type"] == "OSError" and e["errno"] == errno.EFBIG, (how, e)
        assert e["filename"] == str(root / key), (how, e)
        assert repr(key) in e["msg"] and TEMP_PREFIX not in e["msg"], (how, e)
        assert "File too large" in e["cause"], (how, e)
    store = LocalStore(root)
    assert sync(store.get("c/0")) == b"old0" and sync(store.get("c/1")) == b"old1"
    assert sorted(os.listdir(root / "c")) == ["0", "1"]
    assert _temps(tmp_path) == []


# -- ZipStore ---------------------------------------------------------------------


def _zip_archive(path) -> np.ndarray:
    """A closed archive holding an array and a key ``junk`` to delete."""
    data = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    with ZipStore(path, mode="w") as store:
        a = cuzarr.create_array(
            store, shape=data.shape, chunks=(8, 64), dtype="f8", compressors=None
        )
        a[:] = data
        sync(store.set("junk", b"j" * 100))
    return data


def _with_duplicates(path) -> ZipStore:
    """A store over the archive whose close() compacts: chunks written again."""
    store = ZipStore(path, mode="a")
    a = cuzarr.open_array(store)
    a[:8] = a[:8]
    sync(store.set("junk", b"j" * 100))
    return store


def _check_archive(path, data: np.ndarray, before: bytes) -> None:
    assert path.read_bytes() == before  # untouched
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert "zarr.json" in zf.namelist()
    np.testing.assert_array_equal(cuzarr.open_array(ZipStore(path, mode="r"))[:], data)


@pytest.mark.parametrize("how", ["delete", "close"])
def test_zip_rewrite_blocked_by_a_directory_names_the_archive(tmp_path, how):
    path = tmp_path / "a.zip"
    data = _zip_archive(path)
    store = _with_duplicates(path)
    before = path.read_bytes()
    blocker = tmp_path / "a.zip.cuzarr-tmp"
    (blocker / "inner").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as info:
        if how == "delete":
            sync(store.delete("junk"))
        else:
            store.close()
    e = info.value
    assert e.filename == str(path) and ".cuzarr-tmp" not in str(e), str(e)
    assert isinstance(e.__cause__, IsADirectoryError)
    assert blocker.is_dir() and (blocker / "inner").is_dir()  # someone else's: left alone
    _check_archive(path, data, before)
    # a delete that failed hides nothing: the archive still holds the key
    assert sync(store.get("junk")) == b"j" * 100
    blocker.joinpath("inner").rmdir()
    blocker.rmdir()
    sync(store.delete("junk"))  # works once the way is clear
    store.close()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert "junk" not in names and len(names) == len(set(names))
    np.testing.assert_array_equal(cuzarr.open_array(ZipStore(path, mode="r"))[:], data)
    assert _temps(tmp_path) == []


def test_zip_compaction_of_a_damaged_entry_leaves_no_partial_temporary(tmp_path):
    """Compaction fails partway (an entry's bytes no longer match its CRC):
    the partial ``.cuzarr-tmp`` was left behind and the error named neither the
    archive nor what was being done."""
    path = tmp_path / "d.zip"
    data = _zip_archive(path)
    with ZipStore(path, mode="a") as store:
        sync(store.set("zz", b"z" * 50))  # after every chunk
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("zz")
    raw = bytearray(path.read_bytes())
    raw[info.header_offset + 30 + len("zz") + 5] ^= 1  # a byte of its value
    path.write_bytes(bytes(raw))
    before = path.read_bytes()
    store = ZipStore(path, mode="a")
    with pytest.raises(ZipStoreError) as err:
        sync(store.delete("junk"))
    e = err.value
    assert isinstance(e, zipfile.BadZipFile) and isinstance(e.__cause__, zipfile.BadZipFile)
    assert str(path) in str(e) and "'zz'" in str(e) and ".cuzarr-tmp" not in str(e), str(e)
    assert _temps(tmp_path) == []
    assert path.read_bytes() == before
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() == "zz"  # the damage it had, and no other
    np.testing.assert_array_equal(cuzarr.open_array(ZipStore(path, mode="r"))[:], data)


def test_zip_compaction_on_a_full_disk_keeps_the_archive(tmp_path):
    """close() compacts through ``a.zip.cuzarr-tmp``; the disk fills up
    partway through. The partial temporary is removed, the archive is left
    byte for byte as it was, and the error names the archive."""
    path = tmp_path / "a.zip"
    data = _zip_archive(path)
    got = _run_limited(
        """
        import cuzarr
        from cuzarr.runtime.sync import sync
        from cuzarr.storage import ZipStore
        path = sys.argv[1]
        store = ZipStore(path, mode="a")
        a = cuzarr.open_array(store)
        a[:8] = a[:8]  # superseded entries: close() compacts
        sync(store.set("junk", b"j" * 100))
        before = open(path, "rb").read()
        out = {}
        limit(len(before) // 3)
        try:
            store.close()
        except OSError as e:
            out["error"] = describe(e)
        finally:
            limit(None)
        out["same"] = open(path, "rb").read() == before
        print(json.dumps(out))
        os._exit(0)  # no compaction at exit: the parent looks at what was left
        """,
        str(path),
    )
    e = got["error"]
    assert e["type"] == "OSError" and e["errno"] == errno.EFBIG, e
    assert e["filename"] == str(path) and ".cuzarr-tmp" not in e["msg"], e
    assert "File too large" in e["cause"], e
    assert got["same"]
    assert _temps(tmp_path) == []
    _check_archive(path, data, path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert len(names) > len(set(names))  # the superseded entries are still there
    store = ZipStore(path, mode="a")
    sync(store.delete("junk"))  # with room again, it compacts
    store.close()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert "junk" not in names and len(names) == len(set(names))
    np.testing.assert_array_equal(cuzarr.open_array(ZipStore(path, mode="r"))[:], data)


def _torn(path) -> np.ndarray:
    """An archive whose central directory a killed writer tore."""
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    with ZipStore(path, mode="w") as store:
        a = cuzarr.create_array(store, shape=data.shape, chunks=(8, 32), dtype="i4")
        a[:] = data
    with zipfile.ZipFile(path) as zf:
        start_dir = zf.start_dir
    path.write_bytes(path.read_bytes()[: start_dir + 10])
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(path)
    return data


def test_zip_recovery_blocked_by_a_directory_names_the_archive(tmp_path):
    path = tmp_path / "t.zip"
    data = _torn(path)
    before = path.read_bytes()
    (tmp_path / "t.zip.cuzarr-tmp").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        ZipStore(path, mode="a")
    e = info.value
    assert e.filename == str(path) and ".cuzarr-tmp" not in str(e), str(e)
    assert "torn" in str(e)
    assert path.read_bytes() == before
    (tmp_path / "t.zip.cuzarr-tmp").rmdir()
    store = ZipStore(path, mode="a")  # recovers now
    np.testing.assert_array_equal(cuzarr.open_array(store)[:], data)
    store.close()
    assert _temps(tmp_path) == []


def test_zip_recovery_on_a_full_disk_leaves_no_partial_temporary(tmp_path):
    path = tmp_path / "t.zip"
    data = _torn(path)
    before = path.read_bytes()
    got = _run_limited(
        """
        from cuzarr.storage import ZipStore
        path = sys.argv[1]
        limit(os.path.getsize(path) // 3)
        try:
            ZipStore(path, mode="a")
        except OSError as e:
            out = describe(e)
        finally:
            limit(None)
        print(json.dumps(out))
        os._exit(0)
        """,
        str(path),
    )
    assert got["type"] == "OSError" and got["errno"] == errno.EFBIG, got
    assert got["filename"] == str(path) and ".cuzarr-tmp" not in got["msg"], got
    assert _temps(tmp_path) == []
    assert path.read_bytes() == before
    store = ZipStore(path, mode="a")  # with room again, it recovers
    np.testing.assert_array_equal(cuzarr.open_array(store)[:], data)
    store.close()
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
