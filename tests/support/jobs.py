"""Driving the shared job queue from tests."""
from __future__ import annotations

from memplane_server.services.operations import OperationsService
from tests.support.services import job_runner


async def run_jobs_until(runner, deps, caller, op_id, done) -> object:
    """Runs our job until it reaches the wanted state. Other tests leave jobs in the shared queue
    (the isolation property test leaves dozens); they are cancelled so the runner reaches ours."""
    await deps.jobs.pool.execute(
        "UPDATE jobs SET state = 'cancelled' WHERE state IN ('pending', 'running') AND id <> $1", op_id
    )
    for _ in range(50):
        await deps.jobs.pool.execute("UPDATE jobs SET run_after = now() WHERE id = $1 AND state = 'pending'", op_id)
        await runner.run_one()
        view = await OperationsService(deps).get(caller, str(op_id))
        if done(view):
            return view
    raise AssertionError(f"operation {op_id} never got there: {view}")


async def run_only(deps, op_id) -> None:
    """Runs one queued job with the worker's code while every other job waits: their run_after is
    pushed a century on for the run and back after it, so no other state or tenant is touched."""
    held = [r["id"] for r in await deps.jobs.pool.fetch(
        "UPDATE jobs SET run_after = run_after + interval '100 years'"
        " WHERE id <> $1 AND state IN ('pending', 'running') RETURNING id", op_id)]
    try:
        await deps.jobs.pool.execute("UPDATE jobs SET run_after = now() WHERE id = $1 AND state = 'pending'", op_id)
        if not await job_runner(deps).run_one():
            raise AssertionError(f"operation {op_id} was not ready to run")
    finally:
        await deps.jobs.pool.execute(
            "UPDATE jobs SET run_after = run_after - interval '100 years' WHERE id = ANY($1::uuid[])", held)
