"""Write through the use case against real PostgreSQL and Redis."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.services.memories import MemoriesService
from memplane_server.services.working import WorkingService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, kind: Kind = Kind.FACT, **kw) -> MemoryDraft:
    base = dict(scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content)
    return MemoryDraft(**{**base, **kw})


async def test_write_stores_every_field_and_a_history_entry(deps, make_tenant):
    world = await make_tenant()
    [record] = await WriteService(deps).write(world.writer, [draft(
        "The user lives in Shanghai", entity="user", attribute="city", value="Shanghai", tags=("home",),
        metadata={"k": [1, "二"]}, confidence=0.9, user_id="u1", session_id="s1", source_type="turn", source_id="t7",
        context="when shipping parcels",
    )])
    again = await MemoriesService(deps).get(world.writer, str(record.id))
    assert (again.scope, again.layer, again.kind, again.status) == (Scope.GLOBAL, Layer.SEMANTIC, Kind.FACT, Status.ACTIVE)
    assert (again.entity, again.attribute, again.value, again.tags) == ("user", "city", "Shanghai", ["home"])
    assert again.metadata == {"k": [1, "二"]} and again.context == "when shipping parcels"
    assert again.embedding_model == deps.embedder.model_id
    history, _ = await MemoriesService(deps).history(world.writer, memory_id=str(record.id), entity=None,
                                                    attribute=None, page_size=10, page_token="")
    assert [h.action for h in history] == ["created"]


async def test_agent_default_scope_is_private(deps, make_tenant):
    world = await make_tenant()
    [record] = await WriteService(deps).write(world.agent1, [draft("I prefer tea", Kind.PREFERENCE)])
    assert record.scope is Scope.PRIVATE and record.agent_id == "a1"


async def test_low_confidence_is_stored_pending(deps, make_tenant):
    world = await make_tenant()
    [record] = await WriteService(deps).write(world.writer, [draft("Maybe likes jazz", confidence=0.5)])
    assert record.status is Status.PENDING


async def test_one_bad_item_leaves_nothing_of_the_batch(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(world.writer, [draft("fine"), draft("x" * (deps.settings.max_content_bytes + 1))])
    assert err.value.reason == "CONTENT_TOO_LARGE" and err.value.metadata["index"] == "1"
    stats = await MemoriesService(deps).stats(world.writer, MemoryFilter())
    assert stats.total == 0


@pytest.mark.parametrize(
    "bad, reason",
    [
        (dict(kind=None), "KIND_REQUIRED"),
        (dict(content="   "), "CONTENT_REQUIRED"),
        (dict(confidence=float("nan")), "INVALID_CONFIDENCE"),
        (dict(layer=Layer.WORKING, session_id="s", ttl_seconds=0), "INVALID_TTL"),
        (dict(layer=Layer.WORKING), "SESSION_REQUIRED"),
        (dict(layer=Layer.PROCEDURAL), "LAYER_KIND_MISMATCH"),
        (dict(scope=Scope.DOMAIN, domain="nowhere"), "DOMAIN_WRITE_DENIED"),
    ],
)
async def test_bad_input_is_refused_with_a_reason(deps, make_tenant, bad, reason):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(world.writer, [draft(**{"content": "content", **bad})])
    assert err.value.reason == reason


async def test_reader_key_may_not_write(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(world.reader, [draft("content")])
    assert err.value.code is Code.PERMISSION_DENIED


async def test_working_layer_goes_to_redis_with_state_and_ttl(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [
        draft("checkout step 2", Kind.TURN, layer=Layer.WORKING, session_id="s1", ttl_seconds=120),
        draft("staging", Kind.EVENT, layer=Layer.WORKING, session_id="s1", state_key="env"),
    ])
    state, items, expires = await WorkingService(deps, WriteService(deps)).read(world.agent1, "s1")
    assert state == {"env": "staging"}
    assert [i.content for i in items] == ["staging", "checkout step 2"]
    assert expires is not None
    stats = await MemoriesService(deps).stats(world.agent1, MemoryFilter())
    assert stats.total == 0  # nothing of the working layer reached PostgreSQL


async def test_working_item_expires_after_its_ttl(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [draft("short", Kind.TURN, layer=Layer.WORKING, session_id="s", ttl_seconds=1)])
    await asyncio.sleep(2.2)
    state, items, _ = await WorkingService(deps, WriteService(deps)).read(world.agent1, "s")
    assert items == []


async def test_working_memory_of_one_agent_is_not_another_agents(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [draft("secret plan", Kind.TURN, layer=Layer.WORKING, session_id="s")])
    _, items, _ = await WorkingService(deps, WriteService(deps)).read(world.agent2, "s")
    assert items == []


async def test_closing_a_session_promotes_items_and_state(deps, make_tenant):
    from memplane_server.services.working import WorkingService

    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [
        draft("user asked to rotate the API keys", Kind.TURN, layer=Layer.WORKING, session_id="s-close"),
        draft("prod", Kind.EVENT, layer=Layer.WORKING, session_id="s-close", state_key="env"),
    ])
    promoted = await WorkingService(deps, WriteService(deps)).close(world.agent1, "s-close", None)
    assert [(m.kind, m.layer, m.scope) for m in promoted] == [
        (Kind.TURN, Layer.EPISODIC, Scope.PRIVATE), (Kind.EVENT, Layer.EPISODIC, Scope.PRIVATE),
        (Kind.EVENT, Layer.EPISODIC, Scope.PRIVATE)]
    assert promoted[-1].content == "Session s-close ended with state: env = prod"
    assert all(m.source_type == "working" and m.session_id == "s-close" for m in promoted)
    state, items, _ = await WorkingService(deps, WriteService(deps)).read(world.agent1, "s-close")
    assert (state, items) == ({}, [])


async def test_closing_with_discard_keeps_nothing(deps, make_tenant):
    from memplane_server.services.working import WorkingService

    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [draft("scratch", Kind.TURN, layer=Layer.WORKING, session_id="s-d")])
    assert await WorkingService(deps, WriteService(deps)).close(world.agent1, "s-d", False) == []
    assert (await MemoriesService(deps).stats(world.agent1, MemoryFilter())).total == 0


async def test_an_expired_session_is_promoted_by_the_sweep(deps, make_tenant):
    from memplane_server.services.working import WorkingService

    world = await make_tenant()
    await WriteService(deps).write(world.agent1, [
        draft("temporary plan: migrate billing on Friday", Kind.TURN, layer=Layer.WORKING, session_id="s-exp",
              ttl_seconds=1)])
    await asyncio.sleep(2.1)
    _, items, _ = await WorkingService(deps, WriteService(deps)).read(world.agent1, "s-exp")
    assert items == []
    handled = 0
    for _ in range(5):  # other tests' expired sessions may be claimed in the same sweep
        handled += await WorkingService(deps, WriteService(deps)).promote_expired(limit=100)
        listed, _ = await MemoriesService(deps).list(world.agent1, MemoryFilter(session_id="s-exp"), 10, "")
        if listed:
            break
    assert [m.content for m in listed] == ["temporary plan: migrate billing on Friday"]
    assert handled >= 1


async def test_trimmed_working_items_take_their_vectors_with_them(deps, runtime, make_tenant):
    from memplane_server.stores.redis.working import WorkingSession, WorkingStore

    world = await make_tenant()
    small = replace(deps, working=WorkingStore(runtime.redis_client, max_items=3))
    await WriteService(small).write(world.agent1, [
        draft(f"step {i}", Kind.TURN, layer=Layer.WORKING, session_id="s-trim") for i in range(5)])
    session = WorkingSession(world.tenant_id, "a1", "s-trim")
    contents = await small.working.read(session, with_vectors=True)
    assert [i.content for i in contents.items] == ["step 4", "step 3", "step 2"]
    assert set(contents.vectors) == {i.id for i in contents.items}
