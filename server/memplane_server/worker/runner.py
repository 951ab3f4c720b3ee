"""Runs queued jobs: claims one at a time, retries failures with backoff, stops on request."""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import NamedTuple

from ..core.access.attribution import reset_work_tenant, set_work_tenant
from ..core.access.caller import caller_from_json
from ..core.access.requests import request_key
from ..core.errors import Code, MemplaneError
from ..core.forget.erasure import receipt_to_json
from ..core.forget.lifecycle import report_to_json
from ..core.model import Scope
from ..core.operations import Job
from ..core.reflection.reflection import input_from_json
from ..logs import OncePerCause, cause_of
from ..services.access.auth import reload_caller
from ..services.deps import Deps
from ..services.reflection.reflect import opened_task
from ..services.registry import Services

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.5
ACCESS_RECHECK_SECONDS = 2.0  # revocations take effect within this, as for calls (services/access/auth.py)
FINAL_CODES = frozenset({Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.PERMISSION_DENIED})


class JobDone(NamedTuple):
    """What a job produced: (memories, summary), and for an erasure its receipt and the payload
    that replaces the job's (without the user id)."""
    memories: list
    summary: str
    receipt: dict | None = None
    payload: dict | None = None
    report: dict | None = None  # a lifecycle run's


class JobRunner:
    def __init__(self, deps: Deps, services: Services) -> None:
        self.deps = deps
        self.reflect = services.reflections
        self.extract = services.extractions
        self.consolidate = services.consolidations
        self.erase = services.erasures
        self.lifecycle = services.lifecycle
        self._stopping = asyncio.Event()
        self._failures = OncePerCause(log)

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                ran = await self.run_one()
            except Exception as exc:  # the loop must outlive any single failure, e.g. a lost connection
                self._failures.log(cause_of(exc), "job runner iteration failed")
                ran = False
            if not ran:
                await self.wait(IDLE_POLL_SECONDS)

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def wait(self, seconds: float) -> None:
        """Sleeps, waking early when told to stop."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def run_one(self) -> bool:
        lease = self.deps.settings.job_lease_seconds
        job = await self.deps.jobs.claim(lease)
        if job is None:
            return False
        # The job's own tenant, stored with the caller it was queued by (a malformed caller fails below);
        # the tasks below inherit it.
        tenant = set_work_tenant(job.caller.get("tenant_id") if isinstance(job.caller, dict) else None)
        work = asyncio.ensure_future(self._run(job))
        keeper = asyncio.ensure_future(self._keep_lease(job, work, lease))
        guard = asyncio.ensure_future(self._keep_access(job, work))
        try:
            done = await work
            if await self.deps.jobs.is_cancelled(job.id):
                return True
            await self.deps.jobs.succeed(job.id, job.attempts, [str(m.id) for m in done.memories], done.summary,
                                         receipt=done.receipt, payload=done.payload, report=done.report)
        except asyncio.CancelledError:
            refusal = guard.result() if guard.done() and not guard.cancelled() else None
            if refusal is not None:
                await self._fail(job, refusal)
            elif not keeper.done():
                raise  # the runner itself is being stopped
            else:
                log.warning("job %s attempt %s lost its lease and was abandoned", job.id, job.attempts)
        except Exception as exc:
            await self._fail(job, exc)
        finally:
            keeper.cancel()
            guard.cancel()
            reset_work_tenant(tenant)
        return True

    async def _fail(self, job: Job, exc: Exception) -> None:
        reason = exc.reason if isinstance(exc, MemplaneError) else type(exc).__name__.upper()
        # A refusal (bad input, a memory gone, no permission) will not change on a retry.
        refused = isinstance(exc, MemplaneError) and exc.code in FINAL_CODES
        last = refused or job.attempts >= self.deps.settings.job_max_attempts
        delay = None if last else min(60.0, 2.0 ** job.attempts)
        log.warning("job %s attempt %s failed: %s", job.id, job.attempts, exc)
        await self.deps.jobs.fail(job.id, job.attempts, reason, str(exc), retry_in_seconds=delay)

    async def _keep_access(self, job: Job, work: asyncio.Future) -> MemplaneError | None:
        """Looks the job's key up again while the job runs; once it may no longer do the job (its
        key revoked), stops the run before it writes and returns why."""
        queued = caller_from_json(job.caller)
        while True:
            await asyncio.sleep(ACCESS_RECHECK_SECONDS)
            try:
                await reload_caller(self.deps.tenancy, queued)
            except MemplaneError as refusal:
                if refusal.code not in FINAL_CODES:
                    continue  # the database is out of reach: the job's own work notices
                work.cancel()
                return refusal
            except Exception:  # noqa: BLE001 - as above
                continue

    async def _keep_lease(self, job: Job, work: asyncio.Future, lease: float) -> None:
        """Renews the lease while the job runs; if another worker took the job (this one stalled
        past its lease), stops this run instead of finishing it twice."""
        while True:
            await asyncio.sleep(lease / 3)
            if not await self.deps.jobs.renew(job.id, job.attempts, lease):
                work.cancel()
                return

    async def _run(self, job: Job) -> JobDone:
        """Runs one job. Its writes are keyed by the job's id, so an attempt after a crash that
        came after the write stores nothing twice."""
        caller = await reload_caller(self.deps.tenancy, caller_from_json(job.caller))
        request = request_key(caller, f"job:{job.type}", str(job.id), b"")
        if job.type == "erase":
            erased = await self.erase.run(caller, job.payload["user_id"], reason=job.payload.get("reason", ""),
                                          job_id=job.id)
            assert erased.receipt is not None
            # The job keeps the receipt; the user id leaves its payload.
            return JobDone([], f"erased {erased.count} memories", receipt=receipt_to_json(erased.receipt),
                           payload={"subject": erased.receipt.subject})
        if job.type == "lifecycle":
            report = await self.lifecycle.run_for(caller.require_tenant(), dry_run=bool(job.payload.get("dry_run")))
            return JobDone([], report.summary(), report=report_to_json(report))
        if job.type == "reflect":
            task = input_from_json(opened_task(job.payload, caller.require_tenant()))
            outcome = await self.reflect.run(caller, task, request=request)
            dropped = ", ".join(f"{n} {why}" for why, n in sorted(outcome.dropped.items()))
            notes = "; ".join(filter(None, [outcome.degraded, dropped and f"memories dropped: {dropped}"]))
            return JobDone(outcome.memories, f"{outcome.summary} ({notes})" if notes else outcome.summary)
        if job.type == "refresh_summary":
            # A summary erased by a hard forget (migration 0010) is named by its session in the payload.
            outcome = await self.reflect.refresh_summary(
                caller, uuid.UUID(job.payload["summary_id"]), job.payload if job.payload.get("erased") else None)
            return JobDone(outcome.memories, outcome.summary)
        if job.type == "extract":
            extracted = await self.extract.run(caller, job.payload["turn_ids"], job.payload.get("time_zone"),
                                               request=request)
            return JobDone(extracted.memories, extracted.degraded or (
                f"{len(extracted.memories)} facts added or updated, {len(extracted.deleted)} deleted,"
                f" {extracted.dropped} claims dropped (not grounded in the turns)"))
        if job.type == "consolidate":
            # Without a model the scheduled run only finds the clusters (reported in the job's summary).
            found = await self.consolidate.consolidate(
                caller, scope=Scope(job.payload["scope"]), domain=None, dry_run=self.deps.llm is None)
            written = [c.consolidated for c in found.clusters if c.consolidated is not None]
            left_out = f" (the newest {found.considered} compared, {found.left_out} older left out)" if found.left_out else ""
            without = f"; the others without the model: {found.degraded}" if found.degraded else ""
            return JobDone(written, f"{len(found.clusters)} clusters of similar lessons or procedures,"
                                    f" {len(written)} consolidated{left_out}{without}")
        raise MemplaneError(Code.INTERNAL, "UNKNOWN_JOB_TYPE", f"unknown job type {job.type}")
