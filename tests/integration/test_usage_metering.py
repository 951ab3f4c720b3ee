"""Usage per tenant (services/metering.py): counts tallied in the process reach PostgreSQL on a
flush, a failed flush keeps them, the stored figures rolled up equal what the memories table holds,
texts embedded are counted for the tenant whose work it is, and each admin reads only what its key
may."""
from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timezone

import pytest

from memplane_server.core.access.attribution import reset_work_tenant, set_work_tenant
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import MemplaneError
from memplane_server.core.metering import CALLS, TEXTS_EMBEDDED, UsageTally
from memplane_server.core.model import Kind, Layer, MemoryDraft, Scope
from memplane_server.services.metering import Metering
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.usage import MeteringStore
from tests.integration.conftest import PLATFORM


@pytest.fixture
def metering(deps):
    return Metering(MeteringStore(deps.tenancy.pool), deps.tenancy, UsageTally())


def admin_of(tenant: str) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=Role.TENANT_ADMIN, tenant_id=tenant, agent_id=None)


def today() -> date:
    return datetime.now(timezone.utc).date()


async def test_tallied_calls_reach_the_tenants_usage_on_a_flush(metering, make_tenant):
    world = await make_tenant()
    for method, n in (("Write", 3), ("Search", 5)):
        for _ in range(n):
            metering.tally.add(world.tenant_id, CALLS, method)
    await metering.flush()
    metering.tally.add(world.tenant_id, CALLS, "Search")
    await metering.flush()
    _, _, [usage] = await metering.report(admin_of(world.tenant_id), "", None, None)
    assert usage.days[0].day == today() and usage.days[0].calls == {"Write": 3, "Search": 6}


async def test_a_flush_that_fails_keeps_its_counts_for_the_next(metering, make_tenant, monkeypatch):
    world = await make_tenant()
    metering.tally.add(world.tenant_id, CALLS, "Write", 2)
    written = metering.store.add_counts

    async def down(counts):
        raise ConnectionError("PostgreSQL away")

    monkeypatch.setattr(metering.store, "add_counts", down)
    await metering.flush()
    monkeypatch.setattr(metering.store, "add_counts", written)
    metering.tally.add(world.tenant_id, CALLS, "Write", 1)
    await metering.flush()
    _, _, [usage] = await metering.report(admin_of(world.tenant_id), "", None, None)
    assert usage.days[0].calls == {"Write": 3}


async def test_counts_of_a_tenant_deleted_since_are_dropped_not_failing_the_others(metering, make_tenant):
    world = await make_tenant()
    metering.tally.add("no-such-tenant", CALLS, "Write")
    metering.tally.add(world.tenant_id, CALLS, "Write")
    await metering.flush()
    _, _, [usage] = await metering.report(admin_of(world.tenant_id), "", None, None)
    assert usage.days[0].calls == {"Write": 1} and metering.tally.take() == Counter()


async def test_the_stored_roll_up_equals_what_the_memories_table_holds(deps, metering, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    drafts = [MemoryDraft(scope=Scope.GLOBAL, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                          content=f"fact {i} about the harbour") for i in range(4)]
    private = [MemoryDraft(scope=Scope.PRIVATE, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
                           content=f"event {i} at the quay") for i in range(3)]
    written = await writes.write(world.writer, drafts)
    await writes.write(world.agent1, private)
    await deps.memories.pool.execute("UPDATE memories SET status = 'superseded' WHERE id = $1", written[0].stored_id)
    await metering.roll_up()
    _, _, [usage] = await metering.report(admin_of(world.tenant_id), "", None, None)
    rows = await deps.memories.pool.fetch(
        "SELECT layer, scope, count(*) FILTER (WHERE status = 'active') AS n, sum(pg_column_size(m.*)) AS bytes"
        " FROM memories m WHERE tenant_id = $1 GROUP BY 1, 2", world.tenant_id)
    assert {(s.layer, s.scope, s.memories, s.bytes) for s in usage.days[0].stored} == {
        (r["layer"], r["scope"], r["n"], r["bytes"]) for r in rows}
    assert {(s.layer, s.scope, s.memories) for s in usage.days[0].stored} == {
        (Layer.SEMANTIC.value, "global", 3), (Layer.EPISODIC.value, "private", 3)}


async def test_a_layer_emptied_since_the_days_last_roll_up_goes_to_zero(deps, metering, make_tenant):
    world = await make_tenant()
    [memory] = await WriteService(deps).write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content="Deploys need the VPN on")])
    await metering.roll_up()
    await deps.memories.pool.execute("DELETE FROM memories WHERE id = $1", memory.stored_id)
    await metering.roll_up()
    _, _, [usage] = await metering.report(admin_of(world.tenant_id), "", None, None)
    assert [(s.memories, s.bytes) for s in usage.days[0].stored] == [(0, 0)]


async def test_texts_embedded_are_counted_for_the_tenant_whose_work_it_is(deps, make_tenant):
    world = await make_tenant()
    token = set_work_tenant(world.tenant_id)
    try:
        await deps.embedder.embed_passages(["one", "two", "three"])
        await deps.embedder.embed_query("four")
    finally:
        reset_work_tenant(token)
    mine = {k: v for k, v in deps.tally.take().items() if k[0] == world.tenant_id}
    assert mine == {(world.tenant_id, today(), TEXTS_EMBEDDED, ""): 4}


async def test_a_tenant_admin_reads_its_own_tenants_usage_and_no_other(metering, make_tenant):
    mine, theirs = await make_tenant(), await make_tenant()
    with pytest.raises(MemplaneError) as denied:
        await metering.report(admin_of(mine.tenant_id), theirs.tenant_id, None, None)
    assert denied.value.reason == "TENANT_ADMIN_REQUIRED"
    with pytest.raises(MemplaneError):
        await metering.report(mine.writer, "", None, None)


async def test_a_platform_admin_naming_no_tenant_reads_every_tenant_with_usage(metering, make_tenant):
    first, second = await make_tenant(), await make_tenant()
    metering.tally.add(first.tenant_id, CALLS, "Write")
    metering.tally.add(second.tenant_id, CALLS, "Search")
    await metering.flush()
    _, _, usages = await metering.report(PLATFORM, "", None, None)
    calls = {u.tenant_id: u.days[0].calls for u in usages if u.tenant_id in (first.tenant_id, second.tenant_id)}
    assert calls == {first.tenant_id: {"Write": 1}, second.tenant_id: {"Search": 1}}
