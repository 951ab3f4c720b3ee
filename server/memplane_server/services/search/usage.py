"""Search's usage counters (use_count, last_used_at), written a moment after the searches that used
the memories and together: an UPDATE per search (a session, a commit) ran on the event loop beside
the response it followed, and on the CPU beside the next search's query embedding. Counters are
best effort, but a stopping server writes those it holds (within its grace time).

One writer writes them, caller after caller, on one connection at a time. A caller's update is an
UPDATE of its rights (row-level security), so callers cannot share one; written side by side, the
callers of a busy second (each tenant its own) took up to 9 of the pool's 10 connections, and an
update whose new row versions do not fit their pages goes into every index, both HNSW graphs
included: 0.4-1.0 s each at 1,000,000 memories, while searches waited seconds for a connection
(bench/README.md)."""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime

from ...core.access.caller import Caller
from ...logs import OncePerCause, cause_of
from ...stores.postgres.memories import MemoryStore

log = logging.getLogger(__name__)

# Long enough to gather the searches of a busy moment into one write (its session and UPDATE took
# 2.8 ms p50 beside searches: at 0.2 s a caller searching every 0.1 s paid one every other search),
# short enough that a caller reading a memory soon after searching for it sees it counted.
WRITE_AFTER_SECONDS = 1.0


class UsageCounts:
    def __init__(self, memories: MemoryStore, clock: Callable[[], datetime]) -> None:
        self.memories, self.clock = memories, clock
        # Per caller (its rights decide which rows it may count): how often each memory was used,
        # and when last.
        self._pending: dict[tuple, tuple[Caller, Counter[uuid.UUID], datetime]] = {}
        self._writer: asyncio.Task | None = None
        self._failures = OncePerCause(log)

    def add(self, caller: Caller, ids: list[uuid.UUID]) -> None:
        if not ids:
            return
        if not self._pending:
            asyncio.get_running_loop().call_later(WRITE_AFTER_SECONDS, self._write)
        key = (caller.key_id, caller.role, caller.tenant_id, caller.agent_id, tuple(sorted(caller.domains.items())))
        uses = self._pending[key][1] if key in self._pending else Counter()
        uses.update(dict.fromkeys(ids, 1))  # a memory twice in one answer is used once
        self._pending[key] = (caller, uses, self.clock())

    def _write(self) -> None:
        # A writer at work takes what is pending when it has written what it took.
        if self._writer is None and self._pending:
            self._writer = asyncio.ensure_future(self._write_pending())
            self._writer.add_done_callback(self._written)

    async def _write_pending(self) -> None:
        while self._pending:
            pending, self._pending = self._pending, {}
            for caller, uses, at in pending.values():
                try:
                    await self.memories.mark_used(caller, uses, at=at)
                except Exception as exc:  # the next caller's counters still go
                    self._failures.log(cause_of(exc), "usage counters not updated: %s", type(exc).__name__,
                                       level=logging.WARNING, exc_info=False)

    async def flush(self) -> None:
        """Writes what is pending now and waits until the writer is done."""
        self._write()
        while self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    def _written(self, _: asyncio.Task) -> None:
        self._writer = None
