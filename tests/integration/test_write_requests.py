"""A write carrying a request id is stored once, even when its response was lost (the server died
between the commit): PostgreSQL remembers it per caller. A Write whose every item PostgreSQL stores
is remembered there alone; one with a working-layer item also keeps its first response in Redis."""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest

from memplane import AsyncMemoryClient, MemoryInput
from memplane.errors import FailedPreconditionError
from memplane_server.core.access.caller import Role
from memplane_server.core.access.requests import request_key
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.services.write.service import WriteService
from memplane_server.stores.redis.idempotency import ref_key
from tests.support.inproc import PLATFORM, serving
from tests.support.keys import register_keys

pytestmark = pytest.mark.asyncio(loop_scope="session")


def turn(content: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=content)


async def count(deps, caller, content: str) -> int:
    rows = await deps.memories.list(caller, MemoryFilter(), limit=100, after=None)
    return sum(r.content == content for r in rows)


async def test_a_repeated_request_is_answered_with_the_first_writes_memories(deps, make_tenant):
    world = await make_tenant()
    key = request_key(world.agent1, "Write", str(uuid.uuid4()), b"request")
    first = await WriteService(deps).write(world.agent1, [turn("we ship on friday")], key)
    again = await WriteService(deps).write(world.agent1, [turn("we ship on friday")], key)
    assert [r.id for r in again] == [r.id for r in first]
    assert await count(deps, world.agent1, "we ship on friday") == 1


async def test_concurrent_repeats_store_once(deps, make_tenant):
    world = await make_tenant()
    key = request_key(world.writer, "Write", str(uuid.uuid4()), b"request")
    results = await asyncio.gather(*(WriteService(deps).write(world.writer, [turn("one row only")], key)
                                     for _ in range(5)))
    assert len({r[0].id for r in results}) == 1
    assert await count(deps, world.writer, "one row only") == 1


