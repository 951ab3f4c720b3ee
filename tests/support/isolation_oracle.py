"""The isolation property test's oracle: DESIGN §1's visibility rule written out in Python.

    caller (T, A, G) reads m  iff  m.scope=global and m.tenant=T
                                or m.scope=domain and m.domain in G
                                or m.scope=private and m.tenant=T and m.agent=A

It is written apart from the server's `Caller.can_read`/`can_write` on purpose: a rule broken
there must disagree with this one, not follow it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from memplane_server.core.caller import Caller, Role
from memplane_server.core.errors import Code
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope, Status

WRITING_ROLES = {Role.WRITER, Role.AGENT, Role.TENANT_ADMIN}


class Violation(AssertionError):
    """The isolation property does not hold (or the oracle and the service disagree)."""


@dataclass
class Mem:
    """What the oracle knows of a persistent memory: fixed at write time, status refreshed."""

    id: uuid.UUID
    tenant: str
    scope: Scope
    domain: str | None
    agent: str | None
    kind: Kind
    layer: Layer
    session: str | None
    user: str | None
    entity: str | None
    tags: tuple[str, ...] = ()
    exists: bool = True
    status: Status = Status.ACTIVE
    confidence: float = 1.0


@dataclass(frozen=True)
class WorkItem:
    id: str
    tenant: str
    agent: str | None
    session: str


def can_read(caller: Caller, m: Mem) -> bool:
    if m.scope is Scope.GLOBAL:
        return m.tenant == caller.tenant_id
    if m.scope is Scope.DOMAIN:
        return m.domain in caller.domains
    return m.tenant == caller.tenant_id and caller.agent_id is not None and m.agent == caller.agent_id


def can_change(caller: Caller, m: Mem) -> bool:
    """DESIGN §1: global needs a writer key of the tenant, domain a read-write grant, private the owning agent."""
    if caller.role not in WRITING_ROLES:
        return False
    if m.scope is Scope.DOMAIN:
        return caller.domains.get(m.domain or "", False)
    if m.scope is Scope.GLOBAL and caller.role is Role.AGENT:
        return False
    return can_read(caller, m)


def write_problem(caller: Caller, d: MemoryDraft) -> Code | None:
    """Why a draft must be refused to this caller, or None."""
    if caller.role not in WRITING_ROLES:
        return Code.PERMISSION_DENIED
    scope = d.scope or (Scope.PRIVATE if caller.agent_id else Scope.GLOBAL)
    if scope is Scope.GLOBAL and caller.role is Role.AGENT:
        return Code.PERMISSION_DENIED
    if scope is Scope.PRIVATE and caller.agent_id is None:
        return Code.INVALID_ARGUMENT
    if scope is Scope.DOMAIN and not caller.domains.get(d.domain or "", False):
        return Code.PERMISSION_DENIED
    return None


def statuses_of(f: MemoryFilter, *, all_by_default: bool) -> set[Status]:
    """The statuses a filter selects; reads default to active (and pending), stats and forgets to all."""
    if f.statuses:
        return set(f.statuses)
    if all_by_default:
        return set(Status)
    return {Status.ACTIVE, Status.PENDING} if f.include_pending else {Status.ACTIVE}


def matches(m: Mem, f: MemoryFilter, statuses: set[Status]) -> bool:
    if f.scopes and m.scope not in f.scopes:
        return False
    if f.layers and m.layer not in [layer for layer in f.layers if layer is not Layer.WORKING]:
        return False
    if f.kinds and m.kind not in f.kinds:
        return False
    if f.domains and m.domain not in f.domains:
        return False
    for attr, wanted in (("agent", f.agent_id), ("user", f.user_id), ("session", f.session_id), ("entity", f.entity)):
        if wanted and getattr(m, attr) != wanted:
            return False
    if f.tags and not set(f.tags) <= set(m.tags):
        return False
    if f.min_confidence and not m.confidence >= f.min_confidence:
        return False
    return m.status in statuses
