"""What the admin clients answer about a tenant's LLM tokens: its usage by day, stage and model,
and its daily budget."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime


@dataclass(frozen=True)
class TokenCount:
    """LLM tokens one stage spent with one model (the one that answered) on one UTC day."""

    day: date
    stage: str
    model: str
    input_tokens: int
    output_tokens: int
    completions: int


@dataclass(frozen=True)
class TokenBudget:
    """LLM tokens (input and output) a tenant may spend per UTC day; 0 is unlimited. is_set: a
    platform admin set it for the tenant (False: the server's default)."""

    tenant_id: str
    tokens_per_day: int
    is_set: bool = False
    update_time: datetime | None = None
    updated_by: str = ""


@dataclass(frozen=True)
class TokenUsage:
    """A tenant's LLM tokens from start_day to end_day (newest day first, then by stage and model),
    its budget in force and what it spent today (UTC)."""

    tenant_id: str
    start_day: date
    end_day: date
    counts: tuple[TokenCount, ...]
    budget: TokenBudget
    spent_today: int
