"""The gRPC server in this test process, over the session's stores, for SDK calls that go through
every interceptor (authentication, idempotency cache) without a `memplane serve` process."""
from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass

from memplane_server.api.drain import Drain
from memplane_server.api.server import build_server
from memplane_server.core.access.caller import Caller, Role
from memplane_server.runtime import Runtime, build_services
from memplane_server.services.deps import Deps
from memplane_server.services.registry import Services

PLATFORM = Caller(key_id="test-platform", role=Role.PLATFORM_ADMIN, tenant_id=None, agent_id=None)


@dataclass
class Served:
    services: Services
    address: str

    async def tenant(self, agents: tuple[str, ...] = ("a1", "a2"), domains: dict[str, bool] | None = None) -> tuple[str, dict[str, str]]:
        """A fresh tenant with agents and keys: {"admin", "writer", "reader", <agent>...} -> secret."""
        admin = self.services.admin
        tenant_id = f"t-{uuid.uuid4().hex[:10]}"
        _, _, admin_secret = await admin.create_tenant(PLATFORM, tenant_id, tenant_id, 0, True)
        keys = {"admin": admin_secret}
        for agent in agents:
            await admin.create_agent(PLATFORM, tenant_id, agent, agent)
            keys[agent] = (await admin.create_api_key(PLATFORM, tenant_id, agent, Role.AGENT, agent))[1]
        for role in (Role.WRITER, Role.READER):
            keys[role.value] = (await admin.create_api_key(PLATFORM, tenant_id, None, role, role.value))[1]
        for domain, can_write in (domains or {}).items():
            if await admin.store.pool.fetchval("SELECT 1 FROM domains WHERE name = $1", domain) is None:
                await admin.create_domain(PLATFORM, domain, "")
            await admin.grant_domain(PLATFORM, domain, tenant_id, can_write)
        return tenant_id, keys


@asynccontextmanager
async def serving(deps: Deps, runtime: Runtime):
    services = build_services(deps, runtime.pool, runtime.redis_client)
    server, _ = build_server(services, Drain())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield Served(services, f"127.0.0.1:{port}")
    finally:
        await server.stop(0)
