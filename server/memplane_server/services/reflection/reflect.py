"""Reflect: distil a finished task or a session into typed memories and a summary.

Without an LLM it does the deterministic part: near-duplicates of the session that state the
same thing merge (newest wins) and the session's current facts are summarised. With MEMPLANE_LLM_MODEL set, the model
is asked for typed memories, each citing the numbered entries it comes from; those that cite none or
are not faithful to them (core/reflection/faithfulness.py) are dropped, the rest stored like any
other write, with the entries they cite in their metadata.

A session summary records the memories it was built from and replaces the session's earlier
summaries. When one of its sources changes, the database marks it stale in that same
transaction and queues a `refresh_summary` job (migration 0009), which runs refresh_summary.
"""
from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
from opentelemetry import metrics

from ...core.access.caller import Caller, Role, caller_to_json
from ...core.access.requests import RequestKey, request_key
from ...core.errors import MemplaneError, invalid
from ...core.model import Kind, MemoryDraft, MemoryFilter, MemoryRecord, Scope, Status
from ...core.operations import Operation
from ...core.paging import decode_position, encode_token
from ...core.reflection.decisions import DecisionRecord
from ...core.reflection.faithfulness import kept_context, why_dropped
from ...core.reflection.reflection import (
    ReflectInput,
    ReflectOutcome,
    Task,
    input_to_json,
    near_duplicate_groups,
    session_summary,
    statement,
    task_summary,
    user_summary,
)
from ...core.reflection.transcript import (
    Entry,
    language_line,
    session_entries,
    session_transcript,
    task_entries,
    task_transcript,
)
from ...core.reflection.triggers import SIMILAR_TASK, Decision, task_decision, task_focus
from ...core.validation import (
    MAX_TASK_STEPS,
    check_content,
    check_free_id,
    check_identifier,
    check_text,
    check_time,
    clamp_page_size,
)
from ...core.write.observations import statement_key
from ...llm.chat import went_without
from ...llm.reflection import SYSTEM_PROMPT, ReflectedMemory, Reflection
from ...llm.reflection import reflect as reflect_with_model
from ...llm.summary import refresh as refresh_with_model
from ...stores.sealing import OPENERS, key_from_json
from ..changeable import changeable
from ..write.service import WriteService
from .deps import ReflectionDeps
from .outcomes import apply_outcome

MAX_ATTEMPTS = 10_000
log = logging.getLogger(__name__)
_dropped = metrics.get_meter("memplane.server").create_counter(
    "memplane.reflection.memories_dropped", unit="{memory}",
    description="memories a model reflected that cite no entry or are not faithful to the ones they cite")


