"""Watch across two server replicas on one PostgreSQL and Redis: a writer on one and a watcher on
the other; every visible change arrives in order and nothing of another tenant or another agent's
private memories; a reconnect after the last position misses nothing, also across a restart of
the watcher's server; a watcher that reads nothing does not grow its server's memory."""
from __future__ import annotations

import asyncio
import signal
import time
import uuid

import grpc
import pytest

from memplane import AdminClient, ChangeKind, MemoryClient, RetryPolicy
from memplane.v1 import memory_service_pb2 as svc_pb
from memplane.v1 import memory_service_pb2_grpc as svc_grpc
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database
from tests.support.watching import Collector, started

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replicas(services_urls):
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_watch"))
    common = {"MEMPLANE_DATABASE_URL": url, "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/4",
              "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2", "MEMPLANE_RATE_LIMIT_PER_SECOND": "0"}
    writer = ServerProcess({**common, "MEMPLANE_DATA_DIR": str(make_shared_tmpdir("memplane-watch-a-")),
                            "MEMPLANE_BOOTSTRAP_TENANT": "acme"}).start()
    watcher = ServerProcess({**common, "MEMPLANE_DATA_DIR": str(make_shared_tmpdir("memplane-watch-b-")),
                             "MEMPLANE_BOOTSTRAP_TENANT": ""}).start()
    yield writer, watcher
    watcher.stop()
    writer.stop()


def tenant(server: ServerProcess) -> str:
    """A fresh tenant with agents a1 and a2; returns its tenant admin key."""
    name = f"w-{uuid.uuid4().hex[:8]}"
    with AdminClient(server.target, server.key("platform admin")) as admin:
        created = admin.create_tenant(name, create_admin_key=True)
        for agent in ("a1", "a2"):
            admin.create_agent(name, agent)
    return created.admin_key.secret


def test_a_watcher_on_one_replica_sees_every_visible_change_from_the_other(replicas):
    a, b = replicas
    key, other_key = tenant(a), tenant(a)
    with MemoryClient(b.target, key, agent_id="a1") as watching, \
            MemoryClient(a.target, key) as writer, MemoryClient(a.target, key, agent_id="a1") as a1, \
            MemoryClient(a.target, key, agent_id="a2") as a2, MemoryClient(a.target, other_key) as other:
        everything = Collector(watching)
        facts = Collector(watching, kinds="fact", change_kinds=["created", "superseded"])
        started(everything), started(facts)
        g = writer.write_one("global note", kind="event").id
        other.write_one("another tenant's note", kind="event")
        a2.write_one("a2 private note", kind="event", scope="private")
        p = a1.write_one("a1 private note", kind="event", scope="private").id
        f1 = writer.write_one("lives in Paris", kind="fact", entity="user", attribute="city", value="Paris").id
        f2 = writer.write_one("lives in Rome", kind="fact", entity="user", attribute="city", value="Rome").id
        writer.update_memory(g, context="from the standup")
        writer.forget(ids=[g])
        a1.forget(ids=[p], hard=True)
        expected = [(ChangeKind.CREATED, g), (ChangeKind.CREATED, p), (ChangeKind.CREATED, f1),
                    (ChangeKind.CREATED, f2), (ChangeKind.SUPERSEDED, f1), (ChangeKind.UPDATED, g),
                    (ChangeKind.FORGOTTEN, g), (ChangeKind.ERASED, p)]
        events = everything.wait(len(expected))
        fact_events = facts.wait(3)
        time.sleep(1.0)  # anything invisible would have arrived by now
        events = everything.events()
        assert [(e.change_kind, e.memory_id) for e in events] == expected
        positions = [e.position for e in events]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        assert events[0].memory.content == "global note" and events[7].memory is None
        assert events[5].memory.context == "from the standup"
        assert [(e.change_kind, e.memory_id) for e in facts.events()] == [
            (ChangeKind.CREATED, f1), (ChangeKind.CREATED, f2), (ChangeKind.SUPERSEDED, f1)]
        assert fact_events[0].memory.value == "Paris"


