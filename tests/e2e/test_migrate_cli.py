"""`memplane migrate` applies the schema once and then reports nothing to do."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import memplane_server
from tests.e2e.conftest import fresh_database


def test_migrate_applies_then_reports_current(services_urls):
    url = asyncio.run(fresh_database(services_urls[0], "memplane_migrate"))
    env = {**os.environ, "MEMPLANE_DATABASE_URL": url}

    def migrate() -> str:
        out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "migrate"], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    folder = Path(memplane_server.__file__).parent / "stores" / "postgres" / "migrations"
    assert migrate() == "applied: " + ", ".join(sorted(p.name for p in folder.glob("*.sql")))
    assert migrate() == "applied: nothing, schema is current"


def test_migrate_goes_through_the_migration_url(services_urls):
    url = asyncio.run(fresh_database(services_urls[0], "memplane_migrate_direct"))
    # The servers' URL names a database that does not exist: only the migration URL can work.
    env = {**os.environ, "MEMPLANE_DATABASE_URL": url.rsplit("/", 1)[0] + "/memplane_no_such_database",
           "MEMPLANE_MIGRATION_DATABASE_URL": url}
    out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "migrate"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("applied: 0001_")


def test_a_server_that_may_not_migrate_refuses_an_unmigrated_database(services_urls):
    url = asyncio.run(fresh_database(services_urls[0], "memplane_not_migrated"))
    env = {**os.environ, "MEMPLANE_DATABASE_URL": url, "MEMPLANE_REDIS_URL": services_urls[1],
           "MEMPLANE_MIGRATE_ON_START": "false", "MEMPLANE_LISTEN": "127.0.0.1:0"}
    out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "serve"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "the database schema is at version 0" in out.stderr
    assert "MEMPLANE_MIGRATE_ON_START=false: run `memplane migrate` first" in out.stderr
