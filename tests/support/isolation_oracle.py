"""The isolation property test's oracle: DESIGN §1's visibility rule written out in Python, and
what the test knows of the memories, working items and operations of its world.

    caller (T, A, G) reads m  iff  m.scope=global and m.tenant=T
                                or m.scope=domain and m.domain in G
                                or m.scope=private and m.tenant=T and m.agent=A

It is written apart from the server's `Caller.can_read`/`can_write` on purpose: a rule broken
there must disagree with this one, not follow it.
"""
from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import Code
from memplane_server.core.model import KIND_LAYER, Kind, Layer, MemoryDraft, MemoryFilter, Scope, Status

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


class Target(NamedTuple):
    """A memory id as a caller would send it, and what the oracle knows of it (None: nothing)."""

    id: str
    known: Mem | WorkItem | None


class Op(NamedTuple):
    """Who started an operation: its tenant and agent (None: the tenant, no agent), and its type."""

    tenant: str
    agent: str | None
    type: str


class OperationTarget(NamedTuple):
    """An operation id as a caller would send it, and who started it (None: nobody)."""

    id: str
    owner: Op | None


def sees_operation(caller: Caller, op: Op) -> bool:
    """Its tenant's admins and the callers of the agent that started it (the tenant's when none did)."""
    return op.tenant == caller.tenant_id and (caller.role is Role.TENANT_ADMIN or op.agent == caller.agent_id)


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


@dataclass(frozen=True)
class Names:
    """Short names for failure messages: tenants T0.., domains D0.., in the order the world made them."""

    tenants: list[str]
    domains: list[str]

    def tenant(self, tenant: str | None) -> str:
        return f"T{self.tenants.index(tenant)}" if tenant in self.tenants else str(tenant)

    def domain(self, domain: str | None) -> str:
        return f"D{self.domains.index(domain)}" if domain in self.domains else str(domain)

    def who(self, caller: Caller) -> str:
        grants = ", ".join(f"{self.domain(d)}:{'rw' if w else 'r'}" for d, w in sorted(caller.domains.items()))
        return f"{caller.role.value} of {self.tenant(caller.tenant_id)} agent={caller.agent_id} grants=[{grants}]"

    def describe(self, m: Mem) -> str:
        where = {Scope.GLOBAL: "", Scope.DOMAIN: f" {self.domain(m.domain)}", Scope.PRIVATE: f" agent {m.agent}"}
        return f"{m.scope.value}{where[m.scope]} memory of {self.tenant(m.tenant)} ({m.kind.value}, {m.status.value})"


