# Generated from memplane/aio.py by scripts/gen_sync_client.py: do not edit by hand.
# Change aio.py and run `make generate`.
"""The blocking clients: MemoryClient for MemoryService and OperationsService, and
AdminClient for AdminService (written in _admin_sync.py)."""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from . import _requests
from ._admin_sync import AdminClient
from ._polling import OperationWait
from ._transport import SyncClientBase
from ._watch import WatchCursor
from .enums import (
    ChangeKindLike,
    DecisionSubjectLike,
    EraseModeLike,
    InferModeLike,
    KindLike,
    OperationStateLike,
    ReflectModeLike,
    ScopeLike,
    TaskOutcomeLike,
)
from .inputs import FilterArgs, MemoryChanges, MemoryFields, MemoryInputLike, TaskTrajectoryLike
from .types import (
    Advice,
    ChangeEvent,
    Conflict,
    ConflictResolution,
    ErasureResult,
    ForgetResult,
    HistoryEntry,
    Memory,
    MemoryCluster,
    Operation,
    Page,
    ReflectionDecision,
    ReflectResult,
    SearchResult,
    Stats,
    WatchProgress,
    WorkingMemory,
    WriteResult,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


class MemoryClient(SyncClientBase):
    """Blocking client for storing, searching, distilling and forgetting memories.

    Every method takes a keyword-only timeout in seconds (default: the client's
    default_timeout) that bounds the whole call, retries included, and raises a
    memplane.errors.MemplaneError subclass when the call fails. Mutations get a generated
    request_id unless given one, which makes their retries safe.
    """

    def write(
        self,
        memories: Iterable[MemoryInputLike],
        *,
        request_id: str | None = None,
        infer: InferModeLike | None = None,
        time_zone: str | None = None,
        timeout: float | None = None,
    ) -> WriteResult:
        """Stores memories (MemoryInput or dicts) all or nothing; infer asks for LLM extraction."""
        return self._transport.call(
            _requests.write(memories, request_id=request_id, infer=infer, time_zone=time_zone), timeout
        )

    def write_one(
        self,
        content: str,
        *,
        kind: KindLike,
        request_id: str | None = None,
        timeout: float | None = None,
        **fields: Unpack[MemoryFields],
    ) -> Memory:
        """Stores one memory built from content, kind and further MemoryInput fields; returns it."""
        return self._transport.call(
            _requests.write_one(content, kind=kind, request_id=request_id, **fields), timeout
        )

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        token_budget: int = 0,
        as_of: datetime | None = None,
        scope_weights: Mapping[ScopeLike, float] | None = None,
        explain: bool = False,
        time_zone: str | None = None,
        timeout: float | None = None,
        **filters: Unpack[FilterArgs],
    ) -> SearchResult:
        """Hybrid retrieval over the visible memories matching the filter keywords, best first.

        scope_weights maps scopes to score multipliers in the order they should be walked.
        """
        return self._transport.call(
            _requests.search(
                query,
                top_k=top_k,
                token_budget=token_budget,
                as_of=as_of,
                scope_weights=scope_weights,
                explain=explain,
                time_zone=time_zone,
                filters=filters,
            ),
            timeout,
        )

    def reflect(
        self,
        *,
        task: TaskTrajectoryLike | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        scope: ScopeLike | None = None,
        domain: str | None = None,
        mode: ReflectModeLike | None = None,
        request_id: str | None = None,
        decide: bool = False,
        timeout: float | None = None,
    ) -> ReflectResult:
        """Distils a finished task or a session (exactly one) into memories and a summary.

        When the server runs it in the background the result carries an operation to wait on. With
        decide, a task is reflected on only when it can teach something (result.skipped, .reason).
        """
        return self._transport.call(
            _requests.reflect(
                task=task,
                session_id=session_id,
                user_id=user_id,
                scope=scope,
                domain=domain,
                mode=mode,
                request_id=request_id,
                decide=decide,
            ),
            timeout,
        )

    def forget(
        self,
        *,
        ids: str | Iterable[str] | None = None,
        hard: bool = False,
        dry_run: bool = False,
        reason: str = "",
        request_id: str | None = None,
        everything: bool = False,
        timeout: float | None = None,
        **filters: Unpack[FilterArgs],
    ) -> ForgetResult:
        """Forgets memories by ids or by filter keywords (one of the two), soft unless hard.

        A filter with no condition that leaves something out is refused; everything=True (alone or
        with such a filter) forgets every memory the key may change.
        """
        return self._transport.call(
            _requests.forget(
                ids=ids, hard=hard, dry_run=dry_run, reason=reason, request_id=request_id, filters=filters,
                everything=everything,
            ),
            timeout,
        )

    def erase_user(
        self,
        user_id: str,
        *,
        mode: EraseModeLike | None = None,
        dry_run: bool = False,
        reason: str = "",
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> ErasureResult:
        """Erases everything about user_id in the key's tenant that the key reaches (a tenant admin
        key: every agent and scope; another writing key: what it may change): every layer, table
        and cache, derived memories included, always hard.

        Returns the receipt (counts per table and store, time, operation id), or, for a large
        erasure or mode="async", the operation to wait on (wait_operation), whose erasure_receipt
        holds it once it succeeded. dry_run counts and changes nothing.
        """
        return self._transport.call(
            _requests.erase_user(user_id, mode=mode, dry_run=dry_run, reason=reason, request_id=request_id),
            timeout,
        )

    def get_memory(self, id: str, *, timeout: float | None = None) -> Memory:
        """Reads one memory by id."""
        return self._transport.call(_requests.get_memory(id), timeout)

    def list_memories(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
        **filters: Unpack[FilterArgs],
    ) -> Page[Memory]:
        """One page of the memories matching the filter keywords, newest first."""
        return self._transport.call(
            _requests.list_memories(page_size=page_size, page_token=page_token, filters=filters), timeout
        )

    def iter_memories(
        self, *, page_size: int = 0, timeout: float | None = None, **filters: Unpack[FilterArgs]
    ) -> Iterator[Memory]:
        """Every memory matching the filter keywords, fetching pages as needed (timeout is per page)."""
        page_token = ""
        while True:
            page = self.list_memories(page_size=page_size, page_token=page_token, timeout=timeout, **filters)
            for memory in page.items:
                yield memory
            if not page.next_page_token:
                return
            page_token = page.next_page_token

    def watch(
        self,
        *,
        after_position: int | None = None,
        scopes: ScopeLike | Iterable[ScopeLike] | None = None,
        session_id: str | None = None,
        entity: str | None = None,
        kinds: KindLike | Iterable[KindLike] | None = None,
        change_kinds: ChangeKindLike | Iterable[ChangeKindLike] | None = None,
        progress: bool = False,
        resume: bool = True,
        timeout: float | None = None,
    ) -> Iterator[ChangeEvent | WatchProgress]:
        """Streams every change of a memory this caller may see, in commit order: created,
        superseded, updated, forgotten (soft) and erased (hard), optionally filtered by scopes,
        session, entity, memory kinds and change kinds (each condition given must hold).

        From now, or after after_position (the position of the last event handled, kept across
        restarts; the server keeps changes for its change retention, 24 h by default, and an
        older position raises FailedPreconditionError WATCH_POSITION_EXPIRED). A stream that
        breaks with UNAVAILABLE (a server restarting or shutting down), or that the server cancels
        (one stopping past its grace time), is reopened after the last position handed over, so nothing is missed or repeated, unless resume=False. With
        progress=True, WatchProgress items report positions reached while nothing visible
        changed (store those too, so a quiet filtered watch does not fall behind the retention).
        timeout bounds the whole watch (None: no end); closing the iterator ends the stream.
        """
        cursor = WatchCursor(after_position=after_position, progress=progress, scopes=scopes,
                             session_id=session_id, entity=entity, kinds=kinds, change_kinds=change_kinds)
        yield from self._transport.watch(cursor, timeout=timeout, resume=resume)

    def update_memory(
        self,
        id: str,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
        **changes: Unpack[MemoryChanges],
    ) -> Memory:
        """Changes the given fields of one memory (the update mask names exactly those) and returns it."""
        return self._transport.call(_requests.update_memory(id, request_id=request_id, **changes), timeout)

    def list_history(
        self,
        *,
        memory_id: str | None = None,
        entity: str | None = None,
        attribute: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[HistoryEntry]:
        """One page of the recorded changes of a memory or of an entity (one of the two), newest first."""
        return self._transport.call(
            _requests.list_history(
                memory_id=memory_id, entity=entity, attribute=attribute, page_size=page_size, page_token=page_token
            ),
            timeout,
        )

    def submit_feedback(
        self,
        memory_ids: str | Iterable[str],
        *,
        useful: bool | None = None,
        outcome: TaskOutcomeLike | None = None,
        task_id: str = "",
        comment: str = "",
        timeout: float | None = None,
    ) -> tuple[Memory, ...]:
        """Reports whether memories helped (useful), or how a task that used them ended (outcome:
        lessons and procedures gain or lose confidence); returns them as they are now."""
        return self._transport.call(
            _requests.submit_feedback(memory_ids, useful=useful, outcome=outcome, task_id=task_id, comment=comment),
            timeout,
        )

    def list_reflection_decisions(
        self,
        *,
        subject: DecisionSubjectLike | None = None,
        subject_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[ReflectionDecision]:
        """Reflections that ran or were skipped, with why, and searches that found nothing; newest first."""
        return self._transport.call(
            _requests.list_reflection_decisions(
                subject=subject, subject_id=subject_id, page_size=page_size, page_token=page_token),
            timeout,
        )

    def consolidate(
        self, *, scope: ScopeLike | None = None, domain: str = "", dry_run: bool = False,
        timeout: float | None = None,
    ) -> tuple[MemoryCluster, ...]:
        """Clusters similar lessons and procedures and, with the server's model, writes one more
        general memory per cluster (dry_run: only reports the clusters)."""
        return self._transport.call(_requests.consolidate(scope=scope, domain=domain, dry_run=dry_run), timeout)

    def foresee(
        self,
        task: str,
        *,
        entities: Iterable[str] = (),
        tools: Iterable[str] = (),
        top_k: int = 0,
        timeout: float | None = None,
        **filters: Unpack[FilterArgs],
    ) -> tuple[Advice, ...]:
        """Before a task: the lessons (risks), procedures (rules) and preferences that apply, each
        with why."""
        return self._transport.call(
            _requests.foresee(task, entities=entities, tools=tools, top_k=top_k, filters=filters), timeout
        )

    def list_conflicts(
        self, *, entity: str = "", page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Conflict]:
        """Open conflicts: values held back as NEEDS_CONFIRMATION beside the value they contradict."""
        return self._transport.call(
            _requests.list_conflicts(entity=entity, page_size=page_size, page_token=page_token), timeout
        )

    def resolve_conflict(
        self, challenger_id: str, *, keep: str, reason: str = "", timeout: float | None = None
    ) -> ConflictResolution:
        """Confirms one side of a conflict ("current" or "challenger"); the other is superseded."""
        return self._transport.call(_requests.resolve_conflict(challenger_id, keep=keep, reason=reason), timeout)

    def get_working_memory(self, session_id: str, *, timeout: float | None = None) -> WorkingMemory:
        """Reads a session's working memory."""
        return self._transport.call(_requests.get_working_memory(session_id), timeout)

    def close_session(
        self, session_id: str, *, promote: bool | None = None, request_id: str | None = None,
        timeout: float | None = None,
    ) -> tuple[Memory, ...]:
        """Ends a session's working memory now; returns what it was promoted into (promote=None
        follows the server setting, False discards it)."""
        return self._transport.call(_requests.close_session(session_id, promote=promote, request_id=request_id), timeout)

    def get_stats(self, *, timeout: float | None = None, **filters: Unpack[FilterArgs]) -> Stats:
        """Counts the visible memories matching the filter keywords (all statuses unless given)."""
        return self._transport.call(_requests.get_stats(filters), timeout)

    def get_operation(self, id: str, *, timeout: float | None = None) -> Operation:
        """Reads one background operation."""
        return self._transport.call(_requests.get_operation(id), timeout)

    def list_operations(
        self,
        *,
        state: OperationStateLike | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[Operation]:
        """One page of the tenant's operations, newest first, optionally in one state."""
        return self._transport.call(
            _requests.list_operations(state=state, page_size=page_size, page_token=page_token), timeout
        )

    def cancel_operation(self, id: str, *, timeout: float | None = None) -> Operation:
        """Cancels an unfinished operation and returns it."""
        return self._transport.call(_requests.cancel_operation(id), timeout)

    def wait_operation(self, id: str, *, poll_interval: float = 0.5, timeout: float = 60.0) -> Operation:
        """Polls an operation until it is done (succeeded, failed or cancelled) and returns it.

        Raises:
            TimeoutError: It is still running after timeout seconds.
        """
        wait = OperationWait(id, poll_interval=poll_interval, timeout=timeout)
        while True:
            operation = self.get_operation(id)
            delay = wait.delay_after(operation)
            if delay is None:
                return operation
            time.sleep(delay)


__all__ = ["MemoryClient", "AdminClient"]
