"""Request rates per API key, and failed authentications per client address: shared by every
instance through Redis, and per instance while Redis is unreachable, so calls that need only
PostgreSQL keep being served (and limited)."""
from __future__ import annotations

import logging
import time

from ...core.access.token_bucket import LocalBuckets
from ...core.errors import Code, MemplaneError
from ...logs import OncePerCause
from ...stores.outage import REDIS, outage_of
from ...stores.redis.rate_limit import RateLimiter

log = logging.getLogger(__name__)


_MAX_BLOCKED = 10_000


class RateLimits:
    def __init__(self, shared: RateLimiter, *, failures: RateLimiter | None = None) -> None:
        self.shared = shared
        self.per_second = shared.per_second
        self.local = LocalBuckets(per_second=shared.per_second, burst=shared.burst)
        # Failed authentications counted in Redis, and per instance while it is away.
        self.failures = (failures, LocalBuckets(per_second=failures.per_second, burst=failures.burst)) if failures else None
        # Client addresses over their failure rate, refused until then without looking a key up.
        self._blocked: dict[str, float] = {}
        self._log = OncePerCause(log)

    async def _take(self, shared: RateLimiter, local: LocalBuckets, bucket: str):
        try:
            return await shared.take(bucket)
        except Exception as exc:
            if outage_of(exc) != REDIS:
                raise
            # Fail open to this instance's own buckets: N instances then allow up to N times the
            # rate, which beats refusing every call while Redis is away.
            self._log.log("redis", "Redis unreachable: rate limits are per instance until it is back",
                          level=logging.WARNING, exc_info=False)
            return local.take(bucket)

    def refuse_if_blocked(self, address: str) -> None:
        """Raises RESOURCE_EXHAUSTED while the client address is over its failed-authentication rate."""
        until = self._blocked.get(address)
        if until is None:
            return
        left = until - time.monotonic()
        if left <= 0:
            del self._blocked[address]
            return
        raise _too_many_failures(left)

    async def count_failure(self, address: str) -> None:
        """Counts a failed authentication of the client address; over its rate, raises
        RESOURCE_EXHAUSTED TOO_MANY_FAILED_AUTHENTICATIONS (with a retry delay) instead."""
        if self.failures is None:
            return
        shared, local = self.failures
        if shared.per_second <= 0:
            return
        decision = await self._take(shared, local, f"unauth:{address}")
        if not decision.allowed:
            if len(self._blocked) >= _MAX_BLOCKED:
                self._blocked.clear()
            self._blocked[address] = time.monotonic() + decision.retry_after_seconds
            raise _too_many_failures(decision.retry_after_seconds)

    async def check(self, key_id: str) -> None:
        """Raises RESOURCE_EXHAUSTED RATE_LIMITED (with a retry delay) when the key is over its rate."""
        decision = await self._take(self.shared, self.local, key_id)
        if not decision.allowed:
            raise MemplaneError(
                Code.RESOURCE_EXHAUSTED, "RATE_LIMITED", f"this key sends more than {self.per_second:g} requests/s",
                retry_after=decision.retry_after_seconds,
            )


def _too_many_failures(retry_after: float) -> MemplaneError:
    return MemplaneError(Code.RESOURCE_EXHAUSTED, "TOO_MANY_FAILED_AUTHENTICATIONS",
                         "too many calls with a missing or invalid API key from this address", retry_after=retry_after)
