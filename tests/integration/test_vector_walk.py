"""A big tenant among many small ones: its vector channels walk the HNSW graph, find what an exact
search finds, and never cross tenants or agents; a small tenant stays exact, and the time and
preferences parts of the same batch keep their own plan. (The planner's own mistake, sorting every
row of a big tenant because row-level security repeats the tenant predicate, needs a graph of
hundreds of thousands of rows to show: bench/search_scale.py --tenants shows it; at this size the
planner would walk the graph anyway, so these tests check the store's choice and its plans.)"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import numpy as np
import pytest
import pytest_asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryFilter
from memplane_server.services.admin import AdminService
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.search import nearest as nearest_module
from memplane_server.stores.postgres.search.nearest import VectorQuery
from memplane_server.stores.postgres.search.plans import explaining
from tests.integration.conftest import PLATFORM
from tests.support.bulk_rows import insert_rows

pytestmark = pytest.mark.asyncio(loop_scope="session")

BIG, SMALL, SMALL_TENANTS = 8000, 60, 40
WALK_FROM = 4000  # the store's threshold in these tests: BIG is above it, SMALL far below
HNSW = "Index Scan using memories_embedding"


NEAR_SEEDS = (2, 3, 4)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def near(seed: int, rank: int) -> np.ndarray:
    """The rank-th of ten rows planted near unit(seed), each a little farther than the one before.
    Without them the nearest rows of a random query among random vectors are near-ties, which an
    approximate walk may order differently from the exact sort, failing the test by chance."""
    offset = np.random.default_rng(1000 * seed + rank).standard_normal(384).astype(np.float32)
    return unit(seed) + (0.05 + 0.02 * rank) * offset / np.linalg.norm(offset)


def caller(tenant: str, agent: str | None = None) -> Caller:
    return Caller(key_id=f"walk-{tenant}", role=Role.AGENT if agent else Role.WRITER, tenant_id=tenant,
                  agent_id=agent, domains={})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(deps) -> dict:
    """One big tenant, many small ones, analysed; near the query vector: the big tenant's agent a2's
    private row and another tenant's row, which the big tenant's agent a1 must never see."""
    admin = AdminService(deps.tenancy)
    big, other = f"t-{uuid.uuid4().hex[:10]}", f"t-{uuid.uuid4().hex[:10]}"
    smalls = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(SMALL_TENANTS)]
    query = unit(1)
    async with deps.memories.pool.acquire() as conn:
        for tenant in [big, other, *smalls]:
            await admin.create_tenant(PLATFORM, tenant, tenant, 0, False)
        await admin.create_agent(PLATFORM, big, "a2", "a2")
        await insert_rows(conn, big, BIG)
        for tenant in smalls:
            await insert_rows(conn, tenant, SMALL if tenant != smalls[0] else 20 * SMALL, analyze=False)
        for seed in NEAR_SEEDS:
            for rank in range(10):
                await conn.execute(
                    "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status, occurred_at,"
                    " embedding) VALUES ($1, gen_random_uuid(), 'global', 'episodic', 'event', 'near', 0.9, 'active',"
                    " now(), $2)", big, near(seed, rank))
        # The big tenant's own rows nearest the query: without them its nearest rows are random
        # ones, as far from the query as the rest of the shared test database, and the walk may
        # spend its 20,000 tuples (hnsw.max_scan_tuples) on other tests' rows before reaching any.
        for rank in range(60):
            offset = np.random.default_rng(7000 + rank).standard_normal(384).astype(np.float32)
            await conn.execute(
                "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status, occurred_at,"
                " embedding) VALUES ($1, gen_random_uuid(), 'global', 'episodic', 'event', 'near the query', 0.9,"
                " 'active', now(), $2)", big, query + (0.05 + 0.002 * rank) * offset / np.linalg.norm(offset))
        secret = {}
        for name, tenant, scope, agent in (("other tenant", other, "global", None), ("a2", big, "private", "a2")):
            secret[name] = await conn.fetchval(
                "INSERT INTO memories (tenant_id, id, scope, agent_id, layer, kind, content, confidence, status,"
                " occurred_at, embedding) VALUES ($1, gen_random_uuid(), $2, $3, 'episodic', 'event', 'secret', 0.9,"
                " 'active', now(), $4)"
                " RETURNING id", tenant, scope, agent, query + 0.001)
        await conn.execute("ANALYZE memories")
    return {"big": big, "small": smalls[0], "query": query, "secret": secret}


@pytest.fixture
def store(deps) -> MemoryStore:
    return MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=WALK_FROM)


async def exact_ids(deps, tenant: str, vector: np.ndarray, k: int) -> list:
    """The k nearest of the tenant's global rows, as the owner with index scans off."""
    async with deps.memories.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_indexscan = off")
        rows = await conn.fetch(
            "SELECT id FROM memories WHERE tenant_id = $1 AND scope = 'global' AND status = 'active'"
            " AND embedding IS NOT NULL ORDER BY embedding <=> $2 LIMIT $3", tenant, vector, k)
    return [r["id"] for r in rows]


async def planned(store: MemoryStore, who: Caller, queries: list[VectorQuery]) -> tuple[list, list[str]]:
    with explaining() as plans:
        found = await store.vector_searches(who, queries)
    return found, plans


