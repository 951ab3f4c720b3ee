"""The image, compose file and chart run for real under podman (scripts/install_container_runtime.py
installs it; `make deploy-test` runs these). Where podman cannot run containers, every test here is
skipped and says why, so a run without them is visibly partial."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from scripts import build_image

RUNTIME_MISSING: str | None = None
if shutil.which("podman") is None:
    RUNTIME_MISSING = "podman is not installed (make deploy-test installs it: scripts/install_container_runtime.py)"
elif os.geteuid() != 0:
    RUNTIME_MISSING = "podman runs containers here only as root (scripts/install_container_runtime.py)"


def pytest_collection_modifyitems(items):
    if RUNTIME_MISSING is not None:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"container checks skipped: {RUNTIME_MISSING}"))


def podman(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def image(request) -> str:
    """The project's image, built from the Dockerfile on a base made here (scripts/build_image.py);
    its size is written to the run's report."""
    if not build_image.exists(build_image.BASE):
        build_image.make_base(build_image.BASE)
    size = build_image.build(build_image.TAG, build_image.BASE)
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past the capture of the fixture's output
            reporter.write_line(f"\nimage {build_image.TAG} built on {build_image.BASE}: {size / 1e6:.0f} MB")
    return build_image.TAG


@dataclass
class Started:
    name: str

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def exec(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *command, check=check)

    def wait_for_log(self, pattern: str, seconds: float = 180) -> re.Match:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if found := re.search(pattern, self.logs()):
                return found
            if podman("inspect", "--format", "{{.State.Running}}", self.name, check=False).stdout.strip() != "true":
                raise AssertionError(f"{self.name} exited:\n{self.logs()[-4000:]}")
            time.sleep(0.5)
        raise AssertionError(f"{self.name} never logged {pattern!r}:\n{self.logs()[-4000:]}")

    def wait_healthy(self, seconds: float = 120) -> None:
        """Runs the image's HEALTHCHECK until it passes, as the engine's timer would (podman's timers
        need systemd, which these machines do not run)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if podman("healthcheck", "run", self.name, check=False, timeout=30).returncode == 0:
                return
            time.sleep(1)
        raise AssertionError(f"{self.name} never turned healthy:\n{self.logs()[-4000:]}")


@contextmanager
def container(image: str, *args: str, options: tuple[str, ...] = ()) -> Iterator[Started]:
    """A detached container of the image (options before it, the command's arguments after), removed
    after with its anonymous volumes."""
    name = f"memplane-test-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--name", name, *options, image, *args)
    try:
        yield Started(name)
    finally:
        podman("rm", "-f", "-v", "-t", "10", name, check=False)


def serving(started: Started) -> tuple[str, str]:
    """Waits until the server listens and answers its health check; its address and tenant admin key."""
    address = started.wait_for_log(r"memplane listening on (\S+)").group(1)
    key = started.wait_for_log(r"tenant admin key:\s+(mpk_\S+)").group(1)
    started.wait_healthy()
    return address, key


STANDINS = build_image.ROOT / "tests" / "containers" / "standins"
# The images docker-compose.yml names that no registry here serves, by the stand-in that replaces
# each under the same name (tests/containers/standins): the file users run stays as it is.
STANDIN_IMAGES = {
    "postgres": "docker.io/pgvector/pgvector:0.8.1-pg17",
    "redis": "docker.io/library/redis:7.4-alpine",
    "collector": "docker.io/otel/opentelemetry-collector-contrib:0.139.0",
    "prometheus": "docker.io/prom/prometheus:v3.7.3",
}


@pytest.fixture(scope="session")
def standins(image) -> dict[str, str]:
    """The stand-ins, built on the project's image (it holds PostgreSQL with pgvector, Redis, Python
    and the OpenTelemetry protocol already)."""
    for name, tag in STANDIN_IMAGES.items():
        podman("build", "--format", "docker", "--build-arg", f"MEMPLANE_IMAGE={image}", "-f",
               str(STANDINS / f"Containerfile.{name}"), "-t", tag, str(STANDINS))
    return STANDIN_IMAGES
