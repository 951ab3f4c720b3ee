"""Isolation property (tests/support/isolation_machine.py) over what is read beside memories:

    Watch (`services.watch`, the change stream read from the change log), open conflicts
    (`services.conflicts`: ListConflicts and ResolveConflict, over contradicting facts written
    by agents of one tenant or by members of a shared domain), reflection decisions and the
    signals of searches that found nothing (`services.reflect.decisions`), and the export of one
    tenant (`stores.postgres.transfer.export_tenant`, what `memplane export` writes),

besides the shared rules (writes, updates, forgets by id, turn windows, no-result signals):

  - a watcher receives exactly the changes of the world it may read (by the tenant, scope,
    domain and agent the change log recorded) that its filter selects, in order;
  - a listed conflict's both sides are readable, every open one the caller reads is listed
    (unless the value it contradicts is gone), and only a caller who may change the challenger
    resolves it (an invisible id fails as an unknown one);
  - a decision is listed only to callers of its tenant, an agent's only to that agent (and the
    tenant's admins), a signal only to its own agent and the tenant's admins, and every such
    decision is listed;
  - an export of a tenant holds its memories and their history and names no other tenant.

To see it fail, drop the agent condition from the policy of reflection_decisions (migration
0038) and from `DecisionStore.list` (the listing then names only the tenant), or drop `visibility(caller, p)` from `ChangeStore.read`
*and* make `stores.postgres.session.caller_session` yield a plain transaction.
"""
from __future__ import annotations

import asyncio
import json

from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.changes import ChangeFilter
from memplane_server.core.errors import Code
from memplane_server.core.model import Kind, MemoryDraft, Scope, Status
from memplane_server.core.transfer import ExportedRow
from memplane_server.services.conflicts import ConflictsService
from memplane_server.services.watch.service import WatchService
from memplane_server.stores.postgres.bulk.transfer import export_tenant
from tests.support import isolation_inputs as inputs
from tests.support.isolation_inputs import Who
from tests.support.isolation_machine import SEEN, action, machine, run_machine
from tests.support.isolation_oracle import WRITING_ROLES, Mem, Target, Violation, can_change, can_read
from tests.support.isolation_world import DIRECT, ENTITIES, KEYED, SESSIONS
from tests.support.services import reflect_service

change_filters = st.fixed_dictionaries({}, optional={
    "scopes": st.lists(st.sampled_from(list(Scope)), min_size=1, max_size=2, unique=True).map(tuple),
    "kinds": st.lists(st.sampled_from(list(Kind)), min_size=1, max_size=3, unique=True).map(tuple),
    "session_id": st.sampled_from(SESSIONS),
}).map(lambda fields: ChangeFilter(**fields))
# A claim's scope: global, a domain of the world (by index), sometimes the writer's default or
# private (where no other agent's value is, so no conflict either).
claim_scopes = st.sampled_from(["global", "global", 0, 1, None, "private"])
# Writers acting as an agent, of the first two tenants: agents disagreeing is what makes a conflict.
CLAIMERS = [label for label, (role, agent) in DIRECT.items() if agent and role in WRITING_ROLES] + [
    label for label, (role, key_agent, acting) in KEYED.items() if (key_agent or acting) and role in WRITING_ROLES]
claimers = st.builds(Who, tenant=st.integers(0, 1), label=st.sampled_from(CLAIMERS))
# The one who says otherwise: of the same tenant, as a rule.
gainsayers = st.one_of(st.builds(Who, tenant=st.none(), label=st.sampled_from(CLAIMERS)), claimers)


def readable_change(caller: Caller, tenant: str, scope: str, domain: str | None, agent: str | None) -> bool:
    """The visibility rule (the oracle's) over what the change log recorded of the memory."""
    return can_read(caller, Mem(None, tenant, Scope(scope), domain, agent, Kind.EVENT, None, None, None, None))


