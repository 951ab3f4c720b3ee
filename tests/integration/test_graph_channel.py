"""The entity index (migration 0017) and Search's graph channel over real PostgreSQL."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scored
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.graph import GraphChannel
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def turn(content: str, session: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content,
                       session_id=session)


def graph_on(deps):
    """The channel is off by default (settings.graph_weight); these tests turn it on."""
    return replace(deps, settings=deps.settings.model_copy(update={"graph_weight": 1.0}))


def graph_of(hit):
    return next((c for c in hit.explanation if c.name == "graph"), None)


async def test_entities_are_indexed_at_write_and_follow_an_update(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [turn("Caroline: I moved here from Sweden with Door Dash.", "s1")])
    assert sorted(await deps.entities.entities_of(world.writer, m.id)) == ["door dash", "sweden"]
    await MemoriesService(deps).update(world.writer, str(m.id), {"content": "Caroline: I live in Lisbon now."}, reason="moved")
    assert await deps.entities.entities_of(world.writer, m.id) == ["lisbon"]


async def test_a_hit_brings_back_a_memory_of_another_session_sharing_its_rare_entity(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps).write
    await write(world.writer, [turn(f"Jon: note {i} about the weather and the garden", "s0") for i in range(8)])
    [trip] = await write(world.writer, [turn("Jon: I took a trip to Rome with Marcus Aurelio last week.", "s1")])
    [bakery] = await write(world.writer, [turn("Gina: Marcus Aurelio opened a bakery downtown.", "s2")])
    hits = await SearchService(graph_on(deps)).search(world.writer, SearchQuery("Who went on a trip to Rome?", explain=True))
    assert hits[0].memory.id == trip.id
    linked = next(h for h in hits if h.memory.id == bakery.id)
    component = graph_of(linked)
    assert component is not None
    assert "'marcus aurelio'" in component.detail and "hit #1" in component.detail


async def test_an_entity_the_query_names_links_memories_holding_it(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps).write
    await write(world.writer, [turn(f"Mel: note {i} about painting and pottery", "s0") for i in range(8)])
    [concert] = await write(world.writer, [turn("Mel: the Summer Sounds band played all night", "s1")])
    hits = await SearchService(graph_on(deps)).search(world.writer, SearchQuery("When did Mel see Summer Sounds?", explain=True))
    component = graph_of(next(h for h in hits if h.memory.id == concert.id))
    assert component is not None and "with the query" in component.detail


async def test_an_entity_held_by_too_many_memories_links_nothing(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps).write
    await write(world.writer, [turn(f"note {i} about the weather", "s0") for i in range(4)])
    stored = await write(world.writer, [turn(f"Ana met Boris at the market, day {i}", f"s{i}") for i in range(4)])
    first_pass = {"vector": [Scored(stored[0], 1.0)]}

    async def linked(max_rows: int) -> set:
        channel = GraphChannel(deps.entities, weight=1.0, max_rows=max_rows)
        found = await channel.search(world.writer, MemoryFilter(), "Who met Boris?", first_pass, {}, limit=10, as_of=None)
        return {s.record.id for s in found.scored}

    assert await linked(3) == set()
    assert await linked(4) == {m.id for m in stored}


async def kyoto(deps, world):
    write = WriteService(deps).write
    await write(world.writer, [turn(f"note {i} about the weather and the garden", "s0") for i in range(6)])
    return (await write(world.writer, [turn("Ana visited Kyoto in spring", "s1")]))[0], \
        (await write(world.writer, [turn("It was rainy in Kyoto for Ana", "s2")]))[0]


async def test_the_graph_channel_keeps_to_the_search_filter(deps, make_tenant):
    world = await make_tenant()
    a, b = await kyoto(deps, world)
    search = SearchService(graph_on(deps)).search
    everywhere = await search(world.writer, SearchQuery("What about Kyoto?", explain=True))
    assert graph_of(next(h for h in everywhere if h.memory.id == b.id)) is not None
    hits = await search(world.writer, SearchQuery("What about Kyoto?", filter=MemoryFilter(session_id="s1"), explain=True))
    assert a.id in {h.memory.id for h in hits} and b.id not in {h.memory.id for h in hits}


async def test_the_channel_is_off_by_default(deps, make_tenant):
    world = await make_tenant()
    await kyoto(deps, world)
    query = SearchQuery("What about Kyoto?", explain=True)
    assert any(graph_of(h) for h in await SearchService(graph_on(deps)).search(world.writer, query))
    off = SearchService(deps)
    hits = await off.search(world.writer, query)
    assert hits and all(graph_of(h) is None for h in hits)
