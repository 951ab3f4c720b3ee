"""Builds the MemoryService and OperationsService requests from SDK arguments.

Each builder returns a PreparedCall: the RPC name, the request and how to convert the
response, so the sync and async clients differ only in how they perform the call.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message

from . import _convert, types
from ._messages import enum_or_zero, enum_values, many, memory_filter, memory_input, task_trajectory, wire
from .enums import (
    ChangeKind,
    DecisionSubject,
    DecisionSubjectLike,
    EraseMode,
    EraseModeLike,
    InferMode,
    InferModeLike,
    Kind,
    MemoryStatus,
    MemoryStatusLike,
    OperationState,
    OperationStateLike,
    PromoteMode,
    ReflectMode,
    ReflectModeLike,
    Scope,
    ScopeLike,
    TaskOutcome,
    TaskOutcomeLike,
)
from .inputs import MemoryInput, MemoryInputLike, TaskTrajectoryLike
from .v1 import memory_pb2, operation_pb2
from .v1 import memory_service_pb2 as svc_pb
from .v1 import operations_service_pb2 as ops_pb

T = TypeVar("T")
R = TypeVar("R")

@dataclass(frozen=True)
class PreparedCall(Generic[T]):
    """One RPC ready to send: its method name, request, and response-to-result conversion."""

    method: str
    request: Message
    convert: Callable[[Any], T]

    def then(self, convert: Callable[[T], R]) -> PreparedCall[R]:
        """The same call with a further conversion applied to its result."""
        first = self.convert
        return PreparedCall(self.method, self.request, lambda response: convert(first(response)))


# --- MemoryService -------------------------------------------------------------------------


def write(
    memories: Iterable[MemoryInputLike],
    *,
    request_id: str | None,
    infer: InferModeLike | None,
    time_zone: str | None,
) -> PreparedCall[types.WriteResult]:
    """Write of a batch of memories."""
    if isinstance(memories, (Mapping, MemoryInput)):
        raise TypeError("write takes a list of memories; use write_one for a single memory")
    request = svc_pb.WriteRequest(
        memories=[memory_input(m) for m in memories],
        request_id=request_id or "",
        infer=enum_or_zero(InferMode, svc_pb.InferMode, infer),
        time_zone=time_zone or "",
    )
    if not request.memories:
        raise ValueError("write needs at least one memory")
    return PreparedCall("Write", request, _convert.write_result)


def write_one(content: str, *, request_id: str | None, **fields: Any) -> PreparedCall[types.Memory]:
    """Write of one memory, resolving to the stored Memory."""
    return write([{"content": content, **fields}], request_id=request_id, infer=None, time_zone=None).then(
        lambda result: result.memories[0]
    )


def search(
    query: str,
    *,
    top_k: int,
    token_budget: int,
    as_of: datetime | None,
    scope_weights: Mapping[ScopeLike, float] | Iterable[tuple[ScopeLike, float]] | None,
    explain: bool,
    time_zone: str | None,
    filters: Mapping[str, Any],
) -> PreparedCall[types.SearchResult]:
    """Search; scope_weights keeps the caller's order, which sets the order scopes are walked."""
    weights = dict(scope_weights or {})
    request = svc_pb.SearchRequest(
        query=query,
        filter=memory_filter(filters),
        top_k=top_k,
        token_budget=token_budget,
        scope_weights=[svc_pb.ScopeWeight(scope=wire(memory_pb2.Scope, Scope.parse(s)), weight=w) for s, w in weights.items()],
        explain=explain,
        time_zone=time_zone or "",
    )
    if as_of is not None:
        request.as_of_time.CopyFrom(_convert.to_timestamp(as_of))
    return PreparedCall("Search", request, _convert.search_result)


