"""The background loops besides jobs: working-memory expiry and old request records, and turn
windows. Each runs until its runner is told to stop and outlives any single failure."""
from __future__ import annotations

import logging

from ..logs import OncePerCause, cause_of
from ..services.context import ContextService
from ..services.watch import WatchService
from ..services.working import WorkingService
from ..services.write import WriteService
from .runner import IDLE_POLL_SECONDS, JobRunner

log = logging.getLogger(__name__)


async def sweep_expired(working: WorkingService, writes: WriteService, watches: WatchService, every_seconds: float,
                        runner: JobRunner) -> None:
    """Promotes expired working-memory sessions, forgets write requests past the idempotency window
    and changes past the change retention."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            await working.promote_expired()
            await writes.forget_old_requests()
            await watches.prune()
        except Exception as exc:  # Redis or PostgreSQL hiccups: try again next round
            failures.log(cause_of(exc), "sweep of expired sessions and requests failed")
        await runner.wait(every_seconds)


async def build_turn_windows(contexts: ContextService, runner: JobRunner) -> None:
    """Builds the windows of marked sessions."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            built = await contexts.refresh_next()
        except Exception as exc:  # a lost connection or a failed embedding: the lease runs out, the session comes back
            failures.log(cause_of(exc), "building turn windows failed")
            built = False
        if not built:
            await runner.wait(IDLE_POLL_SECONDS)
