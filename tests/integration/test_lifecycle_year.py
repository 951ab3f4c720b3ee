"""Lifecycle policies over a simulated year: an injected clock moves a month at a
time, searches bump the usage of some memories, and each month a dry run and then the real run of
the tenant's policy are made at the same time. Every rule fires on the memory and in the month it
should, what remains at the end is what each rule leaves, and every dry run named exactly what the
real run then did."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.forget.lifecycle import KindRule, LifecyclePolicy, report_to_json
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.services import lifecycle_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

TENANT_ADMIN = Role.TENANT_ADMIN
OFF = KindRule()
POLICY = LifecyclePolicy(
    enabled=True, archive_tasks_after_days=60,
    rules={
        Kind.TURN: KindRule(ttl_days=90),
        Kind.EVENT: KindRule(value_half_life_days=30, min_value=0.1),
        Kind.FACT: KindRule(unused_days=120, unused_below_confidence=0.5, review_min_uses=3,
                            review_below_confidence=0.8),
        Kind.LESSON: KindRule(demote_after_days=60, demote_max_uses=0, demote_min_confidence=0.8, demote_weight=0.5),
        Kind.SUMMARY: OFF, Kind.PROCEDURE: OFF, Kind.PREFERENCE: OFF,
    },
)


class SimClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def admin_of(tenant: str) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=TENANT_ADMIN, tenant_id=tenant, agent_id=None)


# Texts far apart: near-duplicate facts would supersede each other at write time (by chance, as
# the similarity of "<name> note <random hex>" texts varies), and a superseded fact has no rules.
TEXTS = {
    "turn": "Can we move the standup to Thursday?", "cold_event": "The printer on floor two jammed",
    "hot_event": "Release 4.2 shipped to production", "task_event": "The invoice export finished",
    "doubtful_fact": "The office cat might be called Miso", "sure_fact": "Payroll runs on the last Friday",
    "doubted_fact": "The VPN gateway is in Frankfurt", "idle_lesson": "Archive old tickets before a migration",
    "used_lesson": "Always pin dependency versions in CI", "procedure": "To rotate keys, drain the queue first",
    "task_summary": "Exported the March invoices", "private_turn": "Remind me to call the bank",
}


def draft(name: str, kind: Kind, *, confidence: float = 1.0, session: str | None = None, scope=Scope.GLOBAL,
          source: tuple[str, str] | None = None) -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=None, agent_id=None, layer=None, kind=kind,
                       content=f"{TEXTS.get(name, name)} ({uuid.uuid4().hex[:8]})", tags=(name,), confidence=confidence,
                       session_id=session, source_type=source[0] if source else None,
                       source_id=source[1] if source else None)


async def status_of(deps, memory_id) -> tuple[str, float, bool]:
    row = await deps.memories.pool.fetchrow(
        "SELECT status, lifecycle_weight, review_flagged_at IS NOT NULL AS flagged FROM memories WHERE id = $1",
        memory_id)
    return row["status"], row["lifecycle_weight"], row["flagged"]


async def test_a_year_of_monthly_runs_applies_each_rule_when_due_and_every_dry_run_predicts_the_real_one(
        deps, make_tenant):
    clock = SimClock(datetime.now(timezone.utc))
    sim = replace(deps, clock=clock)
    world = await make_tenant()
    writes, searches, lifecycle = WriteService(sim), SearchService(sim), lifecycle_service(sim)
    task = f"task-{uuid.uuid4().hex[:8]}"
    names = ["turn", "cold_event", "hot_event", "task_event", "doubtful_fact", "sure_fact", "doubted_fact",
             "idle_lesson", "used_lesson", "procedure", "task_summary"]
    written = await writes.write(world.writer, [
        draft("turn", Kind.TURN), draft("cold_event", Kind.EVENT), draft("hot_event", Kind.EVENT),
        draft("task_event", Kind.EVENT, session=task), draft("doubtful_fact", Kind.FACT, confidence=0.4),
        draft("sure_fact", Kind.FACT, confidence=0.9), draft("doubted_fact", Kind.FACT, confidence=0.75),
        draft("idle_lesson", Kind.LESSON, confidence=0.9), draft("used_lesson", Kind.LESSON, confidence=0.9),
        draft("procedure", Kind.PROCEDURE), draft("task_summary", Kind.SUMMARY, session=task, source=("task", task)),
    ])
    ids = {name: m.id for name, m in zip(names, written)}
    [private_turn] = await writes.write(world.agent1, [draft("private_turn", Kind.TURN, scope=Scope.PRIVATE)])
    ids["private_turn"] = private_turn.id
    names.append("private_turn")
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, POLICY)
    clock.now = datetime.now(timezone.utc)  # month 0 starts once everything is written

    fired: dict[str, tuple[str, int]] = {}  # memory -> (rule, month)
    for month in range(1, 13):
        clock.now += timedelta(days=30)
        for name in ("hot_event", "doubted_fact", "used_lesson"):
            hits = await searches.search(world.writer, SearchQuery(name, MemoryFilter(tags=(name,)), top_k=1))
            assert [h.memory.id for h in hits] == [ids[name]]
        await searches.usage.flush()  # the usage counters, written a moment after the searches
        dry = await lifecycle.run_for(world.tenant_id, dry_run=True)
        real = await lifecycle.run_for(world.tenant_id, dry_run=False)
        predicted, done = report_to_json(dry), report_to_json(real)
        assert predicted.pop("dry_run") and not done.pop("dry_run")
        assert predicted == done, f"month {month}"
        for rule, rule_ids in real.ids.items():
            for memory_id in rule_ids:
                name = next(n for n, i in ids.items() if i == memory_id)
                assert name not in fired, f"{name} changed twice: {fired[name]} and {rule} in month {month}"
                fired[name] = (rule, month)

    assert fired == {
        "task_event": ("archive", 2), "task_summary": ("archive", 2),  # the task finished in month 0
        "idle_lesson": ("demote", 2),  # idle 60 days, never used, confident
        "turn": ("ttl", 3), "private_turn": ("ttl", 3),  # 90 days old
        "doubted_fact": ("review", 3),  # its third use came in month 3
        "cold_event": ("value", 4),  # 2^(-120/30) < 0.1, unused
        "doubtful_fact": ("unused", 4),  # 120 days unused, confidence 0.4
    }
    state = {name: await status_of(deps, memory_id) for name, memory_id in ids.items()}
    assert state == {
        "turn": ("deleted", 1.0, False), "private_turn": ("deleted", 1.0, False),
        "cold_event": ("deleted", 1.0, False), "doubtful_fact": ("deleted", 1.0, False),
        "hot_event": ("active", 1.0, False), "sure_fact": ("active", 1.0, False),
        "doubted_fact": ("active", 1.0, True), "idle_lesson": ("active", 0.5, False),
        "used_lesson": ("active", 1.0, False), "procedure": ("active", 1.0, False),
        "task_event": ("archived", 1.0, False), "task_summary": ("archived", 1.0, False),
    }


async def test_removals_are_forgets_with_history_audit_and_change_events(deps, make_tenant):
    world = await make_tenant()
    [turn] = await WriteService(deps).write(world.writer, [draft("turn", Kind.TURN)])
    lifecycle = lifecycle_service(deps)
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id,
                               LifecyclePolicy(rules={k: KindRule(ttl_days=10) for k in Kind}))
    report = await lifecycle.run_for(world.tenant_id, dry_run=False,
                                     now=datetime.now(timezone.utc) + timedelta(days=11))
    assert report.ids["ttl"] == [turn.id]
    pool = deps.memories.pool
    assert await pool.fetchval(
        "SELECT reason FROM memory_history WHERE memory_id = $1 AND action = 'deleted'", turn.id) == "lifecycle policy: ttl"
    assert await pool.fetchval(
        "SELECT count(*) FROM memory_changes WHERE memory_id = $1 AND change = 'forgotten'", turn.id) == 1
    actions = {r["action"] for r in await pool.fetch(
        "SELECT action FROM audit_events WHERE tenant_id = $1 AND actor_key_id = 'system:lifecycle'", world.tenant_id)}
    assert actions == {"Forget", "Lifecycle"}


async def test_hard_delete_policies_erase_what_they_remove(deps, make_tenant):
    world = await make_tenant()
    [turn] = await WriteService(deps).write(world.writer, [draft("turn", Kind.TURN)])
    lifecycle = lifecycle_service(deps)
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id,
                               LifecyclePolicy(hard_delete=True, rules={k: KindRule(ttl_days=1) for k in Kind}))
    await lifecycle.run_for(world.tenant_id, dry_run=False, now=datetime.now(timezone.utc) + timedelta(days=2))
    assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", turn.id) == 0


async def test_archived_and_demoted_memories_leave_default_search_or_rank_lower_and_say_why(deps, make_tenant):
    world = await make_tenant()
    writes, searches, lifecycle = WriteService(deps), SearchService(deps), lifecycle_service(deps)
    task = f"task-{uuid.uuid4().hex[:8]}"
    event, lesson = await writes.write(world.writer, [
        draft("archived_event", Kind.EVENT, session=task), draft("faded_lesson", Kind.LESSON, confidence=0.9)])
    await writes.write(world.writer, [draft("summary", Kind.SUMMARY, session=task, source=("task", task))])
    policy = LifecyclePolicy(archive_tasks_after_days=1, rules={
        k: KindRule(demote_after_days=1, demote_max_uses=0, demote_min_confidence=0.5, demote_weight=0.25)
        for k in Kind})
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, policy)
    report = await lifecycle.run_for(world.tenant_id, dry_run=False, now=datetime.now(timezone.utc) + timedelta(days=2))
    assert event.id in report.ids["archive"] and report.ids["demote"] == [lesson.id]

    assert await searches.search(world.writer, SearchQuery("archived_event", MemoryFilter(tags=("archived_event",)))) == []
    asked = await searches.search(world.writer, SearchQuery(
        "archived_event", MemoryFilter(tags=("archived_event",), statuses=(Status.ARCHIVED,))))
    assert [h.memory.id for h in asked] == [event.id]
    [hit] = await searches.search(world.writer, SearchQuery("faded_lesson", MemoryFilter(tags=("faded_lesson",)),
                                                             explain=True))
    factor = next(c for c in hit.explanation if c.name == "lifecycle")
    assert factor.value == 0.25 and "lower weight" in factor.detail


async def test_flagged_memories_are_listed_by_the_review_filter(deps, make_tenant):
    world = await make_tenant()
    [fact, _] = await WriteService(deps).write(world.writer, [draft("doubted", Kind.FACT, confidence=0.75),
                                                              draft("other", Kind.FACT, confidence=0.75)])
    await deps.memories.mark_used(world.writer, [fact.id, fact.id])
    await deps.memories.mark_used(world.writer, [fact.id])
    lifecycle = lifecycle_service(deps)
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, LifecyclePolicy(
        rules={k: KindRule(review_min_uses=2, review_below_confidence=0.8) for k in Kind}))
    await lifecycle.run_for(world.tenant_id, dry_run=False)
    listed = await deps.memories.list(world.writer, MemoryFilter(flagged_for_review=True), limit=10, after=None)
    assert [m.id for m in listed] == [fact.id] and listed[0].review_flagged_at is not None


async def test_a_source_of_a_fact_in_service_is_kept_from_eviction_until_its_ttl_takes_both(deps, make_tenant):
    world = await make_tenant()
    writes, lifecycle = WriteService(deps), lifecycle_service(deps)
    [event] = await writes.write(world.writer, [draft("observed", Kind.EVENT)])
    [fact] = await writes.write(world.writer, [replace(draft("learned", Kind.FACT), derived_from=(event.id,))])
    await lifecycle.set_policy(admin_of(world.tenant_id), world.tenant_id, LifecyclePolicy(rules={
        **{k: OFF for k in Kind}, Kind.EVENT: KindRule(ttl_days=300, value_half_life_days=30, min_value=0.1)}))
    start = datetime.now(timezone.utc)
    evicted = await lifecycle.run_for(world.tenant_id, dry_run=False, now=start + timedelta(days=200))
    assert evicted.counts["value"] == 0 and (await status_of(deps, event.id))[0] == "active"
    expired = await lifecycle.run_for(world.tenant_id, dry_run=False, now=start + timedelta(days=301))
    assert expired.ids["ttl"] == [event.id]
    assert [(await status_of(deps, i))[0] for i in (event.id, fact.id)] == ["deleted", "deleted"]  # a forget's cascade
