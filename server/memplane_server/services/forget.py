"""Forget: by ids or by filter, soft (restorable) or hard (erased with its history), or a dry run."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..core.caller import Caller
from ..core.errors import invalid
from ..core.model import MemoryFilter
from ..core.validation import MAX_NOTE_BYTES, check_text
from .deps import Deps
from .changeable import changeable


@dataclass(frozen=True)
class ForgetResult:
    count: int
    ids: list[uuid.UUID]


class ForgetService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def forget(
        self, caller: Caller, *, ids: list[str] | None, f: MemoryFilter | None, hard: bool, dry_run: bool, reason: str
    ) -> ForgetResult:
        caller.require_writer()
        check_text(reason, "reason", MAX_NOTE_BYTES)  # kept in the history and the audit log
        if (ids is None) == (f is None):
            raise invalid("TARGET_REQUIRED", "give exactly one of ids or filter")
        if ids is not None:
            if not ids:
                raise invalid("IDS_REQUIRED", "ids must not be empty")
            if len(ids) > self.deps.settings.max_batch:
                raise invalid("BATCH_TOO_LARGE", f"at most {self.deps.settings.max_batch} ids per call")
        if f is not None and f.is_empty():
            # An empty filter would forget everything visible: too easy to send by mistake.
            raise invalid("FILTER_REQUIRED", "a forget filter needs at least one condition")
        parsed = [r.id for r in await changeable(self.deps.memories, caller, ids)] if ids is not None else None
        count, forgotten = await self.deps.memories.forget(
            caller, ids=parsed, f=f, hard=hard, dry_run=dry_run, actor=caller.key_id, reason=reason
        )
        if not dry_run and count:
            await self.deps.tenancy.audit(
                caller.tenant_id, caller.key_id, "Forget", f"{count} memories",
                {"hard": hard, "reason": reason, "ids": [str(i) for i in forgotten[:100]]},
            )
        return ForgetResult(count, forgotten)
