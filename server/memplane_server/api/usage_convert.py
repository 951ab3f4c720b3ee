"""Token usage and budgets: domain <-> AdminService protobuf."""
from __future__ import annotations

from memplane.v1 import admin_service_pb2 as apb

from ..core.usage import TokenBudget, UsageReport
from .convert import ts_out


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
