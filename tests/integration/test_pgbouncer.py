"""The product's database sessions through a real PgBouncer in transaction mode sharing one server
connection among all clients: nothing a caller's transaction sets outlives it, and what searches
rely on holds in every caller's transaction although no startup parameter gets through. (`make
deploy-test` runs the search, write, isolation and Watch suites through PgBouncer as well.)"""
from __future__ import annotations

import asyncpg
import pytest
import pytest_asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.session import caller_session
from tests.conftest import make_shared_tmpdir
from tests.support import pgbouncer

pytestmark = [pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.skipif(not pgbouncer.available(), reason="pgbouncer is not installed"
                                 " (make deploy-test installs it: scripts/install_container_runtime.py)")]

EF_SEARCH = 77  # not pgvector's default, so that seeing it proves it was set


@pytest.fixture(scope="module")
def through(services_urls, deps):  # deps: the database migrated
    bouncer = pgbouncer.PgBouncer(make_shared_tmpdir("memplane-pgbouncer-"), services_urls[0], server_connections=1)
    yield bouncer.start()
    bouncer.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def pool(through):
    pool = await create_pool(through, size=3, ef_search=EF_SEARCH, pooled=True)
    yield pool
    await pool.close()


def caller(tenant: str, agent: str | None = None) -> Caller:
    return Caller(key_id="pooled", role=Role.WRITER, tenant_id=tenant, agent_id=agent, domains={})


async def test_a_callers_settings_do_not_outlive_its_transaction_on_the_shared_server_connection(pool):
    async with caller_session(pool, caller("t-one", "a1")) as conn:
        inside = await conn.fetchrow("SELECT pg_backend_pid() AS pid, current_user AS who,"
                                     " current_setting('memplane.tenant_id') AS tenant")
    assert (inside["who"], inside["tenant"]) == ("memplane_app", "t-one")
    after = await pool.fetchrow("SELECT pg_backend_pid() AS pid, current_user AS who,"
                                " coalesce(current_setting('memplane.tenant_id', true), '') AS tenant")
    assert after["pid"] == inside["pid"]  # the same server connection, handed to the next transaction
    assert after["who"] != "memplane_app" and after["tenant"] == ""


async def test_each_callers_transaction_sees_only_its_own_caller(pool):
    import asyncio

    async def seen(tenant: str) -> str:
        async with caller_session(pool, caller(tenant)) as conn:
            await asyncio.sleep(0)  # let the other callers' transactions interleave
            return await conn.fetchval("SELECT current_setting('memplane.tenant_id')")

    tenants = [f"t-{i}" for i in range(6)]
    assert await asyncio.gather(*(seen(t) for t in tenants)) == tenants


async def test_search_settings_hold_in_every_callers_transaction_without_startup_parameters(pool):
    async with caller_session(pool, caller("t-one")) as conn:
        ef = await conn.fetchval("SELECT current_setting('hnsw.ef_search')")
        scan = await conn.fetchval("SELECT current_setting('hnsw.iterative_scan')")
    assert (ef, scan) == (str(EF_SEARCH), "relaxed_order")


async def test_a_pool_that_sends_startup_parameters_is_refused_by_the_pooler(through):
    with pytest.raises(asyncpg.PostgresError, match="unsupported startup parameter"):
        pool = await create_pool(through, size=1, ef_search=EF_SEARCH)
        await pool.close()
