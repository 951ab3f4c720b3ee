"""Working memory: per (tenant, agent, session) state and recent items, with a TTL.

A session lives until its latest expiry (every write may extend it, never shorten it). Its
keys outlive that by a grace period and an index of expiries lets a sweeper promote what an
expired session held before Redis drops it.

Redis Cluster runs a script or MULTI only when all its keys hash to one slot, so every key a
session's script or MULTI touches carries the hash tag `{<tenant>}`: the session's own keys and
its tenant's expiry index. The sweep finds the tenants through a set of its own (another slot),
which is only ever updated by single-key commands. OPERATION_KEYS lists each script and MULTI
with its keys (tests/unit/test_redis_slots.py checks them with the cluster's slot function).
"""
from __future__ import annotations

import base64
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast, overload

import numpy as np
import redis.asyncio as redis

from ...core.model import Kind
from ...core.validation import EARLIEST_TIME, LATEST_TIME
from ...core.working import SessionContents, WorkingItem
from ...logs import OncePerCause, cause_of
from ..sealing import SealError, Texts, open_text, open_texts, seal

log = logging.getLogger(__name__)
_unreadable = OncePerCause(log)

_NO_AGENT = "-"
_PARTS = ("items", "state", "meta", "vectors")
_READ_ROUND = 500  # sessions whose items one pipelined round reads
# Tenants whose expiry index may hold sessions: what the sweep walks.
TENANTS = "mp:wm:tenants"
# The one expiry index of releases before the per-tenant ones; the sweep moves what it holds.
LEGACY_EXPIRY_INDEX = "mp:wm:expiry"
GRACE_SECONDS = 3600

# One round trip per write: add the items (newest first), their state keys and vectors, trim to
# the most recent max_items (dropping the trimmed items' vectors), and extend the session.
# KEYS: items, state, meta, vectors, the tenant's expiry index (session_keys).
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

# Claims a tenant's expired sessions: removed from the index in one step, so each goes to exactly
# one sweeper, and a session a write extends meanwhile is either claimed before the write or not
# due any more. KEYS: the tenant's expiry index. ARGV: now (s), most sessions to claim.
# Returns the sessions left in the index and the claimed members.
_CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due > 0 then redis.call('ZREM', KEYS[1], unpack(due)) end
return {redis.call('ZCARD', KEYS[1]), due}
"""

# Removes a member of the legacy index unless an older server extended it since it was read.
# KEYS: the legacy index. ARGV: member, the score it was read with.
_DROP_IF_UNCHANGED = """
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True)
class WorkingSession:
    tenant_id: str
    agent_id: str | None
    session_id: str

    def key(self, part: str) -> str:
        # The tenant is the hash tag, the first {...} of the key, so a session's keys and its
        # tenant's expiry index share a cluster slot; the session id is JSON-quoted so no
        # caller-chosen text can forge another key's shape.
        return f"mp:wm:{{{self.tenant_id}}}:{self.agent_id or _NO_AGENT}:{json.dumps(self.session_id)}:{part}"

    @property
    def member(self) -> str:
        return json.dumps([self.tenant_id, self.agent_id, self.session_id])

    @classmethod
    def from_member(cls, member: str | bytes) -> "WorkingSession":
        tenant_id, agent_id, session_id = json.loads(member)
        return cls(tenant_id, agent_id, session_id)


def expiry_index(tenant_id: str) -> str:
    """The tenant's sessions by expiry; shares the hash tag of their keys. No session key has this
    shape: theirs go on with agent, session and part."""
    return f"mp:wm:{{{tenant_id}}}:expiry"


def session_keys(session: WorkingSession) -> list[str]:
    """What the append script and the delete MULTI take: the session's keys and its tenant's index."""
    return [session.key(part) for part in _PARTS] + [expiry_index(session.tenant_id)]


OPERATION_KEYS = {
    "append script": session_keys,
    "delete MULTI": session_keys,
    "claim script": lambda session: [expiry_index(session.tenant_id)],
    "legacy drop script": lambda session: [LEGACY_EXPIRY_INDEX],
}


@overload
def _time(v: float) -> datetime: ...


@overload
def _time(v: None) -> None: ...


