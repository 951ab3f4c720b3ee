"""Working memory, idempotency and rate limits on a real 3-master Redis Cluster (started here from the
embedded default's redis-server), through the client a `redis+cluster://` URL gives, and a master
killed under load: calls to its slots are UNAVAILABLE while the replica takes over, then succeed
again, and what was acknowledged is read back. (`make deploy-test` also runs the Redis suites with
the product on a cluster: MEMPLANE_TEST_REDIS_CLUSTER.)"""
from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import pytest_asyncio
import redis as sync_redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from memplane_server.core.access.requests import RequestKey
from memplane_server.core.model import Kind
from memplane_server.core.working import WorkingItem
from memplane_server.stores.outage import REDIS, outage_of
from memplane_server.stores.redis.client import connect
from memplane_server.stores.redis.idempotency import IdempotencyStore
from memplane_server.stores.redis.rate_limit import RateLimiter
from memplane_server.stores.redis.working import WorkingSession, WorkingStore, session_keys
from tests.conftest import make_shared_tmpdir
from tests.support.redis_cluster import LocalRedisCluster

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def cluster():
    started = LocalRedisCluster(make_shared_tmpdir("memplane-redis-cluster-")).start()
    yield started
    started.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def client(cluster):
    # As the runtime connects (runtime.py): bounded waits, one quick retry.
    client = connect(cluster.url, timeout=1.0, retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), 1))
    yield client
    await client.aclose()


def item(content: str, session: WorkingSession) -> tuple[WorkingItem, np.ndarray]:
    now = datetime.now(timezone.utc)
    working = WorkingItem(
        id=uuid.uuid4().hex, tenant_id=session.tenant_id, agent_id=session.agent_id, session_id=session.session_id,
        user_id=None, kind=Kind.TURN, content=content, context="", state_key=None, tags=(), metadata={},
        confidence=1.0, source_type=None, source_id=None, occurred_at=now, created_at=now,
        expire_at=now + timedelta(hours=1))
    return working, np.ones(4, dtype=np.float32)


async def test_a_cluster_url_gives_a_client_that_spreads_tenants_over_the_masters(cluster, client):
    assert isinstance(client, RedisCluster)
    store = WorkingStore(client, max_items=50)
    tenants = [f"t-{i}" for i in range(12)]
    for tenant in tenants:
        session = WorkingSession(tenant, "a1", "s1")
        await store.append(session, [item(f"hello {tenant}", session)], {})
        assert [i.content for i in (await store.read(WorkingSession(tenant, "a1", "s1"))).items] == [f"hello {tenant}"]
    masters = {cluster.master_of(session_keys(WorkingSession(t, "a1", "s1"))[0]) for t in tenants}
    assert len(masters) >= 2


async def test_scripts_and_multis_run_on_the_slot_their_keys_name(client):
    store = WorkingStore(client, max_items=50)
    session = WorkingSession("t-slots", None, "s1")
    await store.append(session, [item("one", session), item("two", session)], {"key_id": "k"})  # a script over five keys
    await store.delete(session)  # a MULTI over the same keys
    assert (await store.read(session)).items == []
    claims = IdempotencyStore(client, ttl_seconds=60)
    request = RequestKey(uuid.uuid4().hex, "fingerprint", "t-slots", "/memplane.v1.MemoryService/Write")
    claim = await claims.begin(request)
    assert await claims.renew(claim)  # a script
    await claims.complete(claim, b"answer")
    assert await claims.begin(request) == b"answer"
    limiter = RateLimiter(client, per_second=1, burst=2)
    assert [(await limiter.take("key-on-a-cluster")).allowed for _ in range(3)] == [True, True, False]


async def test_a_master_killed_under_load_fails_over_and_keeps_what_was_acknowledged(cluster, client):
    store = WorkingStore(client, max_items=10_000)
    session = WorkingSession("t-failover", "a1", "s1")
    master = cluster.master_of(session_keys(session)[0])
    acknowledged: list[str] = []
    refused: list[BaseException] = []
    killed = asyncio.Event()
    recovered_at: list[float] = []

    async def load() -> None:
        n = 0
        while not recovered_at or time.monotonic() < recovered_at[0] + 1.0:
            n += 1
            try:
                await store.append(session, [item(f"turn {n}", session)], {})
            except Exception as exc:
                assert outage_of(exc) == REDIS, repr(exc)  # what the caller gets as UNAVAILABLE
                refused.append(exc)
                await asyncio.sleep(0.05)
                continue
            acknowledged.append(f"turn {n}")
            if killed.is_set() and not recovered_at:
                recovered_at.append(time.monotonic())
            await asyncio.sleep(0.005)

    running = asyncio.ensure_future(load())
    await asyncio.sleep(0.5)
    # Writes paused on the master until its replica holds all of them (Redis replicates
    # asynchronously: a write acknowledged within the replication lag could be lost), then the master
    # dies with writers waiting on it.
    primary = sync_redis.Redis(port=master)
    primary.execute_command("CLIENT", "PAUSE", "10000", "WRITE")
    deadline = time.monotonic() + 10
    while True:
        info = primary.info("replication")
        if info.get("slave0", {}).get("offset") == info["master_repl_offset"] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    before = len(acknowledged)
    await asyncio.to_thread(cluster.kill, master)
    killed.set()
    await asyncio.wait_for(running, 60)
    assert before > 10 and refused, (before, len(refused))
    assert len(acknowledged) > before  # calls succeed again after the failover
    await asyncio.to_thread(cluster.wait_ok)
    stored = {i.content for i in (await store.read(session)).items}
    assert set(acknowledged) <= stored
