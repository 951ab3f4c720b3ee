"""A session summary never silently goes stale: the write that changes one of its sources marks
it STALE in the same transaction and queues its rebuild, which replaces it exactly once."""
from __future__ import annotations

import uuid

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.core.reflection.reflection import ReflectInput
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def city(value: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                                 content=f"The user lives in {value}", entity="user", attribute="city", value=value,
                                 session_id="chat-1"), **kw})


async def summarised_city(deps, caller) -> tuple:
    """user.city = Shanghai in chat-1, then Reflect(session=chat-1): the fact and its summary."""
    [fact] = await WriteService(deps).write(caller, [city("Shanghai")])
    outcome = await reflect_service(deps).run(caller, ReflectInput(session_id="chat-1"))
    summary = outcome.memories[-1]
    assert summary.kind is Kind.SUMMARY and "user.city = Shanghai" in summary.content
    return fact, summary


async def status_of(deps, caller, memory) -> Status:
    return (await MemoriesService(deps).get(caller, str(memory.id))).status


async def refresh_jobs(deps, summary_id: uuid.UUID) -> list:
    return await deps.jobs.pool.fetch(
        "SELECT id, state, tenant_id, caller FROM jobs WHERE type = 'refresh_summary' AND payload->>'summary_id' = $1",
        str(summary_id))


async def test_a_new_value_of_a_summarised_fact_marks_the_summary_stale_at_once(deps, make_tenant):
    world = await make_tenant()
    fact, summary = await summarised_city(deps, world.writer)
    await WriteService(deps).write(world.writer, [city("Shenzhen")])
    assert await status_of(deps, world.writer, summary) is Status.STALE
    history, _ = await MemoriesService(deps).history(
        world.writer, memory_id=str(summary.id), entity=None, attribute=None, page_size=10, page_token="")
    assert history[0].action == "stale" and history[0].reason == f"source {fact.id} was superseded"
    [job] = await refresh_jobs(deps, summary.id)
    assert job["state"] == "pending" and job["tenant_id"] == world.tenant_id


async def test_a_source_given_to_another_user_with_new_content_marks_the_summary_stale(deps, make_tenant):
    # The memory moves to its new user's key (crypto-shredding), so its key changes as a re-seal's
    # does; a re-seal alone marks nothing stale, a caller's change of what it says does.
    world = await make_tenant()
    fact, summary = await summarised_city(deps, world.writer)
    await MemoriesService(deps).update(world.writer, str(fact.id), {"user_id": "mo", "value": "Shenzhen"})
    assert await status_of(deps, world.writer, summary) is Status.STALE


async def test_a_stale_summary_is_out_of_default_search_and_the_current_fact_answers_first(deps, make_tenant):
    world = await make_tenant()
    _, summary = await summarised_city(deps, world.writer)
    [current] = await WriteService(deps).write(world.writer, [city("Shenzhen")])
    hits = await SearchService(deps).search(world.writer, SearchQuery("where does the user live now?"))
    assert hits[0].memory.id == current.id
    assert summary.id not in {h.memory.id for h in hits}


async def test_the_refresh_job_replaces_the_stale_summary_with_what_is_true_now(deps, make_tenant):
    world = await make_tenant()
    _, summary = await summarised_city(deps, world.writer)
    await WriteService(deps).write(world.writer, [city("Shenzhen")])
    [job] = await refresh_jobs(deps, summary.id)
    await run_jobs_until(job_runner(deps), deps, world.writer, job["id"], lambda op: op.state == "succeeded")
    assert await status_of(deps, world.writer, summary) is Status.SUPERSEDED
    served = await deps.memories.list(
        world.writer, MemoryFilter(session_id="chat-1", kinds=(Kind.SUMMARY,)), limit=10, after=None)
    assert [m.content for m in served] == ["Session chat-1: 1 active memories.\n- user.city = Shenzhen"]


async def test_a_retried_refresh_stores_its_summary_once(deps, make_tenant):
    world = await make_tenant()
    _, summary = await summarised_city(deps, world.writer)
    await WriteService(deps).write(world.writer, [city("Shenzhen")])
    reflect = reflect_service(deps)
    first = await reflect.refresh_summary(world.writer, summary.id)
    # A worker killed after the write but before the job was marked done runs it again.
    await deps.memories.pool.execute("UPDATE memories SET status = 'stale' WHERE id = $1", summary.id)
    again = await reflect.refresh_summary(world.writer, summary.id)
    assert [m.id for m in again.memories] == [m.id for m in first.memories]
    summaries = await deps.memories.list(
        world.writer, MemoryFilter(session_id="chat-1", kinds=(Kind.SUMMARY,), statuses=tuple(Status)),
        limit=10, after=None)
    assert len(summaries) == 2  # the stale one and its one replacement


async def test_forgetting_a_summarised_fact_marks_the_summary_stale(deps, make_tenant):
    world = await make_tenant()
    fact, summary = await summarised_city(deps, world.writer)
    await ForgetService(deps).forget(world.writer, ids=[str(fact.id)], f=None, hard=False, dry_run=False, reason="")
    assert await status_of(deps, world.writer, summary) is Status.STALE
    assert len(await refresh_jobs(deps, summary.id)) == 1


async def test_hard_forgetting_a_summarised_fact_erases_the_summary_and_queues_its_rebuild(deps, make_tenant):
    """The summary states the erased fact, so it is erased too (migration 0010); the job that
    rebuilds it names the session, since the summary is gone."""
    world = await make_tenant()
    fact, summary = await summarised_city(deps, world.writer)
    await ForgetService(deps).forget(world.writer, ids=[str(fact.id)], f=None, hard=True, dry_run=False, reason="")
    assert await deps.memories.get(world.writer, summary.id) is None
    [job] = await refresh_jobs(deps, summary.id)
    payload = await deps.jobs.pool.fetchval("SELECT payload FROM jobs WHERE id = $1", job["id"])
    assert payload["erased"] is True and payload["session_id"] == "chat-1"


