"""A restored database serves nothing until its sweep is done: a restore marks the database before
its sweep of users erased since the backup, and only a sweep that succeeds clears the mark; while
it stands, servers and workers refuse to start and name `memplane keys sweep`. A fresh database has
no mark, and migrations run on a marked one."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import asyncpg
import pytest

from memplane_server.commands import ToolError
from memplane_server.commands.backup import sweep_erased
from memplane_server.runtime import Runtime
from memplane_server.stores.postgres.content.user_keys import mark_sweep_pending, record_store, sweep_pending_since
from memplane_server.stores.postgres.migrations import migrate
from memplane_server.stores.sealing import OPENERS
from memplane_server.stores.user_keys import UserKeyFiles
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import fresh_database
from tests.support.keys import ENCRYPTION_KEYS

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def migrated_database(services_urls) -> str:
    url = await fresh_database(services_urls[0], f"memplane_restore_sweep_{uuid.uuid4().hex[:8]}")
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return url


async def marked_database(services_urls) -> str:
    url = await migrated_database(services_urls)
    conn = await asyncpg.connect(url)
    try:
        await mark_sweep_pending(conn)
    finally:
        await conn.close()
    return url


async def test_a_fresh_database_has_no_pending_sweep(services_urls):
    conn = await asyncpg.connect(await migrated_database(services_urls))
    try:
        assert await sweep_pending_since(conn) is None
    finally:
        await conn.close()


async def test_a_server_refuses_a_database_whose_restore_sweep_is_pending(services_urls, database_settings, settings):
    url = await marked_database(services_urls)
    marked = settings.model_copy(update=database_settings(url))
    runtime = Runtime(marked, marked.database_url, marked.redis_url)
    try:
        with pytest.raises(SystemExit, match="run `memplane keys sweep`, then start servers and workers"):
            await runtime.open()
    finally:
        await runtime.close()


async def test_a_worker_refuses_a_database_whose_restore_sweep_is_pending(services_urls):
    url = await marked_database(services_urls)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")},
           "MEMPLANE_DATABASE_URL": url, "MEMPLANE_REDIS_URL": services_urls[1], "MEMPLANE_WORKERS": "1",
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS}

    worker = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "memplane_server.cli", "worker"],
                                     env=env, capture_output=True, text=True, timeout=120)

    assert worker.returncode == 1, worker.stdout + worker.stderr
    assert "`memplane keys sweep`" in worker.stderr and "Traceback" not in worker.stderr


async def test_a_sweep_clears_the_mark_only_when_it_succeeds(services_urls):
    conn = await asyncpg.connect(await marked_database(services_urls))
    try:
        folder = UserKeyFiles(make_shared_tmpdir("memplane-restore-sweep-keys-"), OPENERS, "")
        await record_store(conn, await asyncio.to_thread(folder.open))
        restored = await sweep_pending_since(conn)

        with pytest.raises(ToolError, match="refuse this database until that sweep is done"):
            await sweep_erased(conn, None)  # as a restore without the keys folder
        assert await sweep_pending_since(conn) == restored

        assert await sweep_erased(conn, folder) is not None
        assert await sweep_pending_since(conn) is None
    finally:
        await conn.close()


async def test_a_sweep_of_a_database_without_users_keys_clears_the_mark(services_urls):
    conn = await asyncpg.connect(await marked_database(services_urls))
    try:
        assert await sweep_erased(conn, None) is None
        assert await sweep_pending_since(conn) is None
    finally:
        await conn.close()


async def test_migrations_run_on_a_marked_database_and_keep_the_mark(services_urls):
    conn = await asyncpg.connect(await marked_database(services_urls))
    try:
        assert await migrate(conn) == []
        assert await sweep_pending_since(conn) is not None
    finally:
        await conn.close()


async def test_keys_sweep_given_another_folder_says_so_and_keeps_the_mark(services_urls):
    url = await marked_database(services_urls)
    conn = await asyncpg.connect(url)
    try:
        await record_store(conn, "the-archives-folder")
    finally:
        await conn.close()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")},
           "MEMPLANE_DATABASE_URL": url, "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": str(make_shared_tmpdir("memplane-restore-sweep-other-"))}

    swept = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "memplane_server.cli", "keys", "sweep"],
                                    env=env, capture_output=True, text=True, timeout=120)

    assert swept.returncode == 1, swept.stdout + swept.stderr
    assert "key folder the-archives-folder" in swept.stderr and "Traceback" not in swept.stderr
    conn = await asyncpg.connect(url)
    try:
        assert await sweep_pending_since(conn) is not None
    finally:
        await conn.close()