def _time(v: float | None) -> datetime | None:
    """Unix time from Redis back to a datetime in the storable range. Total: an item stored before
    TTLs were bounded may expire past year 9999, and a float near either end of the range reads
    back a little outside it (9999-12-30T23:59:59.999999 as 9999-12-31), which promotion would refuse."""
    if v is None:
        return None
    try:
        moment = datetime.fromtimestamp(v, timezone.utc)
    except (ValueError, OverflowError, OSError):
        return LATEST_TIME if v > 0 else EARLIEST_TIME
    return min(max(moment, EARLIEST_TIME), LATEST_TIME)


def item_to_json(item: WorkingItem) -> dict[str, Any]:
    """An item as stored: times as Unix seconds, so the append script and reads compare numbers."""
    return {
        "id": item.id, "tenant_id": item.tenant_id, "agent_id": item.agent_id, "session_id": item.session_id,
        "user_id": item.user_id, "kind": item.kind.value, "content": item.content, "context": item.context,
        "state_key": item.state_key, "tags": list(item.tags), "metadata": item.metadata,
        "confidence": item.confidence, "source_type": item.source_type, "source_id": item.source_id,
        "occurred_at": item.occurred_at.timestamp(), "created_at": item.created_at.timestamp(),
        "expire_at": item.expire_at.timestamp(),
    }


def sealed_item(d: dict[str, Any], sealed_with: bytes | None) -> dict[str, Any]:
    """An item as Redis keeps it: its texts sealed under the tenant's data key (stores/sealing.py)."""
    if sealed_with is None:
        return d
    texts = seal(sealed_with, d["tenant_id"], Texts(d["content"], d["context"], None, d["metadata"]))
    return {**d, "content": texts.content, "context": texts.context, "metadata": texts.metadata,
            "sealed_key": base64.b64encode(sealed_with).decode()}


def opened_item(d: dict[str, Any]) -> dict[str, Any]:
    """An item as written, its sealed texts opened."""
    key = d.get("sealed_key")
    if not key:
        return d
    texts = open_texts(base64.b64decode(key), d["tenant_id"], Texts(d["content"], d["context"], None, d["metadata"]))
    return {**d, "content": texts.content, "context": texts.context, "metadata": texts.metadata, "sealed_key": None}


# A state value sealed: a prefix no caller's text has (texts are refused with NUL), the data key,
# the sealed text.
_SEALED_STATE = "\x00mp1:"


def _sealed_state(value: str, tenant_id: str, sealed_with: bytes | None) -> str:
    if sealed_with is None or not value:
        return value
    return (_SEALED_STATE + base64.b64encode(sealed_with).decode() + ":"
            + seal(sealed_with, tenant_id, Texts(value, "", None, {})).content)


def opened_state(value: str, tenant_id: str) -> str:
    if not value.startswith(_SEALED_STATE):
        return value
    key, _, sealed = value[len(_SEALED_STATE):].partition(":")
    return open_text(base64.b64decode(key), tenant_id, "content", sealed)


def item_from_json(d: dict[str, Any]) -> WorkingItem:
    d = opened_item(d)
    return WorkingItem(
        id=d["id"], tenant_id=d["tenant_id"], agent_id=d["agent_id"], session_id=d["session_id"],
        user_id=d["user_id"], kind=Kind(d["kind"]), content=d["content"], context=d["context"],
        state_key=d["state_key"], tags=tuple(d["tags"]), metadata=dict(d["metadata"]),
        confidence=float(d["confidence"]), source_type=d["source_type"], source_id=d["source_id"],
        occurred_at=_time(d["occurred_at"]), created_at=_time(d["created_at"]), expire_at=_time(d["expire_at"]),
    )


def items_from_json(stored: list[dict[str, Any]]) -> list[WorkingItem]:
    """Total, like reading memories: an item no rule foresaw is logged and left out, so it cannot
    fail every read of its session."""
    items = []
    for d in stored:
        try:
            items.append(item_from_json(d))
        except (KeyError, ValueError, TypeError, SealError) as exc:
            _unreadable.log(cause_of(exc), "a working item does not read as one; left out", level=logging.WARNING)
    return items


