"""LLM tokens per tenant, stage and model, kept in PostgreSQL; the daily token budget a platform
admin sets; the fallback chain. Against a local OpenAI-compatible server: each completion adds
its tokens to the tenant's row for the day; a tenant whose budget is spent is refused before
anything is sent, and the stages go on without the model; a model that fails or times out hands
the call to the next one, a malformed answer does not; one tenant can never read or write
another's usage."""
from __future__ import annotations

import json
from dataclasses import replace

import asyncpg
import pytest

from memplane_server.core.access.attribution import reset_work_tenant, set_work_tenant
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.llm.chat import ChatModel, json_answer
from memplane_server.llm.routing import Endpoint
from memplane_server.llm.structured import Expected
from memplane_server.services.reflection.consolidate import ConsolidateService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.usage import TokenUsage
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.session import caller_session
from memplane_server.stores.postgres.usage import TokenUsageStore
from tests.integration.conftest import PLATFORM
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner

pytestmark = pytest.mark.asyncio(loop_scope="session")
RANKING = Expected("ranking", {"type": "object"}, max_tokens=64)
ANSWER = Reply(json.dumps({"ranking": [1]}))


def admin_of(tenant: str) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=Role.TENANT_ADMIN, tenant_id=tenant, agent_id=None)


def usage(deps, default_budget: int = 0) -> TokenUsage:
    return TokenUsage(TokenUsageStore(deps.memories.pool), deps.tenancy, default_budget)


def chat(fake_llm, ledger: TokenUsage | None, *fallbacks: Endpoint, timeout: float = 5) -> ChatModel:
    return ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=timeout,
                     fallbacks=fallbacks, ledger=ledger)


async def ask(model: ChatModel, tenant: str):
    token = set_work_tenant(tenant)
    try:
        return await model.ask_json("system", "user", lambda text: json_answer(text, "ranking"), RANKING)
    finally:
        reset_work_tenant(token)


def chat_requests(fake: FakeLLM) -> list[dict]:
    return [r for r in fake.requests if r["path"].endswith("/chat/completions")]


@pytest.fixture
def spare_llm():
    """A second provider, the fallback."""
    fake = FakeLLM().start()
    yield fake
    fake.stop()


async def test_each_completion_adds_its_tokens_to_the_tenants_row_for_the_stage_and_model(deps, make_tenant, fake_llm):
    world, ledger = await make_tenant(), usage(deps)
    fake_llm.script(ANSWER, ANSWER)
    model = chat(fake_llm, ledger)
    await ask(model, world.tenant_id)
    await ask(model, world.tenant_id)
    report = await ledger.report(admin_of(world.tenant_id), "", None, None)
    [count] = report.counts
    assert (count.stage, count.model, count.input_tokens, count.output_tokens, count.completions) == (
        "rerank", "openai/test-model", 2, 2, 2)
    assert report.spent_today == 4 and report.budget.tokens_per_day == 0


async def test_a_tenant_whose_budget_is_spent_is_refused_before_anything_is_sent(deps, make_tenant, fake_llm):
    world, ledger = await make_tenant(), usage(deps)
    await ledger.set_budget(PLATFORM, world.tenant_id, 2, reset=False)
    fake_llm.script(ANSWER, ANSWER)
    model = chat(fake_llm, ledger)
    await ask(model, world.tenant_id)  # 1 + 1 tokens: the budget is spent
    with pytest.raises(MemplaneError) as refused:
        await ask(model, world.tenant_id)
    assert (refused.value.code, refused.value.reason) == (Code.RESOURCE_EXHAUSTED, "LLM_BUDGET_EXHAUSTED")
    assert len(chat_requests(fake_llm)) == 1


async def test_the_settings_budget_applies_until_a_platform_admin_sets_the_tenants_own(deps, make_tenant, fake_llm):
    world, ledger = await make_tenant(), usage(deps, default_budget=2)
    fake_llm.script(ANSWER, ANSWER)
    model = chat(fake_llm, ledger)
    await ask(model, world.tenant_id)
    with pytest.raises(MemplaneError, match="spent 2 of its 2"):
        await ask(model, world.tenant_id)
    await ledger.set_budget(PLATFORM, world.tenant_id, 0, reset=False)  # unlimited for this tenant
    await ask(model, world.tenant_id)
    assert (await ledger.set_budget(PLATFORM, world.tenant_id, None, reset=True)).tokens_per_day == 2


