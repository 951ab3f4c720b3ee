"""Who is calling and what they may see: the visibility rule of DESIGN §1."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import denied, invalid
from ..model import MemoryRecord, Scope
from ..validation import check_identifier


class Role(str, enum.Enum):
    PLATFORM_ADMIN = "platform_admin"
    TENANT_ADMIN = "tenant_admin"
    WRITER = "writer"
    READER = "reader"
    AGENT = "agent"


WRITING_ROLES = frozenset({Role.TENANT_ADMIN, Role.WRITER, Role.AGENT})


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: exactly one tenant (except platform admins), maybe an agent."""

    key_id: str
    role: Role
    tenant_id: str | None
    agent_id: str | None
    # domain name -> may write
    domains: dict[str, bool] = field(default_factory=dict)

    @property
    def readable_domains(self) -> list[str]:
        return sorted(self.domains)

    def can_read(self, memory: MemoryRecord) -> bool:
        if memory.scope is Scope.GLOBAL:
            return memory.tenant_id == self.tenant_id
        if memory.scope is Scope.DOMAIN:
            return memory.domain in self.domains
        return memory.tenant_id == self.tenant_id and self.agent_id is not None and memory.agent_id == self.agent_id

    def can_write(self, memory: MemoryRecord) -> bool:
        """Global of my tenant, domains granted read-write, private of my agent (and a writing key)."""
        if self.role not in WRITING_ROLES:
            return False
        if memory.scope is Scope.DOMAIN:
            return self.domains.get(memory.domain or "", False)
        if memory.scope is Scope.GLOBAL and self.role is Role.AGENT:
            return False
        return self.can_read(memory)

    def require_tenant(self) -> str:
        if self.tenant_id is None:
            raise denied("TENANT_KEY_REQUIRED", "this call needs a key bound to a tenant")
        return self.tenant_id

    def require_writer(self) -> None:
        self.require_tenant()
        if self.role not in WRITING_ROLES:
            raise denied("READ_ONLY_KEY", "this key may not change memories")

    def check_write_scope(self, scope: Scope, domain: str | None) -> None:
        self.require_writer()
        if scope is Scope.GLOBAL and self.role is Role.AGENT:
            raise denied("GLOBAL_WRITE_DENIED", "agent keys write private or domain memories; global needs a writer key")
        if scope is Scope.PRIVATE and self.agent_id is None:
            raise invalid("AGENT_REQUIRED", "private memories need an agent: use an agent key or x-memplane-agent")
        if scope is Scope.DOMAIN:
            if not domain:
                raise invalid("DOMAIN_REQUIRED", "domain-scoped memories need a domain")
            check_identifier(domain, "domain")  # before the message below repeats it
            if not self.domains.get(domain, False):
                raise denied("DOMAIN_WRITE_DENIED", f"no read-write grant for domain {domain!r}")

    def default_scope(self) -> Scope:
        return Scope.PRIVATE if self.agent_id else Scope.GLOBAL


def caller_to_json(caller: Caller) -> dict:
    return {"key_id": caller.key_id, "role": caller.role.value, "tenant_id": caller.tenant_id,
            "agent_id": caller.agent_id, "domains": caller.domains}


def caller_from_json(d: dict) -> Caller:
    return Caller(d["key_id"], Role(d["role"]), d["tenant_id"], d["agent_id"], dict(d["domains"]))
