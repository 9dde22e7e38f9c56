"""Many tiny chunks over HTTP with added latency: cuzarr vs zarr-python vs bare aiohttp.

Serves a v3 array of N tiny chunks from 127.0.0.1 with ``--latency`` seconds of
delay before every response, then, for each concurrency level of
``--concurrency``, reads the whole array with

- ``cuzarr``: ``cuzarr.open_array(url)[:]`` with ``async.concurrency`` = level;
- ``zarr``: ``zarr.open_array(url)[:]`` with zarr's ``async.concurrency`` = level;
- ``aiohttp``: bare GETs of every chunk on one aiohttp session, at most ``level``
  in flight (an ``asyncio.Semaphore``; the connector itself is unlimited), no
  decoding: the floor of this machine's client and server CPU.

The contenders are interleaved (repeat 1: each of them once, in a rotating
order; then repeat 2, ...) and the table shows the median of ``--repeat`` runs.
Arrays are opened untimed before each run (one fresh open per run, so no store
or session survives from one run to the next); what is timed is the read of
every chunk (``--time-open`` times the open too: one more request, for
``zarr.json``, that the ideal does not count). The ideal for a concurrent reader is
``ceil(chunks / concurrency) * latency``; the goal is cuzarr within 1.2x of it
and at least as fast as zarr-python. A sequential loop of GETs (``urllib``) is
timed once at the end, against its ideal ``chunks * latency``.

    python benchmarks/bench_http.py [--chunks 1024] [--latency 0.02]
        [--concurrency 16,32,64,128] [--repeat 3] [--no-loop] [--time-open]

The server runs in its own process and does as little as it can per request: the
files are read into memory at start, requests are parsed with a bare
``asyncio.Protocol`` and the response is written by a ``loop.call_later`` timer
(no coroutine, no framework), so most of the 2 shared cores stay with the client.
"""

from __future__ import annotations

import argparse
import gc
import math
import multiprocessing
import statistics
import tempfile
import time
import urllib.request
from typing import Any

import numpy as np


def _serve(directory: str, latency: float, port_q) -> None:
    """A minimal HTTP/1.1 server in its own process: every response waits ``latency``.

    The files below ``directory`` are served from memory (GET and HEAD; 404
    otherwise; keep-alive unless the client sends ``Connection: close``). The
    delay is a timer on the event loop, like network latency: it costs no CPU.
    """
    import asyncio
    import os

    files: dict[bytes, bytes] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, directory).replace(os.sep, "/")
            with open(full, "rb") as f:
                files[b"/" + rel.encode()] = f.read()
    not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    class Handler(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.buf = b""

        def data_received(self, data):
            self.buf += data
            loop = asyncio.get_running_loop()
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, self.buf = self.buf[:end], self.buf[end + 4 :]
                method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
                body = files.get(target.split(b"?", 1)[0])
                if body is None:
                    response = not_found
                else:
                    response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                    if method != b"HEAD":
                        response += body
                close = b"connection: close" in head.lower()
                loop.call_later(latency, self.respond, response, close)

        def respond(self, response, close):
            if not self.transport.is_closing():
                self.transport.write(response)
                if close:
                    self.transport.close()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Handler, "127.0.0.1", 0, backlog=4096)
        port_q.put(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(run())


def _parse_levels(text: str | None, default: int) -> list[int]:
    if not text:
        return sorted({16, 32, default, 128})
    levels = sorted({int(x) for x in text.split(",") if x.strip()})
    if not levels or levels[0] < 1:
        raise SystemExit("--concurrency takes positive integers, e.g. 16,32,64,128")
    return levels


def _parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=1024)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender and level (>= 3)")
    ap.add_argument(
        "--concurrency",
        default=None,
        help="comma list of concurrency levels (default: 16,32,128 and the library default)",
    )
    ap.add_argument("--no-loop", action="store_true", help="skip the sequential loop")
    ap.add_argument(
        "--time-open",
        action="store_true",
        help="time open_array too (one more request: zarr.json), not only the read",
    )
    args = ap.parse_args()
    if args.repeat < 3:
        raise SystemExit("--repeat must be at least 3 (the table shows medians)")
    return args


