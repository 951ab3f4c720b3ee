"""Idempotency records keyed by (caller, method, request_id), shared by all server instances.

The caller is the tenant, the API key and the acting agent: another caller's request id is just
a new id, and nothing of another caller's response can be replayed to it. The first call claims
the key with SET NX; concurrent repeats wait for its response instead of running the mutation
again. A claim is a short lease that its call keeps renewing, so when a server dies mid-call its
claim runs out within seconds and the client's retry can run.
"""
from __future__ import annotations

import asyncio
import secrets
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


def record_key(request: RequestKey) -> str:
    return f"mp:idem:{request.key}"


# Each script takes the one record: on Redis Cluster a script's keys must share a slot
# (tests/unit/test_redis_slots.py).
OPERATION_KEYS = {"renew script": lambda request: [record_key(request)],
                  "release script": lambda request: [record_key(request)]}


class IdempotencyConflict(Exception):
    """The request_id was used before with a different request."""


@dataclass(frozen=True)
class Claim:
    key: str
    value: bytes
    fingerprint: bytes


class IdempotencyStore:
    def __init__(self, client: redis.Redis, ttl_seconds: int) -> None:
        self.client = client
        self.ttl = ttl_seconds
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    async def begin(self, request: RequestKey) -> Claim | bytes:
        """Claims the key (returns the Claim), or returns the stored response of an earlier call."""
        key = record_key(request)
        fp = request.fingerprint.encode()
        value = b"pending:" + fp + b":" + secrets.token_hex(8).encode()
        while True:
            if await self.client.set(key, value, nx=True, px=int(LEASE_SECONDS * 1000)):
                return Claim(key, value, fp)
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
        await self.client.set(claim.key, b"done:" + claim.fingerprint + b":" + response, ex=self.ttl)

    async def abandon(self, claim: Claim) -> None:
        """Releases a claim whose call failed, so a retry can run it."""
        await self._release(keys=[claim.key], args=[claim.value])
