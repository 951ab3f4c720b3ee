"""Lifecycle policies: what a tenant keeps, demotes, flags, archives and removes as its
memories age, decided here without I/O from a policy, a memory's usage and a clock.

A run looks at each of the tenant's own (global and private) memories once and names at most one
removal rule for it, first match wins:
  ttl     written more than ttl_days ago;
  unused  not returned by a search (or, never used, not written) for unused_days, and confidence
          below unused_below_confidence;
  value   value = (1 + use_count) * confidence * 2 ** (-idle_days / value_half_life_days) below
          min_value, where idle_days counts from the last use (or the write, never used).
Removals are forgets, which take what was derived with them (migration 0010): so a memory that feeds
one in service (a fact extracted from a turn, a consolidation of a lesson; summaries are rebuilt
instead) is not removed for disuse, only by its TTL, a retention limit that its derivations share.
A memory that stays may be changed in place:
  archive an episodic memory (turn, event, summary) of a finished task (one that has a task summary),
          archive_tasks_after_days after it finished: kept, out of default search;
  review  used at least review_min_uses times with confidence below review_below_confidence:
          flagged for review (unflag when that no longer holds);
  demote  used at most demote_max_uses times, idle for demote_after_days, confidence at least
          demote_min_confidence: kept at demote_weight, which Search multiplies into its score
          (restore: weight back to 1 when that no longer holds, e.g. it was used again).
Archived memories are held to their TTL only: out of search, their use and value stand still.
Working memory is not here: Redis expires it by its own TTL (MEMPLANE_WORKING_TTL_SECONDS).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from ..errors import invalid
from ..model import KIND_LAYER, Kind, Layer, Scope, Status

Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    return datetime.now(timezone.utc)


REMOVAL_RULES = ("ttl", "unused", "value")
RULES = (*REMOVAL_RULES, "archive", "review", "unflag", "demote", "restore")
MAX_LISTED_IDS = 1000
MAX_DAYS = 36_500.0
MAX_USES = 1_000_000_000
DAY_SECONDS = 86_400.0
_ARCHIVED_KINDS = frozenset(k for k, layer in KIND_LAYER.items() if layer is Layer.EPISODIC)


@dataclass(frozen=True)
class KindRule:
    """The rules for one kind; a zero turns its rule off."""

    ttl_days: float = 0.0
    unused_days: float = 0.0
    unused_below_confidence: float = 0.0
    value_half_life_days: float = 0.0
    min_value: float = 0.0
    review_min_uses: int = 0
    review_below_confidence: float = 0.0
    demote_after_days: float = 0.0
    demote_max_uses: int = 0
    demote_min_confidence: float = 0.0
    demote_weight: float = 1.0


@dataclass(frozen=True)
class LifecyclePolicy:
    """A tenant's policy. enabled: the scheduled job runs it (RunLifecycle runs it either way).
    Kinds without a rule of their own take DEFAULT_RULES."""

    enabled: bool = False
    hard_delete: bool = False
    archive_tasks_after_days: float = 30.0
    rules: dict[Kind, KindRule] = field(default_factory=dict)

    def rule(self, kind: Kind) -> KindRule:
        return self.rules.get(kind) or DEFAULT_RULES[kind]

    def effective(self) -> "LifecyclePolicy":
        """The policy with every kind's rule spelled out."""
        return replace(self, rules={k: self.rule(k) for k in Kind})


# Episodic memory goes by age and use, semantic and procedural memory rarely: only when unused for
# a year and hardly believed; every kind is demoted when idle and flagged when doubted but used.
_EPISODIC = KindRule(unused_days=365, unused_below_confidence=0.5, value_half_life_days=30, min_value=0.05,
                     review_min_uses=10, review_below_confidence=0.5,
                     demote_after_days=60, demote_max_uses=1, demote_min_confidence=0.8, demote_weight=0.5)
_LASTING = KindRule(unused_days=365, unused_below_confidence=0.3,
                    review_min_uses=5, review_below_confidence=0.6,
                    demote_after_days=90, demote_max_uses=1, demote_min_confidence=0.8, demote_weight=0.7)
