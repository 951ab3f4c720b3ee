"""Tenancy benchmark: vector search for a small tenant stored beside a big one.

Starts embedded PostgreSQL in a temp folder under /tmp, migrates, loads 100 tenants x 1,000 memories,
"big" with 100,000, "pct1" with 1% of all rows and "tiny" with 5, then searches (top 10) as pct1, tiny,
a 1,000-row tenant and big in three modes, alternating query by query so that noise hits all alike:
  server   as shipped: create_pool() + MemoryStore.vector_search inside caller_session (RLS applies);
  owner    the same SQL as owner (no RLS, so true row estimates) with the three settings;
  control  as owner without them (iterative_scan off, ef_search 40, plan_cache_mode auto): Mem0's case.
Reported: recall@10 against exact search (numpy, ties count), searches with fewer hits than min(10,
rows), empty ones, other tenants' hits, p50/p95; the same query 50x in a row on a fresh connection
(asyncpg prepares it: PostgreSQL may go generic from run 6), runs 6..50, with pg_prepared_statements'
plan counts; EXPLAIN ANALYZE of custom and generic plans. Vectors are synthetic (embedding 200k texts
on 2 cores takes hours): 384-d unit vectors near one of 2,000 topic centres shared by all tenants, plus
variation in the topic's own 16-d plane and noise; a tenant of n rows uses n/10 topics, so tenants
overlap, which is what makes post-filtering lose results. Queries: --queries near a stored vector of
the tenant, plus a quarter as many random directions. The HNSW index is built after the bulk COPY.

Run:  .venv/bin/python bench/tenancy.py [--big 100000] [--small-tenants 100] [--per-small 1000]
          [--queries 200] [--json out.json]       (exit status 1 when a check of the server fails)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.embedded import EmbeddedPostgres
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.migrations import migrate
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.session import caller_session
from memplane_server.stores.postgres.sql import MEMORY_COLUMNS, Params, filter_clauses, visibility
from memplane_server.stores.postgres.tenancy import TenancyStore

DIM, CENTRES, PLANE, TOPIC_ROWS, SPREAD, NOISE, QUERY_NOISE = 384, 2000, 16, 10, 0.8, 0.3, 0.5
K, EF_SEARCH, TINY, WARMUP, REPEAT_QUERIES, REPEATS, CUSTOM_RUNS = 10, 100, 5, 10, 10, 50, 5
MODES = ("server", "owner", "control")
OWNER_SETTINGS = {"owner": "SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 100;"
                           " SET plan_cache_mode = force_custom_plan",
                  "control": "SET hnsw.iterative_scan = off; SET hnsw.ef_search = 40; SET plan_cache_mode = auto"}
SETTINGS = ("SELECT string_agg(name || '=' || setting || ' (' || source || ')', ', ' ORDER BY name) FROM pg_settings"
            " WHERE name IN ('hnsw.iterative_scan', 'hnsw.ef_search', 'plan_cache_mode')")
PLANS = ("SELECT coalesce(sum(generic_plans), 0)::int AS generic, coalesce(sum(custom_plans), 0)::int AS custom,"
         f" ({SETTINGS}) AS settings FROM pg_prepared_statements WHERE statement LIKE 'SELECT m.tenant_id%'")
KEY_LINE = re.compile(r"->|^Limit|Rows Removed|Index Cond|Execution Time")


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def sample(rng: np.random.Generator, space: tuple, topics: np.ndarray, n: int) -> np.ndarray:
    """n vectors near the topics' centres (shared by all tenants), varying in each topic's own plane."""
    (centres, planes), k, out = space, rng.choice(topics, n), np.empty((n, DIM), np.float32)
    for s in range(0, n, 4096):
        kk = k[s:s + 4096]
        local = np.einsum("nl,nld->nd", rng.standard_normal((len(kk), PLANE)) / np.sqrt(PLANE), planes[kk])
        out[s:s + len(kk)] = unit(centres[kk] + SPREAD * local + NOISE * unit(rng.standard_normal((len(kk), DIM))))
    return out


class Tenant:
    def __init__(self, name: str, vecs: np.ndarray) -> None:
        self.name, self.vecs, self.ids = name, vecs, [uuid.uuid4() for _ in range(len(vecs))]
        self.pos = {u: i for i, u in enumerate(self.ids)}
        self.caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=name, agent_id=None, domains={})

    def score(self, q: np.ndarray, ids: list[uuid.UUID]) -> tuple[float, bool, int, bool]:
        """recall@10 against brute force (ties count as found), short?, other tenants' hits, empty?"""
        k, dist = min(K, len(self.ids)), 1.0 - self.vecs @ q
        kth = np.partition(dist, k - 1)[k - 1]
        good = sum(1 for i in ids if i in self.pos and dist[self.pos[i]] <= kth + 1e-5)
        return min(good, k) / k, len(ids) < k, sum(1 for i in ids if i not in self.pos), not ids


