"""Reads into device memory: the engine's batches handed to an executor.

The chunk engine (``core/engine.py``, ``core/shards.py``) fetches a batch of
chunks and calls a *batch decoder* with the items and their stored bytes. For a
device output that decoder is a :class:`DeviceReader`: it parses the bytes into
raw streams on the host (``batch.prepare_batch``), then one executor call
decodes them all and scatters the batch into the output (``GpuExecutor`` on a
GPU; :class:`~cuzarr.gpu.executor.HostExecutor`, its numpy twin, when
``cuzarr.config`` key ``gpu.emulate`` is set on a machine without one).
Selections with integer arrays are decoded on the host and assigned per chunk
(``scatter_fancy``).

Which chunks the GPU decodes follows from the codec pipeline
(:func:`device_codec`): a plain ``bytes`` codec (any endianness) with at most one
compressor that nvCOMP handles (zstd, lz4, zlib, gzip, blosc-lz4/zstd), v2 arrays
without filters in either memory order. Anything else (filters, transpose,
crc32c, sharding inside sharding, other compressors) is decoded on the host and
uploaded with the batch: same result, one host-to-device copy per batch.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from cuzarr.buffer.gpu import import_cupy
from cuzarr.codecs import libzstd
from cuzarr.codecs.pipeline import V2Pipeline, V3Pipeline
from cuzarr.config import config, flag
from cuzarr.errors import CodecError, keyed
from cuzarr.gpu.dispatch import emulating
from cuzarr.gpu.executor import (
    GpuExecutor,
    HostExecutor,
    lease,
    leased,
    place_chunks,
    prepare_batch,
    stream_kind,
    unlease,
)
from cuzarr.gpu.plan import is_slice_only, plan_read
from cuzarr.gpu.staging import host_staging, pinned_staging
from cuzarr.runtime import native

__all__ = [
    "DeviceReader",
    "decode_route",
    "device_codec",
    "direct_reads",
    "emulating",
    "nvcomp_missing",
    "nvcomp_usable",
    "swap_unit",
    "wait_for_user_stream",
]


_UNSET = object()


def wait_for_user_stream(stream: Any) -> None:
    """Make ``stream`` (ours) wait for the work queued so far on the caller's stream
    (``cuzarr.config`` key ``gpu.stream``: a CuPy or PyTorch stream, or a raw
    ``cudaStream_t``). Our streams are blocking streams, which already order
    after the legacy default stream."""
    user = config.get("gpu.stream", None)
    if user is None:
        return
    cp = import_cupy()
    device = _stream_device(user)
    if not isinstance(user, cp.cuda.Stream):
        user = _external_stream(cp, user)
    if device is not None and device >= 0 and device != cp.cuda.runtime.getDevice():
        # Events are recorded on the stream's own device; waiting on one from
        # another device's stream is allowed.
        with cp.cuda.Device(device):
            event = user.record()
    else:
        event = user.record()
    stream.wait_event(event)


def _stream_device(user: Any) -> int | None:
    """The device a foreign stream belongs to, where the object says
    (``torch.cuda.Stream.device``); ``None`` when unknown (the current one)."""
    dev = getattr(user, "device", None)
    index = getattr(dev, "index", None)
    return int(index) if index is not None else None


def _external_stream(cp: Any, user: Any) -> Any:
    """A CuPy stream object for a foreign stream (``__cuda_stream__`` protocol,
    a ``torch.cuda.Stream``, or a raw ``cudaStream_t``)."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None and hasattr(user, "__cuda_stream__"):
        return from_external(user)
    ptr = getattr(user, "cuda_stream", None)  # torch.cuda.Stream
    ptr = int(ptr if ptr is not None else getattr(user, "ptr", user))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # CuPy 14 prefers from_external
        return cp.cuda.ExternalStream(ptr)


