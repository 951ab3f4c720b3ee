"""Turn windows: a session's turns are also indexed with their neighbours, built in the background."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.write.windows import windows_to_build
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.context import ContextService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.session import caller_session

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
        if not (await deps.contexts.backlog(caller)).sessions:
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


async def queued(deps, tenant_id: str) -> set[str]:
    return {r["session_id"] for r in await deps.contexts.pool.fetch(
        "SELECT session_id FROM context_queue WHERE tenant_id = $1", tenant_id)}


async def test_a_session_left_without_turns_by_a_hard_forget_is_not_queued_for_windows(deps, make_tenant):
    """Migration 0029: nothing to build there; a session keeping a turn is queued as before."""
    world = await make_tenant()
    written = await WriteService(deps).write(world.writer, turns("Jo: hi", "Kim: hello", session="emptied")
                                             + turns("Lu: one", "Mo: two", session="kept"))
    await build_windows(deps, world.writer)
    gone = [str(m.id) for m in written[:3]]  # both turns of "emptied", one of "kept"
    await ForgetService(deps).forget(world.writer, ids=gone, f=None, hard=True, dry_run=False, reason="")
    assert await queued(deps, world.tenant_id) == {"kept"}


async def test_a_build_leased_before_a_forget_emptied_its_session_saves_no_digest(deps, make_tenant):
    """The forget still marks the session before taking it out of the queue: a digest read before
    the forget (holding the forgotten text) is refused at its save."""
    from memplane_server.core.write.digests import Digest

    world = await make_tenant()
    await drain_windows(deps)
    [gone] = await WriteService(deps).write(world.writer, turns("Ned: the vault code is 4711", session="v"))
    leased = await deps.contexts.lease_next(60)
    assert (leased.tenant_id, leased.session_id) == (world.tenant_id, "v")
    await ForgetService(deps).forget(world.writer, ids=[str(gone.id)], f=None, hard=True, dry_run=False, reason="")
    assert await queued(deps, world.tenant_id) == set()
    stale = Digest("v", ("global", None, None), ("vault",), (), "Ned: the vault code is 4711", None, 1, None, None)
    assert not await deps.digests.save(world.tenant_id, "v", leased.marked_at, [stale])
    assert not await deps.contexts.pool.fetchval(
        "SELECT count(*) FROM session_digests WHERE tenant_id = $1", world.tenant_id)


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


async def upgrade_windows(deps) -> None:
    """Runs the upgrader until no session of any test awaits one."""
    service = ContextService(deps)
    for _ in range(5000):
        if not await service.upgrade_next():
            return
    raise AssertionError("the upgrade queue never emptied")


async def window_vectors(deps, ids) -> dict:
    rows = await deps.memories.pool.fetch(
        "SELECT id, context_embedding, embedding FROM memories WHERE id = ANY($1::uuid[])", list(ids))
    return {r["id"]: (r["context_embedding"].to_numpy(), r["embedding"].to_numpy()) for r in rows}


async def test_windows_are_averaged_at_once_then_upgraded_to_their_texts_embedding(deps, make_tenant):
    world = await make_tenant()
    await drain_windows(deps)
    await upgrade_windows(deps)
    question, reply = await WriteService(deps).write(world.writer, turns(
        "Nora: which city did you move to?", "Otto: we live in Lisbon now"))
    await build_windows(deps, world.writer)
    vectors = await window_vectors(deps, [question.id, reply.id])
    mean = (vectors[question.id][1] + vectors[reply.id][1]) / 2
    assert np.allclose(vectors[question.id][0], mean, atol=1e-6)
    stats = await MemoriesService(deps).stats(world.writer, MemoryFilter())
    assert (stats.awaiting_context, stats.awaiting_upgrade) == (0, 1)

    await upgrade_windows(deps)
    text = "Nora: which city did you move to?\nOtto: we live in Lisbon now"
    embedded = (await deps.embedder.embed_passages([text]))[0]
    assert np.allclose((await window_vectors(deps, [question.id]))[question.id][0], embedded, atol=1e-3)
    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).awaiting_upgrade == 0
    # An upgraded window is current: the next build leaves it as it is.
    await deps.memories.pool.execute("SELECT mp_mark_context($1::text[], $2::text[], false)",
                                      [world.tenant_id], ["s1"])
    await build_windows(deps, world.writer)
    assert np.allclose((await window_vectors(deps, [question.id]))[question.id][0], embedded, atol=1e-3)
    hits = {h.memory.id: h for h in await search(deps, world.writer, "Lisbon")}
    assert "keyword_context" in channels(hits[question.id])


async def test_an_upgrade_never_saves_over_a_window_changed_since_it_was_read(deps, make_tenant):
    world = await make_tenant()
    await drain_windows(deps)
    await upgrade_windows(deps)
    first, second = await WriteService(deps).write(world.writer, turns("Pia: my locker is", "Quin: number 41"))
    await build_windows(deps, world.writer)
    await MemoriesService(deps).update(world.writer, str(second.id), {"content": "Quin: number 17"})
    stale = await deps.contexts.lease_upgrade(60)
    assert stale.tenant_id == world.tenant_id
    await ContextService(deps).upgrade_next()  # nothing leased is left: the stale lease holds the session
    await build_windows(deps, world.writer)
    await upgrade_windows(deps)
    assert by_words(await search(deps, world.writer, "41")) == []


async def test_stats_tell_how_long_the_oldest_session_has_waited_and_only_for_the_callers_tenant(deps, make_tenant):
    alice, bob = await make_tenant(), await make_tenant()
    await drain_windows(deps)
    await upgrade_windows(deps)
    await WriteService(deps).write(alice.writer, turns("Rae: hello", "Sam: hi there"))
    await deps.memories.pool.execute(
        "UPDATE context_queue SET first_marked_at = clock_timestamp() - interval '42 seconds' WHERE tenant_id = $1",
        alice.tenant_id)
    stats = await MemoriesService(deps).stats(alice.writer, MemoryFilter())
    assert stats.awaiting_context == 1 and 42 <= stats.context_backlog_seconds < 60
    await build_windows(deps, alice.writer)
    assert (await MemoriesService(deps).stats(alice.writer, MemoryFilter())).awaiting_upgrade == 1
    # Row-level security alone keeps another tenant's queues out of its counts.
    other = await MemoriesService(deps).stats(bob.writer, MemoryFilter())
    assert (other.awaiting_context, other.context_backlog_seconds, other.awaiting_upgrade) == (0, 0.0, 0)
    async with caller_session(deps.memories.pool, bob.writer) as conn:
        assert await conn.fetchval("SELECT count(*) FROM context_upgrades") == 0


async def test_a_session_written_without_pause_is_built_once_its_first_write_waited_long_enough(deps, make_tenant):
    world = await make_tenant()
    await drain_windows(deps)
    await WriteService(deps).write(world.writer, turns("Tia: one", "Uma: two"))
    assert not await ContextService(deps, quiet_seconds=60).refresh_next()
    await deps.memories.pool.execute(
        "UPDATE context_queue SET first_marked_at = clock_timestamp() - interval '11 seconds' WHERE tenant_id = $1",
        world.tenant_id)
    assert await ContextService(deps, quiet_seconds=60).refresh_next()
