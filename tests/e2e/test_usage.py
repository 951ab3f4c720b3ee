"""Usage per tenant through a real server: after a scripted load, GetUsage's calls are exactly the
calls made, by method, and its stored memories exactly what PostgreSQL holds; a tenant admin sees
its tenant only; `memplane admin usage --csv` exports the same figures."""
from __future__ import annotations

import asyncio
import csv
import io
import os
import shutil
import subprocess
import sys
import time
import uuid

import asyncpg
import pytest

from memplane import AdminClient, MemoryClient
from memplane.errors import PermissionDeniedError
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def metered(services_urls):
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_usage"))
    data = make_shared_tmpdir("memplane-usage-")
    server = ServerProcess({"MEMPLANE_DATABASE_URL": url, "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/10",
                            "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme",
                            "MEMPLANE_USAGE_FLUSH_SECONDS": "0.5", "MEMPLANE_USAGE_ROLLUP_SECONDS": "1"}).start()
    yield server, url
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


async def stored_in_postgres(url: str, tenant: str) -> set[tuple[str, str, int]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT layer, scope, count(*) FILTER (WHERE status = 'active') AS n FROM memories"
                                " WHERE tenant_id = $1 GROUP BY 1, 2", tenant)
    finally:
        await conn.close()
    return {(r["layer"], r["scope"], r["n"]) for r in rows}


def test_usage_after_a_scripted_load_agrees_with_the_calls_made_and_postgresql(metered):
    server, url = metered
    platform = server.key("platform admin")
    loaded, other = f"load-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    with AdminClient(server.target, platform) as admin:
        loaded_key = admin.create_tenant(loaded, create_admin_key=True).admin_key.secret
        other_key = admin.create_tenant(other, create_admin_key=True).admin_key.secret
    with MemoryClient(server.target, loaded_key) as acme, MemoryClient(server.target, other_key) as them:
        for i in range(5):
            acme.write([{"content": f"note {i}-{j} on the harbour trip", "kind": "event"} for j in range(3)])
        acme.write_one("The user lives in Porto", kind="fact", entity="user", attribute="city", value="Porto")
        for i in range(7):
            acme.search(f"harbour trip {i}")
        acme.get_stats()
        them.write_one("Their own note", kind="event")
    want_calls = {"Write": 6, "Search": 7, "GetStats": 1}
    with AdminClient(server.target, platform) as admin:
        deadline = time.monotonic() + 30
        while True:
            report = admin.get_usage()
            acme_usage = next((t for t in report.tenants if t.tenant_id == loaded), None)
            day = acme_usage.days[0] if acme_usage and acme_usage.days else None
            stored = {(s.layer.name.lower(), s.scope.name.lower(), s.memories) for s in day.stored} if day else set()
            expected = asyncio.run(stored_in_postgres(url, loaded))
            if day and dict(day.calls) == want_calls and stored == expected:
                break
            assert time.monotonic() < deadline, (day, expected)
            time.sleep(0.5)
    assert sum(n for _, _, n in expected) == 16 and day.texts_embedded >= 16 + 7
    assert {t.tenant_id for t in report.tenants} >= {loaded, other}
    theirs = next(t for t in report.tenants if t.tenant_id == other)
    assert dict(theirs.days[0].calls) == {"Write": 1}


def test_a_tenant_admin_reads_its_own_usage_and_not_another_tenants(metered):
    server, _ = metered
    with AdminClient(server.target, server.key("tenant admin")) as admin:
        mine = admin.get_usage()
        assert [t.tenant_id for t in mine.tenants] == ["acme"]
        with pytest.raises(PermissionDeniedError) as denied:
            admin.get_usage("load-elsewhere")
    assert denied.value.reason == "TENANT_ADMIN_REQUIRED"


def test_the_cli_exports_the_usage_as_csv(metered):
    server, _ = metered
    with MemoryClient(server.target, server.key("tenant admin")) as acme:
        acme.write_one("A memory to export usage of", kind="event")
        acme.search("export")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")},
           "MEMPLANE_API_KEY": server.key("platform admin")}
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run([sys.executable, "-m", "memplane_server.cli", "admin", "usage", "--tenant", "acme",
                               "--csv", "--target", server.target], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        rows = list(csv.DictReader(io.StringIO(done.stdout)))
        if {"calls", "texts_embedded", "memories_stored", "bytes_stored"} <= {r["metric"] for r in rows}:
            break
        assert time.monotonic() < deadline, done.stdout
        time.sleep(0.5)
    assert {r["tenant"] for r in rows} == {"acme"}
    assert any(r["metric"] == "calls" and r["name"] == "Search" and int(r["value"]) >= 1 for r in rows)
