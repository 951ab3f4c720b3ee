"""SIGTERM with calls in flight: health turns NOT_SERVING at once (and is still answered), new
calls are UNAVAILABLE, and the process exits within the grace time plus 2 s; during a bulk load
whose turn windows are being built, every acknowledged write is there after the restart and the
embedded PostgreSQL and Redis are gone with the server."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memplane import MemoryClient, RetryPolicy
from memplane.errors import MemplaneError, UnavailableError
from memplane_server.embedded._process import processes_in
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database, restartable_port

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


@pytest.fixture
def embedded_data(monkeypatch):
    for name in ("MEMPLANE_DATABASE_URL", "MEMPLANE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    path = make_shared_tmpdir("memplane-bulk-stop-")
    yield path / "data"
    for pid in embedded_children(path / "data"):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def embedded_children(data) -> set[int]:
    return processes_in(data / "postgres" / "data") | processes_in(data / "redis")


def bulk_load(target: str, key: str, acked: list[str], stop: threading.Event, n: int) -> None:
    """Batches of turns in sessions of 24, each retried with its request id until acknowledged or
    the server is gone; only acknowledged contents are recorded."""
    with MemoryClient(target, key, retry=RetryPolicy(max_attempts=1), default_timeout=30) as client:
        for call in range(10_000):
            batch = [{"content": f"bulk {n}-{call}-{i}: we talked about the harbour trip and the weather",
                      "kind": "turn", "session_id": f"bulk-{n}-{call // 3}"} for i in range(8)]
            request_id = str(uuid.uuid4())
            while True:
                try:
                    client.write(batch, request_id=request_id)
                    break
                except MemplaneError:
                    if stop.is_set():
                        return
                    time.sleep(0.1)
            acked.extend(item["content"] for item in batch)


def test_sigterm_during_a_bulk_load_building_windows_keeps_every_acknowledged_write(embedded_data):
    env = {"MEMPLANE_DATA_DIR": str(embedded_data), "MEMPLANE_SHUTDOWN_GRACE_SECONDS": str(GRACE),
           "MEMPLANE_CONTEXT_QUIET_SECONDS": "0"}
    port = restartable_port()
    server = ServerProcess(env).start(port=port)
    key = server.key("tenant admin")
    acked: list[str] = []
    stop = threading.Event()
    writers = [threading.Thread(target=bulk_load, args=(server.target, key, acked, stop, n)) for n in range(2)]
    for w in writers:
        w.start()
    try:
        with MemoryClient(server.target, key) as client:
            deadline = time.monotonic() + 60
            # Windows built and being upgraded (embedded) while the writes go on.
            while client.get_stats().sessions_awaiting_upgrade < 2 or len(acked) < 100:
                assert time.monotonic() < deadline, "no windows were built during the load"
                time.sleep(0.2)
        stop.set()
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(GRACE + 10)
        took = time.monotonic() - sent
        left = embedded_children(embedded_data)
        for w in writers:
            w.join(30)
        print(f"SIGTERM to exit during a bulk load: {took:.2f} s (grace {GRACE:g} s), {len(acked)} turns acknowledged")
        assert code == 0 and took <= GRACE + 2, f"exit {code} after {took:.1f}s:\n" + "".join(server.lines[-30:])
        assert not left, f"embedded processes left: {left}"

        server = ServerProcess(env).start(port=port)
        with MemoryClient(server.target, key) as client:
            stored, token = set(), ""
            while True:
                page = client.list_memories(page_size=500, page_token=token, kinds=["turn"])
                stored |= {m.content for m in page.items}
                token = page.next_page_token
                if not token:
                    break
        assert not set(acked) - stored, sorted(set(acked) - stored)[:5]
    finally:
        stop.set()
        server.stop(signal.SIGTERM)