def reflect(
    *,
    task: TaskTrajectoryLike | None,
    session_id: str | None,
    user_id: str | None,
    scope: ScopeLike | None,
    domain: str | None,
    mode: ReflectModeLike | None,
    request_id: str | None,
    decide: bool = False,
) -> PreparedCall[types.ReflectResult]:
    """Reflect on exactly one of a finished task or a session."""
    if (task is None) == (session_id is None):
        raise ValueError("reflect needs exactly one of task or session_id")
    if user_id and task is not None:
        raise ValueError("user_id narrows a session reflection; it cannot be used with task")
    if decide and task is None:
        raise ValueError("decide applies to task reflections")
    request = svc_pb.ReflectRequest(
        scope=enum_or_zero(Scope, memory_pb2.Scope, scope),
        domain=domain or "",
        mode=enum_or_zero(ReflectMode, svc_pb.ReflectMode, mode),
        request_id=request_id or "",
        decide=decide,
    )
    if task is not None:
        request.task.CopyFrom(task_trajectory(task))
    else:
        request.session.CopyFrom(svc_pb.SessionSelector(session_id=session_id, user_id=user_id or ""))
    return PreparedCall("Reflect", request, _convert.reflect_result)


def forget(
    *,
    ids: str | Iterable[str] | None,
    hard: bool,
    dry_run: bool,
    reason: str,
    request_id: str | None,
    filters: Mapping[str, Any],
    everything: bool = False,
) -> PreparedCall[types.ForgetResult]:
    """Forget by ids or by filter, never both; everything alone forgets all the caller may change."""
    # A filter keyword passed as None constrains nothing, so it does not count as a filter.
    has_filter = any(v is not None for v in filters.values())
    if everything and ids is not None:
        raise ValueError("everything goes with filter arguments or alone, not with ids")
    if not everything and (ids is None) == (not has_filter):
        raise ValueError("forget needs either ids or filter arguments, not both and not neither")
    request = svc_pb.ForgetRequest(
        hard=hard, dry_run=dry_run, reason=reason, request_id=request_id or "", everything=everything
    )
    if everything and ids is None and not has_filter:
        return PreparedCall("Forget", request, _convert.forget_result)
    if ids is not None:
        request.ids.ids.extend(many(ids))
    else:
        request.filter.CopyFrom(memory_filter(filters))
    return PreparedCall("Forget", request, _convert.forget_result)


def erase_user(
    user_id: str, *, mode: EraseModeLike | None, dry_run: bool, reason: str, request_id: str | None
) -> PreparedCall[types.ErasureResult]:
    """Forget with an erasure target."""
    if not user_id:
        raise ValueError("erase_user needs a user_id")
    request = svc_pb.ForgetRequest(
        erase_user_id=user_id, dry_run=dry_run, reason=reason, request_id=request_id or "", hard=True,
        erase_mode=enum_or_zero(EraseMode, svc_pb.EraseMode, mode),
    )
    return PreparedCall("Forget", request, _convert.erasure_result)


def get_memory(id: str) -> PreparedCall[types.Memory]:
    """GetMemory."""
    return PreparedCall("GetMemory", svc_pb.GetMemoryRequest(id=id), lambda r: _convert.memory(r.memory))


def list_memories(
    *, page_size: int, page_token: str, filters: Mapping[str, Any]
) -> PreparedCall[types.Page[types.Memory]]:
    """One page of ListMemories."""
    request = svc_pb.ListMemoriesRequest(filter=memory_filter(filters), page_size=page_size, page_token=page_token)
    return PreparedCall(
        "ListMemories", request, lambda r: _convert.page(r.memories, _convert.memory, r.next_page_token)
    )