class ReflectService:
    def __init__(self, deps: ReflectionDeps, writes: WriteService) -> None:
        self.deps = deps
        self.writer = writes

    def _check(self, caller: Caller, r: ReflectInput) -> None:
        caller.require_writer()
        if (r.task is None) == (r.session_id is None):
            raise invalid("INPUT_REQUIRED", "give exactly one of task or session")
        limit = self.deps.settings.max_content_bytes
        if r.task:
            check_content(r.task.request, limit, "request")
            check_free_id(r.task.task_id, "task_id")
            # The summary (stored) quotes the feedback, the transcript (sent to the model) the steps.
            check_text(r.task.feedback, "feedback", limit)
            if len(r.task.steps) > MAX_TASK_STEPS:
                raise invalid("TASK_TOO_LARGE", f"a task has at most {MAX_TASK_STEPS} steps")
            if not 1 <= r.task.attempts <= MAX_ATTEMPTS:
                raise invalid("INVALID_ATTEMPTS", f"attempts must be between 1 and {MAX_ATTEMPTS}")
            if len(r.task.used_memory_ids) > self.deps.settings.max_batch:
                raise invalid("BATCH_TOO_LARGE", f"a task lists at most {self.deps.settings.max_batch} used memories")
            for step in r.task.steps:
                check_text(step.action, "action", limit)
                check_text(step.observation, "observation", limit)
                check_time(step.occurred_at, "occurred_at")
            if len(task_transcript(r.task).encode()) > limit * 16:
                raise invalid("TASK_TOO_LARGE", "the task trajectory is too large")
        else:
            if not (r.session_id or "").strip():
                raise invalid("SESSION_REQUIRED", "session_id is required")
            check_free_id(r.session_id, "session_id")
        check_free_id(r.user_id, "user_id")
        if r.domain:  # the writes it makes check it whatever the scope; refuse it now, not in a job
            check_identifier(r.domain, "domain")
        caller.check_write_scope(r.scope or caller.default_scope(), r.domain)

    async def reflect(self, caller: Caller, r: ReflectInput) -> ReflectOutcome | Operation:
        self._check(caller, r)
        if r.task:
            # The trajectory is kept (a queued job's payload) and read by the model: screened as a
            # write is, before either.
            r = replace(r, task=await self._screened(caller, r.task, r.domain))
        if r.task and r.task.used_memory_ids:  # refused now, not after a queued job's retries
            await changeable(self.deps.memories, caller, list(r.task.used_memory_ids))
        decision = await self._decide(caller, r)
        subject = ("task", r.task.task_id) if r.task else ("session", r.session_id or "")
        sealing = await self.deps.keys.sealing(caller.require_tenant())
        if not decision.run:
            assert r.task is not None  # only tasks are decided on
            if r.task.used_memory_ids:  # the outcome still counts for what the task used
                await apply_outcome(self.deps.memories, self.deps.settings.pending_threshold, caller, list(r.task.used_memory_ids), task_id=r.task.task_id,
                                    outcome=r.task.outcome)
            await self.deps.decisions.record(caller, subject_type=subject[0], subject_id=subject[1],
                                             decision="skipped", reason=decision.reason, sealing=sealing)
            return ReflectOutcome(reason=decision.reason, skipped=True)
        size = len(r.task.steps) if r.task else await self._session_size(caller, r)
        if r.mode == "async" or (r.mode == "auto" and size > self.deps.settings.reflect_sync_max_items):
            operation = await self.enqueue(caller, r)
            await self.deps.decisions.record(caller, subject_type=subject[0], subject_id=subject[1], decision="ran",
                                             reason=decision.reason, sealing=sealing, operation_id=operation.id)
            return operation
        outcome = await self.run(caller, r)
        outcome.reason = decision.reason
        await self.deps.decisions.record(caller, subject_type=subject[0], subject_id=subject[1], decision="ran",
                                         reason=decision.reason, sealing=sealing)
        return outcome

    async def _screened(self, caller: Caller, task: Task, domain: str | None) -> Task:
        texts = {"task.request": task.request, "task.feedback": task.feedback}
        for i, step in enumerate(task.steps):
            texts[f"task.steps[{i}].action"] = step.action
            texts[f"task.steps[{i}].observation"] = step.observation
        clean = await self.deps.content.screen_texts(caller, texts, domain)
        steps = tuple(replace(step, action=clean[f"task.steps[{i}].action"],
                              observation=clean[f"task.steps[{i}].observation"]) for i, step in enumerate(task.steps))
        return replace(task, request=clean["task.request"], feedback=clean["task.feedback"], steps=steps)

    async def _decide(self, caller: Caller, r: ReflectInput) -> Decision:
        if not r.decide or r.task is None:
            return Decision(True, "requested")
        like_earlier = False
        if r.task.request.strip():
            vector = await self.deps.embedder.embed_query(r.task.request)
            earlier = await self.deps.memories.vector_search(
                caller, MemoryFilter(kinds=(Kind.SUMMARY,)), vector, limit=5, as_of=None)
            like_earlier = any(s.record.source_type == "task" and s.score >= SIMILAR_TASK for s in earlier)
        return task_decision(r.task, like_earlier=like_earlier)

    async def decisions(
        self, caller: Caller, *, subject_type: str | None, subject_id: str | None, page_size: int, page_token: str,
    ) -> tuple[list[DecisionRecord], str]:
        """Reflection decisions and no-result signals the caller may see, newest first: a tenant admin
        every agent's of its tenant."""
        caller.require_tenant()
        check_free_id(subject_id, "subject_id")
        size = clamp_page_size(page_size)
        after = decode_position(page_token, "time", "uuid")
        found = await self.deps.decisions.list(
            caller, subject_type=subject_type, subject_id=subject_id, limit=size + 1, after=after,
            every_agent=caller.role is Role.TENANT_ADMIN)
        page = found[:size]
        token = encode_token([page[-1].created_at.isoformat(), str(page[-1].id)]) if len(found) > size else ""
        return page, token

    async def enqueue(self, caller: Caller, r: ReflectInput) -> Operation:
        tenant = caller.require_tenant()
        payload = sealed_task(input_to_json(r), tenant, await self.deps.keys.current(tenant))
        return await self.deps.jobs.enqueue(caller, "reflect", payload, caller_to_json(caller))

    async def _session_size(self, caller: Caller, r: ReflectInput) -> int:
        stats = await self.deps.memories.stats(caller, MemoryFilter(session_id=r.session_id, user_id=r.user_id))
        return stats.total

    async def run(self, caller: Caller, r: ReflectInput, request: RequestKey | None = None) -> ReflectOutcome:
        """Reflects now. With a request key (a job's), a run repeated after a crash answers with the
        memories the first run stored instead of storing them again."""
        caller.require_writer()  # merging changes memories: refuse before anything is touched
        outcome = ReflectOutcome()
        sources: tuple[uuid.UUID, ...] = ()
        if r.session_id:
            outcome.merged_count = await self._merge_session(caller, r)
            records = await self._session_records(caller, r)
            entries = session_entries(records)
            language = language_line("\n".join(e.text for e in entries))
            transcript = session_transcript(entries) + (f"\n{language}" if language else "")
            instructions = SYSTEM_PROMPT + language
            made = session_summary(r.session_id, records)
            summary, sources = made.text, made.sources
            source = ("session", r.session_id)
        else:
            assert r.task is not None
            if r.task.used_memory_ids:
                # First: an id the caller may not change refuses the reflection before it stores anything.
                await apply_outcome(self.deps.memories, self.deps.settings.pending_threshold, caller, list(r.task.used_memory_ids), task_id=r.task.task_id,
                                    outcome=r.task.outcome, comment="")
            asked = [*task_focus(r.task), *filter(None, [language_line(r.task.request)])]
            focus = "\nFocus:\n- " + "\n- ".join(asked) if asked else ""
            entries = task_entries(r.task)
            transcript, instructions = task_transcript(r.task) + focus, SYSTEM_PROMPT + focus
            summary = task_summary(r.task)
            source = ("task", r.task.task_id)
        drafts: list[MemoryDraft] = []
        reflection = await self._model_reflection(transcript, outcome) if transcript.strip() else None
        if reflection is not None:
            outcome.used_llm = True
            if reflection.summary and r.session_id:
                sources = tuple(m.stored_id for m in records)  # the model read all of them
            summary = reflection.summary or summary
            # What the model distilled from a session is derived from all it read (a task's trajectory
            # comes in the request, not from stored memories).
            read = tuple(m.stored_id for m in records) if r.session_id else ()
            drafts = [self._draft(r, m.kind, m.content, m.context, m.confidence, source, derived_from=read,
                                  metadata={"cited_memories" if r.session_id else "cited_steps": cited})
                      for m, cited in self._faithful(reflection, entries, instructions, outcome)]
        drafts.append(self._draft(r, Kind.SUMMARY, summary, "", 1.0, source, derived_from=sources))
        outcome.summary = summary
        outcome.memories = await self.writer.write(caller, drafts, request, derived=True)
        if r.session_id:
            await self._retire_older_summaries(caller, outcome.memories[-1])
        if r.session_id and r.user_id:
            await self._user_summary(caller, r, request)
        return outcome

    @staticmethod
    def _faithful(reflection: Reflection, entries: list[Entry], instructions: str,
                  outcome: ReflectOutcome) -> list[tuple[ReflectedMemory, list[str]]]:
        """The memories that cite the entries they come from and are faithful to them
        (core/reflection/faithfulness.py), each with the labels of those entries; the others are
        counted by reason."""
        labels = {e.number: e.label for e in entries}
        kept = []
        for m in reflection.memories:
            if why := why_dropped(m.kind, m.content, m.steps, entries, instructions):
                _dropped.add(1, {"memplane.reason": why})
                log.info("reflection: a %s citing %s dropped: %s", m.kind.value, m.steps, why)
                outcome.dropped[why] = outcome.dropped.get(why, 0) + 1
            else:
                m = replace(m, context=kept_context(m.kind, m.context, entries, instructions))
                kept.append((m, [labels[n] for n in dict.fromkeys(m.steps) if n in labels]))
        return kept

    async def _model_reflection(self, transcript: str, outcome: ReflectOutcome) -> Reflection | None:
        """The model's reflection; None without a model, or after a reason of DEGRADING_REASONS (it
        answered twice without the expected JSON, or the tenant's token budget is spent): asked again
        it answers the same, so a retried job would fail the same way and store nothing at all. The
        reflection then stores what needs no model and says why. A provider that fails or times out
        is down for now: that still fails, and is retried."""
        if self.deps.llm is None:
            return None
        try:
            return await reflect_with_model(self.deps.llm, transcript)
        except MemplaneError as exc:
            if not (reason := went_without("reflection", exc)):
                raise
        outcome.degraded = _without_the_model(reason)
        return None

    async def _user_summary(
        self, caller: Caller, r: ReflectInput, request: RequestKey | None, *, unless_empty: bool = False,
    ) -> MemoryRecord | None:
        """The user's long-term summary, carried across sessions: rebuilt from their current facts and
        preferences whenever one of their sessions is reflected on, stale like any summary when one
        of them changes. unless_empty: nothing is written when the user has no memories left."""
        assert r.user_id is not None
        records = await self.deps.memories.list(
            caller, MemoryFilter(user_id=r.user_id, kinds=(Kind.FACT, Kind.PREFERENCE)), limit=5000, after=None)
        if unless_empty and not records:
            return None
        records.reverse()
        made = user_summary(r.user_id, records)
        draft = replace(self._draft(r, Kind.SUMMARY, made.text, "", 1.0, ("user", r.user_id), derived_from=made.sources),
                        session_id=None)
        [written] = await self.writer.write(
            caller, [draft], request_key(caller, "UserSummary", request.key, b"") if request else None, derived=True)
        await self._retire_older_summaries(caller, written)
        return written

    async def refresh_summary(self, caller: Caller, summary_id: uuid.UUID, erased: dict | None = None) -> ReflectOutcome:
        """Rebuilds a stale session (or user) summary from the session (or the user's memories) as it
        is now. Run again for the same summary (a retried job), it stores nothing new: the write is
        keyed by the summary's id.

        A summary erased because a source of it was hard-forgotten (migration 0010) is gone, text
        included; its job names what it summarised (`erased`: source_type, session_id, user_id,
        scope, domain) and the rebuild is written afresh from the memories that remain (none: no
        summary). A model that cannot be used (DEGRADING_REASONS) leaves it rebuilt without one."""
        stale = await self.deps.memories.get(caller, summary_id)
        key = request_key(caller, "RefreshSummary", str(summary_id), b"")
        outcome = ReflectOutcome()
        if stale is not None:
            if stale.status is not Status.STALE or stale.kind is not Kind.SUMMARY:
                return ReflectOutcome()  # rebuilt meanwhile
            if stale.source_type == "user" and stale.user_id:
                fresh_user = await self._user_summary(
                    caller, ReflectInput(user_id=stale.user_id, scope=stale.scope, domain=stale.domain), key)
                assert fresh_user is not None
                return ReflectOutcome(summary=fresh_user.content, memories=[fresh_user])
            if not stale.session_id:
                return ReflectOutcome()
            r = ReflectInput(session_id=stale.session_id, user_id=stale.user_id, scope=stale.scope, domain=stale.domain)
            records = await self._session_records(caller, r)
            # Still there (STALE): a model rewrites its text from what changed since.
            refreshed = await self._refreshed_by_model(caller, stale, records, outcome) if self.deps.llm else None
            if refreshed is None:
                made = session_summary(stale.session_id, records)
                refreshed = made.text, made.sources
            summary, sources = refreshed
        elif erased and erased.get("source_type") == "user" and erased.get("user_id"):
            fresh_user = await self._user_summary(
                caller, ReflectInput(user_id=erased["user_id"], scope=Scope(erased["scope"]),
                                     domain=erased.get("domain")), key, unless_empty=True)
            return ReflectOutcome(summary=fresh_user.content, memories=[fresh_user]) if fresh_user else ReflectOutcome()
        elif erased and erased.get("session_id"):
            r = ReflectInput(session_id=erased["session_id"], user_id=erased.get("user_id"),
                             scope=Scope(erased["scope"]), domain=erased.get("domain"))
            # Erased (its text exists nowhere any more): rebuilt from the session as it is now.
            records = await self._session_records(caller, r)
            if not records:
                return ReflectOutcome()  # nothing left to summarise
            made = session_summary(erased["session_id"], records)
            summary, sources = made.text, made.sources
            reflection = await self._model_reflection(session_transcript(session_entries(records)), outcome)
            if reflection is not None and reflection.summary:
                summary, sources = reflection.summary, tuple(m.stored_id for m in records)
        else:
            return ReflectOutcome()  # forgotten meanwhile
        assert r.session_id is not None
        draft = self._draft(r, Kind.SUMMARY, summary, "", 1.0, ("session", r.session_id), derived_from=sources)
        fresh = await self.writer.write(caller, [draft], key, derived=True)
        await self._retire_older_summaries(caller, fresh[0])
        outcome.summary, outcome.memories = summary, fresh
        return outcome

    async def _refreshed_by_model(
        self, caller: Caller, stale: MemoryRecord, records: list[MemoryRecord], outcome: ReflectOutcome,
    ) -> tuple[str, tuple[uuid.UUID, ...]] | None:
        """The model rewrites the stale summary from what changed since it was written (its sources
        that no longer hold, the session's memories new or changed since), not from the session;
        None, and the outcome says why, after a reason of DEGRADING_REASONS."""
        assert self.deps.llm is not None
        stated = await self.deps.memories.get_many(caller, await self.deps.memories.sources_of(caller, stale.stored_id))
        gone = [m for m in stated if m.status is not Status.ACTIVE]
        written = stale.created_at
        assert written is not None, "read from the memories table, where it is NOT NULL"
        changed = [m for m in records if m.kind is not Kind.SUMMARY and m.changed_at > written]
        try:
            summary = await refresh_with_model(self.deps.llm, stale.content, [statement(m) for m in gone],
                                               [statement(m) for m in changed])
        except MemplaneError as exc:
            if not (reason := went_without("summary", exc)):
                raise
            outcome.degraded = _without_the_model(reason)
            return None
        still = tuple(m.stored_id for m in stated if m.status is Status.ACTIVE)
        return summary, still + tuple(m.stored_id for m in changed)

    async def _session_records(self, caller: Caller, r: ReflectInput) -> list[MemoryRecord]:
        records = await self.deps.memories.list(
            caller, MemoryFilter(session_id=r.session_id, user_id=r.user_id), limit=5000, after=None
        )
        records.reverse()  # oldest first reads as the session went
        return records

    async def _retire_older_summaries(self, caller: Caller, current: MemoryRecord) -> None:
        """One summary per session (or user) is served: the earlier ones (stale or not) are superseded."""
        of_user = current.source_type == "user"
        earlier = await self.deps.memories.list(
            caller, MemoryFilter(session_id=None if of_user else current.session_id, user_id=current.user_id if of_user else None,
                                 kinds=(Kind.SUMMARY,), statuses=(Status.ACTIVE, Status.STALE)),
            limit=1000, after=None,
        )
        older = [m.stored_id for m in earlier if (m.source_type, m.source_id) == (current.source_type, current.source_id)
                 and m.id != current.id
                 and (m.scope, m.domain, m.agent_id) == (current.scope, current.domain, current.agent_id)]
        if older:
            await self.deps.memories.supersede(
                caller, older, action="superseded", actor="reflect", reason=f"replaced by summary {current.id}")

    def _draft(self, r: ReflectInput, kind: Kind, content: str, context: str, confidence: float, source: tuple,
               derived_from: tuple[uuid.UUID, ...] = (), metadata: dict | None = None) -> MemoryDraft:
        limit = self.deps.settings.max_content_bytes
        return MemoryDraft(
            scope=r.scope, domain=r.domain, agent_id=None, layer=None, kind=kind,
            content=content.encode()[:limit].decode(errors="ignore"), context=context, confidence=confidence,
            user_id=r.user_id, session_id=r.session_id or (r.task.task_id if r.task else None),
            source_type=source[0], source_id=source[1], occurred_at=datetime.now(timezone.utc),
            derived_from=derived_from, metadata=metadata or {},
        )

    async def _merge_session(self, caller: Caller, r: ReflectInput) -> int:
        # The newest MEMPLANE_GROUPING_MAX_ROWS of the session: those merge first, being the newest.
        rows, _ = await self.deps.memories.embeddings_of(
            caller, MemoryFilter(session_id=r.session_id, user_id=r.user_id), limit=self.deps.settings.grouping_max_rows)
        if len(rows) < 2:
            return 0
        threshold = self.deps.settings.dedup_threshold

        def groups() -> list[list[int]]:
            # Only memories stating the same thing merge: the older copies are superseded by the
            # newest, which says all they do (core/write/observations.statement_key).
            keys = [(m.scope, m.domain, m.agent_id, m.user_id, m.kind, statement_key(m.content), statement_key(m.value))
                    for m, _ in rows]
            return near_duplicate_groups(np.stack([v for _, v in rows]), keys, threshold)

        merged = 0
        for group in await self.deps.cpu.run(groups):
            newest = max(group, key=lambda i: (rows[i][0].created_at, str(rows[i][0].id)))
            older = [rows[i][0].stored_id for i in group if i != newest]
            done = await self.deps.memories.supersede(
                caller, older, action="merged", actor="reflect", reason=f"states the same as {rows[newest][0].id}"
            )
            merged += len(done)
        return merged


