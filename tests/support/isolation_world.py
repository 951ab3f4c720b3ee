"""The isolation property test's world: 3-4 fresh tenants with two agents each, two domains with
the drawn grants, callers of every role (direct, and API keys resolved for real, one of them
revoked), then seed memories of every scope, kind and layer and one pending operation per tenant.

Sessions, users, entities and tags come from small pools shared by every tenant, so filters and
ids collide across tenants on purpose.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.core.reflection.reflection import ReflectInput, Task
from memplane_server.services.access.auth import Authenticator
from memplane_server.services.admin import AdminService
from memplane_server.services.write.service import WriteService
from tests.integration.conftest import PLATFORM
from tests.support.keys import register_keys
from tests.support.services import reflect_service

from .isolation_oracle import Names, Op, Oracle

SESSIONS = ("s1", "s2")
USERS = ("u1", "u2")
ENTITIES = ("acme", "bob")
TAGS = ("red", "blue")
AGENTS = ("a1", "a2")
TEXTS = (
    "vault code is 1234",
    "user likes green tea",
    "deploy with make release",
    "retry failed payments twice",
    "customer lives in Berlin",
    "用户喜欢喝茶",
    # Entities (core/write/entities.py) for the entity index and the graph channel.
    "Acme Corp hired Bob Stone in Berlin",
    "Bob Stone moved to Lisbon last week",
)
QUERIES = ("vault code", "what does the user like", "how do I deploy", "payments", "Berlin", "喝茶")

# Callers of every tenant: label -> (role, agent). "@a" means a tenant key acting as agent a.
DIRECT = {
    "writer": (Role.WRITER, None),
    "writer@a1": (Role.WRITER, "a1"),
    "reader": (Role.READER, None),
    "reader@a2": (Role.READER, "a2"),
    "agent-a1": (Role.AGENT, "a1"),
    "agent-a2": (Role.AGENT, "a2"),
    "admin": (Role.TENANT_ADMIN, None),
    "admin@a2": (Role.TENANT_ADMIN, "a2"),
}
# Resolved from real API keys: label -> (key role, key agent, acting agent).
KEYED = {
    "key:writer": (Role.WRITER, None, None),
    "key:agent-a1": (Role.AGENT, "a1", None),
    "key:reader@a1": (Role.READER, None, "a1"),
    "key:admin@a2": (Role.TENANT_ADMIN, None, "a2"),
}
REVOKED = "key:revoked"
CALLER_LABELS = (*DIRECT, *KEYED, REVOKED)


class Key(NamedTuple):
    """An API key of the world: its secret, the agent it acts as, and the caller it must resolve
    to (None for the revoked key, which must not resolve at all)."""

    secret: str
    acting: str | None
    expected: Caller | None


@dataclass
class World:
    tenants: list[str]
    domains: list[str]
    elsewhere: str  # a domain that exists nowhere
    grants: dict[str, dict[str, bool]]  # tenant -> domain -> may write
    direct: dict[tuple[str, str], Caller]  # (tenant, label) -> caller
    keys: dict[tuple[str, str], Key]  # (tenant, label) -> key
    auth: Authenticator  # made after the revocations, so nothing of before is cached

    @property
    def names(self) -> Names:
        return Names(self.tenants, self.domains)

    def tenant(self, index: int) -> str:
        return self.tenants[index % len(self.tenants)]

    def domain(self, index: int) -> str:
        """The index-th domain; past the last, one that exists nowhere."""
        return self.domains[index] if index < len(self.domains) else self.elsewhere

    def draft(self, spec: dict) -> MemoryDraft:
        """A draft from a drawn spec; its scope "working" means the working layer in the caller's default scope."""
        working = spec["scope"] == "working"
        scope = None if spec["scope"] in (None, "working") else Scope(spec["scope"])
        return MemoryDraft(
            scope=scope, domain=self.domain(spec["domain"]) if scope is Scope.DOMAIN else None, agent_id=None,
            layer=Layer.WORKING if working else None, kind=Kind(spec["kind"]), content=TEXTS[spec["text"]],
            entity=spec["entity"], tags=tuple(spec["tags"]), confidence=spec["confidence"], user_id=spec["user"],
            session_id=spec["session"] or (SESSIONS[0] if working else None),
        )

    def filter(self, spec: dict) -> MemoryFilter:
        return MemoryFilter(
            scopes=tuple(Scope(s) for s in spec.get("scopes", ())),
            layers=tuple(Layer(x) for x in spec.get("layers", ())),
            kinds=tuple(Kind(k) for k in spec.get("kinds", ())),
            domains=tuple(self.domain(i) for i in spec.get("domains", ())),
            agent_id=spec.get("agent_id"),
            user_id=spec.get("user_id"),
            session_id=spec.get("session_id"),
            entity=spec.get("entity"),
            tags=tuple(spec.get("tags", ())),
            min_confidence=spec.get("min_confidence"),
            include_pending=spec.get("include_pending", False),
            statuses=tuple(Status(s) for s in spec.get("statuses", ())),
        )

    def batches(self, specs: list) -> dict[tuple[str, str], list[MemoryDraft]]:
        """Drafts of (tenant index, author label, draft spec), each given an author allowed to
        write it (a domain draft goes to a tenant granted read-write, if any); one batch per author."""
        out: dict[tuple[str, str], list[MemoryDraft]] = {}
        for ti, author, spec in specs:
            t = self.tenant(ti)
            spec = dict(spec)
            if spec["scope"] == "domain":
                writers = [x for x in self.tenants if self.grants[x].get(self.domain(spec["domain"]))]
                if writers:
                    t = writers[ti % len(writers)]
                else:
                    spec["scope"] = "global"
            if spec["scope"] in (None, "global"):
                spec["scope"] = "global"
                author = "writer"
            elif spec["scope"] == "private" and author == "writer":
                author = "writer@a1"
            out.setdefault((t, author), []).append(self.draft(spec))
        return out


