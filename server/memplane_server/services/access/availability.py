"""Dependency outages as the caller sees them: UNAVAILABLE with a reason (retryable), logged
once per cause; a transaction that lost to a concurrent one: ABORTED (retryable); and whether the
database answers, for the health service."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ...core.errors import Code, MemplaneError
from ...logs import OncePerCause
from ...stores.outage import POSTGRES, REDIS, lost_to_concurrency, outage_of

log = logging.getLogger(__name__)

_OUTAGES = {
    POSTGRES: MemplaneError(Code.UNAVAILABLE, "DATABASE_UNAVAILABLE", "the database is unreachable; retry shortly"),
    REDIS: MemplaneError(Code.UNAVAILABLE, "REDIS_UNAVAILABLE",
                         "working memory and request deduplication are unreachable; retry shortly"),
}
_CONTENDED = MemplaneError(Code.ABORTED, "CONCURRENT_CHANGE",
                           "a concurrent change to the same memories won; nothing of this call was kept, retry it")
PROBE_TIMEOUT_SECONDS = 2.0


class Availability:
    def __init__(self, ping_database: Callable[[], Awaitable[None]]) -> None:
        self.ping_database = ping_database
        self._log = OncePerCause(log)

    def transient_error(self, exc: BaseException) -> MemplaneError | None:
        """UNAVAILABLE for an exception caused by an unreachable dependency, ABORTED for a
        transaction PostgreSQL rolled back for a concurrent one (a deadlock between two forgets
        of overlapping memories), else None."""
        if lost_to_concurrency(exc):
            return _CONTENDED
        dependency = outage_of(exc)
        if dependency is None:
            return None
        self._log.log(dependency, "%s unreachable: calls that need it answer UNAVAILABLE (%s)", dependency,
                      type(exc).__name__, level=logging.WARNING, exc_info=False)
        return _OUTAGES[dependency]

    async def database_answers(self) -> bool:
        try:
            await asyncio.wait_for(self.ping_database(), PROBE_TIMEOUT_SECONDS)
        except Exception as exc:  # any failure to answer is "not serving", whatever its cause
            self._log.log("probe", "database health probe failed: %s", type(exc).__name__,
                          level=logging.WARNING, exc_info=False)
            return False
        return True
