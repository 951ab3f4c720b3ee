"""LLM tokens a tenant spent (by UTC day, stage and model) and its daily budget: the arithmetic
of when a tenant's LLM stages must go on without the model."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from .errors import Code, MemplaneError, invalid

# The most days one usage report covers.
MAX_REPORT_DAYS = 366
DEFAULT_REPORT_DAYS = 30


@dataclass(frozen=True)
class TokenCount:
    """One (day, stage, model) row of a tenant's usage."""

    day: date
    stage: str
    model: str
    input_tokens: int
    output_tokens: int
    completions: int

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class TokenBudget:
    """Tokens (input and output) a tenant may spend per UTC day; 0 is unlimited. is_set: a platform
    admin set it for the tenant (else it is MEMPLANE_LLM_DAILY_TOKEN_BUDGET)."""

    tokens_per_day: int
    is_set: bool = False
    updated_at: datetime | None = None
    updated_by: str = ""


@dataclass(frozen=True)
class UsageReport:
    tenant_id: str
    start_day: date
    end_day: date
    counts: list[TokenCount]
    budget: TokenBudget
    spent_today: int

    @property
    def remaining_today(self) -> int | None:
        """Tokens left today; None when unlimited."""
        return remaining(self.budget.tokens_per_day, self.spent_today)


def utc_day(now: datetime) -> date:
    return now.astimezone(timezone.utc).date()


def exhausted(tokens_per_day: int, spent: int) -> bool:
    """Whether a tenant that spent `spent` today may send no more. A call is checked before it is
    sent and its answer's length is not known, so the last one may go past the budget."""
    return tokens_per_day > 0 and spent >= tokens_per_day


def remaining(tokens_per_day: int, spent: int) -> int | None:
    return None if tokens_per_day == 0 else max(0, tokens_per_day - spent)


def budget_exhausted(tenant_id: str, tokens_per_day: int, spent: int) -> MemplaneError:
    return MemplaneError(
        Code.RESOURCE_EXHAUSTED, "LLM_BUDGET_EXHAUSTED",
        f"tenant {tenant_id} spent {spent} of its {tokens_per_day} LLM tokens for today (UTC); the LLM stages go on"
        " without the model until tomorrow or a larger budget (SetTokenBudget)")


def report_days(start: date | None, end: date | None, today: date) -> tuple[date, date]:
    """The days a report covers: up to today, the last DEFAULT_REPORT_DAYS without a start."""
    end = end or today
    if start is None:
        start = end - timedelta(days=DEFAULT_REPORT_DAYS - 1) if end > date.min + timedelta(days=DEFAULT_REPORT_DAYS) \
            else date.min
    if start > end:
        raise invalid("INVALID_DAYS", "start_day is after end_day")
    if (end - start).days >= MAX_REPORT_DAYS:
        raise invalid("INVALID_DAYS", f"a usage report covers at most {MAX_REPORT_DAYS} days")
    return start, end


def parse_day(text: str, field: str) -> date | None:
    """A YYYY-MM-DD day, or None for an empty one."""
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise invalid("INVALID_DAY", f"{field} must be a day as YYYY-MM-DD, not {text[:40]!r}") from None
