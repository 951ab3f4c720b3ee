"""The isolation property test's state machine (tests/integration/test_isolation_*.py): no use case
reads or changes memory outside the caller's visibility (DESIGN §1).

Each area's test builds a machine (`machine`) from the rules of this base, which change the world
as every read must respect (writes, updates, forgets by id, turn windows, the signals of searches
that found nothing), and rules of its own.
A hypothesis state machine builds a world (`tests.support.isolation_world`): 3-4 tenants of two
agents, two domains with random grants, callers of every role (direct, and from real API keys
resolved by `services.auth.Authenticator`, one of them revoked) and memories of every scope, kind
and layer whose sessions, users and entities are shared across tenants. It then makes random
calls, each with a random caller and targets taken from *any* tenant, over PostgreSQL, where
queries carry `stores.postgres.sql.visibility` (or `writable`) and a caller's transactions run in
`stores.postgres.session.caller_session` as a restricted role under row-level security, and
Redis (`stores.redis.working`). Each rule is a method marked `@action`; the machine's one rule
`call` draws among them uniformly (hypothesis' swarm testing would switch whole use cases off for
an example, which leaves a bounded run with uneven coverage). Results are checked against the
oracle (`tests.support.isolation_oracle`), and changes against database snapshots taken before
and after each changing call (`tests.support.isolation_snapshots`). After every call:

  1. everything returned is visible to the caller (and lists, stats, working reads, forgets
     and operation lists are exactly what the oracle expects);
  2. stats never count more than the caller sees (here: exactly what it sees);
  3. nothing the caller may not change changed: rows of other tenants, private rows of other
     agents, domain rows of read-only members and anything a read-only key touches are
     compared column by column, with their history counts, straight from PostgreSQL before
     and after each mutating call (a failed call or a dry run may change nothing at all);
     working memory, operations, lifecycle policies, reflection decisions and every row
     outside the world are compared too, and a memory newly derived (memory_sources) comes
     from readable ones only;
  4. an id the caller cannot see fails exactly like a random unknown id (NOT_FOUND unless the
     call fails for a reason of the caller's own, e.g. a read-only key), with no metadata but
     `index`.

Reproducible (derandomized, no example database) and bounded: `run_machine` runs a number of
worlds of a number of calls, at least a minimum of calls in all, which it asserts so a test
cannot shrink silently (the seed follows the machine's source, so an edit of it changes what is
drawn, not how much). To see a test fail, break the rule in-process: drop the tenant condition
from `stores.postgres.sql.visibility` *and* make `stores.postgres.session.caller_session` yield a
plain transaction (row-level security alone still hides a broken predicate, which is its
purpose), or let `services.memories.changeable` skip the write check.
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from typing import Any

from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from memplane_server.core.access.caller import Caller
from memplane_server.core.access.requests import RequestKey
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Status
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.context import ContextService
from memplane_server.services.write.service import WriteService

from . import isolation_inputs as inputs
from .isolation_inputs import DraftSpec, FilterSpec, OperationPick, Pick, Who
from .isolation_oracle import (
    WRITING_ROLES,
    Mem,
    Names,
    Op,
    Oracle,
    Target,
    Violation,
    can_change,
    can_read,
    matches,
    statuses_of,
    write_problem,
)
from .isolation_snapshots import Reach, Snapshot, check_unchanged, take_snapshot
from .isolation_world import DIRECT, USERS, World, build_world, seed_world

STATS = {"calls": 0, "examples": 0}
# What the run exercised, printed at the end: calls per use case and the interesting cases.
SEEN: Counter = Counter()


def action(weight: int = 1, **arguments: st.SearchStrategy):
    """Marks a rule of the machine, with the strategies of its arguments (callers first, in order)
    and how many times as often as a rule of weight 1 it is drawn."""

    def mark(method):
        method.isolation_arguments, method.isolation_weight = arguments, weight
        return method

    return mark


class IsolationMachine(RuleBasedStateMachine):
    deps: Any = None
    loop: asyncio.AbstractEventLoop | None = None
    ACTIONS: dict[str, dict[str, st.SearchStrategy]] = {}
    world: World
    oracle: Oracle
    names: Names

    @initialize(
        tenant_count=st.integers(3, 4),
        grants=st.lists(inputs.grants, min_size=8, max_size=8),
        seeds=st.lists(inputs.seeds, min_size=1, max_size=24),
    )
    def new_world(self, tenant_count: int, grants: list[str], seeds: list) -> None:
        STATS["examples"] += 1
        self.loop.run_until_complete(self.set_up(tenant_count, grants, seeds))

    async def set_up(self, tenant_count: int, grants: list[str], seeds: list) -> None:
        self.world = await build_world(self.deps, tenant_count, grants)
        self.names = self.world.names
        self.oracle = Oracle(self.names, SEEN)
        STATS["calls"] += await seed_world(self.deps, self.world, self.oracle, seeds)
        self.oracle.refresh((await self.snapshot()).rows)

    # -- the opening every rule shares

    async def step(self, name: str, drawn: dict) -> None:
        """Resolves what was drawn, then runs the rule: callers first, in order (the step ends there
        if one is the revoked key, after checking it is refused), then targets, filters and drafts
        as the first caller would send them in this world."""
        SEEN["rule " + name] += 1
        callers: dict[str, Caller | None] = {}
        previous = None
        for key in self.ACTIONS[name]:  # in the rule's order: hypothesis shuffles the keys of a drawn dict
            if isinstance(drawn[key], Who):
                previous = drawn[key].after(previous)
                callers[key] = await self.caller(previous)
        if None in callers.values():
            return
        caller = next(iter(callers.values()), None)  # rules that pick targets draw one caller
        arguments = {key: callers[key] if key in callers else self.resolve(value, caller)
                     for key, value in drawn.items()}
        await getattr(self, name)(**arguments)

    async def caller(self, who: Who) -> Caller | None:
        """The caller a label names in a tenant; None for the revoked key, after checking it is refused."""
        tenant = self.world.tenant(who.tenant)
        if who.label in DIRECT:
            return self.world.direct[(tenant, who.label)]
        key = self.world.keys[(tenant, who.label)]
        if key.expected is None:
            _, err = await self.attempt(self.world.auth.resolve(key.secret, key.acting))
            if err is None or err.code is not Code.UNAUTHENTICATED:
                raise Violation(f"the revoked key of {self.names.tenant(tenant)} was accepted: {err!r}")
            return None
        resolved = await self.world.auth.resolve(key.secret, key.acting)
        expected = key.expected
        if (resolved.role, resolved.tenant_id, resolved.agent_id, resolved.domains) != (
            expected.role, expected.tenant_id, expected.agent_id, expected.domains
        ):
            raise Violation(f"key {who.label} of {self.names.tenant(tenant)} resolved to {resolved},"
                            f" expected {expected}")
        return resolved

    def resolve(self, drawn, caller: Caller | None):
        if isinstance(drawn, list):
            return [self.resolve(value, caller) for value in drawn]
        if isinstance(drawn, Pick):
            return self.oracle.target(caller, drawn.pool, drawn.index)
        if isinstance(drawn, OperationPick):
            return self.oracle.operation_target(caller, drawn.pool, drawn.index)
        if isinstance(drawn, FilterSpec):
            return self.world.filter(drawn)
        if isinstance(drawn, DraftSpec):
            return self.world.draft(drawn)
        return drawn

    # -- calling

    @staticmethod
    async def attempt(coro):
        """(result, None) or (None, the error), counting the call toward MIN_CALLS."""
        STATS["calls"] += 1
        try:
            return await coro, None
        except MemplaneError as exc:
            return None, exc

    async def snapshot(self) -> Snapshot:
        return await take_snapshot(self.deps, self.world.tenants)

    async def mutate(self, what: str, caller: Caller, call, *, new_from=None, dry_run: bool = False,
                     reach: Reach | None = None):
        """Runs a changing call between two snapshots and checks what changed; returns (result, error).
        `new_from(result)` names the rows the call reports adding."""
        before = await self.snapshot()
        result, err = await self.attempt(call)
        new = set(new_from(result)) if (err is None and new_from) else set()
        after = await self.snapshot()
        changed = sum(after.rows.get(i) != row for i, row in before.rows.items())
        added = len(after.rows.keys() - before.rows.keys())
        SEEN["mutating calls that changed rows" if changed or added else "mutating calls that changed nothing"] += 1
        SEEN["rows changed or erased"] += changed
        SEEN["rows added"] += added
        check_unchanged(what, caller, before, after, self.oracle, nothing=err is not None or dry_run, new=new,
                        reach=reach)
        self.register_refresh_jobs(what, before, after)
        self.oracle.refresh(after.rows)
        return result, err

    def register_refresh_jobs(self, what: str, before: Snapshot, after: Snapshot) -> None:
        """A summary whose source changed (turned stale, or erased with a hard-forgotten source) gets a
        refresh_summary job queued by the triggers of migrations 0009/0010, in the summary's own
        tenant whoever made the change: the oracle learns them as that tenant's operations."""
        for ident in after.jobs.keys() - before.jobs.keys():
            _, tenant, _, _, kind, summary_id, agent = after.jobs[ident]
            if kind != "refresh_summary":
                continue  # the calls that queue other operations register them
            summary = self.oracle.mems.get(uuid.UUID(summary_id)) if summary_id else None
            if summary is None or summary.kind is not Kind.SUMMARY or summary.tenant != tenant:
                raise Violation(f"{what}: a refresh_summary job appeared in {self.names.tenant(tenant)}"
                                f" for no summary of that tenant: {after.jobs[ident]}")
            self.oracle.ops[ident] = Op(tenant, agent, kind)

    async def write_between_snapshots(self, what: str, caller: Caller, drafts: list[MemoryDraft],
                                      key: RequestKey | None = None):
        """A Write between snapshots, its records checked and added to the oracle; (records, error)."""
        return await self.mutate(what, caller, WriteService(self.deps).write(caller, drafts, key),
                                 new_from=lambda records: self.oracle.register(caller, records, drafts))

    # -- checks

    def check_error(self, what: str, caller: Caller, err: MemplaneError | None, allowed: set[Code]) -> None:
        if err is None:
            raise Violation(f"{what}: succeeded for {self.names.who(caller)},"
                            f" expected one of {sorted(x.value for x in allowed)}")
        if err.code not in allowed:
            raise Violation(f"{what}: {self.names.who(caller)} got {err.code.value} {err.reason},"
                            f" expected {sorted(x.value for x in allowed)}")
        if set(err.metadata) - {"index"}:
            raise Violation(f"{what}: error metadata reveals {err.metadata}")

    def check_ok(self, what: str, caller: Caller, err: MemplaneError | None) -> None:
        if err is not None:
            raise Violation(f"{what} failed for {self.names.who(caller)}: {err.code} {err.reason}")

    async def check_like_unknown(self, what: str, caller: Caller, err: MemplaneError | None, call) -> None:
        """An invisible id must fail exactly as a random unknown id does for the same caller."""
        SEEN["invisible id probed"] += 1
        _, twin = await self.attempt(call(str(uuid.uuid4())))
        self.check_error(what, caller, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED, Code.INVALID_ARGUMENT})
        if twin is None:
            raise Violation(f"{what}: an unknown id succeeded for {self.names.who(caller)}")
        mine = (err.code, err.reason, err.message, err.metadata)
        other = (twin.code, twin.reason, twin.message, twin.metadata)
        if mine != other:
            raise Violation(f"{what}: an invisible id gives {mine}, an unknown id {other} ({self.names.who(caller)})")

    async def check_hidden(self, what: str, caller: Caller, known, err: MemplaneError | None, call,
                           own_failures: frozenset[Code] = frozenset()) -> None:
        """A call on an id the caller cannot see: NOT_FOUND (or a failure of the caller's own),
        and, when something exists under the id (`known`), exactly what a random unknown id gets."""
        if known is not None:
            await self.check_like_unknown(what, caller, err, call)
        self.check_error(what, caller, err, {Code.NOT_FOUND} | own_failures)

    def check_write(self, what: str, caller: Caller, drafts: list[MemoryDraft], err: MemplaneError | None) -> None:
        """A write fails iff a draft may not be written (for that reason), or the tenant's quota is full."""
        problems = {p for p in (write_problem(caller, d) for d in drafts) if p}
        if problems:
            self.check_error(what, caller, err, problems)
        elif err is not None:
            self.check_error(what, caller, err, {Code.RESOURCE_EXHAUSTED})

    def check_visible(self, what: str, caller: Caller, ident, record=None) -> Mem:
        m = self.oracle.mems.get(ident)
        problem = None
        if m is None:
            # A row of another world (an earlier example): never visible here.
            problem = f"returned {ident}, a memory outside this world,"
        elif not can_read(caller, m):
            problem = f"returned a {self.names.describe(m)}"
        elif record is not None and (record.tenant_id, record.scope, record.agent_id) != (m.tenant, m.scope, m.agent):
            problem = f"returned {ident} as {record.scope} of {record.tenant_id}, it is a {self.names.describe(m)},"
        if problem:
            # One raise site, so hypothesis sees one failure whichever invisible row leaks first.
            raise Violation(f"{what}: {problem} to {self.names.who(caller)}")
        foreign = m.tenant != caller.tenant_id
        SEEN["returned: another tenant's domain memory" if foreign else "returned: own tenant's memory"] += 1
        return m

    def check_selected(self, what: str, caller: Caller, records, memory_filter: MemoryFilter) -> None:
        """Every record returned is visible and within the filter (default statuses of a read)."""
        wanted = statuses_of(memory_filter, all_by_default=False)
        for record in records:
            m = self.check_visible(what, caller, record.id, record)
            if not matches(m, memory_filter, wanted):
                raise Violation(f"{what}: a {self.names.describe(m)} outside the filter {memory_filter}")

    def check_working_item(self, what: str, caller: Caller, session: str, ident: str, tenant, agent,
                           item_session) -> None:
        w = self.oracle.work.get(ident)
        if w is None or (w.tenant, w.agent, w.session) != (caller.tenant_id, caller.agent_id, session) or (
                tenant, agent, item_session) != (w.tenant, w.agent, w.session):
            owner = f"{self.names.tenant(w.tenant)}/{w.agent}/{w.session}" if w else "nobody known"
            raise Violation(f"{what}: working item of {owner} returned to {self.names.who(caller)}"
                            f" for session {session}")
        SEEN["returned: own working item"] += 1

    def check_forgotten(self, what: str, caller: Caller, result, err, expected: set) -> None:
        """A read-only key may forget nothing; any other caller forgets exactly what is expected."""
        if caller.role not in WRITING_ROLES:
            self.check_error(what, caller, err, {Code.PERMISSION_DENIED})
            return
        self.check_ok(what, caller, err)
        for ident in result.ids:
            m = self.check_visible(what, caller, ident)
            if not can_change(caller, m):
                raise Violation(f"{what}: {self.names.who(caller)} forgot a read-only {self.names.describe(m)}")
        if result.count != len(expected) or set(result.ids) != expected:
            describe = self.names.describe
            raise Violation(f"{what} by {self.names.who(caller)}: {result.count} forgotten, expected {len(expected)}:"
                            f" extra {[describe(self.oracle.mems[i]) for i in set(result.ids) - expected]},"
                            f" missing {[describe(self.oracle.mems[i]) for i in expected - set(result.ids)]}")

    def first_unchangeable(self, caller: Caller, targets: list[Target]) -> Target | None:
        """Ids are checked in order before anything changes: the first one the caller may not change decides."""
        return next((t for t in targets if not (self.oracle.readable(caller, t.known) and can_change(caller, t.known))),
                    None)

    # -- rules every area's machine has: what changes the world

    @action(caller=inputs.callers, drafts=st.lists(inputs.drafts, min_size=1, max_size=3))
    async def write(self, caller: Caller, drafts: list[MemoryDraft]) -> None:
        _, err = await self.write_between_snapshots("Write", caller, drafts)
        self.check_write("Write", caller, drafts, err)

    @action(seeds=st.lists(inputs.seeds, min_size=1, max_size=3), twice=st.booleans())
    async def remember(self, seeds: list, twice: bool) -> None:
        """Writes that are allowed, so the world keeps growing while other rules delete; written
        twice, the same things are observed again (or become near-duplicates for Reflect)."""
        for (tenant, author), drafts in [*self.world.batches(seeds).items()] * (2 if twice else 1):
            caller = self.world.direct[(tenant, author)]
            _, err = await self.write_between_snapshots("Write", caller, drafts)
            self.check_write("Write", caller, drafts, err)

    @action(caller=inputs.callers, target=inputs.targets, changes=inputs.changes)
    async def update(self, caller: Caller, target: Target, changes: dict) -> None:
        service = MemoriesService(self.deps)

        def call(memory_id):
            # A copy each time: the service normalises the changes it is given in place.
            return service.update(caller, memory_id, dict(changes), reason="property")

        record, err = await self.mutate("UpdateMemory", caller, call(target.id))
        invalid = not changes or changes.get("confidence") == 1.5 or changes.get("status") is Status.SUPERSEDED
        # Failures that do not depend on the target: a read-only key, invalid changes.
        own_failures = frozenset({Code.PERMISSION_DENIED} if caller.role not in WRITING_ROLES
                                 else {Code.INVALID_ARGUMENT} if invalid else ())
        if not self.oracle.readable(caller, target.known):
            await self.check_hidden("UpdateMemory", caller, target.known, err, call, own_failures)
        elif own_failures:
            self.check_error("UpdateMemory", caller, err, own_failures)
        elif can_change(caller, target.known):
            if err is not None or record.id != target.known.id:
                raise Violation(f"UpdateMemory of a {self.names.describe(target.known)}"
                                f" by {self.names.who(caller)}: {err!r}")
        else:
            self.check_error("UpdateMemory", caller, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED})

    @action(caller=inputs.callers, targets=st.lists(inputs.targets, min_size=1, max_size=3), hard=st.booleans(),
            dry_run=st.booleans())
    async def forget_ids(self, caller: Caller, targets: list[Target], hard: bool, dry_run: bool) -> None:
        # Decided before the call, which may erase what the oracle knows of the targets.
        blocked = self.first_unchangeable(caller, targets)
        readable = blocked is not None and self.oracle.readable(caller, blocked.known)
        expected = {t.known.id for t in targets
                    if isinstance(t.known, Mem) and (hard or t.known.status is not Status.DELETED)}
        forget = ForgetService(self.deps)

        def call(memory_ids):
            return forget.forget(caller, ids=memory_ids, f=None, hard=hard, dry_run=dry_run, reason="p")

        result, err = await self.mutate("Forget(ids)", caller, call([t.id for t in targets]), dry_run=dry_run)
        if caller.role not in WRITING_ROLES or blocked is None:
            self.check_forgotten("Forget(ids)", caller, result, err, expected)
        elif readable:
            self.check_error("Forget(ids)", caller, err, {Code.PERMISSION_DENIED})
        elif len(targets) == 1:
            await self.check_hidden("Forget(ids)", caller, blocked.known, err, lambda i: call([i]))
        else:
            self.check_error("Forget(ids)", caller, err, {Code.NOT_FOUND})

    @action()
    async def build_windows(self) -> None:
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

    @action(caller=inputs.callers, user=st.sampled_from([None, *USERS]))
    async def search_nothing(self, caller: Caller, user: str | None) -> None:
        """A search that finds nothing is kept as a signal for reflection (a reflection decision of
        the caller's tenant and agent), its query text and the user it was filtered to with it."""
        service = SearchService(self.deps)
        hits, err = await self.attempt(service.search(caller, SearchQuery(
            "vault code", filter=MemoryFilter(session_id="nowhere", user_id=user, kinds=(Kind.LESSON,)))))
        await asyncio.gather(*getattr(service, "_background", ()), return_exceptions=True)
        self.check_ok("Search", caller, err)
        if hits:
            raise Violation(f"Search in an empty session returned {len(hits)} hits")


