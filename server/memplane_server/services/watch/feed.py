"""One reader of the change log per process, for all its Watch streams.

Each commit used to wake every watcher of the process, and each read the log's head and then the
log itself: W watchers cost 2W queries a commit, whether or not they could see the change. Now
one task reads the new entries once (ids and labels, no content), keeps the latest in a window,
and wakes only the watchers whose reach (their tenant, the domains they read) the entries touch,
so a commit costs a watcher of another tenant nothing at all; every watcher also looks by itself
now and then (its key's re-check, its progress reports). A watcher reads the log itself (with its caller's visibility, row-level
security and the memories' snapshots) only when an entry it might see is in the window
(core/changes.might_see), or when it is behind the window (a resume from an old position).
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

from ...core.changes import LogEntry
from ...logs import OncePerCause, cause_of
from ...stores.postgres.changes import ChangeListener, ChangeStore

log = logging.getLogger(__name__)

WINDOW_ENTRIES = 20_000  # about 2 MB of entries: the latest commits, whatever the tenants
READ_ENTRIES = 5_000  # entries read in one query
POLL_SECONDS = 2.0  # read this often even when no notification arrives


def reach_of(tenant_id: str | None, domains: Iterable[str]) -> frozenset[str]:
    """What a watcher's entries can come from: its tenant's rows and its readable domains'."""
    return frozenset([f"t:{tenant_id}", *(f"d:{d}" for d in domains)])


def _touched(e: LogEntry) -> tuple[str, ...]:
    return (f"t:{e.tenant_id}", f"d:{e.domain}") if e.domain else (f"t:{e.tenant_id}",)


class Subscription:
    """One watcher's place in the feed: the reach it is woken for, and its wake-up event."""

    def __init__(self, reach: frozenset[str]) -> None:
        self.reach = reach
        self._event = asyncio.Event()

    def armed(self) -> asyncio.Event:
        """A fresh event the feed sets when it next reads an entry within reach; take it before
        looking at the window, so an entry read meanwhile still wakes the watcher."""
        self._event = asyncio.Event()
        return self._event

    def wake(self) -> None:
        self._event.set()


class ChangeFeed:
    def __init__(self, store: ChangeStore, listener: ChangeListener) -> None:
        self.store = store
        self.listener = listener
        self.window: deque[LogEntry] = deque(maxlen=WINDOW_ENTRIES)
        self.read_through: int | None = None  # every entry up to here has been read
        self.covers_after: int | None = None  # the window holds every entry in (covers_after, read_through]
        self._task: asyncio.Task | None = None
        self._by_reach: dict[str, set[Subscription]] = {}
        self._watchers = 0
        self._failures = OncePerCause(log)

    async def open(self, reach: frozenset[str]) -> Subscription:
        """Counts a watcher in (the first one starts the reader); it is woken for entries of reach."""
        sub = Subscription(frozenset())
        self._watchers += 1
        self.move(sub, reach)
        if self.read_through is None:
            head = await self.store.head()
            if self.read_through is None:
                self.read_through = self.covers_after = head
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return sub

    def move(self, sub: Subscription, reach: frozenset[str]) -> None:
        """Wakes the watcher for entries of another reach (its grants changed)."""
        for key in sub.reach - reach:
            self._by_reach[key].discard(sub)
            if not self._by_reach[key]:
                del self._by_reach[key]
        for key in reach - sub.reach:
            self._by_reach.setdefault(key, set()).add(sub)
        sub.reach = reach

    def close(self, sub: Subscription) -> None:
        self.move(sub, frozenset())
        self._watchers -= 1
        if self._watchers <= 0 and self._task is not None:
            self._task.cancel()
            self._task = None

    def since(self, after: int) -> list[LogEntry] | None:
        """The entries after `after` up to read_through, or None when the window no longer holds
        them all (the watcher reads the log itself)."""
        if self.covers_after is None or after < self.covers_after:
            return None
        if not self.window or self.window[-1].position <= after:
            return []
        return [e for e in self.window if e.position > after]

    async def _run(self) -> None:
        while True:
            wake = self.listener.wakeup()  # before reading: a change committed meanwhile still wakes us
            try:
                await self._read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is away: watchers see no progress meanwhile
                self._failures.log(cause_of(exc), "reading the change log failed; retrying", level=logging.WARNING,
                                   exc_info=False)
            try:
                await asyncio.wait_for(wake.wait(), POLL_SECONDS)
            except asyncio.TimeoutError:
                pass

    async def _read(self) -> None:
        head = await self.store.head()
        while self.read_through is not None and self.read_through < head:
            entries = await self.store.entries(self.read_through, head, READ_ENTRIES)
            touched: set[str] = set()
            for e in entries:
                if len(self.window) == self.window.maxlen:
                    self.covers_after = self.window[0].position
                self.window.append(e)
                touched.update(_touched(e))
            self.read_through = entries[-1].position if len(entries) == READ_ENTRIES else head
            for key in touched:
                for sub in self._by_reach.get(key, ()):
                    sub.wake()
