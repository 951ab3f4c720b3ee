"""`memplane worker` processes do the background work of servers that run with
MEMPLANE_BACKGROUND_WORK=none: each job once, however many workers compete for the queue."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid

import asyncpg
import pytest

from memplane import MemoryClient
from memplane.enums import OperationState
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database

pytestmark = pytest.mark.slow
JOBS = 30


@pytest.fixture(scope="module")
def deployment(services_urls):
    """Database and Redis of a deployment whose one server does no background work."""
    database_url = asyncio.run(fresh_database(services_urls[0], "memplane_workers"))
    data = make_shared_tmpdir("memplane-workers-")
    env = {
        "MEMPLANE_DATABASE_URL": database_url,
        "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/4",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "3",
        "MEMPLANE_CONTEXT_WINDOW": "0",
    }
    server = ServerProcess({**env, "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_BACKGROUND_WORK": "none"}).start()
    yield env, server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


def reflect_async(server: ServerProcess, task_ids: list[str]) -> list[str]:
    """Queues a reflection of each task as an operation; returns the operations' ids."""
    with MemoryClient(server.target, server.key("tenant admin")) as client:
        return [
            client.reflect(task={"task_id": t, "request": "Rotate the deploy keys", "outcome": "success"},
                           mode="async").operation.id
            for t in task_ids
        ]


def new_tasks(count: int) -> list[str]:
    return [f"t-{uuid.uuid4().hex[:8]}" for _ in range(count)]


def states(server: ServerProcess, ids: list[str]) -> list[OperationState]:
    with MemoryClient(server.target, server.key("tenant admin")) as client:
        return [client.get_operation(i).state for i in ids]


def test_a_server_without_background_work_leaves_jobs_queued(deployment):
    _, server = deployment
    ids = reflect_async(server, new_tasks(2))
    time.sleep(3)  # six times the job runner's idle poll
    assert states(server, ids) == [OperationState.PENDING] * 2


async def _job_rows(database_url: str, ids: list[str], task_ids: list[str]) -> tuple[list[tuple[str, int]], int]:
    """Each job's (state, attempts) and the number of task summaries stored."""
    conn = await asyncpg.connect(database_url)
    try:
        jobs = await conn.fetch("SELECT state, attempts FROM jobs WHERE id = ANY($1::uuid[])", ids)
        summaries = await conn.fetchval(
            "SELECT count(*) FROM memories WHERE kind = 'summary' AND source_type = 'task' AND source_id = ANY($1)",
            task_ids)
    finally:
        await conn.close()
    return [(r["state"], r["attempts"]) for r in jobs], summaries


def test_two_workers_run_each_queued_job_once(deployment):
    env, server = deployment
    task_ids = new_tasks(JOBS)
    ids = reflect_async(server, task_ids)
    workers = [ServerProcess(env, command="worker", ready="memplane worker running") for _ in range(2)]
    # Started together, so both compete for the same queue.
    starters = [threading.Thread(target=w.start) for w in workers]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        deadline = time.monotonic() + 120
        while any(s in (OperationState.PENDING, OperationState.RUNNING) for s in states(server, ids)):
            assert time.monotonic() < deadline, "".join(workers[0].lines[-20:] + workers[1].lines[-20:])
            time.sleep(0.5)
        jobs, summaries = asyncio.run(_job_rows(env["MEMPLANE_DATABASE_URL"], ids, task_ids))
        assert jobs == [("succeeded", 1)] * JOBS
        assert summaries == JOBS
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0, 0]


def test_a_worker_needs_the_servers_database_and_redis():
    env = {k: v for k, v in os.environ.items() if k not in ("MEMPLANE_DATABASE_URL", "MEMPLANE_REDIS_URL")}
    result = subprocess.run([sys.executable, "-m", "memplane_server.cli", "worker"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "MEMPLANE_DATABASE_URL" in result.stderr
