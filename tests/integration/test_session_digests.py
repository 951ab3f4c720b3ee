"""Session digests (migration 0022): built with the turn windows, read first by the session
channel of Search, never across a visibility boundary, and dropped when a turn they were built
from is forgotten or erased."""
from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.write.digests import build_digests
from memplane_server.llm.chat import ChatModel
from memplane_server.services.forget.erasure import ErasureService
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.context import ContextService
from memplane_server.services.write.digests import DigestService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.forget.erasure import ErasureStore
from memplane_server.stores.postgres.session import caller_session
from memplane_server.stores.sealing import OPENERS
from tests.support.fake_llm import Reply
from tests.support.scan import describe, scan

pytestmark = pytest.mark.asyncio(loop_scope="session")
START = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def turns(*contents: str, session: str = "s1", scope: Scope | None = None, user: str | None = None) -> list[MemoryDraft]:
    return [
        MemoryDraft(scope=scope, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=c,
                    session_id=session, user_id=user, occurred_at=START + timedelta(seconds=i))
        for i, c in enumerate(contents)
    ]


async def build(deps, caller) -> None:
    """Runs the window builder (which builds the digests) until the caller's tenant has nothing waiting."""
    on = replace(deps, settings=deps.settings.model_copy(update={"session_digests": True}))
    service = ContextService(on, digests=DigestService(on))
    for _ in range(500):
        if not (await deps.contexts.backlog(caller)).sessions:
            return
        await service.refresh_next()
    raise AssertionError("digests were never built")


async def drain(deps) -> None:
    """Builds every tenant's waiting windows and digests, with no model: the builder takes any
    tenant's session next, and an earlier test's left waiting would take a reply scripted for this
    one's."""
    on = replace(deps, settings=deps.settings.model_copy(update={"session_digests": True}))
    service = ContextService(on, digests=DigestService(on))
    while await service.refresh_next():
        pass


async def readable(deps, caller) -> list[dict]:
    """Every digest row the caller's transaction can see, whatever the query asks (row-level security)."""
    async with caller_session(deps.contexts.pool, caller) as conn:
        return [dict(r) for r in await conn.fetch(
            "SELECT tenant_id, session_id, scope, agent_id, digest FROM session_digests")]


def opened(row, world) -> str:
    return OPENERS.open_text(row["sealed_key"], world.tenant_id, "digest", row["digest"])


def digest_rows(hits) -> set[str]:
    return {h.where for h in hits if h.store == "postgres" and h.where == "session_digests"}


async def test_a_session_gets_one_digest_per_visibility_with_its_rare_words(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns("Ann: we are moving to Tarragona", "Ben: the Tarragona flat?"))
    await WriteService(deps).write(world.agent1, turns("Ann: my private Quillon notes", scope=Scope.PRIVATE))
    await build(deps, world.writer)
    rows = await deps.contexts.pool.fetch(
        "SELECT scope, agent_id, entities, turns, embedding IS NOT NULL AS has_vector FROM session_digests"
        " WHERE tenant_id = $1 ORDER BY scope", world.tenant_id)
    assert [(r["scope"], r["agent_id"], r["turns"], r["has_vector"]) for r in rows] == [
        ("global", "", 2, True), ("private", "a1", 1, True)]
    assert "tarragona" in rows[0]["entities"] and "quillon" in rows[1]["entities"]


async def test_row_level_security_keeps_digests_to_their_tenant_and_agent(deps, make_tenant):
    alice, bob = await make_tenant(), await make_tenant()
    await WriteService(deps).write(alice.writer, turns("Cal: the vault is in Orinoco"))
    await WriteService(deps).write(alice.agent1, turns("Cal: a1 keeps Vellamo secret", scope=Scope.PRIVATE))
    await build(deps, alice.writer)
    assert await readable(deps, bob.writer) == [] and await readable(deps, bob.agent1) == []
    assert {r["scope"] for r in await readable(deps, alice.writer)} == {"global"}
    assert {r["scope"] for r in await readable(deps, alice.agent2)} == {"global"}
    assert {(r["scope"], r["agent_id"]) for r in await readable(deps, alice.agent1)} == {("global", ""), ("private", "a1")}
    # The store's own reads, asked by another tenant with the exact words and vectors.
    vector = await deps.embedder.embed_query("the vault is in Orinoco")
    for caller in (bob.writer, bob.agent1):
        assert await deps.digests.nearest(caller, MemoryFilter(), vector, limit=50) == []
        assert await deps.digests.matching(caller, MemoryFilter(), ["orinoco", "vellamo"], limit=50) == []
    assert await deps.digests.matching(alice.agent2, MemoryFilter(), ["vellamo"], limit=50) == []
    assert len(await deps.digests.matching(alice.agent1, MemoryFilter(), ["vellamo"], limit=50)) == 1


