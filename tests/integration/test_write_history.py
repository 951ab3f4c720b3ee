"""What a write leaves besides its rows, written by one statement at the end of its transaction
(stores/postgres/memory_writes.py): each change's history row in the order it happened, its
sessions queued for windows, and the memories of its request."""
from __future__ import annotations

import uuid

import pytest

from memplane_server.core.access.requests import request_key
from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(kind: Kind, content: str, **fields) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content, **fields)


async def history(deps, tenant_id: str) -> list[tuple[uuid.UUID, str, str]]:
    rows = await deps.memories.pool.fetch(
        "SELECT memory_id, action, reason FROM memory_history WHERE tenant_id = $1 ORDER BY seq", tenant_id)
    return [(r["memory_id"], r["action"], r["reason"]) for r in rows]


async def test_a_batch_records_its_changes_in_the_order_they_happened(deps, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    [paris] = await writes.write(world.writer, [draft(Kind.FACT, "lives in Paris", entity="user", attribute="city",
                                                      value="Paris")])
    before = len(await history(deps, world.tenant_id))
    berlin, turn, again = await writes.write(world.writer, [
        draft(Kind.FACT, "lives in Berlin", entity="user", attribute="city", value="Berlin"),
        draft(Kind.TURN, "we moved last spring", session_id="move"),
        draft(Kind.FACT, "lives in Berlin", entity="user", attribute="city", value="Berlin"),
    ])
    assert again.id == berlin.id  # the same value again in the batch is the first observed once more
    assert (await history(deps, world.tenant_id))[before:] == [
        (berlin.id, "created", ""),
        (paris.id, "superseded", f"replaced by {berlin.id}"),
        (turn.id, "created", ""),
        (berlin.id, "reobserved", "observed again"),
    ]


async def test_a_write_queues_its_sessions_for_windows_and_records_its_requests_memories(deps, make_tenant):
    world = await make_tenant()
    key = request_key(world.writer, "Write", str(uuid.uuid4()), b"request")
    stored = await WriteService(deps).write(world.writer, [
        draft(Kind.TURN, "first turn", session_id="a"), draft(Kind.TURN, "second turn", session_id="b"),
        draft(Kind.EVENT, "an event in no session")], key)
    queued = await deps.memories.pool.fetch(
        "SELECT session_id FROM context_queue WHERE tenant_id = $1 ORDER BY session_id", world.tenant_id)
    assert [r["session_id"] for r in queued] == ["a", "b"]
    recorded = await deps.memories.pool.fetchval(
        "SELECT memory_ids FROM write_requests WHERE tenant_id = $1 AND request_key = $2", world.tenant_id, key.key)
    assert recorded == [r.id for r in stored]


async def test_a_write_in_no_session_without_a_request_id_queues_nothing(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [draft(Kind.EVENT, "nothing to window")])
    assert await deps.memories.pool.fetchval(
        "SELECT count(*) FROM context_queue WHERE tenant_id = $1", world.tenant_id) == 0
    assert await deps.memories.pool.fetchval(
        "SELECT count(*) FROM write_requests WHERE tenant_id = $1", world.tenant_id) == 0
