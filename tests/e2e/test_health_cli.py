"""`memplane health` exits 0 only for a server that answers SERVING on grpc.health.v1."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time

import pytest

from memplane_server.embedded import EmbeddedPostgres
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, free_port


def memplane_health(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memplane_server.cli", "health", *args],
                          capture_output=True, text=True, timeout=60)


def test_a_serving_server_passes(server):
    result = memplane_health("--address", server.target)
    assert result.returncode == 0, result.stderr
    assert "SERVING" in result.stdout


def test_nothing_listening_fails():
    result = memplane_health("--address", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr


def test_a_peer_that_never_answers_fails_at_the_timeout():
    # A socket that completes TCP handshakes (the kernel's backlog) but never speaks HTTP/2: a hung server.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        result = memplane_health("--address", f"127.0.0.1:{silent.getsockname()[1]}", "--timeout", "1")
        elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "DEADLINE_EXCEEDED" in result.stderr
    assert elapsed < 10, elapsed


@pytest.fixture
def server_losing_its_database(services_urls):
    data = make_shared_tmpdir("memplane-health-")
    postgres = EmbeddedPostgres(data / "pg")
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": postgres.start(),
        "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/3",
        "MEMPLANE_DATA_DIR": str(data / "server"), "MEMPLANE_BOOTSTRAP_TENANT": "",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "1", "MEMPLANE_CONTEXT_WINDOW": "0",
    }).start()
    yield proc, postgres
    proc.stop()
    postgres.stop()
    shutil.rmtree(data, ignore_errors=True)


def test_a_server_without_its_database_is_not_serving_but_alive(server_losing_its_database):
    proc, postgres = server_losing_its_database
    assert memplane_health("--address", proc.target).returncode == 0
    postgres.stop()
    deadline = time.monotonic() + 20
    while (result := memplane_health("--address", proc.target)).returncode == 0:
        assert time.monotonic() < deadline, "health stayed SERVING without a database"
        time.sleep(0.5)
    assert result.returncode == 1
    assert "NOT_SERVING" in result.stderr
    # Restarting it would not bring the database back: the liveness service stays SERVING.
    assert memplane_health("--address", proc.target, "--service", "liveness").returncode == 0
