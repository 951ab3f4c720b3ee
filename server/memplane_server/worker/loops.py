"""The background loops besides jobs: working-memory expiry and old request records, turn
windows, keyword statistics, the backlog gauges and the consolidation and lifecycle schedules. Each runs until its
runner is told to stop and outlives any single failure."""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from opentelemetry import metrics

from ..logs import OncePerCause, cause_of
from ..services.deps import Deps
from ..services.metering import Metering
from ..services.watch.service import WatchService
from ..services.working import WorkingService
from ..services.write.context import ContextService
from ..services.write.service import WriteService
from .runner import IDLE_POLL_SECONDS, JobRunner

log = logging.getLogger(__name__)
BACKLOG_REPORT_SECONDS = 10.0
_meter = metrics.get_meter("memplane.server")
_job_depth = _meter.create_gauge("memplane.jobs.pending", unit="{job}", description="jobs waiting to run")
_job_age = _meter.create_gauge("memplane.jobs.oldest_pending_age", unit="s", description="age of the oldest waiting job")
_window_backlog = _meter.create_gauge(
    "memplane.turn_windows.backlog", unit="{session}", description="sessions whose turn windows await building")
_window_backlog_age = _meter.create_gauge(
    "memplane.turn_windows.backlog_age", unit="s",
    description="how long the session waiting longest for its turn windows has waited since its first unbuilt write")
_window_upgrades = _meter.create_gauge(
    "memplane.turn_windows.upgrades_pending", unit="{session}",
    description="sessions whose averaged turn windows await their embedding")
_stored = _meter.create_gauge("memplane.memories.stored", unit="{memory}", description="memories stored per tenant")


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
    """Builds the windows of marked sessions (averaged: no embedding work)."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            built = await contexts.refresh_next()
        except Exception as exc:  # a lost connection: the lease runs out, the session comes back
            failures.log(cause_of(exc), "building turn windows failed")
            built = False
        if not built:
            await runner.wait(IDLE_POLL_SECONDS)


async def upgrade_turn_windows(contexts: ContextService, runner: JobRunner) -> None:
    """Embeds averaged windows from their text while the embedder has nothing else to do; apart
    from the builder, so a write load that leaves no room for upgrades never delays the builds."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            upgraded = await contexts.upgrade_next(lambda: runner.stopping)
        except Exception as exc:  # a lost connection or a failed embedding: the session comes back
            failures.log(cause_of(exc), "upgrading turn windows failed")
            upgraded = False
        if not upgraded:
            await runner.wait(IDLE_POLL_SECONDS)


async def keep_keyword_stats(deps: Deps, every_seconds: float, runner: JobRunner) -> None:
    """Counts the terms of tenants whose keyword statistics are missing or stale (the keyword
    channels leave a tenant's most common terms out of their match), and first the planner's
    statistics of the memories table when enough of it changed (stores/postgres/search/planner_stats.py)."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            await deps.planner_stats.refresh_if_stale()
            for tenant in await deps.keyword_stats.stale_tenants(limit=100):
                if runner.stopping:
                    break
                await deps.keyword_stats.refresh(tenant)
        except Exception as exc:  # PostgreSQL away: the old counts serve until the next round
            failures.log(cause_of(exc), "counting keyword or planner statistics failed")
        await runner.wait(every_seconds)


async def report_backlogs(deps: Deps, runner: JobRunner, every_seconds: float = BACKLOG_REPORT_SECONDS) -> None:
    """Reads the shared queues and the tenants' memory counts into gauges. Every process doing
    background work reports the same database-wide values: aggregate them with max, not sum."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            depth, age = await deps.jobs.queue_depth()
            backlog, backlog_age, upgrades = await deps.contexts.backlog_total()
            counts = await deps.tenancy.memory_counts()
        except Exception as exc:  # PostgreSQL away: the gauges keep their last values until it is back
            failures.log(cause_of(exc), "reading the queue backlogs failed")
        else:
            _job_depth.set(depth)
            _job_age.set(age)
            _window_backlog.set(backlog)
            _window_backlog_age.set(backlog_age)
            _window_upgrades.set(upgrades)
            for tenant, count in counts.items():
                _stored.set(count, {"memplane.tenant": tenant})
        await runner.wait(every_seconds)


async def schedule_consolidations(deps: Deps, every_seconds: float, runner: JobRunner) -> None:
    """Queues each tenant's periodic consolidation (MEMPLANE_CONSOLIDATE_EVERY_SECONDS)."""
    await _schedule(deps.jobs.schedule_consolidations, "consolidations", every_seconds, runner)


async def schedule_lifecycle(deps: Deps, every_seconds: float, runner: JobRunner) -> None:
    """Queues each enabled lifecycle policy's run (MEMPLANE_LIFECYCLE_EVERY_SECONDS)."""
    await _schedule(deps.jobs.schedule_lifecycle, "lifecycle runs", every_seconds, runner)


async def maintain_keys(deps: Deps, every_seconds: float, runner: JobRunner) -> None:
    """Moves stored memories to the current keys (docs/security.md): data keys wrapped by an older
    KEK are re-wrapped, and each tenant with memories under an older data key (or stored in clear
    from before encryption) is re-sealed. Every worker may run it: each step is guarded against
    the others (a row moves only if it is still as read)."""
    failures = OncePerCause(log)
    first_round = True
    while not runner.stopping and deps.keys.enabled:
        try:
            await deps.keys.upkeep(first_round=first_round)
            first_round = False
        except Exception as exc:  # PostgreSQL away, or a key this server lacks: the next round tries again
            failures.log(cause_of(exc), "moving memories to the current keys failed")
        await runner.wait(every_seconds)


async def _schedule(queue: Callable[[float], Awaitable[object]], what: str, every_seconds: float,
                    runner: JobRunner) -> None:
    """Calls queue(every_seconds) at least once a minute; the store queues once per period however
    many processes call it."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            await queue(every_seconds)
        except Exception as exc:  # PostgreSQL away: the next period queues them
            failures.log(cause_of(exc), "scheduling %s failed", what)
        await runner.wait(min(every_seconds, 60.0))


async def roll_up_usage(metering: Metering, every_seconds: float, runner: JobRunner) -> None:
    """Rolls the tenants' stored memories and bytes up into the day's usage figures (one process at
    a time: the others find the lock taken and wait for their next turn)."""
    failures = OncePerCause(log)
    while not runner.stopping:
        try:
            await metering.roll_up()
        except Exception as exc:  # PostgreSQL away: the day's last figures stand until the next pass
            failures.log(cause_of(exc), "rolling up stored usage failed")
        await runner.wait(every_seconds)
