"""Lifecycle policies and reports: protobuf <-> core/forget/lifecycle.py."""
from __future__ import annotations

from dataclasses import fields
from datetime import datetime

from memplane.v1 import admin_service_pb2 as apb

from ..core.errors import invalid
from ..core.forget.lifecycle import RULES, KindRule, LifecyclePolicy, LifecycleReport
from .convert import KINDS, enum_in, enum_out, ts_out

_RULE_FIELDS = [f.name for f in fields(KindRule)]


def policy_in(p: apb.LifecyclePolicy) -> LifecyclePolicy:
    rules = {}
    for r in p.rules:
        kind = enum_in(KINDS, r.kind, "rules.kind")
        if kind is None:
            raise invalid("INVALID_LIFECYCLE_POLICY", "every rule names its kind", field="rules.kind")
        if kind in rules:
            raise invalid("INVALID_LIFECYCLE_POLICY", f"kind {kind.value} has two rules", field="rules.kind")
        rules[kind] = KindRule(**{name: getattr(r, name) for name in _RULE_FIELDS})
    return LifecyclePolicy(enabled=p.enabled, hard_delete=p.hard_delete,
                           archive_tasks_after_days=p.archive_tasks_after_days, rules=rules)


def policy_out(tenant_id: str, policy: LifecyclePolicy, is_set: bool, updated_at: datetime | None,
               target: apb.LifecyclePolicy) -> None:
    target.tenant_id, target.enabled, target.hard_delete = tenant_id, policy.enabled, policy.hard_delete
    target.archive_tasks_after_days, target.is_set = policy.archive_tasks_after_days, is_set
    ts_out(target.update_time, updated_at)
    for kind, rule in policy.effective().rules.items():
        target.rules.add(kind=enum_out(KINDS, kind), **{name: getattr(rule, name) for name in _RULE_FIELDS})


def report_out(report: LifecycleReport, target: apb.LifecycleReport) -> None:
    target.tenant_id, target.dry_run, target.examined = report.tenant_id, report.dry_run, report.examined
    ts_out(target.run_time, report.run_time)
    for rule in RULES:
        target.results.add(rule=rule, count=report.counts[rule], memory_ids=[str(i) for i in report.ids[rule]])
