"""Settings: MEMPLANE_* environment variables (settings.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from memplane.tool_settings import DEFAULT_ADDRESS
from memplane_server import settings as settings_module
from memplane_server.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("MEMPLANE_"):
            monkeypatch.delenv(name)


def test_defaults_without_environment():
    s = Settings()
    assert s.listen == "127.0.0.1:50051"
    assert s.database_url is None and s.redis_url is None and s.llm_model is None
    assert s.max_content_bytes == 32 * 1024
    assert s.dedup_threshold == 0.9
    assert s.telemetry_exporter == "none"


def test_the_client_tools_call_the_servers_default_listen_address():
    assert Settings().listen == DEFAULT_ADDRESS


def test_the_client_tools_settings_are_not_the_servers():
    assert not {"address", "api_key", "agent_id", "mcp_listen", "panel_listen"} & set(Settings.model_fields)


def test_reads_memplane_prefixed_variables(monkeypatch):
    monkeypatch.setenv("MEMPLANE_LISTEN", "0.0.0.0:6000")
    monkeypatch.setenv("MEMPLANE_DATABASE_URL", "postgresql://db/memplane")
    monkeypatch.setenv("MEMPLANE_MAX_CONTENT_BYTES", "1024")
    monkeypatch.setenv("MEMPLANE_PENDING_THRESHOLD", "0.5")
    monkeypatch.setenv("MEMPLANE_DATA_DIR", "/srv/memplane")
    monkeypatch.setenv("MEMPLANE_TELEMETRY_EXPORTER", "console")
    s = Settings()
    assert s.listen == "0.0.0.0:6000"
    assert s.database_url == "postgresql://db/memplane"
    assert s.max_content_bytes == 1024
    assert s.pending_threshold == 0.5
    assert s.data_dir == Path("/srv/memplane")
    assert s.telemetry_exporter == "console"


def test_variable_names_are_case_insensitive(monkeypatch):
    monkeypatch.setenv("memplane_workers", "4")
    assert Settings().workers == 4


def test_unprefixed_and_unknown_variables_are_ignored(monkeypatch):
    monkeypatch.setenv("LISTEN", "0.0.0.0:1")
    monkeypatch.setenv("MEMPLANE_NO_SUCH_SETTING", "x")
    assert Settings().listen == "127.0.0.1:50051"


@pytest.mark.parametrize("name,value", [
    ("MEMPLANE_TELEMETRY_EXPORTER", "bogus"),
    ("MEMPLANE_DB_POOL_SIZE", "1"),
    ("MEMPLANE_DEDUP_THRESHOLD", "1.5"),
    ("MEMPLANE_PENDING_THRESHOLD", "-0.1"),
    ("MEMPLANE_LLM_TIMEOUT_SECONDS", "0"),
    ("MEMPLANE_MAX_BATCH", "lots"),
    ("MEMPLANE_WORKERS", "-1"),
])
def test_invalid_values_are_rejected(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as exc:
        Settings()
    assert name.removeprefix("MEMPLANE_").lower() in str(exc.value)


def test_zero_workers_is_allowed(monkeypatch):
    monkeypatch.setenv("MEMPLANE_WORKERS", "0")
    assert Settings().workers == 0


def test_default_data_dir_as_root_is_var_lib(monkeypatch):
    monkeypatch.setattr(settings_module.os, "geteuid", lambda: 0)
    assert Settings().data_dir == Path("/var/lib/memplane")


def test_default_data_dir_as_user_is_under_home(monkeypatch):
    monkeypatch.setattr(settings_module.os, "geteuid", lambda: 1000)
    monkeypatch.setenv("HOME", "/home/alice")
    assert Settings().data_dir == Path("/home/alice/.local/share/memplane")


def test_llm_search_stages_without_a_model_are_refused_at_start():
    with pytest.raises(ValueError, match="MEMPLANE_LLM_MODEL"):
        Settings(search_rerank=True, llm_model=None)


def test_a_migration_url_without_a_database_url_is_refused_at_start():
    with pytest.raises(ValueError, match="MEMPLANE_DATABASE_URL"):
        Settings(migration_database_url="postgresql://direct/db")


def test_migrations_run_at_start_unless_turned_off(monkeypatch):
    assert Settings().migrate_on_start is True
    monkeypatch.setenv("MEMPLANE_MIGRATE_ON_START", "false")
    assert Settings().migrate_on_start is False
