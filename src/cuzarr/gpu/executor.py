"""The device executor: decode a batch of chunks into a device staging buffer and
scatter it into a CuPy output with one kernel launch.

Flow for one batch (the chunks of one read request, or one slice of them):

1. ``prepare_batch`` (``gpu.batch``; host, no device): check every chunk's
   bytes and describe its raw streams (``scan`` for a batch in one buffer,
   ``formats`` chunk by chunk otherwise), and build the scatter plan
   (``plan``). Chunks whose codec the GPU path does not handle are decoded on
   the host into a pinned buffer instead.
2. ``GpuExecutor.run``: per sub-batch (``subbatch``), on one of the executor's
   streams: one host-to-device copy of the bytes its streams use, one batched
   nvCOMP decode per codec straight into the staging slots (blosc: into a
   scratch buffer, then ``cuzarr_unshuffle``), one host-to-device copy of the
   host-decoded chunks, then one ``cuzarr_scatter`` launch; decoded sizes are
   checked once the read's work is done.

Only ``run`` touches CuPy and nvCOMP; everything before it is plain numpy and is
exercised by the CPU tests.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from cuzarr.errors import CodecError
from cuzarr.gpu import formats
from cuzarr.gpu.batch import (
    INPUT_ALIGN,
    MAX_DEVICE_STREAM,
    NVCOMP_ALGORITHMS,
    OUTPUT_ALIGN,
    STREAM_HEAD,
    GpuBatch,
    _named,
    place_chunks,
    prepare_batch,
    read_file,
    stream_kind,
)
from cuzarr.gpu.plan import STAGING_ALIGN, ScatterPlan, check_plan_bounds, fill_bytes
from cuzarr.gpu.staging import pinned_staging
from cuzarr.gpu.subbatch import Pending, SubBatch, split_batch, stream_count, sub_batch_bytes

__all__ = [
    "INPUT_ALIGN",
    "MAX_DEVICE_STREAM",
    "NVCOMP_ALGORITHMS",
    "OUTPUT_ALIGN",
    "STREAM_HEAD",
    "GpuBatch",
    "GpuExecutor",
    "HostExecutor",
    "StreamCodecs",
    "TwinStats",
    "copy_word",
    "lease",
    "leased",
    "place_chunks",
    "prepare_batch",
    "stream_kind",
    "unlease",
]



def verify_checksums(batch: GpuBatch, staging: Any, compute: Callable[..., Any],
                     checks: Sequence[tuple[int, int, int, str, int]] | None = None) -> None:
    """Compare the decoded bytes of the batch's zlib / gzip chunks (``checks``, by
    default all of ``batch.checks``) with their stored Adler-32 / CRC-32
    (``compute(staging, offsets, lengths, kind)``: the device or host
    checksums); a mismatch is a ``CodecError`` naming the key, as the host
    decoders raise."""
    for kind in ("adler32", "crc32"):
        rows = [c for c in (batch.checks if checks is None else checks) if c[3] == kind]
        if not rows:
            continue
        got = compute(staging, [r[1] for r in rows], [r[2] for r in rows], kind)
        for r, g in zip(rows, got, strict=True):
            if int(g) & 0xFFFFFFFF != r[4] & 0xFFFFFFFF:
                raise _named(CodecError(f"{kind} of the decoded chunk does not match "
                                        "the stored one (corrupt chunk)"), batch.names, r[0])


def stream_error(batch: GpuBatch, codec: str, row: int, e: Exception) -> CodecError:
    """A raw stream's decode failure as a ``CodecError`` naming its chunk's key."""
    owners = batch.owners.get(codec, [])
    err = e if isinstance(e, CodecError) else CodecError(f"{codec} stream: {e}")
    if row < len(owners):
        return _named(err, batch.names, int(owners[row]))
    return err


def batch_error(batch: GpuBatch, codec: str, rows: Sequence[int], e: Exception) -> CodecError:
    """A failed batched decode of ``rows`` of ``batch.streams[codec]`` (nvCOMP does
    not say which stream) as a ``CodecError`` naming the chunk when there is one
    (else up to three of the keys)."""
    owners = batch.owners.get(codec, [])
    chunks = sorted({int(owners[r]) for r in rows if r < len(owners)})
    msg = f"nvCOMP {codec} decode failed (corrupt stream?): {e}"
    if len(chunks) == 1:
        return _named(CodecError(msg), batch.names, chunks[0])
    if batch.names is not None and chunks:
        keys = ", ".join(batch.names[i] for i in chunks[:3])
        more = f" and {len(chunks) - 3} more" if len(chunks) > 3 else ""
        return CodecError(f"one of {keys}{more}: {msg}")
    return CodecError(msg)


def nvcomp_codec(name: str, stream: Any) -> Any:
    """An nvCOMP RAW codec for raw stream codec ``name``, queued on ``stream``."""
    from nvidia import nvcomp

    kw: dict[str, Any] = {}
    if name in ("lz4", "deflate"):
        # Never the hardware decompression engine: chunk bodies are untrusted,
        # and nvCOMP documents corrupt input to it as undefined behaviour
        # (nvcomp/lz4.h).
        kw["decompress_backend"] = nvcomp.DecompressBackend.NVCOMP_DECOMPRESS_BACKEND_CUDA
    return nvcomp.Codec(
        algorithm=NVCOMP_ALGORITHMS[name],
        bitstream_kind=nvcomp.BitstreamKind.RAW,
        cuda_stream=int(stream.ptr),
        **kw,
    )


def upload_to_slots(cp: Any, stream: Any, chunks: list[tuple[int, np.ndarray]], staging: Any) -> Any:
    """Copy host byte arrays into their staging slots (``(slot, bytes)`` pairs)
    with one pinned, asynchronous host-to-device copy on ``stream``. Returns the
    pinned buffer, which must outlive the copy."""
    from cuzarr.buffer.gpu import pinned_prototype

    total = sum(-(-len(c) // STAGING_ALIGN) * STAGING_ALIGN for _, c in chunks)
    pinned = pinned_prototype.empty((total,), np.uint8)
    offsets = []
    p = 0
    for _slot, c in chunks:
        pinned[p : p + len(c)] = c
        offsets.append(p)
        p += -(-len(c) // STAGING_ALIGN) * STAGING_ALIGN
    with stream:
        dev = cp.empty(total, dtype=cp.uint8)
        dev.set(pinned, stream=stream)
        for (slot, c), q in zip(chunks, offsets, strict=True):
            staging[slot : slot + len(c)] = dev[q : q + len(c)]
    return pinned


class StreamCodecs:
    """A CUDA stream and the nvCOMP codecs queued on it, made on first use.

    The codecs are released before the stream, whatever order Python would drop
    the attributes in: an nvCOMP codec frees its scratch on the stream it was
    made for, and one outliving a destroyed stream crashed the process (seen on
    an H200 when a pool thread's executor went with its thread)."""

    def __init__(self, cp: Any, stream: Any = None) -> None:
        self.cp = cp
        # A blocking stream: it orders after work on the legacy default stream
        # (where CuPy and PyTorch queue by default) without a device-wide sync.
        self.stream = stream if stream is not None else cp.cuda.Stream(non_blocking=False)
        # more blocking streams for sub-batches (see streams())
        self._extra: list[Any] = []
        self._codecs: dict[tuple[str, int], Any] = {}

    def streams(self, n: int) -> list[Any]:
        """``n`` streams: ``stream`` and ``n - 1`` more of this executor's."""
        while len(self._extra) < n - 1:
            self._extra.append(self.cp.cuda.Stream(non_blocking=False))
        return [self.stream, *self._extra[: n - 1]]

    def _codec(self, name: str, stream: Any = None) -> Any:
        """The nvCOMP codec for ``name`` made for ``stream`` (default: ``stream``):
        one per stream, as nvCOMP asks of codecs used concurrently."""
        stream = self.stream if stream is None else stream
        key = (name, int(stream.ptr))
        if key not in self._codecs:
            self._codecs[key] = nvcomp_codec(name, stream)
        return self._codecs[key]

    def release_codecs(self) -> None:
        """Wait for the streams, then drop the codecs (the streams stay)."""
        codecs = getattr(self, "_codecs", None)  # None: __init__ failed early
        self._codecs = {}
        if codecs:
            # The streams may be unusable while the interpreter or CUDA shuts down.
            for st in [self.stream, *getattr(self, "_extra", [])]:
                with contextlib.suppress(Exception):
                    st.synchronize()
            codecs.clear()

    def __del__(self) -> None:
        self.release_codecs()


_free: dict[tuple[str, int | None], list[Any]] = {}
_free_lock = threading.Lock()


@contextlib.contextmanager
def leased(kind: str, device: int | None, make_host: Callable[[], Any],
           make_device: Callable[[], Any]) -> Iterator[Any]:
    """A ``kind`` object (executor, encoder) for CUDA device ``device``
    (``None``: the host twin), the calling thread's for the block, then the
    next caller's, whatever its thread: a process makes only as many as ran at
    once, and a read on pool threads that never ran one finds them made.

    Made per pool thread instead, a device read on 4 of 16 pool threads kept
    meeting threads without one, and paid for new nvCOMP codecs: on an H200 the
    same 1 GiB zstd read took 0.51 s that way and 0.17 s on warm threads."""
    obj = lease(kind, device, make_host, make_device)
    try:
        yield obj
    finally:
        unlease(kind, device, obj)


def lease(kind: str, device: int | None, make_host: Callable[[], Any],
          make_device: Callable[[], Any]) -> Any:
    """:func:`leased` without its context manager (a generator costs a few
    microseconds a batch right after the batch's copies): the caller gives the
    object back with :func:`unlease`, in a ``finally``."""
    key = (kind, device)
    with _free_lock:
        free = _free.get(key)
        obj = free.pop() if free else None  # the most recently used: warm
    if obj is None:
        if device is None:
            obj = make_host()
        else:
            from cuzarr.buffer.gpu import import_cupy

            with import_cupy().cuda.Device(device):
                obj = make_device()
            _release_at_exit()
    return obj


def unlease(kind: str, device: int | None, obj: Any) -> None:
    """Give back an object :func:`lease` lent."""
    with _free_lock:
        _free.setdefault((kind, device), []).append(obj)


_exit_hook = False


def _release_at_exit() -> None:
    """Drop the pooled device objects (codecs before their streams) while CUDA
    is still up: registered after CuPy's own exit handlers, it runs before them."""
    global _exit_hook
    with _free_lock:
        if _exit_hook:
            return
        _exit_hook = True

    def release() -> None:
        with _free_lock:
            objs = [o for k, v in _free.items() if k[1] is not None for o in v]
            for k in [k for k in _free if k[1] is not None]:
                del _free[k]
        for o in objs:
            if isinstance(o, StreamCodecs):
                o.release_codecs()
        objs.clear()

    atexit.register(release)


def copy_word(table: np.ndarray, itemsize: int, ptrs: Sequence[int]) -> int:
    """The widest copy word (16, 8, 4, 2, 1 bytes) dividing the item size, every
    offset and stride of the table and the base pointers; 1 when a row swaps."""
    if len(table) and (table["swap"] > 1).any():
        return 1
    g = itemsize
    for col in ("src_offset", "dst_offset", "src_strides", "dst_strides"):
        if len(table):
            g = math.gcd(g, int(np.gcd.reduce(np.abs(table[col]).reshape(-1))))
    for p in ptrs:
        g = math.gcd(g, int(p))
    for w in (16, 8, 4, 2, 1):
        if g % w == 0:
            return w
    return 1


class TwinStats:
    """What a host twin ran, summed over threads, in the class attribute
    ``stats`` (one counter per twin class). ``_count(name=n)`` adds ``n`` to
    ``name``; a double underscore in a name stands for ``:``."""

    stats: Counter[str]
    _stats_lock = threading.Lock()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.stats = Counter()

    def _count(self, **kw: int) -> None:
        with self._stats_lock:
            self.stats.update({k.replace("__", ":"): v for k, v in kw.items()})


class HostExecutor(TwinStats):
    """The host twin of :class:`GpuExecutor`: runs a prepared batch with numpy
    (staging buffer in host memory, raw streams decoded by lz4/zstandard/zlib,
    ``unshuffle_numpy``, ``execute_plan_numpy``). It exercises every step of the
    device read on the CPU, so a machine without a GPU can check the plans the
    GPU would run (``cuzarr.config`` key ``gpu.emulate``)."""

    is_device = False
    # What every host twin ran, summed over threads: "batches", "stream:<codec>"
    # (raw streams the GPU would decode), "host_decoded" (chunks it would not),
    # "unshuffled", "fancy" (chunks assigned by fancy indexing), "in_place" (raw
    # streams decoded where the store read them, with no packing copy).
    def run(self, batch: GpuBatch, out: np.ndarray, fill: Any) -> Pending:
        """Decode and scatter ``batch`` into the numpy array ``out``, sub-batch by
        sub-batch as the device does; corrupt streams and checksums are
        reported when the returned :class:`Pending` is settled (as the
        device's deferred checks are)."""
        subs = split_batch(batch, sub_batch_bytes())
        self._count(
            batches=1,
            sub_batches=len(subs),
            host_decoded=len(batch.host_decoded),
            unshuffled=len(batch.unshuffle),
            in_place=batch.in_place,
            **{f"stream__{c}": len(rows) for c, rows in batch.streams.items()},
        )
        pending = Pending()
        staging = np.zeros(batch.plan.staging_nbytes, np.uint8)
        scratch = np.zeros(batch.scratch_nbytes, np.uint8)
        for sub in subs:
            self._run_sub(sub, staging, scratch, out, fill, pending)
        return pending

    def _run_sub(self, sub: SubBatch, staging: np.ndarray, scratch: np.ndarray,
                 out: np.ndarray, fill: Any, pending: Pending) -> None:
        from cuzarr.gpu.plan import execute_plan_numpy

        batch = sub.batch
        packed = sub.packed
        if sub.direct_src:  # compressed files read "to the device": here, to memory
            self._count(direct_src=len(sub.direct_src))
            packed = np.zeros(sub.hi - sub.lo, np.uint8)
            for at, path, offset, n in sub.direct_src:
                packed[at : at + n] = np.frombuffer(read_file(path, offset, n), np.uint8)
        direct = out_bytes(sub, out, lambda a: a.reshape(-1).view(np.uint8))
        for codec, rows in sub.streams.items():
            for j, (src, n, dst, size, to_scratch, to_out) in enumerate(rows):
                st = formats.RawStream(codec, src, n, size)
                try:
                    dec = formats.decode_streams_cpu(packed, [st], size)
                except Exception as e:  # lz4/zstandard/zlib errors, as nvCOMP's are
                    pending.defer(_raiser(stream_error(batch, codec, int(sub.rows[codec][j]), e)))
                    continue
                target = direct if to_out else scratch if to_scratch else staging
                target[dst : dst + size] = dec
        self._count(decoded_into_out=sum(int(r["out"].sum()) for r in sub.streams.values()))
        for slot, raw in sub.host_decoded:
            staging[slot : slot + len(raw)] = raw
        if sub.direct:
            self._count(direct=len(sub.direct))
            for slot, path, offset, n in sub.direct:
                staging[slot : slot + n] = np.frombuffer(read_file(path, offset, n), np.uint8)
        if sub.unshuffle is not None and len(sub.unshuffle):
            formats.unshuffle_numpy(sub.unshuffle, scratch, staging)
        if sub.checks:
            from cuzarr.gpu.checksums import host_chunk_checksums

            checks = sub.checks
            pending.defer(lambda: verify_checksums(batch, staging, host_chunk_checksums, checks))
        execute_plan_numpy(sub.table, staging, out, fill)

    def scatter_fancy(self, items: Sequence[Any], chunks: Sequence[Any], out: Any, fill: Any) -> None:
        """Per-chunk fancy assignment (selections with integer arrays)."""
        from cuzarr.gpu.plan import scatter_fancy

        self._count(fancy=len(chunks))
        scatter_fancy(items, chunks, out, fill)

    def synchronize(self) -> None:
        """Nothing is in flight on the host."""


def out_bytes(sub: SubBatch, out: Any, flat: Callable[[Any], Any]) -> Any:
    """The output as bytes (``flat``: its flat uint8 view) when streams of
    ``sub`` decode straight into it, after checking that they land inside it;
    ``None`` when none do."""
    rows = [r[r["out"]] for r in sub.streams.values()]
    if not any(len(r) for r in rows):
        return None
    if not out.flags.c_contiguous:
        raise ValueError("streams decode into an output that is not C-contiguous")
    for r in rows:
        if len(r) and ((r["dst"] < 0).any() or (r["dst"] + r["size"] > out.nbytes).any()):
            raise ValueError("a stream would decode outside the output")
    return flat(out)


def _size_check(batch: GpuBatch, codec: str, rows: np.ndarray, res: Any,
                want: np.ndarray, device: Any = None) -> Callable[[], None]:
    """A deferred check: every stream of an nvCOMP decode decoded to the size its
    header promised (another size means a corrupt stream; the host twin checks
    the same). Read on ``device`` (the decode's), whichever thread settles."""

    def check() -> None:
        with device if device is not None else contextlib.nullcontext():
            got = np.array([int(n) for n in res.buffer_sizes], np.int64)
        wrong = np.flatnonzero(got != want)
        if len(wrong):
            bad = int(wrong[0])
            raise stream_error(batch, codec, int(rows[bad]), CodecError(
                f"{codec} stream decoded to {got[bad]} bytes, expected {want[bad]}"))

    return check


def _raiser(e: Exception) -> Callable[[], None]:
    def check() -> None:
        raise e

    return check


class GpuExecutor(StreamCodecs):
    """Runs prepared batches on the current CUDA device (CuPy + nvCOMP).

    One executor serves one caller at a time (see :func:`leased`) on one
    device. Work is queued on its CUDA stream (``stream``; a new blocking
    stream by default, after the caller's
    ``gpu.stream`` if one is set). :meth:`run` returns an event recorded after
    the batch; the read waits for the events of its batches before it returns,
    so its output is complete whatever stream the caller then uses. Host
    buffers a queued copy reads from are kept until their copy's event is done.
    """

    threads = 256
    is_device = True

    def __init__(self, stream: Any = None) -> None:
        from cuzarr.buffer.gpu import import_cupy

        super().__init__(import_cupy(), stream)
        # (host buffer, event after the copy that reads it); the lock: a read
        # that ends drops finished entries from its thread (forget_finished)
        self._keep: list[tuple[Any, Any]] = []
        self._keep_lock = threading.Lock()
        # the side stream the next batch of one sub-batch runs on (run_alone)
        self._turn = 0

    def _hold(self, host: Any, stream: Any = None) -> None:
        """Keep ``host`` until the work queued so far on ``stream`` is done."""
        stream = self.stream if stream is None else stream
        event = stream.record()
        self.forget_finished()
        with self._keep_lock:
            self._keep.append((host, event))

    def forget_finished(self) -> None:
        """Drop the host buffers whose copies are done, giving staging buffers
        back to their pool (others are freed with their last reference)."""
        with self._keep_lock:
            state = [(h, e, e.done) for h, e in self._keep]
            self._keep = [(h, e) for h, e, done in state if not done]
            # a buffer uploaded by several sub-batches goes back after the last
            busy = {id(h) for h, _e in self._keep}
            free = {id(h): h for h, _e, done in state if done and id(h) not in busy}
        for h in free.values():
            pinned_staging.give(h)

    def run(self, batch: GpuBatch, out: Any, fill: Any) -> Pending:
        """Decode and scatter ``batch`` into the CuPy array ``out``: sub-batches
        (``gpu.sub_batch_bytes``) spread over ``gpu.streams`` streams, so that
        the upload of one overlaps the decode and scatter of the one before.
        Returns a :class:`Pending`: an event on ``stream`` after every
        sub-batch, and the size checks to settle once it is done."""
        from cuzarr.gpu.reader import wait_for_user_stream

        cp = self.cp
        plan = batch.plan
        self.forget_finished()
        wait_for_user_stream(self.stream)
        subs = split_batch(batch, sub_batch_bytes())
        if len(subs) == 1 and stream_count() > 1:
            return self._run_alone(subs[0], out, fill)
        streams = self.streams(min(stream_count(), max(1, len(subs))))
        with self.stream:
            # allocated on the main stream, which waits for every sub-batch
            # below before anything freed here can be reused
            staging = cp.empty(max(plan.staging_nbytes, 1), dtype=cp.uint8)
            scratch = cp.empty(max(batch.scratch_nbytes, 1), dtype=cp.uint8)
            ready = self.stream.record()
        pending = Pending()
        done = []
        for j, sub in enumerate(subs):
            st = streams[j % len(streams)]
            if st is not self.stream:
                st.wait_event(ready)
            with st:
                self._run_sub(sub, st, staging, scratch, out, fill, pending)
                done.append(st.record())
        for ev in done:
            self.stream.wait_event(ev)
        pending.event = self.stream.record()
        return pending

    def _run_alone(self, sub: SubBatch, out: Any, fill: Any) -> Pending:
        """A batch of one sub-batch (``gpu.read_batch_bytes`` is about one): on this
        executor's side streams in turn, after the caller's stream only, with its
        staging allocated on the side stream it uses (freed in that stream's
        order), so it waits for no earlier batch of this executor: the upload of
        one batch overlaps the decode and scatter of the one before, as the
        sub-batches of one large batch do."""
        ready = self.stream.record()  # the main stream holds only the caller's wait
        side = self.streams(stream_count() + 1)[1:]
        st = side[self._turn % len(side)]
        self._turn += 1
        st.wait_event(ready)
        pending = Pending()
        batch = sub.batch
        with st:
            staging = self.cp.empty(max(batch.plan.staging_nbytes, 1), dtype=self.cp.uint8)
            scratch = self.cp.empty(max(batch.scratch_nbytes, 1), dtype=self.cp.uint8)
            self._run_sub(sub, st, staging, scratch, out, fill, pending)
            pending.event = st.record()
        return pending

    def _run_sub(self, sub: SubBatch, st: Any, staging: Any, scratch: Any, out: Any,
                 fill: Any, pending: Pending) -> None:
        """One sub-batch on stream ``st`` (current)."""
        batch = sub.batch
        packed = sub.packed
        if sub.direct_src:
            # compressed chunk files read into device memory (kvikio), decoded there
            comp = self.cp.empty(sub.hi - sub.lo, dtype=self.cp.uint8)
            self._read_direct(sub.direct_src, comp, st)
            self._decode_streams(sub, comp, staging, scratch, st, pending, out)
        elif packed.size:
            # one asynchronous host-to-device copy of the bytes its streams use,
            # from pinned memory; the host buffer is kept until it is done
            comp = self.cp.empty(packed.size, dtype=self.cp.uint8)
            comp.set(packed, stream=st)
            self._hold(batch.packed, st)
            self._decode_streams(sub, comp, staging, scratch, st, pending, out)
        if sub.host_decoded:
            self._hold(upload_to_slots(self.cp, st, sub.host_decoded, staging), st)
        if sub.direct:
            self._read_direct(sub.direct, staging, st)
        if sub.unshuffle is not None and len(sub.unshuffle):
            self._unshuffle(sub.unshuffle, scratch, staging)
        if sub.checks:
            from cuzarr.gpu.checksums import device_chunk_checksums

            def compute(buf: Any, offs: Any, lens: Any, kind: str) -> Any:
                return device_chunk_checksums(buf, offs, lens, kind, stream=st)

            verify_checksums(batch, staging, compute, sub.checks)
        self.scatter(dataclasses.replace(batch.plan, table=sub.table), staging, out, fill)

    def scatter_fancy(self, items: Sequence[Any], chunks: Sequence[Any], out: Any, fill: Any) -> Any:
        """Selections with integer arrays: decoded host chunks are uploaded in one
        copy, then assigned chunk by chunk with CuPy fancy indexing; returns an
        event recorded after it."""
        from cuzarr.gpu.plan import scatter_fancy
        from cuzarr.gpu.reader import wait_for_user_stream

        cp = self.cp
        wait_for_user_stream(self.stream)
        with self.stream:
            present = [np.ascontiguousarray(c) for c in chunks if c is not None]
            dev: list[Any] = []
            if present:
                flat = cp.asarray(np.concatenate([c.reshape(-1) for c in present]))
                p = 0
                for c in present:
                    dev.append(flat[p : p + c.size].reshape(c.shape))
                    p += c.size
            it = iter(dev)
            scatter_fancy(items, [None if c is None else next(it) for c in chunks], out, fill)
            return self.stream.record()

    def synchronize(self) -> None:
        """Wait for everything queued on this executor's streams (by whoever holds
        it, see :func:`leased`)."""
        for st in [self.stream, *self._extra]:
            st.synchronize()
        with self._keep_lock:
            done, self._keep = [h for h, _e in self._keep], []
        for h in done:
            pinned_staging.give(h)

    def _decode_streams(self, sub: SubBatch, comp: Any, staging: Any, scratch: Any, st: Any,
                        pending: Pending, out: Any = None) -> None:
        from nvidia import nvcomp

        batch = sub.batch
        direct = out_bytes(sub, out, lambda a: a.reshape(-1).view(self.cp.uint8))
        for codec, rows in sub.streams.items():
            for to_scratch, to_out in ((False, False), (True, False), (False, True)):
                which = np.flatnonzero((rows["scratch"] == to_scratch) & (rows["out"] == to_out))
                if not len(which):
                    continue
                sel = rows[which]
                target = direct if to_out else scratch if to_scratch else staging
                if codec == "copy":
                    for src, n, dst in zip(sel["src"].tolist(), sel["n"].tolist(),
                                           sel["dst"].tolist(), strict=True):
                        target[dst : dst + n] = comp[src : src + n]
                    continue
                sp = int(st.ptr)
                srcs = nvcomp.as_arrays(comp, sel["src"].tolist(), sel["n"].tolist(), sp)
                outs = nvcomp.as_arrays(target, sel["dst"].tolist(), sel["size"].tolist(), sp)
                # nvCOMP's Python decode synchronizes its stream (it reads the
                # streams' headers back) holding the GIL; waiting for this
                # stream first through CuPy, which lets the GIL go, leaves the
                # other read threads running. The other streams go on meanwhile.
                st.synchronize()
                rows_in_batch = sub.rows[codec][which]
                try:
                    res = self._codec(codec, st).decode(srcs, out=outs)
                except (ValueError, RuntimeError) as e:
                    # nvCOMP reports a corrupt stream of the batch (an output too
                    # small for it: ValueError; a failed chunk status: RuntimeError)
                    # without saying which; the host twin raises CodecError.
                    raise batch_error(batch, codec, rows_in_batch.tolist(), e) from e
                # Sizes are read once the read's work is done (buffer_sizes
                # waits for the decode): one wait for the read, not one per group.
                pending.defer(_size_check(batch, codec, rows_in_batch, res, sel["size"],
                                          self.cp.cuda.Device()))

    def _read_direct(self, reads: list[tuple[int, str, int, int]], staging: Any,
                     st: Any = None) -> None:
        """Files into staging slots: kvikio (GPUDirect Storage, or its POSIX compat
        mode) when installed, else host reads and one pinned upload (on ``st``)."""
        st = self.stream if st is None else st
        try:
            import kvikio
        except Exception:  # not installed, or its libraries (cuFile) do not load
            chunks = [(slot, np.frombuffer(read_file(p, off, n), np.uint8))
                      for slot, p, off, n in reads]
            self._hold(upload_to_slots(self.cp, st, chunks, staging), st)
            return
        # kvikio reads on its own threads; the slots must not be used before the
        # stream's earlier work (staging allocation) is done.
        st.synchronize()
        files: dict[str, Any] = {}  # one handle per file (a shard's ranges share it)
        futures = []
        error: BaseException | None = None
        try:
            for slot, path, off, n in reads:
                f = files.get(path)
                if f is None:
                    f = files[path] = kvikio.CuFile(path, "r")
                futures.append((f.pread(staging[slot : slot + n], n, off), n, path))
        except Exception as e:
            error = CodecError(f"GPUDirect read failed: {e}")
        # Every started read finishes before its file closes or its buffer goes.
        for fut, n, path in futures:
            try:
                got = fut.get()
            except Exception as e:
                error = error or CodecError(f"{path}: GPUDirect read failed: {e}")
                continue
            if got != n and error is None:
                error = CodecError(f"{path}: read {got} bytes, expected {n}")
        for f in files.values():
            f.close()
        if error is not None:
            raise error

    def _unshuffle(self, rows: np.ndarray, scratch: Any, staging: Any) -> None:
        from cuzarr.gpu import kernels

        cp = self.cp
        table = cp.asarray(rows.view(np.uint8))
        fn = kernels.get_function("unshuffle.cu", kernels.UNSHUFFLE)
        grid = kernels.row_grid(int(rows["nbytes"].max()), len(rows), self.threads)
        fn(grid, (self.threads,), (table, np.int64(len(rows)), scratch, staging))

    def scatter(self, plan: ScatterPlan, staging: Any, out: Any, fill: Any) -> None:
        """One ``cuzarr_scatter`` launch for every row of ``plan``."""
        from cuzarr.gpu import kernels

        cp = self.cp
        if len(plan.table) == 0 or out.size == 0:
            return
        lo = sum((s - 1) * st for s, st in zip(out.shape, out.strides) if st < 0)
        hi = sum((s - 1) * st for s, st in zip(out.shape, out.strides) if st > 0) + out.itemsize
        check_plan_bounds(plan.table, plan.staging_nbytes, lo, hi)
        fill_dev = cp.asarray(np.concatenate([fill_bytes(fill, np.dtype(out.dtype)),
                                              np.zeros(16, np.uint8)]))
        w = copy_word(plan.table, plan.itemsize,
                      [out.data.ptr, staging.data.ptr, fill_dev.data.ptr])
        fn = kernels.get_function(
            "scatter.cu", kernels.SCATTER.format(kernels.word_type(w))
        )
        table = cp.asarray(plan.table.view(np.uint8))
        words = max(1, plan.max_count * plan.itemsize // w)
        grid = kernels.row_grid(words, len(plan.table), self.threads)
        # CuPy passes an ndarray argument as its data pointer (the first element of a
        # view), which is what dst_offset is relative to.
        fn(grid, (self.threads,), (table, np.int64(len(plan.table)), staging, out, fill_dev))
