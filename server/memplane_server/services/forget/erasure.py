"""Erasure of a user: one call removes everything about a user_id in the caller's tenant, within the
caller's reach (core/erasure.tenant_wide), from every table and Redis key, derived memories and
every tenant's cached responses holding them included, and returns a receipt that counts what it
reached and is also kept in the audit log, without the erased content or the user id. Only a tenant
admin's erasure redacts the audit log. Large erasures run as operations ("erase" jobs).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ...core.access.caller import Caller, caller_to_json
from ...core.errors import invalid
from ...core.forget.erasure import Receipt, receipt_to_json, redact_words, subject_of, tenant_wide
from ...core.operations import Operation
from ...core.validation import MAX_NOTE_BYTES, check_free_id, check_text
from ...stores.postgres.forget.erasure import ErasureStore
from .copies import CopiesDropped, drop_working
from .deps import ForgetDeps


@dataclass
class Erasure:
    """An erasure done in the call (receipt) or queued (operation)."""

    receipt: Receipt | None = None
    operation: Operation | None = None
    count: int = 0
    ids: list[uuid.UUID] = field(default_factory=list)


class ErasureService:
    def __init__(self, deps: ForgetDeps, store: ErasureStore) -> None:
        self.deps = deps
        self.store = store

    def _check(self, caller: Caller, user_id: str, reason: str, mode: str) -> None:
        caller.require_writer()
        if not user_id or not user_id.strip():
            raise invalid("USER_ID_REQUIRED", "erase_user_id must not be empty")
        check_free_id(user_id, "erase_user_id")
        check_text(reason, "reason", MAX_NOTE_BYTES)
        if mode not in ("auto", "sync", "async"):
            raise invalid("UNKNOWN_ENUM_VALUE", "unknown erase mode")

    async def erase(self, caller: Caller, user_id: str, *, mode: str = "auto", dry_run: bool = False,
                    reason: str = "") -> Erasure:
        self._check(caller, user_id, reason, mode)
        if not dry_run and mode != "sync":
            large = mode == "async" or await self.store.count(
                caller, user_id, tenant_wide=tenant_wide(caller)) > self.deps.settings.erase_sync_max_memories
            if large:
                operation = await self.deps.jobs.enqueue(
                    caller, "erase", {"user_id": user_id, "reason": reason}, caller_to_json(caller))
                return Erasure(operation=operation)
        return await self.run(caller, user_id, dry_run=dry_run, reason=reason)

    async def run(self, caller: Caller, user_id: str, *, dry_run: bool = False, reason: str = "",
                  job_id: uuid.UUID | None = None) -> Erasure:
        """Erases now (the call, or the erase job job_id): PostgreSQL in one transaction, then Redis."""
        self._check(caller, user_id, reason, "sync")
        tenant = caller.require_tenant()
        wide = tenant_wide(caller)
        rows = await self.store.erase(caller, user_id, tenant_wide=wide, dry_run=dry_run, keep_job=job_id)
        copies = CopiesDropped()
        # Working memory is per agent: a tenant admin reaches every agent's sessions, another key its own.
        await drop_working(self.deps, tenant, None, lambda item: item.get("user_id") == user_id, copies,
                           agent_ids=None if wide else [caller.agent_id], dry_run=dry_run)
        if self.deps.idempotency is not None:
            # Cached responses are copies: any naming what was erased goes, in whichever tenant
            # cached it (another tenant's search may hold a domain memory).
            copies.idempotency_entries = await self.deps.idempotency.purge(
                {str(t.id) for t in rows.traces} | copies.working_item_ids, dry_run=dry_run)
        receipt = Receipt(
            operation_id=str(job_id or uuid.uuid4()), erase_time=datetime.now(timezone.utc),
            subject=subject_of(tenant, user_id), dry_run=dry_run,
            counts={**rows.counts, "redis.working_items": copies.working_items,
                    "redis.working_state_keys": copies.working_state_keys,
                    "redis.working_sessions": copies.working_sessions,
                    "redis.idempotency": copies.idempotency_entries},
        )
        if not dry_run:
            await self.deps.tenancy.audit(tenant, caller.key_id, "EraseUser", receipt.subject,
                                          {"receipt": receipt_to_json(receipt), "tenant_wide": wide,
                                           # The log keeps no user id, also not one the reason names.
                                           "reason": redact_words(reason, user_id)})
        return Erasure(receipt=receipt, count=rows.count + rows.counts.get("postgres.derived_memories", 0),
                       ids=rows.ids)
