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
