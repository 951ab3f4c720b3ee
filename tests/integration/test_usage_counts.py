"""Search's usage counters: written a moment later by one writer, one caller at a time, so that
the callers of a busy second never take the pool's connections from the searches."""
from __future__ import annotations

import asyncio
import logging

import pytest

from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.services.search.usage import UsageCounts
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


class InFlight:
    """The real store, counting the counter updates in flight at once; callers named in `failing`
    fail theirs."""

    def __init__(self, store, failing=()) -> None:
        self.store, self.failing = store, set(failing)
        self.now = self.most = 0
        self.started = asyncio.Event()

    async def mark_used(self, caller, ids, *, at=None) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        self.started.set()
        try:
            await asyncio.sleep(0.02)  # an update that takes a while, as on a big table
            if caller.tenant_id in self.failing:
                raise ConnectionError("the connection went away")
            await self.store.mark_used(caller, ids, at=at)
        finally:
            self.now -= 1


async def written_memory(deps, world, content: str):
    draft = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=content)
    [m] = await WriteService(deps).write(world.writer, [draft])
    return m


async def test_many_callers_counters_are_written_one_update_at_a_time(deps, make_tenant):
    worlds = [await make_tenant() for _ in range(5)]
    memories = [await written_memory(deps, w, f"Unique fact number {i}") for i, w in enumerate(worlds)]
    store = InFlight(deps.memories)
    usage = UsageCounts(store, deps.clock)
    for world, m in zip(worlds, memories):
        usage.add(world.writer, [m.id])
    await usage.flush()
    assert store.most == 1
    for world, m in zip(worlds, memories):
        assert (await deps.memories.get(world.writer, m.id)).use_count == 1


async def test_uses_added_while_the_writer_is_at_work_are_written_by_it_after(deps, make_tenant):
    first, second = await make_tenant(), await make_tenant()
    a, b = await written_memory(deps, first, "Unique fact alpha"), await written_memory(deps, second, "Unique fact beta")
    store = InFlight(deps.memories)
    usage = UsageCounts(store, deps.clock)
    usage.add(first.writer, [a.id])
    flushing = asyncio.ensure_future(usage.flush())
    await store.started.wait()
    usage.add(second.writer, [b.id])
    await flushing
    assert store.most == 1
    assert (await deps.memories.get(second.writer, b.id)).use_count == 1


async def test_one_callers_failed_update_leaves_the_others_counted(deps, make_tenant, caplog):
    broken, fine = await make_tenant(), await make_tenant()
    a, b = await written_memory(deps, broken, "Unique fact gamma"), await written_memory(deps, fine, "Unique fact delta")
    usage = UsageCounts(InFlight(deps.memories, failing={broken.tenant_id}), deps.clock)
    usage.add(broken.writer, [a.id])
    usage.add(fine.writer, [b.id])
    with caplog.at_level(logging.WARNING):
        await usage.flush()
    assert (await deps.memories.get(fine.writer, b.id)).use_count == 1
    assert (await deps.memories.get(broken.writer, a.id)).use_count == 0
    assert "usage counters not updated: ConnectionError" in caplog.text
