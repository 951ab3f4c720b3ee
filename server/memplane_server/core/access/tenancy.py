"""Domain types of tenancy: tenants, their agents and API keys, shared domains, grants and the
audit log, as the admin use cases read and return them."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .caller import Role


@dataclass(frozen=True)
class Tenant:
    id: str
    display_name: str
    max_memories: int  # 0: the server's default cap
    created_at: datetime


@dataclass(frozen=True)
class Agent:
    tenant_id: str
    id: str
    display_name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKey:
    id: str
    tenant_id: str | None  # None for platform admin keys
    agent_id: str | None  # set for agent keys only
    role: Role
    display_name: str
    created_at: datetime
    revoked_at: datetime | None
    # Only authentication compares it; kept out of repr so a logged key shows no digest.
    secret_hash: bytes = field(repr=False)


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    created_at: datetime


@dataclass(frozen=True)
class DomainGrant:
    domain: str
    tenant_id: str
    can_write: bool
    created_at: datetime


@dataclass(frozen=True)
class AuditEvent:
    id: int  # increasing: the audit log pages by it, newest first
    tenant_id: str | None
    actor_key_id: str
    action: str
    target: str
    details: dict[str, Any]
    created_at: datetime
