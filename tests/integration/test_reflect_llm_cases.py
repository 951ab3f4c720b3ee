"""Reflection with a model (litellm against the local OpenAI-compatible server): what made a task
worth reflecting on steers the prompt, the model's typed memories are stored with their context
and confidence, malformed answers leave a reflection without the model's part that says so (the
trajectory kept), as does a spent token budget; memories that cite no entry or contradict theirs
are not stored; and a stale summary is refreshed from what changed only."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from memplane_server.core.access.attribution import reset_work_tenant, set_work_tenant
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.llm.chat import ChatModel
from memplane_server.services.reflection.reflect import opened_task
from memplane_server.services.usage import TokenUsage
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.usage import TokenUsageStore
from tests.integration.conftest import PLATFORM
from tests.support.fake_llm import Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def llm_deps(deps, fake_llm):
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    return replace(deps, llm=model, settings=deps.settings.model_copy(update={"job_max_attempts": 2}))


def answer(kind: str, content: str, context: str, confidence: float, steps: list[int]) -> str:
    return json.dumps({"memories": [{"kind": kind, "content": content, "context": context, "confidence": confidence,
                                     "steps": steps}], "summary": "What happened."})


def prompt_of(fake_llm) -> str:
    chats = [r for r in fake_llm.requests if r["path"].endswith("/chat/completions")]
    return chats[-1]["body"]["messages"][1]["content"]


@pytest.mark.parametrize("task, focus, kind, content, steps", [
    (Task("deploy-1", "Deploy the API", (TaskStep("run deploy", "error: schema missing"),), "failure"),
     "The task failed: store at least one lesson", "lesson", "Run migrations before deploying the API", [1]),
    (Task("deploy-2", "Deploy the API", (TaskStep("run deploy", "timeout"), TaskStep("run deploy", "ok")), "success"),
     "The task succeeded after 1 retry: store a lesson", "procedure", "Deploy: run migrations, then deploy", [1, 2]),
    (Task("deploy-3", "Deploy the API", (), "success", feedback="I prefer deploys after 6pm"),
     "The user gave feedback: store any preference", "preference", "The user prefers deploys after 6pm", [1]),
])
async def test_what_made_the_task_worth_it_steers_the_model_and_its_memory_is_stored(
        llm_deps, fake_llm, make_tenant, task, focus, kind, content, steps):
    world = await make_tenant()
    fake_llm.script(Reply(answer(kind, content, "deploying the API", 0.85, steps)))
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


TRIP = Task("trip-1", "Book me a flight to Paris on Friday. I never travel before 8am.",
            (TaskStep("search_flights Paris Friday", "3 flights: 06:45, 09:10, 11:30"),
             TaskStep("book 06:45", "error: the user refused the 06:45 flight"),
             TaskStep("book 09:10", "booked")), "success", feedback="Never offer me flights before 8am")


def memories(*items: tuple[str, str, list[int]]) -> str:
    return json.dumps({"memories": [{"kind": k, "content": c, "context": "", "confidence": 0.9, "steps": s}
                                    for k, c, s in items], "summary": "Booked the 09:10 flight to Paris."})


async def test_the_transcript_numbers_the_entries_a_memory_cites(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(memories()))
    await reflect_service(llm_deps).run(world.writer, ReflectInput(task=TRIP))
    prompt = prompt_of(fake_llm)
    assert "[0] Request: Book me a flight" in prompt and "[3] Step: book 09:10" in prompt
    assert "[4] Feedback: Never offer me flights before 8am" in prompt


async def test_a_chinese_task_asks_the_model_for_chinese_memories(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(memories()))
    task = Task("zh-1", "每天早上 8 点给用户推送打卡提醒。", (TaskStep("crontab 添加 0 8 * * * push.py", "已添加。"),),
                "success")
    await reflect_service(llm_deps).run(world.writer, ReflectInput(task=task))
    assert prompt_of(fake_llm).endswith("Write every memory and the summary in Chinese, the language of the request.")


async def test_a_contradicting_or_uncited_memory_is_not_stored_and_the_rest_are(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(memories(
        ("preference", "The user always travels before 8am.", [0]),  # the opposite of [0]
        ("preference", "The user never travels before 8am.", [0, 4]),
        ("lesson", "Next time, offer only flights after 8am.", []),  # cites nothing
        ("lesson", "Next time, offer only flights after 8am.", [2, 4]),
        ("fact", "The user flies to Paris on Fridays.", [9]),  # no entry 9
    )))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=TRIP))
    stored = [(m.kind, m.content) for m in outcome.memories if m.kind is not Kind.SUMMARY]
    assert stored == [(Kind.PREFERENCE, "The user never travels before 8am."),
                      (Kind.LESSON, "Next time, offer only flights after 8am.")]
    assert outcome.dropped == {"contradicts_entries": 1, "no_citation": 1, "unknown_entry": 1}


async def test_a_stored_memory_keeps_the_entries_it_cites(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(memories(("lesson", "Next time, offer only flights after 8am.", [4, 2, 4]))))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=TRIP))
    assert outcome.memories[0].metadata == {"cited_steps": ["feedback", "step 2"]}


async def test_a_memory_citing_an_entry_too_many_keeps_the_ones_that_exist(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(memories(("lesson", "Next time, offer only flights after 8am.", [2, 9]))))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=TRIP))
    assert outcome.memories[0].metadata == {"cited_steps": ["step 2"]} and outcome.dropped == {}


async def test_a_context_holding_a_number_nothing_read_holds_is_left_out_and_the_memory_stored(
        llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(answer("lesson", "Next time, offer only flights after 8am.",
                                 "The task succeeded after 1 retry: store a lesson", 0.9, [2])))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(task=TRIP))
    lesson = outcome.memories[0]
    assert (lesson.kind, lesson.content, lesson.context) == (Kind.LESSON, "Next time, offer only flights after 8am.", "")


async def test_a_session_memory_keeps_the_ids_of_the_memories_it_cites(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    plain = replace(llm_deps, llm=None)
    # One write each: turns of one write share a time, and the session is numbered oldest first.
    turns = [t for text in ("hello there", "Please never call me before 9am") for t in await WriteService(plain).write(
        world.writer, [MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text,
                                   session_id="chat-2")])]
    fake_llm.script(Reply(json.dumps({"memories": [
        {"kind": "preference", "content": f"The user never wants calls before {hour}am.", "context": "",
         "confidence": 0.9, "steps": [2]} for hour in (9, 7)], "summary": "The user set a calling rule."})))
    outcome = await reflect_service(llm_deps).run(world.writer, ReflectInput(session_id="chat-2"))
    [learned] = [m for m in outcome.memories if m.kind is Kind.PREFERENCE]
    cited = learned.metadata["cited_memories"]
    assert [t.content for t in turns if str(t.id) in cited] == ["Please never call me before 9am"]
    assert outcome.dropped == {"ungrounded": 1}  # the 7am one: no 7 anywhere in the session


async def test_a_reflection_with_the_tenants_budget_spent_stores_what_needs_no_model_and_says_why(
        deps, fake_llm, make_tenant):
    world, ledger = await make_tenant(), TokenUsage(TokenUsageStore(deps.memories.pool), deps.tenancy, 0)
    await ledger.set_budget(PLATFORM, world.tenant_id, 1, reset=False)
    await ledger.record(world.tenant_id, "reflection", "openai/test-model", 1, 0)
    spent = replace(deps, llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=5,
                                        ledger=ledger))
    token = set_work_tenant(world.tenant_id)
    try:
        outcome = await reflect_service(spent).run(world.writer, ReflectInput(task=TRIP))
    finally:
        reset_work_tenant(token)
    assert not outcome.used_llm and "token budget for today is spent" in outcome.degraded
    assert [m.kind for m in outcome.memories] == [Kind.SUMMARY]
    assert not [r for r in fake_llm.requests if r["path"].endswith("/chat/completions")]


async def test_a_stale_summary_with_the_tenants_budget_spent_is_rebuilt_without_the_model(
        deps, fake_llm, make_tenant):
    world, ledger = await make_tenant(), TokenUsage(TokenUsageStore(deps.memories.pool), deps.tenancy, 0)
    fact = MemoryDraft(scope=Scope.GLOBAL, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                       content="Lives in Shanghai", entity="user", attribute="city", value="Shanghai", session_id="chat-3")
    await WriteService(deps).write(world.writer, [fact])
    summary = (await reflect_service(deps).run(world.writer, ReflectInput(session_id="chat-3"))).memories[-1]
    await WriteService(deps).write(world.writer, [replace(fact, value="Shenzhen", content="Lives in Shenzhen")])
    await ledger.set_budget(PLATFORM, world.tenant_id, 1, reset=False)
    await ledger.record(world.tenant_id, "summary", "openai/test-model", 1, 0)
    spent = replace(deps, llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=5,
                                        ledger=ledger))
    token = set_work_tenant(world.tenant_id)
    try:
        refreshed = await reflect_service(spent).refresh_summary(world.writer, summary.id)
    finally:
        reset_work_tenant(token)
    assert "token budget for today is spent" in refreshed.degraded
    assert "user.city = Shenzhen" in refreshed.memories[0].content
    assert not [r for r in fake_llm.requests if r["path"].endswith("/chat/completions")]
