"""`memplane backup` / `memplane restore`: consistent under write load, restorable into a fresh data dir
or database, refusing a newer schema, keeping the newest seven."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from memplane import AdminClient, MemoryClient
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, embedded_env, fresh_database

CORPUS = [
    "The payments service deploys every Thursday after the freeze lifts",
    "Refunds above 500 euros need a second approver from finance",
    "The on-call rotation hands over on Monday at 09:00 Shanghai time",
    "Grafana dashboards for checkout live in the observability folder",
    "The user prefers short answers with code samples",
    "Database migrations run before the new pods start serving",
    "VPN access is required to reach the staging cluster",
    "The mobile team releases the app every second Tuesday",
]
QUERIES = ["when do payments deploy", "who approves large refunds", "how do I reach staging", "release schedule"]


def memplane(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs a CLI command with exactly the MEMPLANE_* settings given (none from the test's environment)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    return subprocess.run([sys.executable, "-m", "memplane_server.cli", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def tmp_dirs():
    made: list[Path] = []

    def make(prefix: str) -> Path:
        made.append(make_shared_tmpdir(prefix))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cli_data_dir():
    """MEMPLANE_DATA_DIR of the commands run against an external database: where the client tools
    bundled with pg0 are unpacked (once for the module) and backups go by default."""
    path = make_shared_tmpdir("memplane-backup-cli-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


class WriteLoad:
    """A thread writing through the SDK, recording when each write was acknowledged."""

    def __init__(self, target: str, key: str) -> None:
        self.target, self.key = target, key
        self.acked: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WriteLoad":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        with MemoryClient(self.target, self.key) as client:
            i = 0
            while not self._stop.is_set():
                [memory] = client.write([{"content": f"load event {i}: build {i * 7} finished", "kind": "event"}]).memories
                self.acked.append((time.monotonic(), memory.id))
                i += 1

    def acked_before(self, moment: float) -> set[str]:
        return {id_ for at, id_ in self.acked if at < moment}

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} writes acknowledged"
            time.sleep(0.05)


@pytest.mark.slow
def test_backup_under_write_load_restores_into_a_fresh_data_dir(services_urls, tmp_dirs, monkeypatch):
    monkeypatch.delenv("MEMPLANE_DATABASE_URL", raising=False)
    redis = services_urls[1].rsplit("/", 1)[0] + "/3"
    first_dir, second_dir = tmp_dirs("memplane-backup-a-"), tmp_dirs("memplane-backup-b-")
    first = ServerProcess(embedded_env(first_dir, redis)).start()
    try:
        tenant_key = first.key("tenant admin")
        with AdminClient(first.target, first.key("platform admin")) as admin:
            load_key = admin.create_tenant("load", create_admin_key=True).admin_key.secret
        with MemoryClient(first.target, tenant_key) as client:
            client.write([{"content": text, "kind": "fact"} for text in CORPUS])
            expected = {q: [h.memory.id for h in client.search(q, top_k=5).hits] for q in QUERIES}
        with WriteLoad(first.target, load_key) as load:
            load.wait_for(5)
            started = time.monotonic()
            made = memplane({"MEMPLANE_DATA_DIR": str(first_dir)}, "backup")
            finished = time.monotonic()
            load.wait_for(len(load.acked) + 3)
        assert made.returncode == 0, made.stderr
        archive = Path(made.stdout.strip())
        assert archive.parent == first_dir / "backups"
        during = [at for at, _ in load.acked if started <= at <= finished]
        assert during, "no write was acknowledged while the backup ran: it was not taken under load"
    finally:
        first.stop()

    # The archive holds the memories sealed, never the keys that open them: they move apart.
    shutil.copytree(first_dir / "keys", second_dir / "keys")
    restored = memplane({"MEMPLANE_DATA_DIR": str(second_dir)}, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr
    second = ServerProcess(embedded_env(second_dir, redis)).start()
    try:
        with MemoryClient(second.target, load_key) as client:
            present = {m.id for m in client.iter_memories(page_size=500)}
        assert load.acked_before(started) <= present
        with MemoryClient(second.target, tenant_key) as client:
            # The same hits; their order may differ where it rests on statistics the restored server
            # recounts in the background (per-tenant keyword frequencies) rather than on stored rows.
            assert {q: sorted(h.memory.id for h in client.search(q, top_k=5).hits) for q in QUERIES} == {
                q: sorted(ids) for q, ids in expected.items()}
    finally:
        assert second.stop(signal.SIGTERM) == 0


def run(coro):
    return asyncio.run(coro)


async def tables_of(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        return {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    finally:
        await conn.close()


async def tenant_rows(url: str, tenant: str) -> dict[str, list[str]]:
    """Every row of the tenant in every table that holds one, as PostgreSQL renders it."""
    conn = await asyncpg.connect(url)
    try:
        queries = {
            "tenants": "SELECT to_jsonb(t)::text FROM tenants t WHERE id = $1",
            "agents": "SELECT to_jsonb(a)::text FROM agents a WHERE tenant_id = $1 ORDER BY id",
            "api_keys": "SELECT to_jsonb(k)::text FROM api_keys k WHERE tenant_id = $1 ORDER BY id",
            "memories": "SELECT to_jsonb(m)::text FROM memories m WHERE tenant_id = $1 ORDER BY id",
            "memory_history": "SELECT to_jsonb(h)::text FROM memory_history h WHERE tenant_id = $1 ORDER BY seq",
            "tenant_usage": "SELECT to_jsonb(u)::text FROM tenant_usage u WHERE tenant_id = $1",
        }
        return {table: [r[0] for r in await conn.fetch(sql, tenant)] for table, sql in queries.items()}
    finally:
        await conn.close()


def test_backup_of_an_external_database_restores_every_row_into_a_fresh_database(
    server, new_tenant, services_urls, tmp_dirs, cli_data_dir,
):
    tenant, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        client.write([{"content": text, "kind": "fact", "tags": ["t"], "metadata": {"n": i}}
                      for i, text in enumerate(CORPUS)])
        client.write([{"content": "city", "kind": "fact", "entity": "user", "attribute": "city", "value": v}
                      for v in ("Paris", "Lyon")])
    source = server.env["MEMPLANE_DATABASE_URL"]
    backups = tmp_dirs("memplane-backups-")
    made = memplane({"MEMPLANE_DATABASE_URL": source, "MEMPLANE_DATA_DIR": str(cli_data_dir),
                     "MEMPLANE_BACKUP_DIR": str(backups)}, "backup")
    assert made.returncode == 0, made.stderr
    before = run(tenant_rows(source, tenant))

    target = run(fresh_database(services_urls[0], "memplane_restored"))
    restored = memplane({"MEMPLANE_DATABASE_URL": target, "MEMPLANE_DATA_DIR": str(cli_data_dir),
                         "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}, "restore", made.stdout.strip())
    assert restored.returncode == 0, restored.stderr
    assert run(tenant_rows(target, tenant)) == before
    assert len(before["memories"]) == len(CORPUS) + 2


def test_restore_refuses_a_backup_with_a_newer_schema(services_urls, tmp_dirs, cli_data_dir):
    newer = run(fresh_database(services_urls[0], "memplane_newer_schema"))
    assert memplane({"MEMPLANE_DATABASE_URL": newer, "MEMPLANE_DATA_DIR": str(cli_data_dir)}, "migrate").returncode == 0

    async def as_if_migrated_by_a_newer_release() -> int:
        conn = await asyncpg.connect(newer)
        try:
            version = await conn.fetchval("SELECT max(version) + 1 FROM schema_migrations")
            await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, 'future.sql')", version)
            return version
        finally:
            await conn.close()

    version = run(as_if_migrated_by_a_newer_release())
    made = memplane({"MEMPLANE_DATABASE_URL": newer, "MEMPLANE_DATA_DIR": str(cli_data_dir),
                     "MEMPLANE_BACKUP_DIR": str(tmp_dirs("memplane-backups-"))}, "backup")
    assert made.returncode == 0, made.stderr

    target = run(fresh_database(services_urls[0], "memplane_refused"))
    refused = memplane({"MEMPLANE_DATABASE_URL": target, "MEMPLANE_DATA_DIR": str(cli_data_dir)}, "restore",
                       made.stdout.strip())
    assert refused.returncode != 0
    assert f"has schema version {version}, newer than this Memplane knows ({version - 1})" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert run(tables_of(target)) == set(), "a refused restore must leave the target untouched"


def test_backup_keeps_the_newest_seven_in_the_data_dir_by_default(services_urls, cli_data_dir):
    url = run(fresh_database(services_urls[0], "memplane_retention"))
    assert memplane({"MEMPLANE_DATABASE_URL": url, "MEMPLANE_DATA_DIR": str(cli_data_dir)}, "migrate").returncode == 0
    env = {"MEMPLANE_DATABASE_URL": url, "MEMPLANE_DATA_DIR": str(cli_data_dir)}
    made = []
    for _ in range(9):
        out = memplane(env, "backup")
        assert out.returncode == 0, out.stderr
        made.append(Path(out.stdout.strip()))
    assert sorted((cli_data_dir / "backups").iterdir()) == sorted(made[2:])
