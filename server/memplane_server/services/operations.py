"""Operations: the caller tenant's durable background jobs, polled and cancelled by id."""
from __future__ import annotations

import uuid

from ..core.caller import Caller
from ..core.errors import invalid, not_found
from ..core.operations import STATES, Operation
from ..core.paging import decode_position, encode_token
from ..core.validation import clamp_page_size
from .deps import Deps


def parse_operation_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError):
        raise not_found("operation") from None


class OperationsService:
    def __init__(self, deps: Deps) -> None:
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
        caller.require_tenant()
        op = await self.deps.jobs.cancel(caller, parse_operation_id(op_id))
        if op is None:
            raise not_found("operation")
        return op