class _Contenders:
    """The timed reads of the served array ``url`` (``data``, ``n`` chunks):
    cuzarr, zarr-python, a plain aiohttp client, and a sequential urllib loop."""

    def __init__(self, url: str, data: np.ndarray, n: int, time_open: bool) -> None:
        self.url, self.data, self.n, self.time_open = url, data, n, time_open

    def library(self, lib: Any, conc: int) -> float:
        """Open (timed only with --time-open) and read the whole array with
        ``lib`` (cuzarr or zarr) at ``async.concurrency`` = ``conc``."""
        with lib.config.set({"async.concurrency": conc}):
            t0 = time.perf_counter()
            a = lib.open_array(self.url, mode="r")
            if not self.time_open:
                t0 = time.perf_counter()
            out = a[:]
            t = time.perf_counter() - t0
        assert np.array_equal(out, self.data)
        return t

    def aiohttp(self, conc: int) -> float:
        import asyncio

        import aiohttp

        url, n = self.url, self.n

        async def go() -> float:
            sem = asyncio.Semaphore(conc)
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as s:

                async def one(i: int) -> bytes:
                    async with sem, s.get(f"{url}/c/{i}") as r:
                        assert r.status == 200
                        return await r.read()

                t0 = time.perf_counter()
                bodies = await asyncio.gather(*(one(i) for i in range(n)))
                t = time.perf_counter() - t0
            assert len(bodies) == n and all(bodies)
            return t

        return asyncio.run(go())

    def loop(self) -> float:
        import zstandard

        dec = zstandard.ZstdDecompressor()
        out = np.empty_like(self.data)
        t0 = time.perf_counter()
        for i in range(self.n):
            with urllib.request.urlopen(f"{self.url}/c/{i}") as r:
                raw = r.read()
            out[i * 4 : (i + 1) * 4] = np.frombuffer(dec.decompress(raw, max_output_size=16), "<i4")
        t = time.perf_counter() - t0
        assert np.array_equal(out, self.data)
        return t


def _sweep(timers: dict[str, Any], levels: list[int], repeat: int) -> dict[int, dict[str, list[float]]]:
    """Each contender ``repeat`` times per concurrency level, interleaved (the order
    rotated each run); one untimed warm-up of each first."""
    names = list(timers)
    for fn in timers.values():
        fn(levels[-1])  # imports, first sessions, thread pools
    results: dict[int, dict[str, list[float]]] = {}
    for conc in levels:
        times: dict[str, list[float]] = {name: [] for name in names}
        for r in range(repeat):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                gc.collect()  # untimed: the previous run's stores and sessions go now
                times[name].append(timers[name](conc))
        results[conc] = times
    return results


def _print_results(args: argparse.Namespace, n: int, levels: list[int], default_conc: int,
                   results: dict[int, dict[str, list[float]]], sweep_s: float,
                   t_loop: float) -> None:
    print(
        f"chunks={n} latency={args.latency * 1000:g}ms repeat={args.repeat} "
        f"(medians; runs interleaved; {'open + read' if args.time_open else 'read'} timed) "
        f"cuzarr default async.concurrency={default_conc}; "
        f"sweep took {sweep_s:.0f} s"
    )
    header = (
        f"{'concurrency':>11} {'ideal s':>8} | {'aiohttp s':>9} {'x ideal':>7} | "
        f"{'cuzarr s':>8} {'x ideal':>7} | {'zarr s':>8} {'x ideal':>7} | {'zarr/cuzarr':>11}"
    )
    print(header)
    print("-" * len(header))
    for conc in levels:
        ideal = math.ceil(n / conc) * args.latency
        med = {name: statistics.median(v) for name, v in results[conc].items()}
        mark = " *" if conc == default_conc else ""
        print(
            f"{conc:>11} {ideal:>8.3f} | {med['aiohttp']:>9.3f} {med['aiohttp'] / ideal:>7.2f} | "
            f"{med['cuzarr']:>8.3f} {med['cuzarr'] / ideal:>7.2f} | "
            f"{med['zarr']:>8.3f} {med['zarr'] / ideal:>7.2f} | "
            f"{med['zarr'] / med['cuzarr']:>10.2f}x{mark}"
        )
    print(
        "ideal = ceil(chunks / concurrency) x latency; zarr/cuzarr > 1 means cuzarr is faster; "
        "* = cuzarr's default concurrency"
    )
    if not args.no_loop:
        loop_ideal = n * args.latency
        print(
            f"sequential urllib loop: {t_loop:.3f} s ({t_loop / loop_ideal:.2f}x its ideal "
            f"chunks x latency = {loop_ideal:.2f} s)"
        )


def main() -> None:
    args = _parse_args()
    import zarr

    import cuzarr

    default_conc = int(cuzarr.config.get("async.concurrency"))
    levels = _parse_levels(args.concurrency, default_conc)
    tmp = tempfile.mkdtemp()
    n = args.chunks
    data = np.arange(n * 4, dtype="int32")
    z = zarr.create_array(f"{tmp}/a.zarr", shape=data.shape, dtype="int32", chunks=(4,))
    z[:] = data
    ctx = multiprocessing.get_context("spawn")
    port_q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(tmp, args.latency, port_q), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port_q.get(timeout=60)}/a.zarr"
    c = _Contenders(url, data, n, args.time_open)
    timers = {"aiohttp": c.aiohttp, "cuzarr": lambda conc: c.library(cuzarr, conc),
              "zarr": lambda conc: c.library(zarr, conc)}
    t_start = time.perf_counter()
    results = _sweep(timers, levels, args.repeat)
    sweep_s = time.perf_counter() - t_start
    t_loop = float("nan") if args.no_loop else c.loop()
    gc.collect()
    time.sleep(0.2)  # let the sessions closed by that finish closing before exit
    server.terminate()
    server.join()
    _print_results(args, n, levels, default_conc, results, sweep_s, t_loop)


if __name__ == "__main__":
    main()
