"""Pseudo-relevance feedback (services/search/feedback.py) learns only from memories the caller may read."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def event(content: str, scope: Scope | None = None) -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content)


def with_feedback(deps):
    return replace(deps, settings=deps.settings.model_copy(update={
        "search_feedback_docs": 3, "search_feedback_vector": 1.0, "search_feedback_terms": 10}))


async def test_feedback_documents_are_only_those_the_caller_may_read(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    [mine] = await WriteService(deps).write(world.agent1, [event("a1 kayaked on the fjord", Scope.PRIVATE)])
    [theirs] = await WriteService(deps).write(world.agent2, [event("a2 kayaked on the fjord", Scope.PRIVATE)])
    [foreign] = await WriteService(deps).write(other.writer, [event("the other tenant kayaked on the fjord")])
    docs = await deps.feedback.documents(world.agent1, [theirs.id, foreign.id, mine.id])
    assert [d.id for d in docs] == [mine.id]
    assert docs[0].vector is not None and "fjord" in docs[0].terms


async def test_expansion_terms_never_come_from_another_agents_or_tenants_memory(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    deps = with_feedback(deps)
    write = WriteService(deps).write
    # Only invisible memories pair the query's word with "quokka"; a visible memory holds "quokka"
    # without the query's word, so the keyword feedback channel would find it only by learning
    # "quokka" from a memory the caller may not read.
    await write(world.agent2, [event("kayak trip with a quokka on the shore", Scope.PRIVATE)])
    await write(other.writer, [event("kayak trip with a quokka on the shore")])
    [visible_quokka] = await write(world.writer, [event("a quokka sightings list")])
    # The feedback documents (the first pass's best 3) are these, which say nothing of quokkas.
    [kayak, *_] = await write(world.agent1, [event(f"kayak trip {i} along the river", Scope.PRIVATE) for i in range(3)])
    hits = await SearchService(deps).search(world.agent1, SearchQuery("kayak trip", explain=True))
    channels = {h.memory.id: {c.name for c in h.explanation} for h in hits}
    assert all(h.memory.tenant_id == world.tenant_id and h.memory.agent_id in (None, "a1") for h in hits)
    assert "vector_feedback" in channels[kayak.id]  # the second pass ran
    assert "keyword_feedback" not in channels.get(visible_quokka.id, set())


async def test_expansion_terms_from_a_visible_hit_reach_memories_without_the_query_words(deps, make_tenant):
    world = await make_tenant()
    deps = with_feedback(deps)
    write = WriteService(deps).write
    await write(world.writer, [event("kayak trip with a quokka on the shore")])
    [quokka] = await write(world.writer, [event("a quokka sightings list")])
    hits = await SearchService(deps).search(world.writer, SearchQuery("kayak trip", explain=True))
    [hit] = [h for h in hits if h.memory.id == quokka.id]
    assert "keyword_feedback" in {c.name for c in hit.explanation}
