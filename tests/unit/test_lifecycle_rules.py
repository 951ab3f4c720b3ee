"""Lifecycle rules: which rule a policy applies to a memory at a given time (core/forget/lifecycle.py)."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.forget.lifecycle import (
    DEFAULT_RULES,
    Candidate,
    KindRule,
    LifecyclePolicy,
    LifecycleReport,
    changes,
    check_policy,
    plan,
    policy_from_json,
    policy_to_json,
    value_of,
)
from memplane_server.core.model import Kind, Scope, Status

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
OFF = KindRule()


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def memory(kind: Kind = Kind.FACT, *, confidence: float = 0.9, uses: int = 0, last_used: float | None = None,
           **kw) -> Candidate:
    return Candidate(id=uuid.uuid4(), kind=kind, status=kw.pop("status", Status.ACTIVE), scope=Scope.GLOBAL,
                     agent_id=None, confidence=confidence, use_count=uses, created_at=T0,
                     last_used_at=day(last_used) if last_used is not None else None, **kw)


def only(kind: Kind, rule: KindRule, **kw) -> LifecyclePolicy:
    """A policy with every rule off but this kind's."""
    return LifecyclePolicy(archive_tasks_after_days=kw.pop("archive", 0.0),
                           rules={k: rule if k is kind else OFF for k in Kind}, **kw)


def test_ttl_removes_a_memory_once_it_is_that_old_whatever_its_use():
    policy = only(Kind.TURN, KindRule(ttl_days=30))
    m = memory(Kind.TURN, uses=50, last_used=29)
    assert changes(m, policy, day(29.9)) == []
    assert changes(m, policy, day(30)) == ["ttl"]


def test_unused_removes_only_below_the_confidence():
    policy = only(Kind.FACT, KindRule(unused_days=90, unused_below_confidence=0.5))
    assert changes(memory(confidence=0.4), policy, day(90)) == ["unused"]
    assert changes(memory(confidence=0.5), policy, day(365)) == []


def test_unused_days_count_from_the_last_use():
    policy = only(Kind.FACT, KindRule(unused_days=90, unused_below_confidence=0.5))
    m = memory(confidence=0.4, uses=1, last_used=60)
    assert changes(m, policy, day(149)) == []
    assert changes(m, policy, day(150)) == ["unused"]


def test_value_is_use_times_confidence_times_halving_recency():
    rule = KindRule(value_half_life_days=30, min_value=0.1)
    m = memory(Kind.EVENT, confidence=0.8, uses=3, last_used=10)
    assert value_of(m, rule, day(40)) == pytest.approx(4 * 0.8 * 0.5)


def test_value_eviction_keeps_the_used_longer_than_the_unused():
    policy = only(Kind.EVENT, KindRule(value_half_life_days=30, min_value=0.1))
    unused, used = memory(Kind.EVENT, confidence=0.8), memory(Kind.EVENT, confidence=0.8, uses=7)
    # 0.8 * 2^(-d/30) < 0.1 from d = 90; 8 * 0.8 * 2^(-d/30) < 0.1 from d = 180.
    assert changes(unused, policy, day(91)) == ["value"]
    assert changes(used, policy, day(91)) == []
    assert changes(used, policy, day(181)) == ["value"]


def test_a_memory_is_removed_by_one_rule_the_first_that_applies():
    policy = only(Kind.TURN, KindRule(ttl_days=10, unused_days=5, unused_below_confidence=1.0,
                                      value_half_life_days=1, min_value=0.5))
    assert changes(memory(Kind.TURN), policy, day(20)) == ["ttl"]


def test_rarely_used_confident_memories_are_demoted_and_restored_once_used():
    rule = KindRule(demote_after_days=60, demote_max_uses=1, demote_min_confidence=0.8, demote_weight=0.5)
    policy = only(Kind.LESSON, rule)
    m = memory(Kind.LESSON, confidence=0.9, uses=1, last_used=0)
    assert changes(m, policy, day(59)) == []
    assert changes(m, policy, day(60)) == ["demote"]
    demoted = replace(m, lifecycle_weight=0.5)
    assert changes(demoted, policy, day(61)) == []  # already at that weight: nothing to change
    assert changes(replace(demoted, use_count=2, last_used_at=day(61)), policy, day(62)) == ["restore"]


def test_unconfident_or_often_used_memories_are_not_demoted():
    rule = KindRule(demote_after_days=60, demote_max_uses=1, demote_min_confidence=0.8, demote_weight=0.5)
    policy = only(Kind.LESSON, rule)
    assert changes(memory(Kind.LESSON, confidence=0.7), policy, day(100)) == []
    assert changes(memory(Kind.LESSON, uses=2, last_used=0), policy, day(100)) == []