async def build_world(deps, tenant_count: int, grants: list[str]) -> World:
    """Tenants, agents, domains, grants ("none", "read" or "rw": two per tenant) and callers."""
    admin = AdminService(deps.tenancy)
    tag = uuid.uuid4().hex[:8]
    domains = [f"d{i}-{tag}" for i in range(2)]
    for d in domains:
        await admin.create_domain(PLATFORM, d, "")
    tenants = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(tenant_count)]
    granted: dict[str, dict[str, bool]] = {}
    direct: dict[tuple[str, str], Caller] = {}
    keys: dict[tuple[str, str], Key] = {}
    for i, t in enumerate(tenants):
        await admin.create_tenant(PLATFORM, t, t, 0, False)
        for a in AGENTS:
            await admin.create_agent(PLATFORM, t, a, a)
        granted[t] = {}
        for j, d in enumerate(domains):
            g = grants[i * 2 + j]
            if g != "none":
                await admin.grant_domain(PLATFORM, d, t, g == "rw")
                granted[t][d] = g == "rw"
        for label, (role, agent) in DIRECT.items():
            direct[(t, label)] = Caller(f"{t}-{label}", role, t, agent, dict(granted[t]))
            await register_keys(deps.tenancy.pool, direct[(t, label)])
        for label, (role, key_agent, acting) in KEYED.items():
            row, secret = await admin.create_api_key(PLATFORM, t, key_agent, role, label)
            keys[(t, label)] = Key(secret, acting, Caller(row.id, role, t, key_agent or acting, dict(granted[t])))
        row, secret = await admin.create_api_key(PLATFORM, t, None, Role.WRITER, "revoked")
        await admin.revoke_api_key(PLATFORM, row.id)
        keys[(t, REVOKED)] = Key(secret, None, None)
    return World(tenants, domains, f"nowhere-{tag}", granted, direct, keys, Authenticator(deps.tenancy))


async def seed_world(deps, world: World, oracle: Oracle, specs: list) -> int:
    """Writes the seed memories and one pending operation per tenant (for other tenants to poke
    at) into the world and the oracle; returns the number of service calls made."""
    calls = 0
    for (t, author), drafts in world.batches(specs).items():
        caller = world.direct[(t, author)]
        oracle.register(caller, await WriteService(deps).write(caller, drafts), drafts)
        calls += 1
    for t in world.tenants:
        op = await reflect_service(deps).reflect(
            world.direct[(t, "writer")], ReflectInput(task=Task(task_id="job", request="tidy up"), mode="async")
        )
        oracle.ops[op.id] = Op(t, None, "reflect")
        calls += 1
    return calls
