"""An erasure by a key that is not a tenant admin reaches only the caller's own rows, never the audit
log, and its receipt counts only what it reached; an admin's redaction of the audit log takes the
user id as a word of its own; cached responses holding what was erased go in every tenant."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from memplane_server.core.access.caller import Role, caller_to_json
from memplane_server.core.access.requests import request_key
from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.write.service import WriteService
from tests.support.services import erasure_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _audit_log(deps, tenant: str) -> list[tuple]:
    rows = await deps.tenancy.pool.fetch(
        "SELECT id, actor_key_id, action, target, details::text FROM audit_events WHERE tenant_id = $1 ORDER BY id",
        tenant)
    return [tuple(r) for r in rows]


async def _seed_audit(deps, tenant: str) -> int:
    """Adds entries naming "a" in several ways; returns the id before them."""
    first = await deps.tenancy.pool.fetchval("SELECT coalesce(max(id), 0) FROM audit_events")
    for actor, action, target, details in [
        ("admin", "CreateAgent", "a1", {"agent_id": "a1", "note": "a team of agents"}),
        ("admin", "Forget", "3 memories", {"reason": "asked by a", "ids": []}),
        ("k-a2", "Forget", "a", {"reason": "alice, kal-el and a@x.org", "filter": {"user_id": "a"}}),
    ]:
        await deps.tenancy.audit(tenant, actor, action, target, details)
    return first


def _about(user: str, content: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content,
                       user_id=user)


async def test_an_agents_erasure_leaves_the_audit_log_byte_for_byte_unchanged(deps, make_tenant):
    world = await make_tenant()
    await _seed_audit(deps, world.tenant_id)
    await WriteService(deps).write(world.agent1, [_about("a", "a likes tea")])
    before = await _audit_log(deps, world.tenant_id)
    dry = await erasure_service(deps).erase(world.agent1, "a", dry_run=True)
    done = await erasure_service(deps).erase(world.agent1, "a")
    after = await _audit_log(deps, world.tenant_id)
    assert after[:len(before)] == before
    assert [row[2] for row in after[len(before):]] == ["EraseUser"]
    assert "postgres.audit_events" not in dry.receipt.counts and "postgres.audit_events" not in done.receipt.counts
    assert done.receipt.counts["postgres.memories"] == 1


async def test_an_agents_erasure_keeps_another_agents_jobs_and_does_not_count_them(deps, make_tenant):
    world = await make_tenant()
    theirs = await deps.jobs.enqueue(world.agent2, "reflect", {"user_id": "u-7"}, caller_to_json(world.agent2))
    mine = await deps.jobs.enqueue(world.agent1, "reflect", {"user_id": "u-7"}, caller_to_json(world.agent1))
    dry = await erasure_service(deps).erase(world.agent1, "u-7", dry_run=True)
    assert dry.receipt.counts["postgres.jobs"] == 1
    await erasure_service(deps).erase(world.agent1, "u-7")
    left = {r["id"] for r in await deps.jobs.pool.fetch("SELECT id FROM jobs WHERE tenant_id = $1", world.tenant_id)}
    assert theirs.id in left and mine.id not in left


async def test_an_admins_erasure_redacts_the_user_id_only_as_a_word_of_its_own(deps, make_tenant):
    world = await make_tenant()
    first = await _seed_audit(deps, world.tenant_id)
    admin = dataclasses.replace(world.writer, role=Role.TENANT_ADMIN, key_id="admin")
    done = await erasure_service(deps).erase(admin, "a")
    rows = await deps.tenancy.pool.fetch(
        "SELECT target, details FROM audit_events WHERE tenant_id = $1 AND id > $2 AND action <> 'EraseUser'"
        " ORDER BY id", world.tenant_id, first)
    assert [(r["target"], r["details"]) for r in rows] == [
        ("a1", {"agent_id": "a1", "note": "[erased] team of agents"}),
        ("3 memories", {"reason": "asked by [erased]", "ids": []}),
        ("[erased]", {"reason": "alice, kal-el and a@x.org", "filter": {"user_id": "[erased]"}}),
    ]
    assert done.receipt.counts["postgres.audit_events"] == 3


async def test_an_erasure_drops_another_tenants_cached_response_holding_the_erased_memory(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    owner, reader = await make_tenant({domain: True}), await make_tenant({domain: True})
    [memory] = await WriteService(deps).write(owner.writer, [dataclasses.replace(
        _about("u-9", "u-9 approves refunds"), scope=Scope.DOMAIN, domain=domain)])
    store = deps.idempotency
    key = request_key(reader.writer, "UpdateMemory", f"req-{uuid.uuid4()}", b"body")
    await store.complete(await store.begin(key), f'{{"memory": {{"id": "{memory.id}"}}}}'.encode())
    done = await erasure_service(deps).erase(owner.writer, "u-9")
    assert done.receipt.counts["redis.idempotency"] == 1
    assert await store.begin(key) == b""
