"""Per-tenant stored-memory caps and per-key request rates."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.services.admin import AdminService
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.redis.rate_limit import RateLimiter
from tests.integration.conftest import PLATFORM

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content)


async def capped_tenant(deps, make_tenant, cap: int):
    world = await make_tenant()
    await deps.tenancy.pool.execute("UPDATE tenants SET max_memories = $2 WHERE id = $1", world.tenant_id, cap)
    return world


async def test_writes_over_the_tenant_cap_are_refused_whole(deps, make_tenant):
    world = await capped_tenant(deps, make_tenant, 3)
    write = WriteService(deps)
    await write.write(world.writer, [draft("one"), draft("two")])
    with pytest.raises(MemplaneError) as err:
        await write.write(world.writer, [draft("three"), draft("four")])
    assert err.value.code is Code.RESOURCE_EXHAUSTED and err.value.reason == "MEMORY_QUOTA_EXCEEDED"
    assert err.value.metadata["limit"] == "3"
    await write.write(world.writer, [draft("three")])


async def test_concurrent_writers_cannot_overshoot_the_cap(deps, make_tenant):
    world = await capped_tenant(deps, make_tenant, 5)
    write = WriteService(deps)
    results = await asyncio.gather(*(write.write(world.writer, [draft(f"m{i}")]) for i in range(12)),
                                   return_exceptions=True)
    assert sum(1 for r in results if not isinstance(r, Exception)) == 5
    assert await deps.tenancy.pool.fetchval("SELECT count(*) FROM memories WHERE tenant_id = $1", world.tenant_id) == 5


async def test_hard_forget_frees_quota(deps, make_tenant):
    world = await capped_tenant(deps, make_tenant, 1)
    write = WriteService(deps)
    [m] = await write.write(world.writer, [draft("only one")])
    await ForgetService(deps).forget(world.writer, ids=[str(m.id)], f=None, hard=True, dry_run=False, reason="")
    await write.write(world.writer, [draft("room again")])


async def test_usage_counts_the_author_even_when_another_member_erases(deps, make_tenant):
    domain = f"q-{uuid.uuid4().hex[:8]}"
    a, b = await make_tenant({domain: True}), await make_tenant({domain: True})
    from dataclasses import replace

    from memplane_server.core.model import Scope

    [m] = await WriteService(deps).write(a.writer, [replace(draft("shared"), scope=Scope.DOMAIN, domain=domain)])
    usage = "SELECT memory_count FROM tenant_usage WHERE tenant_id = $1"
    assert await deps.tenancy.pool.fetchval(usage, a.tenant_id) == 1
    await ForgetService(deps).forget(b.writer, ids=[str(m.id)], f=None, hard=True, dry_run=False, reason="")
    assert await deps.tenancy.pool.fetchval(usage, a.tenant_id) == 0


async def test_tenant_default_cap_comes_from_settings(deps, make_tenant):
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    created, _, _ = await AdminService(deps.tenancy).create_tenant(PLATFORM, tenant, "", 0, False)
    assert created.max_memories == 0
    assert await deps.tenancy.pool.fetchval("SELECT memory_count FROM tenant_usage WHERE tenant_id = $1", tenant) == 0


async def test_rate_limiter_allows_a_burst_then_says_when_to_retry(runtime):
    limiter = RateLimiter(runtime.redis_client, per_second=2, burst=3)
    key = f"k-{uuid.uuid4().hex}"
    decisions = [await limiter.take(key) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert 0 < decisions[-1].retry_after_seconds <= 0.5


async def test_rate_limiter_refills_over_time(runtime):
    limiter = RateLimiter(runtime.redis_client, per_second=10, burst=1)
    key = f"k-{uuid.uuid4().hex}"
    assert (await limiter.take(key)).allowed
    assert not (await limiter.take(key)).allowed
    await asyncio.sleep(0.25)
    assert (await limiter.take(key)).allowed


async def test_rate_limits_are_per_key(runtime):
    limiter = RateLimiter(runtime.redis_client, per_second=1, burst=1)
    assert (await limiter.take(f"a-{uuid.uuid4().hex}")).allowed
    assert (await limiter.take(f"b-{uuid.uuid4().hex}")).allowed


async def test_zero_rate_disables_limiting(runtime):
    limiter = RateLimiter(runtime.redis_client, per_second=0, burst=1)
    assert all([(await limiter.take("same")).allowed for _ in range(20)])
