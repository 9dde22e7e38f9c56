"""bench_core.py's results: rows per (workload, contender), the table, the
summary against the best peer, and the JSON document."""

from __future__ import annotations

import os
import platform
import statistics
from typing import Any

import numpy as np

from core_common import (
    ASSEMBLE,
    CHUNKS,
    DECODE_LIMITS,
    DTYPE,
    FULL_READS,
    LIMIT_CONTENDERS,
    PEERS,
    RANDOM_N,
    RANDOM_WIN,
    ROW_ORDER,
    RSS_GOAL_ROWS,
    SEL_UNITS,
    SHARD_INNER,
    TINY_CHUNKS,
    VINDEX_POINTS,
    ZSTD_V3,
    one_shard_shape,
    rows_of,
    selection,
    selection_stats,
    windows_chunks_touched,
)


def fmt_ratio(ref: float | None, t: float | None) -> str:
    if ref is None or t is None or t <= 0:
        return "-"
    return f"{ref / t:.2f}x"


def label(contender: str, impl: str) -> str:
    if contender == "cuzarr" and impl != "cuzarr":
        return f"cuzarr[={impl}]"
    return contender


def row_sizes(shape, tshape, size_mib: int) -> dict[str, dict[str, Any]]:
    """Per table row: bytes moved (written, or returned by the read), and the number
    of items (chunks touched; reads for shard-random) for the us/item column."""
    big_bytes = int(np.prod(shape)) * 2
    big_n = -(-shape[0] // CHUNKS[0]) * -(-shape[1] // CHUNKS[1])
    tiny_bytes = int(np.prod(tshape)) * 2
    tiny_n = (tshape[0] // TINY_CHUNKS[0]) * (tshape[1] // TINY_CHUNKS[1])
    inner_n = -(-shape[0] // SHARD_INNER[0]) * -(-shape[1] // SHARD_INNER[1])
    one = one_shard_shape(shape)
    one_bytes = int(np.prod(one)) * 2
    one_n = (one[0] // SHARD_INNER[0]) * (one[1] // SHARD_INNER[1])
    out: dict[str, dict[str, Any]] = {
        "write": {"bytes": big_bytes, "items": big_n, "item": "chunk"},
        "read": {"bytes": big_bytes, "items": big_n, "item": "chunk"},
        "tiny-write": {"bytes": tiny_bytes, "items": tiny_n, "item": "chunk"},
        "tiny-read": {"bytes": tiny_bytes, "items": tiny_n, "item": "chunk"},
        "shard-write": {"bytes": big_bytes, "items": inner_n, "item": "inner chunk"},
        "shard-read": {"bytes": big_bytes, "items": inner_n, "item": "inner chunk"},
        "one-shard-write": {"bytes": one_bytes, "items": one_n, "item": "inner chunk"},
        "one-shard-read": {"bytes": one_bytes, "items": one_n, "item": "inner chunk"},
        "shard-random": {
            "bytes": RANDOM_N * RANDOM_WIN * RANDOM_WIN * 2,
            "items": RANDOM_N,
            "item": "read",
            "inner_per_read": windows_chunks_touched(shape, SHARD_INNER),
        },
    }
    for u in SEL_UNITS:
        nbytes, touched = selection_stats(u, shape)
        out[u] = {"bytes": nbytes, "items": touched, "item": "chunk"}
    return out


def summarize(results: list[dict[str, Any]], args, sizes: dict[str, Any]) -> dict[str, Any]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        c = r["contender"]
        for unit in r.get("workloads") or []:
            for wl in rows_of(unit):
                row = rows.setdefault(
                    (wl, c),
                    {
                        "times": [],
                        "cpu": [],
                        "by_repeat": {},
                        "errors": [],
                        "rss_peak": [],
                        "rss_delta": [],
                        "verified": None,
                        "stored": None,
                        "warnings": [],
                    },
                )
                if not r.get("ok"):
                    row["errors"].append(r.get("error", "?"))
                    continue
                if wl in r.get("errors", {}):
                    row["errors"].append(r["errors"][wl])
                    continue
                if wl not in r.get("times", {}):
                    continue
                row["times"].append(r["times"][wl])
                if wl in r.get("cpu", {}):
                    row["cpu"].append(r["cpu"][wl])
                row["by_repeat"][r.get("repeat", len(row["times"]) - 1)] = r["times"][wl]
                if wl in r.get("rss", {}):
                    base, peak = r["rss"][wl]
                    row["rss_peak"].append(peak)
                    row["rss_delta"].append(peak - base)
                v = r.get("verified", {}).get(wl)
                if v is not None:
                    row["verified"] = bool(v) and row["verified"] is not False
                if r.get("stored_bytes", {}).get(wl):
                    row["stored"] = r["stored_bytes"][wl]
                if "info" in r:
                    row["info"] = r["info"]
                    if "first_touch_s" in r["info"]:
                        row.setdefault("first_touch", []).append(r["info"]["first_touch_s"])
                for w in r.get("warnings", []):
                    if w not in row["warnings"]:
                        row["warnings"].append(w)
    for row in rows.values():
        row["median"] = statistics.median(row["times"]) if row["times"] else None
        row["min"] = min(row["times"]) if row["times"] else None
    return rows


def rss_ratio(row: dict[str, Any], nbytes: int) -> float | None:
    return max(row["rss_peak"]) / nbytes if row.get("rss_peak") else None


def print_table(rows, args, sizes) -> None:
    """What was measured and how, then a line per (workload, contender)."""
    _print_setup(args, sizes)
    _print_notes(args)
    hdr = (
        f"{'workload':<12} {'contender':<18} {'median s':>9} {'(min)':>8} {'GB/s':>7} "
        f"{'us/item':>9} {'xzarr':>7} {'xts':>7} {'RSS MiB':>8} {'dRSS':>7} {'RSS/out':>7}  notes"
    )
    print()
    print(hdr)
    print("-" * len(hdr))
    for wl in ROW_ORDER:
        if _print_rows(rows, args, sizes, wl):
            print()


def _print_setup(args, sizes) -> None:
    """The machine, the arrays and the selections."""
    rs = sizes["rows"]
    print()
    print(
        f"machine: {platform.node()} {platform.machine()} cpus={os.cpu_count()} "
        f"python={platform.python_version()} load avg (1/5/15 min) at start "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][0])}, at end "
        f"{'/'.join(f'{x:.1f}' for x in sizes['load'][1])}"
    )
    print(
        f"big array: shape={tuple(sizes['shape'])} uint16 = {sizes['big_bytes'] / 2**20:.0f} MiB, "
        f"chunks={CHUNKS} (1 MiB), zstd level 1, Zarr v3, local disk ({args.data_dir})"
    )
    sh = sizes["shard_shape"]
    print(
        f"sharded array: same data, shards={tuple(sh)} ({sh[0] * sh[1] * 2 / 2**20:.0f} MiB), "
        f"inner chunks={SHARD_INNER} ({SHARD_INNER[0] * SHARD_INNER[1] * 2 // 1024} KiB), "
        f"index at end (bytes+crc32c); shard-random = {RANDOM_N} reads of "
        f"{RANDOM_WIN}x{RANDOM_WIN} at random positions, one call each "
        f"({rs['shard-random']['inner_per_read']:.2f} inner chunks per read on average)"
    )
    one = one_shard_shape(tuple(sizes["shape"]))
    print(
        f"one-shard array: the first {one[0]}x{one[1]} of the data ({one[0] * one[1] * 2 / 2**20:.0f} "
        f"MiB) as ONE shard of {SHARD_INNER} inner chunks: its write and full read "
        "(one-shard-write, one-shard-read) show whether the inner chunks of one shard are "
        "coded on all cores"
    )
    print(
        f"tiny array: shape={tuple(sizes['tiny_shape'])} uint16, chunks={TINY_CHUNKS} (2 KiB raw), "
        f"{sizes['tiny_n']} chunks, zstd level 1, "
        + ("in-memory store" if args.tiny_store == "memory" else "local disk (page cache)")
    )
    sel_desc = []
    for u in SEL_UNITS:
        kind, sel = selection(u, tuple(sizes["shape"]))
        if kind == "basic":
            d = ", ".join(
                f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
                + (f":{s.step}" if s.step not in (None, 1) else "")
                for s in sel
            )
            d = f"a[{d}]"
        elif kind == "oindex":
            d = f"a.oindex[{len(sel[0])} rows, {len(sel[1])} cols] (sorted random)"
        else:
            d = f"a.vindex[{len(sel[0])} random points]"
        sel_desc.append(f"{u} = {d}")
    print("selections (on the 1 MiB-chunk array): " + "; ".join(sel_desc))


def _print_notes(args) -> None:
    """How each column was measured."""
    print(
        f"repeats={args.repeats}, order={args.order}, isolation={args.isolation} (one process "
        + ("per measurement" if args.isolation == "measurement" else "per contender and repeat")
        + "); median seconds shown (min in brackets)."
    )
    print(
        "write: timed is `arr[...] = data` only (array creation untimed), no fsync for anyone "
        "(os.sync() between contenders, untimed; tensorstore file_io_sync=False)."
    )
    print(
        "reads and selections: open is untimed. Reads come right after the writes, so every "
        "contender reads its own store from the OS page cache (warm, same for all)."
    )
    print(
        "GB/s = uncompressed bytes written, or returned by the read/selection, per second; "
        "us/item = microseconds per chunk touched (inner chunk for shard-*), per read for "
        "shard-random."
    )
    print(
        "xzarr / xts = speedup vs zarr-python default pipeline / vs tensorstore "
        "(>1 = faster). RSS MiB = peak RSS of the measuring process during the timed op "
        "(VmHWM, reset just before it; includes the interpreter, source/output arrays); dRSS = "
        "that peak minus the RSS just before the op (median over repeats); RSS/out = peak RSS "
        "(max over repeats) / output bytes, full reads only (goal: <= 1.2)."
    )
    print(
        "limit:* rows = raw codec on all cores (thread per slice), no Zarr machinery, no "
        "assembly into an output array (read: file read + decode of the chunk files; "
        "shard-read: shard file read + index parse + decode of the inner chunks); "
        "limit:assemble = limit:libzstd (else numcodecs) plus the copy of each chunk into one fresh "
        "output array, which every full read must do (read); plus the copy of each chunk out of "
        "the source and its write to a file of its own (temp file, rename), which every writer "
        "must do (write)."
    )


def _row_notes(row: dict[str, Any], nbytes: int) -> list[str]:
    notes = []
    if row["verified"] is True:
        notes.append("verified")
    elif row["verified"] is False:
        notes.append("MISMATCH!")
    if row["stored"]:
        notes.append(f"ratio {nbytes / row['stored']:.2f}")
    info = row.get("info") or {}
    eff = info.get("effective_pipeline")
    if eff and eff != info.get("codec_pipeline"):
        notes.append(f"FELL BACK to {eff.rsplit('.', 1)[-1]}")
    if row["warnings"]:
        notes.append(f"warning: {row['warnings'][0]}")
    if row["errors"]:
        notes.append(f"{len(row['errors'])} failed: {row['errors'][0]}")
    return notes


def _print_rows(rows, args, sizes, wl: str) -> bool:
    """The lines of workload ``wl``; whether there was any."""
    nbytes, nitems = sizes["rows"][wl]["bytes"], sizes["rows"][wl]["items"]
    ref_z = rows.get((wl, "zarr"), {}).get("median")
    ref_t = rows.get((wl, "tensorstore"), {}).get("median")
    any_row = False
    for c in args.contenders + args.limits:
        row = rows.get((wl, c))
        if row is None:
            continue
        any_row = True
        m = row["median"]
        notes = "; ".join(_row_notes(row, nbytes))
        if m is None:
            print(
                f"{wl:<12} {label(c, args.impl_module):<18} {'FAILED':>9} {'':>8} {'':>7} "
                f"{'':>9} {'':>7} {'':>7} {'':>8} {'':>7} {'':>7}  {notes}"
            )
            continue
        rss = f"{max(row['rss_peak']) / 2**20:.0f}" if row["rss_peak"] else "-"
        drss = f"{statistics.median(row['rss_delta']) / 2**20:.0f}" if row["rss_delta"] else "-"
        rr = rss_ratio(row, nbytes) if wl in FULL_READS and c not in LIMIT_CONTENDERS else None
        rro = f"{rr:.2f}" if rr is not None else "-"
        print(
            f"{wl:<12} {label(c, args.impl_module):<18} {m:9.3f} "
            f"{'(' + format(row['min'], '.3f') + ')':>8} "
            f"{nbytes / m / 1e9:7.2f} {m / nitems * 1e6:9.1f} "
            f"{fmt_ratio(ref_z, m):>7} {fmt_ratio(ref_t, m):>7} {rss:>8} {drss:>7} {rro:>7}  "
            f"{notes}"
        )
    return any_row


def paired_ratio(peer: dict[str, Any], cz: dict[str, Any]) -> float | None:
    """Median over repeats of peer time / cuzarr time, each pair measured in the
    same repeat (adjacent in time): a slow stretch of machine load hits both."""
    both = sorted(set(peer["by_repeat"]) & set(cz["by_repeat"]))
    if not both:
        return None
    return statistics.median(peer["by_repeat"][k] / cz["by_repeat"][k] for k in both)


def compute_summary(rows, args, sizes) -> list[dict[str, Any]]:
    """Per workload: the best peer (fastest verified median), cuzarr's ratio to it, and
    for full reads cuzarr's throughput as a fraction of the fastest limit row."""
    out = []
    for wl in ROW_ORDER:
        cz = rows.get((wl, "cuzarr"))
        peers = [
            (rows[(wl, p)]["median"], p)
            for p in PEERS
            if p in args.contenders
            and (wl, p) in rows
            and rows[(wl, p)]["median"] is not None
            and rows[(wl, p)]["verified"] is not False
        ]
        if cz is None and not peers:
            continue
        ent: dict[str, Any] = {"workload": wl}
        czm = cz["median"] if cz else None
        ent["cuzarr_s"] = czm
        ent["cuzarr_ok"] = bool(cz and czm is not None and cz["verified"] is not False)
        if peers:
            best_t, best = min(peers)
            ent["best_peer"] = best
            ent["best_peer_s"] = best_t
            ent["ratio_vs_best"] = best_t / czm if czm else None
            # the same on the fastest repeat of each (less sensitive to machine load)
            mins = [(rows[(wl, p)]["min"], p) for _, p in peers]
            bmin, bminp = min(mins)
            ent["best_peer_by_min"] = bminp
            ent["ratio_vs_best_by_min"] = bmin / cz["min"] if cz and cz["min"] else None
            paired = paired_ratio(rows[(wl, best)], cz) if cz else None
            if paired is not None:
                ent["ratio_vs_best_paired"] = paired
        lims = [
            (rows[(wl, lim)]["median"], lim)
            for lim in args.limits
            if lim in DECODE_LIMITS and (wl, lim) in rows and rows[(wl, lim)]["median"] is not None
        ]
        if lims and wl not in ("write", "tiny-write"):
            lt, lim = min(lims)
            ent["limit"] = lim
            ent["limit_s"] = lt
            ent["fraction_of_limit"] = lt / czm if czm else None
        asm = rows.get((wl, ASSEMBLE))
        if asm and asm["median"] is not None and czm and ASSEMBLE in args.limits:
            ent["assemble_s"] = asm["median"]
            ent["fraction_of_assemble"] = asm["median"] / czm
            if ent.get("limit_s"):
                ent["assemble_fraction_of_limit"] = ent["limit_s"] / asm["median"]
            if asm.get("first_touch"):
                ent["first_touch_s"] = statistics.median(asm["first_touch"])
            zr = rows.get((wl, "zarr"))
            if zr and zr["median"] is not None:
                # the most any writer (or reader) can be faster than zarr-python here
                ent["assemble_x_zarr"] = zr["median"] / asm["median"]
        if wl in FULL_READS and cz and cz.get("rss_peak"):
            nb = sizes["rows"][wl]["bytes"]
            ent["cuzarr_rss_per_out"] = rss_ratio(cz, nb)
            ent["cuzarr_drss_per_out"] = max(cz["rss_delta"]) / nb
            peer_rss = {
                p: rss_ratio(rows[(wl, p)], nb)
                for p in PEERS
                if (wl, p) in rows and rows[(wl, p)].get("rss_peak")
            }
            if peer_rss:
                ent["best_peer_rss_per_out"] = min(peer_rss.items(), key=lambda kv: kv[1])
        out.append(ent)
    return out


def print_summary(summary: list[dict[str, Any]], args) -> None:
    cz = label("cuzarr", args.impl_module)
    print(
        f"=== summary: {cz} vs the best peer per workload (ratio = best peer median / "
        f"{cz} median; >= 1.00 means {cz} is at least as fast) ==="
    )
    hdr = (
        f"{'workload':<12} {'best peer':<12} {'peer s':>9} {cz + ' s':>12} {'ratio':>7}  "
        f"{'verdict':<24} {'paired':>7}  {'ratio on min (best peer by min)'}"
    )
    print(hdr)
    print("-" * len(hdr))
    for e in summary:
        czs = f"{e['cuzarr_s']:.3f}" if e.get("cuzarr_s") is not None else "FAILED"
        if "best_peer" not in e:
            print(f"{e['workload']:<12} {'-':<12} {'-':>9} {czs:>12} {'-':>7}  no peer result")
            continue
        r = e.get("ratio_vs_best")
        if r is None:
            verdict = f"{cz} failed"
        elif not e["cuzarr_ok"]:
            verdict = f"{cz} result MISMATCH"
        else:
            verdict = "ok (at least as fast)" if r >= 1.0 else f"LOSS ({1 / r:.2f}x slower)"
        rs = f"{r:.2f}" if r is not None else "-"
        rm = e.get("ratio_vs_best_by_min")
        rms = f"{rm:.2f} ({e['best_peer_by_min']})" if rm is not None else "-"
        rp = e.get("ratio_vs_best_paired")
        rps = f"{rp:.2f}" if rp is not None else "-"
        print(
            f"{e['workload']:<12} {e['best_peer']:<12} {e['best_peer_s']:9.3f} {czs:>12} "
            f"{rs:>7}  {verdict:<24} {rps:>7}  {rms}"
        )
    for e in summary:
        if e.get("fraction_of_limit") is not None:
            print(
                f"{e['workload']}: {cz} reaches {e['fraction_of_limit']:.2f} of the decode limit "
                f"({e['limit']} {e['limit_s']:.3f}s vs {cz} {e['cuzarr_s']:.3f}s, same run)"
            )
        if e.get("fraction_of_assemble") is not None and e["workload"] == "write":
            x = e.get("assemble_x_zarr")
            print(
                f"write: {cz} reaches {e['fraction_of_assemble']:.2f} of the store limit "
                f"({ASSEMBLE} {e['assemble_s']:.3f}s: copy out, encode, write files, no Zarr)"
                + (f", which is itself {x:.2f}x zarr-python's write" if x else "")
            )
        elif e.get("fraction_of_assemble") is not None:
            print(
                f"{e['workload']}: {cz} reaches {e['fraction_of_assemble']:.2f} of the assemble "
                f"limit ({ASSEMBLE} {e['assemble_s']:.3f}s, itself "
                f"{e.get('assemble_fraction_of_limit', float('nan')):.2f} of the decode limit)"
            )
            if e.get("first_touch_s") and e.get("limit_s"):
                ft = e["first_touch_s"]
                print(
                    f"{e['workload']}: zeroing a fresh output array alone (first touch, all "
                    f"cores) took {ft:.3f}s = {ft / e['limit_s']:.2f} of the decode limit's time"
                )
    for e in summary:
        if e.get("cuzarr_rss_per_out") is not None:
            v = e["cuzarr_rss_per_out"]
            bp = e.get("best_peer_rss_per_out")
            # The goal is about the large reads; a 40 MiB tiny-chunk output is
            # smaller than the interpreter and its imports (~45 MiB) alone.
            goal = (
                f"goal <= 1.2: {'met' if v <= 1.2 else 'NOT met'}"
                if e["workload"] in RSS_GOAL_ROWS
                else "no goal: the interpreter's own RSS dominates at this size"
            )
            print(
                f"{e['workload']}: {cz} peak RSS = {v:.2f}x the output size "
                f"({goal}); growth during the read "
                f"(dRSS) = {e['cuzarr_drss_per_out']:.2f}x"
                + (f"; lowest peer: {bp[0]} {bp[1]:.2f}x" if bp else "")
            )


def json_document(args: Any, sizes: dict[str, Any], rows: dict[Any, Any],
                  summary: list[dict[str, Any]], results: list[dict[str, Any]],
                  create_us: float) -> dict[str, Any]:
    """The run as one JSON document: machine, parameters, versions, every row."""
    versions = {}
    for r in results:
        if r.get("ok") and "info" in r:
            versions[r["contender"]] = r["info"]
    rsz = sizes["rows"]
    out = {
        "machine": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": sizes["load"][0],
            "loadavg_end": sizes["load"][1],
            "new_file_us": create_us,
        },
        "params": {
            "size_mib": args.size_mib,
            "shape": sizes["shape"],
            "chunks": CHUNKS,
            "tiny_shape": sizes["tiny_shape"],
            "tiny_chunks": TINY_CHUNKS,
            "tiny_n": sizes["tiny_n"],
            "shard_shape": sizes["shard_shape"],
            "shard_inner_chunks": SHARD_INNER,
            "random_reads": RANDOM_N,
            "random_window": RANDOM_WIN,
            "vindex_points": VINDEX_POINTS,
            "workloads": args.workloads,
            "repeats": args.repeats,
            "impl_module": args.impl_module,
            "cuzarr_mem": args.cuzarr_mem,
            "tiny_store": args.tiny_store,
            "order": args.order,
            "isolation": args.isolation,
            "dtype": DTYPE,
            "codec": ZSTD_V3,
        },
        "versions": versions,
        "results": {
            f"{wl}/{c}": {
                "median_s": row["median"],
                "min_s": row["min"],
                "times_s": row["times"],
                "cpu_s": row["cpu"],
                "gbps": rsz[wl]["bytes"] / row["median"] / 1e9 if row["median"] else None,
                "us_per_item": row["median"] / rsz[wl]["items"] * 1e6 if row["median"] else None,
                "item": rsz[wl]["item"],
                # kept for older readers of the JSON (= us_per_item)
                "us_per_chunk": row["median"] / rsz[wl]["items"] * 1e6 if row["median"] else None,
                "rss_peak_mib": max(row["rss_peak"]) / 2**20 if row["rss_peak"] else None,
                "rss_per_out": rss_ratio(row, rsz[wl]["bytes"]) if wl in FULL_READS else None,
                "verified": row["verified"],
                "stored_bytes": row["stored"],
                "errors": row["errors"],
                "warnings": row["warnings"],
            }
            for (wl, c), row in rows.items()
        },
        "summary": summary,
    }
    return out