DEFAULT_RULES: dict[Kind, KindRule] = {
    Kind.TURN: _EPISODIC,
    Kind.EVENT: _EPISODIC,
    Kind.SUMMARY: replace(_EPISODIC, value_half_life_days=90),
    Kind.FACT: _LASTING,
    Kind.PREFERENCE: _LASTING,
    Kind.PROCEDURE: _LASTING,
    Kind.LESSON: _LASTING,
}


def _bad(name: str, why: str) -> Exception:
    return invalid("INVALID_LIFECYCLE_POLICY", f"{name} {why}", field=name)


def _days(value: float, name: str) -> None:
    if not (math.isfinite(value) and 0 <= value <= MAX_DAYS):
        raise _bad(name, f"must be a number of days from 0 to {MAX_DAYS:g}")


def _share(value: float, name: str) -> None:
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise _bad(name, "must be from 0 to 1")


def _uses(value: int, name: str) -> None:
    if not 0 <= value <= MAX_USES:
        raise _bad(name, f"must be from 0 to {MAX_USES}")


def check_rule(kind: Kind, r: KindRule) -> None:
    p = f"rules[{kind.value}]."
    for name in ("ttl_days", "unused_days", "value_half_life_days", "demote_after_days"):
        _days(getattr(r, name), p + name)
    for name in ("unused_below_confidence", "review_below_confidence", "demote_min_confidence"):
        _share(getattr(r, name), p + name)
    for name in ("review_min_uses", "demote_max_uses"):
        _uses(getattr(r, name), p + name)
    if not (math.isfinite(r.min_value) and 0 <= r.min_value <= MAX_USES):
        raise _bad(p + "min_value", "must be a non-negative number")
    if (r.value_half_life_days > 0) != (r.min_value > 0):
        raise _bad(p + "min_value", "and value_half_life_days turn value eviction on together (both > 0)"
                   " or off (both 0)")
    if (r.unused_days > 0) != (r.unused_below_confidence > 0):
        raise _bad(p + "unused_below_confidence", "and unused_days turn the unused rule on together or off together")
    if (r.review_min_uses > 0) != (r.review_below_confidence > 0):
        raise _bad(p + "review_below_confidence",
                   "and review_min_uses turn the review flag on together or off together")
    if not (math.isfinite(r.demote_weight) and 0 < r.demote_weight <= 1):
        raise _bad(p + "demote_weight", "must be above 0 and at most 1")
    if r.demote_after_days > 0 and r.demote_weight >= 1:
        raise _bad(p + "demote_weight", "must be below 1 when demote_after_days is set")


def check_policy(policy: LifecyclePolicy) -> LifecyclePolicy:
    _days(policy.archive_tasks_after_days, "archive_tasks_after_days")
    for kind, rule in policy.rules.items():
        check_rule(kind, rule)
    return policy


@dataclass(frozen=True)
class Candidate:
    """What a run needs to know of a memory."""

    id: UUID
    kind: Kind
    status: Status
    scope: Scope
    agent_id: str | None
    confidence: float
    use_count: int
    created_at: datetime
    last_used_at: datetime | None
    lifecycle_weight: float = 1.0
    review_flagged: bool = False
    task_finished_at: datetime | None = None  # its session is a task that has a task summary
    feeds: bool = False  # a memory in service other than a summary was derived from it


def _days_since(moment: datetime, now: datetime) -> float:
    return max(0.0, (now - moment).total_seconds() / DAY_SECONDS)


def value_of(c: Candidate, r: KindRule, now: datetime) -> float:
    idle = _days_since(c.last_used_at or c.created_at, now)
    return (1 + c.use_count) * c.confidence * 2.0 ** (-idle / r.value_half_life_days)


