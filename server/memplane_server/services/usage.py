"""LLM token accounts of tenants: the ledger ChatModel checks before each call and adds each
answer's tokens to, and the admin calls that read a tenant's usage (its admins, platform admins)
and set its daily budget (platform admins: the budget bounds what the platform spends on it)."""
from __future__ import annotations

from datetime import date, datetime, timezone

from ..core.access.caller import Caller, Role
from ..core.errors import denied, invalid, not_found
from ..core.usage import TokenBudget, UsageReport, budget_exhausted, exhausted, report_days, utc_day
from ..stores.postgres.tenancy import MissingParentError, TenancyStore
from ..stores.postgres.usage import TokenUsageStore
from .admin import administered_tenant


def _today() -> date:
    return utc_day(datetime.now(timezone.utc))


class TokenUsage:
    def __init__(self, store: TokenUsageStore, tenancy: TenancyStore, default_tokens_per_day: int) -> None:
        self.store = store
        self.tenancy = tenancy
        self.default = TokenBudget(default_tokens_per_day)

    async def check(self, tenant_id: str) -> None:
        """RESOURCE_EXHAUSTED LLM_BUDGET_EXHAUSTED when the tenant spent its budget today."""
        spent, budget = await self.store.spent_and_budget(tenant_id, _today())
        limit = (budget or self.default).tokens_per_day
        if exhausted(limit, spent):
            raise budget_exhausted(tenant_id, limit, spent)

    async def record(self, tenant_id: str, stage: str, model: str, input_tokens: int, output_tokens: int) -> None:
        await self.store.add(tenant_id, _today(), stage, model, input_tokens, output_tokens)

    async def report(self, caller: Caller, tenant_id: str, start: date | None, end: date | None) -> UsageReport:
        """The tenant's tokens by day, stage and model (the caller's tenant by default), its budget and
        what it spent today."""
        tenant = await administered_tenant(self.tenancy, caller, tenant_id)
        today = _today()
        first, last = report_days(start, end, today)
        counts = await self.store.counts(tenant, first, last)
        spent, budget = await self.store.spent_and_budget(tenant, today)
        return UsageReport(tenant, first, last, counts, budget or self.default, spent)

    async def set_budget(self, caller: Caller, tenant_id: str, tokens_per_day: int | None, *,
                         reset: bool) -> TokenBudget:
        """Sets the tenant's tokens per UTC day (0: unlimited), or with reset drops it, so that the
        settings' default applies again. Without either it is refused, so that a budget lost on the
        way never lifts the limit."""
        if caller.role is not Role.PLATFORM_ADMIN:
            raise denied("PLATFORM_ADMIN_REQUIRED", "a tenant's token budget is set by a platform admin")
        if reset == (tokens_per_day is not None):
            raise invalid("TOKEN_BUDGET_REQUIRED", "send tokens_per_day (0: unlimited) or a reset, one of the two")
        if tokens_per_day is not None and tokens_per_day < 0:
            raise invalid("INVALID_TOKEN_BUDGET", "tokens_per_day must be 0 (unlimited) or more")
        tenant = await administered_tenant(self.tenancy, caller, tenant_id)
        if tokens_per_day is None:
            await self.store.clear_budget(tenant)
            budget = self.default
        else:
            try:
                budget = await self.store.set_budget(tenant, tokens_per_day, caller.key_id)
            except MissingParentError:
                raise not_found("tenant") from None
        await self.tenancy.audit(tenant, caller.key_id, "SetTokenBudget", tenant,
                                 {"tokens_per_day": tokens_per_day, "reset": reset})
        return budget
