"""Real PostgreSQL and Redis processes killed under load: calls answer UNAVAILABLE with a reason
(never INTERNAL), health follows the database, and everything recovers without a restart."""
from __future__ import annotations

import collections
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
from memplane_server.embedded import EmbeddedError, EmbeddedPostgres, EmbeddedRedis
from memplane_server.embedded._process import read_pid_file
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess

pytestmark = pytest.mark.slow
NO_RETRY = RetryPolicy(max_attempts=1)


@pytest.fixture(scope="module")
def deps_dir():
    path = make_shared_tmpdir("memplane-faults-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres(deps_dir):
    with EmbeddedPostgres(deps_dir / "pg") as pg:
        yield pg


@pytest.fixture(scope="module")
def redis_server(deps_dir):
    with EmbeddedRedis(deps_dir / "redis") as r:
        yield r


@pytest.fixture(scope="module")
def faulty_server(deps_dir, postgres, redis_server):
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": postgres.dsn, "MEMPLANE_REDIS_URL": redis_server.url,
        "MEMPLANE_DATA_DIR": str(deps_dir / "server"), "MEMPLANE_BOOTSTRAP_TENANT": "acme",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2", "MEMPLANE_CONTEXT_WINDOW": "0",
    }).start()
    yield proc
    proc.stop()


def health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


class Load:
    """Mixed calls from a few threads until stopped; counts outcomes by status code."""

    def __init__(self, target: str, key: str, memory_id: str, threads: int = 3) -> None:
        self.codes: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(target, key, memory_id, n)) for n in range(threads)]

    def __enter__(self) -> "Load":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _run(self, target: str, key: str, memory_id: str, n: int) -> None:
        calls = [
            lambda c: c.get_memory(memory_id),
            lambda c: c.list_memories(page_size=5),
            lambda c: c.search("release train", top_k=3),
            lambda c: c.write([{"content": f"load note {uuid.uuid4()}", "kind": "event"}]),
            lambda c: c.write([{"content": "scratch", "kind": "turn", "layer": "working", "session_id": f"s{n}"}]),
        ]
        with MemoryClient(target, key, retry=NO_RETRY, default_timeout=10) as client:
            i = 0
            while not self._stop.is_set() and i < 100_000:
                try:
                    calls[i % len(calls)](client)
                    self.codes["OK"] += 1
                except MemplaneError as exc:
                    self.codes[exc.code.name] += 1
                    self.reasons[exc.reason] += 1
                i += 1


def test_redis_down_keeps_postgres_reads_serving_and_recovers(faulty_server, redis_server):
    key = faulty_server.key("tenant admin")
    with MemoryClient(faulty_server.target, key, retry=NO_RETRY) as client:
        [memory] = client.write([{"content": "The release train leaves on Thursdays", "kind": "fact"}]).memories
        with Load(faulty_server.target, key, memory.id) as load:
            time.sleep(1)
            redis_server._process.kill()
            redis_server._process.wait()
            time.sleep(2.5)  # past the 2 s key cache: authentication reads PostgreSQL
            assert client.get_memory(memory.id).content.startswith("The release train")
            assert client.list_memories(page_size=5).items
            assert client.search("when does the release train leave").hits
            with pytest.raises(UnavailableError) as err:
                client.write([{"content": "note", "kind": "turn", "layer": "working", "session_id": "s"}])
            assert err.value.reason == "REDIS_UNAVAILABLE"
            # Persistent writes go on, deduplicated by PostgreSQL: a retry gets the first write back.
            request_id = str(uuid.uuid4())
            [first] = client.write([{"content": "written while Redis is down", "kind": "event"}],
                                   request_id=request_id).memories
            [again] = client.write([{"content": "written while Redis is down", "kind": "event"}],
                                   request_id=request_id).memories
            assert again.id == first.id
            with pytest.raises(UnavailableError):
                client.get_working_memory("s")
            assert health(faulty_server.target) == health_pb2.HealthCheckResponse.SERVING
            redis_server.restart()
            wait_for(lambda: _works(lambda: client.write(
                [{"content": "note", "kind": "turn", "layer": "working", "session_id": "s"}])))
            assert len(client.get_working_memory("s").items) == 1
    assert load.codes["OK"] > 0 and set(load.codes) <= {"OK", "UNAVAILABLE"}, (load.codes, errors_of(faulty_server))
    assert set(load.reasons) <= {"REDIS_UNAVAILABLE"}, load.reasons
    assert not any("Traceback" in line for line in faulty_server.lines[-200:])


def test_postgres_down_is_unavailable_not_serving_and_recovers(faulty_server, postgres):
    key = faulty_server.key("tenant admin")
    with MemoryClient(faulty_server.target, key, retry=NO_RETRY) as client:
        [memory] = client.write([{"content": "Deploys need the VPN on", "kind": "lesson"}]).memories
        with Load(faulty_server.target, key, memory.id) as load:
            time.sleep(1)
            postmaster = read_pid_file(postgres._data / "postmaster.pid")
            os.kill(postmaster, signal.SIGKILL)
            wait_for(lambda: health(faulty_server.target) == health_pb2.HealthCheckResponse.NOT_SERVING, 10)
            time.sleep(2.5)  # past the key cache
            with pytest.raises(UnavailableError) as err:
                client.get_memory(memory.id)
            assert err.value.reason == "DATABASE_UNAVAILABLE"
            wait_for(lambda: _restarted(postgres), 30)  # as the embedded supervisor does: until it starts
            wait_for(lambda: health(faulty_server.target) == health_pb2.HealthCheckResponse.SERVING, 15)
            wait_for(lambda: _works(lambda: client.get_memory(memory.id)))
    assert load.codes["OK"] > 0 and set(load.codes) <= {"OK", "UNAVAILABLE"}, (load.codes, errors_of(faulty_server))
    assert set(load.reasons) <= {"DATABASE_UNAVAILABLE"}, load.reasons


def errors_of(server: ServerProcess) -> str:
    """The server's logged errors, for the failure message."""
    start = next((i for i, line in enumerate(server.lines) if "ERROR" in line), len(server.lines))
    return "".join(server.lines[start:start + 60])


def _restarted(service) -> bool:
    try:
        service.restart()
    except EmbeddedError:  # the killed postmaster's backends may still be exiting
        time.sleep(0.5)
        return False
    return True


def _works(call) -> bool:
    try:
        call()
    except UnavailableError:
        return False
    return True
