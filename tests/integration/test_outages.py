"""An unreachable dependency is UNAVAILABLE with a reason, never INTERNAL; rate limiting falls back
to per-instance buckets while Redis is away."""
from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
import redis.asyncio as redis

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.embedded._process import free_loopback_port
from memplane_server.services.access.availability import Availability
from memplane_server.services.access.rate_limits import RateLimits
from memplane_server.stores.redis.rate_limit import RateLimiter

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _never_called() -> None:
    raise AssertionError("not probed here")


async def _error_of(coro) -> BaseException:
    try:
        await coro
    except BaseException as exc:  # whatever the driver raises is what the service must classify
        return exc
    raise AssertionError("the call succeeded")


async def test_a_refused_database_connection_is_database_unavailable():
    exc = await _error_of(asyncpg.connect(f"postgresql://x:y@127.0.0.1:{free_loopback_port()}/z", timeout=2))
    error = Availability(_never_called).transient_error(exc)
    assert error is not None and (error.code, error.reason) == (Code.UNAVAILABLE, "DATABASE_UNAVAILABLE")


async def test_a_refused_redis_connection_is_redis_unavailable():
    client = redis.Redis(port=free_loopback_port(), socket_connect_timeout=1)
    exc = await _error_of(client.get("k"))
    await client.aclose()
    error = Availability(_never_called).transient_error(exc)
    assert error is not None and (error.code, error.reason) == (Code.UNAVAILABLE, "REDIS_UNAVAILABLE")


async def test_a_transaction_rolled_back_to_break_a_deadlock_is_aborted_and_retryable(deps):
    pool = deps.memories.pool
    table = f"deadlock_{uuid.uuid4().hex[:8]}"
    await pool.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int)")
    await pool.execute(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    both_locked_one = asyncio.Barrier(2)

    async def lock(first: int, second: int) -> None:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id = $1", first)
            await both_locked_one.wait()
            await conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id = $1", second)

    try:
        outcomes = await asyncio.gather(lock(1, 2), lock(2, 1), return_exceptions=True)
    finally:
        await pool.execute(f"DROP TABLE {table}")
    [lost] = [o for o in outcomes if isinstance(o, BaseException)]
    error = Availability(_never_called).transient_error(lost)
    assert error is not None and (error.code, error.reason) == (Code.ABORTED, "CONCURRENT_CHANGE")


async def test_a_bug_is_not_an_outage():
    assert Availability(_never_called).transient_error(ValueError("bad")) is None


async def test_the_health_probe_says_no_when_the_database_is_unreachable(runtime):
    port = free_loopback_port()

    async def ping() -> None:
        conn = await asyncpg.connect(f"postgresql://x:y@127.0.0.1:{port}/z", timeout=2)
        await conn.close()

    assert not await Availability(ping).database_answers()


async def test_the_health_probe_says_yes_on_a_live_database(runtime):
    from memplane_server.stores.postgres.pool import database_ping

    assert await Availability(database_ping(runtime.pool)).database_answers()


async def test_rate_limits_fall_back_to_local_buckets_while_redis_is_away():
    client = redis.Redis(port=free_loopback_port(), socket_connect_timeout=1)
    limits = RateLimits(RateLimiter(client, per_second=0.1, burst=2))
    await limits.check("key")
    await limits.check("key")
    with pytest.raises(MemplaneError) as err:
        await limits.check("key")
    assert err.value.reason == "RATE_LIMITED" and 0 < err.value.retry_after <= 10.0
    await client.aclose()
