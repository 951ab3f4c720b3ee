"""SQL for tenants, agents, API keys, domains, grants and the audit log."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ...core.access.caller import Role
from ...core.access.tenancy import Agent, ApiKey, AuditEvent, Domain, DomainGrant, Tenant


class DuplicateError(Exception):
    """A row with the same key exists."""


class MissingParentError(Exception):
    """A referenced tenant, agent or domain does not exist."""


async def _insert(pool: asyncpg.Pool, sql: str, *args: Any) -> asyncpg.Record:
    try:
        return await pool.fetchrow(sql, *args)
    except asyncpg.UniqueViolationError as exc:
        raise DuplicateError(str(exc)) from None
    except asyncpg.ForeignKeyViolationError as exc:
        raise MissingParentError(str(exc)) from None


def _tenant(row: asyncpg.Record) -> Tenant:
    return Tenant(id=row["id"], display_name=row["display_name"], max_memories=row["max_memories"],
                  created_at=row["created_at"])


def _agent(row: asyncpg.Record) -> Agent:
    return Agent(tenant_id=row["tenant_id"], id=row["id"], display_name=row["display_name"],
                 created_at=row["created_at"])


def _key(row: asyncpg.Record) -> ApiKey:
    return ApiKey(
        id=row["id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"], role=Role(row["role"]),
        display_name=row["display_name"], created_at=row["created_at"], revoked_at=row["revoked_at"],
        secret_hash=row["secret_hash"],
    )


def _domain(row: asyncpg.Record) -> Domain:
    return Domain(name=row["name"], description=row["description"], created_at=row["created_at"])


def _grant(row: asyncpg.Record) -> DomainGrant:
    return DomainGrant(domain=row["domain"], tenant_id=row["tenant_id"], can_write=row["can_write"],
                       created_at=row["created_at"])


def _event(row: asyncpg.Record) -> AuditEvent:
    return AuditEvent(
        id=row["id"], tenant_id=row["tenant_id"], actor_key_id=row["actor_key_id"], action=row["action"],
        target=row["target"], details=row["details"], created_at=row["created_at"],
    )


# Any fixed 64-bit number (not the migrations' one): every server agrees on it, so only one
# bootstraps an empty database.
_BOOTSTRAP_LOCK_ID = 0x6D706C2D626F6F74


class TenancyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def create_tenant(self, tenant_id: str, display_name: str, max_memories: int) -> Tenant:
        return _tenant(await _insert(
            self.pool,
            "WITH t AS (INSERT INTO tenants (id, display_name, max_memories) VALUES ($1, $2, $3) RETURNING *),"
            " u AS (INSERT INTO tenant_usage (tenant_id) SELECT id FROM t) SELECT * FROM t",
            tenant_id, display_name, max_memories,
        ))

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        row = await self.pool.fetchrow("SELECT * FROM tenants WHERE id = $1", tenant_id)
        return _tenant(row) if row else None

    async def list_tenants(self, after: str | None, limit: int) -> list[Tenant]:
        rows = await self.pool.fetch(
            "SELECT * FROM tenants WHERE $1::text IS NULL OR id > $1 ORDER BY id LIMIT $2", after, limit
        )
        return [_tenant(r) for r in rows]

    @asynccontextmanager
    async def bootstrap_turn(self) -> AsyncIterator[bool]:
        """Yields whether the database has no tenant yet, holding a transaction-level advisory lock
        until the block ends: servers starting together on an empty database bootstrap one after
        another, and the later ones find the first one's tenant (its writes commit on other pooled
        connections before the lock is released)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _BOOTSTRAP_LOCK_ID)
            yield not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM tenants)")

    async def memory_counts(self) -> dict[str, int]:
        """Stored memories of each tenant (the quota's counter)."""
        rows = await self.pool.fetch("SELECT tenant_id, memory_count FROM tenant_usage")
        return {r["tenant_id"]: r["memory_count"] for r in rows}

    async def create_agent(self, tenant_id: str, agent_id: str, display_name: str) -> Agent:
        return _agent(await _insert(
            self.pool,
            "INSERT INTO agents (tenant_id, id, display_name) VALUES ($1, $2, $3) RETURNING *",
            tenant_id, agent_id, display_name,
        ))

    async def agent_exists(self, tenant_id: str, agent_id: str) -> bool:
        return await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM agents WHERE tenant_id = $1 AND id = $2)", tenant_id, agent_id
        )

    async def list_agents(self, tenant_id: str, after: str | None, limit: int) -> list[Agent]:
        rows = await self.pool.fetch(
            "SELECT * FROM agents WHERE tenant_id = $1 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3",
            tenant_id, after, limit,
        )
        return [_agent(r) for r in rows]

    async def create_key(
        self, key_id: str, tenant_id: str | None, agent_id: str | None, role: Role, secret_hash: bytes, name: str
    ) -> ApiKey:
        return _key(await _insert(
            self.pool,
            "INSERT INTO api_keys (id, tenant_id, agent_id, role, secret_hash, display_name)"
            " VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
            key_id, tenant_id, agent_id, role.value, secret_hash, name,
        ))

    async def get_key(self, key_id: str) -> ApiKey | None:
        row = await self.pool.fetchrow("SELECT * FROM api_keys WHERE id = $1", key_id)
        return _key(row) if row else None

    async def list_keys(self, tenant_id: str | None, after: str | None, limit: int) -> list[ApiKey]:
        rows = await self.pool.fetch(
            "SELECT * FROM api_keys WHERE tenant_id IS NOT DISTINCT FROM $1 AND ($2::text IS NULL OR id > $2)"
            " ORDER BY id LIMIT $3",
            tenant_id, after, limit,
        )
        return [_key(r) for r in rows]

    async def revoke_key(self, key_id: str) -> ApiKey | None:
        row = await self.pool.fetchrow(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING *", key_id
        )
        return _key(row) if row else None

    async def grants_of(self, tenant_id: str) -> dict[str, bool]:
        rows = await self.pool.fetch("SELECT domain, can_write FROM domain_grants WHERE tenant_id = $1", tenant_id)
        return {r["domain"]: r["can_write"] for r in rows}

    async def create_domain(self, name: str, description: str) -> Domain:
        return _domain(await _insert(
            self.pool, "INSERT INTO domains (name, description) VALUES ($1, $2) RETURNING *", name, description
        ))

    async def list_domains(self, after: str | None, limit: int) -> list[Domain]:
        rows = await self.pool.fetch(
            "SELECT * FROM domains WHERE $1::text IS NULL OR name > $1 ORDER BY name LIMIT $2", after, limit
        )
        return [_domain(r) for r in rows]

    async def grant(self, domain: str, tenant_id: str, can_write: bool) -> DomainGrant:
        return _grant(await _insert(
            self.pool,
            "INSERT INTO domain_grants (domain, tenant_id, can_write) VALUES ($1, $2, $3)"
            " ON CONFLICT (tenant_id, domain) DO UPDATE SET can_write = EXCLUDED.can_write RETURNING *",
            domain, tenant_id, can_write,
        ))

    async def revoke_grant(self, domain: str, tenant_id: str) -> bool:
        status = await self.pool.execute(
            "DELETE FROM domain_grants WHERE domain = $1 AND tenant_id = $2", domain, tenant_id
        )
        return status.endswith(" 1")

    async def list_grants(self, domain: str | None, tenant_id: str | None) -> list[DomainGrant]:
        rows = await self.pool.fetch(
            "SELECT * FROM domain_grants WHERE ($1::text IS NULL OR domain = $1)"
            " AND ($2::text IS NULL OR tenant_id = $2) ORDER BY domain, tenant_id",
            domain, tenant_id,
        )
        return [_grant(r) for r in rows]

    async def audit(self, tenant_id: str | None, actor: str, action: str, target: str, details: dict) -> None:
        await self.pool.execute(
            "INSERT INTO audit_events (tenant_id, actor_key_id, action, target, details) VALUES ($1, $2, $3, $4, $5)",
            tenant_id, actor, action, target, details,
        )

    async def list_audit(self, tenant_id: str | None, before: int | None, limit: int) -> list[AuditEvent]:
        rows = await self.pool.fetch(
            "SELECT * FROM audit_events WHERE ($1::text IS NULL OR tenant_id = $1)"
            " AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3",
            tenant_id, before, limit,
        )
        return [_event(r) for r in rows]
