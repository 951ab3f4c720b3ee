"""Lifecycle policies stay inside their tenant: a run of tenant A's policy never changes tenant B's
memories (nor the domain memories A shares), an admin of A can neither read, set nor run B's policy,
row-level security keeps the policy rows apart, bad values are refused with the field named, and the
scheduled job runs exactly the enabled policies and keeps its report."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import asyncpg
import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.forget.lifecycle import KindRule, LifecyclePolicy
from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.operations import OperationsService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.session import caller_session
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, lifecycle_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

EVERYTHING_GOES = LifecyclePolicy(enabled=True, hard_delete=True, archive_tasks_after_days=1,
                                  rules={k: KindRule(ttl_days=1) for k in Kind})


def admin_of(tenant: str) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=Role.TENANT_ADMIN, tenant_id=tenant, agent_id=None)


def draft(kind: Kind, scope: Scope = Scope.GLOBAL, domain: str | None = None) -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=domain, agent_id=None, layer=None, kind=kind,
                       content=f"{kind.value} {uuid.uuid4().hex}")


async def rows_of(deps, tenant: str) -> list[str]:
    return [r[0] for r in await deps.memories.pool.fetch(
        "SELECT (to_jsonb(m) - 'embedding' - 'context_embedding')::text FROM memories m WHERE tenant_id = $1"
        " ORDER BY id", tenant)]


async def test_a_run_of_one_tenants_policy_leaves_other_tenants_and_shared_domains_alone(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    a, b = await make_tenant({domain: True}), await make_tenant({domain: True})
    write = WriteService(deps)
    mine = await write.write(a.writer, [draft(k) for k in Kind])
    await write.write(a.agent1, [draft(Kind.FACT, Scope.PRIVATE)])
    [shared] = await write.write(a.writer, [draft(Kind.LESSON, Scope.DOMAIN, domain)])
    await write.write(b.writer, [draft(k) for k in Kind])
    await write.write(b.agent1, [draft(Kind.FACT, Scope.PRIVATE)])
    await write.write(b.writer, [draft(Kind.LESSON, Scope.DOMAIN, domain)])
    lifecycle = lifecycle_service(deps)
    for world in (a, b):  # B's policy would remove everything too, were it run
        await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, EVERYTHING_GOES)
    before = await rows_of(deps, b.tenant_id)

    report = await lifecycle.run_for(a.tenant_id, dry_run=False, now=datetime.now(timezone.utc) + timedelta(days=400))

    assert report.counts["ttl"] == len(mine) + 1  # every global and private memory of A
    assert await rows_of(deps, b.tenant_id) == before
    assert [r["id"] for r in await deps.memories.pool.fetch(
        "SELECT id FROM memories WHERE tenant_id = $1", a.tenant_id)] == [shared.id]


async def test_an_admin_of_one_tenant_cannot_read_set_or_run_anothers_policy(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    lifecycle = lifecycle_service(deps)
    for call in (lambda: lifecycle.get_policy(admin_of(a.tenant_id), b.tenant_id),
                 lambda: lifecycle.set_policy(admin_of(a.tenant_id), b.tenant_id, EVERYTHING_GOES),
                 lambda: lifecycle.run(admin_of(a.tenant_id), b.tenant_id, dry_run=True),
                 lambda: lifecycle.set_policy(a.writer, a.tenant_id, EVERYTHING_GOES)):
        with pytest.raises(MemplaneError) as caught:
            await call()
        assert caught.value.code is Code.PERMISSION_DENIED
    policy, stored = await lifecycle.get_policy(admin_of(b.tenant_id), b.tenant_id)
    assert stored is None and not policy.enabled


async def test_row_level_security_keeps_policy_rows_apart(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    await lifecycle_service(deps).set_policy(admin_of(a.tenant_id), a.tenant_id, EVERYTHING_GOES)
    async with caller_session(deps.memories.pool, b.writer) as conn:
        assert await conn.fetchval("SELECT count(*) FROM lifecycle_policies WHERE tenant_id = $1", a.tenant_id) == 0
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with caller_session(deps.memories.pool, b.writer) as conn:
            await conn.execute("INSERT INTO lifecycle_policies (tenant_id, enabled, policy, updated_by)"
                               " VALUES ($1, true, '{}', 'b') ON CONFLICT (tenant_id) DO UPDATE SET enabled = false",
                               a.tenant_id)


@pytest.mark.parametrize("policy, field", [
    (LifecyclePolicy(archive_tasks_after_days=-1), "archive_tasks_after_days"),
    (LifecyclePolicy(rules={Kind.TURN: KindRule(ttl_days=float("inf"))}), "rules[turn].ttl_days"),
    (LifecyclePolicy(rules={Kind.FACT: KindRule(review_min_uses=3, review_below_confidence=2)}),
     "rules[fact].review_below_confidence"),
])
async def test_bad_policies_are_refused_and_nothing_is_stored(deps, make_tenant, policy, field):
    world = await make_tenant()
    lifecycle = lifecycle_service(deps)
    with pytest.raises(MemplaneError) as caught:
        await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, policy)
    assert (caught.value.code, caught.value.reason) == (Code.INVALID_ARGUMENT, "INVALID_LIFECYCLE_POLICY")
    assert caught.value.metadata["field"] == field
    assert (await lifecycle.get_policy(admin_of(world.tenant_id), world.tenant_id))[1] is None


async def test_the_schedule_runs_enabled_policies_as_jobs_that_keep_their_report(deps, make_tenant):
    on, off = await make_tenant(), await make_tenant()
    lifecycle = lifecycle_service(deps)
    await lifecycle.set_policy(admin_of(on.tenant_id), on.tenant_id, LifecyclePolicy(enabled=True))
    await lifecycle.set_policy(admin_of(off.tenant_id), off.tenant_id, LifecyclePolicy(enabled=False))
    await deps.jobs.schedule_lifecycle(3600)
    await deps.jobs.schedule_lifecycle(3600)  # once per period
    queued = await deps.jobs.pool.fetch(
        "SELECT tenant_id, id FROM jobs WHERE type = 'lifecycle' AND tenant_id = ANY($1::text[])",
        [on.tenant_id, off.tenant_id])
    assert [r["tenant_id"] for r in queued] == [on.tenant_id]
    view = await run_jobs_until(job_runner(deps), deps, on.writer, queued[0]["id"], lambda v: v.state == "succeeded")
    assert "memories examined" in view.result_summary
    report = await deps.jobs.pool.fetchval("SELECT result->'report' FROM jobs WHERE id = $1", queued[0]["id"])
    assert report["tenant_id"] == on.tenant_id and report["dry_run"] is False and "ttl" in report["counts"]
    assert (await OperationsService(deps).get(on.writer, str(queued[0]["id"]))).type == "lifecycle"
