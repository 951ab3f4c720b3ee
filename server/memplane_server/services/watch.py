"""Watch: the caller's visible changes, streamed in commit order from the change log.

The log is read page by page by position, only when the previous page has been handed on, so a
watcher that reads slowly (or not at all) costs the server one page, never a queue: at most
PAGE_EVENTS events and about PAGE_BYTES of snapshots (plus one event, at most ~200 KB by the
input limits) per watcher. A watcher that falls behind the retention (MEMPLANE_CHANGE_RETENTION_SECONDS)
is told so (FAILED_PRECONDITION WATCH_POSITION_EXPIRED) instead of silently missing changes.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from ..core.caller import Caller
from ..core.changes import ChangeBatch, ChangeFilter
from ..core.errors import Code, MemplaneError, invalid
from ..core.validation import MAX_FILTER_VALUES, check_free_id
from .deps import Deps

PAGE_EVENTS = 64
PAGE_BYTES = 1 << 20
POLL_SECONDS = 2.0  # the log is read this often even when no notification arrives
PROGRESS_SECONDS = 15.0  # a caller who sees nothing still learns how far the log was read


def position_expired(position: int, pruned: int) -> MemplaneError:
    return MemplaneError(
        Code.FAILED_PRECONDITION, "WATCH_POSITION_EXPIRED",
        "changes after this position are past the change retention and no longer kept; start again without"
        " after_position (and reload what you keep)", position=str(position), pruned_through=str(pruned),
    )


def shutting_down() -> MemplaneError:
    return MemplaneError(Code.UNAVAILABLE, "SERVER_SHUTTING_DOWN", "this server is shutting down; resume elsewhere")


def check_change_filter(f: ChangeFilter) -> ChangeFilter:
    for name in ("scopes", "kinds", "change_kinds"):
        if len(getattr(f, name)) > MAX_FILTER_VALUES:
            raise invalid("TOO_MANY_FILTER_VALUES", f"filter.{name} has more than {MAX_FILTER_VALUES} entries",
                          field=f"filter.{name}")
    check_free_id(f.session_id, "session_id")
    check_free_id(f.entity, "entity")
    return f


class WatchService:
    def __init__(self, deps: Deps) -> None:
        self.store = deps.changes
        self.listener = deps.change_listener
        self.retention_seconds = deps.settings.change_retention_seconds

    async def watch(
        self, caller: Caller, f: ChangeFilter, after: int | None, *, stop: asyncio.Event | None = None
    ) -> AsyncIterator[ChangeBatch]:
        """Batches of the caller's visible changes after `after` (absent: from now); the first
        batch is empty and names the starting position. Ends only by an error: the caller's
        cancellation, an outage, or `stop` (UNAVAILABLE, to resume on another server)."""
        caller.require_tenant()
        check_change_filter(f)
        head = await self.store.head()
        if after is None:
            cursor = head
        else:
            if after < 0 or after > head:
                raise invalid("INVALID_WATCH_POSITION", "after_position is not a position this service gave out",
                              field="after_position")
            pruned = await self.store.pruned_through()
            if after < pruned:
                raise position_expired(after, pruned)
            cursor = after
        yield ChangeBatch((), cursor)
        sent, sent_at = cursor, time.monotonic()
        while True:
            if stop is not None and stop.is_set():
                raise shutting_down()
            wake = self.listener.wakeup()  # before reading: a change committed meanwhile still wakes us
            through = await self.store.head()
            while cursor < through:
                events, more = await self.store.read(
                    caller, after=cursor, through=through, f=f, limit=PAGE_EVENTS, max_bytes=PAGE_BYTES
                )
                pruned = await self.store.pruned_through()  # read after the page: a prune it raced is seen
                if pruned > cursor:
                    raise position_expired(cursor, pruned)
                cursor = events[-1].position if more else through
                if events or (cursor != sent and time.monotonic() - sent_at >= PROGRESS_SECONDS):
                    yield ChangeBatch(tuple(events), cursor)
                    sent, sent_at = cursor, time.monotonic()
                if stop is not None and stop.is_set():
                    raise shutting_down()
            await _first(wake, stop, POLL_SECONDS)

    async def prune(self) -> int:
        """Forgets changes older than the retention (all tenants); for the background sweep."""
        return await self.store.prune(self.retention_seconds)


async def _first(wake: asyncio.Event, stop: asyncio.Event | None, timeout: float) -> None:
    waits = [asyncio.ensure_future(wake.wait())]
    if stop is not None:
        waits.append(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
