"""Operations belong to the agent that started them: other agents neither see nor cancel them, an
erasure is cancelled only by a tenant admin, and every cancel is audited."""
from __future__ import annotations

import dataclasses

import pytest

from memplane_server.core.access.caller import Role, caller_to_json
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.services.operations import OperationsService

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _queue(deps, caller, job_type: str):
    return await deps.jobs.enqueue(caller, job_type, {"probe": True}, caller_to_json(caller))


async def test_another_agent_neither_gets_lists_nor_cancels_an_agents_operation(deps, make_tenant):
    world = await make_tenant()
    service = OperationsService(deps)
    op = await _queue(deps, world.agent1, "reflect")
    for call in (service.get, service.cancel):
        with pytest.raises(MemplaneError) as err:
            await call(world.agent2, str(op.id))
        assert err.value.code is Code.NOT_FOUND
    listed, _ = await service.list(world.agent2, None, 100, "")
    assert op.id not in {o.id for o in listed}
    assert (await service.get(world.agent1, str(op.id))).state == "pending"


async def test_a_tenant_admin_sees_every_agents_operation(deps, make_tenant):
    world = await make_tenant()
    admin = dataclasses.replace(world.writer, role=Role.TENANT_ADMIN, key_id="admin")
    op = await _queue(deps, world.agent1, "reflect")
    listed, _ = await OperationsService(deps).list(admin, None, 100, "")
    assert op.id in {o.id for o in listed}


async def test_only_a_tenant_admin_cancels_an_erasure(deps, make_tenant):
    world = await make_tenant()
    service = OperationsService(deps)
    own_erasure = await _queue(deps, world.agent1, "erase")
    with pytest.raises(MemplaneError) as err:
        await service.cancel(world.agent1, str(own_erasure.id))
    assert (err.value.code, err.value.reason) == (Code.PERMISSION_DENIED, "TENANT_ADMIN_REQUIRED")
    admin_erasure = await _queue(deps, dataclasses.replace(world.writer, role=Role.TENANT_ADMIN), "erase")
    with pytest.raises(MemplaneError):
        await service.cancel(world.writer, str(admin_erasure.id))
    assert (await service.get(world.writer, str(admin_erasure.id))).state == "pending"
    admin = dataclasses.replace(world.writer, role=Role.TENANT_ADMIN, key_id="admin")
    assert (await service.cancel(admin, str(own_erasure.id))).state == "cancelled"


async def test_a_cancel_is_audited_once_with_who_and_what(deps, make_tenant):
    world = await make_tenant()
    service = OperationsService(deps)
    op = await _queue(deps, world.agent1, "reflect")
    await service.cancel(world.agent1, str(op.id))
    await service.cancel(world.agent1, str(op.id))
    events = [e for e in await deps.tenancy.list_audit(world.tenant_id, None, 100) if e.action == "CancelOperation"]
    assert [(e.actor_key_id, e.target, e.details) for e in events] == [
        (world.agent1.key_id, str(op.id), {"type": "reflect", "agent_id": "a1"})]