async def test_a_tenant_admin_reads_its_own_usage_but_neither_anothers_nor_sets_a_budget(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    ledger = usage(deps)
    for call in (lambda: ledger.report(admin_of(a.tenant_id), b.tenant_id, None, None),
                 lambda: ledger.report(a.writer, a.tenant_id, None, None),
                 lambda: ledger.set_budget(admin_of(a.tenant_id), a.tenant_id, 10**9, reset=False)):
        with pytest.raises(MemplaneError) as caught:
            await call()
        assert caught.value.code is Code.PERMISSION_DENIED


async def test_a_budget_without_a_value_or_a_reset_is_refused_and_nothing_changes(deps, make_tenant):
    world, ledger = await make_tenant(), usage(deps)
    await ledger.set_budget(PLATFORM, world.tenant_id, 5, reset=False)
    with pytest.raises(MemplaneError) as refused:
        await ledger.set_budget(PLATFORM, world.tenant_id, None, reset=False)
    assert refused.value.reason == "TOKEN_BUDGET_REQUIRED"
    assert (await ledger.report(PLATFORM, world.tenant_id, None, None)).budget.tokens_per_day == 5


async def test_row_level_security_keeps_usage_and_budget_rows_apart(deps, make_tenant, fake_llm):
    a, b = await make_tenant(), await make_tenant()
    ledger = usage(deps)
    await ledger.set_budget(PLATFORM, a.tenant_id, 5, reset=False)
    fake_llm.script(ANSWER)
    await ask(chat(fake_llm, ledger), a.tenant_id)
    async with caller_session(deps.memories.pool, b.writer) as conn:
        assert await conn.fetchval("SELECT count(*) FROM llm_token_usage WHERE tenant_id = $1", a.tenant_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM llm_token_budgets WHERE tenant_id = $1", a.tenant_id) == 0
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with caller_session(deps.memories.pool, b.writer) as conn:
            await conn.execute("INSERT INTO llm_token_usage (tenant_id, day, stage, model, input_tokens,"
                               " output_tokens, completions) VALUES ($1, current_date, 'rerank', 'm', 1, 1, 1)",
                               a.tenant_id)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with caller_session(deps.memories.pool, a.writer) as conn:
            await conn.execute("UPDATE llm_token_budgets SET tokens_per_day = 0 WHERE tenant_id = $1", a.tenant_id)


async def test_a_failing_model_hands_the_call_to_the_fallback_which_is_counted(deps, make_tenant, fake_llm, spare_llm):
    world, ledger = await make_tenant(), usage(deps)
    fake_llm.script(Reply(status=500, content="down"))
    spare_llm.script(ANSWER)
    model = chat(fake_llm, ledger, Endpoint("openai/spare-model", spare_llm.api_base, "k"))
    assert await ask(model, world.tenant_id) == {"ranking": [1]}
    [count] = (await ledger.report(PLATFORM, world.tenant_id, None, None)).counts
    assert count.model == "openai/spare-model"


async def test_a_model_that_times_out_hands_the_call_to_the_fallback(fake_llm, spare_llm):
    fake_llm.script(Reply(json.dumps({"ranking": [1]}), delay=3.0))
    spare_llm.script(Reply(json.dumps({"ranking": [2]})))
    model = chat(fake_llm, None, Endpoint("openai/spare-model", spare_llm.api_base, "k"), timeout=0.5)
    assert await ask(model, "") == {"ranking": [2]}


async def test_when_every_model_fails_the_call_is_unavailable_naming_each(fake_llm, spare_llm):
    fake_llm.script(Reply(status=500, content="down"))
    spare_llm.script(Reply(status=503, content="down too"))
    with pytest.raises(MemplaneError) as failed:
        await ask(chat(fake_llm, None, Endpoint("openai/spare-model", spare_llm.api_base, "k")), "")
    assert (failed.value.code, failed.value.reason) == (Code.UNAVAILABLE, "LLM_UNAVAILABLE")
    assert "openai/test-model" in failed.value.message and "openai/spare-model" in failed.value.message


async def test_a_malformed_answer_is_asked_again_of_the_same_model_never_of_the_fallback(fake_llm, spare_llm):
    fake_llm.script(Reply("not json"), Reply("still not json"))
    with pytest.raises(MemplaneError) as failed:
        await ask(chat(fake_llm, None, Endpoint("openai/spare-model", spare_llm.api_base, "k")), "")
    assert failed.value.reason == "LLM_MALFORMED_OUTPUT"
    assert len(chat_requests(fake_llm)) == 2 and chat_requests(spare_llm) == []


async def test_a_stage_with_its_own_model_sends_that_model_name(fake_llm):
    fake_llm.script(ANSWER)
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=5,
                      stages={"rerank": Endpoint("openai/ranker", fake_llm.api_base, "k")})
    await ask(model, "")
    assert chat_requests(fake_llm)[0]["body"]["model"] == "ranker"


async def test_search_keeps_its_fused_order_without_asking_the_model_once_the_budget_is_spent(
        deps, make_tenant, fake_llm):
    world, ledger = await make_tenant(), usage(deps)
    await WriteService(deps).write(world.writer, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=text)
        for text in ("Deploys need two approvals", "Rollbacks use the previous image tag")])
    await ledger.set_budget(PLATFORM, world.tenant_id, 1, reset=False)
    await ledger.record(world.tenant_id, "rerank", "openai/test-model", 1, 0)
    settings = deps.settings.model_copy(update={"llm_model": "openai/test-model", "search_rerank": True,
                                                "search_rewrite": True})
    staged = replace(deps, settings=settings, llm=chat(fake_llm, ledger))
    plain = await SearchService(deps).search(world.writer, SearchQuery("release process"))
    token = set_work_tenant(world.tenant_id)
    try:
        hits = await SearchService(staged).search(world.writer, SearchQuery("release process"))
    finally:
        reset_work_tenant(token)
    assert [h.memory.id for h in hits] == [h.memory.id for h in plain]
    assert chat_requests(fake_llm) == []


