"""The change log behind Watch against real PostgreSQL: every kind of change in commit order,
visibility exactly as reads (and by row-level security alone), resuming, pruning, stream caps."""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from contextlib import asynccontextmanager

import pytest

from memplane_server.core.changes import ChangeFilter, ChangeKind
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Scope, Status
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.watch.service import WatchService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres import changes as changes_module

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
                                 content=content), **kw})


class Watcher:
    """A Watch consumed in the background into a list."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.batches = []
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for batch in self.stream:
            self.batches.append(batch)

    @property
    def events(self):
        return [e for b in self.batches for e in b.events]

    async def until(self, count: int, timeout: float = 15.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.events) < count:
            if self.task.done():
                self.task.result()
            assert asyncio.get_running_loop().time() < deadline, f"{len(self.events)} events, wanted {count}"
            await asyncio.sleep(0.05)
        return self.events

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@asynccontextmanager
async def watching(deps, caller, f=ChangeFilter(), after=None):
    w = Watcher(WatchService(deps).watch(caller, f, after))
    while not w.batches:  # the first batch names the starting position
        if w.task.done():
            w.task.result()
        await asyncio.sleep(0.02)
    try:
        yield w
    finally:
        await w.close()


async def test_every_kind_of_change_in_commit_order(deps, make_tenant):
    world = await make_tenant()
    writes, memories, forgets = WriteService(deps), MemoriesService(deps), ForgetService(deps)
    async with watching(deps, world.writer) as w:
        [city1] = await writes.write(world.writer, [draft("lives in Paris", kind=Kind.FACT, entity="user",
                                                          attribute="city", value="Paris")])
        [city2] = await writes.write(world.writer, [draft("lives in Rome", kind=Kind.FACT, entity="user",
                                                          attribute="city", value="Rome")])
        await memories.update(world.writer, str(city2.id), {"context": "since May"})
        await forgets.forget(world.writer, ids=[str(city2.id)], f=None, hard=False, dry_run=False, reason="")
        # Read before the erasure below: a change read after it no longer carries the memory (a
        # loaded machine's watcher read the update late and found none).
        await w.until(5)
        await memories.update(world.writer, str(city2.id), {"status": Status.ACTIVE})
        await forgets.forget(world.writer, ids=[str(city2.id)], f=None, hard=True, dry_run=False, reason="")
        events = await w.until(7)
    got = [(e.change, e.memory_id) for e in events]
    assert got == [
        (ChangeKind.CREATED, city1.id), (ChangeKind.CREATED, city2.id), (ChangeKind.SUPERSEDED, city1.id),
        (ChangeKind.UPDATED, city2.id), (ChangeKind.FORGOTTEN, city2.id), (ChangeKind.UPDATED, city2.id),
        (ChangeKind.ERASED, city2.id),
    ]
    positions = [e.position for e in events]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert events[0].memory.content == "lives in Paris" and events[0].entity == "user"
    assert events[2].memory.status is Status.SUPERSEDED
    assert events[3].memory.context == "since May" and events[4].memory.status is Status.DELETED
    assert events[6].memory is None
    # Read again from before the first: the erased memory's earlier changes keep no content.
    async with watching(deps, world.writer, after=positions[0] - 1) as again:
        replay = await again.until(7)
    assert [(e.change, e.memory_id) for e in replay] == got
    assert all(e.memory is None for e in replay if e.memory_id == city2.id)
    assert all(e.session_id is None and e.entity is None for e in replay[1:6] if e.memory_id == city2.id)
    assert replay[0].memory.content == "lives in Paris"


async def test_visibility_is_that_of_reads(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    a = await make_tenant({domain: True})
    member = await make_tenant({domain: False})
    other = await make_tenant()
    writes = WriteService(deps)
    async with watching(deps, a.agent1) as a1, watching(deps, a.agent2) as a2, \
            watching(deps, member.reader) as m, watching(deps, other.writer) as o, watching(deps, a.reader) as r:
        await writes.write(a.writer, [draft("A global")])
        await writes.write(a.agent1, [draft("A1 private", scope=Scope.PRIVATE)])
        await writes.write(a.writer, [draft("A domain", scope=Scope.DOMAIN, domain=domain)])
        await writes.write(other.writer, [draft("other global")])
        await a1.until(3)
        await a2.until(2)
        await m.until(1)
        await o.until(1)
        await r.until(2)
        await asyncio.sleep(0.5)  # anything more would have arrived by now
        contents = lambda w: [e.memory.content for e in w.events]  # noqa: E731
        assert contents(a1) == ["A global", "A1 private", "A domain"]
        assert contents(a2) == ["A global", "A domain"]
        assert contents(r) == ["A global", "A domain"]  # no agent: no private memories
        assert contents(m) == ["A domain"]
        assert contents(o) == ["other global"]


async def test_filters(deps, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    f = ChangeFilter(session_id="s1", kinds=(Kind.FACT,), change_kinds=(ChangeKind.CREATED,))
    async with watching(deps, world.writer, f) as w, \
            watching(deps, world.writer, ChangeFilter(entity="flight", scopes=(Scope.GLOBAL,))) as by_entity:
        await writes.write(world.writer, [
            draft("event s1", session_id="s1"), draft("fact s2", kind=Kind.FACT, session_id="s2"),
            draft("fact s1", kind=Kind.FACT, session_id="s1"),
            draft("flight at 9", kind=Kind.FACT, entity="flight", attribute="time", value="9"),
        ])
        [f1] = await writes.write(world.writer, [draft("fact s1 revised", kind=Kind.FACT, session_id="s1")])
        await ForgetService(deps).forget(world.writer, ids=[str(f1.id)], f=None, hard=False, dry_run=False, reason="")
        await w.until(2)
        await by_entity.until(1)
        await asyncio.sleep(0.5)
    assert [e.memory.content for e in w.events] == ["fact s1", "fact s1 revised"]
    assert [e.memory.content for e in by_entity.events] == ["flight at 9"]


async def test_resume_from_a_position_misses_nothing(deps, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    async with watching(deps, world.writer) as w:
        start = w.batches[0].position
        await writes.write(world.writer, [draft("one"), draft("two")])
        first = await w.until(2)
    await writes.write(world.writer, [draft("three")])  # while no one watches
    async with watching(deps, world.writer, after=first[0].position) as again:
        events = await again.until(2)
    assert [e.memory.content for e in events] == ["two", "three"]
    async with watching(deps, world.writer, after=start) as from_start:
        assert [e.memory.content for e in await from_start.until(3)] == ["one", "two", "three"]


async def test_positions_follow_commit_order(deps, make_tenant):
    """A transaction that started writing first but commits last gets the later position, so a
    reader that saw the earlier commit's position never finds a lower one appear behind it."""
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("ordering")])
    pool = deps.memories.pool
    insert = ("INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor)"
              " VALUES ($1, $2, 'feedback', '{}', 'test')")
    async with pool.acquire() as first, pool.acquire() as second:
        tx1 = first.transaction()
        await tx1.start()
        await first.execute(insert, world.tenant_id, m.id)
        async with second.transaction():
            await second.execute(insert, world.tenant_id, m.id)
        early = await pool.fetchval("SELECT max(position) FROM memory_changes WHERE memory_id = $1", m.id)
        await tx1.commit()
    rows = await pool.fetch("SELECT id, position FROM memory_changes WHERE memory_id = $1 ORDER BY id", m.id)
    created, written_first, written_second = rows
    assert written_second["position"] == early
    assert written_first["position"] > written_second["position"] > created["position"]


