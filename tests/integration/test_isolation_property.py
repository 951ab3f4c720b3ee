"""Property: no use case reads or changes memory outside the caller's visibility (DESIGN §1).

A hypothesis state machine builds a world of 3-4 tenants (two agents each), two domains with
random grants, callers of every role (direct and resolved from real API keys, one of them
revoked) and memories of every scope, kind and layer, with session, user and entity values
shared across tenants on purpose. It then drives random calls of every use case that reads or
changes memory, each with a random caller and targets taken from *any* tenant, over the real
services, PostgreSQL and Redis, and checks every result against a Python oracle of the rule:

    caller (T, A, G) reads m  iff  m.scope=global and m.tenant=T
                                or m.scope=domain and m.domain in G
                                or m.scope=private and m.tenant=T and m.agent=A

(working memory: only the same tenant, agent-or-none and session). After every call:
  1. everything returned is visible to the caller (and lists, stats, working reads, forgets
     and operation lists are exactly what the oracle expects);
  2. stats never count more than the caller sees (here: exactly what it sees);
  3. nothing the caller may not change changed: rows of other tenants, private rows of other
     agents, domain rows of read-only members and anything a read-only key touches are
     compared column by column, with their history counts, straight from PostgreSQL before
     and after each mutating call (a failed call or a dry run may change nothing at all);
     working memory, operations and every row outside the world are compared too;
  4. an id the caller cannot see fails exactly like a random unknown id (NOT_FOUND unless the
     call fails for a reason of the caller's own, e.g. a read-only key), with no metadata but
     `index`.
  5. a request id sent again by the same caller returns its first write and stores nothing
     new; the same id and body from another caller is a write of its own, never the first's.

Reproducible (derandomized, no example database) and bounded: MAX_EXAMPLES worlds of STEPS
calls, at least MIN_CALLS calls in all, which the test asserts so it cannot shrink silently.
To see it fail, break the rule in-process, e.g. drop the tenant condition from
`stores.postgres.memories.visibility` *and* run queries without the restricted role
(`memories.caller_session` yielding a plain transaction): row-level security alone still hides
a broken predicate, which is its purpose.
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest_asyncio
from hypothesis import HealthCheck, settings as hsettings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from memplane_server.core.caller import Caller, Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import KIND_LAYER, Kind, Layer, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.services.admin import AdminService
from memplane_server.services.auth import Authenticator
from memplane_server.core.requests import request_key
from memplane_server.services.forget import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.operations import OperationsService
from memplane_server.services.reflect import ReflectInput, ReflectService, Task
from memplane_server.services.context import ContextService
from memplane_server.services.search import SearchQuery, SearchService
from memplane_server.services.working import WorkingService
from memplane_server.services.write import WriteService
from memplane_server.stores.redis.working import WorkingSession
from tests.integration.conftest import PLATFORM
from tests.support.isolation_oracle import (
    WRITING_ROLES, Mem, Violation, WorkItem, can_change, can_read, matches, statuses_of, write_problem,
)

# CI budget: at least MIN_CALLS service calls in well under 90 s on 2 cores. A longer soak:
# MEMPLANE_ISOLATION_EXAMPLES=400 (a different seed too: it changes what is generated).
MAX_EXAMPLES = int(os.environ.get("MEMPLANE_ISOLATION_EXAMPLES", "40"))
STEPS = 50
MIN_CALLS = 2000

STATS = {"calls": 0, "examples": 0}
# What the run exercised, printed at the end: calls per use case and the interesting cases.
SEEN: Counter = Counter()

# Small pools shared by every tenant, so filters and ids collide across tenants on purpose.
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
LABELS = (*DIRECT, *KEYED, REVOKED)


# ------------------------------------------------------------------------------- snapshots


@dataclass
class Snap:
    rows: dict[uuid.UUID, tuple]
    history: dict[uuid.UUID, int]
    outside: tuple
    jobs: dict[uuid.UUID, tuple]
    working: dict[tuple, tuple]


# ------------------------------------------------------------------------------ strategies

callers = st.tuples(st.integers(0, 3), st.sampled_from(LABELS))
# Which id a call names: ("visible", i) the i-th memory the caller can read, ("invisible", i)
# the i-th id it cannot (other tenants, other agents, ungranted domains, erased memories,
# working items), ("any", i) the i-th id of the world, or an unknown or a malformed id. An
# empty pool falls back to "any".
targets = st.tuples(
    st.sampled_from(["visible", "visible", "visible", "invisible", "invisible", "any", "unknown", "malformed"]),
    st.integers(0, 10_000),
)
FILTER_FIELDS = {
    "scopes": st.lists(st.sampled_from([s.value for s in Scope]), min_size=1, max_size=2, unique=True),
    "layers": st.lists(st.sampled_from([x.value for x in Layer]), min_size=1, max_size=2, unique=True),
    "kinds": st.lists(st.sampled_from([k.value for k in Kind]), min_size=1, max_size=3, unique=True),
    "domains": st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True),
    "agent_id": st.sampled_from(AGENTS),
    "user_id": st.sampled_from(USERS),
    "session_id": st.sampled_from(SESSIONS),
    "entity": st.sampled_from(ENTITIES),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "min_confidence": st.sampled_from([0.75, 0.95]),
    "include_pending": st.booleans(),
    "statuses": st.lists(st.sampled_from([s.value for s in Status]), min_size=1, max_size=2, unique=True),
}
# No filter, one condition, or any combination (which mostly selects nothing).
filter_specs = st.one_of(
    st.just({}),
    st.one_of([st.fixed_dictionaries({name: values}) for name, values in FILTER_FIELDS.items()]),
    st.fixed_dictionaries({}, optional=FILTER_FIELDS),
)
# Mostly one shared condition (so forgets do reach rows), sometimes several, sometimes none.
forget_filter_specs = st.one_of(
    st.fixed_dictionaries({"user_id": st.sampled_from(USERS)}),
    st.fixed_dictionaries({"session_id": st.sampled_from(SESSIONS)}),
    st.fixed_dictionaries({"entity": st.sampled_from(ENTITIES)}),
    st.fixed_dictionaries(
        {"kinds": st.lists(st.sampled_from([k.value for k in Kind]), min_size=1, max_size=3, unique=True)}
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "user_id": st.sampled_from(USERS),
            "session_id": st.sampled_from(SESSIONS),
            "entity": st.sampled_from(ENTITIES),
            "scopes": st.lists(st.sampled_from([s.value for s in Scope]), min_size=1, max_size=1),
            "statuses": st.lists(st.sampled_from([s.value for s in Status]), min_size=1, max_size=2, unique=True),
        },
    ),
)
# scope: None (the caller's default), a scope, or "working" (working layer, caller's default scope).
draft_specs = st.fixed_dictionaries(
    {
        "scope": st.sampled_from([None, "global", "domain", "private", "working"]),
        "domain": st.integers(0, 2),
        "kind": st.sampled_from([k.value for k in Kind]),
        "text": st.integers(0, len(TEXTS) - 1),
        "session": st.sampled_from([None, *SESSIONS]),
        "user": st.sampled_from([None, *USERS]),
        "entity": st.sampled_from([None, *ENTITIES]),
        "confidence": st.sampled_from([1.0, 0.9, 0.5]),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
    }
)
# Seeds lean to domain scope, so members of a domain see memories of other tenants.
seed_specs = st.tuples(
    st.integers(0, 3),
    st.sampled_from(["writer", "agent-a1", "agent-a2"]),
    draft_specs.map(lambda d: d) | st.builds(lambda d: {**d, "scope": "domain"}, draft_specs),
)
changes_specs = st.fixed_dictionaries(
    {},
    optional={
        "content": st.sampled_from(TEXTS),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "confidence": st.sampled_from([0.2, 0.8, 1.0, 1.5]),
        "status": st.sampled_from(["active", "pending", "deleted", "superseded"]),
    },
)
grant_choices = st.sampled_from(["none", "read", "rw"])


# Use cases the machine calls: name -> strategies of its arguments. One rule draws among them
# uniformly (hypothesis' swarm testing would switch whole use cases off for an example, which
# leaves a bounded run with uneven coverage).
ACTIONS: dict[str, dict[str, st.SearchStrategy]] = {}


def action(**arguments: st.SearchStrategy):
    def register(method):
        ACTIONS[method.__name__] = arguments
        return method

    return register


# --------------------------------------------------------------------------- state machine


class IsolationMachine(RuleBasedStateMachine):
    deps: Any = None
    loop: asyncio.AbstractEventLoop | None = None

    def __init__(self) -> None:
        super().__init__()
        self.tenants: list[str] = []
        self.domains: list[str] = []
        self.grants: dict[str, dict[str, bool]] = {}
        self.direct: dict[tuple[str, str], Caller] = {}
        self.keys: dict[tuple[str, str], tuple[str, str | None, Caller | None]] = {}
        self.mems: dict[uuid.UUID, Mem] = {}
        self.work: dict[str, WorkItem] = {}
        self.ids: list[uuid.UUID | str] = []  # every memory and working item id, in order
        self.ops: dict[uuid.UUID, str] = {}  # operation id -> tenant
        self.auth: Authenticator | None = None
        self.elsewhere = ""  # a domain that exists nowhere

    # -- plumbing

    def run(self, coro):
        SEEN["rule " + coro.__qualname__.split("._", 1)[-1]] += 1
        return self.loop.run_until_complete(coro)

    @staticmethod
    async def attempt(coro):
        STATS["calls"] += 1
        try:
            return await coro, None
        except MemplaneError as exc:
            return None, exc

    def name(self, tenant: str | None) -> str:
        return f"T{self.tenants.index(tenant)}" if tenant in self.tenants else str(tenant)

    def describe(self, m: Mem) -> str:
        where = {Scope.GLOBAL: "", Scope.DOMAIN: f" {self.domain_label(m.domain)}", Scope.PRIVATE: f" agent {m.agent}"}
        return f"{m.scope.value}{where[m.scope]} memory of {self.name(m.tenant)} ({m.kind.value}, {m.status.value})"

    def domain_label(self, domain: str | None) -> str:
        return f"D{self.domains.index(domain)}" if domain in self.domains else str(domain)

    def who(self, c: Caller) -> str:
        grants = ", ".join(f"{self.domain_label(d)}:{'rw' if w else 'r'}" for d, w in sorted(c.domains.items()))
        return f"{c.role.value} of {self.name(c.tenant_id)} agent={c.agent_id} grants=[{grants}]"

    def domain_name(self, i: int) -> str:
        return self.domains[i] if i < len(self.domains) else self.elsewhere

    def target(self, c: Caller, t) -> tuple[str, Mem | WorkItem | None]:
        """A target id as the caller would send it, and what the oracle knows of it."""
        pool, index = t
        if pool == "unknown":
            return str(uuid.uuid4()), None
        if pool == "malformed":
            return "not-a-uuid", None
        known = [self.mems.get(i) or self.work[i] for i in self.ids]
        if pool != "any":
            wanted = [k for k in known if self.readable(c, k) == (pool == "visible")]
            known = wanted or known
        k = known[index % len(known)]
        return str(k.id), k

    def readable(self, c: Caller, known) -> bool:
        return isinstance(known, Mem) and known.exists and can_read(c, known)

    def build_filter(self, spec: dict) -> MemoryFilter:
        return MemoryFilter(
            scopes=tuple(Scope(s) for s in spec.get("scopes", ())),
            layers=tuple(Layer(x) for x in spec.get("layers", ())),
            kinds=tuple(Kind(k) for k in spec.get("kinds", ())),
            domains=tuple(self.domain_name(i) for i in spec.get("domains", ())),
            agent_id=spec.get("agent_id"),
            user_id=spec.get("user_id"),
            session_id=spec.get("session_id"),
            entity=spec.get("entity"),
            tags=tuple(spec.get("tags", ())),
            min_confidence=spec.get("min_confidence"),
            include_pending=spec.get("include_pending", False),
            statuses=tuple(Status(s) for s in spec.get("statuses", ())),
        )

    async def caller(self, spec) -> Caller | None:
        """The caller for (tenant index, label); None for the revoked key, after checking it fails."""
        tenant = self.tenants[spec[0] % len(self.tenants)]
        label = spec[1]
        if label in DIRECT:
            return self.direct[(tenant, label)]
        secret, acting, expected = self.keys[(tenant, label)]
        if label == REVOKED:
            _, err = await self.attempt(self.auth.resolve(secret, acting))
            if err is None or err.code is not Code.UNAUTHENTICATED:
                raise Violation(f"the revoked key of {self.name(tenant)} was accepted: {err!r}")
            return None
        resolved = await self.auth.resolve(secret, acting)
        if (resolved.role, resolved.tenant_id, resolved.agent_id, resolved.domains) != (
            expected.role, expected.tenant_id, expected.agent_id, expected.domains
        ):
            raise Violation(f"key {label} of {self.name(tenant)} resolved to {resolved}, expected {expected}")
        return resolved

    # -- checks

    def check_error(self, what: str, c: Caller, err: MemplaneError | None, allowed: set[Code]) -> None:
        if err is None:
            raise Violation(f"{what}: succeeded for {self.who(c)}, expected one of {sorted(x.value for x in allowed)}")
        if err.code not in allowed:
            raise Violation(
                f"{what}: {self.who(c)} got {err.code.value} {err.reason}, expected {sorted(x.value for x in allowed)}"
            )
        if set(err.metadata) - {"index"}:
            raise Violation(f"{what}: error metadata reveals {err.metadata}")

    async def check_like_unknown(self, what: str, c: Caller, err: MemplaneError | None, call) -> None:
        """An invisible id must fail exactly as a random unknown id does for the same caller."""
        SEEN["invisible id probed"] += 1
        _, twin = await self.attempt(call(str(uuid.uuid4())))
        self.check_error(what, c, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED, Code.INVALID_ARGUMENT})
        if twin is None:
            raise Violation(f"{what}: an unknown id succeeded for {self.who(c)}")
        mine = (err.code, err.reason, err.message, err.metadata)
        other = (twin.code, twin.reason, twin.message, twin.metadata)
        if mine != other:
            raise Violation(f"{what}: an invisible id gives {mine}, an unknown id {other} ({self.who(c)})")

    def check_visible(self, what: str, c: Caller, ident, record=None) -> Mem:
        m = self.mems.get(ident)
        problem = None
        if m is None:
            # A row of another world (an earlier example): never visible here.
            problem = f"returned {ident}, a memory outside this world,"
        elif not can_read(c, m):
            problem = f"returned a {self.describe(m)}"
        elif record is not None and (record.tenant_id, record.scope, record.agent_id) != (m.tenant, m.scope, m.agent):
            problem = f"returned {ident} as {record.scope} of {record.tenant_id}, it is a {self.describe(m)},"
        if problem:
            # One raise site, so hypothesis sees one failure whichever invisible row leaks first.
            raise Violation(f"{what}: {problem} to {self.who(c)}")
        foreign = m.tenant != c.tenant_id
        SEEN["returned: another tenant's domain memory" if foreign else "returned: own tenant's memory"] += 1
        return m

    def check_working_item(self, what: str, c: Caller, session: str, ident: str, tenant, agent, item_session) -> None:
        w = self.work.get(ident)
        if w is None or (w.tenant, w.agent, w.session) != (c.tenant_id, c.agent_id, session) or (
            tenant, agent, item_session) != (w.tenant, w.agent, w.session):
            owner = f"{self.name(w.tenant)}/{w.agent}/{w.session}" if w else "nobody known"
            raise Violation(f"{what}: working item of {owner} returned to {self.who(c)} for session {session}")
        SEEN["returned: own working item"] += 1

    async def snapshot(self) -> Snap:
        pool = self.deps.memories.pool
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, tenant_id, scope, domain, agent_id, kind, layer, session_id, user_id, entity,"
                " content, status, confidence, tags, updated_at FROM memories WHERE tenant_id = ANY($1::text[])",
                self.tenants,
            )
            history = await conn.fetch(
                "SELECT memory_id, count(*) AS n FROM memory_history WHERE tenant_id = ANY($1::text[])"
                " GROUP BY memory_id",
                self.tenants,
            )
            # Every row outside this world (earlier examples, other tests) in one digest.
            outside = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM memories WHERE tenant_id <> ALL($1::text[])) AS n,"
                " (SELECT md5(coalesce(string_agg(id::text || status || confidence::text || md5(content)"
                "   || tags::text || updated_at::text, ',' ORDER BY id), ''))"
                "   FROM memories WHERE tenant_id <> ALL($1::text[])) AS digest,"
                " (SELECT count(*) FROM memory_history WHERE tenant_id <> ALL($1::text[])) AS history,"
                " (SELECT md5(coalesce(string_agg(id::text || state || updated_at::text, ',' ORDER BY id), ''))"
                "   FROM jobs WHERE tenant_id <> ALL($1::text[])) AS jobs",
                self.tenants,
            )
            jobs = await conn.fetch(
                "SELECT id, tenant_id, state, updated_at FROM jobs WHERE tenant_id = ANY($1::text[])", self.tenants
            )
        sessions = [(t, a, s) for t in self.tenants for a in (None, *AGENTS) for s in SESSIONS]
        async with self.deps.working.client.pipeline(transaction=False) as pipe:
            for t, a, s in sessions:
                ws = WorkingSession(t, a, s)
                pipe.lrange(ws.key("items"), 0, -1)
                pipe.hgetall(ws.key("state"))
            raw = await pipe.execute()
        working = {key: (tuple(raw[2 * i]), tuple(sorted(raw[2 * i + 1].items()))) for i, key in enumerate(sessions)}
        return Snap(
            rows={r["id"]: tuple(r.values()) for r in rows},
            history={r["memory_id"]: r["n"] for r in history},
            outside=tuple(outside.values()),
            jobs={r["id"]: tuple(r.values()) for r in jobs},
            working=working,
        )

    def check_changes(self, what: str, c: Caller, before: Snap, after: Snap, *, nothing: bool, new: set) -> None:
        """Nothing the caller may not change has changed (nothing at all when `nothing`)."""
        for ident, row in before.rows.items():
            m = self.mems[ident]
            allowed = not nothing and can_change(c, m)
            if allowed:
                continue
            if after.rows.get(ident) != row or after.history.get(ident) != before.history.get(ident):
                why = "a dry run / failed call" if nothing and can_change(c, m) else (
                    "read-only" if can_read(c, m) else "invisible")
                gone = "erased" if ident not in after.rows else "changed"
                raise Violation(f"{what}: {self.who(c)} {gone} a {why} {self.describe(m)}:"
                                f" {row} -> {after.rows.get(ident)}")
        for ident in after.rows.keys() - before.rows.keys():
            if nothing or ident not in new:
                raise Violation(f"{what}: a row appeared that the call did not report: {after.rows[ident]}")
        for ident, row in before.jobs.items():
            if (nothing or row[1] != c.tenant_id) and after.jobs.get(ident) != row:
                raise Violation(f"{what}: {self.who(c)} changed an operation of {self.name(row[1])}")
        for key, value in before.working.items():
            own = key[0] == c.tenant_id and key[1] == c.agent_id
            if (nothing or not own) and after.working[key] != value:
                raise Violation(f"{what}: {self.who(c)} changed working memory of {self.name(key[0])}/{key[1]}/{key[2]}")
        if before.outside != after.outside:
            raise Violation(f"{what}: {self.who(c)} changed rows of tenants outside this world (earlier examples)")

    def refresh(self, after: Snap) -> None:
        """Status and values from the database; the fixed attributes must match the oracle."""
        for ident, m in self.mems.items():
            row = after.rows.get(ident)
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
        unknown = after.rows.keys() - self.mems.keys()
        if unknown:
            raise Violation(f"rows the oracle does not know: {[after.rows[i] for i in unknown]}")

    async def mutate(self, what: str, c: Caller, call, *, new_from=None, dry_run: bool = False):
        """Runs a changing call between two snapshots; returns (result, error)."""
        before = await self.snapshot()
        result, err = await self.attempt(call)
        new = set(new_from(result)) if (err is None and new_from) else set()
        after = await self.snapshot()
        changed = sum(after.rows.get(i) != row for i, row in before.rows.items())
        added = len(after.rows.keys() - before.rows.keys())
        SEEN["mutating calls that changed rows" if changed or added else "mutating calls that changed nothing"] += 1
        SEEN["rows changed or erased"] += changed
        SEEN["rows added"] += added
        self.check_changes(what, c, before, after, nothing=err is not None or dry_run, new=new)
        self.refresh(after)
        return result, err

    # -- world

    def register(self, c: Caller, records, drafts: list[MemoryDraft]) -> set:
        """Adds written memories to the oracle from what was asked, after checking the records."""
        out = set()
        if len(records) != len(drafts):
            raise Violation(f"write returned {len(records)} records for {len(drafts)} drafts")
        for record, d in zip(records, drafts):
            scope = d.scope or (Scope.PRIVATE if c.agent_id else Scope.GLOBAL)
            if d.layer is Layer.WORKING:
                item = WorkItem(str(record.id), c.tenant_id, c.agent_id, d.session_id)
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
                    else m.tenant == c.tenant_id and (scope is Scope.GLOBAL or m.agent == c.agent_id))
                if not (can_change(c, m) and same_space):
                    raise Violation(f"write of {d} by {self.who(c)} re-observed a {self.describe(m)}")
                SEEN["write re-observed an existing memory"] += 1
                continue
            m = Mem(
                id=record.id, tenant=c.tenant_id, scope=scope, domain=d.domain if scope is Scope.DOMAIN else None,
                agent=c.agent_id, kind=d.kind, layer=KIND_LAYER[d.kind], session=d.session_id, user=d.user_id,
                entity=d.entity, tags=tuple(d.tags), confidence=d.confidence,
            )
            if (record.tenant_id, record.scope, record.domain, record.agent_id) != (m.tenant, m.scope, m.domain, m.agent):
                raise Violation(f"write of {d} by {self.who(c)} stored as {record}")
            self.mems[m.id] = m
            self.ids.append(m.id)
            out.add(m.id)
        return out

    def draft(self, spec: dict) -> MemoryDraft:
        working = spec["scope"] == "working"
        scope = None if spec["scope"] in (None, "working") else Scope(spec["scope"])
        return MemoryDraft(
            scope=scope, domain=self.domain_name(spec["domain"]) if scope is Scope.DOMAIN else None, agent_id=None,
            layer=Layer.WORKING if working else None, kind=Kind(spec["kind"]), content=TEXTS[spec["text"]],
            entity=spec["entity"], tags=tuple(spec["tags"]), confidence=spec["confidence"], user_id=spec["user"],
            session_id=spec["session"] or (SESSIONS[0] if working else None),
        )

    def batches(self, specs: list) -> dict[tuple[str, str], list[MemoryDraft]]:
        """Drafts each given an author allowed to write them; one batch per author."""
        out: dict[tuple[str, str], list[MemoryDraft]] = {}
        for ti, author, spec in specs:
            t = self.tenants[ti % len(self.tenants)]
            spec = dict(spec)
            if spec["scope"] == "domain":
                writers = [x for x in self.tenants if self.grants[x].get(self.domain_name(spec["domain"]))]
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

    @initialize(
        n=st.integers(3, 4),
        grants=st.lists(grant_choices, min_size=8, max_size=8),
        seed=st.lists(seed_specs, min_size=1, max_size=24),
    )
    def world(self, n: int, grants: list[str], seed: list) -> None:
        STATS["examples"] += 1
        self.run(self._world(n, grants, seed))

    async def _world(self, n: int, grants: list[str], seed: list) -> None:
        deps = self.deps
        admin = AdminService(deps.tenancy)
        tag = uuid.uuid4().hex[:8]
        self.domains = [f"d{i}-{tag}" for i in range(2)]
        self.elsewhere = f"nowhere-{tag}"
        for d in self.domains:
            await admin.create_domain(PLATFORM, d, "")
        self.tenants = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(n)]
        for i, t in enumerate(self.tenants):
            await admin.create_tenant(PLATFORM, t, t, 0, False)
            for a in AGENTS:
                await admin.create_agent(PLATFORM, t, a, a)
            self.grants[t] = {}
            for j, d in enumerate(self.domains):
                g = grants[i * 2 + j]
                if g != "none":
                    await admin.grant_domain(PLATFORM, d, t, g == "rw")
                    self.grants[t][d] = g == "rw"
            for label, (role, agent) in DIRECT.items():
                self.direct[(t, label)] = Caller(f"{t}-{label}", role, t, agent, dict(self.grants[t]))
            for label, (role, key_agent, acting) in KEYED.items():
                row, secret = await admin.create_api_key(PLATFORM, t, key_agent, role, label)
                expected = Caller(row["id"], role, t, key_agent or acting, dict(self.grants[t]))
                self.keys[(t, label)] = (secret, acting, expected)
            row, secret = await admin.create_api_key(PLATFORM, t, None, Role.WRITER, "revoked")
            await admin.revoke_api_key(PLATFORM, row["id"])
            self.keys[(t, REVOKED)] = (secret, None, None)
        # A fresh authenticator: nothing cached from before the revocations.
        self.auth = Authenticator(deps.tenancy)

        for (t, author), drafts in self.batches(seed).items():
            c = self.direct[(t, author)]
            records = await WriteService(deps).write(c, drafts)
            STATS["calls"] += 1
            self.register(c, records, drafts)
        # One pending operation per tenant, for others to poke at.
        for t in self.tenants:
            op = await ReflectService(deps).reflect(
                self.direct[(t, "writer")], ReflectInput(task=Task(task_id="job", request="tidy up"), mode="async")
            )
            STATS["calls"] += 1
            self.ops[op.id] = t
        self.refresh(await self.snapshot())

    # -- rules: writes

    @action(who=callers, specs=st.lists(draft_specs, min_size=1, max_size=3))
    def write(self, who, specs) -> None:
        self.run(self._write(who, specs))

    async def _write(self, who, specs) -> None:
        c = await self.caller(who)
        if c is None:
            return
        drafts = [self.draft(s) for s in specs]
        problems = {p for p in (write_problem(c, d) for d in drafts) if p}
        result, err = await self.mutate("Write", c, WriteService(self.deps).write(c, drafts),
                                        new_from=lambda records: self.register(c, records, drafts))
        if problems:
            self.check_error("Write", c, err, problems)
        elif err is not None:
            self.check_error("Write", c, err, {Code.RESOURCE_EXHAUSTED})

    @action(first=callers, second=callers, specs=st.lists(draft_specs, min_size=1, max_size=2))
    def replay(self, first, second, specs) -> None:
        self.run(self._replay(first, second, specs))

    async def _replay(self, first, second, specs) -> None:
        """One request id and body sent by two callers: the same caller gets its first answer
        again (nothing new stored); another caller gets a write of its own, never the first's."""
        a, b = await self.caller(first), await self.caller(second)
        if a is None or b is None:
            return
        drafts = [self.draft(s) for s in specs]
        request_id, body = str(uuid.uuid4()), repr(specs).encode()
        answers = []
        for c in (a, b):
            SEEN["replayed request ids"] += 1
            problems = {p for p in (write_problem(c, d) for d in drafts) if p}
            key = request_key(c, "Write", request_id, body)
            result, err = await self.mutate("Write(replay)", c, WriteService(self.deps).write(c, drafts, key),
                                            new_from=lambda records: self.register(c, records, drafts))
            if problems:
                self.check_error("Write(replay)", c, err, problems)
            elif err is not None:
                self.check_error("Write(replay)", c, err, {Code.RESOURCE_EXHAUSTED})
            answers.append(None if err else [r.id for r in result])
        same = (a.tenant_id, a.key_id, a.agent_id) == (b.tenant_id, b.key_id, b.agent_id)
        if same and answers[0] is not None and answers[1] != answers[0]:
            raise Violation(f"a repeated request by {self.who(a)} was stored again: {answers}")

    @action(specs=st.lists(seed_specs, min_size=1, max_size=3), twice=st.booleans())
    def remember(self, specs, twice) -> None:
        """Writes that are allowed, so the world keeps growing while other rules delete; written
        twice, the same things are observed again (or become near-duplicates for Reflect)."""
        self.run(self._remember(specs, twice))

    async def _remember(self, specs, twice) -> None:
        for (t, author), drafts in [*self.batches(specs).items()] * (2 if twice else 1):
            c = self.direct[(t, author)]
            _, err = await self.mutate("Write", c, WriteService(self.deps).write(c, drafts),
                                       new_from=lambda records: self.register(c, records, drafts))
            if err is not None:
                self.check_error("Write", c, err, {Code.RESOURCE_EXHAUSTED})

    # -- rules: reads

    @action(who=callers, query=st.integers(0, len(QUERIES) - 1), spec=filter_specs,
          session=st.sampled_from([None, *SESSIONS]), top_k=st.sampled_from([0, 5, 50]))
    def search(self, who, query, spec, session, top_k) -> None:
        self.run(self._search(who, query, spec, session, top_k))

    async def _search(self, who, query, spec, session, top_k) -> None:
        c = await self.caller(who)
        if c is None:
            return
        f = self.build_filter({**spec, "session_id": session} if session else spec)
        service = SearchService(self.deps)
        hits, err = await self.attempt(service.search(c, SearchQuery(QUERIES[query], filter=f, top_k=top_k)))
        # Usage counters are updated in the background; let them land before the next snapshot.
        await asyncio.gather(*getattr(service, "_background", ()), return_exceptions=True)
        if err is not None:
            raise Violation(f"Search failed for {self.who(c)}: {err.code} {err.reason}")
        wanted = statuses_of(f, all_by_default=False)
        for h in hits:
            r = h.memory
            if r.layer is Layer.WORKING:
                self.check_working_item("Search", c, f.session_id, str(r.id), r.tenant_id, r.agent_id, r.session_id)
                continue
            m = self.check_visible("Search", c, r.id, r)
            if not matches(m, f, wanted):
                raise Violation(f"Search: a {self.describe(m)} outside the filter {f}")

    @action()
    def build_windows(self) -> None:
        self.run(self._build_windows())

    async def _build_windows(self) -> None:
        """The background builder runs; no window may then hold a word that no active turn of its
        own session and visibility (tenant, scope, domain, agent) says."""
        windows = ContextService(self.deps)
        for _ in range(100):
            if not await windows.refresh_next():
                break
        leaks = await self.deps.memories.pool.fetch(
            "SELECT m.id, tok FROM memories m, unnest(tsvector_to_array(m.context_keywords)) AS tok"
            " WHERE m.context_of <> '' AND NOT EXISTS (SELECT 1 FROM memories n"
            "  WHERE n.tenant_id = m.tenant_id AND n.session_id = m.session_id AND n.scope = m.scope"
            "  AND n.domain IS NOT DISTINCT FROM m.domain AND n.agent_id IS NOT DISTINCT FROM m.agent_id"
            "  AND n.status = 'active' AND n.kind = 'turn' AND tok = ANY(tsvector_to_array(n.keywords)))"
        )
        if leaks:
            raise Violation(f"turn windows hold words from outside their session and visibility: {leaks[:5]}")

    @action(who=callers, pick=targets)
    def get(self, who, pick) -> None:
        self.run(self._get(who, pick))

    async def _get(self, who, target) -> None:
        c = await self.caller(who)
        if c is None:
            return
        ident, known = self.target(c, target)
        service = MemoriesService(self.deps)
        record, err = await self.attempt(service.get(c, ident))
        if self.readable(c, known):
            if err is not None or str(record.id) != ident:
                raise Violation(f"GetMemory of a visible {self.describe(known)} by {self.who(c)}: {err!r}")
            self.check_visible("GetMemory", c, known.id, record)
        elif known is not None:
            await self.check_like_unknown("GetMemory", c, err, lambda i: service.get(c, i))
            self.check_error("GetMemory", c, err, {Code.NOT_FOUND})
        else:
            self.check_error("GetMemory", c, err, {Code.NOT_FOUND})

    @action(who=callers, spec=filter_specs, page_size=st.sampled_from([0, 1, 3, 7]))
    def list_memories(self, who, spec, page_size) -> None:
        self.run(self._list(who, spec, page_size))

    async def _list(self, who, spec, page_size) -> None:
        c = await self.caller(who)
        if c is None:
            return
        f = self.build_filter(spec)
        seen: list = []
        token = ""
        for _ in range(4):
            (page, token), err = await self._unpack(MemoriesService(self.deps).list(c, f, page_size, token))
            if err is not None:
                raise Violation(f"ListMemories failed for {self.who(c)}: {err.code} {err.reason}")
            seen.extend(r.id for r in page)
            for r in page:
                m = self.check_visible("ListMemories", c, r.id, r)
                if not matches(m, f, statuses_of(f, all_by_default=False)):
                    raise Violation(f"ListMemories: a {self.describe(m)} outside the filter {f}")
            if not token:
                break
        if len(seen) != len(set(seen)):
            raise Violation("ListMemories: an item on two pages")
        if not token:
            wanted = statuses_of(f, all_by_default=False)
            expected = {m.id for m in self.mems.values() if m.exists and can_read(c, m) and matches(m, f, wanted)}
            if set(seen) != expected:
                raise Violation(f"ListMemories for {self.who(c)} with {f}: missing "
                                f"{[self.describe(self.mems[i]) for i in expected - set(seen)]}")

    async def _unpack(self, coro):
        result, err = await self.attempt(coro)
        return (result if err is None else ([], "")), err

    @action(who=callers, spec=filter_specs)
    def stats(self, who, spec) -> None:
        self.run(self._stats(who, spec))

    async def _stats(self, who, spec) -> None:
        c = await self.caller(who)
        if c is None:
            return
        f = self.build_filter(spec)
        out, err = await self.attempt(MemoriesService(self.deps).stats(c, f))
        if err is not None:
            raise Violation(f"MemoryStats failed for {self.who(c)}: {err.code} {err.reason}")
        wanted = statuses_of(f, all_by_default=True)
        visible = [m for m in self.mems.values() if m.exists and can_read(c, m)]
        expected = [m for m in visible if matches(m, f, wanted)]
        if out["total"] > len(visible):
            raise Violation(f"MemoryStats: {out['total']} counted, {self.who(c)} sees only {len(visible)}")
        by_scope: dict[str, int] = {}
        for m in expected:
            by_scope[m.scope.value] = by_scope.get(m.scope.value, 0) + 1
        if out["total"] != len(expected) or out["scope"] != by_scope:
            raise Violation(f"MemoryStats for {self.who(c)} with {f}: {out['total']} {out['scope']},"
                            f" expected {len(expected)} {by_scope}")

    @action(who=callers, pick=targets, page_size=st.sampled_from([0, 2]))
    def history_of_memory(self, who, pick, page_size) -> None:
        self.run(self._history_of_memory(who, pick, page_size))

    async def _history_of_memory(self, who, target, page_size) -> None:
        c = await self.caller(who)
        if c is None:
            return
        ident, known = self.target(c, target)
        service = MemoriesService(self.deps)

        def call(i):
            return service.history(c, memory_id=i, entity=None, attribute=None, page_size=page_size, page_token="")

        result, err = await self.attempt(call(ident))
        if self.readable(c, known):
            if err is not None:
                raise Violation(f"GetHistory of a visible {self.describe(known)} by {self.who(c)}: {err!r}")
            entries, _ = result
            if not entries or any(e.memory_id != known.id for e in entries):
                raise Violation(f"GetHistory of {ident}: entries {[e.memory_id for e in entries]}")
        elif known is not None:
            await self.check_like_unknown("GetHistory", c, err, call)
            self.check_error("GetHistory", c, err, {Code.NOT_FOUND})
        else:
            self.check_error("GetHistory", c, err, {Code.NOT_FOUND})

    @action(who=callers, entity=st.sampled_from(ENTITIES))
    def history_of_entity(self, who, entity) -> None:
        self.run(self._history_of_entity(who, entity))

    async def _history_of_entity(self, who, entity) -> None:
        c = await self.caller(who)
        if c is None:
            return
        result, err = await self.attempt(
            MemoriesService(self.deps).history(
                c, memory_id=None, entity=entity, attribute=None, page_size=500, page_token=""
            )
        )
        if err is not None:
            raise Violation(f"GetHistory(entity) failed for {self.who(c)}: {err.code} {err.reason}")
        for e in result[0]:
            m = self.check_visible("GetHistory(entity)", c, e.memory_id)
            if m.entity != entity or e.snapshot.tenant_id != m.tenant:
                raise Violation(f"GetHistory(entity={entity}) returned {self.describe(m)} about {m.entity}")

    @action(who=callers, session=st.sampled_from(SESSIONS))
    def read_working(self, who, session) -> None:
        self.run(self._read_working(who, session))

    async def _read_working(self, who, session) -> None:
        c = await self.caller(who)
        if c is None:
            return
        result, err = await self.attempt(WorkingService(self.deps).read(c, session))
        if err is not None:
            raise Violation(f"ReadWorking failed for {self.who(c)}: {err.code} {err.reason}")
        _, items, _ = result
        for i in items:
            self.check_working_item("ReadWorking", c, session, i["id"], i["tenant_id"], i["agent_id"], i["session_id"])
        mine = (c.tenant_id, c.agent_id, session)
        expected = {w.id for w in self.work.values() if (w.tenant, w.agent, w.session) == mine}
        if {i["id"] for i in items} != expected:
            raise Violation(f"ReadWorking for {self.who(c)} in {session}: {len(items)} items, expected {len(expected)}")

    # -- rules: changes

    @action(who=callers, pick=targets, changes=changes_specs)
    def update(self, who, pick, changes) -> None:
        self.run(self._update(who, pick, changes))

    async def _update(self, who, target, changes) -> None:
        c = await self.caller(who)
        if c is None:
            return
        ident, known = self.target(c, target)
        service = MemoriesService(self.deps)

        def call(i):
            parsed = {**changes, **({"status": Status(changes["status"])} if "status" in changes else {})}
            if "tags" in parsed:
                parsed["tags"] = list(parsed["tags"])
            return service.update(c, i, parsed, reason="property")

        invalid = not changes or changes.get("confidence") == 1.5 or changes.get("status") == "superseded"
        # Failures that do not depend on the target: a read-only key, invalid changes.
        intrinsic = (
            {Code.PERMISSION_DENIED} if c.role not in WRITING_ROLES else {Code.INVALID_ARGUMENT} if invalid else set()
        )
        record, err = await self.mutate("UpdateMemory", c, call(ident))
        if self.readable(c, known):
            if intrinsic:
                self.check_error("UpdateMemory", c, err, intrinsic)
            elif can_change(c, known):
                if err is not None or record.id != known.id:
                    raise Violation(f"UpdateMemory of a {self.describe(known)} by {self.who(c)}: {err!r}")
            else:
                self.check_error("UpdateMemory", c, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED})
        elif known is not None:
            await self.check_like_unknown("UpdateMemory", c, err, call)
            self.check_error("UpdateMemory", c, err, {Code.NOT_FOUND} | intrinsic)
        else:
            self.check_error("UpdateMemory", c, err, {Code.NOT_FOUND} | intrinsic)

    @action(who=callers, picks=st.lists(targets, min_size=1, max_size=2), useful=st.booleans())
    def feedback(self, who, picks, useful) -> None:
        self.run(self._feedback(who, picks, useful))

    async def _feedback(self, who, picks, useful) -> None:
        c = await self.caller(who)
        if c is None:
            return
        chosen = [self.target(c, t) for t in picks]
        service = MemoriesService(self.deps)
        result, err = await self.mutate("Feedback", c, service.feedback(c, [i for i, _ in chosen], useful, "property"))
        if c.role not in WRITING_ROLES:
            self.check_error("Feedback", c, err, {Code.PERMISSION_DENIED})
        elif all(self.readable(c, k) and can_change(c, k) for _, k in chosen):
            if err is not None or [r.id for r in result] != [k.id for _, k in chosen]:
                raise Violation(f"Feedback on memories {self.who(c)} may change: {err!r}")
        else:
            # Ids are checked in order before anything changes: the first one the caller may not
            # change decides, and only a memory the caller can read may say it is read-only.
            first = next(k for _, k in chosen if not (self.readable(c, k) and can_change(c, k)))
            readable = self.readable(c, first)
            allowed = {Code.NOT_FOUND, Code.PERMISSION_DENIED} if readable else {Code.NOT_FOUND}
            self.check_error("Feedback", c, err, allowed)
            if len(chosen) == 1 and first is not None and not readable:
                await self.check_like_unknown("Feedback", c, err, lambda i: service.feedback(c, [i], useful, "twin"))

    @action(who=callers, picks=st.lists(targets, min_size=1, max_size=3), hard=st.booleans(), dry_run=st.booleans())
    def forget_ids(self, who, picks, hard, dry_run) -> None:
        self.run(self._forget_ids(who, picks, hard, dry_run))

    async def _forget_ids(self, who, picks, hard, dry_run) -> None:
        c = await self.caller(who)
        if c is None:
            return
        chosen = [self.target(c, t) for t in picks]
        # Decided before the call, which may erase what the oracle knows of the targets.
        blocked = next((k for _, k in chosen if not (self.readable(c, k) and can_change(c, k))), False)
        readable = blocked is not False and self.readable(c, blocked)
        expected = {k.id for _, k in chosen if isinstance(k, Mem) and (hard or k.status is not Status.DELETED)}
        forget = ForgetService(self.deps)
        result, err = await self.mutate(
            "Forget(ids)", c,
            forget.forget(c, ids=[i for i, _ in chosen], f=None, hard=hard, dry_run=dry_run, reason="p"),
            dry_run=dry_run,
        )
        if c.role in WRITING_ROLES and blocked is not False:
            # As for feedback: the first id the caller may not change decides, before anything changes.
            self.check_error("Forget(ids)", c, err, {Code.PERMISSION_DENIED} if readable else {Code.NOT_FOUND})
            if len(chosen) == 1 and blocked is not None and not readable:
                await self.check_like_unknown(
                    "Forget(ids)", c, err,
                    lambda i: forget.forget(c, ids=[i], f=None, hard=hard, dry_run=dry_run, reason="twin"))
            return
        self.check_forgotten("Forget(ids)", c, result, err, expected)

    @action(who=callers, spec=forget_filter_specs, hard=st.booleans(), dry_run=st.booleans())
    def forget_filter(self, who, spec, hard, dry_run) -> None:
        self.run(self._forget_filter(who, spec, hard, dry_run))

    async def _forget_filter(self, who, spec, hard, dry_run) -> None:
        c = await self.caller(who)
        if c is None:
            return
        f = self.build_filter(spec)
        wanted = statuses_of(f, all_by_default=True)
        expected = {
            m.id for m in self.mems.values()
            if m.exists and can_change(c, m) and matches(m, f, wanted) and (hard or m.status is not Status.DELETED)
        }
        result, err = await self.mutate(
            "Forget(filter)", c,
            ForgetService(self.deps).forget(c, ids=None, f=f, hard=hard, dry_run=dry_run, reason="p"), dry_run=dry_run,
        )
        if not spec and c.role in WRITING_ROLES:
            self.check_error("Forget(filter)", c, err, {Code.INVALID_ARGUMENT})
            return
        self.check_forgotten("Forget(filter)", c, result, err, expected)

    def check_forgotten(self, what: str, c: Caller, result, err, expected: set) -> None:
        if c.role not in WRITING_ROLES:
            self.check_error(what, c, err, {Code.PERMISSION_DENIED})
            return
        if err is not None:
            raise Violation(f"{what} failed for {self.who(c)}: {err.code} {err.reason}")
        for ident in result.ids:
            m = self.check_visible(what, c, ident)
            if not can_change(c, m):
                raise Violation(f"{what}: {self.who(c)} forgot a read-only {self.describe(m)}")
        if result.count != len(expected) or set(result.ids) != expected:
            raise Violation(f"{what} by {self.who(c)}: {result.count} forgotten, expected {len(expected)}: "
                            f"extra {[self.describe(self.mems[i]) for i in set(result.ids) - expected]}, "
                            f"missing {[self.describe(self.mems[i]) for i in expected - set(result.ids)]}")

    @action(who=callers, session=st.sampled_from(SESSIONS), direct=st.booleans())
    def reflect_session(self, who, session, direct) -> None:
        self.run(self._reflect_session(who, session, direct))

    async def _reflect_session(self, who, session, direct) -> None:
        c = await self.caller(who)
        if c is None:
            return
        summary_draft = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.SUMMARY,
                                    content="summary", session_id=session, source_type="session", source_id=session)
        service, request = ReflectService(self.deps), ReflectInput(session_id=session, mode="sync")
        outcome, err = await self.mutate(
            "Reflect(session)" if not direct else "ReflectService.run(session)", c,
            service.run(c, request) if direct else service.reflect(c, request),
            new_from=lambda o: self.register(c, o.memories, [summary_draft] * len(o.memories)),
        )
        if c.role not in WRITING_ROLES:
            self.check_error("Reflect(session)", c, err, {Code.PERMISSION_DENIED})
        elif err is not None:
            self.check_error("Reflect(session)", c, err, {Code.RESOURCE_EXHAUSTED})

    @action(who=callers)
    def reflect_task(self, who) -> None:
        self.run(self._reflect_task(who))

    async def _reflect_task(self, who) -> None:
        c = await self.caller(who)
        if c is None:
            return
        op, err = await self.mutate(
            "Reflect(task)", c,
            ReflectService(self.deps).reflect(c, ReflectInput(task=Task(task_id="t1", request="ship it"), mode="async")),
        )
        if c.role not in WRITING_ROLES:
            self.check_error("Reflect(task)", c, err, {Code.PERMISSION_DENIED})
            return
        if err is not None:
            raise Violation(f"Reflect(task) failed for {self.who(c)}: {err.code} {err.reason}")
        self.ops[op.id] = c.tenant_id

    # -- rules: operations

    def op_target(self, c: Caller, t) -> tuple[str, str | None]:
        """An operation id ("visible": of the caller's tenant) and the tenant that owns it."""
        pool, index = t
        if pool == "unknown":
            return str(uuid.uuid4()), None
        if pool == "malformed":
            return "not-a-uuid", None
        ops = [i for i, owner in self.ops.items() if pool == "any" or (owner == c.tenant_id) == (pool == "visible")]
        op = (ops or list(self.ops))[index % len(ops or self.ops)]
        return str(op), self.ops[op]

    @action(who=callers, pick=targets, cancel=st.booleans())
    def operation(self, who, pick, cancel) -> None:
        self.run(self._operation(who, pick, cancel))

    async def _operation(self, who, target, cancel) -> None:
        c = await self.caller(who)
        if c is None:
            return
        ident, owner = self.op_target(c, target)
        service = OperationsService(self.deps)
        what = "CancelOperation" if cancel else "GetOperation"

        def call(i):
            return service.cancel(c, i) if cancel else service.get(c, i)

        if cancel:
            view, err = await self.mutate(what, c, call(ident))
        else:
            view, err = await self.attempt(call(ident))
        intrinsic = {Code.PERMISSION_DENIED} if cancel and c.role not in WRITING_ROLES else set()
        if owner == c.tenant_id and not intrinsic:
            if err is not None or str(view.id) != ident:
                raise Violation(f"{what} of an own operation by {self.who(c)}: {err!r}")
        elif owner is not None:
            await self.check_like_unknown(what, c, err, call)
            self.check_error(what, c, err, {Code.NOT_FOUND} | intrinsic)
        else:
            self.check_error(what, c, err, {Code.NOT_FOUND} | intrinsic)

    @action(who=callers)
    def list_operations(self, who) -> None:
        self.run(self._list_operations(who))

    async def _list_operations(self, who) -> None:
        c = await self.caller(who)
        if c is None:
            return
        result, err = await self.attempt(OperationsService(self.deps).list(c, None, 500, ""))
        if err is not None:
            raise Violation(f"ListOperations failed for {self.who(c)}: {err.code} {err.reason}")
        got = {op.id for op in result[0]}
        expected = {i for i, t in self.ops.items() if t == c.tenant_id}
        if got != expected:
            raise Violation(
                f"ListOperations for {self.who(c)}: {len(got - expected)} foreign, {len(expected - got)} missing"
            )


    @rule(step=st.one_of([st.tuples(st.just(name), st.fixed_dictionaries(args)) for name, args in ACTIONS.items()]))
    def call(self, step) -> None:
        name, arguments = step
        getattr(self, name)(**arguments)


# ------------------------------------------------------------------------------------ tests


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def session_loop(runtime):
    return asyncio.get_running_loop()


def test_no_call_crosses_tenant_agent_or_domain(deps, session_loop):
    IsolationMachine.deps = deps
    IsolationMachine.loop = session_loop
    calls_before, examples_before = STATS["calls"], STATS["examples"]
    started = time.monotonic()
    run_state_machine_as_test(
        IsolationMachine,
        settings=hsettings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        ),
    )
    calls, examples = STATS["calls"] - calls_before, STATS["examples"] - examples_before
    print(f"\nisolation property: {calls} calls across {examples} examples in {time.monotonic() - started:.1f}s")
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(SEEN.items())))
    # The property is only as strong as the number of calls it made: keep it from shrinking silently.
    assert calls >= MIN_CALLS, f"only {calls} calls; raise MAX_EXAMPLES or STEPS"
