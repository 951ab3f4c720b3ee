"""API key rows for the callers tests make by hand: a job runs only while the key that queued it
exists and is not revoked (services/auth.reload_caller), as it would for a real key."""
from __future__ import annotations

from memplane_server.core.access.caller import Caller, Role


async def register_keys(pool, *callers: Caller) -> None:
    for c in callers:
        await pool.execute(
            "INSERT INTO api_keys (id, tenant_id, agent_id, role, secret_hash) VALUES ($1, $2, $3, $4, $5)"
            " ON CONFLICT (id) DO NOTHING",
            c.key_id, c.tenant_id, c.agent_id if c.role is Role.AGENT else None, c.role.value, b"\x00" * 32)


# The key-encryption key the shared test servers seal memories under: the suites run with
# encryption at rest on, as a deployment with a KEK does. Not a secret: test data only.
ENCRYPTION_KEYS = "test-1:5OKLWW0XPlVgZHPiTLS9+mZaHfSm0RRcuBGj+VsHIbM="
