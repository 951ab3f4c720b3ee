"""Forget: by ids or by filter, soft (restorable) or hard (erased with its history), or a dry run.

What was derived from a forgotten memory goes with it (PostgreSQL, in the same transaction:
migration 0010), and its copies in working memory and cached responses right after (copies.py).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..core.caller import Caller
from ..core.errors import invalid
from ..core.model import MemoryFilter
from ..core.validation import MAX_NOTE_BYTES, check_text
from .copies import drop_copies
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
        self, caller: Caller, *, ids: list[str] | None, f: MemoryFilter | None, hard: bool, dry_run: bool, reason: str,
        everything: bool = False,
    ) -> ForgetResult:
        """everything: with an empty filter (or none), forget every memory the caller may change."""
        caller.require_writer()
        check_text(reason, "reason", MAX_NOTE_BYTES)  # kept in the history and the audit log
        if everything:
            if ids is not None:
                raise invalid("TARGET_REQUIRED", "everything goes with a filter, not with ids")
            f = f or MemoryFilter()
        if (ids is None) == (f is None):
            raise invalid("TARGET_REQUIRED", "give exactly one of ids or filter")
        if ids is not None:
            if not ids:
                raise invalid("IDS_REQUIRED", "ids must not be empty")
            if len(ids) > self.deps.settings.max_batch:
                raise invalid("BATCH_TOO_LARGE", f"at most {self.deps.settings.max_batch} ids per call")
        if f is not None and not f.narrows() and not everything:
            # A filter without a condition that leaves something out would forget everything the
            # caller may change: too easy to send by mistake, so it must be asked for by name.
            raise invalid("FILTER_REQUIRED", "a forget filter needs a condition; set everything to forget all")
        parsed = [r.id for r in await changeable(self.deps.memories, caller, ids)] if ids is not None else None
        done = await self.deps.memories.forget_traced(
            caller, ids=parsed, f=f, hard=hard, dry_run=dry_run, actor=caller.key_id, reason=reason,
        )
        if not dry_run and done.traces:
            await drop_copies(self.deps, caller, done.traces)
        if not dry_run and done.count:
            await self.deps.tenancy.audit(
                caller.tenant_id, caller.key_id, "Forget", f"{done.count} memories",
                {"hard": hard, "reason": reason, "ids": [str(i) for i in done.ids[:100]]},
            )
        return ForgetResult(done.count, done.ids)
