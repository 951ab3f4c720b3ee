"""Usage, token usage and budgets: domain <-> AdminService protobuf."""
from __future__ import annotations

from datetime import date

from memplane.v1 import admin_service_pb2 as apb

from ..core.metering import TenantUsage
from ..core.model import Layer, Scope
from ..core.usage import TokenBudget, UsageReport
from .convert import LAYERS, SCOPES, enum_out, ts_out


def budget_out(tenant_id: str, budget: TokenBudget, b: apb.TokenBudget) -> None:
    b.tenant_id, b.tokens_per_day, b.is_set, b.updated_by = tenant_id, budget.tokens_per_day, budget.is_set, budget.updated_by
    ts_out(b.update_time, budget.updated_at)


def report_out(report: UsageReport, response: apb.GetTokenUsageResponse) -> None:
    response.tenant_id = report.tenant_id
    response.start_day, response.end_day = report.start_day.isoformat(), report.end_day.isoformat()
    for count in report.counts:
        response.counts.add(day=count.day.isoformat(), stage=count.stage, model=count.model,
                            input_tokens=count.input_tokens, output_tokens=count.output_tokens,
                            completions=count.completions)
    budget_out(report.tenant_id, report.budget, response.budget)
    response.spent_today = report.spent_today


def usage_out(first: date, last: date, usages: list[TenantUsage], response: apb.GetUsageResponse) -> None:
    response.start_day, response.end_day = first.isoformat(), last.isoformat()
    for usage in usages:
        tenant = response.tenants.add(tenant_id=usage.tenant_id)
        for day in usage.days:
            d = tenant.days.add(day=day.day.isoformat(), texts_embedded=day.texts_embedded)
            d.calls.update(day.calls)
            d.tokens.update(day.tokens)
            for stored in day.stored:
                d.stored.add(layer=enum_out(LAYERS, Layer(stored.layer)), scope=enum_out(SCOPES, Scope(stored.scope)),
                             memories=stored.memories, bytes=stored.bytes)
            ts_out(d.stored_at, day.stored_at)