async def test_bad_positions(deps, make_tenant):
    world = await make_tenant()
    watch = WatchService(deps)
    head = await deps.changes.head()
    for bad in (-1, head + 1000):
        with pytest.raises(MemplaneError) as err:
            await watch.watch(world.writer, ChangeFilter(), bad).__anext__()
        assert err.value.reason == "INVALID_WATCH_POSITION"


async def test_row_level_security_alone_hides_other_tenants_changes(deps, make_tenant, monkeypatch):
    a, b = await make_tenant(), await make_tenant()
    start = await deps.changes.head()
    writes = WriteService(deps)
    await writes.write(a.writer, [draft("A global")])
    await writes.write(a.agent1, [draft("A1 private", scope=Scope.PRIVATE)])
    await writes.write(b.writer, [draft("B global")])
    through = await deps.changes.head()
    monkeypatch.setattr(changes_module, "visibility", lambda caller, p: "TRUE")
    monkeypatch.setattr(changes_module, "reach", lambda caller, p: "TRUE")

    async def read(caller):
        events, _ = await deps.changes.read(caller, after=start, through=through, f=ChangeFilter(), limit=100,
                                            max_bytes=1 << 20)
        return [e.memory.content if e.memory else e.memory_id for e in events]

    assert await read(b.writer) == ["B global"]
    assert await read(a.agent2) == ["A global"]
    assert await read(a.agent1) == ["A global", "A1 private"]

    # The control: without the restricted role the predicate-less query shows every tenant's rows.
    pool = deps.memories.pool

    @asynccontextmanager
    async def unrestricted(_pool, caller):
        async with pool.acquire() as conn, conn.transaction():
            yield conn

    monkeypatch.setattr(changes_module, "caller_session", unrestricted)
    assert len(await read(b.writer)) >= 3


