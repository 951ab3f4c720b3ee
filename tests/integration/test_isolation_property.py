"""Property: no use case reads or changes memory outside the caller's visibility (DESIGN §1).

A hypothesis state machine builds a world (`tests.support.isolation_world`): 3-4 tenants of two
agents, two domains with random grants, callers of every role (direct, and from real API keys
resolved by `services.auth.Authenticator`, one of them revoked) and memories of every scope, kind
and layer whose sessions, users and entities are shared across tenants. It then makes random
calls, each with a random caller and targets taken from *any* tenant, of every use case that
reads or changes memory:

    `services.write` (also replayed under one `core.requests.request_key`), `services.search`,
    `services.memories` (get, list, stats, history, update, feedback), `services.forget`
    (`services.memories.changeable` checks the ids feedback and forget name), `services.erasure`
    (erasure of a user: a tenant admin reaches every agent of its tenant, other keys what they may
    change, never another tenant), `services.working`,
    `services.reflect`, `services.operations` and the turn windows of `services.context`,

over PostgreSQL, where queries carry `stores.postgres.sql.visibility` (or `writable`) and a
caller's transactions run in `stores.postgres.session.caller_session` as a restricted role under
row-level security, and Redis (`stores.redis.working`). Each rule is a method marked `@action`;
`step` opens them all. Results are checked against the oracle of the rule
(`tests.support.isolation_oracle`), and changes against database snapshots taken before and
after each changing call (`tests.support.isolation_snapshots`). After every call:

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
     `index`;
  5. a request id sent again by the same caller returns its first write and stores nothing
     new; the same id and body from another caller is a write of its own, never the first's.

Reproducible (derandomized, no example database) and bounded: MAX_EXAMPLES worlds of STEPS
calls, at least MIN_CALLS calls in all, which the test asserts so it cannot shrink silently (the
seed follows the machine's source, so an edit of it changes what is drawn, not how much).
To see it fail, break the rule in-process: drop the tenant condition from
`stores.postgres.sql.visibility` *and* make `stores.postgres.session.caller_session` yield a plain
transaction (row-level security alone still hides a broken predicate, which is its purpose);
make `core.requests.request_key` ignore the caller; or let `services.memories.changeable` skip
the write check.
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest_asyncio
from hypothesis import HealthCheck, settings as hsettings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from memplane_server.core.caller import Caller, Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Status
from memplane_server.core.requests import RequestKey, request_key
from memplane_server.services.context import ContextService
from memplane_server.services.forget import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.operations import OperationsService
from memplane_server.core.reflection import ReflectInput, Task
from memplane_server.services.search import SearchQuery, SearchService
from memplane_server.services.working import WorkingService
from memplane_server.services.write import WriteService
from tests.support import isolation_inputs as inputs
from tests.support.services import erasure_service, reflect_service
from tests.support.isolation_inputs import DraftSpec, FilterSpec, OperationPick, Pick, Who
from tests.support.isolation_oracle import (
    WRITING_ROLES, Mem, Names, Oracle, OperationTarget, Target, Violation, can_change, can_read, matches, statuses_of,
    write_problem,
)
from tests.support.isolation_snapshots import Snapshot, check_unchanged, take_snapshot
from tests.support.isolation_world import DIRECT, ENTITIES, QUERIES, SESSIONS, USERS, World, build_world, seed_world

# CI budget: at least MIN_CALLS service calls in well under 90 s on 2 cores. A longer soak:
# MEMPLANE_ISOLATION_EXAMPLES=400 (a different seed too: it changes what is generated).
MAX_EXAMPLES = int(os.environ.get("MEMPLANE_ISOLATION_EXAMPLES", "40"))
FEEDBACK_ON = {"search_feedback_docs": 3, "search_feedback_vector": 1.0, "search_feedback_terms": 10}
STEPS = 50
MIN_CALLS = 2000

STATS = {"calls": 0, "examples": 0}
# What the run exercised, printed at the end: calls per use case and the interesting cases.
SEEN: Counter = Counter()

# Use cases the machine calls: name -> strategies of its arguments. One rule draws among them
# uniformly (hypothesis' swarm testing would switch whole use cases off for an example, which
# leaves a bounded run with uneven coverage).
ACTIONS: dict[str, dict[str, st.SearchStrategy]] = {}


def action(**arguments: st.SearchStrategy):
    def register(method):
        ACTIONS[method.__name__] = arguments
        return method

    return register


class IsolationMachine(RuleBasedStateMachine):
    deps: Any = None
    loop: asyncio.AbstractEventLoop | None = None
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

    # Deferred: the actions are registered below, as the class body defines them.
    @rule(step=st.deferred(lambda: st.one_of(
        [st.tuples(st.just(name), st.fixed_dictionaries(arguments)) for name, arguments in ACTIONS.items()])))
    def call(self, step: tuple[str, dict]) -> None:
        name, drawn = step
        SEEN["rule " + name] += 1
        self.loop.run_until_complete(self.step(name, drawn))

    # -- the opening every rule shares

    async def step(self, name: str, drawn: dict) -> None:
        """Resolves what was drawn, then runs the rule: callers first, in order (the step ends there
        if one is the revoked key, after checking it is refused), then targets, filters and drafts
        as the first caller would send them in this world."""
        callers: dict[str, Caller | None] = {}
        previous = None
        for key in ACTIONS[name]:  # in the rule's order: hypothesis shuffles the keys of a drawn dict
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
                     erasing: tuple[str, bool] | None = None):
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
                        erasing=erasing)
        self.register_refresh_jobs(what, before, after)
        self.oracle.refresh(after.rows)
        return result, err

    def register_refresh_jobs(self, what: str, before: Snapshot, after: Snapshot) -> None:
        """A summary whose source changed (turned stale, or erased with a hard-forgotten source) gets a
        refresh_summary job queued by the triggers of migrations 0009/0010, in the summary's own
        tenant whoever made the change: the oracle learns them as that tenant's operations."""
        for ident in after.jobs.keys() - before.jobs.keys():
            _, tenant, _, _, kind, summary_id = after.jobs[ident]
            if kind != "refresh_summary":
                continue  # the calls that queue other operations register them
            summary = self.oracle.mems.get(uuid.UUID(summary_id)) if summary_id else None
            if summary is None or summary.kind is not Kind.SUMMARY or summary.tenant != tenant:
                raise Violation(f"{what}: a refresh_summary job appeared in {self.names.tenant(tenant)}"
                                f" for no summary of that tenant: {after.jobs[ident]}")
            self.oracle.ops[ident] = tenant

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

    # -- rules: writes

    @action(caller=inputs.callers, drafts=st.lists(inputs.drafts, min_size=1, max_size=3))
    async def write(self, caller: Caller, drafts: list[MemoryDraft]) -> None:
        _, err = await self.write_between_snapshots("Write", caller, drafts)
        self.check_write("Write", caller, drafts, err)

    @action(first=inputs.callers, second=inputs.resenders,
            drafts=st.lists(inputs.persistent_drafts, min_size=1, max_size=2))
    async def replay(self, first: Caller, second: Caller, drafts: list[MemoryDraft]) -> None:
        """One request id and body sent by two callers: the same caller gets its first answer
        again (nothing stored again); another caller gets a write of its own, never the first's.
        Answers are told apart by when their memories last changed: a write of its own inserts
        or observes again, so it changes every memory it returns; a replay changes none."""
        request_id, body = str(uuid.uuid4()), repr(drafts).encode()
        same = (first.tenant_id, first.key_id, first.agent_id) == (second.tenant_id, second.key_id, second.agent_id)
        SEEN["replayed by " + ("the same caller" if same else "another caller of the tenant"
                               if first.tenant_id == second.tenant_id else "another tenant")] += 1
        answers = []
        for caller in (first, second):
            key = request_key(caller, "Write", request_id, body)
            records, err = await self.write_between_snapshots("Write(replay)", caller, drafts, key)
            self.check_write("Write(replay)", caller, drafts, err)
            answers.append(None if err else [(r.id, r.updated_at) for r in records])
        if answers[0] is None:
            return
        if same and answers[1] != answers[0]:
            raise Violation(f"a repeated request by {self.names.who(first)} was stored again: {answers}")
        if not same and answers[1] == answers[0]:
            raise Violation(f"{self.names.who(second)} got the answer to the same request of {self.names.who(first)}")

    @action(seeds=st.lists(inputs.seeds, min_size=1, max_size=3), twice=st.booleans())
    async def remember(self, seeds: list, twice: bool) -> None:
        """Writes that are allowed, so the world keeps growing while other rules delete; written
        twice, the same things are observed again (or become near-duplicates for Reflect)."""
        for (tenant, author), drafts in [*self.world.batches(seeds).items()] * (2 if twice else 1):
            caller = self.world.direct[(tenant, author)]
            _, err = await self.write_between_snapshots("Write", caller, drafts)
            self.check_write("Write", caller, drafts, err)

    # -- rules: reads

    @action(caller=inputs.callers, query=st.sampled_from(QUERIES), memory_filter=inputs.search_filters,
            top_k=st.sampled_from([0, 5, 50]))
    async def search(self, caller: Caller, query: str, memory_filter: MemoryFilter, top_k: int) -> None:
        # Pseudo-relevance feedback is off by default; on here, so its second pass is covered too.
        service = SearchService(replace(self.deps, settings=self.deps.settings.model_copy(update=FEEDBACK_ON)))
        hits, err = await self.attempt(service.search(caller, SearchQuery(query, filter=memory_filter, top_k=top_k)))
        # Usage counters are updated in the background; let them land before the next snapshot.
        await asyncio.gather(*getattr(service, "_background", ()), return_exceptions=True)
        self.check_ok("Search", caller, err)
        working = [h.memory for h in hits if h.memory.layer is Layer.WORKING]
        for r in working:
            self.check_working_item("Search", caller, memory_filter.session_id, str(r.id), r.tenant_id, r.agent_id,
                                    r.session_id)
        self.check_selected("Search", caller, [h.memory for h in hits if h.memory.layer is not Layer.WORKING],
                            memory_filter)

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

    @action(caller=inputs.callers, target=inputs.targets)
    async def get(self, caller: Caller, target: Target) -> None:
        service = MemoriesService(self.deps)
        record, err = await self.attempt(service.get(caller, target.id))
        if self.oracle.readable(caller, target.known):
            if err is not None or str(record.id) != target.id:
                raise Violation(f"GetMemory of a visible {self.names.describe(target.known)}"
                                f" by {self.names.who(caller)}: {err!r}")
            self.check_visible("GetMemory", caller, target.known.id, record)
        else:
            await self.check_hidden("GetMemory", caller, target.known, err, lambda i: service.get(caller, i))

    @action(caller=inputs.callers, memory_filter=inputs.filters, page_size=st.sampled_from([0, 1, 3, 7]))
    async def list_memories(self, caller: Caller, memory_filter: MemoryFilter, page_size: int) -> None:
        seen: list = []
        token = ""
        for _ in range(4):
            result, err = await self.attempt(MemoriesService(self.deps).list(caller, memory_filter, page_size, token))
            self.check_ok("ListMemories", caller, err)
            page, token = result
            self.check_selected("ListMemories", caller, page, memory_filter)
            seen.extend(r.id for r in page)
            if not token:
                break
        if len(seen) != len(set(seen)):
            raise Violation("ListMemories: an item on two pages")
        if not token:
            wanted = statuses_of(memory_filter, all_by_default=False)
            expected = {m.id for m in self.oracle.selected(caller, memory_filter, wanted)}
            if set(seen) != expected:
                raise Violation(f"ListMemories for {self.names.who(caller)} with {memory_filter}: missing "
                                f"{[self.names.describe(self.oracle.mems[i]) for i in expected - set(seen)]}")

    @action(caller=inputs.callers, memory_filter=inputs.filters)
    async def stats(self, caller: Caller, memory_filter: MemoryFilter) -> None:
        out, err = await self.attempt(MemoriesService(self.deps).stats(caller, memory_filter))
        self.check_ok("MemoryStats", caller, err)
        visible = self.oracle.visible(caller)
        if out.total > len(visible):
            raise Violation(f"MemoryStats: {out.total} counted, {self.names.who(caller)} sees only {len(visible)}")
        expected = self.oracle.selected(caller, memory_filter, statuses_of(memory_filter, all_by_default=True))
        by_scope = dict(Counter(m.scope for m in expected))
        if out.total != len(expected) or out.by_scope != by_scope:
            raise Violation(f"MemoryStats for {self.names.who(caller)} with {memory_filter}: {out.total}"
                            f" {out.by_scope}, expected {len(expected)} {by_scope}")

    @action(caller=inputs.callers, target=inputs.targets, page_size=st.sampled_from([0, 2]))
    async def history_of_memory(self, caller: Caller, target: Target, page_size: int) -> None:
        service = MemoriesService(self.deps)

        def call(memory_id):
            return service.history(caller, memory_id=memory_id, entity=None, attribute=None, page_size=page_size,
                                   page_token="")

        result, err = await self.attempt(call(target.id))
        if self.oracle.readable(caller, target.known):
            if err is not None:
                raise Violation(f"GetHistory of a visible {self.names.describe(target.known)}"
                                f" by {self.names.who(caller)}: {err!r}")
            entries, _ = result
            if not entries or any(e.memory_id != target.known.id for e in entries):
                raise Violation(f"GetHistory of {target.id}: entries {[e.memory_id for e in entries]}")
        else:
            await self.check_hidden("GetHistory", caller, target.known, err, call)

    @action(caller=inputs.callers, entity=st.sampled_from(ENTITIES))
    async def history_of_entity(self, caller: Caller, entity: str) -> None:
        result, err = await self.attempt(MemoriesService(self.deps).history(
            caller, memory_id=None, entity=entity, attribute=None, page_size=500, page_token=""))
        self.check_ok("GetHistory(entity)", caller, err)
        for e in result[0]:
            m = self.check_visible("GetHistory(entity)", caller, e.memory_id)
            if m.entity != entity or e.snapshot.tenant_id != m.tenant:
                raise Violation(f"GetHistory(entity={entity}) returned {self.names.describe(m)} about {m.entity}")

    @action(caller=inputs.callers, session=st.sampled_from(SESSIONS))
    async def read_working(self, caller: Caller, session: str) -> None:
        result, err = await self.attempt(WorkingService(self.deps, WriteService(self.deps)).read(caller, session))
        self.check_ok("ReadWorking", caller, err)
        _, items, _ = result
        for i in items:
            self.check_working_item("ReadWorking", caller, session, i.id, i.tenant_id, i.agent_id, i.session_id)
        expected = self.oracle.working_items(caller, session)
        if {i.id for i in items} != expected:
            raise Violation(f"ReadWorking for {self.names.who(caller)} in {session}: {len(items)} items,"
                            f" expected {len(expected)}")

    # -- rules: changes

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

    @action(caller=inputs.callers, targets=st.lists(inputs.targets, min_size=1, max_size=2), useful=st.booleans())
    async def feedback(self, caller: Caller, targets: list[Target], useful: bool) -> None:
        service = MemoriesService(self.deps)
        ids = [t.id for t in targets]
        result, err = await self.mutate("Feedback", caller, service.feedback(caller, ids, useful, "property"))
        blocked = self.first_unchangeable(caller, targets)
        if caller.role not in WRITING_ROLES:
            self.check_error("Feedback", caller, err, {Code.PERMISSION_DENIED})
        elif blocked is None:
            if err is not None or [r.id for r in result] != [t.known.id for t in targets]:
                raise Violation(f"Feedback on memories {self.names.who(caller)} may change: {err!r}")
        elif self.oracle.readable(caller, blocked.known):
            # Only a memory the caller can read may say it is read-only.
            self.check_error("Feedback", caller, err, {Code.NOT_FOUND, Code.PERMISSION_DENIED})
        elif len(targets) == 1:
            await self.check_hidden("Feedback", caller, blocked.known, err,
                                    lambda i: service.feedback(caller, [i], useful, "twin"))
        else:
            self.check_error("Feedback", caller, err, {Code.NOT_FOUND})

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

    @action(caller=inputs.callers, memory_filter=inputs.forget_filters, hard=st.booleans(), dry_run=st.booleans())
    async def forget_filter(self, caller: Caller, memory_filter: MemoryFilter, hard: bool, dry_run: bool) -> None:
        expected = self.oracle.forgettable(caller, memory_filter, hard=hard)
        result, err = await self.mutate(
            "Forget(filter)", caller,
            ForgetService(self.deps).forget(caller, ids=None, f=memory_filter, hard=hard, dry_run=dry_run, reason="p"),
            dry_run=dry_run,
        )
        if not memory_filter.narrows() and caller.role in WRITING_ROLES:
            self.check_error("Forget(filter)", caller, err, {Code.INVALID_ARGUMENT})
        else:
            self.check_forgotten("Forget(filter)", caller, result, err, expected)

    @action(caller=inputs.callers, user=st.sampled_from(USERS), dry_run=st.booleans())
    async def erase_user(self, caller: Caller, user: str, dry_run: bool) -> None:
        """Erasure of a user: a tenant admin reaches the user's memories of every agent of its tenant,
        any other writing key what it may change; never another tenant's (the same user id there is
        another person), never for a read-only key."""
        wide = caller.role is Role.TENANT_ADMIN
        expected = {m.id for m in self.oracle.mems.values()
                    if m.exists and m.tenant == caller.tenant_id and m.user == user and (wide or can_change(caller, m))}
        result, err = await self.mutate(
            "Forget(erase_user_id)", caller, erasure_service(self.deps).erase(caller, user, mode="sync", dry_run=dry_run),
            dry_run=dry_run, erasing=(user, wide))
        if caller.role not in WRITING_ROLES:
            self.check_error("Forget(erase_user_id)", caller, err, {Code.PERMISSION_DENIED})
            return
        self.check_ok("Forget(erase_user_id)", caller, err)
        if set(result.ids) != expected or result.receipt.counts["postgres.memories"] != len(expected):
            describe = self.names.describe
            raise Violation(f"Forget(erase_user_id) by {self.names.who(caller)}:"
                            f" extra {[describe(self.oracle.mems[i]) for i in set(result.ids) - expected]},"
                            f" missing {[describe(self.oracle.mems[i]) for i in expected - set(result.ids)]}")

    @action(caller=inputs.callers, session=st.sampled_from(SESSIONS), direct=st.booleans())
    async def reflect_session(self, caller: Caller, session: str, direct: bool) -> None:
        """Reflection writes a summary of the session, as the caller (the use case, or its runner directly)."""
        summary = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.SUMMARY, content="summary",
                              session_id=session, source_type="session", source_id=session)
        service, request = reflect_service(self.deps), ReflectInput(session_id=session, mode="sync")
        _, err = await self.mutate(
            "ReflectService.run(session)" if direct else "Reflect(session)", caller,
            service.run(caller, request) if direct else service.reflect(caller, request),
            new_from=lambda outcome: self.oracle.register(caller, outcome.memories, [summary] * len(outcome.memories)),
        )
        if caller.role not in WRITING_ROLES:
            self.check_error("Reflect(session)", caller, err, {Code.PERMISSION_DENIED})
        elif err is not None:
            self.check_error("Reflect(session)", caller, err, {Code.RESOURCE_EXHAUSTED})

    @action(caller=inputs.callers)
    async def reflect_task(self, caller: Caller) -> None:
        task = ReflectInput(task=Task(task_id="t1", request="ship it"), mode="async")
        op, err = await self.mutate("Reflect(task)", caller, reflect_service(self.deps).reflect(caller, task))
        if caller.role not in WRITING_ROLES:
            self.check_error("Reflect(task)", caller, err, {Code.PERMISSION_DENIED})
            return
        self.check_ok("Reflect(task)", caller, err)
        self.oracle.ops[op.id] = caller.tenant_id

    # -- rules: operations

    @action(caller=inputs.callers, target=inputs.operation_targets, cancel=st.booleans())
    async def operation(self, caller: Caller, target: OperationTarget, cancel: bool) -> None:
        service = OperationsService(self.deps)
        what = "CancelOperation" if cancel else "GetOperation"

        def call(operation_id):
            return service.cancel(caller, operation_id) if cancel else service.get(caller, operation_id)

        view, err = await (self.mutate(what, caller, call(target.id)) if cancel else self.attempt(call(target.id)))
        own_failures = frozenset({Code.PERMISSION_DENIED} if cancel and caller.role not in WRITING_ROLES else ())
        if target.owner == caller.tenant_id and not own_failures:
            if err is not None or str(view.id) != target.id:
                raise Violation(f"{what} of an own operation by {self.names.who(caller)}: {err!r}")
        else:
            await self.check_hidden(what, caller, target.owner, err, call, own_failures)

    @action(caller=inputs.callers)
    async def list_operations(self, caller: Caller) -> None:
        result, err = await self.attempt(OperationsService(self.deps).list(caller, None, 500, ""))
        self.check_ok("ListOperations", caller, err)
        got = {op.id for op in result[0]}
        expected = self.oracle.operations_of(caller.tenant_id)
        if got != expected:
            raise Violation(f"ListOperations for {self.names.who(caller)}:"
                            f" {len(got - expected)} foreign, {len(expected - got)} missing")


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
