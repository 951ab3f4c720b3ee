"""A stored row is always readable back (DESIGN §6): values no layer can hold are refused before
anything is stored, and rows stored before those checks existed still read."""
from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2

from memplane import AdminClient
from memplane.v1 import memory_pb2 as m
from memplane.v1 import memory_service_pb2 as s
from memplane.v1 import memory_service_pb2_grpc as s_grpc

# 0001-01-01T00:00:00Z: asyncpg stores it as PostgreSQL -infinity and reads that back as a naive
# datetime.min, which protobuf cannot take. Writing it answered INTERNAL after committing the row;
# from then on ListMemories and Search failed for everyone who could see the row.
YEAR_1 = timestamp_pb2.Timestamp(seconds=-62135596800)


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.target) as ch:
        yield ch


class As:
    """MemoryService calls with one key."""

    def __init__(self, channel, key: str) -> None:
        self.stub, self.metadata = s_grpc.MemoryServiceStub(channel), [("authorization", f"Bearer {key}")]

    def __getattr__(self, method: str):
        return lambda request: getattr(self.stub, method)(request, metadata=self.metadata)


def _refused(call, request) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call(request)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    return err.value.details()


def test_a_time_no_layer_can_hold_stores_nothing_and_readers_keep_reading(channel, server, platform_key, new_tenant):
    (writer_tenant, writer_key), (reader_tenant, reader_key) = new_tenant(), new_tenant()
    domain = f"shared-{uuid.uuid4().hex[:8]}"
    with AdminClient(server.target, platform_key) as admin:
        admin.create_domain(domain)
        admin.grant_domain(domain, writer_tenant, "read_write")
        admin.grant_domain(domain, reader_tenant, "read")
    writer, reader = As(channel, writer_key), As(channel, reader_key)
    kept = writer.Write(s.WriteRequest(memories=[s.MemoryInput(
        kind=m.KIND_EVENT, content="the deploy finished", scope=m.SCOPE_DOMAIN, domain=domain)])).memories[0]

    details = _refused(writer.Write, s.WriteRequest(memories=[s.MemoryInput(
        kind=m.KIND_EVENT, content="the deploy started", scope=m.SCOPE_DOMAIN, domain=domain, occurred_at=YEAR_1)]))
    assert "occurred_at" in details
    _refused(writer.UpdateMemory, s.UpdateMemoryRequest(
        memory=m.Memory(id=kept.id, valid_to=YEAR_1), update_mask=field_mask_pb2.FieldMask(paths=["valid_to"])))

    for caller in (writer, reader):
        listed = caller.ListMemories(s.ListMemoriesRequest(filter=m.MemoryFilter(domains=[domain])))
        assert [x.id for x in listed.memories] == [kept.id]  # nothing of the refused write was stored
        hits = caller.Search(s.SearchRequest(query="deploy", filter=m.MemoryFilter(domains=[domain]))).hits
        assert [h.memory.id for h in hits] == [kept.id]
        assert not caller.GetMemory(s.GetMemoryRequest(id=kept.id)).memory.HasField("valid_to")
        history = caller.ListMemoryHistory(s.ListMemoryHistoryRequest(memory_id=kept.id)).entries
        assert [e.action for e in history] == [s.HISTORY_ACTION_CREATED]


@pytest.fixture
def superuser(services_urls):
    """Writes to the e2e server's database past every check, as rows stored by older versions are."""
    dsn = services_urls[0].rsplit("/", 1)[0] + "/memplane_e2e"

    def run(sql: str, *args) -> None:
        async def go() -> None:
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute(sql, *args)
            finally:
                await conn.close()

        asyncio.run(go())

    return run


def test_rows_stored_before_the_checks_still_read(channel, new_tenant, superuser):
    _, key = new_tenant()
    caller = As(channel, key)
    written = caller.Write(s.WriteRequest(memories=[
        s.MemoryInput(kind=m.KIND_FACT, content="the user lives in Lyon", entity="user", attribute="city",
                      value="Lyon"),
        s.MemoryInput(kind=m.KIND_EVENT, content="the user moved to Lyon"),
    ])).memories
    fact, event = (uuid.UUID(x.id) for x in written)
    # Stored by a release before encryption at rest, too: in clear.
    superuser("UPDATE memories SET occurred_at = '-infinity', valid_from = '-infinity', valid_to = 'infinity',"
              " metadata = '{\"n\": 1e400}', content = 'the user lives in Lyon', value = 'Lyon', sealed_key = NULL"
              " WHERE id = $1", fact)
    superuser("UPDATE memory_history SET snapshot = '{\"id\": \"older shape\"}' WHERE memory_id = $1", event)

    got = caller.GetMemory(s.GetMemoryRequest(id=str(fact))).memory
    assert got.occurred_at.seconds == -62135596800 and got.valid_to.seconds == 253402300799  # clamped
    assert len(caller.ListMemories(s.ListMemoriesRequest()).memories) == 2
    assert caller.Search(s.SearchRequest(query="where does the user live?", explain=True)).hits
    assert caller.GetStats(s.GetStatsRequest()).total == 2
    entries = caller.ListMemoryHistory(s.ListMemoryHistoryRequest(memory_id=str(event))).entries
    assert len(entries) == 1 and not entries[0].HasField("snapshot")
    assert caller.ListMemoryHistory(
        s.ListMemoryHistoryRequest(entity=s.EntityRef(entity="user", attribute="city"))).entries
