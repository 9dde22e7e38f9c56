"""Many tiny chunks over HTTP with added latency: cuzarr vs zarr-python vs a loop.

Serves a v3 array of N tiny chunks from 127.0.0.1 with ``--latency`` seconds of
sleep in every request, then reads the whole array with cuzarr, zarr-python and
a sequential loop of GETs. The ideal for a concurrent reader is
``ceil(chunks / concurrency) * latency``; the goal is cuzarr within 1.2x of it
and at least as fast as zarr-python.

    python benchmarks/bench_http.py [--chunks 1024] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import tempfile
import time
import urllib.request

import numpy as np


def _serve(directory: str, latency: float, port_q) -> None:
    """An aiohttp static-file server in its own process: every request sleeps ``latency``.

    Running it out of process keeps the server's CPU off the client's cores, as a
    real remote server would be; the sleep is an asyncio sleep, like network latency.
    """
    import asyncio
    import os

    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(latency)
        rel = request.match_info["tail"]
        path = os.path.normpath(os.path.join(directory, rel))
        if not path.startswith(directory) or not os.path.isfile(path):
            return web.Response(status=404)
        with open(path, "rb") as f:
            return web.Response(body=f.read())

    async def run() -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        app.router.add_route("HEAD", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=2048)
        await site.start()
        port_q.put(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=1024)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import zarr

    import cuzarr

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

    conc = int(cuzarr.config.get("async.concurrency"))
    ideal = math.ceil(n / conc) * args.latency

    def best(fn):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        assert np.array_equal(np.asarray(out), data)
        return min(times)

    def read_cuzarr():
        return cuzarr.open_array(url, mode="r")[:]

    def read_zarr():
        return zarr.open_array(url, mode="r")[:]

    def read_loop():
        import zstandard

        dec = zstandard.ZstdDecompressor()
        out = np.empty_like(data)
        for i in range(n):
            with urllib.request.urlopen(f"{url}/c/{i}") as r:
                raw = r.read()
            out[i * 4 : (i + 1) * 4] = np.frombuffer(dec.decompress(raw, max_output_size=16), "<i4")
        return out

    def read_raw_aiohttp():
        # The floor on this machine: bare aiohttp GETs, same concurrency, no decoding.
        import asyncio

        import aiohttp

        async def go():
            sem = asyncio.Semaphore(conc)
            async with aiohttp.ClientSession() as s:

                async def one(i):
                    async with sem, s.get(f"{url}/c/{i}") as r:
                        return await r.read()

                return await asyncio.gather(*(one(i) for i in range(n)))

        asyncio.run(go())
        return data

    t_raw = best(read_raw_aiohttp)
    t_cz = best(read_cuzarr)
    t_zarr = best(read_zarr)
    t_loop = best(read_loop) if n * args.latency < 60 else float("nan")
    server.terminate()
    server.join()
    print(f"chunks={n} latency={args.latency * 1000:.0f}ms concurrency={conc}")
    print(f"ideal (chunks/concurrency x latency): {ideal:.3f} s")
    print(
        f"bare aiohttp: {t_raw:.3f} s  ({t_raw / ideal:.2f}x ideal; the client+server CPU floor here)"
    )
    print(
        f"cuzarr      : {t_cz:.3f} s  ({t_cz / ideal:.2f}x ideal, {t_cz / t_raw:.2f}x bare aiohttp)"
    )
    print(f"zarr-python : {t_zarr:.3f} s  ({t_zarr / t_cz:.2f}x cuzarr's time)")
    print(f"sequential  : {t_loop:.3f} s  ({t_loop / t_cz:.1f}x cuzarr's time)")


if __name__ == "__main__":
    main()
