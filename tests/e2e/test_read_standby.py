"""Search, GetMemory and ListMemories read on a hot standby (MEMPLANE_READ_DATABASE_URL) of the
primary, both from the embedded PostgreSQL's binaries, with read-your-writes: a caller reads its own
write back at once (the SDK sends the position its write was given; the server waits for the standby
to replay it, else reads the primary), and another caller sees it once the standby has replayed it."""
from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from memplane import MemoryClient
from memplane.errors import NotFoundError
from memplane_server.embedded import EmbeddedPostgres
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess
from tests.support.standby import Standby

# What another caller may wait for a write to reach the standby here (one machine: replication
# takes milliseconds; docs/scaling.md).
LAG_SECONDS = 2.0
# The server's bound on waiting for the standby: a read answered sooner was not sent to the primary
# for a standby still behind.
WAIT_SECONDS = 1.0


@pytest.fixture(scope="module")
def databases():
    data = make_shared_tmpdir("memplane-standby-")
    primary = EmbeddedPostgres(data)
    primary_url = primary.start()
    standby = Standby(data, primary_url)
    try:
        yield primary_url, standby.start()
    finally:
        standby.stop()
        primary.stop()


@pytest.fixture(scope="module")
def server(databases, services_urls):
    primary_url, standby_url = databases
    data = make_shared_tmpdir("memplane-standby-server-")
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": primary_url, "MEMPLANE_READ_DATABASE_URL": standby_url,
        "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/3", "MEMPLANE_DATA_DIR": str(data),
        "MEMPLANE_BOOTSTRAP_TENANT": "standby", "MEMPLANE_READ_WAIT_MS": str(int(WAIT_SECONDS * 1000)),
    }).start()
    yield proc
    proc.stop()


def replay(standby_url: str, paused: bool) -> None:
    async def set_replay() -> None:
        conn = await asyncpg.connect(standby_url)
        try:
            await conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")
        finally:
            await conn.close()
    asyncio.run(set_replay())


def test_a_callers_own_write_is_read_back_at_once(server):
    with MemoryClient(server.target, server.key("tenant admin")) as client:
        for i in range(5):
            stored = client.write_one(f"Incident {i} was resolved by restarting the ingest workers", kind="event")
            started = time.monotonic()
            assert client.get_memory(stored.id).content == stored.content
            assert time.monotonic() - started < WAIT_SECONDS  # the standby had it: no wait ran out
            assert stored.id in [h.memory.id for h in client.search(f"incident {i} ingest workers", top_k=5).hits]
            assert stored.id in [m.id for m in client.list_memories(page_size=50).items]
    assert not [line for line in server.lines if "read standby does not answer" in line]


def test_another_caller_sees_the_write_within_the_lag(server):
    key = server.key("tenant admin")
    with MemoryClient(server.target, key) as writer, MemoryClient(server.target, key) as reader:
        stored = writer.write_one("The data warehouse refresh moved to 02:00 UTC", kind="fact")
        started = time.monotonic()
        while True:
            try:
                assert reader.get_memory(stored.id).content == stored.content
                break
            except NotFoundError:
                assert time.monotonic() - started < LAG_SECONDS
                time.sleep(0.01)


def test_a_standby_behind_the_callers_write_sends_its_read_to_the_primary(server, databases):
    """With replay paused the standby cannot see the write: the writer still reads it (from the
    primary, after the bounded wait), a reader without that write's position reads the standby and
    does not, until replay resumes."""
    _, standby_url = databases
    key = server.key("tenant admin")
    with MemoryClient(server.target, key) as writer, MemoryClient(server.target, key) as reader:
        replay(standby_url, paused=True)
        try:
            stored = writer.write_one("Backups are kept for 35 days", kind="fact")
            assert writer.get_memory(stored.id).content == stored.content
            with pytest.raises(NotFoundError):
                reader.get_memory(stored.id)
        finally:
            replay(standby_url, paused=False)
        deadline = time.monotonic() + LAG_SECONDS
        while True:
            try:
                reader.get_memory(stored.id)
                break
            except NotFoundError:
                assert time.monotonic() < deadline
                time.sleep(0.01)


def test_watch_catch_up_misses_no_change_the_standby_has_not_replayed(server, databases):
    """A page of changes is read on the standby only when it holds every position the page covers:
    with replay paused, the changes written meanwhile still reach a watcher catching up."""
    _, standby_url = databases
    key = server.key("tenant admin")
    with MemoryClient(server.target, key) as writer, MemoryClient(server.target, key) as watcher:
        session = f"watched-{time.monotonic_ns()}"
        writer.write([{"content": f"before {i}", "kind": "event", "session_id": session} for i in range(3)])
        replay(standby_url, paused=True)
        try:
            writer.write([{"content": f"while paused {i}", "kind": "event", "session_id": session} for i in range(2)])
            seen = []
            for event in watcher.watch(after_position=0, session_id=session, timeout=20):
                seen.append(event.memory.content)
                if len(seen) == 5:
                    break
        finally:
            replay(standby_url, paused=False)
    assert seen == [f"before {i}" for i in range(3)] + [f"while paused {i}" for i in range(2)]
