"""proto/memplane/v1/service_config.json gives a stub of any language the retries the SDK makes:
loaded in a plain Python stub, a read that meets a draining server goes to the other one."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import grpc
import pytest

from memplane import MemoryClient, RetryPolicy
from memplane._retry import REPEATABLE_METHODS
from memplane.errors import MemplaneError
from memplane.v1 import admin_service_pb2, memory_service_pb2, memory_service_pb2_grpc, operations_service_pb2
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database

pytestmark = pytest.mark.slow
CONFIG = Path(__file__).resolve().parents[2] / "proto" / "memplane" / "v1" / "service_config.json"
GRACE = 8.0
READS = 30


def test_the_config_retries_exactly_the_calls_both_sdks_repeat():
    [policy] = json.loads(CONFIG.read_text())["methodConfig"]
    services = {s.full_name: s for module in (memory_service_pb2, operations_service_pb2, admin_service_pb2)
                for s in module.DESCRIPTOR.services_by_name.values()}
    named = {(n["service"], n["method"]) for n in policy["name"]}
    assert all(method in services[service].methods_by_name for service, method in named)
    assert {method for _, method in named} == REPEATABLE_METHODS
    typescript = (CONFIG.parents[3] / "clients" / "typescript" / "src" / "retry.ts").read_text()
    listed = typescript.split("REPEATABLE_METHODS: ReadonlySet<string> = new Set([", 1)[1].split("])", 1)[0]
    assert set(re.findall(r'"(\w+)"', listed)) == REPEATABLE_METHODS
    assert {"UNAVAILABLE", "CANCELLED"} <= set(policy["retryPolicy"]["retryableStatusCodes"])


@pytest.fixture
def two_servers(services_urls):
    database_url, redis_url = services_urls
    data = make_shared_tmpdir("memplane-service-config-")
    env = {"MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(database_url, "memplane_service_config")),
           "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/8", "MEMPLANE_DATA_DIR": str(data),
           "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_SHUTDOWN_GRACE_SECONDS": str(GRACE)}
    first = ServerProcess(env).start()
    key = first.key("tenant admin")
    second = ServerProcess(env).start()
    yield first, second, key
    for server in (first, second):
        server.stop(signal.SIGKILL)
    shutil.rmtree(data, ignore_errors=True)


def keep_busy(target: str, key: str) -> None:
    """A write long enough (embedding 200 texts; three of them queue on the embedder) to hold the
    server in its drain."""
    batch = [{"content": f"note {i} about the quarterly roadmap review", "kind": "event"} for i in range(200)]
    with MemoryClient(target, key, retry=RetryPolicy(max_attempts=1), default_timeout=60) as client:
        try:
            client.write(batch)
        except MemplaneError:
            pass  # cut off by the drain's end: what happens to it is test_shutdown's


def failed_reads(channel: grpc.Channel, key: str) -> list[str]:
    stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
    failed = []
    for _ in range(READS):
        try:
            stub.GetStats(memory_service_pb2.GetStatsRequest(), metadata=[("authorization", f"Bearer {key}")],
                          timeout=10)
        except grpc.RpcError as exc:
            failed.append(exc.code().name)
    return failed


def test_a_plain_stub_with_the_config_retries_a_read_through_a_draining_server(two_servers):
    draining, other, key = two_servers
    both = f"ipv4:{draining.target},{other.target}"
    spread = [("grpc.lb_policy_name", "round_robin")]
    with grpc.insecure_channel(both, options=spread) as plain, \
            grpc.insecure_channel(both, options=[("grpc.service_config", CONFIG.read_text())]) as configured:
        assert failed_reads(plain, key) == [] and failed_reads(configured, key) == []  # both servers answer
        busy = [threading.Thread(target=keep_busy, args=(draining.target, key)) for _ in range(3)]
        for writer in busy:
            writer.start()
        time.sleep(1.5)  # the writes are in flight
        draining.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # it is draining: new calls are UNAVAILABLE
        assert draining.process.poll() is None
        without, with_config = failed_reads(plain, key), failed_reads(configured, key)
        still_draining = draining.process.poll() is None
        for writer in busy:
            writer.join(GRACE + 30)
    assert still_draining, "the server left its drain before the reads were done"
    assert "UNAVAILABLE" in without  # the test bites: half the plain stub's reads meet the draining server
    assert with_config == []
