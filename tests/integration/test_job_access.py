"""A queued job does what its key may do when it runs, not what it could when it was queued: a job
whose key was revoked before it ran, or while it ran, fails visibly and writes nothing; a job runs
with its tenant's grants as they are now."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from memplane_server.core.access.caller import caller_to_json
from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.services.access.auth import reload_caller
from memplane_server.services.admin import AdminService
from memplane_server.services.operations import OperationsService
from memplane_server.services.write.service import WriteService
from memplane_server.worker import runner as runner_module
from tests.integration.conftest import PLATFORM
from tests.support.jobs import run_only

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _about(user: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
                       content=f"{user} called", user_id=user)


async def _queue_erasure(deps, caller, user: str):
    return await deps.jobs.enqueue(caller, "erase", {"user_id": user, "reason": ""}, caller_to_json(caller))


async def _revoke(deps, key_id: str) -> None:
    await AdminService(deps.tenancy).revoke_api_key(PLATFORM, key_id)


async def test_a_job_whose_key_was_revoked_before_it_ran_fails_and_writes_nothing(deps, make_tenant):
    world = await make_tenant()
    user = f"u-{uuid.uuid4().hex[:8]}"
    [memory] = await WriteService(deps).write(world.writer, [_about(user)])
    op = await _queue_erasure(deps, world.writer, user)
    await _revoke(deps, world.writer.key_id)
    await run_only(deps, op.id)
    view = await OperationsService(deps).get(world.reader, str(op.id))
    assert (view.state, view.error_reason) == ("failed", "API_KEY_REVOKED")
    assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", memory.id) == 1


async def test_a_job_whose_key_is_revoked_while_it_runs_stops_before_it_writes(deps, make_tenant, monkeypatch):
    monkeypatch.setattr(runner_module, "ACCESS_RECHECK_SECONDS", 0.05)
    world = await make_tenant()
    user = f"u-{uuid.uuid4().hex[:8]}"
    [memory] = await WriteService(deps).write(world.writer, [_about(user)])
    op = await _queue_erasure(deps, world.writer, user)
    async with deps.memories.pool.acquire() as conn:
        lock = conn.transaction()
        await lock.start()
        # The erasure locks the user's memories first: held here, the job waits mid-run.
        await conn.execute("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE", memory.id)
        running = asyncio.ensure_future(run_only(deps, op.id))
        while await deps.jobs.pool.fetchval("SELECT state FROM jobs WHERE id = $1", op.id) != "running":
            await asyncio.sleep(0.02)
        await _revoke(deps, world.writer.key_id)
        await asyncio.wait_for(asyncio.shield(running), 10.0)
        await lock.rollback()
    view = await OperationsService(deps).get(world.reader, str(op.id))
    assert (view.state, view.error_reason) == ("failed", "API_KEY_REVOKED")
    assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", memory.id) == 1


async def test_a_job_runs_with_its_tenants_grants_as_they_are_now(deps, make_tenant):
    kept, removed = f"d-{uuid.uuid4().hex[:8]}", f"d-{uuid.uuid4().hex[:8]}"
    world = await make_tenant({kept: True, removed: True})
    await AdminService(deps.tenancy).revoke_domain_grant(PLATFORM, removed, world.tenant_id)
    assert (await reload_caller(deps.tenancy, world.writer)).domains == {kept: True}
