"""Operations: the caller tenant's durable background jobs, polled and cancelled by id."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from ..core.caller import Caller
from ..core.errors import invalid, not_found
from ..core.paging import decode_position, encode_token
from ..core.validation import clamp_page_size
from .deps import Deps

STATES = ("pending", "running", "succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class OperationView:
    id: uuid.UUID
    type: str
    state: str
    attempts: int
    error_reason: str
    error_message: str
    created_at: datetime
    updated_at: datetime
    result_memory_ids: list[str] = field(default_factory=list)
    result_summary: str = ""


def operation_from_row(row) -> OperationView:
    result = row["result"] or {}
    # A job whose lease is being retried reports as pending to the caller until a worker holds it.
    return OperationView(
        id=row["id"], type=row["type"], state=row["state"], attempts=row["attempts"],
        error_reason=row["error_reason"], error_message=row["error_message"], created_at=row["created_at"],
        updated_at=row["updated_at"], result_memory_ids=list(result.get("memory_ids", [])),
        result_summary=result.get("summary", ""),
    )


def parse_operation_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError):
        raise not_found("operation") from None


class OperationsService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def get(self, caller: Caller, op_id: str) -> OperationView:
        caller.require_tenant()
        row = await self.deps.jobs.get(caller, parse_operation_id(op_id))
        if row is None:
            raise not_found("operation")
        return operation_from_row(row)

    async def list(self, caller: Caller, state: str | None, page_size: int, page_token: str) -> tuple[list[OperationView], str]:
        if state is not None and state not in STATES:
            raise invalid("INVALID_STATE", "unknown operation state")
        size = clamp_page_size(page_size)
        after = decode_position(page_token, "time", "uuid")
        caller.require_tenant()
        rows = await self.deps.jobs.list(caller, state, after, size + 1)
        ops = [operation_from_row(r) for r in rows[:size]]
        token = encode_token([ops[-1].created_at.isoformat(), str(ops[-1].id)]) if len(rows) > size else ""
        return ops, token

    async def cancel(self, caller: Caller, op_id: str) -> OperationView:
        caller.require_writer()
        caller.require_tenant()
        row = await self.deps.jobs.cancel(caller, parse_operation_id(op_id))
        if row is None:
            raise not_found("operation")
        return operation_from_row(row)
