"""Working memory: per (tenant, agent, session) state and recent items, with a TTL."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

_NO_AGENT = "-"
# Extend, never shorten: a short-lived item must not expire its longer-lived neighbours.
# (EXPIRE ... GT needs Redis 7; this works on the Redis 6 the embedded default may run.)
_EXTEND_TTL = """
for _, key in ipairs(KEYS) do
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 and ttl < tonumber(ARGV[1]) then redis.call('PEXPIRE', key, ARGV[1]) end
end
"""


@dataclass(frozen=True)
class WorkingSession:
    tenant_id: str
    agent_id: str | None
    session_id: str

    def key(self, part: str) -> str:
        # Tenant first so a cluster can hash-tag by tenant later; the session id is JSON-quoted
        # so no caller-chosen text can forge another key's shape.
        return f"mp:wm:{{{self.tenant_id}}}:{self.agent_id or _NO_AGENT}:{json.dumps(self.session_id)}:{part}"


class WorkingStore:
    def __init__(self, client: redis.Redis, max_items: int) -> None:
        self.client = client
        self.max_items = max_items
        self._extend_ttl = client.register_script(_EXTEND_TTL)

    async def append(self, session: WorkingSession, items: list[dict[str, Any]], ttl_seconds: int) -> None:
        """Adds items (newest first) and state keys; the session lives as long as its longest TTL."""
        items_key, state_key = session.key("items"), session.key("state")
        async with self.client.pipeline(transaction=True) as pipe:
            for item in items:
                pipe.lpush(items_key, json.dumps(item, ensure_ascii=False))
                if item.get("state_key"):
                    pipe.hset(state_key, item["state_key"], item["content"])
            pipe.ltrim(items_key, 0, self.max_items - 1)
            await pipe.execute()
        await self._extend_ttl(keys=[items_key, state_key], args=[ttl_seconds * 1000])

    async def read(self, session: WorkingSession) -> tuple[dict[str, str], list[dict[str, Any]], float | None]:
        """State, live items newest first, and the session's expiry as a Unix time."""
        items_key, state_key = session.key("items"), session.key("state")
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(state_key)
            pipe.lrange(items_key, 0, -1)
            pipe.pttl(items_key)
            state_raw, items_raw, pttl = await pipe.execute()
        now = time.time()
        items = [i for i in (json.loads(raw) for raw in items_raw) if i["expire_at"] > now]
        state = {k.decode(): v.decode() for k, v in state_raw.items()}
        expires = now + pttl / 1000 if pttl and pttl > 0 else None
        return state, items, expires

    async def delete(self, session: WorkingSession) -> int:
        return await self.client.delete(session.key("items"), session.key("state"))