def test_often_used_doubted_memories_are_flagged_then_unflagged_when_believed():
    policy = only(Kind.FACT, KindRule(review_min_uses=5, review_below_confidence=0.6))
    m = memory(confidence=0.5, uses=5, last_used=1)
    assert changes(replace(m, use_count=4), policy, day(2)) == []
    assert changes(m, policy, day(2)) == ["review"]
    assert changes(replace(m, review_flagged=True), policy, day(3)) == []
    assert changes(replace(m, review_flagged=True, confidence=0.9), policy, day(3)) == ["unflag"]


def test_finished_task_episodes_are_archived_after_the_delay_but_not_what_was_learned():
    policy = only(Kind.TURN, OFF, archive=30)
    turn = memory(Kind.TURN, task_finished_at=day(10))
    assert changes(turn, policy, day(39)) == []
    assert changes(turn, policy, day(40)) == ["archive"]
    assert changes(memory(Kind.TURN), policy, day(400)) == []  # no task finished
    assert changes(memory(Kind.LESSON, task_finished_at=day(10)), policy, day(400)) == []


def test_archived_memories_answer_to_their_ttl_only():
    policy = only(Kind.TURN, KindRule(ttl_days=100, unused_days=5, unused_below_confidence=1.0,
                                      demote_after_days=1, demote_max_uses=9, demote_min_confidence=0.1,
                                      demote_weight=0.5), archive=1)
    archived = memory(Kind.TURN, status=Status.ARCHIVED, task_finished_at=day(0))
    assert changes(archived, policy, day(99)) == []
    assert changes(archived, policy, day(100)) == ["ttl"]


def test_default_rules_keep_semantic_memory_a_year_and_evict_unused_episodes_sooner():
    policy = LifecyclePolicy()
    fact, turn = memory(Kind.FACT, confidence=0.9), memory(Kind.TURN, confidence=0.9)
    assert "unused" not in changes(fact, policy, day(365 * 3)) and "value" not in changes(fact, policy, day(365 * 3))
    assert changes(turn, policy, day(150)) == ["value"]
    assert changes(memory(Kind.FACT, confidence=0.2), policy, day(365)) == ["unused"]


def test_a_kind_without_its_own_rule_takes_the_default():
    policy = LifecyclePolicy(rules={Kind.FACT: OFF})
    assert policy.rule(Kind.FACT) == OFF
    assert policy.rule(Kind.TURN) == DEFAULT_RULES[Kind.TURN]


@pytest.mark.parametrize("bad, field", [
    (KindRule(ttl_days=-1), "ttl_days"),
    (KindRule(ttl_days=float("nan")), "ttl_days"),
    (KindRule(unused_days=5, unused_below_confidence=1.5), "unused_below_confidence"),
    (KindRule(unused_days=5), "unused_below_confidence"),
    (KindRule(value_half_life_days=30), "min_value"),
    (KindRule(review_min_uses=-1, review_below_confidence=0.5), "review_min_uses"),
    (KindRule(demote_after_days=10, demote_weight=1.0), "demote_weight"),
    (KindRule(demote_weight=0.0), "demote_weight"),
])
def test_bad_values_are_refused_with_the_field_named(bad, field):
    with pytest.raises(MemplaneError) as caught:
        check_policy(LifecyclePolicy(rules={Kind.FACT: bad}))
    assert caught.value.code.value == "INVALID_ARGUMENT"
    assert caught.value.reason == "INVALID_LIFECYCLE_POLICY"
    assert field in caught.value.message


def test_the_defaults_pass_their_own_checks_and_survive_storage():
    policy = LifecyclePolicy(enabled=True, hard_delete=True).effective()
    check_policy(policy)
    assert policy_from_json(True, policy_to_json(policy)) == policy


def test_a_plan_counts_every_rule_and_lists_the_ids():
    policy = only(Kind.TURN, KindRule(ttl_days=10))
    old, new = memory(Kind.TURN), replace(memory(Kind.TURN), created_at=day(5))
    report = LifecycleReport("t", day(10), dry_run=True)
    decided = plan([old, new], policy, day(10), report)
    assert decided["ttl"] == [old]
    assert report.examined == 2 and report.counts["ttl"] == 1 and report.ids["ttl"] == [old.id]
    assert "ttl 1" in report.summary()


def test_a_memory_that_feeds_one_in_service_is_kept_from_disuse_but_not_past_its_ttl():
    policy = only(Kind.TURN, KindRule(ttl_days=400, unused_days=30, unused_below_confidence=1.0,
                                      value_half_life_days=1, min_value=0.5))
    source = memory(Kind.TURN, confidence=0.5, feeds=True)
    assert changes(source, policy, day(300)) == []
    assert changes(source, policy, day(400)) == ["ttl"]
