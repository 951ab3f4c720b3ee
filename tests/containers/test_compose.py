"""docker-compose.yml, as users run it, under Docker Compose v2 (the docker-compose binary
scripts/install_deploy_tools.py installs) talking to podman's Docker-compatible API: the migrate
one-shot first, server and worker up and healthy, calls through the published port, data kept in the
named volumes across a stop and a start, and the telemetry profile's collector receiving spans.
The images no registry here serves are stand-ins under the same names (conftest.STANDIN_IMAGES)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memplane import MemoryClient
from scripts import build_image
from tests.containers.conftest import free_port, podman

COMPOSE = Path(sys.executable).parent / "docker-compose"


def state(container: str, field: str) -> str:
    return podman("inspect", "--format", f"{{{{{field}}}}}", container, check=False).stdout.strip()


class HealthPump:
    """Runs each container's health check every few seconds, as the engine's timers would (podman's
    need systemd, which these machines do not run); compose reads the status the checks leave."""

    def __init__(self, project: str) -> None:
        self._project = project
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HealthPump":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            names = podman("ps", "--filter", f"label=com.docker.compose.project={self._project}",
                           "--format", "{{.Names}}", check=False).stdout.split()
            for name in names:
                podman("healthcheck", "run", name, check=False, timeout=30)


@dataclass
class Stack:
    project: str
    env: dict
    port: int

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run([str(COMPOSE), "-p", self.project, "--profile", "telemetry", *args],
                              cwd=build_image.ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return done

    def container(self, service: str) -> str:
        return f"{self.project}-{service}-1"

    def wait_up(self, seconds: float = 240) -> None:
        """Until migrate exited, server is healthy and worker runs; fails on a migrate that failed."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            migrate = self.container("migrate")
            if state(migrate, ".State.Status") == "exited" and state(migrate, ".State.ExitCode") != "0":
                raise AssertionError(f"migrate failed:\n{podman('logs', migrate, check=False).stderr[-3000:]}")
            if (state(self.container("server"), ".State.Health.Status") == "healthy"
                    and state(self.container("worker"), ".State.Running") == "true"):
                return
            time.sleep(2)
        raise AssertionError("the stack did not come up:\n" + podman(
            "ps", "-a", "--filter", f"label=com.docker.compose.project={self.project}", check=False).stdout)

    def key(self) -> str:
        logs = podman("logs", self.container("server"), check=False)
        return re.search(r"tenant admin key:\s+(mpk_\S+)", logs.stdout + logs.stderr).group(1)


@pytest.fixture(scope="module")
def stack(standins) -> Iterator[Stack]:
    project = f"memplane-check-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as tmp:
        socket = Path(tmp) / "podman.sock"
        service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not socket.exists():
                time.sleep(0.1)
            port = free_port()
            env = {**os.environ, "DOCKER_HOST": f"unix://{socket}", "MEMPLANE_PORT": str(port),
                   "MEMPLANE_TELEMETRY_EXPORTER": "otlp"}
            running = Stack(project, env, port)
            with HealthPump(project):
                running.compose("up", "-d", "--no-build")
                try:
                    running.wait_up()
                    yield running
                finally:
                    running.compose("down", "-v", "-t", "10")
        finally:
            service.terminate()
            service.wait(timeout=30)


def test_migrate_runs_first_then_server_and_worker_come_up(stack):
    migrate, server = stack.container("migrate"), stack.container("server")
    assert state(migrate, ".State.ExitCode") == "0"
    assert state(migrate, ".State.FinishedAt") <= state(server, ".State.StartedAt")
    assert state(stack.container("worker"), ".State.Running") == "true"


def test_a_write_and_a_search_go_through_the_published_port(stack):
    with MemoryClient(f"127.0.0.1:{stack.port}", stack.key()) as client:
        stored = client.write_one("The billing service pages the payments team", kind="fact")
        hits = client.search("Who does billing page?", top_k=3).hits
    assert stored.id in [h.memory.id for h in hits]


def test_a_stop_and_a_start_keep_the_data_in_the_named_volumes(stack):
    key = stack.key()
    with MemoryClient(f"127.0.0.1:{stack.port}", key) as client:
        stored = client.write_one("Quarterly load tests run in the second week", kind="fact")
    stack.compose("stop", "-t", "20")
    stack.compose("start")
    stack.wait_up()
    with MemoryClient(f"127.0.0.1:{stack.port}", key) as client:
        assert client.get_memory(stored.id).content == stored.content


def test_the_telemetry_profile_delivers_the_servers_spans_to_the_collector(stack):
    with MemoryClient(f"127.0.0.1:{stack.port}", stack.key()) as client:
        client.search("anything about deploys", top_k=1)
    collector = stack.container("otel-collector")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = podman("logs", collector, check=False).stdout
        if re.search(r"span \S*MemoryService/Search from \S+", logs):
            return
        time.sleep(2)
    raise AssertionError(f"no Search span reached the collector:\n{logs[-2000:]}")
