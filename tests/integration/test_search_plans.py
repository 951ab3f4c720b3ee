"""Every search channel reads through an index under row-level security: at a few thousand rows of
one tenant, EXPLAIN of each channel's statement, as the caller's session runs it (role
memplane_app, the caller's settings), shows no sequential scan of memories, the keyword channels'
matching inside mp_keyword_matches included; and a term common in the tenant does not make rows
match."""
from __future__ import annotations

import asyncio
import math
import re
import uuid
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
import pytest
import pytest_asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.core.retrieval.intent import detect_intent
from memplane_server.core.retrieval.time_expressions import parse_time_range
from memplane_server.core.retrieval.tokens import keyword_tokens, lookup_names
from memplane_server.services.admin import AdminService
from memplane_server.services.search.channels import QueryParts, lexical_channels, plan_channels
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.search.plans import explaining, parse_tsvector
from memplane_server.stores.postgres.search.reads import SearchReads
from tests.integration.conftest import PLATFORM
from tests.support.bulk_rows import insert_rows

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROWS = 4000
QUERIES = [
    "What did bob say about w14 and x3?",  # bob is in half the rows: left out of the match
    "What is Person 7's attr3?",  # the exact channel
    "What happened in March 2023?",  # the time channel
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def big(deps) -> Caller:
    """A tenant of ROWS rows beside another of half as many, analysed, its keywords counted."""
    admin = AdminService(deps.tenancy)
    tenants = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    async with deps.memories.pool.acquire() as conn:
        for tenant, rows in zip(tenants, (ROWS, ROWS // 2)):
            await admin.create_tenant(PLATFORM, tenant, tenant, 0, False)
            await insert_rows(conn, tenant, rows)
    assert await deps.keyword_stats.refresh(tenants[0])
    return Caller(key_id="plans", role=Role.WRITER, tenant_id=tenants[0], agent_id=None, domains={})


def parts_of(q: str) -> QueryParts:
    vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    now = datetime(2024, 6, 1, tzinfo=timezone.utc)
    return QueryParts(vector / np.linalg.norm(vector), list(dict.fromkeys(keyword_tokens(q))), lookup_names(q),
                      detect_intent(q), parse_time_range(q, now, None))


@pytest.mark.parametrize("query", QUERIES)
async def test_no_channel_scans_the_tenant(deps, big, query):
    plan = plan_channels(deps.memories, deps.settings, big, MemoryFilter(), parts_of(query), limit=50,
                         as_of=None, lead=10)
    assert {"vector", "keyword", "preferences"} <= set(plan)
    for name, run in plan.items():
        with explaining() as plans:
            await run()
        assert plans, name
        text = "\n".join(plans)
        assert "Seq Scan on memories" not in text, f"{name}:\n{text}"
        if name.startswith("keyword"):
            # The matching statement runs inside the SECURITY DEFINER function: its plan comes
            # from auto_explain, and it must read the keyword keys' index.
            assert "-- inside a function" in text and "keyword_keys" in text, f"{name}:\n{text}"


@pytest.mark.parametrize("query", QUERIES)
async def test_each_channel_reads_its_leading_candidates_whole_and_the_rest_as_candidates(deps, big, query):
    lead = 3
    plan = plan_channels(deps.memories, deps.settings, big, MemoryFilter(), parts_of(query), limit=50,
                         as_of=None, lead=lead)
    found = dict(zip(plan, await asyncio.gather(*(run() for run in plan.values()))))
    assert any(found.values())
    for name, scored in found.items():
        assert all(s.whole for s in scored[:lead]), name
    whole = {s.record.id: s.record for scored in found.values() for s in scored if s.whole}
    assert whole == {r.id: r for r in await deps.memories.get_many(big, list(whole))}
    assert any(not s.whole and s.record.metadata == {} for scored in found.values() for s in scored)


async def test_a_term_common_in_the_tenant_makes_no_match(deps, big):
    store = deps.memories

    async def search(terms: list[str], **kw) -> list[int]:
        found = await store.keyword_search(big, MemoryFilter(), terms, pool=5000, as_of=None, limit=5000, **kw)
        return [int(s.record.content.removeprefix("row ")) for s in found]  # tests/support/bulk_rows.py

    share = deps.settings.keyword_common_share
    assert await search(["bob"], common_share=share) == []
    mixed = await search(["bob", "w14"], common_share=share)
    assert mixed and all(14 in (g * 7 % 997, g * 13 % 991) for g in mixed)
    # With no cut-off every row holding the word matches.
    assert len(await search(["bob"])) == ROWS // 2


async def test_the_rarest_terms_join_the_match_while_their_expected_matches_fit_the_bound(deps, big):
    """x3 and x4 are each in 2% of the tenant's rows (80; listed in its statistics), w14 in a few
    (not listed: rare). Bounded to 100 expected matches, w14 and x3 join (0 + 80) and x4 (160) does
    not; unbounded, all three do (tests/support/bulk_rows.py)."""
    async def matched(bound: int, terms=("x4", "w14", "x3")) -> list[str]:
        async with deps.memories.session(big) as conn:
            rows = await conn.fetch(
                "SELECT m.keywords::text FROM mp_keyword_matches($1::text[], '', false, $2::real, $3::int) k"
                " JOIN memories m ON m.id = k.id", list(terms), deps.settings.keyword_common_share, bound)
        return [r[0] for r in rows]

    bounded = await matched(100)
    assert bounded and all("'w14'" in k or "'x3'" in k for k in bounded)
    everything = await matched(100_000)
    assert any("'x4'" in k and "'x3'" not in k and "'w14'" not in k for k in everything)
    assert len(everything) > len(bounded) >= 80
    # The rarest term joins whatever the bound.
    alone = await matched(0, ("x4", "x3"))
    assert alone and all("'x3'" in k for k in alone)


async def alone_and_together(plan, names: list[str]) -> tuple[dict, dict, list[str]]:
    """Each channel's answer run alone, then all started together (as Search starts them), with the
    plans of what ran together."""
    alone = {name: [(s.record.id, s.score) for s in await plan[name]()] for name in names}
    with explaining() as plans:
        found = await asyncio.gather(*(plan[name]() for name in names))
    return alone, {name: [(s.record.id, s.score) for s in scored] for name, scored in zip(names, found)}, plans


async def exact_nearest(deps, caller: Caller, vector, *, windows: bool = False, limit: int = 50) -> list:
    """The tenant's true nearest (every row's distance, no index), as an exactly searched tenant's
    shared scan answers; run alone, a channel's statement may walk the HNSW graph instead, when the
    planner prefers it for a tenant this small in a table grown by the other tests."""
    column = "context_embedding" if windows else "embedding"
    async with deps.memories.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_indexscan = off")
        rows = await conn.fetch(
            f"SELECT id, 1 - ({column} <=> $1) AS similarity FROM memories WHERE tenant_id = $2 AND {column} IS NOT NULL"
            f" AND status = 'active' ORDER BY {column} <=> $1 LIMIT $3", vector, caller.tenant_id, limit)
    return [(r["id"], r["similarity"]) for r in rows]


async def test_vector_channels_started_together_are_one_statement_on_their_indexes(deps, big):
    # A tenant too small to walk the graph (tests/integration/test_vector_walk.py has the big one's two statements).
    exact = MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=10 * ROWS)
    plan = plan_channels(exact, deps.settings, big, MemoryFilter(), parts_of(QUERIES[2]), limit=50,
                         as_of=None)
    family = [name for name in plan if name.startswith("vector") or name in ("time", "preferences")]
    assert {"vector", "vector_context", "time", "preferences"} <= set(family)
    alone, together, plans = await alone_and_together(plan, family)
    assert len(plans) == 1
    assert "Seq Scan on memories" not in plans[0]
    assert {name: together[name] for name in ("time", "preferences")} == {name: alone[name] for name in ("time", "preferences")}
    vector = parts_of(QUERIES[2]).vector
    assert together["vector"] == await exact_nearest(deps, big, vector)
    assert together["vector_context"] == await exact_nearest(deps, big, vector, windows=True)


async def test_vector_channels_sharing_a_narrow_filter_share_one_scan_and_answer_as_alone(deps, big):
    exact = MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=10 * ROWS)
    parts = replace(parts_of(QUERIES[0]), last_turn_vector=parts_of(QUERIES[1]).vector)
    plan = plan_channels(exact, deps.settings, big, MemoryFilter(session_id="session-3"), parts, limit=5, as_of=None)
    family = ["vector", "vector_context", "last_turn"]
    assert set(family) <= set(plan)
    alone, together, plans = await alone_and_together(plan, family)
    assert len(plans) == 1 and plans[0].count("CTE Scan on shared0") == 3, plans[0]
    assert all(alone.values())
    assert together == alone


class CountingSessions(MemoryStore):
    """Counts the sessions the store opens, for writes and for reads (the channels only read)."""

    opened = 0

    def session(self, caller, **kwargs):
        self.opened += 1
        return super().session(caller, **kwargs)

    def read_session(self, caller, **kwargs):
        self.opened += 1
        return super().read_session(caller, **kwargs)


async def test_lexical_channels_started_together_share_one_session_and_answer_as_alone(deps, big):
    store = CountingSessions(deps.memories.pool, default_max_memories=0)
    plan = plan_channels(store, deps.settings, big, MemoryFilter(), parts_of("What is Person 7's attr3 or w14?"),
                         limit=50, as_of=None)
    lexical = [name for name in plan if name.startswith("keyword") or name == "exact"]
    assert {"keyword", "exact"} <= set(lexical)
    opened = store.opened
    alone, together, plans = await alone_and_together(plan, lexical)
    assert store.opened == opened + len(lexical) + 1  # a session each alone, one together
    # The keyword channels' matches, their BM25 and rows, and the facts: one statement.
    assert len(plans) == 1 and plans[0].count("Function Scan on mp_keyword_matches") == len(lexical) - 1, plans[0]
    assert all(alone.values())
    assert together == alone


async def test_lexical_channels_apart_have_a_session_each(deps, big):
    store = CountingSessions(deps.memories.pool, default_max_memories=0)
    plan = lexical_channels(SearchReads(store, big, MemoryFilter()), deps.settings,
                            parts_of("What is Person 7's attr3 or w14?"), limit=50, as_of=None, together=False)
    assert {"keyword", "exact"} <= set(plan)
    await asyncio.gather(*(run() for run in plan.values()))
    assert store.opened == len(plan)


async def test_the_lexical_statement_is_planned_once_per_connection_while_vector_ones_are_planned_each_time(deps, big):
    """The lexical statement's plan does not depend on the tenant's size (a function's matches, then
    ids and keys on their indexes): a connection plans it once. The vector statements' do (the
    exact sort or the graph): they are planned for every search, and the connection keeps that mode
    once a lexical session is over."""
    pool = await create_pool(deps.settings.database_url, size=1, ef_search=deps.settings.hnsw_ef_search)
    try:
        store = MemoryStore(pool, default_max_memories=0)
        parts = parts_of("What is Person 7's attr3 or w14?")
        for _ in range(8):
            plan = plan_channels(store, deps.settings, big, MemoryFilter(), parts, limit=50, as_of=None)
            await asyncio.gather(*(run() for run in plan.values()))
        async with pool.acquire() as conn:
            mode = await conn.fetchval("SELECT current_setting('plan_cache_mode')")
            prepared = await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
    finally:
        await pool.close()
    [lexical] = [r for r in prepared if "mp_keyword_matches" in r["statement"]]
    vector = [r for r in prepared if "<=>" in r["statement"]]
    assert lexical["custom_plans"] == 0 and lexical["generic_plans"] == 8, prepared
    assert vector and all(r["generic_plans"] == 0 and r["custom_plans"] >= 8 for r in vector), prepared
    assert mode == "force_custom_plan"


async def test_broad_vector_channels_of_a_tenant_sorted_exactly_read_its_rows_once_and_answer_exactly(deps, big):
    """The tenant's rows are scanned once for the three channels' distances; each channel's nearest
    are then read back by id (memories_id), and each answers with the tenant's true nearest."""
    exact = MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=10 * ROWS)
    parts = replace(parts_of(QUERIES[0]), last_turn_vector=parts_of(QUERIES[1]).vector)
    plan = plan_channels(exact, deps.settings, big, MemoryFilter(), parts, limit=50, as_of=None)
    family = ["vector", "vector_context", "last_turn"]
    assert set(family) <= set(plan)
    alone, together, plans = await alone_and_together(plan, family)
    assert len(plans) == 1 and plans[0].count("CTE Scan on shared0") == 3, plans[0]
    scans = re.findall(r"(Seq Scan|Bitmap Heap Scan|Index Scan using \w+|Index Only Scan using \w+) on memories\b",
                       plans[0])
    assert scans.count("Index Scan using memories_id") == 3 and len(scans) == 4, plans[0]
    assert all(len(rows) == 50 for rows in alone.values())
    assert together == {"vector": await exact_nearest(deps, big, parts.vector),
                        "vector_context": await exact_nearest(deps, big, parts.vector, windows=True),
                        "last_turn": await exact_nearest(deps, big, parts.last_turn_vector)}


