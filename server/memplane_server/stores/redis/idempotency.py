"""Idempotency records keyed by (tenant, method, request_id), shared by all server instances.

The first call claims the key with SET NX; concurrent repeats wait for its response instead of
running the mutation again. A claim that is never completed (the server died mid-call)
expires after a short lease, so the client's retry can run.
"""
from __future__ import annotations

import asyncio
import hashlib

import redis.asyncio as redis

_PENDING = b"pending"
_LEASE_SECONDS = 60


class IdempotencyConflict(Exception):
    """The request_id was used before with a different request."""


class IdempotencyStore:
    def __init__(self, client: redis.Redis, ttl_seconds: int) -> None:
        self.client = client
        self.ttl = ttl_seconds

    @staticmethod
    def _key(tenant: str, method: str, request_id: str) -> str:
        digest = hashlib.sha256(request_id.encode()).hexdigest()[:32]
        return f"mp:idem:{tenant}:{method}:{digest}"

    async def begin(self, tenant: str, method: str, request_id: str, fingerprint: bytes) -> bytes | None:
        """Claims the key and returns None, or returns the stored response of an earlier call."""
        key = self._key(tenant, method, request_id)
        fp = hashlib.sha256(fingerprint).hexdigest().encode()
        while True:
            if await self.client.set(key, _PENDING + b":" + fp, nx=True, ex=_LEASE_SECONDS):
                return None
            value = await self.client.get(key)
            if value is None:
                continue
            state, _, rest = value.partition(b":")
            stored_fp, _, response = rest.partition(b":")
            if stored_fp != fp:
                raise IdempotencyConflict()
            if state == b"done":
                return response
            await asyncio.sleep(0.02)

    async def complete(self, tenant: str, method: str, request_id: str, fingerprint: bytes, response: bytes) -> None:
        fp = hashlib.sha256(fingerprint).hexdigest().encode()
        await self.client.set(self._key(tenant, method, request_id), b"done:" + fp + b":" + response, ex=self.ttl)

    async def abandon(self, tenant: str, method: str, request_id: str) -> None:
        """Releases a claim whose call failed, so a retry can run it."""
        await self.client.delete(self._key(tenant, method, request_id))
