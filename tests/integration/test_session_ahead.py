"""A read session opened ahead of its statements (Search opens its channels' sessions while the query
is embedded): it answers in the caller's settings, its commit is not waited for, it may be run in
steps in one transaction (Search reads its answer's rows around fusion), and however it ends (run,
failed, closed unused, closed while still opening, closed between steps) its connection goes back
to the pool."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest
import pytest_asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.session import CUSTOM_PLANS, SessionAhead, caller_session, read_sessions_ended

pytestmark = pytest.mark.asyncio(loop_scope="session")

CALLER = Caller(key_id="ahead", role=Role.WRITER, tenant_id="tenant-ahead", agent_id=None, domains={})


@pytest_asyncio.fixture(loop_scope="session")
async def pool(deps):
    """A pool of one connection: a session that keeps it shows at once."""
    pool = await create_pool(deps.settings.database_url, size=1, ef_search=deps.settings.hnsw_ef_search)
    yield pool
    await pool.close()


def opened_ahead(pool: asyncpg.Pool) -> SessionAhead:
    return SessionAhead(caller_session(pool, CALLER, plans=CUSTOM_PLANS), CUSTOM_PLANS)


async def back_in_pool(pool: asyncpg.Pool) -> bool:
    """Whether the pool's one connection can be had again, outside any transaction."""
    async with asyncio.timeout(5):
        async with pool.acquire() as conn:
            return await conn.fetchval("SELECT 1") == 1 and not conn.is_in_transaction()


async def test_a_session_opened_ahead_runs_in_the_callers_settings_and_frees_its_connection(pool):
    ahead = opened_ahead(pool)
    await asyncio.sleep(0.05)  # opened meanwhile, as while a query is embedded
    tenant, role = await ahead.run(lambda conn: conn.fetchrow(
        "SELECT current_setting('memplane.tenant_id'), current_user"))
    assert (tenant, role) == ("tenant-ahead", "memplane_app")
    assert await back_in_pool(pool)  # the commit after the answer let the connection go
    await ahead.close()  # a run session: nothing left to close


async def test_work_that_fails_rolls_back_and_frees_the_connection(pool):
    ahead = opened_ahead(pool)
    with pytest.raises(asyncpg.UndefinedTableError):
        await ahead.run(lambda conn: conn.fetch("SELECT * FROM no_such_table"))
    assert await back_in_pool(pool)


async def test_a_session_never_run_is_closed_and_frees_its_connection(pool):
    ahead = opened_ahead(pool)
    await asyncio.sleep(0.05)
    await ahead.close()
    assert await back_in_pool(pool)


async def test_a_session_closed_while_waiting_for_a_connection_takes_none(pool):
    held = await pool.acquire()
    ahead = opened_ahead(pool)
    await asyncio.sleep(0.05)  # waiting: the pool's one connection is held
    await ahead.close()
    await pool.release(held)
    assert await back_in_pool(pool)


async def test_a_run_that_is_not_the_last_keeps_its_transaction_for_the_next(pool):
    ahead = opened_ahead(pool)
    first = await ahead.run(lambda conn: conn.fetchval("SELECT txid_current()"), last=False)
    second = await ahead.run(lambda conn: conn.fetchval("SELECT txid_current()"))
    assert first == second  # one transaction: BEGIN and the settings paid once
    assert await back_in_pool(pool)
    with pytest.raises(RuntimeError):
        await ahead.run(lambda conn: conn.fetchval("SELECT 1"))  # ended with the last run


async def test_closing_a_session_left_open_ends_it_and_frees_the_connection(pool):
    ahead = opened_ahead(pool)
    await ahead.run(lambda conn: conn.fetchval("SELECT 1"), last=False)
    await ahead.close()
    assert await back_in_pool(pool)


async def test_a_session_closed_soon_gives_its_connection_back_without_being_waited_for(pool):
    unused = opened_ahead(pool)
    unused.close_soon()  # never run: its connection goes back meanwhile
    assert await back_in_pool(pool)
    run = opened_ahead(pool)
    await run.run(lambda conn: conn.fetchval("SELECT 1"), last=False)
    run.close_soon()
    assert await back_in_pool(pool)



async def test_a_session_closed_soon_while_its_work_runs_ends_once_the_work_is_done(pool):
    """A search that failed in one channel ends a session another channel's statement still runs in:
    the connection runs one thing at a time, so the end waits for it."""
    ahead = opened_ahead(pool)
    work = asyncio.ensure_future(ahead.run(lambda conn: conn.fetchval("SELECT 7 FROM pg_sleep(0.1)"), last=False))
    await asyncio.sleep(0.03)
    ahead.close_soon()
    assert await work == 7
    assert await back_in_pool(pool)


async def test_read_sessions_ended_returns_once_the_commits_not_waited_for_let_their_connections_go(pool):
    ahead = opened_ahead(pool)
    await ahead.run(lambda conn: conn.fetchval("SELECT 1"))
    assert pool.get_idle_size() == 0  # answered, its commit still to come
    await read_sessions_ended()
    assert pool.get_idle_size() == 1
