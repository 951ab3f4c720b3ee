"""Reflect without an LLM, with an LLM through litellm against a local OpenAI-compatible
server, and as a durable background operation."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Status
from memplane_server.core.operations import Operation
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.llm.chat import ChatModel
from memplane_server.services.memories import MemoriesService
from memplane_server.services.operations import OperationsService
from memplane_server.services.write.service import WriteService
from tests.support.fake_llm import Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

GOOD = json.dumps({
    "memories": [
        {"kind": "lesson", "content": "Run migrations before deploying", "context": "deploys", "confidence": 0.9,
         "steps": [0]},
        {"kind": "preference", "content": "The user wants short answers", "context": "", "confidence": 0.5,
         "steps": [0]},
    ],
    "summary": "The deploy failed because migrations had not run.",
})


def draft(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                                 content=content, session_id="s1"), **kw})


@pytest.fixture
def llm_deps(deps, fake_llm):
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    return replace(deps, llm=model)


async def test_session_reflection_merges_near_duplicates_newest_wins(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    # Events: facts this alike would already have merged at write time.
    [old] = await write.write(world.writer, [draft("The user moved to Shanghai, China", kind=Kind.EVENT)])
    [new] = await write.write(world.writer, [draft("The user moved to Shanghai, China.", kind=Kind.EVENT)])
    [other] = await write.write(world.writer, [draft("The user adopted two cats", kind=Kind.EVENT)])
    outcome = await reflect_service(deps).run(world.writer, ReflectInput(session_id="s1"))
    assert outcome.merged_count == 1 and not outcome.used_llm
    assert (await MemoriesService(deps).get(world.writer, str(old.id))).status is Status.SUPERSEDED
    assert (await MemoriesService(deps).get(world.writer, str(new.id))).status is Status.ACTIVE
    assert (await MemoriesService(deps).get(world.writer, str(other.id))).status is Status.ACTIVE


async def test_session_reflection_summarises_current_facts(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [
        draft("Lives in Shanghai", entity="user", attribute="city", value="Shanghai"),
        draft("Likes green tea", kind=Kind.PREFERENCE),
    ])
    outcome = await reflect_service(deps).run(world.writer, ReflectInput(session_id="s1"))
    assert "user.city = Shanghai" in outcome.summary and "preference: Likes green tea" in outcome.summary
    assert [m.kind for m in outcome.memories] == [Kind.SUMMARY]


async def test_task_reflection_with_an_llm_stores_typed_memories(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(GOOD))
    task = Task("t1", "Deploy the API", (TaskStep("helm upgrade", "CrashLoopBackOff: missing column"),), "failure",
                "you forgot the migrations")
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=task))
    assert outcome.used_llm
    assert [(m.kind, m.status) for m in outcome.memories] == [
        (Kind.LESSON, Status.ACTIVE), (Kind.PREFERENCE, Status.PENDING), (Kind.SUMMARY, Status.ACTIVE)]
    assert outcome.summary == "The deploy failed because migrations had not run."
    sent = fake_llm.requests[0]["body"]
    assert sent["temperature"] == 0 and "missing column" in sent["messages"][1]["content"]


async def test_malformed_model_output_is_retried_once(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply("sure! here are memories"), Reply(GOOD))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=Task("t2", "Deploy")))
    assert len(fake_llm.requests) == 2 and len(outcome.memories) == 3


async def test_failed_llm_job_is_retried_by_the_worker_and_succeeds(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    service = reflect_service(llm_deps)
    op = await service.reflect(world.writer, ReflectInput(task=Task("t3", "Deploy"), mode="async"))
    assert isinstance(op, Operation) and op.state == "pending"
    fake_llm.script(Reply("provider down", status=503))
    runner = job_runner(llm_deps)
    failed_once = await run_jobs_until(runner, llm_deps, world.writer, op.id, lambda v: v.attempts == 1)
    assert failed_once.state == "pending" and failed_once.error_reason
    fake_llm.script(Reply(GOOD))
    done = await run_jobs_until(runner, llm_deps, world.writer, op.id, lambda v: v.state == "succeeded")
    assert len(done.result_memory_ids) == 3


async def test_cancelled_operation_is_not_run(deps, make_tenant):
    world = await make_tenant()
    op = await reflect_service(deps).reflect(world.writer, ReflectInput(task=Task("t4", "x"), mode="async"))
    cancelled = await OperationsService(deps).cancel(world.writer, str(op.id))
    assert cancelled.state == "cancelled"
    other = await make_tenant()
    with pytest.raises(MemplaneError):
        await OperationsService(deps).get(other.writer, str(op.id))
