"""Mutations carrying a request id run once per caller: a repeat gets the first call's response,
including while that call still runs (stores/redis/idempotency.py keeps the records and leases)."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ...core.access.requests import RequestKey
from ...core.errors import request_id_reused
from ...logs import OncePerCause
from ...stores.outage import REDIS, outage_of
from ...stores.redis.idempotency import RENEW_EVERY_SECONDS, Claim, IdempotencyConflict, IdempotencyStore
from ..content.keys import TenantKeys

T = TypeVar("T")
log = logging.getLogger(__name__)
ABANDON_SECONDS = 1.0


class Idempotency:
    def __init__(self, store: IdempotencyStore, keys: TenantKeys | None = None) -> None:
        self.store = store
        # Cached responses carry memory content: sealed under the tenant's data key like the memories.
        self.keys = keys
        self._log = OncePerCause(log)

    async def run_once(
        self, request: RequestKey, call: Callable[[], Awaitable[T]], serialize: Callable[[T], bytes], *,
        recorded_in_postgres: bool = False,
    ) -> T | bytes:
        """The response of call, or the serialized response of the first call with this key. The
        same request id with another request is REQUEST_ID_REUSED.

        A call that records its request key in PostgreSQL itself (Write) still runs while Redis is
        unreachable: PostgreSQL then answers repeats, so writes go on through a Redis outage."""
        try:
            claim = await self.store.begin(request)
        except IdempotencyConflict:
            raise request_id_reused() from None
        except Exception as exc:
            if not (recorded_in_postgres and outage_of(exc) == REDIS):
                raise
            self._log.log("redis", "Redis unreachable: writes are deduplicated by PostgreSQL alone until it is back",
                          level=logging.WARNING, exc_info=False)
            return await call()
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
        try:
            sealed_with = await self.keys.current(claim.tenant_id) if self.keys and claim.tenant_id else None
            await self.store.complete(claim, serialize(response), sealed_with)
        except Exception as exc:
            if not (recorded_in_postgres and outage_of(exc) == REDIS):
                raise
            # Done and recorded in PostgreSQL: a repeat is answered from there.
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
