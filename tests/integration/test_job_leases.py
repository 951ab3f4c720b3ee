"""Jobs run exactly once in effect: a claimed job is leased (renewed while it runs) and goes to
another worker when its worker dies; a worker that lost its lease can neither renew nor finish
the job; a job run again after its writes answers with the memories it stored, not new ones."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.core.reflection.reflection import ReflectInput, Task
from memplane_server.llm.chat import ChatModel
from memplane_server.services.reflection.outcomes import apply_outcome
from memplane_server.services.write.service import WriteService
from tests.support.fake_llm import Reply
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

GOOD = json.dumps({
    "memories": [{"kind": "lesson", "content": "Drain the queue before rotating keys", "context": "", "confidence": 0.9,
                  "steps": [0]}],
    "summary": "Key rotation failed because the queue was full.",
})


@pytest.fixture
def llm_deps(deps, fake_llm):
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    return replace(deps, llm=model)


async def only_our_job(deps, op_id) -> None:
    """Other tests leave jobs in the shared queue; they are cancelled so ours is claimed."""
    await deps.jobs.pool.execute(
        "UPDATE jobs SET state = 'cancelled' WHERE state IN ('pending', 'running') AND id <> $1", op_id)


async def test_a_dead_workers_job_is_claimed_again_when_its_lease_runs_out(deps, make_tenant):
    world = await make_tenant()
    op = await reflect_service(deps).reflect(world.writer, ReflectInput(task=Task("lease-1", "x"), mode="async"))
    await only_our_job(deps, op.id)
    first = await deps.jobs.claim(0.3)
    assert first.id == op.id and await deps.jobs.claim(0.3) is None  # leased: nobody else takes it
    await asyncio.sleep(0.4)
    second = await deps.jobs.claim(30)
    assert (second.id, second.attempts) == (op.id, 2)


async def test_a_worker_that_lost_its_lease_can_neither_renew_nor_finish_the_job(deps, make_tenant):
    world = await make_tenant()
    op = await reflect_service(deps).reflect(world.writer, ReflectInput(task=Task("lease-2", "x"), mode="async"))
    await only_our_job(deps, op.id)
    stalled = await deps.jobs.claim(0.2)
    await asyncio.sleep(0.3)
    taken = await deps.jobs.claim(30)
    assert not await deps.jobs.renew(stalled.id, stalled.attempts, 30)
    await deps.jobs.succeed(stalled.id, stalled.attempts, [], "late")
    state = await deps.jobs.pool.fetchrow("SELECT state, attempts FROM jobs WHERE id = $1", op.id)
    assert (state["state"], state["attempts"]) == ("running", taken.attempts)


async def test_a_job_run_again_after_its_write_stores_its_memories_once(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    op = await reflect_service(llm_deps).reflect(
        world.writer, ReflectInput(task=Task("crash-1", "Rotate keys", outcome="failure"), mode="async"))
    await only_our_job(llm_deps, op.id)
    runner = job_runner(llm_deps)
    fake_llm.script(Reply(GOOD), Reply(GOOD))
    crashed = await llm_deps.jobs.claim(0.2)
    stored = await runner._run(crashed)  # the worker wrote, then died before recording success
    await asyncio.sleep(0.3)
    assert await runner.run_one()
    listed = await llm_deps.memories.list(
        world.writer, MemoryFilter(session_id="crash-1", kinds=(Kind.LESSON, Kind.SUMMARY)), limit=10, after=None)
    assert sorted(m.id for m in listed) == sorted(m.id for m in stored[0])
    result = await llm_deps.jobs.pool.fetchrow("SELECT state, attempts, result FROM jobs WHERE id = $1", op.id)
    assert (result["state"], result["attempts"]) == ("succeeded", 2)


async def test_a_tasks_outcome_moves_each_memory_once_however_often_it_is_reported(deps, make_tenant):
    world = await make_tenant()
    [lesson] = await WriteService(deps).write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content="Warm the cache first",
        confidence=0.9)])
    for _ in range(3):
        [after] = await apply_outcome(deps.memories, deps.settings.pending_threshold, world.writer, [str(lesson.id)],
                                       task_id="t-77", outcome="failure")
    assert after.confidence == pytest.approx(0.765)