def _without_the_model(reason: str) -> str:
    """What a reflection done without the model says, by the reason (llm/chat.py DEGRADING_REASONS)."""
    if reason == "LLM_MALFORMED_OUTPUT":
        return "the model answered twice without the expected JSON; reflected without it"
    if reason == "LLM_BUDGET_EXHAUSTED":
        return "the tenant's LLM token budget for today is spent; reflected without the model"
    return f"the model could not be used ({reason}); reflected without it"


# A queued Reflect's task (request, steps, feedback) is what the agent reported, sealed in the job's
# payload as memories are (stores/sealing.py); its ids (session, user) stay readable, so an erasure
# still finds the job by its user.
_TASK_FIELD = "reflect_task"


def sealed_task(payload: dict, tenant_id: str, key: bytes | None) -> dict:
    if key is None or not payload.get("task"):
        return payload
    return {**payload, "task": OPENERS.seal_json(key, tenant_id, _TASK_FIELD, payload["task"]),
            "sealed_key": base64.b64encode(key).decode()}


def opened_task(payload: dict, tenant_id: str) -> dict:
    key = key_from_json(payload.get("sealed_key"))
    if key is None:
        return payload
    return {**payload, "task": OPENERS.open_json(key, tenant_id, _TASK_FIELD, payload["task"])}

