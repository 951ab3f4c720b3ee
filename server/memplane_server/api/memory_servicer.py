"""MemoryService: protobuf in, use case, protobuf out."""
from __future__ import annotations

import asyncio
from typing import Any

from memplane.v1 import memory_pb2 as pb
from memplane.v1 import memory_service_pb2 as spb
from memplane.v1 import memory_service_pb2_grpc as spb_grpc

from ..core.errors import invalid
from ..core.model import UPDATABLE_FIELDS
from ..core.operations import Operation
from ..core.reflection.reflection import ReflectInput, Task, TaskStep
from ..core.validation import shown
from ..core.working import item_to_record
from ..services.registry import Services
from ..services.search.service import SearchQuery
from .context import current_caller, current_reauthorize, current_request_key
from .convert import (
    KINDS,
    LAYERS,
    SCOPES,
    STATUSES,
    add_each,
    change_filter_in,
    change_out,
    counts_out,
    draft_in,
    enum_in,
    enum_out,
    filter_in,
    history_out,
    hit_out,
    memory_out,
    struct_in,
    ts_in,
    ts_out,
    written_out,
)
from .operation_convert import operation_out, receipt_out

_OUTCOMES = {spb.TASK_OUTCOME_SUCCESS: "success", spb.TASK_OUTCOME_FAILURE: "failure",
             spb.TASK_OUTCOME_PARTIAL: "partial"}
_MODES = {spb.REFLECT_MODE_SYNC: "sync", spb.REFLECT_MODE_ASYNC: "async"}
_INFER = {spb.INFER_MODE_SYNC: "sync", spb.INFER_MODE_ASYNC: "async"}
_PROMOTE = {spb.PROMOTE_MODE_PROMOTE: True, spb.PROMOTE_MODE_DISCARD: False}
_ERASE_MODES = {spb.ERASE_MODE_SYNC: "sync", spb.ERASE_MODE_ASYNC: "async"}
_ADVICE = {"risk": spb.ADVICE_KIND_RISK, "rule": spb.ADVICE_KIND_RULE, "preference": spb.ADVICE_KIND_PREFERENCE}
_SUBJECTS = {spb.DECISION_SUBJECT_TASK: "task", spb.DECISION_SUBJECT_SESSION: "session",
             spb.DECISION_SUBJECT_SEARCH: "search"}
_DECIDED = {"ran": spb.DECISION_OUTCOME_RAN, "skipped": spb.DECISION_OUTCOME_SKIPPED,
            "signal": spb.DECISION_OUTCOME_SIGNAL}
_SIDES = {spb.CONFLICT_SIDE_CURRENT: "current", spb.CONFLICT_SIDE_CHALLENGER: "challenger"}