async def test_a_domain_sessions_digest_is_read_by_the_domains_members_only(deps, make_tenant):
    domain = f"dig-{uuid.uuid4().hex[:8]}"
    writer, member, outsider = await make_tenant({domain: True}), await make_tenant({domain: False}), await make_tenant()
    await WriteService(deps).write(writer.writer, [replace(d, domain=domain) for d in turns(
        "Pat: the Ravensholm runbook", scope=Scope.DOMAIN)])
    await build(deps, writer.writer)
    assert [(r["tenant_id"], r["scope"]) for r in await readable(deps, member.reader)] == [(writer.tenant_id, "domain")]
    assert await readable(deps, outsider.writer) == []
    assert len(await deps.digests.matching(member.reader, MemoryFilter(), ["ravensholm"], limit=5)) == 1
    assert await deps.digests.matching(outsider.writer, MemoryFilter(), ["ravensholm"], limit=5) == []


async def test_the_app_role_cannot_write_digests(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(Exception, match="permission denied"):
        async with caller_session(deps.contexts.pool, world.writer) as conn:
            await conn.execute(
                "INSERT INTO session_digests (tenant_id, session_id, scope, digest, turns) VALUES ($1, 's', 'global', 'x', 1)",
                world.tenant_id)


@pytest.mark.parametrize("hard", [True, False])
async def test_forgetting_a_turn_drops_its_words_from_the_digest_at_once_and_after_the_rebuild(deps, make_tenant, runtime, hard):
    world = await make_tenant()
    kept, gone = await WriteService(deps).write(world.writer, turns(
        "Dee: the meeting is on Monday", "Eli: bring the Zorbanite samples"))
    await build(deps, world.writer)
    assert digest_rows(await scan(deps.contexts.pool, runtime.redis_client, ["zorbanite"])), "the digest should hold the word first"
    await ForgetService(deps).forget(world.writer, ids=[str(gone.id)], f=None, hard=hard, dry_run=False, reason="")
    assert not digest_rows(hits := await scan(deps.contexts.pool, runtime.redis_client, ["zorbanite"])), describe(hits)
    await build(deps, world.writer)
    assert not digest_rows(hits := await scan(deps.contexts.pool, runtime.redis_client, ["zorbanite"])), describe(hits)
    assert await deps.contexts.pool.fetchval(
        "SELECT turns FROM session_digests WHERE tenant_id = $1", world.tenant_id) == 1  # rebuilt from what is left


async def test_forgetting_by_filter_drops_the_digest(deps, make_tenant, runtime):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns("Fin: the Plovdiv trip", session="trip"))
    await build(deps, world.writer)
    await ForgetService(deps).forget(world.writer, ids=None, f=MemoryFilter(session_id="trip"), hard=True,
                                     dry_run=False, reason="")
    await build(deps, world.writer)
    assert not digest_rows(hits := await scan(deps.contexts.pool, runtime.redis_client, ["plovdiv"])), describe(hits)


async def test_erasing_a_user_drops_the_digests_of_their_sessions_and_counts_them(deps, make_tenant, runtime):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns("Gil: my address is Quarrington Lane", user="u-gil"))
    await build(deps, world.writer)
    admin = Caller(key_id="admin", role=Role.TENANT_ADMIN, tenant_id=world.tenant_id, agent_id=None)
    done = await ErasureService(deps, ErasureStore(deps.contexts.pool)).erase(admin, "u-gil", mode="sync")
    assert done.receipt.counts["postgres.session_digests"] == 1
    await build(deps, world.writer)
    assert not digest_rows(hits := await scan(deps.contexts.pool, runtime.redis_client, ["quarrington"])), describe(hits)


