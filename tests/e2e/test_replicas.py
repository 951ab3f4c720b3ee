"""Many replicas, one truth: three `memplane serve` processes (one doing background work, two
not) and two `memplane worker` processes on one PostgreSQL and one Redis, driven through the SDK
at all three servers at once."""
from __future__ import annotations

import asyncio
import re
import shutil
import threading
import time
import urllib.request
import uuid

import asyncpg
import pytest

from memplane import AdminClient, MemoryClient, RetryPolicy
from memplane.enums import OperationState
from memplane.errors import MemplaneError, ResourceExhaustedError, UnauthenticatedError
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, free_port, fresh_database

pytestmark = pytest.mark.slow
RATE, BURST = 10, 10
AUTH_CACHE_SECONDS = 2.0  # services/access/auth.py CACHE_SECONDS, the bound the README documents
LOAD_SECONDS = 14
KILL_AFTER = 5
TURNS = 4


def metric(process: ServerProcess, name: str) -> float:
    """Sum of a metric's samples on the process's Prometheus endpoint."""
    with urllib.request.urlopen(f"http://{process.env['MEMPLANE_METRICS_LISTEN']}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


@pytest.fixture(scope="module")
def deployment(services_urls):
    database_url = asyncio.run(fresh_database(services_urls[0], "memplane_replicas"))
    data = make_shared_tmpdir("memplane-replicas-")
    env = {
        "MEMPLANE_DATABASE_URL": database_url,
        "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/7",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "3", "MEMPLANE_RATE_LIMIT_PER_SECOND": str(RATE),
        "MEMPLANE_RATE_LIMIT_BURST": str(BURST), "MEMPLANE_CONTEXT_QUIET_SECONDS": "1",
        # Windows averaged from the turns' vectors: the same leases and queue, without the window
        # embeddings that would take minutes of these 2 cores.
        "MEMPLANE_CONTEXT_VECTORS": "average",
    }

    def process(background: str, command: str = "serve") -> ServerProcess:
        extra = {"MEMPLANE_BACKGROUND_WORK": background, "MEMPLANE_METRICS_LISTEN": f"127.0.0.1:{free_port()}"}
        if command == "worker":
            return ServerProcess({**env, **extra}, command="worker", ready="memplane worker running")
        return ServerProcess({**env, **extra})

    servers = [process("in-process"), process("none"), process("none")]
    workers = [process("none", "worker"), process("none", "worker")]
    # All at once on the empty database: one of them bootstraps it.
    starters = [threading.Thread(target=p.start) for p in servers + workers]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        assert all(p.process is not None and p.process.poll() is None for p in servers + workers)
        yield env, servers, workers
    finally:
        for p in servers + workers:
            p.stop()
        shutil.rmtree(data, ignore_errors=True)


def bootstrap_keys(servers: list[ServerProcess]) -> tuple[str, str]:
    printed = [s for s in servers if any("admin key:" in line for line in s.lines)]
    assert len(printed) == 1, "exactly one server bootstraps"
    return printed[0].key("platform admin"), printed[0].key("tenant admin")


def new_key(servers: list[ServerProcess], role: str = "writer") -> tuple[str, str]:
    """A fresh key of tenant acme: (key id, secret)."""
    with AdminClient(servers[0].target, bootstrap_keys(servers)[0]) as admin:
        created = admin.create_api_key(tenant_id="acme", role=role)
    return created.api_key.id, created.secret


def test_a_request_id_repeated_on_every_server_writes_once(deployment):
    env, servers, _ = deployment
    _, secret = new_key(servers)
    request_id, content = str(uuid.uuid4()), f"replicated write {uuid.uuid4().hex}"
    results: list = []

    def write(target: str) -> None:
        with MemoryClient(target, secret) as client:
            results.append(client.write([{"content": content, "kind": "fact"}], request_id=request_id))

    # At the same moment on all three, then once more on each.
    threads = [threading.Thread(target=write, args=(s.target,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in servers:
        write(s.target)
    assert len({r.memories[0].id for r in results}) == 1 and len(results) == 6
    assert asyncio.run(count_content(env["MEMPLANE_DATABASE_URL"], [content])) == {content: 1}


def test_a_key_revoked_on_one_server_fails_on_all_within_the_cache_time(deployment):
    _, servers, _ = deployment
    key_id, secret = new_key(servers)
    clients = [MemoryClient(s.target, secret, retry=RetryPolicy(max_attempts=1)) for s in servers]
    try:
        for c in clients:  # every server has the key cached
            c.get_stats()
        with AdminClient(servers[1].target, bootstrap_keys(servers)[0]) as admin:
            admin.revoke_api_key(key_id)
        time.sleep(AUTH_CACHE_SECONDS)
        for c in clients:
            with pytest.raises(UnauthenticatedError):
                c.get_stats()
    finally:
        for c in clients:
            c.close()


def test_the_rate_limit_of_a_key_holds_across_servers(deployment):
    _, servers, _ = deployment
    _, secret = new_key(servers, "reader")
    outcomes: dict[str, list[str]] = {s.target: [] for s in servers}
    window = 2.0
    start = time.monotonic()

    def hammer(target: str) -> None:
        with MemoryClient(target, secret, retry=RetryPolicy(max_attempts=1)) as client:
            while time.monotonic() - start < window:
                try:
                    client.get_stats()
                    outcomes[target].append("OK")
                except ResourceExhaustedError:
                    outcomes[target].append("RATE_LIMITED")

    threads = [threading.Thread(target=hammer, args=(s.target,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    allowed = sum(o.count("OK") for o in outcomes.values())
    # One bucket for the key: its burst plus its rate over the window (with a call of slack for
    # the clock), where a bucket per server would have let three times as many through.
    assert allowed <= BURST + RATE * elapsed + 1, outcomes
    assert all("RATE_LIMITED" in o for o in outcomes.values())


async def count_content(database_url: str, contents: list[str]) -> dict[str, int]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT content, count(*) AS n FROM memories WHERE content = ANY($1) GROUP BY content", contents)
    finally:
        await conn.close()
    return {r["content"]: r["n"] for r in rows}


async def background_outcome(database_url: str, ops: list[str], sessions: list[str]) -> dict[str, object]:
    """What the database says about the load's background work."""
    conn = await asyncpg.connect(database_url)
    try:
        jobs = await conn.fetch("SELECT state, attempts FROM jobs WHERE id = ANY($1::uuid[])", ops)
        unbuilt = await conn.fetchval(
            "SELECT count(*) FROM memories WHERE session_id = ANY($1) AND kind = 'turn'"
            " AND coalesce(context_of, '') = ''", sessions)
        queued = await conn.fetchval("SELECT count(*) FROM context_queue WHERE session_id = ANY($1)", sessions)
    finally:
        await conn.close()
    return {"jobs": sorted((r["state"], r["attempts"]) for r in jobs), "unbuilt turns": unbuilt, "queued": queued}


def test_load_across_servers_survives_a_sigterm_and_background_work_runs_once(deployment):
    env, servers, workers = deployment
    _, admin_secret = bootstrap_keys(servers)
    built_before = sum(metric(p, "memplane_turn_windows_sessions_built_total") for p in [servers[0], *workers])
    acknowledged: list[str] = []
    sessions: list[str] = []
    ops: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def load(n: int) -> None:
        _, secret = new_key(servers)
        # One client for all three servers: calls go round robin, and retries move on.
        with MemoryClient([s.target for s in servers], secret, default_timeout=30) as client:
            i = 0
            while not stop.is_set():
                session = f"s-{n}-{i}"
                turns = [f"{session} turn {t}: the deploy of service {n} moved to slot {i}" for t in range(TURNS)]
                try:
                    client.write([{"content": c, "kind": "turn", "session_id": session} for c in turns])
                    acknowledged.extend(turns)
                    sessions.append(session)
                    ops.append(client.reflect(task={"task_id": session, "request": "Deploy", "outcome": "success"},
                                              mode="async").operation.id)
                    client.search(f"where did service {n} move", top_k=3)
                except MemplaneError as exc:
                    failures.append(f"{exc.code.name} {exc}")
                i += 1

    threads = [threading.Thread(target=load, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    time.sleep(KILL_AFTER)
    victim = servers[2]
    served = "rpc_server_duration_milliseconds_count"
    served_before_kill = metric(victim, served)
    survivors_before = [metric(s, served) for s in servers[:2]]
    code = victim.stop()
    time.sleep(LOAD_SECONDS - KILL_AFTER)
    stop.set()
    for t in threads:
        t.join()

    # No call failed: those the drained server refused were retried on the other two.
    assert failures == []
    assert code == 0 and served_before_kill > 0
    assert all(metric(s, served) > before for s, before in zip(servers[:2], survivors_before))
    # Every acknowledged write is stored, once.
    assert asyncio.run(count_content(env["MEMPLANE_DATABASE_URL"], acknowledged)) == {c: 1 for c in acknowledged}
    # Every queued job and every session's windows done, each once.
    deadline = time.monotonic() + 60
    expected = {"jobs": [("succeeded", 1)] * len(ops), "unbuilt turns": 0, "queued": 0}
    while (outcome := asyncio.run(background_outcome(env["MEMPLANE_DATABASE_URL"], ops, sessions))) != expected:
        assert time.monotonic() < deadline, outcome
        time.sleep(0.5)
    built = sum(metric(p, "memplane_turn_windows_sessions_built_total") for p in [servers[0], *workers])
    assert built - built_before == len(sessions)
    assert len(sessions) >= 6
    with MemoryClient(servers[0].target, admin_secret) as client:
        assert all(client.get_operation(o).state is OperationState.SUCCEEDED for o in ops[:3])