async def test_searches_that_return_a_summarised_fact_leave_its_summary_active(deps, make_tenant):
    world = await make_tenant()
    fact, summary = await summarised_city(deps, world.writer)
    await deps.memories.mark_used(world.writer, [fact.id])
    assert await status_of(deps, world.writer, summary) is Status.ACTIVE


async def test_an_agents_private_summary_turns_stale_when_a_tenant_key_changes_its_global_source(deps, make_tenant):
    world = await make_tenant()
    [fact] = await WriteService(deps).write(world.writer, [city("Shanghai", scope=Scope.GLOBAL)])
    outcome = await reflect_service(deps).run(world.agent1, ReflectInput(session_id="chat-1", scope=Scope.PRIVATE))
    summary = outcome.memories[-1]
    assert summary.scope is Scope.PRIVATE and summary.agent_id == "a1"
    await WriteService(deps).write(world.writer, [city("Shenzhen", scope=Scope.GLOBAL)])
    assert await status_of(deps, world.agent1, summary) is Status.STALE
    [job] = await refresh_jobs(deps, summary.id)
    # The rebuild acts as the summary's owner, so it may write the agent's private memory.
    await run_jobs_until(job_runner(deps), deps, world.agent1, job["id"], lambda op: op.state == "succeeded")
    served = await deps.memories.list(
        world.agent1, MemoryFilter(session_id="chat-1", kinds=(Kind.SUMMARY,)), limit=10, after=None)
    assert [(m.agent_id, m.content) for m in served] == [("a1", "Session chat-1: 1 active memories.\n- user.city = Shenzhen")]


async def test_a_users_long_term_summary_carries_across_sessions_and_turns_stale_too(deps, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    await writes.write(world.writer, [city("Shanghai", user_id="u7"),
                                      MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.PREFERENCE,
                                                  content="Prefers green tea", session_id="chat-2", user_id="u7")])
    await reflect_service(deps).run(world.writer, ReflectInput(session_id="chat-1", user_id="u7"))
    [long_term] = [m for m in await deps.memories.list(
        world.writer, MemoryFilter(user_id="u7", kinds=(Kind.SUMMARY,)), limit=10, after=None) if m.source_type == "user"]
    assert long_term.content == "User u7: 2 active memories.\n- user.city = Shanghai\n- preference: Prefers green tea"
    await writes.write(world.writer, [city("Shenzhen", user_id="u7")])
    assert await status_of(deps, world.writer, long_term) is Status.STALE
    [job] = await refresh_jobs(deps, long_term.id)
    await run_jobs_until(job_runner(deps), deps, world.writer, job["id"], lambda op: op.state == "succeeded")
    [fresh] = [m for m in await deps.memories.list(
        world.writer, MemoryFilter(user_id="u7", kinds=(Kind.SUMMARY,)), limit=10, after=None) if m.source_type == "user"]
    assert "user.city = Shenzhen" in fresh.content and fresh.id != long_term.id


async def user_summaries(deps, caller, user_id: str) -> list:
    return [m for m in await deps.memories.list(
        caller, MemoryFilter(user_id=user_id, kinds=(Kind.SUMMARY,)), limit=10, after=None) if m.source_type == "user"]


async def test_hard_forgetting_a_fact_of_a_users_long_term_summary_erases_it_and_rebuilds_it_from_what_is_left(
        deps, make_tenant):
    """The long-term summary states the erased fact, so it goes too (migration 0010); its rebuild names
    the user, since the summary is gone, and is written from the user's remaining memories."""
    world = await make_tenant()
    writes = WriteService(deps)
    [fact, _] = await writes.write(world.writer, [
        city("Shanghai", user_id="u8"),
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.PREFERENCE,
                    content="Prefers green tea", session_id="chat-2", user_id="u8")])
    await reflect_service(deps).run(world.writer, ReflectInput(session_id="chat-1", user_id="u8"))
    [long_term] = await user_summaries(deps, world.writer, "u8")
    await ForgetService(deps).forget(world.writer, ids=[str(fact.id)], f=None, hard=True, dry_run=False, reason="")
    assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", long_term.id) == 0
    [job] = await refresh_jobs(deps, long_term.id)
    payload = await deps.jobs.pool.fetchval("SELECT payload FROM jobs WHERE id = $1", job["id"])
    assert (payload["erased"], payload["source_type"], payload["user_id"]) == (True, "user", "u8")
    await run_jobs_until(job_runner(deps), deps, world.writer, job["id"], lambda op: op.state == "succeeded")
    [fresh] = await user_summaries(deps, world.writer, "u8")
    assert fresh.content == "User u8: 1 active memories.\n- preference: Prefers green tea"


async def test_a_users_long_term_summary_erased_with_the_last_of_their_memories_is_not_rebuilt(deps, make_tenant):
    world = await make_tenant()
    [fact] = await WriteService(deps).write(world.writer, [city("Shanghai", user_id="u9")])
    await reflect_service(deps).run(world.writer, ReflectInput(session_id="chat-1", user_id="u9"))
    [long_term] = await user_summaries(deps, world.writer, "u9")
    await ForgetService(deps).forget(world.writer, ids=[str(fact.id)], f=None, hard=True, dry_run=False, reason="")
    [job] = await refresh_jobs(deps, long_term.id)
    await run_jobs_until(job_runner(deps), deps, world.writer, job["id"], lambda op: op.state == "succeeded")
    assert await user_summaries(deps, world.writer, "u9") == []