async def test_a_builder_that_read_before_a_forget_cannot_save_the_old_digest(deps, make_tenant):
    world = await make_tenant()
    service = ContextService(deps)
    while await service.refresh_next():  # other tests' sessions, so the next lease is this one
        pass
    kept, gone = await WriteService(deps).write(world.writer, turns("Hal: the password?", "Ivy: Thistlewood"))
    leased = await deps.contexts.lease_next(60)
    assert leased.tenant_id == world.tenant_id
    stale = build_digests("s1", await deps.contexts.session_turns(world.tenant_id, "s1", with_vectors=True), {})
    await ForgetService(deps).forget(world.writer, ids=[str(gone.id)], f=None, hard=True, dry_run=False, reason="")
    assert not await deps.digests.save(world.tenant_id, "s1", leased.marked_at, stale)
    assert await readable(deps, world.writer) == []


async def test_the_session_channel_reaches_the_session_before_its_turn_and_says_so(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns(
        "Jo: we finally moved to Lisbon", "Kim: how was the move?", "Jo: the movers broke a lamp", session="move"))
    await WriteService(deps).write(world.writer, turns(
        "Jo: I started a pottery class", "Kim: what did you make?", "Jo: a lamp base", session="pottery"))
    await build(deps, world.writer)
    on = replace(deps, settings=deps.settings.model_copy(update={"session_weight": 1.0, "session_top_sessions": 1}))
    hits = await SearchService(on).search(world.writer, SearchQuery("what happened around the move to Lisbon",
                                                                    top_k=10, explain=True))
    via = [h for h in hits if any(c.name == "session" for c in h.explanation)]
    assert via and {h.memory.session_id for h in via} == {"move"}
    detail = next(c.detail for c in via[0].explanation if c.name == "session")
    assert "session 'move'" in detail and "lisbon" in detail


async def test_the_session_channel_is_off_by_default(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, turns("Lu: the Nairobi conference"))
    await build(deps, world.writer)
    hits = await SearchService(deps).search(world.writer, SearchQuery("Nairobi conference", top_k=5, explain=True))
    assert hits and not any(c.name == "session" for h in hits for c in h.explanation)


async def test_a_configured_model_writes_the_digest_and_its_embedding_is_the_vector(deps, make_tenant, fake_llm):
    world = await make_tenant()
    await drain(deps)
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    llm_deps = replace(deps, llm=model, settings=deps.settings.model_copy(
        update={"session_digest_llm": True, "llm_model": "openai/test-model"}))
    fake_llm.script(Reply(json.dumps({"digest": "Mo and Ned planned the relocation to Valparaiso in June."})))
    await WriteService(deps).write(world.writer, turns("Mo: so, the big change", "Ned: yes, June it is"))
    await build(llm_deps, world.writer)
    row = await deps.contexts.pool.fetchrow(
        "SELECT digest, sealed_key, written_by, keywords::text AS keywords FROM session_digests WHERE tenant_id = $1",
        world.tenant_id)
    assert "Valparaiso" not in row["digest"]  # sealed, as memory texts are
    assert row["written_by"] == "openai/test-model" and "relocation to Valparaiso" in opened(row, world)
    assert "valparaiso" in row["keywords"]
    prompt = fake_llm.requests[-1 if not fake_llm.requests[-1]["path"].endswith("/embeddings") else -2]["body"]
    assert "Mo: so, the big change" in json.dumps(prompt)


async def test_a_failing_model_leaves_the_digest_built_without_it(deps, make_tenant, fake_llm):
    world = await make_tenant()
    model = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5)
    llm_deps = replace(deps, llm=model, settings=deps.settings.model_copy(
        update={"session_digest_llm": True, "llm_model": "openai/test-model"}))
    fake_llm.script(Reply(status=500, content="down"), Reply(status=500, content="down"), Reply(status=500, content="down"))
    await WriteService(deps).write(world.writer, turns("Oz: the Kilimanjaro climb"))
    await build(llm_deps, world.writer)
    row = await deps.contexts.pool.fetchrow(
        "SELECT digest, sealed_key, written_by FROM session_digests WHERE tenant_id = $1", world.tenant_id)
    assert row["written_by"] == "" and "kilimanjaro" in opened(row, world)