class WorkingStore:
    def __init__(self, client: redis.Redis, max_items: int) -> None:
        self.client = client
        self.max_items = max_items
        self._append = client.register_script(_APPEND)
        self._claim = client.register_script(_CLAIM)
        self._drop_if_unchanged = client.register_script(_DROP_IF_UNCHANGED)

    async def append(
        self, session: WorkingSession, items: list[tuple[WorkingItem, np.ndarray]], caller: dict[str, Any],
        sealed_with: bytes | None = None,
    ) -> list[WorkingItem]:
        """Adds items with their vectors (newest first) and state keys; extends the session to the
        latest item expiry if later. The vectors live apart from the items so reads need not carry
        them. Returns the items as a read gives them back (times at the precision stored).
        sealed_with: the tenant's data key the texts are sealed under (None: kept in clear)."""
        stored = [sealed_item(item_to_json(item), sealed_with) for item, _ in items]
        expire_at = max(d["expire_at"] for d in stored)
        args: list[Any] = [int(expire_at) + 1, GRACE_SECONDS, session.member, json.dumps(caller), self.max_items]
        for d, (item, vector) in zip(stored, items):
            # Stored beside the item so Search can rank working items without re-embedding them.
            vector_bytes = np.asarray(vector, dtype=np.float32).tobytes()
            args += [json.dumps(d, ensure_ascii=False), item.id, item.state_key or "",
                     _sealed_state(item.content, session.tenant_id, sealed_with), vector_bytes]
        await self._append(keys=session_keys(session), args=args)
        # After the script, never before: a sweep that drops the tenant (its index looked empty)
        # recounts the index after dropping it, so it either sees this session or this adds it back.
        await self.client.sadd(TENANTS, session.tenant_id)
        return [item_from_json(d) for d in stored]

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
        state = {k.decode(): opened_state(v.decode(), session.tenant_id) for k, v in state_raw.items()}
        by_id = {k.decode(): np.frombuffer(v, dtype=np.float32) for k, v in vectors[0].items()} if vectors else {}
        return SessionContents(state, items_from_json(items), _time(expires), caller, by_id)

    async def delete(self, session: WorkingSession) -> None:
        *keys, index = session_keys(session)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(*keys)
            pipe.zrem(index, session.member)
            await pipe.execute()

    async def sessions_of(self, tenant_id: str, session_ids: set[str] | None = None) -> list[WorkingSession]:
        """The tenant's live sessions of every agent (or those with these ids): one SCAN of its keys."""
        return await tenant_sessions(self.client, tenant_id, session_ids)

    async def drop(
        self, sessions: list[WorkingSession], doomed: Callable[[dict[str, Any]], bool], *, dry_run: bool = False
    ) -> list["Dropped"]:
        """drop_items for each session, their items read in pipelined rounds: a forget names every
        session of its memories, most of which hold nothing (or no longer exist)."""
        listed: list[list[bytes]] = []
        for start in range(0, len(sessions), _READ_ROUND):
            async with self.client.pipeline(transaction=False) as pipe:
                for session in sessions[start:start + _READ_ROUND]:
                    pipe.lrange(session.key("items"), 0, -1)
                listed += await pipe.execute()
        return [
            await drop_items(self.client, session, raw_items, doomed, dry_run=dry_run, delete_session=self.delete)
            if raw_items else Dropped(0, 0, False)
            for session, raw_items in zip(sessions, listed)
        ]

    async def claim_expired(self, limit: int) -> list[WorkingSession]:
        """Sessions past their expiry, each handed to exactly one caller (instance) by its removal
        from its tenant's index."""
        await self._adopt_legacy(limit)
        # redis-py types a reply bytes | str whatever the client; this one decodes none (client.py).
        tenants = [t.decode() for t in cast("set[bytes]", await self.client.smembers(TENANTS))]
        # In a random order, so no tenant's sessions wait behind another's backlog round after round.
        random.shuffle(tenants)
        now = time.time()
        claimed: list[WorkingSession] = []
        for tenant in tenants:
            if len(claimed) >= limit:
                break
            index = expiry_index(tenant)
            left, due = await self._claim(keys=[index], args=[now, limit - len(claimed)])
            claimed += [WorkingSession.from_member(member) for member in due]
            if left == 0:
                await self.client.srem(TENANTS, tenant)
                # A write may have indexed a session since the count; its own SADD may have come
                # before this SREM, so look again (the write's SADD follows its index update).
                if await self.client.zcard(index):
                    await self.client.sadd(TENANTS, tenant)
        return claimed

    async def reindex(self, session: WorkingSession, expire_at: float) -> None:
        """Puts a claimed session back in its tenant's index (never earlier than it is there)."""
        await self.client.zadd(expiry_index(session.tenant_id), {session.member: expire_at}, gt=True)
        await self.client.sadd(TENANTS, session.tenant_id)

    async def _adopt_legacy(self, limit: int) -> None:
        """Moves sessions of the single index of older releases into their tenants' indexes (each
        step idempotent, so sweepers may race), until it is empty; also while older servers still
        run during an upgrade and add to it. Earliest expiry first, as many as a round claims, so
        the sessions that are due move before the others."""
        # redis-py types the reply as with or without scores, and its members bytes | str (client.py decodes none).
        pairs = cast("list[tuple[bytes, float]]",
                     await self.client.zrange(LEGACY_EXPIRY_INDEX, 0, limit - 1, withscores=True))
        for member, score in pairs:
            tenant = WorkingSession.from_member(member).tenant_id
            await self.client.zadd(expiry_index(tenant), {member: score}, gt=True)
            await self.client.sadd(TENANTS, tenant)
            await self._drop_if_unchanged(keys=[LEGACY_EXPIRY_INDEX], args=[member, score])


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@dataclass(frozen=True)
class Dropped:
    """What drop_items removed from one session."""

    items: int
    state_keys: int
    session_deleted: bool
    ids: tuple[str, ...] = ()  # the removed items' ids