def make_tenants(args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Tenant]:
    pct = round((args.big + args.small_tenants * args.per_small + TINY) / 99)  # 1% of all rows
    spec = [("big", args.big), ("pct1", pct), ("tiny", TINY)]
    spec += [(f"small-{i:03d}", args.per_small) for i in range(args.small_tenants)]
    space = unit(rng.standard_normal((CENTRES, DIM))), unit(rng.standard_normal((CENTRES, PLANE, DIM)))
    topics = {name: rng.choice(CENTRES, min(CENTRES, max(1, n // TOPIC_ROWS)), replace=False) for name, n in spec}
    return {name: Tenant(name, sample(rng, space, topics[name], n)) for name, n in spec}


def make_queries(t: Tenant, n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    near = t.vecs[rng.integers(len(t.ids), size=n)] + QUERY_NOISE * rng.standard_normal((n, DIM)) / np.sqrt(DIM)
    return unit(np.vstack([near, rng.standard_normal((n // 4, DIM))])), ["near"] * n + ["random"] * (n // 4)


def vector_sql(t: Tenant, q: np.ndarray) -> tuple[str, list]:
    """The SQL text of MemoryStore.vector_search (MemoryFilter(), as_of None)."""
    p = Params(q)
    where = [visibility(t.caller, p), *filter_clauses(MemoryFilter(), p, as_of=None), "m.embedding IS NOT NULL"]
    return (f"SELECT {MEMORY_COLUMNS}, 1 - (m.embedding <=> $1) AS similarity FROM memories m"
            f" WHERE {' AND '.join(where)} ORDER BY m.embedding <=> $1 LIMIT {p.add(K)}", p.values)


async def load(dsn: str, tenants: dict[str, Tenant], rng: np.random.Generator) -> dict:
    conn, out = await asyncpg.connect(dsn), {}
    try:
        await migrate(conn)
        await register_vector(conn)
        for name in tenants:  # TenancyStore only calls fetchrow, which a connection has too
            await TenancyStore(conn).create_tenant(name, "", 0)
        await conn.execute("DROP INDEX memories_embedding")
        order = [(t, i) for t in tenants.values() for i in range(len(t.ids))]
        now, t0 = datetime.now(timezone.utc), time.perf_counter()
        records = ((t.name, t.ids[i], "global", "semantic", "fact", f"{t.name} memory {i}", 1.0, "active", now,
                    t.vecs[i], "synthetic") for j in rng.permutation(len(order)) for t, i in [order[j]])
        await conn.copy_records_to_table("memories", records=records, columns=[
            "tenant_id", "id", "scope", "layer", "kind", "content", "confidence", "status", "occurred_at",
            "embedding", "embedding_model"])
        out["copy_s"] = time.perf_counter() - t0
        await conn.execute("SET maintenance_work_mem = '1GB'; SET max_parallel_maintenance_workers = 1")
        for key, sql in (("hnsw_s", "CREATE INDEX memories_embedding ON memories USING hnsw"
                                    " (embedding vector_cosine_ops)"), ("vacuum_s", "VACUUM ANALYZE memories")):
            t0 = time.perf_counter()
            await conn.execute(sql)
            out[key] = time.perf_counter() - t0
        out |= dict(await conn.fetchrow(
            "SELECT count(*) AS rows, (SELECT sum(memory_count) FROM tenant_usage) AS usage_rows, pg_table_size("
            "'memories') >> 20 AS table_mb, pg_relation_size('memories_embedding') >> 20 AS hnsw_mb, current_setting("
            "'server_version') AS postgres, current_setting('shared_buffers') AS shared_buffers, (SELECT extversion"
            " FROM pg_extension WHERE extname = 'vector') AS pgvector FROM memories"))
    finally:
        await conn.close()
    return out


class Mode:
    """One way of searching (see the module docstring): a server pool or an owner connection."""

    pool = conn = store = None

    @classmethod
    async def open(cls, name: str, dsn: str, size: int) -> Mode:
        self = cls()
        if name in OWNER_SETTINGS:
            self.conn = await asyncpg.connect(dsn)
            await register_vector(self.conn)
            await self.conn.execute(OWNER_SETTINGS[name])
        else:
            self.pool = await create_pool(dsn, size=size, ef_search=EF_SEARCH)
            self.store = MemoryStore(self.pool, default_max_memories=0)
        return self

    async def search(self, t: Tenant, q: np.ndarray) -> list[uuid.UUID]:
        if self.conn is None:
            hits = await self.store.vector_search(t.caller, MemoryFilter(), q, limit=K, as_of=None)
            return [h.record.id for h in hits]
        sql, values = vector_sql(t, q)
        return [r["id"] for r in await self.conn.fetch(sql, *values)]

    @asynccontextmanager
    async def session(self, t: Tenant):
        """A connection as the searches use it: inside caller_session, or the owner connection."""
        if self.conn is not None:
            async with self.conn.transaction():
                yield self.conn
        else:
            async with caller_session(self.pool, t.caller) as conn:
                yield conn

    async def explain(self, t: Tenant, q: np.ndarray, generic: bool = False) -> list[str]:
        sql, values = vector_sql(t, q)
        async with self.session(t) as conn:
            if not generic:
                return [r[0] for r in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *values)]
            await conn.execute(f"SET LOCAL plan_cache_mode = force_generic_plan; PREPARE bench_generic AS {sql}")
            args = ", ".join("'[" + ",".join(f"{x:.9g}" for x in v) + "]'" if isinstance(v, np.ndarray) else
                             "'{" + ",".join(v) + "}'" if isinstance(v, list) else
                             str(v) if isinstance(v, int) else f"'{v}'" for v in values)  # tenant ids are plain
            try:
                return [r[0] for r in await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_generic({args})")]
            finally:
                await conn.execute("DEALLOCATE bench_generic")

    async def close(self) -> None:
        await (self.conn.close() if self.conn is not None else self.pool.close())


def summary(obs: list[tuple], **extra) -> dict:
    """obs: (latency s, recall, short, foreign, empty, kind)."""
    lat, rec, kinds = (np.array([r[i] for r in obs]) for i in (0, 1, 5))
    out = extra | {"searches": len(obs), "recall_mean": float(rec.mean()), "recall_min": float(rec.min()),
                   **{k: int(sum(r[i] for r in obs)) for i, k in ((2, "short"), (3, "foreign"), (4, "empty"))},
                   "p50_ms": float(np.percentile(lat, 50) * 1000), "p95_ms": float(np.percentile(lat, 95) * 1000)}
    return out | {f"recall_{k}": float(rec[kinds == k].mean()) for k in ("near", "random") if (kinds == k).any()}


async def measure(dsn: str, tenants: dict[str, Tenant], measured: list[str], args, rng) -> dict:
    queries = {name: make_queries(tenants[name], args.queries, rng) for name in measured}
    res: dict = {"plans": {}, "normal": {}, "repeated": {}, "explain": {}}
    modes = {m: await Mode.open(m, dsn, 2) for m in MODES}
    try:
        results = {(m, n): [] for m in MODES for n in measured}
        total = len(queries[measured[0]][1])
        for i in range(-WARMUP, total):  # tenants and modes alternate query by query
            for name in measured:
                t, (qs, kinds) = tenants[name], queries[name]
                for m in MODES:
                    t0 = time.perf_counter()
                    ids = await modes[m].search(t, qs[i % total])
                    if i >= 0:
                        results[m, name].append((time.perf_counter() - t0, *t.score(qs[i], ids), kinds[i]))
        res["normal"] = {f"{m}/{n}": summary(r, rows=len(tenants[n].ids)) for (m, n), r in results.items()}
        for m, mode in modes.items():  # the connection the searches used (asyncpg pools reuse the last released)
            async with mode.session(tenants["pct1"]) as conn:
                res["plans"][m] = dict(await conn.fetchrow(PLANS))
        for key, names in (("server", ("pct1", "big")), ("owner", ("pct1",)),
                           ("control", ("pct1",)), ("generic", ("pct1", "big"))):
            for name in names:
                mode, q = modes["server" if key == "generic" else key], queries[name][0][0]
                res["explain"][f"{key}/{name}"] = await mode.explain(tenants[name], q, key == "generic")
    finally:
        for mode in modes.values():
            await mode.close()
    t = tenants["pct1"]
    for m in MODES:  # the same query REPEATS times in a row on one fresh connection
        rows, plans = [], {"generic": 0, "custom": 0}
        for q in queries["pct1"][0][:REPEAT_QUERIES]:
            mode = await Mode.open(m, dsn, 1)
            try:
                for run in range(1, REPEATS + 1):
                    t0 = time.perf_counter()
                    ids = await mode.search(t, q)
                    if run > CUSTOM_RUNS:
                        rows.append((time.perf_counter() - t0, *t.score(q, ids), "near"))
                async with mode.session(t) as conn:
                    plans = {k: v + plans[k] for k, v in (await conn.fetchrow(PLANS)).items() if k in plans}
            finally:
                await mode.close()
        res["repeated"][m] = summary(rows) | plans
    return res


def brief(line: str) -> str:
    line = re.sub(r"'\[[^\]]*\]'::vector", "$q", line)
    line = re.sub(r"NULLIF\(current_setting\('(memplane\.\w+)'::text, true\), ''::text\)", r"setting(\1)", line)
    return line if len(line) <= 160 else line[:157] + "..."


def report(args, sizes: dict, tm: dict, res: dict, measured: list[str]) -> list[bool]:
    print(f"Memplane tenancy benchmark: {tm['rows']:,} memories in {len(sizes)} tenants (big {args.big:,};"
          f" {args.small_tenants} x {args.per_small:,}; pct1 {sizes['pct1']:,} = 1%; tiny {TINY})\n"
          f"PostgreSQL {tm['postgres']}, pgvector {tm['pgvector']}, shared_buffers {tm['shared_buffers']},"
          f" {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; synthetic 384-d vectors, {CENTRES:,} topics\n"
          f"load: generate {tm['generate_s']:.1f} s, COPY {tm['copy_s']:.1f} s ({tm['rows'] / tm['copy_s']:,.0f}"
          f" rows/s), HNSW build {tm['hnsw_s']:.1f} s (maintenance_work_mem 1GB, 1 worker), VACUUM ANALYZE"
          f" {tm['vacuum_s']:.1f} s; table {tm['table_mb']} MB, HNSW {tm['hnsw_mb']} MB, tenant_usage"
          f" {tm['usage_rows']:,}\nafter the searches, on the connection they used:")
    for m, p in res["plans"].items():
        print(f"  {m:8} {p['settings']}; vector query: {p['custom']} custom, {p['generic']} generic plans")
    print(f"\n{'mode':8} {'tenant':10} {'rows':>7} {'searches':>8} {'recall':>6} {'min':>5} {'near':>5} {'random':>6}"
          f" {'short':>5} {'empty':>5} {'foreign':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for key, s in res["normal"].items():
        m, name = key.split("/")
        print(f"{m:8} {name:10} {s['rows']:>7,} {s['searches']:>8} {s['recall_mean']:>6.3f}"
              f" {s['recall_min']:>5.2f} {s['recall_near']:>5.3f} {s['recall_random']:>6.3f} {s['short']:>5}"
              f" {s['empty']:>5} {s['foreign']:>7} {s['p50_ms']:>7.2f} {s['p95_ms']:>7.2f}")
    print(f"\nsame query {REPEATS}x in a row on a fresh connection, pct1, {REPEAT_QUERIES} queries, runs"
          f" {CUSTOM_RUNS + 1}..{REPEATS} scored:")
    for m, r in res["repeated"].items():
        print(f"  {m:8} {r['searches']} searches: recall mean {r['recall_mean']:.3f} min {r['recall_min']:.2f},"
              f" short {r['short']}, empty {r['empty']}, foreign {r['foreign']}, p50 {r['p50_ms']:.2f} ms;"
              f" {r['custom']} custom, {r['generic']} generic plans")
    print("\nEXPLAIN (ANALYZE, BUFFERS) of the vector query, key lines; generic = PREPARE and EXECUTE inside"
          " caller_session on the server pool under plan_cache_mode force_generic_plan:")
    for key, lines in res["explain"].items():
        print(f"  [{key}]\n" + "\n".join("    " + brief(line) for line in lines if KEY_LINE.search(line.strip())))
    n, verdicts = res["normal"], []
    for m in ("server", "owner"):
        pct, big, rep = n[f"{m}/pct1"], n[f"{m}/big"], res["repeated"][m]
        short = sum(n[f"{m}/{x}"]["short"] for x in measured) + rep["short"]
        foreign = sum(n[f"{m}/{x}"]["foreign"] for x in measured) + rep["foreign"]
        checks = [(f"pct1 recall@10 {pct['recall_mean']:.3f} >= 0.95", pct["recall_mean"] >= 0.95),
                  (f"pct1 recall@10, same query repeated {rep['recall_mean']:.3f} >= 0.95", rep["recall_mean"] >= 0.95),
                  (f"searches returning fewer hits than exist: {short} == 0", short == 0),
                  (f"hits of other tenants: {foreign} == 0", foreign == 0)]
        print(f"\n{m}:\n" + "\n".join(f"  {'PASS' if ok else 'FAIL'}  {text}" for text, ok in checks))
        print(f"  info  p50 pct1 {pct['p50_ms']:.2f} ms, big {big['p50_ms']:.2f} ms"
              f" (ratio {pct['p50_ms'] / big['p50_ms']:.2f})")
        verdicts += [ok for _, ok in checks] if m == "server" else []
    ctl, rep = n["control/pct1"], res["repeated"]["control"]
    detected = min(ctl["recall_mean"], rep["recall_mean"]) < 0.95 or ctl["short"] + rep["short"] > 0
    print(f"\ncontrol:\n  {'PASS' if detected else 'FAIL'}  it loses results for pct1 (recall {ctl['recall_mean']:.3f},"
          f" repeated {rep['recall_mean']:.3f}, short {ctl['short'] + rep['short']}): the benchmark sees the problem"
          f"\ntotal run time {tm['total_s']:.0f} s")
    return verdicts + [detected]


async def run(args: argparse.Namespace, dsn: str, started: float) -> int:
    rng, t0 = np.random.default_rng(args.seed), time.perf_counter()
    tenants = make_tenants(args, rng)
    timings = {"generate_s": time.perf_counter() - t0} | await load(dsn, tenants, rng)
    measured = ["pct1", "tiny", *(["small-000"] if args.small_tenants else []), "big"]
    res = await measure(dsn, tenants, measured, args, rng)
    timings["total_s"] = time.perf_counter() - started
    sizes = {name: len(t.ids) for name, t in tenants.items()}
    verdicts = report(args, sizes, timings, res, measured)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "timings": timings,
                                         "sizes": sizes, **res}, indent=2, default=str))
    return 0 if all(verdicts) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, default in (("--big", 100_000), ("--small-tenants", 100), ("--per-small", 1000), ("--seed", 1)):
        ap.add_argument(flag, type=int, default=default)
    ap.add_argument("--queries", type=int, default=200, help="near queries per tenant (plus a quarter random)")
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    if args.big < K or args.per_small < 1 or args.queries < 4:
        ap.error("--big must be >= 10, --per-small >= 1, --queries >= 4")
    started = time.perf_counter()
    data_dir = Path(tempfile.mkdtemp(prefix="memplane-tenancy-", dir="/tmp"))
    data_dir.chmod(0o755)  # the unprivileged postgres user must traverse it
    postgres = EmbeddedPostgres(data_dir)
    try:
        return asyncio.run(run(args, postgres.start(), started))
    finally:
        try:
            postgres.stop()
        except Exception as exc:  # keep cleaning up
            print(f"warning: stopping PostgreSQL: {exc}", file=sys.stderr)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
