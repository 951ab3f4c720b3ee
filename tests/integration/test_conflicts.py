"""Conflicts surfaced: a value that contradicts a confident one written by another agent (or, with
a window set, a recent one) is stored as NEEDS_CONFIRMATION beside it, not served by default,
explained by Search, listed, and resolved by confirming one side."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memplane_server.core.access.caller import Caller
from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Scope, Status
from memplane_server.services.conflicts import ConflictsService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def city(value: str, confidence: float = 1.0) -> MemoryDraft:
    return MemoryDraft(scope=Scope.GLOBAL, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                       content=f"The office is in {value}", entity="office", attribute="city", value=value,
                       confidence=confidence)


def as_agent(world, agent: str) -> Caller:
    """A tenant writer key acting as one of its agents: its global writes name that agent."""
    return replace(world.writer, agent_id=agent)


async def disputed(deps, world, *, confidence: float = 1.0):
    """a1 says Berlin, then a2 says Munich: (a1's memory, a2's memory)."""
    [first] = await WriteService(deps).write(as_agent(world, "a1"), [city("Berlin", confidence)])
    [second] = await WriteService(deps).write(as_agent(world, "a2"), [city("Munich")])
    return first, second


async def test_another_agents_contradiction_waits_for_confirmation_beside_the_served_value(deps, make_tenant):
    world = await make_tenant()
    first, second = await disputed(deps, world)
    assert second.status is Status.NEEDS_CONFIRMATION and second.conflicts_with == first.id
    assert (await MemoriesService(deps).get(world.writer, str(first.id))).status is Status.ACTIVE


async def test_the_same_writer_changing_a_value_replaces_it(deps, make_tenant):
    world = await make_tenant()
    [first] = await WriteService(deps).write(as_agent(world, "a1"), [city("Berlin")])
    [second] = await WriteService(deps).write(as_agent(world, "a1"), [city("Munich")])
    assert second.status is Status.ACTIVE and second.supersedes == first.id


async def test_a_doubtful_value_is_simply_replaced_by_another_agent(deps, make_tenant):
    world = await make_tenant()
    first, second = await disputed(deps, world, confidence=0.75)
    assert second.status is Status.ACTIVE and second.supersedes == first.id


async def test_with_a_window_a_quick_change_by_the_same_writer_waits_too(deps, make_tenant):
    world = await make_tenant()
    windowed = replace(deps, settings=deps.settings.model_copy(update={"conflict_window_seconds": 3600}))
    [first] = await WriteService(windowed).write(world.writer, [city("Berlin")])
    [second] = await WriteService(windowed).write(world.writer, [city("Munich")])
    assert second.status is Status.NEEDS_CONFIRMATION and second.conflicts_with == first.id


async def test_saying_the_disputed_value_again_confirms_nothing_and_adds_no_second_conflict(deps, make_tenant):
    world = await make_tenant()
    _, second = await disputed(deps, world)
    [again] = await WriteService(deps).write(as_agent(world, "a2"), [city("Munich")])
    assert again.id == second.id and again.status is Status.NEEDS_CONFIRMATION
    conflicts, _ = await ConflictsService(deps).list(world.writer, entity=None, page_size=10, page_token="")
    assert len(conflicts) == 1


async def test_search_serves_the_current_value_and_explains_that_it_is_disputed(deps, make_tenant):
    world = await make_tenant()
    first, second = await disputed(deps, world)
    hits = await SearchService(deps).search(world.writer, SearchQuery("which city is the office in?", explain=True))
    assert second.id not in {h.memory.id for h in hits}
    [served] = [h for h in hits if h.memory.id == first.id]
    [note] = [c for c in served.explanation if c.name == "conflict"]
    assert str(second.id) in note.detail and "Munich" in note.detail


async def test_open_conflicts_are_listed_with_their_reason_to_their_tenant_only(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    first, second = await disputed(deps, world)
    [conflict], token = await ConflictsService(deps).list(world.writer, entity="office", page_size=10, page_token="")
    assert (conflict.current.id, conflict.challenger.id, token) == (first.id, second.id, "")
    assert conflict.reason == "agents a1 and a2 disagree"
    assert (await ConflictsService(deps).list(other.writer, entity=None, page_size=10, page_token=""))[0] == []


async def test_confirming_the_challenger_serves_it_and_supersedes_the_other(deps, make_tenant):
    world = await make_tenant()
    first, second = await disputed(deps, world)
    kept, superseded = await ConflictsService(deps).resolve(world.writer, str(second.id), "challenger", "moved in May")
    assert (kept.id, kept.status, kept.supersedes) == (second.id, Status.ACTIVE, first.id)
    assert (superseded.id, superseded.status) == (first.id, Status.SUPERSEDED)
    history, _ = await MemoriesService(deps).history(
        world.writer, memory_id=str(second.id), entity=None, attribute=None, page_size=5, page_token="")
    assert (history[0].action, history[0].reason) == ("confirmed", "moved in May")
    assert (await ConflictsService(deps).list(world.writer, entity=None, page_size=10, page_token=""))[0] == []


async def test_keeping_the_current_value_supersedes_the_challenger(deps, make_tenant):
    world = await make_tenant()
    first, second = await disputed(deps, world)
    kept, superseded = await ConflictsService(deps).resolve(world.writer, str(second.id), "current", "")
    assert (kept.id, kept.status) == (first.id, Status.ACTIVE)
    assert (superseded.id, superseded.status) == (second.id, Status.SUPERSEDED)


async def test_a_resolved_conflict_cannot_be_resolved_again(deps, make_tenant):
    world = await make_tenant()
    _, second = await disputed(deps, world)
    await ConflictsService(deps).resolve(world.writer, str(second.id), "current", "")
    with pytest.raises(MemplaneError) as closed:
        await ConflictsService(deps).resolve(world.writer, str(second.id), "challenger", "")
    assert closed.value.reason == "CONFLICT_CLOSED"


@pytest.mark.parametrize("who", ["other tenant", "reader"])
async def test_only_a_caller_who_may_change_the_challenger_resolves_it(deps, make_tenant, who):
    world, other = await make_tenant(), await make_tenant()
    _, second = await disputed(deps, world)
    caller = other.writer if who == "other tenant" else world.reader
    with pytest.raises(MemplaneError) as refused:
        await ConflictsService(deps).resolve(caller, str(second.id), "challenger", "")
    assert refused.value.reason in ("MEMORY_NOT_FOUND", "READ_ONLY_KEY")
    assert (await MemoriesService(deps).get(world.writer, str(second.id))).status is Status.NEEDS_CONFIRMATION


async def test_resolving_needs_a_side(deps, make_tenant):
    world = await make_tenant()
    _, second = await disputed(deps, world)
    with pytest.raises(MemplaneError) as refused:
        await ConflictsService(deps).resolve(world.writer, str(second.id), None, "")
    assert refused.value.reason == "SIDE_REQUIRED"


async def test_an_agent_key_never_sees_a_conflict_between_another_agents_private_values(deps, make_tenant):
    world = await make_tenant()
    private = replace(city("Berlin"), scope=Scope.PRIVATE)
    await WriteService(deps).write(world.agent1, [private])
    await WriteService(deps).write(world.agent1, [replace(private, value="Munich", content="The office is in Munich")])
    assert (await ConflictsService(deps).list(world.agent2, entity=None, page_size=10, page_token=""))[0] == []

