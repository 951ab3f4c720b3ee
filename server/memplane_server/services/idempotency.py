"""Mutations carrying a request id run once per caller: a repeat gets the first call's response,
including while that call still runs (stores/redis/idempotency.py keeps the records and leases)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..core.errors import request_id_reused
from ..core.requests import RequestKey
from ..stores.redis.idempotency import RENEW_EVERY_SECONDS, Claim, IdempotencyConflict, IdempotencyStore

T = TypeVar("T")
ABANDON_SECONDS = 1.0


class Idempotency:
    def __init__(self, store: IdempotencyStore) -> None:
        self.store = store

    async def run_once(
        self, request: RequestKey, call: Callable[[], Awaitable[T]], serialize: Callable[[T], bytes]
    ) -> T | bytes:
        """The response of call, or the serialized response of the first call with this key. The
        same request id with another request is REQUEST_ID_REUSED."""
        try:
            claim = await self.store.begin(request)
        except IdempotencyConflict:
            raise request_id_reused() from None
        if isinstance(claim, bytes):
            return claim
        renewing = asyncio.ensure_future(self._renew(claim))
        try:
            response = await call()
        except BaseException:
            renewing.cancel()
            await self._abandon(claim)
            raise
        renewing.cancel()
        await self.store.complete(claim, serialize(response))
        return response

    async def _renew(self, claim: Claim) -> None:
        """Keeps the claim alive while its call runs: a dead server's claim lapses in seconds."""
        while True:
            await asyncio.sleep(RENEW_EVERY_SECONDS)
            try:
                await self.store.renew(claim)
            except Exception:  # Redis away for a moment: the call goes on, the next renewal may work
                pass

    async def _abandon(self, claim: Claim) -> None:
        """Releases the claim of a failed call, so the client's retry runs it."""
        try:
            await asyncio.wait_for(self.store.abandon(claim), ABANDON_SECONDS)
        except Exception:  # the lease runs out by itself within seconds
            pass
