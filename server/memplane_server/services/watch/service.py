"""Watch: the caller's visible changes, streamed in commit order from the change log.

One reader per process follows the log for every watcher (services/watch/feed.py); a watcher
reads the log itself only for changes it might see. It reads page by page by position, only when
the previous page has been handed on, so a
watcher that reads slowly (or not at all) costs the server one page, never a queue: at most
PAGE_EVENTS events and about PAGE_BYTES of snapshots (plus one event, at most ~200 KB by the
input limits) per watcher. A watcher that falls behind the retention (MEMPLANE_CHANGE_RETENTION_SECONDS)
is told so (FAILED_PRECONDITION WATCH_POSITION_EXPIRED) instead of silently missing changes.

Access is checked for as long as the stream lasts: the key is resolved again at least every
RECHECK_SECONDS (from a lookup at most that old, shared by the key's streams), and the stream ends
with UNAUTHENTICATED once it is revoked, and with PERMISSION_DENIED once its role changed or a
domain grant it read through was removed; each page is read with the current grants, and a page
with changes is delivered only after the key and its grants, looked up after the page was read,
still allow it, so nothing committed after a revocation or a grant's removal is delivered. Streams are
counted per key and per tenant on each server, and refused beyond the caps.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager

from ...core.access.caller import Caller
from ...core.changes import ChangeBatch, ChangeFilter, might_see
from ...core.errors import Code, MemplaneError, invalid
from ...core.validation import MAX_FILTER_VALUES, check_free_id
from .deps import WatchDeps
from .feed import ChangeFeed, Subscription, reach_of

PAGE_EVENTS = 64
PAGE_BYTES = 1 << 20
POLL_SECONDS = 2.0  # a watcher looks at the feed this often even when it does not wake it
RECHECK_SECONDS = 1.0  # a stream's key is resolved again this often (the promise is within 2 s)
PROGRESS_SECONDS = 15.0  # a caller who sees nothing still learns how far the log was read


def position_expired(position: int, pruned: int) -> MemplaneError:
    return MemplaneError(
        Code.FAILED_PRECONDITION, "WATCH_POSITION_EXPIRED",
        "changes after this position are past the change retention and no longer kept; start again without"
        " after_position (and reload what you keep)", position=str(position), pruned_through=str(pruned),
    )


def shutting_down() -> MemplaneError:
    return MemplaneError(Code.UNAVAILABLE, "SERVER_SHUTTING_DOWN", "this server is shutting down; resume elsewhere")


def access_changed(before: Caller, now: Caller) -> MemplaneError | None:
    """Why a stream opened as `before` may not go on as `now` (None: it may)."""
    if now.role is not before.role or now.tenant_id != before.tenant_id or now.agent_id != before.agent_id:
        return MemplaneError(Code.PERMISSION_DENIED, "KEY_ROLE_CHANGED",
                             "this key's role changed since the stream opened; open it again")
    removed = sorted(set(before.domains) - set(now.domains))
    if removed:
        return MemplaneError(Code.PERMISSION_DENIED, "DOMAIN_GRANT_REMOVED",
                             "a domain grant this stream read through was removed; open it again",
                             domain=removed[0])
    return None


class StreamCounts:
    """Open streams per key and per tenant on this server, refused beyond the caps."""

    def __init__(self, per_key: int, per_tenant: int) -> None:
        self.per_key, self.per_tenant = per_key, per_tenant
        self.keys: Counter[str] = Counter()
        self.tenants: Counter[str] = Counter()

    @contextmanager
    def held(self, caller: Caller) -> Iterator[None]:
        tenant = caller.tenant_id or ""
        if self.keys[caller.key_id] >= self.per_key:
            raise MemplaneError(Code.RESOURCE_EXHAUSTED, "WATCH_STREAMS_PER_KEY",
                                f"this key holds {self.per_key} open Watch streams on this server (the most)",
                                limit=str(self.per_key))
        if self.tenants[tenant] >= self.per_tenant:
            raise MemplaneError(Code.RESOURCE_EXHAUSTED, "WATCH_STREAMS_PER_TENANT",
                                f"this tenant holds {self.per_tenant} open Watch streams on this server (the most)",
                                limit=str(self.per_tenant))
        self.keys[caller.key_id] += 1
        self.tenants[tenant] += 1
        try:
            yield
        finally:
            for counts, name in ((self.keys, caller.key_id), (self.tenants, tenant)):
                counts[name] -= 1
                if counts[name] <= 0:
                    del counts[name]


def check_change_filter(f: ChangeFilter) -> ChangeFilter:
    for name in ("scopes", "kinds", "change_kinds"):
        if len(getattr(f, name)) > MAX_FILTER_VALUES:
            raise invalid("TOO_MANY_FILTER_VALUES", f"filter.{name} has more than {MAX_FILTER_VALUES} entries",
                          field=f"filter.{name}")
    check_free_id(f.session_id, "session_id")
    check_free_id(f.entity, "entity")
    return f


class WatchService:
    def __init__(self, deps: WatchDeps) -> None:
        self.store = deps.changes
        self.feed = ChangeFeed(deps.changes, deps.change_listener)
        self.retention_seconds = deps.settings.change_retention_seconds
        self.streams = StreamCounts(deps.settings.watch_max_streams_per_key, deps.settings.watch_max_streams_per_tenant)

    async def watch(
        self, caller: Caller, f: ChangeFilter, after: int | None, *, stop: asyncio.Event | None = None,
        reauthorize: Callable[[float], Awaitable[Caller]] | None = None,
    ) -> AsyncIterator[ChangeBatch]:
        """Batches of the caller's visible changes after `after` (absent: from now); the first
        batch is empty and names the starting position. Ends only by an error: the caller's
        cancellation, an outage, `stop` (UNAVAILABLE, to resume on another server), or a change of
        what the key may do, which `reauthorize` (the key resolved again, from a lookup at most
        that many seconds old) tells."""
        caller.require_tenant()
        check_change_filter(f)
        with self.streams.held(caller):
            sub = await self.feed.open(reach_of(caller.tenant_id, caller.domains))
            try:
                async for batch in self._watch(caller, f, after, stop, reauthorize, sub):
                    yield batch
            finally:
                self.feed.close(sub)

    async def _watch(
        self, caller: Caller, f: ChangeFilter, after: int | None, stop: asyncio.Event | None,
        reauthorize: Callable[[float], Awaitable[Caller]] | None, sub: Subscription,
    ) -> AsyncIterator[ChangeBatch]:
        checked_at = time.monotonic()

        async def recheck(max_age: float) -> None:
            nonlocal caller, checked_at
            if reauthorize is None:
                return
            now = await reauthorize(max_age)
            refused = access_changed(caller, now)
            if refused is not None:
                raise refused
            caller, checked_at = now, time.monotonic()
            self.feed.move(sub, reach_of(caller.tenant_id, caller.domains))

        cursor = await self._start_at(after)
        yield ChangeBatch((), cursor)
        sent, sent_at = cursor, time.monotonic()
        while True:
            if stop is not None and stop.is_set():
                raise shutting_down()
            wake = sub.armed()  # before looking: an entry read meanwhile still wakes us
            if time.monotonic() - checked_at >= RECHECK_SECONDS:
                await recheck(RECHECK_SECONDS)
            through = self.feed.read_through or cursor
            window = self.feed.since(cursor) if cursor < through else None
            if window is not None and not any(might_see(caller, f, e) for e in window):
                cursor = through  # nothing here this watcher could see: no read of its own
                if cursor != sent and time.monotonic() - sent_at >= PROGRESS_SECONDS:
                    yield ChangeBatch((), cursor)
                    sent, sent_at = cursor, time.monotonic()
            while cursor < through:
                events, more = await self.store.read(
                    caller, after=cursor, through=through, f=f, limit=PAGE_EVENTS, max_bytes=PAGE_BYTES
                )
                pruned = await self.store.pruned_through()  # read after the page: a prune it raced is seen
                if pruned > cursor:
                    raise position_expired(cursor, pruned)
                if events:
                    # Looked up after the page was read: a revocation or grant removal committed
                    # before any of its changes is seen here, and the page is not delivered.
                    await recheck(0.0)
                cursor = events[-1].position if more else through
                if events or (cursor != sent and time.monotonic() - sent_at >= PROGRESS_SECONDS):
                    yield ChangeBatch(tuple(events), cursor)
                    sent, sent_at = cursor, time.monotonic()
                if stop is not None and stop.is_set():
                    raise shutting_down()
            await _first(wake, stop, RECHECK_SECONDS if reauthorize is not None else POLL_SECONDS)

    async def _start_at(self, after: int | None) -> int:
        """The position a watch starts after: the head, or a position this service gave out and still keeps."""
        head = await self.store.head()
        if after is None:
            return head
        if after < 0 or after > head:
            raise invalid("INVALID_WATCH_POSITION", "after_position is not a position this service gave out",
                          field="after_position")
        pruned = await self.store.pruned_through()
        if after < pruned:
            raise position_expired(after, pruned)
        return after

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
