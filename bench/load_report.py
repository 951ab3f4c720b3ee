"""bench/load.py's report: calls, errors, latencies and resources per interval, and the summary with
the ratio of the last interval's throughput to the first's."""
from __future__ import annotations

import statistics
from collections import Counter
from typing import TYPE_CHECKING

from foundation import pct

if TYPE_CHECKING:  # load.py runs as a script; its Stats is only named here
    from load import Stats

TARGET_RATIO = 0.9


RPCS = ("Write", "Search", "GetMemory", "ListMemories", "GetWorkingMemory", "UpdateMemory", "Forget", "CloseSession")


def interval_rows(stats: Stats, samples: list[dict], duration: float, interval: float) -> list[dict]:
    n = max(1, int(duration // interval + 1e-9))
    rows = []
    for i in range(n):
        lo, hi = i * interval, min(duration, (i + 1) * interval)
        recs = [r for r in stats.records if lo <= r.t < hi]
        ok = [r for r in recs if r.code == "OK"]
        by_rpc = {}
        for rpc in RPCS:
            ms = [r.ms for r in ok if r.rpc == rpc]
            by_rpc[rpc] = {"ok": len(ms), "per_s": len(ms) / (hi - lo),
                           "p50": statistics.median(ms) if ms else None, "p95": pct(ms, 95) if ms else None}
        errors = Counter(f"{r.rpc} {r.code} {r.reason}".strip() for r in recs if r.code != "OK")
        inside = [s for s in samples if lo <= s["t"] <= hi + 1] or samples[-1:]
        last = inside[-1] if inside else {}
        cpu, windows = {}, {}
        if samples:
            a_ = min(samples, key=lambda x: abs(x["t"] - lo))
            b_ = min(samples, key=lambda x: abs(x["t"] - hi))
            span = b_["t"] - a_["t"]
            if span > 0:
                for k in ("server", "postgres", "redis", "bench", "host"):
                    cpu[k] = (b_[f"cpu_{k}_s"] - a_[f"cpu_{k}_s"]) / span  # cores busy on average
                cpu["others"] = max(0.0, cpu["host"] - cpu["server"] - cpu["postgres"] - cpu["redis"] - cpu["bench"])
                windows = {k: (b_[k] - a_[k]) * (hi - lo) / span for k in ("windows_built", "windows_emptied")}
        rows.append({
            "from_s": lo, "to_s": hi, "calls_per_s": len(ok) / (hi - lo), "ok": len(ok), "errors": dict(errors),
            "retries": sum(1 for t in stats.retries if lo <= t < hi), "rpc": by_rpc,
            "all_p50": statistics.median([r.ms for r in ok]) if ok else None,
            "all_p95": pct([r.ms for r in ok], 95) if ok else None,
            "resources": last, "cpu_cores": cpu, "windows": windows,
            "lock_waiters": dict(sum((Counter({q: n}) for smp in inside for n, q in smp.get("lock_waiters", [])),
                                     Counter())),
            "calls_per_server_cpu_s": len(ok) / (cpu["server"] * (hi - lo)) if cpu.get("server") else None,
            "max": {k: max(s[k] for s in inside) for k in ("server_rss_mb", "pg_rss_mb", "redis_rss_mb", "running",
                                                           "lock_waits", "awaiting")} if inside else {},
        })
    return rows


def fmt(v, width=7, digits=1) -> str:
    return f"{v:{width}.{digits}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def print_interval(r: dict) -> None:
    res, mx = r["resources"], r["max"]
    print(f"\n[{r['from_s']:5.0f}-{r['to_s']:4.0f} s] {r['calls_per_s']:.1f} calls/s ok ({r['ok']}), "
          f"p50 {fmt(r['all_p50'], 0)} ms, p95 {fmt(r['all_p95'], 0)} ms; errors {sum(r['errors'].values())}, "
          f"SDK retries {r['retries']}", flush=True)
    print(f"  {'rpc':18s} {'calls/s':>8s} {'p50 ms':>8s} {'p95 ms':>8s}")
    for rpc, v in r["rpc"].items():
        if v["ok"]:
            print(f"  {rpc:18s} {v['per_s']:8.2f} {fmt(v['p50'], 8)} {fmt(v['p95'], 8)}")
    for what, n in sorted(r["errors"].items()):
        print(f"  error {what}: {n}")
    cpu = r["cpu_cores"]
    if cpu:
        print(f"  CPU (cores busy): server {cpu['server']:.2f}, postgres {cpu['postgres']:.2f}, redis {cpu['redis']:.2f},"
              f" this bench {cpu['bench']:.2f}, other processes {cpu['others']:.2f} (load average {res.get('loadavg', 0):.1f});"
              f" {fmt(r['calls_per_server_cpu_s'], 0)} calls per server CPU second")
    if r["windows"]:
        w = r["windows"]
        print(f"  turn windows built {w['windows_built']:.0f}, emptied {w['windows_emptied']:.0f} "
              f"({w['windows_built'] / max(1, r['ok']):.1f} built per call)")
    if res:
        print(f"  RSS MB: server {res['server_rss_mb']:.0f} (threads {res['server_threads']}), postgres "
              f"{res['pg_rss_mb']:.0f} ({res['pg_processes']} processes), redis {res['redis_rss_mb']:.0f} "
              f"(used {res['redis_used_mb']:.1f} MB, {res['redis_keys']} keys)")
        print(f"  memories: {res['rows']} rows ({res['active']} active, {res['dead']} dead tuples, "
              f"{res['table_mb']:.1f} MB, autovacuums {res['autovacuums']}), history {res['history']}, "
              f"write_requests {res['write_requests']}; "
              f"sessions awaiting windows {res['awaiting']} (max {mx['awaiting']}, oldest {res['window_lag_s']:.0f} s); "
              f"pg backends running {res['running']} (max {mx['running']}), waiting on a lock max {mx['lock_waits']}",
              flush=True)
    for q, n in Counter(r["lock_waiters"]).most_common(3):
        print(f"  waiting on a lock in {n} backend-samples: {q}")


def summary(rows: list[dict], stats: Stats) -> dict:
    first, last = rows[0], rows[-1]
    errors = sum(1 for r in stats.records if r.code != "OK")
    ratio = last["calls_per_s"] / first["calls_per_s"] if first["calls_per_s"] else float("nan")
    per_rpc = {rpc: (last["rpc"][rpc]["per_s"] / first["rpc"][rpc]["per_s"]) if first["rpc"][rpc]["per_s"] else None
               for rpc in RPCS}
    res0, res1 = first["resources"], last["resources"]
    c0, c1 = first["calls_per_server_cpu_s"], last["calls_per_server_cpu_s"]
    return {"first_calls_per_s": first["calls_per_s"], "last_calls_per_s": last["calls_per_s"], "ratio": ratio,
            "calls_per_server_cpu_s": (c0, c1), "ratio_per_cpu": c1 / c0 if c0 and c1 else None,
            "others_cores": (first["cpu_cores"].get("others"), last["cpu_cores"].get("others")),
            "ratio_by_rpc": per_rpc, "errors": errors, "calls": len(stats.records),
            "retries": len(stats.retries),
            "server_rss_mb": (res0.get("server_rss_mb"), res1.get("server_rss_mb")),
            "pg_rss_mb": (res0.get("pg_rss_mb"), res1.get("pg_rss_mb")),
            "redis_rss_mb": (res0.get("redis_rss_mb"), res1.get("redis_rss_mb")),
            "rows": (res0.get("rows"), res1.get("rows"))}


def print_summary(s: dict, n_intervals: int) -> None:
    print(f"\nthroughput: first interval {s['first_calls_per_s']:.1f} calls/s, last {s['last_calls_per_s']:.1f} "
          f"calls/s; ratio last/first {s['ratio']:.2f} over {n_intervals} intervals "
          f"(target >= {TARGET_RATIO}: {'OK' if s['ratio'] >= TARGET_RATIO else 'MISS'})")
    if s["ratio_per_cpu"] is not None:
        print(f"  per server CPU second: first {s['calls_per_server_cpu_s'][0]:.1f}, last {s['calls_per_server_cpu_s'][1]:.1f}"
              f" calls; ratio {s['ratio_per_cpu']:.2f} (other processes kept {s['others_cores'][0]:.2f} -> "
              f"{s['others_cores'][1]:.2f} cores busy: the plain ratio is only fair when that stays put)")
    print("  by rpc: " + ", ".join(f"{k} {v:.2f}" for k, v in s["ratio_by_rpc"].items() if v is not None))
    print(f"errors: {s['errors']} of {s['calls']} calls (target 0: {'OK' if s['errors'] == 0 else 'MISS'}); "
          f"SDK retries {s['retries']}")
    print("RSS MB first -> last interval: server {:.0f} -> {:.0f}, postgres {:.0f} -> {:.0f}, redis {:.0f} -> {:.0f};"
          " rows {} -> {}".format(*s["server_rss_mb"], *s["pg_rss_mb"], *s["redis_rss_mb"], *s["rows"]))
