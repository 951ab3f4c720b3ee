"""A `memplane worker` killed with SIGKILL in the middle of a reflection (a real process, waiting
on its model) leaves the job to another worker once its lease runs out, and the reflection's
memories exist exactly once afterwards."""
from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid

import asyncpg
import pytest

from memplane import MemoryClient
from memplane.enums import OperationState
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.slow
LEASE = 2.0
GOOD = json.dumps({
    "memories": [
        {"kind": "lesson", "content": "Drain the queue before rotating keys", "context": "key rotation",
         "confidence": 0.9, "steps": [0]},
        {"kind": "procedure", "content": "Rotate keys: drain, rotate, verify", "context": "", "confidence": 0.8,
         "steps": [0]},
    ],
    "summary": "Key rotation failed because the queue was full.",
})


async def stored_for(database_url: str, task_id: str, op_id: str) -> tuple[list[str], tuple[str, int]]:
    conn = await asyncpg.connect(database_url)
    try:
        kinds = await conn.fetch(
            "SELECT kind FROM memories WHERE source_type = 'task' AND source_id = $1 ORDER BY kind", task_id)
        job = await conn.fetchrow("SELECT state, attempts FROM jobs WHERE id = $1", uuid.UUID(op_id))
    finally:
        await conn.close()
    return [r["kind"] for r in kinds], (job["state"], job["attempts"])


def test_a_worker_killed_mid_reflection_leaves_its_job_to_another_and_the_memories_exist_once(services_urls):
    fake = FakeLLM().start()
    data = make_shared_tmpdir("memplane-job-crash-")
    env = {
        "MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(services_urls[0], "memplane_job_crash")),
        "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/5",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_CONTEXT_WINDOW": "0",
        "MEMPLANE_LLM_MODEL": "openai/test-model", "MEMPLANE_LLM_API_BASE": fake.api_base,
        "MEMPLANE_LLM_API_KEY": "test", "MEMPLANE_JOB_LEASE_SECONDS": str(LEASE),
    }
    server = ServerProcess({**env, "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_BACKGROUND_WORK": "none"}).start()
    workers: list[ServerProcess] = []
    try:
        task_id = f"rotate-{uuid.uuid4().hex[:6]}"
        # The first worker's model call hangs (it is killed inside it); the second gets an answer.
        fake.script(Reply(GOOD, delay=60), Reply(GOOD))
        with MemoryClient(server.target, server.key("tenant admin")) as client:
            op = client.reflect(task={"task_id": task_id, "request": "Rotate the deploy keys", "outcome": "failure"},
                                mode="async").operation
            workers.append(ServerProcess(env, command="worker", ready="memplane worker running").start())
            deadline = time.monotonic() + 60
            while not any(r["path"].endswith("/chat/completions") for r in fake.requests):
                assert time.monotonic() < deadline, "".join(workers[0].lines[-20:])
                time.sleep(0.1)
            workers[0].process.kill()  # SIGKILL: no chance to give the job back
            workers[0].process.wait(10)
            workers.append(ServerProcess(env, command="worker", ready="memplane worker running").start())
            done = client.wait_operation(op.id, timeout=60)
        assert done.state is OperationState.SUCCEEDED
        kinds, job = asyncio.run(stored_for(env["MEMPLANE_DATABASE_URL"], task_id, op.id))
        assert kinds == ["lesson", "procedure", "summary"] and job == ("succeeded", 2)
    finally:
        for w in workers:
            w.stop()
        server.stop()
        fake.stop()
        shutil.rmtree(data, ignore_errors=True)
