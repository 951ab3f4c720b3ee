"""Reads on a hot standby with read-your-writes: a call that changes nothing reads on the standby
(MEMPLANE_READ_DATABASE_URL) unless the caller has written past what the standby has replayed; then
it waits for the standby (MEMPLANE_READ_WAIT_MS at most), and reads the primary if it is still behind
or unreachable. Callers learn where their writes reached from each write's answer (the primary's
WAL position after it) and send the highest they saw with their reads: the SDK does."""
from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time

from ...core.errors import invalid
from ...logs import OncePerCause, cause_of
from ...stores.postgres.replica import ReadPools, read_on_standby, reset_read_on_standby

log = logging.getLogger(__name__)

_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")
_POLL_SECONDS = 0.005
# How long a standby that failed to answer is left out before it is tried again.
_RETRY_STANDBY_SECONDS = 5.0


class ReadRouting:
    def __init__(self, pools: ReadPools, wait_ms: int) -> None:
        self._pools = pools
        self._wait = wait_ms / 1000
        self._failed_at = -_RETRY_STANDBY_SECONDS
        self._failures = OncePerCause(log)

    @property
    def enabled(self) -> bool:
        return self._pools.standby is not None

    async def written_up_to(self) -> str:
        """Where the primary's WAL is now: past every write acknowledged so far."""
        return await self._pools.written_up_to()

    async def route(self, after: str | None) -> contextvars.Token:
        """Sends the current call's reads to the standby when it has replayed the caller's writes
        (after: the highest position the caller was given; None: it wrote nothing here)."""
        if after is not None and not _LSN.fullmatch(after):
            raise invalid("INVALID_READ_POSITION", "the read position must be a WAL position such as 0/16B3748")
        return read_on_standby(await self._standby_has(after))

    def done(self, token: contextvars.Token) -> None:
        reset_read_on_standby(token)

    async def _standby_has(self, after: str | None) -> bool:
        if time.monotonic() - self._failed_at < _RETRY_STANDBY_SECONDS:
            return False
        if after is None:
            return True
        deadline = time.monotonic() + self._wait
        try:
            while not await self._pools.replayed(after):
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(_POLL_SECONDS)
        except Exception as exc:  # the standby is down or lagging badly: the primary answers
            self._failed_at = time.monotonic()
            self._failures.log(cause_of(exc), "the read standby does not answer; reading the primary: %s",
                               type(exc).__name__, level=logging.WARNING, exc_info=False)
            return False
        return True