def _executor(device: int | None) -> Any:
    """An executor for CUDA device ``device`` (``None``: the host twin), the
    calling thread's for the ``with`` block."""
    return leased("executors", device, HostExecutor, GpuExecutor)


def _lease_executor(device: int | None) -> Any:
    """:func:`_executor` without a context manager: give it back with
    :func:`_return_executor`."""
    return lease("executors", device, HostExecutor, GpuExecutor)


def _return_executor(device: int | None, ex: Any) -> None:
    unlease("executors", device, ex)


def _little(dt: np.dtype) -> bool:
    return dt.byteorder == "<" or (dt.byteorder == "=" and sys.byteorder == "little")


def swap_unit(stored: np.dtype, out: np.dtype) -> int:
    """Byte-swap unit turning ``stored`` items into ``out``'s byte order (0: none)."""
    if stored.itemsize <= 1 or stored.byteorder == "|" or _little(stored) == _little(out):
        return 0
    if stored.kind == "c":
        return stored.itemsize // 2
    if stored.kind == "U":
        return 4
    return stored.itemsize


def device_codec(pipeline: Any) -> tuple[str | None, np.dtype | None, str]:
    """``(kind, stored dtype, chunk order)`` of the raw chunk bytes a pipeline
    stores, when the GPU can decode them: ``kind`` is
    :func:`~cuzarr.gpu.executor.stream_kind` of the one compressor (``"none"``
    without one); ``kind`` is ``None`` when chunks must be decoded on the host."""
    if isinstance(pipeline, V3Pipeline):
        stored = getattr(pipeline, "_stored_dtype", None)
        if getattr(pipeline, "_plain", False) and stored is not None and len(
            pipeline.bytes_bytes
        ) <= 1:
            comp = pipeline.bytes_bytes[0] if pipeline.bytes_bytes else None
            return stream_kind(comp), stored, "C"
        return None, None, "C"
    if isinstance(pipeline, V2Pipeline):
        dt = pipeline.dtype
        if dt.is_vlen or pipeline.filters or dt.dtype.fields:
            return None, None, pipeline.order
        return stream_kind(pipeline.compressor), dt.dtype, pipeline.order
    return None, None, "C"


_nvcomp_state: dict[str, Any] = {}


def nvcomp_missing() -> str | None:
    """Why nvCOMP cannot be used in this process (not installed, or its
    libraries fail to load), or ``None`` when it loads; found out once."""
    if "why" not in _nvcomp_state:
        try:
            from nvidia import nvcomp

            nvcomp.Codec  # noqa: B018  (the binding's libraries load here)
            _nvcomp_state["why"] = None
        except Exception as e:  # ImportError, OSError of a missing libnvcomp
            _nvcomp_state["why"] = f"{type(e).__name__}: {e}"
    return _nvcomp_state["why"]


def decode_route(kind: str | None, device: bool) -> str | None:
    """The stream kind a device read decodes with nvCOMP (``None``: every chunk
    decoded on the host and uploaded with its batch). Uncompressed chunks
    (``"none"``) need no decoder. ``cuzarr.config`` key ``gpu.untrusted``
    sends the rest to the host; so does a device without nvCOMP, with a
    warning (once per process)."""
    if kind in (None, "none"):
        return kind
    if flag("gpu.untrusted", False):
        return None
    if device and not nvcomp_usable():
        return None
    return kind


def nvcomp_usable() -> bool:
    """Whether nvCOMP loads; when it does not, one ``RuntimeWarning`` per
    process says that device reads and writes code on the host instead."""
    why = nvcomp_missing()
    if why is None:
        return True
    if not _nvcomp_state.get("warned"):
        _nvcomp_state["warned"] = True
        warnings.warn(
            f"nvCOMP is not available ({why}): device reads decode on the host and upload "
            "each batch once, device writes encode on the host (pip install 'cuzarr[gpu]' "
            "for nvCOMP >= 6.0)",
            RuntimeWarning, stacklevel=4,
        )
    return False


