"""Idempotency records keyed by (caller, method, request_id), shared by all server instances.

The caller is the tenant, the API key and the acting agent: another caller's request id is just
a new id, and nothing of another caller's response can be replayed to it. The first call claims
the key with SET NX; concurrent repeats wait for its response instead of running the mutation
again. A claim is a short lease that its call keeps renewing, so when a server dies mid-call its
claim runs out within seconds and the client's retry can run.
"""
from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import redis.asyncio as redis

from ...core.requests import RequestKey

LEASE_SECONDS = 5.0
RENEW_EVERY_SECONDS = LEASE_SECONDS / 3
_POLL_SECONDS = 0.02

# KEYS[1] the record; ARGV[1] the claim it must still hold. Only the claimant renews or
# releases, never a later claim of the same key.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class IdempotencyConflict(Exception):
    """The request_id was used before with a different request."""


@dataclass(frozen=True)
class Claim:
    key: str
    value: bytes
    fingerprint: bytes
    tenant_id: str = ""
    method: str = ""


_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def index_key(tenant_id: str) -> str:
    """The tenant's cached responses (members `method|record key`, scored by expiry), so a forget
    or an erasure can find the ones holding what it removes without scanning every key."""
    return f"mp:idem-index:{{{tenant_id}}}"


class IdempotencyStore:
    def __init__(self, client: redis.Redis, ttl_seconds: int) -> None:
        self.client = client
        self.ttl = ttl_seconds
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    async def begin(self, request: RequestKey) -> Claim | bytes:
        """Claims the key (returns the Claim), or returns the stored response of an earlier call."""
        key = f"mp:idem:{request.key}"
        fp = request.fingerprint.encode()
        value = b"pending:" + fp + b":" + secrets.token_hex(8).encode()
        while True:
            if await self.client.set(key, value, nx=True, px=int(LEASE_SECONDS * 1000)):
                return Claim(key, value, fp, request.tenant_id, request.method)
            stored = await self.client.get(key)
            if stored is None:
                continue
            state, _, rest = stored.partition(b":")
            stored_fp, _, response = rest.partition(b":")
            if stored_fp != fp:
                raise IdempotencyConflict()
            if state == b"done":
                return response
            await asyncio.sleep(_POLL_SECONDS)

    async def renew(self, claim: Claim) -> bool:
        return bool(await self._renew(keys=[claim.key], args=[claim.value, int(LEASE_SECONDS * 1000)]))

    async def complete(self, claim: Claim, response: bytes) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.set(claim.key, b"done:" + claim.fingerprint + b":" + response, ex=self.ttl)
            if claim.tenant_id:
                index = index_key(claim.tenant_id)
                pipe.zadd(index, {f"{claim.method}|{claim.key}": time.time() + self.ttl})
                pipe.expire(index, self.ttl)
            await pipe.execute()

    async def purge(self, tenant_id: str, ids: Collection[str], needles: Sequence[bytes] = (), *,
                    dry_run: bool = False) -> int:
        """Drops the tenant's cached responses that name one of the memory ids or hold one of the
        needles (e.g. an erased user's id). Every response that carries a memory's content carries
        its id too. A Write's entry is deleted (PostgreSQL answers its repeats, without what was
        forgotten); any other call's is replaced by an empty response, so a repeat is still not
        run again. Returns how many were (or, dry run, would be) dropped."""
        index = index_key(tenant_id)
        await self.client.zremrangebyscore(index, "-inf", time.time())
        members = [m.decode() for m in await self.client.zrange(index, 0, -1)]
        dropped = 0
        ids = set(ids)
        for start in range(0, len(members), 500):
            chunk = members[start:start + 500]
            values = await self.client.mget([m.split("|", 1)[1] for m in chunk])
            async with self.client.pipeline(transaction=False) as pipe:
                for member, value in zip(chunk, values):
                    if value is None or not value.startswith(b"done:"):
                        continue
                    _, fingerprint, response = value.split(b":", 2)
                    named = {u.decode() for u in _UUID.findall(response)}
                    if not (named & ids) and not any(n in response for n in needles):
                        continue
                    dropped += 1
                    method, key = member.split("|", 1)
                    if method == "Write":
                        pipe.delete(key)
                        pipe.zrem(index, member)
                    else:
                        pipe.set(key, b"done:" + fingerprint + b":", keepttl=True)
                if not dry_run:
                    await pipe.execute()
        return dropped

    async def abandon(self, claim: Claim) -> None:
        """Releases a claim whose call failed, so a retry can run it."""
        await self._release(keys=[claim.key], args=[claim.value])
