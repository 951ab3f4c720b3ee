"""Conflicts surfaced: open ones listed, one side confirmed and the other superseded (the rule
that holds a value back is core/write/conflicts.py; the write path applies it)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.access.caller import Caller
from ..core.errors import Code, MemplaneError, invalid, not_found
from ..core.model import MemoryRecord
from ..core.paging import decode_position, record_token
from ..core.validation import MAX_NOTE_BYTES, check_free_id, check_text, clamp_page_size
from ..stores.postgres.conflicts import ConflictClosed, ConflictStore, OpenConflict
from .changeable import parse_memory_id

SIDES = ("current", "challenger")


@dataclass(frozen=True)
class ConflictsDeps:
    """What conflicts draw on, filled by the composition root (services/deps.py)."""

    conflicts: ConflictStore

class ConflictsService:
    def __init__(self, deps: ConflictsDeps) -> None:
        self.deps = deps

    async def list(
        self, caller: Caller, *, entity: str | None, page_size: int, page_token: str
    ) -> tuple[list[OpenConflict], str]:
        caller.require_tenant()
        check_free_id(entity, "entity")
        size = clamp_page_size(page_size)
        after = decode_position(page_token, "time", "uuid")
        found = await self.deps.conflicts.list_open(caller, entity=entity or None, limit=size + 1, after=after)
        page = found[:size]
        token = record_token(page[-1].challenger) if len(found) > size else ""
        return page, token

    async def resolve(self, caller: Caller, challenger_id: str, keep: str | None, reason: str) -> tuple[MemoryRecord, MemoryRecord]:
        caller.require_writer()
        if keep not in SIDES:
            raise invalid("SIDE_REQUIRED", "keep must be CURRENT or CHALLENGER", field="keep")
        check_text(reason, "reason", MAX_NOTE_BYTES)
        try:
            resolved = await self.deps.conflicts.resolve(
                caller, parse_memory_id(challenger_id), keep_challenger=keep == "challenger", actor=caller.key_id,
                reason=reason,
            )
        except ConflictClosed:
            raise MemplaneError(Code.FAILED_PRECONDITION, "CONFLICT_CLOSED",
                                "that memory is not waiting for confirmation (resolved before, or never in conflict)") from None
        if resolved is None:
            raise not_found("memory")
        return resolved