async def test_pages_are_cut_by_count_and_size(deps, make_tenant):
    world = await make_tenant()
    start = await deps.changes.head()
    # Each stores about 20 KB: 15,000 characters, sealed (base64 of the ciphertext).
    await WriteService(deps).write(world.writer, [draft(f"note {i}", metadata={"blob": "x" * 15_000})
                                                  for i in range(10)])
    through = await deps.changes.head()
    events, more = await deps.changes.read(world.writer, after=start, through=through, f=ChangeFilter(), limit=4,
                                           max_bytes=1 << 20)
    assert len(events) == 4 and more
    events, more = await deps.changes.read(world.writer, after=start, through=through, f=ChangeFilter(), limit=64,
                                           max_bytes=50_000)
    assert len(events) == 3 and more  # 2 fit under 50 KB, the third crosses it
    events, more = await deps.changes.read(world.writer, after=start, through=through, f=ChangeFilter(), limit=64,
                                           max_bytes=1 << 20)
    assert len(events) == 10 and not more


async def test_a_position_past_the_retention_is_refused(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [draft("soon pruned")])
    head = await deps.changes.head()
    old = head - 1
    await asyncio.sleep(0.05)
    assert await deps.changes.prune(0.01) >= 1
    assert await deps.changes.pruned_through() == head
    with pytest.raises(MemplaneError) as err:
        await WatchService(deps).watch(world.writer, ChangeFilter(), old).__anext__()
    assert err.value.reason == "WATCH_POSITION_EXPIRED"
    # From the horizon itself nothing was missed.
    batch = await WatchService(deps).watch(world.writer, ChangeFilter(), head).__anext__()
    assert batch.position == head


def capped(deps, per_key: int, per_tenant: int) -> WatchService:
    settings = deps.settings.model_copy(update={"watch_max_streams_per_key": per_key,
                                                "watch_max_streams_per_tenant": per_tenant})
    return WatchService(dataclasses.replace(deps, settings=settings))


async def open_stream(service: WatchService, caller):
    stream = service.watch(caller, ChangeFilter(), None)
    await stream.__anext__()  # the first batch: the stream is open
    return stream


async def test_a_key_beyond_its_watch_cap_is_refused_and_a_closed_stream_frees_its_place(deps, make_tenant):
    world = await make_tenant()
    service = capped(deps, per_key=2, per_tenant=10)
    first, second = await open_stream(service, world.writer), await open_stream(service, world.writer)
    with pytest.raises(MemplaneError) as err:
        await open_stream(service, world.writer)
    assert (err.value.code, err.value.reason) == (Code.RESOURCE_EXHAUSTED, "WATCH_STREAMS_PER_KEY")
    await open_stream(service, world.reader)  # another key of the tenant still may
    await first.aclose()
    await open_stream(service, world.writer)
    await second.aclose()


