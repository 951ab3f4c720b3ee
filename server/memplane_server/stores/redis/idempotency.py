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
from collections.abc import Collection
from dataclasses import dataclass
from typing import cast

import redis.asyncio as redis

from ...core.access.requests import RequestKey
from ..sealing import OPENERS

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
    tenant_id: str = ""
    method: str = ""


_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ref_key(ref: str) -> str:
    """The cached responses naming this memory (or working item) id, of every tenant: members
    `method|tenant|record key`. A forget or an erasure finds the responses holding what it removes
    here, without reading every cached response, also those of another tenant that read a domain
    memory. It lives as long as the responses it lists."""
    return f"mp:idem-ref:{ref}"


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
                return Claim(key, value, fp, request.tenant_id, request.method)
            # redis-py types a reply bytes | str whatever the client; this one decodes none (client.py).
            stored = cast("bytes | None", await self.client.get(key))
            if stored is None:
                continue
            state, _, rest = stored.partition(b":")
            stored_fp, _, response = rest.partition(b":")
            if stored_fp != fp:
                raise IdempotencyConflict()
            if state == b"done":
                return OPENERS.open_bytes(request.tenant_id, "response", response)
            await asyncio.sleep(_POLL_SECONDS)

    async def renew(self, claim: Claim) -> bool:
        return bool(await self._renew(keys=[claim.key], args=[claim.value, int(LEASE_SECONDS * 1000)]))

    async def complete(self, claim: Claim, response: bytes, sealed_with: bytes | None = None) -> None:
        """Keeps the response for repeats, sealed under the tenant's data key when given."""
        stored = OPENERS.seal_bytes(sealed_with, claim.tenant_id, "response", response) if sealed_with else response
        refs = sorted({m.decode() for m in _UUID.findall(response)}) if claim.tenant_id else []
        member = f"{claim.method}|{claim.tenant_id}|{claim.key}"
        # One round trip for the record and its refs (it was two, on every change a caller retries
        # safely); single-key commands, since they live in different cluster slots.
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.set(claim.key, b"done:" + claim.fingerprint + b":" + stored, ex=self.ttl)
            for ref in refs:
                pipe.sadd(ref_key(ref), member)
                pipe.expire(ref_key(ref), self.ttl)
            await pipe.execute()

    async def purge(self, ids: Collection[str], *, dry_run: bool = False) -> int:
        """Drops the cached responses, of any tenant, that name one of these memory or working-item
        ids (every response that carries a memory's content carries its id too). A Write's entry is
        deleted (PostgreSQL answers its repeats, without what was forgotten); any other call's is
        replaced by an empty response, so a repeat is still not run again. Returns how many were
        (or, dry run, would be) dropped."""
        refs = [ref_key(i) for i in sorted(set(ids))]
        members: set[str] = set()
        for start in range(0, len(refs), 500):
            # One key a command: on Redis Cluster the refs of different ids live in different slots.
            async with self.client.pipeline(transaction=False) as pipe:
                for ref in refs[start:start + 500]:
                    pipe.smembers(ref)
                for found in await pipe.execute():
                    members |= {m.decode() for m in found}
        dropped = 0
        listed = sorted(members)
        for start in range(0, len(listed), 500):
            chunk = listed[start:start + 500]
            records = [m.split("|", 2)[2] for m in chunk]
            async with self.client.pipeline(transaction=False) as pipe:
                for record in records:
                    pipe.get(record)
                values = await pipe.execute()
            async with self.client.pipeline(transaction=False) as pipe:
                for member, record, value in zip(chunk, records, values):
                    if value is None or not value.startswith(b"done:"):
                        continue
                    _, fingerprint, response = value.split(b":", 2)
                    if not response:
                        continue  # dropped before
                    dropped += 1
                    if member.split("|", 1)[0] == "Write":
                        pipe.delete(record)
                    else:
                        pipe.set(record, b"done:" + fingerprint + b":", keepttl=True)
                if not dry_run:
                    await pipe.execute()
        if not dry_run:
            async with self.client.pipeline(transaction=False) as pipe:
                for ref in refs:
                    pipe.delete(ref)
                await pipe.execute()
        return dropped

    async def abandon(self, claim: Claim) -> None:
        """Releases a claim whose call failed, so a retry can run it."""
        await self._release(keys=[claim.key], args=[claim.value])