class HostBuffered(Sequence):  # type: ignore[type-arg]
    """Chunk bytes fetched into one host buffer (``base``; pinned on a GPU): a
    read-only sequence of the values (``values``, as the store gave them).
    Item ``i`` lies at ``offsets[i]`` in ``base`` (-1: separate bytes, or
    missing), ``sizes[i]`` bytes long when known (else ``len`` of the item;
    an array of sizes says -1 for a missing item only, whose value is None);
    ``frames[i]`` (when walked as it was read; see
    ``cuzarr.runtime.native.frames_array``): the stored size of the first zstd
    frame there (0: not walked; an error code is larger than the chunk) and its
    content size (``NOT_PARSED`` where only libzstd walked it). ``missing()``:
    which values are missing, known without looking at them where the store's
    answer knows it."""

    def __init__(self, values: Sequence[Any], base: np.ndarray, offsets: Any,
                 sizes: Any = None, frames: np.ndarray | None = None) -> None:
        self.values = values
        self.base = base
        self.offsets = offsets
        self.sizes = sizes
        self.frames = frames

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: Any) -> Any:
        return self.values[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def missing(self) -> list[int]:
        """The indices of the missing values (``None``), made without looking at
        the others where the store's answer knows them."""
        known = getattr(self.values, "missing", None)
        if known is not None:
            return known()
        return [j for j, d in enumerate(self.values) if d is None]


class DeviceReader:
    """Decodes batches of chunk items into one output through an executor.

    ``pipeline`` decodes a chunk on the host (the fallback), ``out`` is the
    output buffer (CuPy on a GPU, numpy for the host twin), ``fill`` the value
    of missing chunks, ``chunk_shape(coords)`` the decoded shape of a chunk.
    """

    def __init__(
        self,
        pipeline: Any,
        out: Any,
        fill: Any,
        chunk_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
        executor: Any,
    ) -> None:
        self.pipeline = pipeline
        self.out = out
        self._out_address: Any = _UNSET  # see _out_ptr
        self.fill = fill
        self.chunk_shape = chunk_shape
        self.executor = executor
        # A local store whose uncompressed chunk files the executor reads itself.
        self.direct_store: Any = None
        # ``SyncIO.get_into`` of a store that reads whole chunks into a buffer we
        # lay out (pinned on a GPU): no bytes objects, no packing copy.
        self.get_into: Any = None
        self.out_dtype = np.dtype(out.dtype)
        self._walks: dict[str | None, tuple[bool, Any]] = {}  # see _walk
        self._read_dims: Any = None  # see plan_read (gpu.plan.ReadDims)
        # the planned read's items are all slices: so is any part of them
        self._all_slices = False
        kind, stored, self.order = device_codec(pipeline)
        if kind is not None and stored is not None and (
            stored.newbyteorder("=") != self.out_dtype.newbyteorder("=")
        ):
            kind = None  # a dtype the raw bytes do not hold directly (e.g. a cast)
        self.kind = decode_route(kind, bool(getattr(executor, "device", False)))
        self.swap = swap_unit(stored, self.out_dtype) if kind is not None and stored is not None else 0

    def plan_read(self, items: Sequence[Any]) -> None:
        """Before a read's batches run: the descriptor table of all of its
        ``items`` (``gpu.plan.plan_read``), which each batch's plan gathers from."""
        self._read_dims = plan_read(items, self.chunk_shape, self.out.shape,
                                     self.out.strides, self.out_dtype.itemsize, self.order,
                                     self.swap)
        self._all_slices = is_slice_only(items)

    def fetch(self, keys: Sequence[str], items: Sequence[Any]) -> list[Any] | None:
        """File references for direct reads, or the chunks read into one host
        buffer (:class:`HostBuffered`), for the chunk ``items`` stored under
        ``keys``; ``None``: fetch the bytes as usual. Items that are not all
        slices (fancy indexing) are decoded on the host and scattered: they take
        the bytes as usual (a file reference is no chunk's bytes, and a pinned
        buffer would not be uploaded)."""
        if not self._slices(items):
            return None
        if self.direct_store is not None:
            return [self.direct_store.file_ref(k) for k in keys]
        if self.get_into is not None:
            return self.fetch_into(self.get_into, keys, self.kind)
        return None

    @staticmethod
    def buffered(values: Sequence[Any], base: np.ndarray, offsets: Any,
                 sizes: Any = None) -> HostBuffered:
        """Values lying in one host buffer (see :class:`HostBuffered`)."""
        return HostBuffered(values, base, offsets, sizes)

    def fetch_into(self, get_into: Any, keys: Sequence[str], kind: str | None) -> HostBuffered:
        """The values of ``keys`` read by ``get_into`` (``SyncIO.get_into``) into
        one host buffer of the executor (pinned on a GPU), each placed so that
        its first raw stream (per ``kind``, see ``STREAM_HEAD``) lands 16-byte
        aligned."""
        made: list[Any] = []
        walk, find = self._walk(kind)
        frames = native.frames_array(len(keys)) if walk else None

        def place(sizes: list[int | None] | np.ndarray) -> tuple[np.ndarray, list[int]]:
            buf, offsets = place_chunks(sizes, kind, self.executor.host_buffer)
            made.append(buf)
            made.append(sizes)
            return buf, offsets

        def each(j: int, at: int, n: int) -> None:
            # (the buffer's address asked here: where the store's C loop walks
            # the frames, as it mostly does, this is never called)
            frames[j, 0] = find(made[0].ctypes.data + at, n)  # type: ignore[index, misc]

        args = (keys, place) if frames is None else (
            keys, place, each if find is not None else None, frames)
        if getattr(self.executor, "device", False):
            with self.out.device:  # pinned memory is allocated in the output's context
                values, offsets = get_into(*args)
        else:
            values, offsets = get_into(*args)
        # a value read as separate bytes (offset -1) has its own length
        sizes = made[1]
        if not isinstance(sizes, np.ndarray):
            sizes = [-1 if n is None else n for n in sizes]
        return HostBuffered(values, made[0], offsets, sizes, frames)

    def fetch_ranges(self, get_ranges_into: Any, keys: Sequence[str], starts: np.ndarray,
                     sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Byte ranges (``sizes[j]`` bytes of ``keys[j]``'s value from
        ``starts[j]`` on; -1: to its end) read by ``get_ranges_into``
        (``SyncIO.get_ranges_into``) into one host buffer of the executor (pinned
        on a GPU), each range starting ``STAGING_ALIGN``-aligned: ``(buffer,
        offsets, sizes, got)``."""
        made: list[np.ndarray] = []

        def place(n: np.ndarray) -> tuple[np.ndarray, Any]:
            buf, offsets = place_chunks(n, "none", self.executor.host_buffer)
            made.append(buf)
            return buf, offsets

        if getattr(self.executor, "device", False):
            with self.out.device:  # pinned memory is allocated in the output's context
                at, sizes, got = get_ranges_into(keys, starts, sizes, place)
        else:
            at, sizes, got = get_ranges_into(keys, starts, sizes, place)
        return made[0], at, sizes, got

    def _slices(self, items: Sequence[Any]) -> bool:
        """Whether ``items`` (a batch of the read :meth:`plan_read` planned, or
        any items) are all slices (``gpu.plan.is_slice_only``): known from the
        read, where it was planned and is."""
        return self._all_slices or is_slice_only(items)

    def _walk(self, kind: str | None) -> tuple[bool, Any]:
        """Whether the zstd frames of ``kind`` chunks are walked as each lands
        (its bytes still in the CPU's cache; after the batch's copies they are
        not: ``gpu.scan``), and libzstd's walk for those read in Python (the
        store's C loop walks the others, ``cuzarr.runtime.native``; with
        neither, ``gpu.scan`` walks them later). Decided once per reader: a
        read's settings do not change under it."""
        got = self._walks.get(kind)
        if got is None:
            walk = kind == "zstd" and (native.available() or libzstd.available())
            find = libzstd.frame_size_at() if walk and libzstd.available() else None
            got = self._walks[kind] = (walk, find)
        return got

    def _out_ptr(self) -> int | None:
        """The output's address when whole chunks may be decoded straight into
        it (C-contiguous: a chunk's block of it is contiguous). Asked once per
        read: ``flags`` and ``ctypes`` build objects each time (~10 us a batch
        right after its copies)."""
        ptr = self._out_address
        if ptr is _UNSET:
            out = self.out
            if not out.flags.c_contiguous or out.size == 0:
                ptr = None
            elif isinstance(out, np.ndarray):  # (out.data of a datetime array is no buffer)
                ptr = int(out.ctypes.data)
            else:
                ptr = int(out.data.ptr)
            self._out_address = ptr
        return ptr

    def _host_decode(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        # Host-decoded chunks enter the staging buffer in the output's byte order.
        chunk = np.asarray(self.pipeline.decode(data, shape))
        return chunk.astype(self.out_dtype, copy=False)

    def __call__(
        self, items: Sequence[Any], datas: Sequence[Any], names: Sequence[str] | None = None
    ) -> None:
        """Decode one batch (``datas[i]``: stored bytes of ``items[i]``, or
        ``None`` when missing) into the output."""
        if not items:
            return
        buffered = datas if isinstance(datas, HostBuffered) else None
        if self._slices(items):
            try:
                batch = self._prepare(items, datas, names, buffered)
            except BaseException:
                if buffered is not None:  # a corrupt chunk: its staging goes back
                    self.executor.release(buffered.base)
                raise
            self.executor.run(batch, self.out, self.fill)
            # host staging goes back to its pool once the batch has run (device
            # buffers stay with the executor until their copies are done)
            self.executor.release(batch.packed, uploaded=True)
            if buffered is not None and buffered.base is not batch.packed:
                self.executor.release(buffered.base)  # copied into the packed buffer
            return
        self._host_batch(items, datas, names)

    def _prepare(self, items: Sequence[Any], datas: Sequence[Any],
                 names: Sequence[str] | None, buffered: HostBuffered | None) -> Any:
        return prepare_batch(
            items,
            datas,
            self.chunk_shape,
            self.out.shape,
            self.out.strides,
            self.out_dtype,
            self.kind,
            self._host_decode,
            chunk_order=self.order,
            swap=self.swap,
            names=names,
            base=None if buffered is None else buffered.base,
            base_offsets=None if buffered is None else buffered.offsets,
            base_sizes=None if buffered is None else buffered.sizes,
            base_frames=None if buffered is None else buffered.frames,
            alloc=self.executor.host_buffer,
            out_ptr=self._out_ptr(),
            read_dims=self._read_dims,
        )

    def _host_batch(self, items: Sequence[Any], datas: Sequence[Any],
                    names: Sequence[str] | None) -> None:
        """Items that are not all slices: decoded on the host, scattered by the
        executor."""
        chunks = []
        for i, (it, data) in enumerate(zip(items, datas, strict=True)):
            if data is None:
                chunks.append(None)
                continue
            try:
                chunks.append(self._host_decode(data, tuple(self.chunk_shape(tuple(it[0])))))
            except CodecError as e:
                if names is not None:
                    raise keyed(e, names[i]) from e
                raise
        self.executor.scatter_fancy(items, chunks, self.out, self.fill)


def direct_reads(store: Any, device: bool) -> bool:
    """Whether uncompressed chunks of ``store`` are read from their files into
    device memory by the executor (GPUDirect Storage through kvikio), per
    ``cuzarr.config`` key ``gpu.gds``: ``"auto"`` (when kvikio is installed, on a
    device), ``True`` (always; without kvikio the executor reads on the host and
    uploads), ``False`` (never)."""
    if store is None or not callable(getattr(store, "file_ref", None)):
        return False
    mode = config.get("gpu.gds", "auto")
    if isinstance(mode, str) and mode.strip().lower() == "auto":
        if not device:
            return False
        try:
            import kvikio  # noqa: F401
        except Exception:  # not installed, or its libraries (cuFile) do not load
            return False
        return True
    return flag("gpu.gds")


@contextlib.contextmanager
def _on_device(out: Any) -> Iterator[Any]:
    """The calling thread's executor for ``out``'s device, that device current."""
    with out.device, _executor(out.device.id) as ex:
        yield ex


class _ThreadExecutor:
    """Forwards each batch to the calling thread's executor for the output's
    device (batches run in pool threads) and keeps the events they return, so
    the read can wait for its own batches, and only those."""

    def __init__(self, device: bool) -> None:
        self.device = device
        self.events: list[Any] = []
        self._lock = threading.Lock()
        self.staging = pinned_staging if device else host_staging
        # what the pool keeps of the buffers given back, asked once per read
        self._keep = self.staging.keep_limit()
        self._used: set[Any] = set()  # executors this read queued work on

    def host_buffer(self, nbytes: int) -> np.ndarray:
        """A uint8 host buffer for a batch's compressed bytes, from the staging
        pool: pinned on a GPU, so its upload is one asynchronous copy."""
        return self.staging.take(nbytes)

    def release(self, buf: Any, uploaded: bool = False) -> None:
        """A host buffer from :meth:`host_buffer` is no longer used by the read's
        host side: back to the staging pool now, or, when ``uploaded`` on a GPU,
        once the executor sees its upload done (at the latest when the read
        ends, see :meth:`synchronize`)."""
        if isinstance(buf, np.ndarray) and not (uploaded and self.device):
            self.staging.give(buf, self._keep)

    def _pend(self, ev: Any) -> None:
        if ev is not None:
            with self._lock:
                self.events.append(ev)

    def _leased(self, out: Any) -> contextlib.AbstractContextManager[Any]:
        """An executor for ``out``'s device, with that device current (the host
        twin's lease itself: one generator context fewer per batch)."""
        if not self.device:
            return _executor(None)
        return _on_device(out)

    def run(self, batch: Any, out: Any, fill: Any) -> None:
        if not self.device:  # the host twin's lease, without a context manager
            ex = _lease_executor(None)
            try:
                self._used.add(ex)
                self._pend(ex.run(batch, out, fill))
            finally:
                _return_executor(None, ex)
            return
        with self._leased(out) as ex:
            self._used.add(ex)
            self._pend(ex.run(batch, out, fill))  # a Pending: event and deferred checks

    def scatter_fancy(self, items: Any, chunks: Any, out: Any, fill: Any) -> None:
        with self._leased(out) as ex:
            self._used.add(ex)
            self._pend(ex.scatter_fancy(items, chunks, out, fill))

    def synchronize(self) -> None:
        """Wait for this read's batches (the one wait of a read), then settle
        their deferred checks: the first corrupt chunk raises ``CodecError``."""
        with self._lock:
            events, self.events = self.events, []
        for ev in events:
            ev.synchronize()
        self._forget()  # (not after a failed wait: a copy may still read them)
        for ev in events:
            settle = getattr(ev, "settle", None)  # a Pending (fancy scatters: events)
            if settle is not None:
                settle()

    def _forget(self) -> None:
        """The read has ended (its copies are done): the executors it used give
        back the staging buffers they held for its uploads."""
        with self._lock:
            used, self._used = self._used, set()
        for ex in used:
            forget = getattr(ex, "forget_finished", None)
            if forget is not None:
                forget()
