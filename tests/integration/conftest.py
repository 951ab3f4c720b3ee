"""Integration fixtures: the real stores and use cases over the session's embedded services."""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest
import pytest_asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.runtime import Runtime
from memplane_server.services.admin import AdminService
from memplane_server.services.deps import Deps
from memplane_server.settings import Settings
from tests.conftest import make_shared_tmpdir
from tests.support.keys import ENCRYPTION_KEYS, register_keys

PLATFORM = Caller(key_id="test-platform", role=Role.PLATFORM_ADMIN, tenant_id=None, agent_id=None)


@pytest.fixture(scope="session")
def settings(services_urls, database_settings, redis_url_for) -> Settings:
    database_url, redis_url = services_urls
    # With users' keys kept, as the embedded default does: memories about a user are sealed under
    # that user's key throughout the suite.
    return Settings(**database_settings(database_url), redis_url=redis_url_for(redis_url), bootstrap_tenant="",
                    workers=0, encryption_keys=ENCRYPTION_KEYS, user_keys_dir=make_shared_tmpdir("memplane-user-keys-"),
                    key_cache_seconds=0.5)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def runtime(settings):
    rt = Runtime(settings, settings.database_url, settings.redis_url)
    await rt.open()
    yield rt
    await rt.close()


@pytest.fixture(scope="session")
def deps(runtime) -> Deps:
    return runtime.deps


@dataclass
class TenantWorld:
    """A fresh tenant with two agents and callers for every role, unique per test."""

    tenant_id: str
    writer: Caller
    reader: Caller
    agent1: Caller
    agent2: Caller


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def make_tenant(deps):
    """A factory of fresh tenants; it keeps no state, so module fixtures may build their worlds with it."""
    admin = AdminService(deps.tenancy)

    async def make(domains: dict[str, bool] | None = None) -> TenantWorld:
        tenant = f"t-{uuid.uuid4().hex[:10]}"
        await admin.create_tenant(PLATFORM, tenant, tenant, 0, False)
        for agent in ("a1", "a2"):
            await admin.create_agent(PLATFORM, tenant, agent, agent)
        grants = domains or {}
        for domain, can_write in grants.items():
            if await deps.tenancy.pool.fetchval("SELECT 1 FROM domains WHERE name = $1", domain) is None:
                await admin.create_domain(PLATFORM, domain, "")
            await admin.grant_domain(PLATFORM, domain, tenant, can_write)

        def caller(role: Role, agent: str | None) -> Caller:
            return Caller(key_id=f"{tenant}-{role.value}", role=role, tenant_id=tenant, agent_id=agent, domains=dict(grants))

        world = TenantWorld(tenant, caller(Role.WRITER, None), caller(Role.READER, None),
                            caller(Role.AGENT, "a1"), caller(Role.AGENT, "a2"))
        await register_keys(deps.tenancy.pool, world.writer, world.reader, world.agent1, world.agent2)
        return world

    return make


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def session_loop(runtime):
    """The session's event loop, for synchronous tests (hypothesis' state machines) that drive it."""
    return asyncio.get_running_loop()
