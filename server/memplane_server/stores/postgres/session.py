"""Caller-scoped transactions: the restricted role plus the caller in transaction-local settings,
so row-level security enforces visibility even if a query's own predicate were wrong."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TypeVar

import asyncpg

from ...core.access.caller import Caller

log = logging.getLogger(__name__)

APP_ROLE = "memplane_app"


# The connections' own mode (stores/postgres/pool.py): every statement planned for its parameters.
CUSTOM_PLANS = "force_custom_plan"
# For statements whose every plan gives the same answer at about the same cost: planned once per
# connection, never again (`auto` keeps planning one whose generic estimate looks dearer).
GENERIC_PLANS = "force_generic_plan"


@asynccontextmanager
async def caller_session(pool: asyncpg.Pool, caller: Caller, *, plans: str = CUSTOM_PLANS
                         ) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        # Everything a caller's statements rely on is set here, transaction-local: nothing rides on
        # the connection, so a transaction-mode pooler may hand each transaction any server.
        search = conn.search_settings  # stores/postgres/pool.py
        await conn.execute(
            "SELECT set_config('role', $1, true), set_config('memplane.tenant_id', $2, true),"
            " set_config('memplane.agent_id', $3, true), set_config('memplane.read_domains', $4, true),"
            " set_config('memplane.write_domains', $5, true), set_config('plan_cache_mode', $6, true),"
            " set_config('hnsw.iterative_scan', $7, true), set_config('hnsw.ef_search', $8, true)",
            APP_ROLE,
            caller.tenant_id or "",
            caller.agent_id or "",
            ",".join(sorted(caller.domains)),
            ",".join(sorted(d for d, can_write in caller.domains.items() if can_write)),
            plans,
            search["hnsw.iterative_scan"],
            search["hnsw.ef_search"],
        )
        yield conn


T = TypeVar("T")
# Sessions whose commit runs after their rows were answered: held here until it is done, so that
# no task is collected while it still has the connection.
_committing: set[asyncio.Task] = set()


class SessionAhead:
    """A read session opened when made, run once (or closed unused); its commit is not waited for,
    since its statements only read and their rows are in hand. Search makes its vector channels'
    session before their statements are known, while the query is embedded, where a core is spare
    for it: the connection, BEGIN and the caller's settings (three round trips, about 0.4 ms of the
    event loop) are then done while it waits, not after. A run that is not the `last` leaves the
    session open for the next (Search's lexical channels leave theirs open for its answer's rows,
    read in two steps around fusion)."""

    def __init__(self, session: AbstractAsyncContextManager[asyncpg.Connection], plans: str) -> None:
        self.plans = plans
        # Made before the session is entered, so that closing finds whatever the opening got to.
        self._stack = AsyncExitStack()
        self._opening = asyncio.ensure_future(self._stack.enter_async_context(session))
        self._ran = self._ended = False
        # Held while work runs: an end asked for meanwhile (its search failed elsewhere) waits for it,
        # since a connection runs one thing at a time.
        self._working = asyncio.Lock()

    async def run(self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, last: bool = True) -> T:
        if self._ended:
            raise RuntimeError("the session has ended")
        self._ran = True
        async with self._working:
            conn = await self._opening
            try:
                answer = await work(conn)
            except BaseException as exc:
                self._ended = True
                await self._stack.__aexit__(type(exc), exc, exc.__traceback__)  # rolled back, released
                raise
        if last:
            self.close_soon()
        return answer

    def close_soon(self) -> None:
        """Ends the session without waiting for it (committed: it only read). One still opening is
        let finish first: cancelled midway, its statement cost PostgreSQL a cancel request on a
        connection of its own, and asyncpg left a failed future that nobody read."""
        if self._ended:
            return
        self._ended = True
        closing = asyncio.ensure_future(self._close_once_open())
        _committing.add(closing)
        closing.add_done_callback(_committed)

    async def _close_once_open(self) -> None:
        await asyncio.gather(self._opening, return_exceptions=True)
        async with self._working:
            await self._stack.aclose()

    async def close(self) -> None:
        """Ends the session: one that was run commits (not waited for), one that never was (a search
        that failed or was cancelled first) is given back."""
        if self._ended:
            return
        if self._ran:
            self.close_soon()
            return
        self._ended = True
        self._opening.cancel()  # an opening under way unwinds itself; a finished one is on the stack
        await asyncio.gather(self._opening, return_exceptions=True)
        await self._stack.aclose()


async def read_sessions_ended() -> None:
    """Waits for the commits of the read sessions that answered without waiting for them. A server's
    event loop runs them soon after; a caller that runs its loop only while it searches (a
    benchmark) would otherwise leave their transactions open, holding their locks, in between."""
    await asyncio.gather(*_committing, return_exceptions=True)


def _committed(task: asyncio.Task) -> None:
    _committing.discard(task)
    if not task.cancelled() and task.exception() is not None:
        # The rows were answered; a connection that failed at commit is the pool's to replace.
        log.debug("a read session's commit failed: %r", task.exception())
