"""Usage per tenant: the process's tally written every few seconds (and by a stopping server,
within its grace time), the stored figures rolled up by the background work, and the report tenant
admins read for their tenant and platform admins for any or all (core/metering.py)."""
from __future__ import annotations

import asyncio
import logging
from datetime import date, datetime, timezone

from ..core.access.caller import Caller, Role
from ..core.metering import TenantUsage, UsageTally
from ..core.usage import report_days, utc_day
from ..logs import OncePerCause, cause_of
from ..stores.postgres.tenancy import TenancyStore
from ..stores.postgres.usage import MeteringStore
from .admin import administered_tenant

log = logging.getLogger(__name__)


class Metering:
    def __init__(self, store: MeteringStore, tenancy: TenancyStore, tally: UsageTally) -> None:
        self.store, self.tenancy, self.tally = store, tenancy, tally
        self._failures = OncePerCause(log)

    async def flush(self) -> None:
        """Writes what the tally holds; on a failure it is kept for the next flush."""
        counts = self.tally.take()
        try:
            await self.store.add_counts(counts)
        except BaseException as exc:
            self.tally.give_back(counts)
            if isinstance(exc, Exception):
                self._failures.log(cause_of(exc), "usage counts not written yet: %s", type(exc).__name__,
                                   level=logging.WARNING, exc_info=False)
                return
            raise

    async def flush_every(self, seconds: float) -> None:
        """Flushes until cancelled (the server flushes once more as it stops)."""
        while True:
            await asyncio.sleep(seconds)
            await self.flush()

    async def roll_up(self) -> int:
        now = datetime.now(timezone.utc)
        return await self.store.roll_up_stored(utc_day(now), now)

    async def report(self, caller: Caller, tenant_id: str, start: date | None, end: date | None,
                     ) -> tuple[date, date, list[TenantUsage]]:
        """A tenant's usage by day (the caller's tenant by default); for a platform admin naming no
        tenant, every tenant's with usage in those days."""
        first, last = report_days(start, end, utc_day(datetime.now(timezone.utc)))
        if caller.role is Role.PLATFORM_ADMIN and not tenant_id:
            tenants = await self.store.tenants_with_usage(first, last)
        else:
            tenants = [await administered_tenant(self.tenancy, caller, tenant_id)]
        return first, last, [await self.store.usage(t, first, last) for t in tenants]