async def tenant_sessions(client: redis.Redis, tenant_id: str, session_ids: set[str] | None = None) -> list[WorkingSession]:
    """The tenant's live working sessions (every agent), or only those with these session ids."""
    prefix = f"mp:wm:{{{tenant_id}}}:"
    found = []
    async for raw in client.scan_iter(match=_glob_escape(prefix) + "*:meta", count=500):
        middle = raw.decode()[len(prefix):-len(":meta")]
        agent, _, quoted = middle.partition(":")
        try:
            session_id = json.loads(quoted)
        except ValueError:
            continue
        if session_ids is None or session_id in session_ids:
            found.append(WorkingSession(tenant_id, None if agent == _NO_AGENT else agent, session_id))
    return found


async def drop_items(
    client: redis.Redis, session: WorkingSession, raw_items: list[bytes], doomed: Callable[[dict[str, Any]], bool], *,
    dry_run: bool = False, delete_session: Callable[[WorkingSession], Any] | None = None,
) -> Dropped:
    """Removes the session's items for which doomed(item as stored) holds, their vectors and the state
    keys they set; a session left without items is deleted whole (its state was set by its items)
    by delete_session. Single-key commands, not a MULTI (Redis Cluster: see WorkingStore.delete):
    removing by value cannot undo an append running meanwhile."""
    gone = []
    kept = 0
    for raw in raw_items:
        try:
            item = opened_item(json.loads(raw))
        except (ValueError, KeyError, SealError):
            continue
        if doomed(item):
            gone.append((raw, item))
        else:
            kept += 1
    if not gone:
        return Dropped(0, 0, False)
    state_keys = sorted({item["state_key"] for _, item in gone if item.get("state_key")})
    ids = tuple(item["id"] for _, item in gone)
    if dry_run:
        return Dropped(len(gone), len(state_keys), kept == 0, ids)
    if kept == 0 and delete_session is not None:
        await delete_session(session)
    else:
        async with client.pipeline(transaction=False) as pipe:
            for raw, item in gone:
                # redis-py annotates the value str; Redis compares the bytes it is sent.
                pipe.lrem(session.key("items"), 0, raw)  # type: ignore[arg-type]
                pipe.hdel(session.key("vectors"), item["id"])
            if state_keys:
                pipe.hdel(session.key("state"), *state_keys)
            await pipe.execute()
    return Dropped(len(gone), len(state_keys), kept == 0, ids)
