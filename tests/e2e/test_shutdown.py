"""SIGTERM with calls in flight: health turns NOT_SERVING at once (and is still answered), new
calls are UNAVAILABLE, and the process exits within the grace time plus 2 s."""
from __future__ import annotations

import asyncio
import shutil
import signal
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memplane import MemoryClient, RetryPolicy
from memplane.errors import MemplaneError, UnavailableError

from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database

pytestmark = pytest.mark.slow
GRACE = 3.0
IN_FLIGHT = 6


@pytest.fixture
def draining_server(services_urls):
    database_url, redis_url = services_urls
    data = make_shared_tmpdir("memplane-drain-")
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(database_url, "memplane_drain")),
        "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/2",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": str(GRACE),
    }).start()
    yield proc
    proc.stop(signal.SIGKILL)
    shutil.rmtree(data, ignore_errors=True)


def test_sigterm_drains_within_the_grace_time(draining_server):
    target, key = draining_server.target, draining_server.key("tenant admin")
    outcomes: list[str] = []

    def long_write(n: int) -> None:
        # Each batch needs many seconds of CPU embedding: together far longer than the grace time.
        batch = [{"content": f"call {n} note {i} about the quarterly roadmap review", "kind": "event"}
                 for i in range(200)]
        with MemoryClient(target, key, retry=RetryPolicy(max_attempts=1), default_timeout=60) as client:
            try:
                client.write(batch)
                outcomes.append("OK")
            except MemplaneError as exc:
                outcomes.append(exc.code.name)

    writers = [threading.Thread(target=long_write, args=(n,)) for n in range(IN_FLIGHT)]
    for w in writers:
        w.start()
    time.sleep(1.5)  # the calls are in flight
    assert draining_server.process.poll() is None
    sent = time.monotonic()
    draining_server.process.send_signal(signal.SIGTERM)
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 1.0
        status = None
        while time.monotonic() < deadline:
            status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
            if status == health_pb2.HealthCheckResponse.NOT_SERVING:
                break
            time.sleep(0.02)
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    with MemoryClient(target, key, retry=RetryPolicy(max_attempts=1)) as client:
        with pytest.raises(UnavailableError) as err:
            client.get_stats()
        assert err.value.reason == "SERVER_SHUTTING_DOWN"
    code = draining_server.process.wait(GRACE + 10)
    took = time.monotonic() - sent
    for w in writers:
        w.join(30)
    print(f"SIGTERM to exit: {took:.2f} s (grace {GRACE:g} s)")
    assert code == 0 and took <= GRACE + 2, f"exit {code} after {took:.1f}s"
    assert len(outcomes) == IN_FLIGHT and set(outcomes) <= {"OK", "CANCELLED", "UNAVAILABLE"}, outcomes
