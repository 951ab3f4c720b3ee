"""Working memory: per (tenant, agent, session) state and recent items, with a TTL.

A session lives until its latest expiry (every write may extend it, never shorten it). Its
keys outlive that by a grace period and an index of expiries lets a sweeper promote what an
expired session held before Redis drops it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

_NO_AGENT = "-"
EXPIRY_INDEX = "mp:wm:expiry"
GRACE_SECONDS = 3600

# One round trip per write: add the items (newest first), their state keys and vectors, trim to
# the most recent max_items (dropping the trimmed items' vectors), and extend the session.
# KEYS: items, state, meta, vectors, index.
# ARGV: expire_at (s), grace (s), index member, caller json, max_items, then per item:
#       item json, item id, state key ("" for none), content, vector bytes.
# EXPIRE ... GT needs Redis 7; this works on the Redis 6 the embedded default may run.
_APPEND = """
local max_items = tonumber(ARGV[5])
for i = 6, #ARGV, 5 do
  redis.call('LPUSH', KEYS[1], ARGV[i])
  if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i + 3]) end
  redis.call('HSET', KEYS[4], ARGV[i + 1], ARGV[i + 4])
end
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], max_items, -1)) do
  redis.call('HDEL', KEYS[4], cjson.decode(raw)['id'])
end
redis.call('LTRIM', KEYS[1], 0, max_items - 1)
local now = tonumber(redis.call('TIME')[1])
local expire_at = math.max(tonumber(ARGV[1]), tonumber(redis.call('HGET', KEYS[3], 'expire_at') or '0'))
redis.call('HSET', KEYS[3], 'expire_at', tostring(expire_at), 'caller', ARGV[4])
local ttl = math.max(1, expire_at - now + tonumber(ARGV[2]))
for i = 1, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ttl) end
end
redis.call('ZADD', KEYS[5], 'GT', expire_at, ARGV[3])
return expire_at
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

    @property
    def member(self) -> str:
        return json.dumps([self.tenant_id, self.agent_id, self.session_id])

    @classmethod
    def from_member(cls, member: str | bytes) -> "WorkingSession":
        tenant_id, agent_id, session_id = json.loads(member)
        return cls(tenant_id, agent_id, session_id)


@dataclass(frozen=True)
class SessionContents:
    state: dict[str, str]
    items: list[dict[str, Any]]  # live items, newest first
    expires_at: float | None  # Unix time; None when the session does not exist or has expired
    caller: dict[str, Any] | None
    vectors: dict[str, bytes]  # item id -> float32 vector bytes, when asked for


class WorkingStore:
    def __init__(self, client: redis.Redis, max_items: int) -> None:
        self.client = client
        self.max_items = max_items
        self._append = client.register_script(_APPEND)

    async def append(
        self, session: WorkingSession, items: list[tuple[dict[str, Any], bytes]], expire_at: float,
        caller: dict[str, Any],
    ) -> None:
        """Adds items with their vectors (newest first) and state keys; extends the session to
        expire_at if later. The vectors live apart from the items so reads need not carry them."""
        args: list[Any] = [int(expire_at) + 1, GRACE_SECONDS, session.member, json.dumps(caller), self.max_items]
        for item, vector in items:
            args += [json.dumps(item, ensure_ascii=False), item["id"], item.get("state_key") or "", item["content"],
                     vector]
        keys = [session.key(part) for part in ("items", "state", "meta", "vectors")] + [EXPIRY_INDEX]
        await self._append(keys=keys, args=args)

    async def read(
        self, session: WorkingSession, *, include_expired: bool = False, with_vectors: bool = False
    ) -> SessionContents:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(session.key("state"))
            pipe.lrange(session.key("items"), 0, -1)
            pipe.hgetall(session.key("meta"))
            if with_vectors:
                pipe.hgetall(session.key("vectors"))
            state_raw, items_raw, meta, *vectors = await pipe.execute()
        now = time.time()
        expires = float(meta[b"expire_at"]) if b"expire_at" in meta else None
        caller = json.loads(meta[b"caller"]) if b"caller" in meta else None
        if expires is None or (expires <= now and not include_expired):
            return SessionContents({}, [], None, caller, {})
        items = [i for i in (json.loads(raw) for raw in items_raw) if include_expired or i["expire_at"] > now]
        state = {k.decode(): v.decode() for k, v in state_raw.items()}
        by_id = {k.decode(): v for k, v in vectors[0].items()} if vectors else {}
        return SessionContents(state, items, expires, caller, by_id)

    async def delete(self, session: WorkingSession) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(*(session.key(part) for part in ("items", "state", "meta", "vectors")))
            pipe.zrem(EXPIRY_INDEX, session.member)
            await pipe.execute()

    async def claim_expired(self, limit: int) -> list[WorkingSession]:
        """Sessions past their expiry, each handed to exactly one caller (instance) by ZREM."""
        members = await self.client.zrangebyscore(EXPIRY_INDEX, "-inf", time.time(), start=0, num=limit)
        claimed = []
        for member in members:
            if await self.client.zrem(EXPIRY_INDEX, member):
                claimed.append(WorkingSession.from_member(member))
        return claimed