class Oracle:
    """Every memory, working item and operation of one world, as written; statuses follow the
    database after each call (`refresh`), the attributes that decide visibility never do."""

    def __init__(self, names: Names, seen: Counter) -> None:
        self.names = names
        self.seen = seen  # what the run exercised, printed at the end
        self.mems: dict[uuid.UUID, Mem] = {}
        self.work: dict[str, WorkItem] = {}
        self.ids: list[uuid.UUID | str] = []  # every memory and working item id, in order
        self.ops: dict[uuid.UUID, Op] = {}

    # -- what a caller names

    def readable(self, caller: Caller, known: Mem | WorkItem | None) -> bool:
        return isinstance(known, Mem) and known.exists and can_read(caller, known)

    def target(self, caller: Caller, pool: str, index: int) -> Target:
        """The index-th id of a pool: "visible" ids the caller can read, "invisible" ids it cannot
        (other tenants, other agents, ungranted domains, erased memories, working items), "any"
        id, or an "unknown" or "malformed" one. An empty pool falls back to "any"."""
        if pool == "unknown":
            return Target(str(uuid.uuid4()), None)
        if pool == "malformed":
            return Target("not-a-uuid", None)
        known = [self.mems.get(i) or self.work[i] for i in self.ids]
        if pool != "any":
            wanted = [k for k in known if self.readable(caller, k) == (pool == "visible")]
            known = wanted or known
        k = known[index % len(known)]
        return Target(str(k.id), k)

    def operation_target(self, caller: Caller, pool: str, index: int) -> OperationTarget:
        """As `target`, for operations: "visible" ones are those the caller sees (`sees_operation`)."""
        if pool == "unknown":
            return OperationTarget(str(uuid.uuid4()), None)
        if pool == "malformed":
            return OperationTarget("not-a-uuid", None)
        ops = [i for i, owner in self.ops.items()
               if pool == "any" or sees_operation(caller, owner) == (pool == "visible")]
        op = (ops or list(self.ops))[index % len(ops or self.ops)]
        return OperationTarget(str(op), self.ops[op])

    # -- what a call must return

    def visible(self, caller: Caller) -> list[Mem]:
        return [m for m in self.mems.values() if m.exists and can_read(caller, m)]

    def selected(self, caller: Caller, f: MemoryFilter, statuses: set[Status]) -> list[Mem]:
        return [m for m in self.visible(caller) if matches(m, f, statuses)]

    def forgettable(self, caller: Caller, f: MemoryFilter, *, hard: bool) -> set[uuid.UUID]:
        """What a forget by filter must forget: a soft forget leaves the deleted alone."""
        wanted = statuses_of(f, all_by_default=True)
        return {
            m.id for m in self.mems.values()
            if m.exists and can_change(caller, m) and matches(m, f, wanted) and (hard or m.status is not Status.DELETED)
        }

    def working_items(self, caller: Caller, session: str) -> set[str]:
        mine = (caller.tenant_id, caller.agent_id, session)
        return {w.id for w in self.work.values() if (w.tenant, w.agent, w.session) == mine}

    def operations_of(self, caller: Caller) -> set[uuid.UUID]:
        return {i for i, owner in self.ops.items() if sees_operation(caller, owner)}

    # -- learning from calls

    def register(self, caller: Caller, records, drafts: list[MemoryDraft]) -> set[uuid.UUID]:
        """Adds written memories from what was asked, after checking the records; returns the new ids."""
        if len(records) != len(drafts):
            raise Violation(f"write returned {len(records)} records for {len(drafts)} drafts")
        new = set()
        for record, d in zip(records, drafts):
            scope = d.scope or (Scope.PRIVATE if caller.agent_id else Scope.GLOBAL)
            if d.layer is Layer.WORKING:
                item = WorkItem(str(record.id), caller.tenant_id, caller.agent_id, d.session_id)
                if (record.tenant_id, record.agent_id, record.session_id, record.layer) != (
                        item.tenant, item.agent, item.session, Layer.WORKING):
                    raise Violation(f"working write stored as {record}")
                self.work[item.id] = item
                self.ids.append(item.id)
                continue
            if record.id in self.mems:
                # Written before (the same thing observed again): it must be one the caller may
                # change, in the space the draft was going to.
                m = self.mems[record.id]
                same_space = m.scope is scope and (
                    m.domain == d.domain if scope is Scope.DOMAIN
                    else m.tenant == caller.tenant_id and (scope is Scope.GLOBAL or m.agent == caller.agent_id))
                if not (can_change(caller, m) and same_space):
                    raise Violation(f"write of {d} by {self.names.who(caller)} re-observed a {self.names.describe(m)}")
                self.seen["write re-observed an existing memory"] += 1
                continue
            m = Mem(
                id=record.id, tenant=caller.tenant_id, scope=scope, domain=d.domain if scope is Scope.DOMAIN else None,
                agent=caller.agent_id, kind=d.kind, layer=KIND_LAYER[d.kind], session=d.session_id, user=d.user_id,
                entity=d.entity, tags=tuple(d.tags), confidence=d.confidence,
            )
            stored = (record.tenant_id, record.scope, record.domain, record.agent_id)
            if stored != (m.tenant, m.scope, m.domain, m.agent):
                raise Violation(f"write of {d} by {self.names.who(caller)} stored as {record}")
            self.mems[m.id] = m
            self.ids.append(m.id)
            new.add(m.id)
        return new

    def refresh(self, rows: dict[uuid.UUID, tuple]) -> None:
        """Status and values from the database rows (a snapshot's); the fixed attributes must match."""
        for ident, m in self.mems.items():
            row = rows.get(ident)
            if row is None:
                m.exists = False
                continue
            (_, tenant, scope, domain, agent, kind, layer, session, user, entity, _content, status, confidence,
             tags, _) = row
            if (tenant, scope, domain, agent, kind, layer, session, user, entity) != (
                m.tenant, m.scope.value, m.domain, m.agent, m.kind.value, m.layer.value, m.session, m.user, m.entity
            ):
                raise Violation(f"the fixed attributes of {ident} changed: {row} vs {m}")
            m.status, m.confidence, m.tags = Status(status), float(confidence), tuple(tags)
        unknown = rows.keys() - self.mems.keys()
        if unknown:
            raise Violation(f"rows the oracle does not know: {[rows[i] for i in unknown]}")
