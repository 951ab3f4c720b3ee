"""Runs queued jobs: claims one at a time, retries failures with backoff, stops on request."""
from __future__ import annotations

import asyncio
import logging

from ..core.attribution import reset_work_tenant, set_work_tenant
from ..core.caller import caller_from_json
from ..core.errors import Code, MemplaneError
from ..core.operations import Job
from ..core.reflection import input_from_json
from ..logs import OncePerCause, cause_of
from ..services.deps import Deps
from ..services.extract import ExtractService
from ..services.reflect import ReflectService

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.5


class JobRunner:
    def __init__(self, deps: Deps, reflections: ReflectService, extractions: ExtractService) -> None:
        self.deps = deps
        self.reflect = reflections
        self.extract = extractions
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
        job = await self.deps.jobs.claim()
        if job is None:
            return False
        # The job's own tenant, stored with the caller it was queued by (a malformed caller fails below).
        tenant = set_work_tenant(job.caller.get("tenant_id") if isinstance(job.caller, dict) else None)
        try:
            await self._run(job)
        finally:
            reset_work_tenant(tenant)
        return True

    async def _run(self, job: Job) -> None:
        try:
            caller = caller_from_json(job.caller)
            if job.type == "reflect":
                outcome = await self.reflect.run(caller, input_from_json(job.payload))
                memories, summary = outcome.memories, outcome.summary
            elif job.type == "extract":
                extracted = await self.extract.run(caller, job.payload["turn_ids"], job.payload.get("time_zone"))
                memories = extracted.memories
                summary = f"{len(extracted.memories)} facts added or updated, {len(extracted.deleted)} deleted"
            else:
                raise MemplaneError(Code.INTERNAL, "UNKNOWN_JOB_TYPE", f"unknown job type {job.type}")
            if await self.deps.jobs.is_cancelled(job.id):
                return
            await self.deps.jobs.succeed(job.id, [str(m.id) for m in memories], summary)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, MemplaneError) else type(exc).__name__.upper()
            last = job.attempts >= self.deps.settings.job_max_attempts
            delay = None if last else min(60.0, 2.0 ** job.attempts)
            log.warning("job %s attempt %s failed: %s", job.id, job.attempts, exc)
            await self.deps.jobs.fail(job.id, reason, str(exc), retry_in_seconds=delay)

