"""The embedded PostgreSQL and Redis launchers, run for real."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
import redis

import memplane_server
from memplane_server.embedded import EmbeddedError, EmbeddedPostgres, EmbeddedRedis
from memplane_server.embedded.supervisor import Supervisor

_SERVER_SRC = Path(memplane_server.__file__).resolve().parent.parent

# Starts a service, then dies the way a crashed server does, leaving it running.
_CRASHING_SERVER = """
import os, signal, sys
from pathlib import Path
from memplane_server.embedded import EmbeddedPostgres, EmbeddedRedis
kind = {"postgres": EmbeddedPostgres, "redis": EmbeddedRedis}[sys.argv[1]]
print(kind(Path(sys.argv[2])).start(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not tmp_path: it sits under a 0700 folder the postgres service account cannot enter.
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="memplane-embedded-"))
    path.chmod(0o755)
    yield path
    for pid in _processes_under(path):
        os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not _processes_under(path))
    shutil.rmtree(path)


def test_postgres_supports_pgvector_through_asyncpg(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as postgres:
        assert postgres.dsn is not None
        _sql(postgres.dsn, "CREATE EXTENSION IF NOT EXISTS vector")
        rows = _sql(postgres.dsn, "SELECT '[1,2,3]'::vector <-> '[1,2,5]'::vector AS distance")
    assert rows[0]["distance"] == 2.0


def test_postgres_creates_the_requested_database(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir, database="other") as postgres:
        assert postgres.dsn is not None
        assert urlsplit(postgres.dsn).path == "/other"
        assert _sql(postgres.dsn, "SELECT current_database() AS name")[0]["name"] == "other"


def test_postgres_rejects_a_database_name_pg0_cannot_quote(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="database name"):
        EmbeddedPostgres(data_dir, database='x"; DROP TABLE notes; --')


def test_postgres_data_survives_stop_and_start(data_dir: Path) -> None:
    postgres = EmbeddedPostgres(data_dir)
    first_dsn = postgres.start()
    _sql(first_dsn, "CREATE TABLE notes (body text)")
    _sql(first_dsn, "INSERT INTO notes VALUES ('kept')")
    postgres.stop()
    assert postgres.dsn is None

    with EmbeddedPostgres(data_dir) as restarted:
        assert restarted.dsn is not None
        assert _sql(restarted.dsn, "SELECT body FROM notes")[0]["body"] == "kept"
        assert urlsplit(restarted.dsn).password == urlsplit(first_dsn).password


def test_postgres_start_and_stop_are_idempotent(data_dir: Path) -> None:
    postgres = EmbeddedPostgres(data_dir)
    try:
        assert postgres.start() == postgres.start()
    finally:
        postgres.stop()
    postgres.stop()
    assert postgres.dsn is None


def test_postgres_start_leaves_no_pgpass_in_the_temp_dir(data_dir: Path) -> None:
    system_tmp = Path(tempfile.gettempdir())
    before = set(system_tmp.glob("*/.pgpass"))
    with EmbeddedPostgres(data_dir):
        assert set(system_tmp.glob("*/.pgpass")) == before
        assert list((data_dir / "postgres" / "tmp").iterdir()) == []


def test_secrets_are_readable_by_their_owner_only(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir), EmbeddedRedis(data_dir):
        for path in (data_dir / "postgres" / "password", data_dir / "redis" / "password", data_dir / "redis" / "redis.conf"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        for path in (data_dir / "postgres", data_dir / "redis"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_postgres_listens_on_loopback_only(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as postgres:
        assert postgres.dsn is not None
        assert urlsplit(postgres.dsn).hostname == "127.0.0.1"
        assert _listen_addresses(urlsplit(postgres.dsn).port) == {"127.0.0.1"}


def test_postgres_refuses_a_data_dir_already_in_use(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as running:
        assert running.dsn is not None
        with pytest.raises(EmbeddedError, match="in use"):
            EmbeddedPostgres(data_dir).start()
        assert _sql(running.dsn, "SELECT 1 AS one")[0]["one"] == 1


def test_postgres_starts_after_a_crashed_server_left_it_running(data_dir: Path) -> None:
    old_dsn = _start_in_crashing_server("postgres", data_dir)
    _sql(old_dsn, "CREATE TABLE notes (body text)")
    _sql(old_dsn, "INSERT INTO notes VALUES ('kept')")
    old_postmaster = _postmaster_pid(data_dir)

    with EmbeddedPostgres(data_dir) as postgres:
        assert postgres.dsn is not None
        assert _sql(postgres.dsn, "SELECT body FROM notes")[0]["body"] == "kept"
        assert not _alive(old_postmaster)


def test_postgres_starts_after_the_postmaster_was_killed(data_dir: Path) -> None:
    old_dsn = _start_in_crashing_server("postgres", data_dir)
    _sql(old_dsn, "CREATE TABLE notes (body text)")
    _sql(old_dsn, "INSERT INTO notes VALUES ('kept')")
    postmaster = _postmaster_pid(data_dir)
    os.kill(postmaster, signal.SIGKILL)
    _wait_for(lambda: not _alive(postmaster))

    with EmbeddedPostgres(data_dir) as postgres:
        assert postgres.dsn is not None
        assert _sql(postgres.dsn, "SELECT body FROM notes")[0]["body"] == "kept"


def test_postgres_restarts_on_its_port_after_the_postmaster_was_killed(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as postgres:
        assert postgres.dsn is not None
        _sql(postgres.dsn, "CREATE TABLE notes (body text)")
        _sql(postgres.dsn, "INSERT INTO notes VALUES ('kept')")
        postmaster = _postmaster_pid(data_dir)
        os.kill(postmaster, signal.SIGKILL)
        _wait_for(lambda: not postgres.running())

        dsn = postgres.dsn
        postgres.restart()
        assert postgres.dsn == dsn
        assert postgres.running() and _postmaster_pid(data_dir) != postmaster
        assert _sql(dsn, "SELECT body FROM notes")[0]["body"] == "kept"


def test_redis_restarts_on_its_port_after_it_was_killed(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        with redis.Redis.from_url(embedded.url) as client:
            client.set("note", "kept")
        os.kill(int((data_dir / "redis" / "redis.pid").read_text()), signal.SIGKILL)
        _wait_for(lambda: not embedded.running())

        url = embedded.url
        embedded.restart()
        assert embedded.url == url and embedded.running()
        with redis.Redis.from_url(url) as client:
            assert client.get("note") == b"kept"


def test_supervisor_retries_with_backoff_and_logs_a_cause_once(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memplane_server.embedded.supervisor")
    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        supervisor = Supervisor([embedded])
        supervisor.start()
        try:
            with socket.socket() as squatter:
                # Takes the port of the killed Redis, so that each restart fails the same way.
                os.kill(int((data_dir / "redis" / "redis.pid").read_text()), signal.SIGKILL)
                _wait_for(lambda: not embedded.running())
                squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                squatter.bind(("127.0.0.1", urlsplit(embedded.url).port or 0))
                squatter.listen()
                log = data_dir / "redis" / "redis.log"
                _wait_for(lambda: log.read_text().count("Address already in use") >= 2, timeout=15)
            # Its process is up before it listens: the restart is done when it answers.
            _wait_for(lambda: embedded.running() and _answers(embedded.url), timeout=15)
        finally:
            supervisor.stop()
        with redis.Redis.from_url(embedded.url) as client:
            assert client.ping()
    assert len(_lines(caplog, "died; restarting it")) == 1
    assert len(_lines(caplog, "restarting embedded Redis failed")) == 1
    assert len(_lines(caplog, "embedded Redis restarted")) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands PostgreSQL to the service account")
def test_postgres_explains_a_data_dir_the_service_account_cannot_reach(data_dir: Path) -> None:
    private = data_dir / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(EmbeddedError, match="/var/lib/memplane"):
        EmbeddedPostgres(private / "data").start()


def test_redis_requires_its_password(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        address = urlsplit(embedded.url)
        with redis.Redis(host=address.hostname, port=address.port) as anonymous:
            with pytest.raises(redis.AuthenticationError):
                anonymous.ping()
        with redis.Redis.from_url(embedded.url) as client:
            assert client.ping()


def test_redis_key_survives_stop_and_start(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        with redis.Redis.from_url(embedded.url) as client:
            client.set("note", "kept")
    assert embedded.url is None

    with EmbeddedRedis(data_dir) as restarted:
        assert restarted.url is not None
        with redis.Redis.from_url(restarted.url) as client:
            assert client.get("note") == b"kept"


def test_redis_listens_on_loopback_only(data_dir: Path) -> None:
    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        assert _listen_addresses(urlsplit(embedded.url).port) == {"127.0.0.1"}


def test_redis_starts_after_a_crashed_server_left_it_running(data_dir: Path) -> None:
    old_url = _start_in_crashing_server("redis", data_dir)
    with redis.Redis.from_url(old_url) as client:
        client.set("note", "kept")
    old_pid = int((data_dir / "redis" / "redis.pid").read_text())

    with EmbeddedRedis(data_dir) as embedded:
        assert embedded.url is not None
        assert not _alive(old_pid)
        with redis.Redis.from_url(embedded.url) as client:
            assert client.get("note") == b"kept"


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if text in record.getMessage()]


def _sql(dsn: str, query: str) -> list[Any]:
    async def run() -> list[Any]:
        connection = await asyncpg.connect(dsn)
        try:
            return await connection.fetch(query)
        finally:
            await connection.close()

    return asyncio.run(run())


def _start_in_crashing_server(kind: str, data_dir: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_SERVER_SRC), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-c", _CRASHING_SERVER, kind, str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    return result.stdout.strip()


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postgres" / "data" / "postmaster.pid").read_text().split()[0])


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _answers(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=1) as client:
            return bool(client.ping())
    except redis.ConnectionError:
        return False


def _alive(pid: int) -> bool:
    """Whether `pid` runs; zombies (which nobody may reap in a container) count as dead."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return line[line.rindex(")") + 2] not in "ZX"


def _listen_addresses(port: int | None) -> set[str]:
    """The addresses with a TCP socket listening on `port`."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, local_port = local.split(":")
            if state == "0A" and int(local_port, 16) == port:
                addresses.add(_decode_address(address))
    return addresses


def _decode_address(hex_address: str) -> str:
    # /proc/net/tcp prints each 32-bit word of the address in host (little-endian) order.
    raw = b"".join(bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8))
    if len(raw) == 4:
        return ".".join(str(byte) for byte in raw)
    return raw.hex(":", 2)


def _processes_under(folder: Path) -> list[int]:
    """Live processes working inside `folder`: whatever a failed test left running."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")).is_relative_to(folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
