"""Reads on a hot standby (PostgreSQL's streaming replication): which pool a read of the current
call takes, and how far the standby has replayed the primary's WAL, for read-your-writes."""
from __future__ import annotations

import contextvars

import asyncpg

# Whether the current call's reads may go to the standby: set per call (services/access/read_routing.py)
# only for calls that change nothing, so no write is ever sent there.
_on_standby: contextvars.ContextVar[bool] = contextvars.ContextVar("memplane_reads_on_standby", default=False)


def read_on_standby(allowed: bool) -> contextvars.Token:
    return _on_standby.set(allowed)


def reset_read_on_standby(token: contextvars.Token) -> None:
    _on_standby.reset(token)


class ReadPools:
    """The primary's pool, and the standby's when one is configured."""

    def __init__(self, primary: asyncpg.Pool, standby: asyncpg.Pool | None = None) -> None:
        self.primary = primary
        self.standby = standby

    def for_reads(self) -> asyncpg.Pool:
        return self.standby if self.standby is not None and _on_standby.get() else self.primary

    async def written_up_to(self) -> str:
        """The primary's WAL position now: at or past every commit already acknowledged."""
        return await self.primary.fetchval("SELECT pg_current_wal_lsn()::text")

    async def replayed(self, lsn: str) -> bool:
        """Whether the standby has replayed the primary's WAL up to lsn (so its commits are visible)."""
        assert self.standby is not None
        return bool(await self.standby.fetchval("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn))
