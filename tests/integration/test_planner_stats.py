"""The planner's statistics of the memories table are counted again after a load, not left to
autovacuum's 10% rule (stores/postgres/search/planner_stats.py)."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest_asyncio

from memplane_server.services.admin import AdminService
from memplane_server.stores.postgres.search.planner_stats import ANALYZE_AFTER_ROWS, ANALYZE_AFTER_SHARE
from tests.integration.conftest import PLATFORM
from tests.support.bulk_rows import insert_rows

# A row count reaches pg_stat_user_tables when its backend reports, within about 10 s of the commit.
REPORTED_WITHIN_SECONDS = 15.0


@pytest_asyncio.fixture(loop_scope="session")
async def quiet_table(deps):
    """The table counted now, and autovacuum kept off it meanwhile, so that only the store counts it."""
    async with deps.memories.pool.acquire() as conn:
        await conn.execute("ALTER TABLE memories SET (autovacuum_enabled = false)")
        await conn.execute("ANALYZE memories")
        try:
            yield conn
        finally:
            await conn.execute("ALTER TABLE memories RESET (autovacuum_enabled)")


async def counted_rows(conn) -> float:
    return await conn.fetchval("SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass")


async def live_rows(conn) -> float:
    return await conn.fetchval("SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'memories'::regclass")


async def refreshed_within(deps, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await deps.planner_stats.refresh_if_stale():
            return True
        await asyncio.sleep(0.5)
    return False


async def new_tenant(deps) -> str:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    await AdminService(deps.tenancy).create_tenant(PLATFORM, tenant, tenant, 0, False)
    return tenant


async def test_a_load_of_more_than_the_threshold_is_counted_for_the_planner(deps, quiet_table):
    before = await counted_rows(quiet_table)
    rows = int(ANALYZE_AFTER_ROWS + ANALYZE_AFTER_SHARE * max(before, 0)) + 100
    await insert_rows(quiet_table, await new_tenant(deps), rows, analyze=False)
    assert await refreshed_within(deps, REPORTED_WITHIN_SECONDS)
    assert await counted_rows(quiet_table) >= max(before, 0) + rows


async def test_a_table_that_barely_changed_is_not_counted_again(deps, quiet_table):
    counted = await counted_rows(quiet_table)
    await insert_rows(quiet_table, await new_tenant(deps), 20, analyze=False)
    deadline = time.monotonic() + REPORTED_WITHIN_SECONDS
    while await live_rows(quiet_table) < counted + 20:  # the store sees the 20 rows now
        assert time.monotonic() < deadline, "the insert was never reported"
        await asyncio.sleep(0.5)
    assert not await deps.planner_stats.refresh_if_stale()
    assert await counted_rows(quiet_table) == counted