class StreamRules:
    async def set_up(self, tenant_count: int, grants: list[str], seeds: list) -> None:
        self.first_position = await self.deps.changes.head()  # the world's changes come after it
        await super().set_up(tenant_count, grants, seeds)

    # -- Watch

    @action(weight=2, caller=inputs.callers, f=change_filters, linger=st.booleans())
    async def watch(self, caller: Caller, f: ChangeFilter, linger: bool) -> None:
        """From the world's first change to now; with linger, waits a moment for anything more."""
        rows = await self.deps.changes.pool.fetch(
            # An entry's session is its history snapshot's, an 'erased' entry's its own (migration 0028).
            "SELECT c.position, c.memory_id, c.tenant_id, c.scope, c.domain, c.agent_id, c.kind,"
            " coalesce(c.session_id, h.snapshot->>'session_id') AS session_id FROM memory_changes c"
            " LEFT JOIN memory_history h ON h.tenant_id = c.tenant_id AND h.seq = c.history_seq"
            " WHERE c.position > $1 ORDER BY c.position", self.first_position)
        expected = [r["position"] for r in rows
                    if readable_change(caller, r["tenant_id"], r["scope"], r["domain"], r["agent_id"])
                    and (not f.scopes or Scope(r["scope"]) in f.scopes) and (not f.kinds or Kind(r["kind"]) in f.kinds)
                    and (not f.session_id or r["session_id"] == f.session_id)]
        of = {r["position"]: r for r in rows}
        stream = WatchService(self.deps).watch(caller, f, self.first_position)
        got: list[int] = []
        try:
            await self.attempt(anext(stream))  # the empty batch naming the starting position
            while len(got) < len(expected) or linger:
                try:
                    batch = await asyncio.wait_for(anext(stream), 10 if len(got) < len(expected) else 0.3)
                except asyncio.TimeoutError:
                    if len(got) < len(expected):
                        raise Violation(f"Watch for {self.names.who(caller)} with {f}: {len(got)} of"
                                        f" {len(expected)} changes came") from None
                    break
                for event in batch.events:
                    row = of.get(event.position)
                    if event.position not in expected:
                        owner = f"{self.names.tenant(row['tenant_id'])} {row['scope']}" if row else "outside this world"
                        raise Violation(f"Watch: a change of a memory of {owner} ({event.memory_id}) sent to"
                                        f" {self.names.who(caller)} with {f}")
                    if event.memory is not None and (str(event.memory.id), event.memory.tenant_id) != (
                            str(row["memory_id"]), row["tenant_id"]):
                        raise Violation(f"Watch: change {event.position} carries {event.memory.id} of"
                                        f" {event.memory.tenant_id}, the log says {row['memory_id']}")
                    got.append(event.position)
        finally:
            await stream.aclose()
        for position in got:
            foreign = of[position]["tenant_id"] != caller.tenant_id
            SEEN["watched: a change of another tenant's domain memory" if foreign else "watched: an own change"] += 1
        if got != expected:
            raise Violation(f"Watch for {self.names.who(caller)} with {f}: {len(got)} changes, expected"
                            f" {len(expected)}, out of order or missing")

    # -- conflicts

    @action(weight=3, first=claimers, second=gainsayers, entity=st.sampled_from(ENTITIES), scope=claim_scopes)
    async def claim(self, first: Caller, second: Caller, entity: str, scope) -> None:
        """Two confident values of an entity's status, in the space a scope names for each writer:
        another agent's different value of a fact in the same space is held back as a conflict."""
        domain = self.world.domain(scope) if isinstance(scope, int) else None
        for caller, value in ((first, "open"), (second, "closed")):
            draft = MemoryDraft(
                scope=Scope.DOMAIN if domain else Scope(scope) if scope else None, domain=domain, agent_id=None,
                layer=None, kind=Kind.FACT, content=f"{entity} status is {value}", entity=entity, attribute="status",
                value=value)
            _, err = await self.write_between_snapshots("Write(fact)", caller, [draft])
            self.check_write("Write(fact)", caller, [draft], err)

    @action(weight=2, caller=inputs.callers, entity=st.sampled_from([None, *ENTITIES]))
    async def list_conflicts(self, caller: Caller, entity: str | None) -> None:
        result, err = await self.attempt(ConflictsService(self.deps).list(caller, entity=entity, page_size=100,
                                                                           page_token=""))
        self.check_ok("ListConflicts", caller, err)
        listed = set()
        for conflict in result[0]:
            for side in (conflict.current, conflict.challenger):
                self.check_visible("ListConflicts", caller, side.id, side)
            listed.add(conflict.challenger.id)
        SEEN["conflicts listed"] += len(listed)
        expected = {m.id for m in self.oracle.visible(caller)
                    if m.status is Status.NEEDS_CONFIRMATION and (entity is None or m.entity == entity)}
        if listed - expected:
            raise Violation(f"ListConflicts for {self.names.who(caller)} listed {len(listed - expected)} not open")
        for ident in expected - listed:
            current = await self.deps.memories.pool.fetchval(
                "SELECT c.status FROM memories m JOIN memories c ON c.id = m.conflicts_with WHERE m.id = $1", ident)
            if current is not None:
                raise Violation(f"ListConflicts for {self.names.who(caller)} left out the open"
                                f" {self.names.describe(self.oracle.mems[ident])}")

    @action(weight=2, caller=inputs.callers, target=st.one_of(inputs.targets, st.integers(0, 1000)),
            keep=st.sampled_from(["current", "challenger"]))
    async def resolve_conflict(self, caller: Caller, target: Target | int, keep: str) -> None:
        """Mostly an open challenger of any tenant (an index into them), else any id."""
        if isinstance(target, int):
            open_ones = [m for m in self.oracle.mems.values() if m.exists and m.status is Status.NEEDS_CONFIRMATION]
            if not open_ones:
                return
            m = open_ones[target % len(open_ones)]
            target = Target(str(m.id), m)
        service = ConflictsService(self.deps)

        def call(memory_id):
            return service.resolve(caller, memory_id, keep, "property")

        known = target.known
        # Decided before the call, which changes what the oracle knows of the target.
        readable, was_open = self.oracle.readable(caller, known), getattr(known, "status", None)
        _, err = await self.mutate("ResolveConflict", caller, call(target.id))
        if caller.role not in WRITING_ROLES:
            self.check_error("ResolveConflict", caller, err, {Code.PERMISSION_DENIED})
        elif not readable:
            await self.check_hidden("ResolveConflict", caller, known, err, call)
        elif not can_change(caller, known):
            self.check_error("ResolveConflict", caller, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED})
        elif was_open is Status.NEEDS_CONFIRMATION:
            self.check_ok("ResolveConflict", caller, err)
            SEEN["conflicts resolved"] += 1
        else:
            self.check_error("ResolveConflict", caller, err, {Code.FAILED_PRECONDITION})

    # -- reflection decisions

    @action(caller=inputs.callers, subject=st.sampled_from([None, "search", "task"]))
    async def list_decisions(self, caller: Caller, subject: str | None) -> None:
        result, err = await self.attempt(reflect_service(self.deps).decisions(
            caller, subject_type=subject, subject_id=None, page_size=1000, page_token=""))
        self.check_ok("ListReflectionDecisions", caller, err)
        rows = await self.deps.decisions.pool.fetch(
            "SELECT id, tenant_id, agent_id, subject_type FROM reflection_decisions WHERE tenant_id = ANY($1::text[])",
            self.world.tenants)
        def listable(r) -> bool:
            # A signal repeats a query: its own agent's and the tenant admins'; a tenant key's
            # decision is the tenant's.
            own = caller.role is Role.TENANT_ADMIN or r["agent_id"] == caller.agent_id
            return r["tenant_id"] == caller.tenant_id and (own or (r["agent_id"] is None and r["subject_type"] != "search"))

        by_id = {r["id"]: r for r in rows}
        for d in result[0]:
            row = by_id.get(d.id)
            if row is None or not listable(row):
                where = f"of {self.names.tenant(row['tenant_id'])} agent {row['agent_id']}" if row else "outside this world"
                raise Violation(f"ListReflectionDecisions: a decision {where} listed to {self.names.who(caller)}")
        SEEN["decisions listed"] += len(result[0])
        expected = {r["id"] for r in rows if listable(r) and subject in (None, r["subject_type"])}
        if {d.id for d in result[0]} != expected:
            raise Violation(f"ListReflectionDecisions for {self.names.who(caller)}: {len(result[0])} listed,"
                            f" expected {len(expected)}")

    # -- export

    @action(tenant=st.integers(0, 3))
    async def export(self, tenant: int) -> None:
        """What `memplane export` writes of one tenant: its own rows, no other tenant named."""
        t = self.world.tenant(tenant)
        async with self.deps.memories.pool.acquire() as conn:
            rows = [row async for row in export_tenant(conn, t) if isinstance(row, ExportedRow)]
        memories = {r.fields["id"] for r in rows if r.table == "memories"}
        others = {str(m.id) for m in self.oracle.mems.values() if m.tenant != t}
        for r in rows:
            owner = r.fields.get("tenant_id", r.fields.get("id") if r.table == "tenants" else t)
            # History keeps the marker of a memory erased (hard forgets, erasures) after the memory.
            if owner != t or (r.table == "memory_history" and r.fields["memory_id"] in others):
                raise Violation(f"the export of {self.names.tenant(t)} holds a {r.table} row of"
                                f" {self.names.tenant(owner)}: {r.fields.get('id') or r.fields.get('memory_id')}")
        expected = {str(m.id) for m in self.oracle.mems.values() if m.exists and m.tenant == t}
        if memories != expected:
            raise Violation(f"the export of {self.names.tenant(t)}: {len(memories)} memories, expected {len(expected)}")
        # Who changed a memory stays in its history, another tenant's key too when it changed a
        # domain memory they share (as GetHistory shows it to the members): the rest names no one.
        text = json.dumps([{k: v for k, v in r.fields.items() if r.table != "memory_history" or k != "actor"}
                           for r in rows], ensure_ascii=False)
        named = [self.names.tenant(o) for o in self.world.tenants if o != t and o in text]
        if named:
            raise Violation(f"the export of {self.names.tenant(t)} names {named}")
        SEEN["exported memories"] += len(memories)


StreamMachine = machine("StreamMachine", StreamRules)


def test_no_stream_conflict_decision_or_export_crosses_tenant_agent_or_domain(deps, session_loop):
    run_machine(StreamMachine, deps, session_loop, examples=5, steps=50, min_calls=260)
