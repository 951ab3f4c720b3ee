"""Forget: by ids or by filter, soft (restorable) or hard (erased with its history), or a dry run.

What was derived from a forgotten memory goes with it (PostgreSQL, in the same transaction:
migration 0010), and its copies in working memory and cached responses right after (copies.py).
A forget by a filter naming a user also removes its agent's search signals about that user.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from itertools import groupby

from ...core.access.caller import Caller
from ...core.errors import invalid
from ...core.model import MemoryFilter
from ...core.validation import MAX_NOTE_BYTES, check_text
from ..changeable import changeable
from .copies import drop_copies
from .deps import ForgetDeps

# Memories per transaction of a forget by filter: small enough that a batch's locks and its
# commit (numbering its change-log entries under the log's lock) hold others up for well under a
# second, large enough that the statements' fixed costs are spread (bench/forget.py).
FORGET_BATCH = 2000
_MAX_LISTED_IDS = 1000


@dataclass(frozen=True)
class ForgetResult:
    count: int
    ids: list[uuid.UUID]


class ForgetService:
    def __init__(self, deps: ForgetDeps) -> None:
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
        self._check_target(ids, f, everything)
        if ids is not None or dry_run:
            return await self._forget_at_once(caller, ids, f, hard=hard, dry_run=dry_run, reason=reason)
        assert f is not None, "without ids, checked above to come with a filter"
        return await self._forget_in_batches(caller, f, hard=hard, reason=reason, everything=everything)

    def _check_target(self, ids: list[str] | None, f: MemoryFilter | None, everything: bool) -> None:
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

    async def _forget_at_once(self, caller: Caller, ids: list[str] | None, f: MemoryFilter | None, *, hard: bool,
                              dry_run: bool, reason: str) -> ForgetResult:
        """Ids (at most a batch), or a dry run's count: one transaction."""
        store = self.deps.memories
        parsed = [r.stored_id for r in await changeable(store, caller, ids)] if ids is not None else None
        done = await store.forget_traced(
            caller, ids=parsed, f=f, hard=hard, dry_run=dry_run, actor=caller.key_id, reason=reason,
        )
        if not dry_run and done.traces:
            await drop_copies(self.deps, caller, done.traces)
        if not dry_run and done.count:
            await self._audit(caller, done.count, done.ids, hard, reason)
        return ForgetResult(done.count, done.ids)

    async def _forget_in_batches(self, caller: Caller, f: MemoryFilter, *, hard: bool, reason: str,
                                 everything: bool) -> ForgetResult:
        """The memories the filter reaches now, forgotten FORGET_BATCH at a time, each batch in its
        own transaction (the filter checked again), so that locks, the change log's commit and the
        cascades' work stay bounded and searches and writes meanwhile wait for none of it."""
        store = self.deps.memories
        if f.user_id:
            # A search filtered to the user that found nothing kept its query as a signal: about the
            # user as much as their memories, though no kind, layer or session of the filter is its.
            await self.deps.decisions.forget_signals(caller, f.user_id)
        targets = await store.forget_targets(caller, f, hard=hard, everything=everything)
        pending = {i for i, _ in targets}
        count = 0
        forgotten: list[uuid.UUID] = []
        # A batch's copies are dropped while the next batch's transaction runs (Redis and this
        # process beside PostgreSQL: 60-110 ms a batch at 20,000 memories, bench/README.md), one
        # batch's at a time, in order, and all of them before the call returns.
        copies: asyncio.Task | None = None
        try:
            for planned in session_batches(targets, FORGET_BATCH):
                batch = [i for i in planned if i in pending]
                if not batch:
                    continue
                done = await store.forget_traced(
                    caller, ids=batch, f=f, hard=hard, dry_run=False, actor=caller.key_id, reason=reason,
                )
                # The batch's memories (its traces' ids in the batch: the derived ones are others), and
                # those of later batches its cascade forgot: counted once, as one transaction would.
                in_batch = set(batch)
                direct = [t.id for t in done.traces if t.id in in_batch]
                reached = list(dict.fromkeys([*direct, *(i for i in done.cascaded if i in pending)]))
                pending.difference_update(reached)
                count += len(reached)
                forgotten += reached[:_MAX_LISTED_IDS - len(forgotten)]
                if done.traces:
                    if copies is not None:
                        await copies
                    copies = asyncio.create_task(drop_copies(self.deps, caller, done.traces))
        finally:
            try:
                # Also when a batch failed: the copies of those committed before it go too.
                if copies is not None:
                    await copies
            finally:
                # Also when a later batch failed: what was forgotten stays forgotten, and is audited.
                if count:
                    await self._audit(caller, count, forgotten, hard, reason)
        return ForgetResult(count, forgotten)

    async def _audit(self, caller: Caller, count: int, ids: list[uuid.UUID], hard: bool, reason: str) -> None:
        await self.deps.tenancy.audit(
            caller.tenant_id, caller.key_id, "Forget", f"{count} memories",
            {"hard": hard, "reason": reason, "ids": [str(i) for i in ids[:100]]},
        )


def session_batches(
    targets: list[tuple[uuid.UUID, tuple[str, str | None]]], size: int
) -> list[list[uuid.UUID]]:
    """The ids (in session order) cut into batches of at most `size` between sessions, never inside
    one unless it alone is bigger. A session split across two batches would have its summary
    erased by the first one's cascade and rebuilt by a job, maybe only after the second (a summary
    of nothing, left behind), and the windows of its turns in the second emptied (every index of
    those rows written again) only for them to be forgotten next."""
    batches: list[list[uuid.UUID]] = []
    current: list[uuid.UUID] = []
    for _, rows in groupby(targets, key=lambda t: t[1]):
        group = [i for i, _ in rows]
        if current and len(current) + len(group) > size:
            batches.append(current)
            current = []
        if len(group) > size:  # memories without a session, or one session bigger than a batch
            batches += [group[at:at + size] for at in range(0, len(group), size)]
        else:
            current += group
    if current:
        batches.append(current)
    return batches