async def test_the_same_id_with_another_request_is_refused(deps, make_tenant):
    world = await make_tenant()
    request_id = str(uuid.uuid4())
    await WriteService(deps).write(world.writer, [turn("first")], request_key(world.writer, "Write", request_id, b"a"))
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(world.writer, [turn("second")],
                                       request_key(world.writer, "Write", request_id, b"b"))
    assert (err.value.code, err.value.reason) == (Code.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    assert await count(deps, world.writer, "second") == 0


async def test_another_agents_same_request_is_its_own(deps, make_tenant):
    world = await make_tenant()
    request_id = str(uuid.uuid4())
    mine = await WriteService(deps).write(world.agent1, [turn("private note")],
                                          request_key(world.agent1, "Write", request_id, b"same"))
    theirs = await WriteService(deps).write(world.agent2, [turn("private note")],
                                            request_key(world.agent2, "Write", request_id, b"same"))
    assert mine[0].id != theirs[0].id and theirs[0].agent_id == "a2"


def callers_of_one_tenant(world, pair: str):
    """Two callers of the tenant that differ only by agent, or only by API key."""
    if pair == "agents":
        return world.agent1, world.agent2
    return world.writer, replace(world.writer, key_id=f"{world.writer.key_id}-2")


@pytest.mark.parametrize("pair", ["agents", "api keys"])
async def test_another_callers_request_id_with_another_request_is_its_own_write(deps, make_tenant, pair):
    """PostgreSQL records a request per caller: one caller's use of an id neither refuses nor
    answers another's, and the first caller's repeat is still answered from its record."""
    world = await make_tenant()
    first, second = callers_of_one_tenant(world, pair)
    await register_keys(deps.tenancy.pool, second)
    request_id = str(uuid.uuid4())
    first_key = request_key(first, "Write", request_id, b"the flight")
    mine = await WriteService(deps).write(first, [turn("booked the flight")], first_key)
    theirs = await WriteService(deps).write(second, [turn("booked the hotel")],
                                            request_key(second, "Write", request_id, b"the hotel"))
    assert [m.content for m in theirs] == ["booked the hotel"] and theirs[0].id != mine[0].id
    again = await WriteService(deps).write(first, [turn("booked the flight")], first_key)
    assert [m.id for m in again] == [m.id for m in mine]
    recorded = await deps.tenancy.pool.fetchval(
        "SELECT count(*) FROM write_requests WHERE tenant_id = $1", world.tenant_id)
    assert recorded == 2 and await count(deps, first, "booked the flight") == 1


async def test_another_tenants_same_request_is_its_own(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    request_id = str(uuid.uuid4())
    await WriteService(deps).write(a.writer, [turn("tenant note")], request_key(a.writer, "Write", request_id, b"x"))
    theirs = await WriteService(deps).write(b.writer, [turn("tenant note")],
                                            request_key(b.writer, "Write", request_id, b"x"))
    assert theirs[0].tenant_id == b.tenant_id and await count(deps, b.writer, "tenant note") == 1


async def test_old_requests_are_pruned(deps, make_tenant):
    world = await make_tenant()
    key = request_key(world.writer, "Write", str(uuid.uuid4()), b"request")
    await WriteService(deps).write(world.writer, [turn("pruned later")], key)
    assert await deps.memories.prune_write_requests(0) >= 1
    await WriteService(deps).write(world.writer, [turn("pruned later")], key)
    assert await count(deps, world.writer, "pruned later") == 2


async def test_a_repeated_write_of_stored_memories_is_answered_from_postgresql_as_they_are_now(deps, runtime):
    async with serving(deps, runtime) as served:
        _, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            request_id = str(uuid.uuid4())
            first = await client.write([MemoryInput("the launch is in May", kind="fact")], request_id=request_id)
            memory_id = first.memories[0].id
            assert not await runtime.redis_client.exists(ref_key(memory_id))  # no response cached in Redis
            await client.update_memory(memory_id, content="the launch is in June")
            again = await client.write([MemoryInput("the launch is in May", kind="fact")], request_id=request_id)
            assert [(m.id, m.content) for m in again.memories] == [(memory_id, "the launch is in June")]
            assert (await client.get_stats()).total == 1


async def test_a_repeated_write_with_a_working_item_is_answered_with_its_first_response(deps, runtime):
    async with serving(deps, runtime) as served:
        _, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            request_id = str(uuid.uuid4())
            memories = [MemoryInput("drafting the reply", kind="turn", layer="working", session_id="s1"),
                        MemoryInput("the customer wrote in", kind="turn", session_id="s1")]
            first = await client.write(memories, request_id=request_id)
            assert await runtime.redis_client.exists(ref_key(first.memories[0].id))
            again = await client.write(memories, request_id=request_id)
            assert [m.id for m in again.memories] == [m.id for m in first.memories]


def written(text: str, working: bool) -> list[MemoryInput]:
    """A Write PostgreSQL records whole, or (working) one with a working item, recorded in Redis."""
    stored = [MemoryInput(text, kind="fact")]
    return [*stored, MemoryInput(f"{text}, in progress", kind="turn", layer="working", session_id="s1")] if working \
        else stored


@pytest.mark.parametrize("working", [False, True])
@pytest.mark.parametrize("pair", [("a1", "a2"), ("writer", "writer-2")])
async def test_two_callers_of_a_tenant_sending_one_request_id_with_other_writes_both_write(deps, runtime, pair, working):
    """Through every interceptor: both callers' requests are applied and neither is told of the
    other; each caller's own repeat is answered with its first write, its own reuse refused."""
    async with serving(deps, runtime) as served:
        tenant_id, keys = await served.tenant()
        _, keys["writer-2"] = await served.services.admin.create_api_key(PLATFORM, tenant_id, None, Role.WRITER, "w2")
        async with AsyncMemoryClient(served.address, keys[pair[0]]) as first, \
                AsyncMemoryClient(served.address, keys[pair[1]]) as second:
            request_id = str(uuid.uuid4())
            mine = await first.write(written("the invoice is paid", working), request_id=request_id)
            theirs = await second.write(written("the parcel has shipped", working), request_id=request_id)
            assert theirs.memories[0].content == "the parcel has shipped"
            again = await first.write(written("the invoice is paid", working), request_id=request_id)
            assert [m.id for m in again.memories] == [m.id for m in mine.memories]
            with pytest.raises(FailedPreconditionError) as reused:
                await second.write(written("the parcel is lost", working), request_id=request_id)
            assert reused.value.reason == "REQUEST_ID_REUSED"