def machine(name: str, *rule_sets: type) -> type[IsolationMachine]:
    """A machine with the shared rules and those of `rule_sets`, whose one rule draws among them all."""
    base = type(name + "Rules", (*rule_sets, IsolationMachine), {})
    # In the order the classes define them, the shared rules first: hypothesis draws the first
    # branch of a one_of about twice as often as the others, and Write is the one to favour.
    marked = {n: m for cls in reversed(base.__mro__) for n, m in vars(cls).items() if hasattr(m, "isolation_arguments")}
    actions = {n: m.isolation_arguments for n, m in marked.items()}
    branches = [st.tuples(st.just(n), st.fixed_dictionaries(actions[n])) for n, m in marked.items()
                for _ in range(m.isolation_weight)]

    @rule(step=st.one_of(branches))
    def call(self, step: tuple[str, dict]) -> None:
        self.loop.run_until_complete(self.step(*step))

    return type(name, (base,), {"ACTIONS": actions, "call": call})


def run_machine(machine_class: type[IsolationMachine], deps, loop, *, examples: int, steps: int,
                min_calls: int) -> None:
    """Runs `examples` worlds of `steps` calls (MEMPLANE_ISOLATION_SOAK=N, for a longer soak,
    multiplies the examples: a different seed too, as it changes what is generated), prints what
    was exercised, and asserts at least `min_calls` calls so the property cannot shrink silently."""
    machine_class.deps, machine_class.loop = deps, loop
    examples *= int(os.environ.get("MEMPLANE_ISOLATION_SOAK", "1"))
    STATS.update(calls=0, examples=0)
    SEEN.clear()
    started = time.monotonic()
    run_state_machine_as_test(
        machine_class,
        settings=hsettings(
            max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        ),
    )
    print(f"\n{machine_class.__name__}: {STATS['calls']} calls across {STATS['examples']} examples"
          f" in {time.monotonic() - started:.1f}s")
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(SEEN.items())))
    # The property is only as strong as the number of calls it made: keep it from shrinking silently.
    assert STATS["calls"] >= min_calls, f"only {STATS['calls']} calls; raise the examples or steps"