async def spent_with_lessons(deps, make_tenant, fake_llm):
    """A tenant with two similar lessons whose budget is spent, and deps whose model counts in its ledger."""
    world, ledger = await make_tenant(), usage(deps)
    staged = replace(deps, llm=chat(fake_llm, ledger))
    await WriteService(staged).write(world.writer, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content=text)
        for text in ("Drain the job queue before rotating the deploy keys",
                     "Always empty the queue first when you rotate keys")])
    await ledger.set_budget(PLATFORM, world.tenant_id, 1, reset=False)
    await ledger.record(world.tenant_id, "consolidation", "openai/test-model", 1, 0)
    return world, staged


async def test_consolidation_reports_its_clusters_unconsolidated_once_the_budget_is_spent(deps, make_tenant, fake_llm):
    world, staged = await spent_with_lessons(deps, make_tenant, fake_llm)
    token = set_work_tenant(world.tenant_id)
    try:
        found = await ConsolidateService(staged, WriteService(staged)).consolidate(
            world.writer, scope=None, domain=None, dry_run=False)
    finally:
        reset_work_tenant(token)
    assert found.degraded == "LLM_BUDGET_EXHAUSTED"
    assert [c.consolidated for c in found.clusters] == [None] and chat_requests(fake_llm) == []


async def test_a_scheduled_consolidation_with_the_budget_spent_succeeds_and_says_why(deps, make_tenant, fake_llm):
    world, staged = await spent_with_lessons(deps, make_tenant, fake_llm)
    await deps.jobs.pool.execute(
        "UPDATE jobs SET state = 'cancelled' WHERE type = 'consolidate' AND state IN ('pending', 'running')")
    await deps.jobs.schedule_consolidations(3600)
    job_id = await deps.jobs.pool.fetchval(
        "SELECT id FROM jobs WHERE type = 'consolidate' AND tenant_id = $1", world.tenant_id)
    done = await run_jobs_until(job_runner(staged), staged, world.writer, job_id, lambda v: v.state == "succeeded")
    assert done.result_summary == ("1 clusters of similar lessons or procedures, 0 consolidated;"
                                   " the others without the model: LLM_BUDGET_EXHAUSTED")
    assert chat_requests(fake_llm) == []