def test_a_reconnect_after_the_last_position_misses_nothing(replicas):
    a, b = replicas
    key = tenant(a)
    with MemoryClient(b.target, key) as watching, MemoryClient(a.target, key) as writer:
        with MemoryClient(b.target, key) as disconnecting:
            first = Collector(disconnecting)
            started(first)
            writer.write([{"content": f"note {i}", "kind": "event"} for i in range(3)])
            seen = first.wait(3)
        last = seen[1].position  # say the client had handled only two of them
        writer.write([{"content": f"note {i}", "kind": "event"} for i in range(3, 6)])
        again = Collector(watching, after_position=last)
        rest = again.wait(4)
        time.sleep(0.5)
        assert [e.memory.content for e in again.events()] == [f"note {i}" for i in range(2, 6)]
        assert all(e.position > last for e in rest)


def test_the_sdk_resumes_across_a_restart_of_the_watchers_server(replicas):
    a, b = replicas
    key = tenant(a)
    port = int(b.target.rsplit(":", 1)[1])
    with MemoryClient(b.target, key, retry=RetryPolicy(budget=120)) as watching, MemoryClient(a.target, key) as writer:
        c = Collector(watching)
        started(c)
        writer.write([{"content": f"before {i}", "kind": "event"} for i in range(3)])
        c.wait(3)
        sent = time.monotonic()
        assert b.stop(signal.SIGTERM) == 0
        stopped = time.monotonic() - sent
        writer.write([{"content": f"while down {i}", "kind": "event"} for i in range(3)])
        b.start(port=port)
        writer.write([{"content": f"after {i}", "kind": "event"} for i in range(3)])
        events = c.wait(9, timeout=120)
        time.sleep(0.5)
        assert [e.memory.content for e in c.events()] == (
            [f"before {i}" for i in range(3)] + [f"while down {i}" for i in range(3)] + [f"after {i}" for i in range(3)])
        assert [e.position for e in events] == sorted(e.position for e in events)
        print(f"\nwatcher's server stopped {stopped:.1f} s after SIGTERM with a watch open (grace 2 s)")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise LookupError("no VmRSS")


STALLED_CHANGES = 1000
BLOB = 60_000  # bytes of metadata per memory: 60 MB of changes in all
RSS_BOUND = 16 << 20


def test_a_watcher_that_reads_nothing_does_not_grow_its_servers_memory(replicas):
    a, b = replicas
    key = tenant(a)
    metadata = [("authorization", f"Bearer {key}")]
    with grpc.insecure_channel(b.target) as channel, MemoryClient(a.target, key, default_timeout=120) as writer:
        stream = svc_grpc.MemoryServiceStub(channel).Watch(svc_pb.WatchRequest(), metadata=metadata)
        start = next(stream).position  # connected; from here on nothing is read
        time.sleep(2.0)
        before = rss_bytes(b.process.pid)
        peak = before
        for n in range(0, STALLED_CHANGES, 50):
            writer.write([{"content": f"stalled {i}", "kind": "event", "metadata": {"blob": "x" * BLOB}}
                          for i in range(n, n + 50)])
            peak = max(peak, rss_bytes(b.process.pid))
        for _ in range(10):  # the server has had every chance to queue them
            time.sleep(0.5)
            peak = max(peak, rss_bytes(b.process.pid))
        grown = peak - before
        print(f"\nwatcher's server RSS {before / 2**20:.0f} MB -> peak {peak / 2**20:.0f} MB (+{grown / 2**20:.1f} MB)"
              f" while {STALLED_CHANGES * BLOB / 2**20:.0f} MB of changes were written and not read")
        assert grown < RSS_BOUND
        # Then it reads, and gets every change in order.
        seen = []
        for response in stream:
            seen.extend(e.memory.content for e in response.events)
            if len(seen) >= STALLED_CHANGES:
                break
        stream.cancel()
        assert seen == [f"stalled {i}" for i in range(STALLED_CHANGES)]
        assert start >= 0
