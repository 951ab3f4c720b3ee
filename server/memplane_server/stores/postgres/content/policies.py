"""SQL of content policies (migration 0034) and of the dry-run scan that reads a tenant's stored
texts to report what a policy would change.

A tenant's policy is read and written in the tenant's own session (row-level security). Domain
policies are the platform's, as domains are. The scan reads the memories the tenant wrote, every
agent's and the domain ones, as the owner with the tenant named in the statement: a tenant-wide
reach that row-level security cannot express (as forget/lifecycle.py).
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from ....core.access.caller import Caller, Role
from ...sealing import Texts, open_texts
from ..session import caller_session
from ..tenancy import MissingParentError


@dataclass(frozen=True)
class StoredRules:
    rules: dict[str, str]
    updated_at: datetime
    updated_by: str


@dataclass(frozen=True)
class StoredText:
    """What a memory stores that a detector reads."""

    id: uuid.UUID
    tenant_id: str
    domain: str | None
    content: str
    context: str
    value: str | None
    metadata: dict[str, Any]
    tags: tuple[str, ...]


def _stored(row: asyncpg.Record) -> StoredRules:
    return StoredRules(row["rules"], row["updated_at"], row["updated_by"])


def _tenant_session(pool: asyncpg.Pool, tenant_id: str):
    return caller_session(pool, Caller(key_id="content-policy", role=Role.READER, tenant_id=tenant_id, agent_id=None))


class ContentPolicyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def tenant_rules(self, tenant_id: str) -> StoredRules | None:
        async with _tenant_session(self.pool, tenant_id) as conn:
            row = await conn.fetchrow(
                "SELECT rules, updated_at, updated_by FROM content_policies WHERE tenant_id = $1", tenant_id)
        return _stored(row) if row else None

    async def set_tenant_rules(self, tenant_id: str, rules: dict[str, str], by: str) -> StoredRules:
        async with _tenant_session(self.pool, tenant_id) as conn:
            row = await conn.fetchrow(
                "INSERT INTO content_policies (tenant_id, rules, updated_by) VALUES ($1, $2, $3)"
                " ON CONFLICT (tenant_id) DO UPDATE SET rules = EXCLUDED.rules, updated_at = now(),"
                " updated_by = EXCLUDED.updated_by RETURNING rules, updated_at, updated_by",
                tenant_id, rules, by)
        return _stored(row)

    async def domain_rules(self, domains: Sequence[str]) -> dict[str, StoredRules]:
        rows = await self.pool.fetch(
            "SELECT domain, rules, updated_at, updated_by FROM domain_content_policies WHERE domain = ANY ($1::text[])",
            list(domains))
        return {r["domain"]: _stored(r) for r in rows}

    async def set_domain_rules(self, domain: str, rules: dict[str, str], by: str) -> StoredRules:
        """MissingParentError when no such domain exists."""
        try:
            row = await self.pool.fetchrow(
                "INSERT INTO domain_content_policies (domain, rules, updated_by) VALUES ($1, $2, $3)"
                " ON CONFLICT (domain) DO UPDATE SET rules = EXCLUDED.rules, updated_at = now(),"
                " updated_by = EXCLUDED.updated_by RETURNING rules, updated_at, updated_by",
                domain, rules, by)
        except asyncpg.ForeignKeyViolationError:
            raise MissingParentError(domain) from None
        return _stored(row)

    async def texts(self, tenant_id: str | None, domain: str | None, after: uuid.UUID | None,
                    limit: int) -> list[StoredText]:
        """The next `limit` memories kept (forgotten ones excluded), by id: the tenant's, or with a
        domain only that domain's (every member tenant's without a tenant). One of the two is given."""
        assert tenant_id or domain
        rows = await self.pool.fetch(
            """
            SELECT id, tenant_id, domain, content, context, value, metadata, tags, sealed_key FROM memories
            WHERE ($1::text IS NULL OR tenant_id = $1) AND status <> 'deleted' AND ($2::uuid IS NULL OR id > $2)
              AND ($4::text IS NULL OR domain = $4)
            ORDER BY id LIMIT $3
            """,
            tenant_id, after, limit, domain)
        out = []
        for r in rows:
            texts = open_texts(r["sealed_key"], r["tenant_id"],
                               Texts(r["content"], r["context"] or "", r["value"], r["metadata"] or {}))
            out.append(StoredText(r["id"], r["tenant_id"], r["domain"], texts.content, texts.context, texts.value,
                                  texts.metadata, tuple(r["tags"] or ())))
        return out
