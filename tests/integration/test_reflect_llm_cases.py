"""Reflection with a model (litellm against the local OpenAI-compatible server): what made a task
worth reflecting on steers the prompt, the model's typed memories are stored with their context
and confidence, malformed answers leave a reflection without the model's part that says so (the
trajectory kept), and a stale
summary is refreshed from what changed only."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.llm.chat import ChatModel
from memplane_server.services.reflection.reflect import opened_task
from memplane_server.services.write.service import WriteService
from tests.support.fake_llm import Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def llm_deps(deps, fake_llm):
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    return replace(deps, llm=model, settings=deps.settings.model_copy(update={"job_max_attempts": 2}))


def answer(kind: str, content: str, context: str, confidence: float) -> str:
    return json.dumps({"memories": [{"kind": kind, "content": content, "context": context, "confidence": confidence}],
                       "summary": "What happened."})


def prompt_of(fake_llm) -> str:
    chats = [r for r in fake_llm.requests if r["path"].endswith("/chat/completions")]
    return chats[-1]["body"]["messages"][1]["content"]


@pytest.mark.parametrize("task, focus, kind, content", [
    (Task("deploy-1", "Deploy the API", (TaskStep("run deploy", "error: schema missing"),), "failure"),
     "The task failed: store at least one lesson", "lesson", "Run migrations before deploying the API"),
    (Task("deploy-2", "Deploy the API", (TaskStep("run deploy", "timeout"), TaskStep("run deploy", "ok")), "success"),
     "The task succeeded after 1 retry: store the procedure", "procedure", "Deploy: run migrations, then deploy"),
    (Task("deploy-3", "Deploy the API", (), "success", feedback="I prefer deploys after 6pm"),
     "The user gave feedback: store any preference", "preference", "The user prefers deploys after 6pm"),
])
async def test_what_made_the_task_worth_it_steers_the_model_and_its_memory_is_stored(
        llm_deps, fake_llm, make_tenant, task, focus, kind, content):
    world = await make_tenant()
    fake_llm.script(Reply(answer(kind, content, "deploying the API", 0.85)))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=task))
    assert focus in prompt_of(fake_llm)
    [learned] = [m for m in outcome.memories if m.kind.value == kind]
    assert (learned.content, learned.context, learned.confidence) == (content, "deploying the API", pytest.approx(0.85))


async def test_malformed_answers_leave_the_job_done_without_the_model_and_say_so(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    task = Task("deploy-4", "Deploy the API", (TaskStep("run deploy", "error: schema missing"),), "failure")
    op = await reflect_service(llm_deps).reflect(world.writer, ReflectInput(task=task, mode="async"))
    fake_llm.script(*[Reply("sure, here you go")] * 2)  # asked twice, then the same answer would come again
    done = await run_jobs_until(job_runner(llm_deps), llm_deps, world.writer, op.id, lambda v: v.state == "succeeded")
    assert done.attempts == 1 and "reflected without it" in done.result_summary
    assert done.result_summary.startswith("Task deploy-4 (failure)") and len(done.result_memory_ids) == 1
    payload = await llm_deps.jobs.pool.fetchval("SELECT payload FROM jobs WHERE id = $1", op.id)
    assert opened_task(payload, world.tenant_id)["task"]["steps"][0]["observation"] == "error: schema missing"


async def test_a_sync_reflection_with_malformed_answers_stores_no_part_of_them(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    task = Task("deploy-5", "Deploy the API", (TaskStep("run deploy", "error: schema missing"),), "failure")
    fake_llm.script(Reply('{"memories": [{"kind": "lesson", "content": "Run migrations first"}], "summary": 3}'),
                    Reply('{"memories": [{"kind": "lesson", "content": "Run migrations first"}]'))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=task))
    assert not outcome.used_llm and "reflected without it" in outcome.degraded
    assert [m.kind for m in outcome.memories] == [Kind.SUMMARY]


async def test_a_stale_summary_is_refreshed_from_the_changes_only(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    plain = replace(llm_deps, llm=None)
    fact = MemoryDraft(scope=Scope.GLOBAL, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                       content="Lives in Shanghai", entity="user", attribute="city", value="Shanghai", session_id="chat-1")
    await WriteService(plain).write(world.writer, [
        fact, replace(fact, kind=Kind.TURN, content="I also play the cello on weekends", entity=None, attribute=None,
                      value=None)])
    summary = (await reflect_service(plain).run(world.writer, ReflectInput(session_id="chat-1"))).memories[-1]
    await WriteService(plain).write(world.writer, [replace(fact, value="Shenzhen", content="Lives in Shenzhen")])
    fake_llm.script(Reply(json.dumps({"summary": "The user moved to Shenzhen."})))
    refreshed = await reflect_service(llm_deps).refresh_summary(world.writer, summary.id)
    prompt = prompt_of(fake_llm)
    assert "No longer true:\n- user.city = Shanghai" in prompt and "user.city = Shenzhen" in prompt
    assert "cello" not in prompt  # unchanged since the summary: not sent again
    assert refreshed.memories[0].content == "The user moved to Shenzhen."
    served = await llm_deps.memories.list(
        world.writer, MemoryFilter(session_id="chat-1", kinds=(Kind.SUMMARY,)), limit=5, after=None)
    assert [m.id for m in served] == [refreshed.memories[0].id]


async def test_a_model_that_fails_a_synchronous_reflection_is_unavailable_not_an_internal_error(
        llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply("provider down", status=503))
    with pytest.raises(MemplaneError) as down:
        await reflect_service(llm_deps).run(world.writer, ReflectInput(task=Task("t-down", "Deploy", outcome="failure")))
    assert (down.value.code, down.value.reason) == (Code.UNAVAILABLE, "LLM_UNAVAILABLE")