def removal(c: Candidate, r: KindRule, now: datetime) -> str | None:
    """The first removal rule that applies, if any."""
    if r.ttl_days and _days_since(c.created_at, now) >= r.ttl_days:
        return "ttl"
    if c.status is Status.ARCHIVED or c.feeds:
        return None
    idle = _days_since(c.last_used_at or c.created_at, now)
    if r.unused_days and idle >= r.unused_days and c.confidence < r.unused_below_confidence:
        return "unused"
    if r.value_half_life_days and value_of(c, r, now) < r.min_value:
        return "value"
    return None


def changes(c: Candidate, policy: LifecyclePolicy, now: datetime) -> list[str]:
    """Every rule a run applies to the memory: one removal, or what changes it in place."""
    r = policy.rule(c.kind)
    gone = removal(c, r, now)
    if gone:
        return [gone]
    if c.status is Status.ARCHIVED:
        return []
    if (policy.archive_tasks_after_days and c.kind in _ARCHIVED_KINDS and c.task_finished_at is not None
            and _days_since(c.task_finished_at, now) >= policy.archive_tasks_after_days):
        return ["archive"]
    out = []
    doubted = bool(r.review_min_uses) and c.use_count >= r.review_min_uses and c.confidence < r.review_below_confidence
    if doubted and not c.review_flagged:
        out.append("review")
    elif c.review_flagged and not doubted:
        out.append("unflag")
    idle = _days_since(c.last_used_at or c.created_at, now)
    faded = (bool(r.demote_after_days) and idle >= r.demote_after_days and c.use_count <= r.demote_max_uses
             and c.confidence >= r.demote_min_confidence)
    if faded and c.lifecycle_weight != r.demote_weight:
        out.append("demote")
    elif not faded and c.lifecycle_weight != 1.0:
        out.append("restore")
    return out


@dataclass
class LifecycleReport:
    """What a run did (or, dry, would do): per rule the count and the ids (the first
    MAX_LISTED_IDS of each)."""

    tenant_id: str
    run_time: datetime
    dry_run: bool
    examined: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {rule: 0 for rule in RULES})
    ids: dict[str, list[UUID]] = field(default_factory=lambda: {rule: [] for rule in RULES})

    def add(self, rule: str, memory_id: UUID) -> None:
        self.counts[rule] += 1
        if len(self.ids[rule]) < MAX_LISTED_IDS:
            self.ids[rule].append(memory_id)

    def summary(self) -> str:
        done = ", ".join(f"{rule} {n}" for rule, n in self.counts.items() if n) or "nothing to do"
        return f"{'dry run: ' if self.dry_run else ''}{self.examined} memories examined: {done}"


def plan(candidates: Iterable[Candidate], policy: LifecyclePolicy, now: datetime,
         report: LifecycleReport) -> dict[str, list[Candidate]]:
    """The candidates each rule applies to, counted into the report."""
    out: dict[str, list[Candidate]] = {rule: [] for rule in RULES}
    for c in candidates:
        report.examined += 1
        for rule in changes(c, policy, now):
            out[rule].append(c)
            report.add(rule, c.id)
    return out


def rule_to_json(r: KindRule) -> dict[str, Any]:
    return asdict(r)


def policy_to_json(p: LifecyclePolicy) -> dict[str, Any]:
    return {"hard_delete": p.hard_delete, "archive_tasks_after_days": p.archive_tasks_after_days,
            "rules": {k.value: rule_to_json(r) for k, r in p.rules.items()}}


def policy_from_json(enabled: bool, d: dict[str, Any]) -> LifecyclePolicy:
    names = {f.name for f in fields(KindRule)}
    return LifecyclePolicy(
        enabled=enabled, hard_delete=bool(d.get("hard_delete", False)),
        archive_tasks_after_days=float(d.get("archive_tasks_after_days", 0.0)),
        rules={Kind(k): KindRule(**{n: v for n, v in r.items() if n in names}) for k, r in d.get("rules", {}).items()},
    )


def report_to_json(r: LifecycleReport) -> dict[str, Any]:
    return {"tenant_id": r.tenant_id, "run_time": r.run_time.isoformat(), "dry_run": r.dry_run,
            "examined": r.examined, "counts": dict(r.counts), "ids": {k: [str(i) for i in v] for k, v in r.ids.items()}}
