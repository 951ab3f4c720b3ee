"""Content policies and scan reports: protobuf <-> core/content."""
from __future__ import annotations

from memplane.v1 import admin_service_pb2 as apb

from ..core.content.policy import Action, PolicyView
from ..core.content.scan import ScanReport
from ..core.errors import invalid
from .convert import enum_in, enum_out, ts_out

ACTIONS = {
    apb.CONTENT_ACTION_OFF: Action.OFF,
    apb.CONTENT_ACTION_TAG: Action.TAG,
    apb.CONTENT_ACTION_REDACT: Action.REDACT,
    apb.CONTENT_ACTION_REFUSE: Action.REFUSE,
}


def rules_in(p: apb.ContentPolicy) -> dict[str, str]:
    """The rules by name, as core/content/policy.check_rules reads them."""
    rules: dict[str, str] = {}
    for rule in p.rules:
        action = enum_in(ACTIONS, rule.action, "rules.action")
        if action is None:
            raise invalid("INVALID_CONTENT_ACTION", f"the rule for {rule.name!r} needs an action", field="rules.action")
        if rule.name in rules:
            raise invalid("INVALID_CONTENT_POLICY", f"{rule.name!r} has two rules", field="rules.name")
        rules[rule.name] = action.value
    return rules


def policy_out(view: PolicyView, target: apb.ContentPolicy) -> None:
    target.tenant_id, target.domain = view.tenant_id or "", view.domain or ""
    target.is_set, target.updated_by = view.is_set, view.updated_by
    ts_out(target.update_time, view.updated_at)
    for name, action in view.rules.items():
        target.rules.add(name=name, action=enum_out(ACTIONS, action))
    for name, action in view.effective.items():
        target.effective.add(name=name, action=enum_out(ACTIONS, action))


def report_out(report: ScanReport, target: apb.ContentScanReport) -> None:
    target.examined = report.examined
    for (detector, action), memories in sorted(report.counts.items(), key=lambda c: (c[0][0], c[0][1].value)):
        target.counts.add(detector=detector, action=enum_out(ACTIONS, action), memories=memories)
    target.refused, target.redacted, target.tagged = (
        report.changes[Action.REFUSE], report.changes[Action.REDACT], report.changes[Action.TAG])
    target.refused_memory_ids.extend(report.ids.get(Action.REFUSE, []))
    target.redacted_memory_ids.extend(report.ids.get(Action.REDACT, []))
    target.tagged_memory_ids.extend(report.ids.get(Action.TAG, []))