def update_memory(
    id: str,
    *,
    content: str | None = None,
    context: str | None = None,
    tags: Iterable[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    confidence: float | None = None,
    status: MemoryStatusLike | None = None,
    value: str | None = None,
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
    user_id: str | None = None,
    request_id: str | None = None,
) -> PreparedCall[types.Memory]:
    """UpdateMemory of the fields given (not None); the FieldMask names exactly those."""
    memory = memory_pb2.Memory(id=id)
    paths: list[str] = []
    for name, given in (("content", content), ("context", context), ("value", value), ("user_id", user_id)):
        if given is not None:
            setattr(memory, name, given)
            paths.append(name)
    if tags is not None:
        memory.tags.extend(many(tags))
        paths.append("tags")
    if metadata is not None:
        memory.metadata.CopyFrom(_convert.to_struct(metadata))
        paths.append("metadata")
    if confidence is not None:
        memory.confidence = confidence
        paths.append("confidence")
    if status is not None:
        memory.status = wire(memory_pb2.MemoryStatus, MemoryStatus.parse(status))
        paths.append("status")
    for name, when in (("valid_from", valid_from), ("valid_to", valid_to)):
        if when is not None:
            getattr(memory, name).CopyFrom(_convert.to_timestamp(when))
            paths.append(name)
    if not paths:
        raise ValueError("update_memory needs at least one field to change")
    request = svc_pb.UpdateMemoryRequest(
        memory=memory, update_mask=FieldMask(paths=paths), request_id=request_id or ""
    )
    return PreparedCall("UpdateMemory", request, lambda r: _convert.memory(r.memory))


def list_history(
    *,
    memory_id: str | None,
    entity: str | None,
    attribute: str | None,
    page_size: int,
    page_token: str,
) -> PreparedCall[types.Page[types.HistoryEntry]]:
    """One page of ListMemoryHistory for exactly one of a memory or an entity."""
    if (memory_id is None) == (entity is None):
        raise ValueError("list_history needs exactly one of memory_id or entity")
    if attribute and entity is None:
        raise ValueError("attribute narrows an entity history; it needs entity")
    request = svc_pb.ListMemoryHistoryRequest(page_size=page_size, page_token=page_token)
    if memory_id is not None:
        request.memory_id = memory_id
    else:
        request.entity.CopyFrom(svc_pb.EntityRef(entity=entity, attribute=attribute or ""))
    return PreparedCall(
        "ListMemoryHistory", request, lambda r: _convert.page(r.entries, _convert.history_entry, r.next_page_token)
    )


def submit_feedback(
    memory_ids: str | Iterable[str], *, useful: bool | None, outcome: TaskOutcomeLike | None, task_id: str, comment: str
) -> PreparedCall[tuple[types.Memory, ...]]:
    """SubmitFeedback, resolving to the memories after their confidence changed."""
    if (useful is None) == (outcome is None):
        raise ValueError("submit_feedback needs exactly one of useful or outcome")
    request = svc_pb.SubmitFeedbackRequest(
        memory_ids=many(memory_ids), useful=bool(useful), comment=comment, task_id=task_id,
        outcome=enum_or_zero(TaskOutcome, svc_pb.TaskOutcome, outcome),
    )
    return PreparedCall("SubmitFeedback", request, lambda r: _convert.memories(r.memories))


def list_conflicts(*, entity: str, page_size: int, page_token: str) -> PreparedCall[types.Page[types.Conflict]]:
    """One page of ListConflicts."""
    request = svc_pb.ListConflictsRequest(entity=entity, page_size=page_size, page_token=page_token)
    return PreparedCall(
        "ListConflicts", request, lambda r: _convert.page(r.conflicts, _convert.conflict, r.next_page_token)
    )


def resolve_conflict(challenger_id: str, *, keep: str, reason: str) -> PreparedCall[types.ConflictResolution]:
    """ResolveConflict; keep is "current" or "challenger"."""
    sides = {"current": svc_pb.CONFLICT_SIDE_CURRENT, "challenger": svc_pb.CONFLICT_SIDE_CHALLENGER}
    if keep not in sides:
        raise ValueError('keep must be "current" or "challenger"')
    request = svc_pb.ResolveConflictRequest(challenger_id=challenger_id, keep=sides[keep], reason=reason)
    return PreparedCall("ResolveConflict", request, lambda r: _convert.conflict_resolution(r))


def list_reflection_decisions(
    *, subject: DecisionSubjectLike | None, subject_id: str, page_size: int, page_token: str
) -> PreparedCall[types.Page[types.ReflectionDecision]]:
    """One page of ListReflectionDecisions."""
    request = svc_pb.ListReflectionDecisionsRequest(
        subject=enum_or_zero(DecisionSubject, svc_pb.DecisionSubject, subject), subject_id=subject_id, page_size=page_size,
        page_token=page_token)
    return PreparedCall("ListReflectionDecisions", request,
                        lambda r: _convert.page(r.decisions, _convert.reflection_decision, r.next_page_token))


def consolidate(
    *, scope: ScopeLike | None, domain: str, dry_run: bool
) -> PreparedCall[tuple[types.MemoryCluster, ...]]:
    """Consolidate, resolving to the clusters found (and written, unless a dry run)."""
    request = svc_pb.ConsolidateRequest(scope=enum_or_zero(Scope, memory_pb2.Scope, scope), domain=domain, dry_run=dry_run)
    return PreparedCall("Consolidate", request, lambda r: tuple(_convert.memory_cluster(c) for c in r.clusters))


def foresee(
    task: str, *, entities: Iterable[str], tools: Iterable[str], top_k: int, filters: Mapping[str, Any]
) -> PreparedCall[tuple[types.Advice, ...]]:
    """Foresee, resolving to the advice, best first."""
    request = svc_pb.ForeseeRequest(task=task, entities=list(entities), tools=list(tools), top_k=top_k,
                                    filter=memory_filter(filters))
    return PreparedCall("Foresee", request, lambda r: tuple(_convert.advice(a) for a in r.advice))


def get_working_memory(session_id: str) -> PreparedCall[types.WorkingMemory]:
    """GetWorkingMemory."""
    return PreparedCall(
        "GetWorkingMemory", svc_pb.GetWorkingMemoryRequest(session_id=session_id), _convert.working_memory
    )


def close_session(session_id: str, *, promote: bool | None, request_id: str | None) -> PreparedCall[tuple[types.Memory, ...]]:
    """CloseSession."""
    mode = PromoteMode.UNSPECIFIED if promote is None else (PromoteMode.PROMOTE if promote else PromoteMode.DISCARD)
    request = svc_pb.CloseSessionRequest(session_id=session_id, promote=wire(svc_pb.PromoteMode, mode), request_id=request_id or "")
    return PreparedCall("CloseSession", request, lambda response: _convert.memories(response.promoted))


def get_stats(filters: Mapping[str, Any]) -> PreparedCall[types.Stats]:
    """GetStats."""
    return PreparedCall("GetStats", svc_pb.GetStatsRequest(filter=memory_filter(filters)), _convert.stats)


# --- OperationsService ---------------------------------------------------------------------


def get_operation(id: str) -> PreparedCall[types.Operation]:
    """GetOperation."""
    return PreparedCall("GetOperation", ops_pb.GetOperationRequest(id=id), lambda r: _convert.operation(r.operation))


def list_operations(
    *, state: OperationStateLike | None, page_size: int, page_token: str
) -> PreparedCall[types.Page[types.Operation]]:
    """One page of ListOperations."""
    request = ops_pb.ListOperationsRequest(
        state=enum_or_zero(OperationState, operation_pb2.OperationState, state), page_size=page_size, page_token=page_token
    )
    return PreparedCall(
        "ListOperations", request, lambda r: _convert.page(r.operations, _convert.operation, r.next_page_token)
    )


def cancel_operation(id: str) -> PreparedCall[types.Operation]:
    """CancelOperation."""
    return PreparedCall(
        "CancelOperation", ops_pb.CancelOperationRequest(id=id), lambda r: _convert.operation(r.operation)
    )


def watch(
    *, after_position: int | None, scopes: Any, session_id: str | None, entity: str | None, kinds: Any,
    change_kinds: Any,
) -> svc_pb.WatchRequest:
    """A WatchRequest; scopes, kinds and change_kinds take one value or an iterable."""
    request = svc_pb.WatchRequest(
        filter=svc_pb.WatchFilter(
            scopes=enum_values(Scope, memory_pb2.Scope, scopes), session_id=session_id or "", entity=entity or "",
            kinds=enum_values(Kind, memory_pb2.Kind, kinds), change_kinds=enum_values(ChangeKind, svc_pb.ChangeKind, change_kinds),
        )
    )
    if after_position is not None:
        if isinstance(after_position, bool) or not isinstance(after_position, int) or after_position < 0:
            raise ValueError("after_position must be a non-negative int from an earlier event or progress")
        request.after_position = after_position
    return request