async def test_a_big_tenant_walks_the_graph_and_finds_what_exact_finds(deps, world, store):
    who = caller(world["big"])
    for seed in NEAR_SEEDS:
        vector = unit(seed)
        (found,), plans = await planned(store, who, [VectorQuery(MemoryFilter(), vector, 50)])
        assert len(plans) == 1 and HNSW in plans[0] and "Sort" not in plans[0], plans[0]
        exact = await exact_ids(deps, world["big"], vector, 50)
        assert len(found) == len(exact) == 50
        assert {s.record.id for s in found[:10]} == set(exact[:10])


async def test_a_walk_that_reads_its_leading_rows_whole_still_walks_and_answers_the_same(world, store):
    who, vector = caller(world["big"]), unit(NEAR_SEEDS[0])
    with explaining() as plans:
        (leading,) = await store.vector_searches(who, [VectorQuery(MemoryFilter(), vector, 50, lead=10)],
                                                 candidates=True)
    assert HNSW in plans[0] and "Seq Scan on memories" not in plans[0], plans[0]
    (whole,), _ = await planned(store, who, [VectorQuery(MemoryFilter(), vector, 50)])
    assert [(s.record.id, s.score) for s in leading] == [(s.record.id, s.score) for s in whole]
    assert [s.whole for s in leading] == [True] * 10 + [False] * 40
    assert [s.record for s in leading[:10]] == [s.record for s in whole[:10]]


async def test_a_small_tenant_stays_exact(deps, world, store):
    vector = unit(5)
    (found,), plans = await planned(store, caller(world["small"]), [VectorQuery(MemoryFilter(), vector, 50)])
    assert "memories_embedding" not in plans[0] and "Sort" in plans[0], plans[0]
    exact = await exact_ids(deps, world["small"], vector, 50)
    assert len(exact) == 50 and [s.record.id for s in found] == exact


async def test_time_and_preferences_keep_their_plan_beside_the_walk(world, store):
    """The batch Search sends: the broad parts walk, planned with sorting off; the narrowed ones
    (a time range, preferences) run first in the same session and are planned as usual."""
    vector = unit(6)
    spanned = MemoryFilter(occurred_after=datetime(2023, 1, 2, tzinfo=timezone.utc),
                           occurred_before=datetime(2023, 1, 5, tzinfo=timezone.utc))
    queries = [VectorQuery(MemoryFilter(), vector, 50), VectorQuery(MemoryFilter(), vector, 50, windows=True),
               VectorQuery(spanned, vector, 50), VectorQuery(MemoryFilter(kinds=(Kind.PREFERENCE,)), vector, 5)]
    found, plans = await planned(store, caller(world["big"]), queries)
    assert len(plans) == 2
    narrowed, walked = plans
    assert "memories_embedding" not in narrowed and "memories_tenant_occurred" in narrowed, narrowed
    assert HNSW in walked and "Index Scan using memories_context_embedding" in walked and "Sort" not in walked
    alone = [(await store.vector_searches(caller(world["big"]), [q]))[0] for q in queries]
    assert [[s.record.id for s in f] for f in found] == [[s.record.id for s in f] for f in alone]
    assert found[2] and all(spanned.occurred_after <= s.record.occurred_at < spanned.occurred_before for s in found[2])


@pytest.mark.parametrize("app_predicate", [True, False])
async def test_the_walk_does_not_cross_tenants_or_agents(world, store, monkeypatch, app_predicate):
    if not app_predicate:  # row-level security alone must hold on this path too
        monkeypatch.setattr(nearest_module, "visibility", lambda caller, p: "TRUE")
    (found,), plans = await planned(store, caller(world["big"], "a1"),
                                    [VectorQuery(MemoryFilter(), world["query"], 50)])
    assert HNSW in plans[0]
    ids = {s.record.id for s in found}
    assert len(ids) == 50 and not ids & set(world["secret"].values())
    assert {s.record.tenant_id for s in found} == {world["big"]}
    (owner,), _ = await planned(store, caller(world["big"], "a2"), [VectorQuery(MemoryFilter(), world["query"], 50)])
    assert owner[0].record.id == world["secret"]["a2"]  # the walk does reach the row, for its agent


@pytest.mark.parametrize("app_predicate", [True, False])
async def test_the_shared_scan_of_a_tenant_sorted_exactly_does_not_cross_tenants_or_agents(
        deps, world, monkeypatch, app_predicate):
    """The big tenant below the store's threshold: its vector and window channels share one scan
    (ids and distances, rows read back by id), which holds to the caller's rows like the walk."""
    if not app_predicate:  # row-level security alone must hold on this path too
        monkeypatch.setattr(nearest_module, "visibility", lambda caller, p: "TRUE")
    exact = MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=10 * BIG)
    pair = [VectorQuery(MemoryFilter(), world["query"], 50),
            VectorQuery(MemoryFilter(), world["query"], 50, windows=True)]
    found, plans = await planned(exact, caller(world["big"], "a1"), pair)
    assert len(plans) == 1 and plans[0].count("CTE Scan on shared0") == 2 and HNSW not in plans[0], plans[0]
    ids = {s.record.id for scored in found for s in scored}
    assert all(len(scored) == 50 for scored in found) and not ids & set(world["secret"].values())
    assert {s.record.tenant_id for scored in found for s in scored} == {world["big"]}
    (owner, _), _ = await planned(exact, caller(world["big"], "a2"), pair)
    assert owner[0].record.id == world["secret"]["a2"]  # the scan does reach the row, for its agent
