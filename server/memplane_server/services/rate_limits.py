"""Request rates per API key: shared by every instance through Redis, and per instance while
Redis is unreachable, so calls that need only PostgreSQL keep being served (and limited)."""
from __future__ import annotations

import logging

from ..core.errors import Code, MemplaneError
from ..core.token_bucket import LocalBuckets
from ..logs import OncePerCause
from ..stores.outage import REDIS, outage_of
from ..stores.redis.rate_limit import RateLimiter

log = logging.getLogger(__name__)


class RateLimits:
    def __init__(self, shared: RateLimiter) -> None:
        self.shared = shared
        self.per_second = shared.per_second
        self.local = LocalBuckets(per_second=shared.per_second, burst=shared.burst)
        self._log = OncePerCause(log)

    async def check(self, key_id: str) -> None:
        """Raises RESOURCE_EXHAUSTED RATE_LIMITED (with a retry delay) when the key is over its rate."""
        try:
            decision = await self.shared.take(key_id)
        except Exception as exc:
            if outage_of(exc) != REDIS:
                raise
            # Fail open to this instance's own buckets: N instances then allow up to N times the
            # rate, which beats refusing every call while Redis is away.
            self._log.log("redis", "Redis unreachable: rate limits are per instance until it is back",
                          level=logging.WARNING, exc_info=False)
            decision = self.local.take(key_id)
        if not decision.allowed:
            raise MemplaneError(
                Code.RESOURCE_EXHAUSTED, "RATE_LIMITED", f"this key sends more than {self.per_second:g} requests/s",
                retry_after=decision.retry_after_seconds,
            )
