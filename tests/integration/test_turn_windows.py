"""Turn windows: a session's turns are also indexed with their neighbours, built in the background."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memplane_server.core.windows import windows_to_build
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.services.context import ContextService
from memplane_server.services.forget import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search import SearchQuery, SearchService
from memplane_server.services.write import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")
START = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def turns(*contents: str, session: str = "s1", scope: Scope | None = None) -> list[MemoryDraft]:
    return [
        MemoryDraft(scope=scope, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=c,
                    session_id=session, occurred_at=START + timedelta(seconds=i))
        for i, c in enumerate(contents)
    ]


async def build_windows(deps, caller) -> None:
    """Runs the background builder until the caller's tenant has nothing waiting (other tests'
    sessions share the queue and are built on the way)."""
    service = ContextService(deps)
    for _ in range(500):
        if not await deps.contexts.backlog(caller):
            return
        await service.refresh_next()
    raise AssertionError("windows were never built")


async def drain_windows(deps) -> None:
    """Builds every waiting session of every test, so the queue holds only what comes next."""
    service = ContextService(deps)
    for _ in range(5000):
        if not await service.refresh_next():
            return
    raise AssertionError("the window queue never emptied")


async def search(deps, caller, text: str, **kw):
    return await SearchService(deps).search(caller, SearchQuery(text, top_k=10, explain=True, **kw))


def channels(hit) -> set[str]:
    return {c.name for c in hit.explanation}


def by_words(hits) -> list:
    """Hits that matched the query's words, in the memory or its window (the vector channel
    always returns the nearest memories, whatever they say)."""
    return [h for h in hits if {"keyword", "keyword_context"} & channels(h)]


async def test_a_question_turn_is_found_through_the_reply_beside_it(deps, make_tenant):
    world = await make_tenant()
    question, reply, _ = await WriteService(deps).write(world.writer, turns(
        "Anna: where did you go last weekend?", "Ben: we camped by Lake Tahoe", "Anna: sounds lovely"))
    await build_windows(deps, world.writer)
    hits = {str(h.memory.id): h for h in await search(deps, world.writer, "Tahoe")}
    assert "keyword_context" in channels(hits[str(question.id)])
    assert "keyword" not in channels(hits[str(question.id)])


async def test_a_window_never_holds_a_turn_its_reader_cannot_see(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, turns("a1 private: the vault code is zebra", scope=Scope.PRIVATE))
    await WriteService(deps).write(world.writer, turns("shared note about lunch", scope=Scope.GLOBAL))
    await build_windows(deps, world.writer)
    assert by_words(await search(deps, world.agent2, "zebra")) == []


async def test_another_tenants_window_is_never_searched(deps, make_tenant):
    alice, bob = await make_tenant(), await make_tenant()
    await WriteService(deps).write(alice.writer, turns("Alice: our launch codename is heliotrope", "Alice: ok"))
    await WriteService(deps).write(bob.writer, turns("Bob: hello", "Bob: ok"))
    await build_windows(deps, alice.writer)
    await build_windows(deps, bob.writer)
    assert by_words(await search(deps, bob.writer, "heliotrope")) == []


async def test_forgetting_a_turn_empties_the_windows_that_held_it_at_once(deps, make_tenant):
    world = await make_tenant()
    _, secret, _ = await WriteService(deps).write(world.writer, turns(
        "Dan: what is the door code?", "Eve: it is marigold", "Dan: thanks"))
    await build_windows(deps, world.writer)
    await ForgetService(deps).forget(world.writer, ids=[str(secret.id)], f=None, hard=True, dry_run=False, reason="")
    assert by_words(await search(deps, world.writer, "marigold")) == []
    await build_windows(deps, world.writer)
    assert by_words(await search(deps, world.writer, "marigold")) == []


async def test_changing_a_turn_rebuilds_its_neighbours_windows_with_the_new_text(deps, make_tenant):
    world = await make_tenant()
    first, second = await WriteService(deps).write(world.writer, turns("Fay: my cat is called", "Gus: Pepper"))
    await build_windows(deps, world.writer)
    await MemoriesService(deps).update(world.writer, str(second.id), {"content": "Gus: Saffron"})
    assert by_words(await search(deps, world.writer, "Pepper")) == []
    await build_windows(deps, world.writer)
    hits = {h.memory.id: h for h in await search(deps, world.writer, "Saffron")}
    assert "keyword_context" in channels(hits[first.id])


async def test_stats_count_sessions_until_their_windows_are_built(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns("one", "two", session="a") + turns("three", session="b"))
    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).awaiting_context == 2
    await build_windows(deps, world.writer)
    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).awaiting_context == 0


async def test_a_builder_that_read_before_a_forget_cannot_save_the_old_window(deps, make_tenant):
    world = await make_tenant()
    await drain_windows(deps)
    kept, gone = await WriteService(deps).write(world.writer, turns("Hal: the password?", "Ivy: thistle"))
    leased = await deps.contexts.lease_next(60)
    assert leased.tenant_id == world.tenant_id
    stale = windows_to_build(await deps.contexts.session_turns(world.tenant_id, "s1", with_vectors=False), 1, deps.embedder.model_id)
    await ForgetService(deps).forget(world.writer, ids=[str(gone.id)], f=None, hard=True, dry_run=False, reason="")
    await deps.contexts.save(world.tenant_id, [(w, "thistl", None) for w in stale])
    await deps.contexts.finish(world.tenant_id, "s1", leased.marked_at)
    assert by_words(await search(deps, world.writer, "thistle")) == []
    await build_windows(deps, world.writer)
    assert by_words(await search(deps, world.writer, "thistle")) == []


async def test_a_session_still_being_written_waits_for_a_quiet_moment(deps, make_tenant):
    world = await make_tenant()
    await drain_windows(deps)
    await WriteService(deps).write(world.writer, turns("Jo: hi", "Kim: hello"))
    assert not await ContextService(deps, quiet_seconds=60).refresh_next()
    assert await ContextService(deps, quiet_seconds=0).refresh_next()


async def test_averaged_windows_need_no_embedding_and_still_find_the_reply(deps, make_tenant):
    from dataclasses import replace
    averaging = replace(deps, settings=deps.settings.model_copy(update={"context_vectors": "average"}))
    world = await make_tenant()
    question, reply = await WriteService(deps).write(world.writer, turns(
        "Lena: what is your dog called?", "Max: his name is Biscuit"))
    await drain_windows(averaging)
    rows = {r["id"]: r for r in await deps.memories.pool.fetch(
        "SELECT id, context_embedding, embedding FROM memories WHERE id = ANY($1::uuid[])", [question.id, reply.id])}
    mean = (rows[question.id]["embedding"].to_numpy() + rows[reply.id]["embedding"].to_numpy()) / 2
    assert np.allclose(rows[question.id]["context_embedding"].to_numpy(), mean, atol=1e-6)
    hits = {h.memory.id: h for h in await search(deps, world.writer, "Biscuit")}
    assert "keyword_context" in channels(hits[question.id])
