"""Operations: durable background jobs, polled and cancelled by id. One belongs to the agent that
started it (or to its tenant when no agent did): only that agent's callers and the tenant's admins
see it; cancelling needs the right to start it, an erasure's an admin, and every cancel is audited."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..core.access.caller import Caller, Role
from ..core.errors import denied, invalid, not_found
from ..core.operations import STATES, Operation
from ..core.paging import decode_position, encode_token
from ..core.validation import clamp_page_size
from ..stores.postgres.jobs import JobStore
from ..stores.postgres.tenancy import TenancyStore


def parse_operation_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError):
        raise not_found("operation") from None


@dataclass(frozen=True)
class OperationsDeps:
    """What operations draw on, filled by the composition root (services/deps.py)."""

    jobs: JobStore
    tenancy: TenancyStore  # who administers a tenant

class OperationsService:
    def __init__(self, deps: OperationsDeps) -> None:
        self.deps = deps

    async def get(self, caller: Caller, op_id: str) -> Operation:
        caller.require_tenant()
        op = await self.deps.jobs.get(caller, parse_operation_id(op_id))
        if op is None:
            raise not_found("operation")
        return op

    async def list(self, caller: Caller, state: str | None, page_size: int, page_token: str) -> tuple[list[Operation], str]:
        if state is not None and state not in STATES:
            raise invalid("INVALID_STATE", "unknown operation state")
        size = clamp_page_size(page_size)
        after = decode_position(page_token, "time", "uuid")
        caller.require_tenant()
        found = await self.deps.jobs.list(caller, state, after, size + 1)
        ops = found[:size]
        token = encode_token([ops[-1].created_at.isoformat(), str(ops[-1].id)]) if len(found) > size else ""
        return ops, token

    async def cancel(self, caller: Caller, op_id: str) -> Operation:
        caller.require_writer()
        tenant = caller.require_tenant()
        job_id = parse_operation_id(op_id)
        op = await self.deps.jobs.get(caller, job_id)
        if op is None:
            raise not_found("operation")
        # An erasure is the tenant's promise to a user: no key below an admin may call it off.
        if op.type == "erase" and caller.role not in (Role.TENANT_ADMIN, Role.PLATFORM_ADMIN):
            raise denied("TENANT_ADMIN_REQUIRED", "only a tenant admin may cancel an erasure")
        found = await self.deps.jobs.cancel(caller, job_id)
        if found is None:
            raise not_found("operation")
        op, cancelled = found
        if cancelled:
            await self.deps.tenancy.audit(tenant, caller.key_id, "CancelOperation", str(job_id),
                                          {"type": op.type, "agent_id": caller.agent_id})
        return op
