"""E2E fixtures: a real `memplane serve` process on a socket, used through the SDK."""
from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import make_shared_tmpdir
from tests.support.keys import ENCRYPTION_KEYS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def restartable_port() -> int:
    """A free port below the kernel's ephemeral range, for a server restarted on the same address.
    A port from that range can be taken while the server is down: by bind(0) (its own embedded
    services starting), or by a client retrying in a loop, whose connection to a closed local port
    in the range can be given that same port as its source and connect to itself."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


@dataclass
class ServerProcess:
    """A `memplane serve` (or another long-running command's) child; its output is collected for
    assertions and failure messages. It has started once it prints a line beginning `ready`."""

    env: dict[str, str]
    command: str = "serve"
    ready: str = "memplane listening on"
    target: str = ""
    process: subprocess.Popen | None = None
    lines: list[str] = field(default_factory=list)

    def start(self, timeout: float = 90, *, port: int | None = None) -> "ServerProcess":
        self.lines = []
        self.target = f"127.0.0.1:{port or free_port()}"
        env = {**os.environ, **self.env, "MEMPLANE_LISTEN": self.target}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memplane_server.cli", self.command], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not any(line.startswith(self.ready) for line in self.lines):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start:\n" + "".join(self.lines[-40:]))
            time.sleep(0.05)
        time.sleep(0.2)  # the bootstrap lines follow the listening line
        return self

    def _pump(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def key(self, label: str) -> str:
        for line in self.lines:
            match = re.match(rf"\s*{label} key:\s+(\S+)", line)
            if match:
                return match.group(1)
        raise LookupError(f"no {label} key printed:\n" + "".join(self.lines))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


async def fresh_database(dsn: str, name: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return dsn.rsplit("/", 1)[0] + "/" + name


def embedded_env(data: Path, redis_url: str) -> dict[str, str]:
    """A server on its own embedded PostgreSQL in `data`, beside the session's Redis (a database of its own)."""
    return {"MEMPLANE_DATA_DIR": str(data), "MEMPLANE_REDIS_URL": redis_url, "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2"}


def server_env(database_settings: dict, redis_url: str, data: Path) -> dict[str, str]:
    """A test server's environment: its own database and Redis database, data dir and keys."""
    return {
        **{f"MEMPLANE_{name.upper()}": str(value).lower() if isinstance(value, bool) else value
           for name, value in database_settings.items()},
        "MEMPLANE_REDIS_URL": redis_url,
        "MEMPLANE_DATA_DIR": str(data),
        "MEMPLANE_BOOTSTRAP_TENANT": "acme",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2",
        "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
        "MEMPLANE_USER_KEYS_DIR": str(data / "keys" / "users"),
    }


@pytest.fixture(scope="session")
def server(services_urls, database_settings, redis_url_for):
    database_url, redis_url = services_urls
    e2e_url = asyncio.run(fresh_database(database_url, "memplane_e2e"))
    data = make_shared_tmpdir("memplane-e2e-")
    proc = ServerProcess(server_env(database_settings(e2e_url), redis_url_for(redis_url.rsplit("/", 1)[0] + "/1"),
                                    data)).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def platform_key(server) -> str:
    return server.key("platform admin")


@pytest.fixture(scope="session")
def tenant_key(server) -> str:
    return server.key("tenant admin")


@pytest.fixture
def new_tenant(server, platform_key):
    """A fresh tenant with agents a1 and a2, returning (tenant id, tenant admin secret)."""
    import uuid

    from memplane import AdminClient

    def make() -> tuple[str, str]:
        tenant = f"e2e-{uuid.uuid4().hex[:8]}"
        with AdminClient(server.target, platform_key) as admin:
            created = admin.create_tenant(tenant, create_admin_key=True)
            for agent in ("a1", "a2"):
                admin.create_agent(tenant, agent)
        return tenant, created.admin_key.secret

    return make


@pytest.fixture(scope="session")
def panel_server(services_urls):
    """A server of the panel tests' own, without background work: a summary made stale stays STALE
    (no job rebuilds it) for as long as a test looks at it."""
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_panel"))
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": url,
        "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/2",
        "MEMPLANE_DATA_DIR": str(make_shared_tmpdir("memplane-panel-")),
        "MEMPLANE_BOOTSTRAP_TENANT": "panel-admin",
        "MEMPLANE_BACKGROUND_WORK": "none",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2",
    }).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def panel(panel_server, tmp_path_factory):
    """`memplane panel` calling panel_server, on a free port; yields its base URL."""
    port = free_port()
    env = {**os.environ, "MEMPLANE_ADDRESS": panel_server.target, "MEMPLANE_PANEL_LISTEN": f"127.0.0.1:{port}"}
    # A file, not a pipe: nobody reads the log while tests run, and a full pipe would block the panel.
    log = tmp_path_factory.mktemp("panel") / "panel.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "memplane_server.cli", "panel"], env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError("memplane panel did not start:\n" + log.read_text()) from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    assert process.wait(30) in (0, -signal.SIGTERM), log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="session")
def panel_tenant(panel_server):
    """A fresh tenant on panel_server with agents a1 and a2: (tenant id, writer key, reader key)."""
    import uuid

    from memplane import AdminClient

    def make() -> tuple[str, str, str]:
        tenant = f"panel-{uuid.uuid4().hex[:8]}"
        with AdminClient(panel_server.target, panel_server.key("platform admin")) as admin:
            admin.create_tenant(tenant)
            for agent in ("a1", "a2"):
                admin.create_agent(tenant, agent)
            writer = admin.create_api_key(tenant_id=tenant, role="writer").secret
            reader = admin.create_api_key(tenant_id=tenant, role="reader").secret
        return tenant, writer, reader

    return make