class MemoryServicer(spb_grpc.MemoryServiceServicer):
    def __init__(self, services: Services, stopping: asyncio.Event | None = None) -> None:
        self.intake, self.searches, self.reflections = services.intake, services.searches, services.reflections
        self.forgets, self.memories, self.working, self.conflicts = (
            services.forgets, services.memories, services.working, services.conflicts)
        self.foresight, self.consolidations, self.erasures = services.foresight, services.consolidations, services.erasures
        self.watches, self.stopping = services.watches, stopping

    async def Write(self, request: spb.WriteRequest, context) -> spb.WriteResponse:
        drafts = [draft_in(m) for m in request.memories]
        infer = enum_in(_INFER, request.infer, "infer")
        accepted = await self.intake.accept(
            current_caller(), drafts, infer, request.time_zone or None, request=current_request_key(),
        )
        response = spb.WriteResponse()
        written_out(accepted.records, accepted.outcomes, response)
        add_each(response.extracted, accepted.extracted, memory_out)
        if accepted.operation is not None:
            operation_out(accepted.operation, response.operation)
        response.extraction_degraded = accepted.extraction_degraded
        return response

    async def Search(self, request: spb.SearchRequest, context) -> spb.SearchResponse:
        weights = {}
        order = []
        for w in request.scope_weights:
            scope = enum_in(SCOPES, w.scope, "scope_weights.scope")
            if scope is None:
                raise invalid("UNKNOWN_ENUM_VALUE", "scope_weights.scope must be set", field="scope_weights.scope")
            weights[scope] = w.weight or 1.0  # proto3 floats have no presence: 0 means unset
            order.append(scope)
        query = SearchQuery(
            text=request.query, filter=filter_in(request.filter), top_k=request.top_k,
            token_budget=request.token_budget, as_of=ts_in(request, "as_of_time"), scope_weights=weights,
            scope_order=tuple(order), explain=request.explain, time_zone=request.time_zone or None,
        )
        response = spb.SearchResponse()
        add_each(response.hits, await self.searches.search(current_caller(), query), hit_out)
        return response

    async def Reflect(self, request: spb.ReflectRequest, context) -> spb.ReflectResponse:
        which = request.WhichOneof("input")
        task = session_id = user_id = None
        if which == "task":
            t = request.task
            outcome = enum_in(_OUTCOMES, t.outcome, "task.outcome") or "unspecified"
            steps = tuple(TaskStep(s.action, s.observation, ts_in(s, "occurred_at")) for s in t.steps)
            task = Task(t.task_id or "", t.request, steps, outcome, t.feedback, tuple(t.used_memory_ids),
                        t.attempts or 1)
        elif which == "session":
            session_id, user_id = request.session.session_id, request.session.user_id or None
        reflect_input = ReflectInput(
            task=task, session_id=session_id, user_id=user_id, scope=enum_in(SCOPES, request.scope, "scope"),
            domain=request.domain or None, mode=enum_in(_MODES, request.mode, "mode") or "auto",
            decide=request.decide,
        )
        result = await self.reflections.reflect(current_caller(), reflect_input)
        response = spb.ReflectResponse()
        if isinstance(result, Operation):
            operation_out(result, response.operation)
        else:
            add_each(response.result.memories, result.memories, memory_out)
            response.result.summary = result.summary
            response.result.merged_count = result.merged_count
            response.result.used_llm = result.used_llm
            response.result.reason = "; ".join(part for part in (result.reason, result.degraded) if part)
            response.result.skipped = result.skipped
            response.result.dropped.update(result.dropped)
        return response

    async def Forget(self, request: spb.ForgetRequest, context) -> spb.ForgetResponse:
        which = request.WhichOneof("target")
        if which == "erase_user_id":
            if request.everything:
                raise invalid("TARGET_REQUIRED", "everything goes with a filter, not with an erasure")
            erasure = await self.erasures.erase(
                current_caller(), request.erase_user_id, mode=enum_in(_ERASE_MODES, request.erase_mode, "erase_mode")
                or "auto", dry_run=request.dry_run, reason=request.reason,
            )
            # No ids: the receipt is the answer, and a cached response naming erased ids would be one more copy.
            response = spb.ForgetResponse(forgotten_count=erasure.count)
            if erasure.receipt is not None:
                receipt_out(erasure.receipt, response.receipt)
            if erasure.operation is not None:
                operation_out(erasure.operation, response.operation)
            return response
        result = await self.forgets.forget(
            current_caller(),
            ids=list(request.ids.ids) if which == "ids" else None,
            f=filter_in(request.filter) if which == "filter" else None,
            hard=request.hard, dry_run=request.dry_run, reason=request.reason, everything=request.everything,
        )
        return spb.ForgetResponse(forgotten_count=result.count, forgotten_ids=[str(i) for i in result.ids])

    async def GetMemory(self, request: spb.GetMemoryRequest, context) -> spb.GetMemoryResponse:
        if not request.id:
            raise invalid("ID_REQUIRED", "id is required", field="id")
        response = spb.GetMemoryResponse()
        memory_out(await self.memories.get(current_caller(), request.id), response.memory)
        return response

    async def ListMemories(self, request: spb.ListMemoriesRequest, context) -> spb.ListMemoriesResponse:
        records, token = await self.memories.list(
            current_caller(), filter_in(request.filter), request.page_size, request.page_token
        )
        response = spb.ListMemoriesResponse(next_page_token=token)
        add_each(response.memories, records, memory_out)
        return response

    async def UpdateMemory(self, request: spb.UpdateMemoryRequest, context) -> spb.UpdateMemoryResponse:
        m = request.memory
        if not m.id:
            raise invalid("ID_REQUIRED", "memory.id is required", field="memory.id")
        changes: dict[str, Any] = {}
        for path in request.update_mask.paths:
            if path not in UPDATABLE_FIELDS:
                raise invalid("FIELD_NOT_UPDATABLE", f"cannot update {shown(path)}", field=shown(path))
            if path == "tags":
                changes["tags"] = list(m.tags)
            elif path == "metadata":
                changes["metadata"] = struct_in(m, "metadata")
            elif path == "status":
                changes["status"] = enum_in(STATUSES, m.status, "status")
            elif path in ("valid_from", "valid_to"):
                changes[path] = ts_in(m, path)
            elif path in ("value", "user_id"):
                changes[path] = getattr(m, path) or None
            else:
                changes[path] = getattr(m, path)
        response = spb.UpdateMemoryResponse()
        memory_out(await self.memories.update(current_caller(), m.id, changes), response.memory)
        return response

    async def ListMemoryHistory(self, request: spb.ListMemoryHistoryRequest, context) -> spb.ListMemoryHistoryResponse:
        which = request.WhichOneof("subject")
        entries, token = await self.memories.history(
            current_caller(),
            memory_id=request.memory_id if which == "memory_id" else None,
            entity=request.entity.entity if which == "entity" else None,
            attribute=request.entity.attribute if which == "entity" else None,
            page_size=request.page_size, page_token=request.page_token,
        )
        response = spb.ListMemoryHistoryResponse(next_page_token=token)
        add_each(response.entries, entries, history_out)
        return response

    async def SubmitFeedback(self, request: spb.SubmitFeedbackRequest, context) -> spb.SubmitFeedbackResponse:
        records = await self.memories.feedback(
            current_caller(), list(request.memory_ids), request.useful, request.comment, task_id=request.task_id,
            outcome=enum_in(_OUTCOMES, request.outcome, "outcome"),
        )
        response = spb.SubmitFeedbackResponse()
        add_each(response.memories, records, memory_out)
        return response

    async def GetWorkingMemory(self, request: spb.GetWorkingMemoryRequest, context) -> spb.GetWorkingMemoryResponse:
        if not request.session_id:
            raise invalid("SESSION_REQUIRED", "session_id is required", field="session_id")
        state, items, expires = await self.working.read(current_caller(), request.session_id)
        response = spb.GetWorkingMemoryResponse(state=state)
        add_each(response.items, items, lambda item, target: memory_out(item_to_record(item), target))
        ts_out(response.expire_time, expires)
        return response

    async def CloseSession(self, request: spb.CloseSessionRequest, context) -> spb.CloseSessionResponse:
        if not request.session_id:
            raise invalid("SESSION_REQUIRED", "session_id is required", field="session_id")
        promote = enum_in(_PROMOTE, request.promote, "promote")
        response = spb.CloseSessionResponse()
        add_each(response.promoted, await self.working.close(current_caller(), request.session_id, promote), memory_out)
        return response

    async def GetStats(self, request: spb.GetStatsRequest, context) -> spb.GetStatsResponse:
        stats = await self.memories.stats(current_caller(), filter_in(request.filter))
        response = spb.GetStatsResponse(
            total=stats.total, sessions_awaiting_context=stats.awaiting_context,
            context_backlog_seconds=stats.context_backlog_seconds, sessions_awaiting_upgrade=stats.awaiting_upgrade)
        counts_out(stats.by_scope, response.by_scope, {e: pb.Scope.Name(n) for n, e in SCOPES.items()})
        counts_out(stats.by_layer, response.by_layer, {e: pb.Layer.Name(n) for n, e in LAYERS.items()})
        counts_out(stats.by_kind, response.by_kind, {e: pb.Kind.Name(n) for n, e in KINDS.items()})
        counts_out(stats.by_status, response.by_status, {e: pb.MemoryStatus.Name(n) for n, e in STATUSES.items()})
        ts_out(response.newest_time, stats.newest)
        return response

    async def ListConflicts(self, request: spb.ListConflictsRequest, context) -> spb.ListConflictsResponse:
        conflicts, token = await self.conflicts.list(
            current_caller(), entity=request.entity or None, page_size=request.page_size, page_token=request.page_token)
        response = spb.ListConflictsResponse(next_page_token=token)
        for c in conflicts:
            out = response.conflicts.add(reason=c.reason)
            memory_out(c.current, out.current)
            memory_out(c.challenger, out.challenger)
        return response

    async def ResolveConflict(self, request: spb.ResolveConflictRequest, context) -> spb.ResolveConflictResponse:
        kept, superseded = await self.conflicts.resolve(
            current_caller(), request.challenger_id, enum_in(_SIDES, request.keep, "keep"), request.reason)
        response = spb.ResolveConflictResponse()
        memory_out(kept, response.kept)
        memory_out(superseded, response.superseded)
        return response

    async def Foresee(self, request: spb.ForeseeRequest, context) -> spb.ForeseeResponse:
        advice = await self.foresight.foresee(
            current_caller(), request.task, entities=list(request.entities), tools=list(request.tools),
            top_k=request.top_k, f=filter_in(request.filter))
        response = spb.ForeseeResponse()
        for a in advice:
            out = response.advice.add(kind=_ADVICE[a.kind], why=a.why, score=a.hit.score)
            memory_out(a.hit.memory, out.memory)
        return response

    async def ListReflectionDecisions(
        self, request: spb.ListReflectionDecisionsRequest, context
    ) -> spb.ListReflectionDecisionsResponse:
        decisions, token = await self.reflections.decisions(
            current_caller(), subject_type=enum_in(_SUBJECTS, request.subject, "subject"),
            subject_id=request.subject_id or None, page_size=request.page_size, page_token=request.page_token)
        response = spb.ListReflectionDecisionsResponse(next_page_token=token)
        subject_out = {name: number for number, name in _SUBJECTS.items()}
        for d in decisions:
            out = response.decisions.add(
                id=str(d.id), subject=subject_out[d.subject_type], subject_id=d.subject_id,
                outcome=_DECIDED[d.decision], reason=d.reason, turns=d.turns or 0,
                operation_id=str(d.operation_id) if d.operation_id else "")
            ts_out(out.create_time, d.created_at)
        return response

    async def Watch(self, request: spb.WatchRequest, context):
        after = request.after_position if request.HasField("after_position") else None
        batches = self.watches.watch(current_caller(), change_filter_in(request.filter), after, stop=self.stopping,
                                     reauthorize=current_reauthorize())
        async for batch in batches:
            response = spb.WatchResponse(position=batch.position)
            add_each(response.events, batch.events, change_out)
            yield response

    async def Consolidate(self, request: spb.ConsolidateRequest, context) -> spb.ConsolidateResponse:
        found = await self.consolidations.consolidate(
            current_caller(), scope=enum_in(SCOPES, request.scope, "scope"), domain=request.domain or None,
            dry_run=request.dry_run)
        def response() -> spb.ConsolidateResponse:
            out = spb.ConsolidateResponse()
            for c in found.clusters:
                cluster = out.clusters.add(kind=enum_out(KINDS, c.kind))
                add_each(cluster.members, c.members, memory_out)
                if c.consolidated is not None:
                    memory_out(c.consolidated, cluster.consolidated)
            return out

        # Up to MEMPLANE_GROUPING_MAX_ROWS members: converted in a thread, not on the event loop (~0.1 s at 5,000).
        return await asyncio.to_thread(response)
