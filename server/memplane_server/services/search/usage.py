"""Search's usage counters (use_count, last_used_at), written a moment after the searches that used
the memories and together: an UPDATE per search (a session, a commit) ran on the event loop beside
the response it followed, and on the CPU beside the next search's query embedding. Counters are
best effort, but a stopping server writes those it holds (within its grace time)."""
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
        self._writing: set[asyncio.Task] = set()
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
        pending, self._pending = self._pending, {}
        for caller, uses, at in pending.values():
            task = asyncio.ensure_future(self.memories.mark_used(caller, uses, at=at))
            self._writing.add(task)
            task.add_done_callback(self._written)

    async def flush(self) -> None:
        """Writes what is pending now and waits for every write in flight."""
        self._write()
        await asyncio.gather(*self._writing, return_exceptions=True)

    def _written(self, task: asyncio.Task) -> None:
        self._writing.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._failures.log(cause_of(exc), "usage counters not updated: %s", type(exc).__name__,
                               level=logging.WARNING, exc_info=False)