@pytest.mark.parametrize("weights", [None, {"x3": 0.5}])  # weighted: pseudo-relevance feedback's added terms
async def test_keyword_scores_are_bm25_over_the_matched_rows_own_token_counts(deps, big, weights):
    """Scored in SQL from each row's counts of the query terms and of all its tokens, with the term
    statistics of the rows matched: the same scores and order as BM25 over their whole token
    lists, a term's weight multiplying its part."""
    terms = ["bob", "w14", "x3"]
    found = await deps.memories.keyword_search(big, MemoryFilter(), terms, pool=200, as_of=None, limit=200,
                                               weights=weights)
    assert len(found) > 20
    async with deps.memories.pool.acquire() as conn:
        texts = dict(await conn.fetch("SELECT id, keywords::text FROM memories WHERE id = ANY($1::uuid[])",
                                      [s.record.id for s in found]))
    expected = bm25(terms, [parse_tsvector(texts[s.record.id]) for s in found], weights or {})
    assert [s.score for s in found] == pytest.approx(expected)
    assert expected == sorted(expected, reverse=True)


def bm25(query: list[str], documents: list[dict[str, int]], weights: dict[str, float],
         k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of token -> count maps, its statistics from the documents themselves."""
    n, average = len(documents), sum(sum(d.values()) for d in documents) / len(documents)
    df = {t: sum(1 for d in documents if t in d) for t in query}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * weights.get(t, 1.0) for t in query}
    return [sum(idf[t] * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * sum(d.values()) / average)) for t in query if t in d)
            for d in documents]


async def test_a_sessions_preferences_and_time_channels_share_its_scan_and_answer_as_alone(deps, big):
    """Narrowed by kind (preferences) or by time (a span the query names), a channel reads the rows
    of the vector channels' scan: one scan for all, each channel's answer the same as alone."""
    async with deps.memories.pool.acquire() as conn:  # as the owner, beside row-level security
        await conn.execute(
            "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status, occurred_at,"
            " session_id, keywords, embedding) SELECT $1, gen_random_uuid(), 'global', 'semantic', 'preference',"
            " 'likes ' || g, 0.9, 'active', $2, 'session-75', to_tsvector('simple', 'likes'),"
            " (SELECT array_agg(random()::real - 0.5) FROM generate_series(1, 384) WHERE g > 0)::vector"
            " FROM generate_series(1, 3) AS g", big.tenant_id, datetime(2023, 3, 3, tzinfo=timezone.utc))
    exact = MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=10 * ROWS)
    plan = plan_channels(exact, deps.settings, big, MemoryFilter(session_id="session-75"), parts_of(QUERIES[2]),
                         limit=5, as_of=None)
    family = ["vector", "vector_context", "time", "preferences"]
    assert set(family) <= set(plan)
    alone, together, plans = await alone_and_together(plan, family)
    assert len(plans) == 1 and plans[0].count("CTE Scan on shared0") == 4, plans[0]
    # The session's one turn with a vector and its three preferences, all in March 2023.
    assert len(alone["vector"]) == len(alone["time"]) == 4 and len(alone["preferences"]) == 3
    assert together == alone


async def test_a_sessions_vector_statement_is_planned_once_per_connection_and_answers_as_planned_each_time(deps, big):
    """Every part of a session's vector statement sorts its scan exactly, so one generic plan serves
    every search; a broad filter's statement is still planned for each (test above)."""
    pool = await create_pool(deps.settings.database_url, size=1, ef_search=deps.settings.hnsw_ef_search)
    try:
        store = MemoryStore(pool, default_max_memories=0, walk_min_memories=10 * ROWS)
        answers = []
        for session in ("session-75", "session-80") * 4:
            plan = plan_channels(store, deps.settings, big, MemoryFilter(session_id=session), parts_of(QUERIES[2]),
                                 limit=5, as_of=None)
            found = await asyncio.gather(*(plan[name]() for name in ("vector", "vector_context", "preferences")))
            answers.append([[(s.record.id, s.score) for s in scored] for scored in found])
        async with pool.acquire() as conn:
            prepared = await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                                        " WHERE statement LIKE 'WITH shared%'")
    finally:
        await pool.close()
    assert prepared and all(r["generic_plans"] >= 8 and r["custom_plans"] == 0 for r in prepared), prepared
    planned_each_time = {}
    for session in ("session-75", "session-80"):
        plan = plan_channels(deps.memories, deps.settings, big, MemoryFilter(session_id=session), parts_of(QUERIES[2]),
                             limit=5, as_of=None)
        planned_each_time[session] = [[(s.record.id, s.score) for s in await plan[name]()]
                                      for name in ("vector", "vector_context", "preferences")]
    assert answers == [planned_each_time[s] for s in ("session-75", "session-80") * 4]
    assert all(answers[0][:2])
