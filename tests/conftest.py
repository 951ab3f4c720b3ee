"""Shared test infrastructure: one embedded PostgreSQL and Redis per test session.

They are the same launchers `memplane serve` uses, so the tests exercise the real embedded
default, root handling included.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# Machines running the tests are shared and noisy: a slow example is not a failure (speed is what
# the benchmarks measure), so hypothesis's 200 ms per-example deadline is off.
hypothesis_settings.register_profile("memplane", deadline=None)
hypothesis_settings.load_profile("memplane")

# Set before anything imports the embedder or litellm.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def make_shared_tmpdir(prefix: str) -> Path:
    """A temp dir the unprivileged PostgreSQL user can traverse (pytest's tmp_path is 0700),
    removed when the test run ends (each run left one per server it started)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@pytest.fixture(scope="session")
def services_urls():
    from memplane_server.embedded import EmbeddedPostgres, EmbeddedRedis
    from memplane_server.embedded.guardian import Guardian

    data = make_shared_tmpdir("memplane-test-")
    postgres, redis = EmbeddedPostgres(data), EmbeddedRedis(data)
    # As the server guards its own: a test run killed (a CI timeout's SIGTERM skips this
    # fixture's finally) must not leave its PostgreSQL and Redis running on the machine.
    guardian = Guardian(data, [postgres, redis])
    guardian.start()
    try:
        database_url = postgres.start()
        redis_url = redis.start()
        yield database_url, redis_url
    finally:
        redis.stop()
        postgres.stop()
        guardian.stop()
        shutil.rmtree(data, ignore_errors=True)


# Set to run the product's database traffic through a real PgBouncer in transaction mode
# (tests/support/pgbouncer.py; `make deploy-test` runs the suites that matter so).
THROUGH_PGBOUNCER = "MEMPLANE_TEST_PGBOUNCER"


@pytest.fixture(scope="session")
def database_settings(services_urls):
    """Maps a direct URL of a test database to the database settings the product is given: the URL
    itself, or (THROUGH_PGBOUNCER set) the same database through PgBouncer, pooled, with the direct
    URL for migrations and LISTEN. Tests' own helpers keep the direct URL."""
    if not os.environ.get(THROUGH_PGBOUNCER):
        yield lambda url: {"database_url": url}
        return
    from urllib.parse import urlsplit, urlunsplit

    from tests.support.pgbouncer import PgBouncer

    bouncer = PgBouncer(make_shared_tmpdir("memplane-pgbouncer-"), services_urls[0])
    through = urlsplit(bouncer.start())

    def settings(url: str) -> dict:
        pooled = urlunsplit(urlsplit(url)._replace(netloc=through.netloc))
        return {"database_url": pooled, "database_pooled": True, "migration_database_url": url}

    yield settings
    bouncer.stop()


# Set to give the product a real 3-master Redis Cluster instead of one node
# (tests/support/redis_cluster.py; `make deploy-test` runs the Redis suites so).
ON_REDIS_CLUSTER = "MEMPLANE_TEST_REDIS_CLUSTER"


@pytest.fixture(scope="session")
def redis_url_for():
    """Maps a test Redis URL to the one the product is given: itself, or (ON_REDIS_CLUSTER set) the
    session's cluster, which has one database: the keys of tests sharing it are apart by tenant."""
    if not os.environ.get(ON_REDIS_CLUSTER):
        yield lambda url: url
        return
    from tests.support.redis_cluster import LocalRedisCluster

    cluster = LocalRedisCluster(make_shared_tmpdir("memplane-redis-cluster-")).start()
    yield lambda url: cluster.url
    cluster.stop()


@pytest.fixture
def fake_llm():
    """A local OpenAI-compatible server standing in for an LLM provider (tests/support/fake_llm.py)."""
    from tests.support.fake_llm import FakeLLM

    fake = FakeLLM().start()
    yield fake
    fake.stop()
