"""Token buckets per API key in Redis, shared by every server instance.

The script reads Redis's own clock, so instances with skewed clocks still agree.
"""
from __future__ import annotations

import redis.asyncio as redis

from ...core.access.token_bucket import Decision

_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait
"""


def bucket_key(key_id: str) -> str:
    return f"mp:rate:{key_id}"


# The script takes one bucket: on Redis Cluster a script's keys must share a slot
# (tests/unit/test_redis_slots.py).
OPERATION_KEYS = {"take script": lambda key_id: [bucket_key(key_id)]}


class RateLimiter:
    def __init__(self, client: redis.Redis, *, per_second: float, burst: int) -> None:
        self.per_second = per_second
        self.burst = burst
        self._take = client.register_script(_TAKE)

    async def take(self, key_id: str) -> Decision:
        if self.per_second <= 0:
            return Decision(True, 0.0)
        wait_ms = int(await self._take(keys=[bucket_key(key_id)], args=[self.per_second, self.burst]))
        return Decision(wait_ms == 0, wait_ms / 1000)
