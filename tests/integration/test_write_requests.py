"""A write carrying a request id is stored once, even when its response was lost (the server died
between the commit and recording the response in Redis): PostgreSQL remembers it per caller."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from memplane_server.core.access.requests import request_key
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.services.write.service import WriteService

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
