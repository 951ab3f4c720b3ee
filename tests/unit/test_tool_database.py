"""Which database the command-line tools work on."""
from __future__ import annotations

from memplane_server.commands.database import tool_database
from memplane_server.settings import Settings

POOLED = "postgresql://app@pgbouncer:6432/memplane"
DIRECT = "postgresql://owner@postgres:5432/memplane"


def test_backup_and_restore_use_the_direct_migration_url_when_one_is_set():
    settings = Settings(database_url=POOLED, migration_database_url=DIRECT)
    with tool_database(settings, direct=True) as url:
        assert url == DIRECT


def test_export_and_import_use_the_database_url_the_servers_use():
    settings = Settings(database_url=POOLED, migration_database_url=DIRECT)
    with tool_database(settings) as url:
        assert url == POOLED


def test_without_a_migration_url_the_direct_tools_use_the_database_url():
    with tool_database(Settings(database_url=POOLED), direct=True) as url:
        assert url == POOLED
