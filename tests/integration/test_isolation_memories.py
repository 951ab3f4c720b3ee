"""Isolation property (tests/support/isolation_machine.py) over the use cases that read and change
single memories, working memory, reflection and operations:

    `services.write` replayed under one `core.requests.request_key`, `services.memories` (get,
    list, stats, history, feedback; `services.memories.changeable` checks the ids feedback
    names), `services.working`, `services.reflect` (a session's summary is derived, through
    memory_sources, from memories the caller reads only) and `services.operations`,

besides the shared rules (writes, updates, forgets by id, turn windows, no-result signals).
Also checked here:

  5. a request id sent again by the same caller returns its first write and stores nothing
     new; the same id and body from another caller is a write of its own, never the first's.

To see it fail, make `core.requests.request_key` ignore the caller, or let
`services.memories.changeable` skip the write check.
"""
from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.access.requests import request_key
from memplane_server.core.errors import Code
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.core.reflection.reflection import ReflectInput, Task
from memplane_server.services.memories import MemoriesService
from memplane_server.services.operations import OperationsService
from memplane_server.services.working import WorkingService
from memplane_server.services.write.service import WriteService
from tests.support import isolation_inputs as inputs
from tests.support.isolation_machine import SEEN, action, machine, run_machine
from tests.support.isolation_oracle import (
    WRITING_ROLES,
    Op,
    OperationTarget,
    Target,
    Violation,
    sees_operation,
    statuses_of,
)
from tests.support.isolation_world import ENTITIES, SESSIONS
from tests.support.services import reflect_service


class MemoryRules:
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
        self.oracle.ops[op.id] = Op(caller.tenant_id, caller.agent_id, "reflect")

    @action(caller=inputs.callers, target=inputs.operation_targets, cancel=st.booleans())
    async def operation(self, caller: Caller, target: OperationTarget, cancel: bool) -> None:
        service = OperationsService(self.deps)
        what = "CancelOperation" if cancel else "GetOperation"

        def call(operation_id):
            return service.cancel(caller, operation_id) if cancel else service.get(caller, operation_id)

        view, err = await (self.mutate(what, caller, call(target.id)) if cancel else self.attempt(call(target.id)))
        own_failures = frozenset({Code.PERMISSION_DENIED} if cancel and caller.role not in WRITING_ROLES else ())
        if target.owner is not None and sees_operation(caller, target.owner) and cancel and not own_failures and (
                target.owner.type == "erase" and caller.role is not Role.TENANT_ADMIN):
            SEEN["an erasure's cancel refused to a key below admin"] += 1
            self.check_error(what, caller, err, {Code.PERMISSION_DENIED})
        elif target.owner is not None and sees_operation(caller, target.owner) and not own_failures:
            if err is not None or str(view.id) != target.id:
                raise Violation(f"{what} of an own operation by {self.names.who(caller)}: {err!r}")
        else:
            await self.check_hidden(what, caller, target.owner, err, call, own_failures)

    @action(caller=inputs.callers)
    async def list_operations(self, caller: Caller) -> None:
        result, err = await self.attempt(OperationsService(self.deps).list(caller, None, 500, ""))
        self.check_ok("ListOperations", caller, err)
        got = {op.id for op in result[0]}
        expected = self.oracle.operations_of(caller)
        if got != expected:
            raise Violation(f"ListOperations for {self.names.who(caller)}:"
                            f" {len(got - expected)} foreign, {len(expected - got)} missing")


MemoryMachine = machine("MemoryMachine", MemoryRules)


def test_no_read_or_change_of_a_memory_crosses_tenant_agent_or_domain(deps, session_loop):
    run_machine(MemoryMachine, deps, session_loop, examples=8, steps=50, min_calls=450)