async def test_a_tenant_beyond_its_watch_cap_is_refused_whichever_key_asks(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    service = capped(deps, per_key=5, per_tenant=2)
    await open_stream(service, world.writer), await open_stream(service, world.reader)
    with pytest.raises(MemplaneError) as err:
        await open_stream(service, world.agent1)
    assert (err.value.code, err.value.reason) == (Code.RESOURCE_EXHAUSTED, "WATCH_STREAMS_PER_TENANT")
    await open_stream(service, other.writer)  # another tenant is not held back


class CountingChangeStore(changes_module.ChangeStore):
    """The real store, counting the log reads made for watchers and for the feed."""

    def __init__(self, pool) -> None:
        super().__init__(pool)
        self.reads = self.feed_reads = 0

    async def read(self, *args, **kwargs):
        self.reads += 1
        return await super().read(*args, **kwargs)

    async def entries(self, *args, **kwargs):
        self.feed_reads += 1
        return await super().entries(*args, **kwargs)


async def test_one_reader_follows_the_log_and_watchers_that_see_nothing_read_nothing(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    store = CountingChangeStore(deps.changes.pool)
    service = WatchService(dataclasses.replace(deps, changes=store))
    idle = [Watcher(service.watch(b.writer, ChangeFilter(), None)) for _ in range(20)]
    seeing = Watcher(service.watch(a.writer, ChangeFilter(), None))
    while not all(w.batches for w in [*idle, seeing]):
        await asyncio.sleep(0.02)
    try:
        for n in range(5):
            await WriteService(deps).write(a.writer, [draft(f"a's note {n}")])
        await seeing.until(5)
        await asyncio.sleep(0.5)
        assert all(w.events == [] for w in idle)
        assert store.reads <= 5  # the one watcher that sees the notes; none of the twenty
        assert store.feed_reads <= 6  # once a commit (or fewer), for all 21 watchers
    finally:
        for w in [*idle, seeing]:
            await w.close()


async def test_a_filtered_resume_reads_through_the_callers_reach_not_every_tenants_log(deps, make_tenant):
    """20,000 changes of another tenant lie in the range: the plan finds the caller's rows by the
    reach indexes (migration 0032), not by walking the log's position index through them."""
    from memplane_server.stores.postgres.changes import read_statement
    from memplane_server.stores.postgres.session import caller_session

    world, other = await make_tenant(), await make_tenant()
    pool = deps.changes.pool
    start = await deps.changes.head()
    base = start + 1_000_000_000  # above every position given out, and gone again below
    await pool.execute(
        "INSERT INTO memory_changes (tenant_id, position, memory_id, change, action, scope, kind)"
        " SELECT $1, $2 + g, gen_random_uuid(), 'created', 'created', 'global', 'event'"
        " FROM generate_series(1, 20000) g", other.tenant_id, base)
    try:
        await pool.execute("ANALYZE memory_changes")
        sql, values = read_statement(world.reader, after=start, through=base + 20000,
                                     f=ChangeFilter(kinds=(Kind.LESSON,)), limit=64, max_bytes=1 << 20)
        async with caller_session(pool, world.reader) as conn:
            plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {sql}", *values))
            analyzed = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *values))
        assert "memory_changes_tenant_position" in plan, plan
        assert "memory_changes_position" not in plan.replace("memory_changes_position_", ""), plan
        print(analyzed)
    finally:
        await pool.execute("DELETE FROM memory_changes WHERE position > $1", base)


async def test_the_feed_wakes_only_the_watchers_whose_reach_a_commit_touches(deps, make_tenant):
    from memplane_server.services.watch.feed import ChangeFeed, reach_of

    domain = f"d-{uuid.uuid4().hex[:8]}"
    a, b, c = await make_tenant({domain: True}), await make_tenant({domain: False}), await make_tenant()
    feed = ChangeFeed(deps.changes, deps.change_listener)
    subs = {name: await feed.open(reach_of(w.tenant_id, w.writer.domains)) for name, w in (("a", a), ("b", b), ("c", c))}
    try:
        for label, draft_ in (("own", draft("a's own note")), ("shared", draft("shared", scope=Scope.DOMAIN, domain=domain))):
            armed = {name: sub.armed() for name, sub in subs.items()}
            before = feed.read_through
            await WriteService(deps).write(a.writer, [draft_])
            for _ in range(200):
                if feed.read_through != before and armed["a"].is_set():
                    break
                await asyncio.sleep(0.02)
            woken = {name for name, event in armed.items() if event.is_set()}
            assert woken == ({"a"} if label == "own" else {"a", "b"}), (label, woken)
    finally:
        for sub in subs.values():
            feed.close(sub)
