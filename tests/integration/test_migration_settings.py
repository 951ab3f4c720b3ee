"""Where migrations run at start (runtime.prepare_schema): through MEMPLANE_MIGRATION_DATABASE_URL
when set, and not at all with MEMPLANE_MIGRATE_ON_START=false, which refuses an unmigrated database."""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

from memplane_server.runtime import prepare_schema
from memplane_server.settings import Settings
from memplane_server.stores.postgres.migrations import migrate
from tests.e2e.conftest import fresh_database

pytestmark = pytest.mark.asyncio(loop_scope="session")
MIGRATOR = "memplane_test_migrator"


@pytest_asyncio.fixture(loop_scope="session")
async def urls(services_urls):
    """A fresh database, as the servers' URL and as the migration URL: a login role of its own
    stands in for the direct connection, and what it creates, it owns."""
    admin = await asyncpg.connect(services_urls[0])
    await admin.execute(f"DROP ROLE IF EXISTS {MIGRATOR}")
    await admin.execute(f"CREATE ROLE {MIGRATOR} LOGIN SUPERUSER PASSWORD 'direct'")
    url = await fresh_database(services_urls[0], "memplane_migration_url")
    parts = urlsplit(url)
    yield url, urlunsplit(parts._replace(netloc=f"{MIGRATOR}:direct@{parts.hostname}:{parts.port}"))
    await admin.execute('DROP DATABASE IF EXISTS "memplane_migration_url"')
    await admin.execute(f"DROP ROLE IF EXISTS {MIGRATOR}")
    await admin.close()


async def test_start_migrates_through_the_migration_url(urls):
    url, migration_url = urls
    await prepare_schema(Settings(database_url=url, migration_database_url=migration_url), url)
    conn = await asyncpg.connect(url)
    try:
        owner = await conn.fetchval("SELECT tableowner FROM pg_tables WHERE tablename = 'schema_migrations'")
    finally:
        await conn.close()
    assert owner == MIGRATOR


async def test_without_migrating_at_start_an_unmigrated_database_is_refused(services_urls):
    url = await fresh_database(services_urls[0], "memplane_unmigrated")
    with pytest.raises(SystemExit, match=r"schema is at version 0, .*MEMPLANE_MIGRATE_ON_START=false: run `memplane migrate`"):
        await prepare_schema(Settings(database_url=url, migrate_on_start=False), url)


async def test_without_migrating_at_start_a_migrated_database_is_used_as_it_is(services_urls):
    url = await fresh_database(services_urls[0], "memplane_premigrated")
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    await prepare_schema(Settings(database_url=url, migrate_on_start=False), url)
