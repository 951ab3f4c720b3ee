"""Foresee before a task: the lessons and procedures that apply come back as risks and rules with
why; unrelated ones and other tenants' do not."""
from __future__ import annotations

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.services.reflection.foresight import ForesightService
from memplane_server.services.search.service import SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def memory(kind: Kind, content: str, context: str = "") -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content, context=context)


async def test_the_lesson_and_procedure_for_the_planned_task_come_first_with_reasons(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    written = await WriteService(deps).write(world.writer, [
        memory(Kind.LESSON, "Drain the job queue before rotating the database credentials", "key rotation"),
        memory(Kind.PROCEDURE, "Rotate credentials: drain the queue, rotate with vault, verify logins"),
        memory(Kind.LESSON, "Book refundable fares for this user"),
        memory(Kind.FACT, "The database runs PostgreSQL 17"),
    ])
    await WriteService(deps).write(other.writer, [memory(Kind.LESSON, "Never rotate credentials on Fridays")])
    advice = await ForesightService(SearchService(deps)).foresee(
        world.writer, "Rotate the database credentials", entities=[], tools=["vault"], top_k=5, f=MemoryFilter())
    assert {(a.hit.memory.id, a.kind) for a in advice} == {(written[0].id, "risk"), (written[1].id, "rule")}
    assert "names tool vault" in next(a.why for a in advice if a.kind == "rule")


async def test_a_task_is_required(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as refused:
        await ForesightService(SearchService(deps)).foresee(world.writer, "  ", entities=[], tools=[], top_k=0,
                                                            f=MemoryFilter())
    assert refused.value.reason == "TASK_REQUIRED"
