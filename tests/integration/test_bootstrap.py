"""Servers starting together on an empty database bootstrap it once: one tenant, one platform
admin key, and the keys printed by one server only."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest

from memplane_server.services.admin import AdminService
from memplane_server.stores.postgres.migrations import migrate
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.tenancy import TenancyStore
from tests.e2e.conftest import fresh_database

pytestmark = pytest.mark.asyncio(loop_scope="session")
SERVERS = 4


async def test_concurrent_bootstraps_create_one_tenant_and_one_platform_key(services_urls):
    url = await fresh_database(services_urls[0], "memplane_bootstrap_race")
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    # A pool each, as separate server processes have: the race is between connections.
    pools = [await create_pool(url, size=2, ef_search=40) for _ in range(SERVERS)]
    try:
        results = await asyncio.gather(*(AdminService(TenancyStore(p)).bootstrap("acme") for p in pools))
        tenants = await pools[0].fetchval("SELECT count(*) FROM tenants")
        platform_keys = await pools[0].fetchval("SELECT count(*) FROM api_keys WHERE role = 'platform_admin'")
    finally:
        await asyncio.gather(*(p.close() for p in pools))
    assert sum(r is not None for r in results) == 1
    assert (tenants, platform_keys) == (1, 1)
