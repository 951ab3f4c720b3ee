"""Reflection is decided, not only requested: tasks are reflected on when they can teach
something, sessions every N turns or when a key fact changes, searches that find nothing are
signals, and every decision is kept with its reason for the caller who may see it."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.core.reflection.reflection import ReflectInput, Task
from memplane_server.services.search.service import SearchQuery, SearchService
from tests.support.services import reflect_service, write_intake

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def decided(deps, caller, subject_type: str | None = None):
    decisions, _ = await reflect_service(deps).decisions(
        caller, subject_type=subject_type, subject_id=None, page_size=50, page_token="")
    return [(d.subject_type, d.subject_id, d.decision, d.reason) for d in decisions]


async def test_a_routine_success_like_an_earlier_task_is_skipped_and_says_why(deps, make_tenant):
    world = await make_tenant()
    reflect = reflect_service(deps)
    first = await reflect.reflect(world.writer, ReflectInput(task=Task("t1", "Rotate the deploy keys", outcome="success"),
                                                             decide=True))
    again = await reflect.reflect(world.writer, ReflectInput(task=Task("t2", "Rotate the deploy keys", outcome="success"),
                                                             decide=True))
    assert (first.skipped, first.reason) == (False, "a new kind of task")
    assert (again.skipped, again.reason, again.memories) == (True, "a routine success like an earlier task", [])
    assert await decided(deps, world.writer) == [
        ("task", "t2", "skipped", "a routine success like an earlier task"),
        ("task", "t1", "ran", "a new kind of task"),
    ]


async def test_a_failure_like_an_earlier_task_is_still_reflected_on(deps, make_tenant):
    world = await make_tenant()
    reflect = reflect_service(deps)
    await reflect.reflect(world.writer, ReflectInput(task=Task("t1", "Rotate the deploy keys", outcome="success")))
    failed = await reflect.reflect(world.writer, ReflectInput(
        task=Task("t2", "Rotate the deploy keys", outcome="failure"), decide=True))
    assert (failed.skipped, failed.reason) == (False, "the task failed") and failed.memories


async def test_a_session_is_reflected_on_every_n_turns(deps, make_tenant):
    world = await make_tenant()
    every3 = replace(deps, settings=deps.settings.model_copy(update={"reflect_every_turns": 3}))
    writes = write_intake(every3)
    turn = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content="hi",
                       session_id="chat-9")
    for n in range(7):
        await writes.accept(world.writer, [replace(turn, content=f"turn {n}")], None)
    sessions = [d for d in await decided(every3, world.writer, "session")]
    assert sessions == [("session", "chat-9", "ran", "3 turns since the last reflection of the session")] * 2
    jobs = await every3.jobs.pool.fetch(
        "SELECT payload->>'session_id' AS s FROM jobs WHERE tenant_id = $1 AND type = 'reflect'", world.tenant_id)
    assert [j["s"] for j in jobs] == ["chat-9", "chat-9"]


async def test_a_changed_key_fact_of_a_session_triggers_its_reflection(deps, make_tenant):
    world = await make_tenant()
    on_change = replace(deps, settings=deps.settings.model_copy(update={"reflect_on_entity_change": True}))
    writes = write_intake(on_change)
    fact = MemoryDraft(scope=Scope.GLOBAL, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                       content="Lives in Shanghai", entity="user", attribute="city", value="Shanghai", session_id="chat-1")
    await writes.accept(world.writer, [fact], None)
    await writes.accept(world.writer, [replace(fact, value="Shenzhen", content="Lives in Shenzhen")], None)
    assert await decided(on_change, world.writer, "session") == [("session", "chat-1", "ran", "user.city changed")]


async def test_a_search_that_finds_nothing_is_kept_as_a_signal(deps, make_tenant):
    world = await make_tenant()
    search = SearchService(deps)
    assert await search.search(world.writer, SearchQuery("what is the wifi password?")) == []
    for _ in range(100):  # kept in the background, after the answer
        if signals := await decided(deps, world.writer, "search"):
            break
        await asyncio.sleep(0.05)
    assert signals == [("search", "", "signal", "nothing found for: what is the wifi password?")]


async def test_an_agents_decisions_are_its_own_and_a_tenants_stay_in_the_tenant(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    await reflect_service(deps).reflect(world.agent1, ReflectInput(task=Task("a1-task", "x", outcome="failure"),
                                                                   scope=Scope.PRIVATE, decide=True))
    await reflect_service(deps).reflect(world.writer, ReflectInput(task=Task("tenant-task", "y", outcome="failure"),
                                                                   decide=True))
    assert {d[1] for d in await decided(deps, world.agent1)} == {"a1-task", "tenant-task"}
    assert {d[1] for d in await decided(deps, world.agent2)} == {"tenant-task"}
    assert await decided(deps, other.writer) == []
