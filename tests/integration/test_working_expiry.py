"""The expiry sweep over per-tenant indexes (stores/redis/working.py), against the real Redis:
racing sweepers promote each expired session of every tenant once, and sessions an older release
indexed in the single global index still expire."""
from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
import pytest_asyncio

from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter
from memplane_server.services.memories import MemoriesService
from memplane_server.services.working import WorkingService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.redis.client import connect
from memplane_server.stores.redis.working import (
    LEGACY_EXPIRY_INDEX,
    TENANTS,
    WorkingSession,
    WorkingStore,
    expiry_index,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


def turn(content: str, session_id: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=Layer.WORKING, kind=Kind.TURN,
                       content=content, session_id=session_id, ttl_seconds=1)


@pytest_asyncio.fixture(loop_scope="session")
async def second_redis(settings):
    """A connection pool of its own, as another process's sweeper would have."""
    client = connect(settings.redis_url, timeout=5)
    yield client
    await client.aclose()


async def promoted(deps, caller, session_id: str) -> list[str]:
    listed, _ = await MemoriesService(deps).list(caller, MemoryFilter(session_id=session_id), 10, "")
    return [m.content for m in listed]


async def test_two_racing_sweepers_promote_each_expired_session_of_several_tenants_once(
        deps, make_tenant, second_redis):
    worlds = [await make_tenant() for _ in range(3)]
    for n, world in enumerate(worlds):
        for s in range(2):
            await WriteService(deps).write(world.agent1, [turn(f"tenant {n} session {s}", f"race-{s}")])
    await asyncio.sleep(2.1)
    other_deps = replace(deps, working=WorkingStore(second_redis, deps.settings.working_max_items))
    sweepers = [WorkingService(d, WriteService(d)) for d in (deps, other_deps)]
    # Small limits make the two interleave; other tests' expired sessions share the Redis, so sweep
    # until nothing is left to claim.
    while sum(await asyncio.gather(*(s.promote_expired(limit=2) for s in sweepers for _ in range(3)))):
        pass
    for n, world in enumerate(worlds):
        for s in range(2):
            assert await promoted(deps, world.agent1, f"race-{s}") == [f"tenant {n} session {s}"]
        assert await deps.working.client.zcard(expiry_index(world.tenant_id)) == 0


async def test_a_session_in_the_global_index_of_an_older_release_is_still_promoted(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [turn("indexed the old way", "legacy")])
    # Where an older release kept it: only in the global index, its tenant in no set.
    client, member = deps.working.client, WorkingSession(world.tenant_id, "a1", "legacy").member
    score = await client.zscore(expiry_index(world.tenant_id), member)
    await client.zrem(expiry_index(world.tenant_id), member)
    await client.srem(TENANTS, world.tenant_id)
    await client.zadd(LEGACY_EXPIRY_INDEX, {member: score})
    await asyncio.sleep(2.1)
    sweeper = WorkingService(deps, WriteService(deps))
    while await sweeper.promote_expired(limit=100):
        pass
    assert await promoted(deps, world.agent1, "legacy") == ["indexed the old way"]
    assert await client.zscore(LEGACY_EXPIRY_INDEX, member) is None


async def test_a_tenant_whose_sessions_are_all_swept_leaves_the_set_and_comes_back_with_a_new_one(
        deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [turn("short", "gone")])
    await asyncio.sleep(2.1)
    sweeper = WorkingService(deps, WriteService(deps))
    while await sweeper.promote_expired(limit=100):
        pass
    assert not await deps.working.client.sismember(TENANTS, world.tenant_id)
    await WriteService(deps).write(world.agent1, [turn("again", "back")])
    assert await deps.working.client.sismember(TENANTS, world.tenant_id)


async def test_a_due_session_extended_since_its_index_entry_is_indexed_anew_not_promoted(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [turn("still in use", "extended")])
    # Extended without its entry in the tenant's index moving: what a write between a sweeper's
    # claim and its read leaves, or an older release's server extending it in the old index only.
    session = WorkingSession(world.tenant_id, "a1", "extended")
    later = int(time.time()) + 3600
    await deps.working.client.hset(session.key("meta"), "expire_at", str(later))
    await asyncio.sleep(2.1)
    sweeper = WorkingService(deps, WriteService(deps))
    while await sweeper.promote_expired(limit=100):
        pass
    assert await promoted(deps, world.agent1, "extended") == []
    assert await deps.working.client.zscore(expiry_index(world.tenant_id), session.member) == later
