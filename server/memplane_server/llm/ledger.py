"""What ChatModel needs from the token accounts of tenants: whether a tenant may still spend, and
where each completion's tokens go. Implemented by services/usage.py over PostgreSQL."""
from __future__ import annotations

from typing import Protocol


class TokenLedger(Protocol):
    async def check(self, tenant_id: str) -> None:
        """Raises MemplaneError(RESOURCE_EXHAUSTED, LLM_BUDGET_EXHAUSTED) when the tenant's budget is spent."""

    async def record(self, tenant_id: str, stage: str, model: str, input_tokens: int, output_tokens: int) -> None:
        """Adds one completion's tokens to the tenant's account for today."""
