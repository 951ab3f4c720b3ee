"""Conversions between Python values and protobuf messages, and from responses to result types."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Mapping, TypeVar

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct
from google.protobuf.timestamp_pb2 import Timestamp

from . import types
from .enums import (
    AdviceKind,
    ChangeKind,
    ContentAction,
    DecisionOutcome,
    DecisionSubject,
    DomainAccess,
    HistoryAction,
    Kind,
    Layer,
    MemoryStatus,
    OperationState,
    Role,
    Scope,
    WriteOutcome,
)
from .v1 import admin_service_pb2 as admin_pb
from .v1 import memory_pb2, operation_pb2
from .v1 import memory_service_pb2 as svc_pb

T = TypeVar("T")

# Confidence travels as a float32; rounding hides the float32 noise (0.8 -> 0.800000011920929).
_CONFIDENCE_DIGITS = 6


def to_timestamp(value: datetime) -> Timestamp:
    """A Timestamp for a timezone-aware datetime.

    Naive datetimes are refused because guessing between local time and UTC silently shifts
    memories by hours.
    """
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"datetime {value.isoformat()} must be timezone-aware")
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def to_duration(value: timedelta | float) -> Duration:
    """A Duration for a timedelta or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (timedelta, int, float)):
        raise TypeError(f"expected a timedelta or seconds, got {type(value).__name__}")
    duration = Duration()
    duration.FromTimedelta(value if isinstance(value, timedelta) else timedelta(seconds=value))
    return duration


def to_struct(value: Mapping[str, Any]) -> Struct:
    """A Struct for a JSON-like mapping."""
    struct = Struct()
    struct.update(dict(value))
    return struct


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_field(message: Message, name: str) -> datetime | None:
    """The UTC datetime of a Timestamp field, or None when unset: what Timestamp.ToDatetime gives
    in UTC, without its conversion to the zone asked for (a memory has up to eight times, and a
    search answers ten memories)."""
    if not message.HasField(name):
        return None
    stamp = getattr(message, name)
    return _EPOCH + timedelta(seconds=stamp.seconds, microseconds=stamp.nanos // 1000)


def _plain(value: Any) -> Any:
    """A Struct's value as the JSON-like Python value MessageToDict gives, read through the
    Struct's own mapping (several times faster; metadata comes with every memory)."""
    if isinstance(value, Struct):
        return {key: _plain(value[key]) for key in value.keys()}
    if isinstance(value, ListValue):
        return [_plain(item) for item in value]
    return value


def memory(pb: memory_pb2.Memory) -> types.Memory:
    """A Memory from its proto."""
    return types.Memory(
        id=pb.id,
        tenant_id=pb.tenant_id,
        scope=Scope.from_proto(pb.scope),
        domain=pb.domain,
        agent_id=pb.agent_id,
        user_id=pb.user_id,
        session_id=pb.session_id,
        layer=Layer.from_proto(pb.layer),
        kind=Kind.from_proto(pb.kind),
        content=pb.content,
        context=pb.context,
        entity=pb.entity,
        attribute=pb.attribute,
        value=pb.value,
        tags=tuple(pb.tags),
        metadata=_plain(pb.metadata),
        confidence=round(pb.confidence, _CONFIDENCE_DIGITS),
        status=MemoryStatus.from_proto(pb.status),
        supersedes=pb.supersedes,
        source_type=pb.source.type,
        source_id=pb.source.id,
        occurred_at=time_field(pb, "occurred_at"),
        valid_from=time_field(pb, "valid_from"),
        valid_to=time_field(pb, "valid_to"),
        create_time=time_field(pb, "create_time"),
        update_time=time_field(pb, "update_time"),
        last_used_time=time_field(pb, "last_used_time"),
        expire_time=time_field(pb, "expire_time"),
        use_count=pb.use_count,
        embedding_model=pb.embedding_model,
        sources=tuple((s.type, s.id) for s in pb.sources),
        conflicts_with=pb.conflicts_with,
        consolidated_into=pb.consolidated_into,
        lifecycle_weight=round(pb.lifecycle_weight, _CONFIDENCE_DIGITS) or 1.0,
        review_flag_time=time_field(pb, "review_flag_time"),
    )


def memories(pbs: Any) -> tuple[types.Memory, ...]:
    """Memories from a repeated Memory field."""
    return tuple(memory(pb) for pb in pbs)


def operation(pb: operation_pb2.Operation) -> types.Operation:
    """An Operation from its proto."""
    return types.Operation(
        id=pb.id,
        type=pb.type,
        state=OperationState.from_proto(pb.state),
        attempts=pb.attempts,
        error_reason=pb.error_reason,
        error_message=pb.error_message,
        create_time=time_field(pb, "create_time"),
        update_time=time_field(pb, "update_time"),
        result_memory_ids=tuple(pb.result_memory_ids),
        result_summary=pb.result_summary,
        erasure_receipt=erasure_receipt(pb.erasure_receipt) if pb.HasField("erasure_receipt") else None,
    )


def erasure_receipt(pb: operation_pb2.ErasureReceipt) -> types.ErasureReceipt:
    """An ErasureReceipt from its proto."""
    return types.ErasureReceipt(
        operation_id=pb.operation_id,
        erase_time=time_field(pb, "erase_time"),
        subject=pb.subject,
        counts=dict(pb.counts),
        dry_run=pb.dry_run,
    )


def erasure_result(response: svc_pb.ForgetResponse) -> types.ErasureResult:
    """The result of Forget with erase_user_id."""
    return types.ErasureResult(
        forgotten_count=response.forgotten_count,
        forgotten_ids=tuple(response.forgotten_ids),
        receipt=erasure_receipt(response.receipt) if response.HasField("receipt") else None,
        operation=_optional_operation(response),
    )


def _optional_operation(response: Message) -> types.Operation | None:
    return operation(response.operation) if response.HasField("operation") else None


def write_result(response: svc_pb.WriteResponse) -> types.WriteResult:
    """The result of Write."""
    return types.WriteResult(memories=memories(response.memories), operation=_optional_operation(response),
                             extracted=memories(response.extracted), results=tuple(
                                 types.ItemResult(WriteOutcome.from_proto(r.outcome), r.related_memory_id, r.reason)
                                 for r in response.results), extraction_degraded=response.extraction_degraded)


def search_result(response: svc_pb.SearchResponse) -> types.SearchResult:
    """The result of Search."""
    return types.SearchResult(hits=tuple(
        types.SearchHit(
            memory=memory(hit.memory),
            score=hit.score,
            explanation=tuple(
                types.ScoreComponent(name=c.name, value=c.value, rank=c.rank, detail=c.detail)
                for c in hit.explanation.components
            ),
        )
        for hit in response.hits
    ))


def reflect_result(response: svc_pb.ReflectResponse) -> types.ReflectResult:
    """The result of Reflect, synchronous or as an operation."""
    result = response.result
    return types.ReflectResult(
        memories=memories(result.memories),
        summary=result.summary,
        merged_count=result.merged_count,
        used_llm=result.used_llm,
        operation=_optional_operation(response),
        reason=result.reason,
        skipped=result.skipped,
        dropped=dict(result.dropped),
    )


def forget_result(response: svc_pb.ForgetResponse) -> types.ForgetResult:
    """The result of Forget."""
    return types.ForgetResult(forgotten_count=response.forgotten_count, forgotten_ids=tuple(response.forgotten_ids))


def history_entry(pb: svc_pb.HistoryEntry) -> types.HistoryEntry:
    """A HistoryEntry from its proto."""
    return types.HistoryEntry(
        memory_id=pb.memory_id,
        action=HistoryAction.from_proto(pb.action),
        snapshot=memory(pb.snapshot) if pb.HasField("snapshot") else None,
        change_time=time_field(pb, "change_time"),
        actor=pb.actor,
        reason=pb.reason,
    )


def change_event(pb: svc_pb.ChangeEvent) -> types.ChangeEvent:
    """A ChangeEvent from its proto."""
    return types.ChangeEvent(
        position=pb.position,
        change_kind=ChangeKind.from_proto(pb.change_kind),
        action=HistoryAction.from_proto(pb.action),
        memory_id=pb.memory_id,
        memory=memory(pb.memory) if pb.HasField("memory") else None,
        change_time=time_field(pb, "change_time"),
        scope=Scope.from_proto(pb.scope),
        kind=Kind.from_proto(pb.kind),
        session_id=pb.session_id,
        entity=pb.entity,
    )


def working_memory(response: svc_pb.GetWorkingMemoryResponse) -> types.WorkingMemory:
    """The result of GetWorkingMemory."""
    return types.WorkingMemory(
        state=dict(response.state),
        items=memories(response.items),
        expire_time=time_field(response, "expire_time"),
    )


def stats(response: svc_pb.GetStatsResponse) -> types.Stats:
    """The result of GetStats."""
    return types.Stats(
        total=response.total,
        by_scope={c.key: c.count for c in response.by_scope},
        by_layer={c.key: c.count for c in response.by_layer},
        by_kind={c.key: c.count for c in response.by_kind},
        by_status={c.key: c.count for c in response.by_status},
        newest_time=time_field(response, "newest_time"),
        sessions_awaiting_context=response.sessions_awaiting_context,
        context_backlog_seconds=response.context_backlog_seconds,
        sessions_awaiting_upgrade=response.sessions_awaiting_upgrade,
    )


def tenant(pb: admin_pb.Tenant) -> types.Tenant:
    """A Tenant from its proto."""
    return types.Tenant(
        id=pb.id, display_name=pb.display_name, create_time=time_field(pb, "create_time"), max_memories=pb.max_memories
    )


def agent(pb: admin_pb.Agent) -> types.Agent:
    """An Agent from its proto."""
    return types.Agent(
        tenant_id=pb.tenant_id, id=pb.id, display_name=pb.display_name, create_time=time_field(pb, "create_time")
    )


def api_key(pb: admin_pb.ApiKey) -> types.ApiKey:
    """An ApiKey from its proto."""
    return types.ApiKey(
        id=pb.id,
        tenant_id=pb.tenant_id,
        agent_id=pb.agent_id,
        role=Role.from_proto(pb.role),
        display_name=pb.display_name,
        create_time=time_field(pb, "create_time"),
        revoke_time=time_field(pb, "revoke_time"),
    )


def created_tenant(response: admin_pb.CreateTenantResponse) -> types.CreatedTenant:
    """The result of CreateTenant."""
    admin_key = None
    if response.HasField("admin_key"):
        admin_key = types.CreatedApiKey(api_key=api_key(response.admin_key), secret=response.admin_key_secret)
    return types.CreatedTenant(tenant=tenant(response.tenant), admin_key=admin_key)


def created_api_key(response: admin_pb.CreateApiKeyResponse) -> types.CreatedApiKey:
    """The result of CreateApiKey."""
    return types.CreatedApiKey(api_key=api_key(response.api_key), secret=response.secret)


def domain(pb: admin_pb.Domain) -> types.Domain:
    """A Domain from its proto."""
    return types.Domain(name=pb.name, description=pb.description, create_time=time_field(pb, "create_time"))


def domain_grant(pb: admin_pb.DomainGrant) -> types.DomainGrant:
    """A DomainGrant from its proto."""
    return types.DomainGrant(
        domain=pb.domain,
        tenant_id=pb.tenant_id,
        access=DomainAccess.from_proto(pb.access),
        create_time=time_field(pb, "create_time"),
    )


def audit_event(pb: admin_pb.AuditEvent) -> types.AuditEvent:
    """An AuditEvent from its proto."""
    return types.AuditEvent(
        id=pb.id,
        tenant_id=pb.tenant_id,
        actor_key_id=pb.actor_key_id,
        action=pb.action,
        target=pb.target,
        details_json=pb.details_json,
        event_time=time_field(pb, "event_time"),
    )


def page(pbs: Any, convert: Callable[[Any], T], next_page_token: str) -> types.Page[T]:
    """A Page of converted items."""
    return types.Page(items=tuple(convert(pb) for pb in pbs), next_page_token=next_page_token)


def conflict(pb: Any) -> types.Conflict:
    return types.Conflict(current=memory(pb.current), challenger=memory(pb.challenger), reason=pb.reason)


def conflict_resolution(pb: Any) -> types.ConflictResolution:
    return types.ConflictResolution(kept=memory(pb.kept), superseded=memory(pb.superseded))


def advice(pb: Any) -> types.Advice:
    return types.Advice(memory=memory(pb.memory), kind=AdviceKind.from_proto(pb.kind), why=pb.why, score=pb.score)


def reflection_decision(pb: Any) -> types.ReflectionDecision:
    return types.ReflectionDecision(
        id=pb.id, subject=DecisionSubject.from_proto(pb.subject), subject_id=pb.subject_id,
        outcome=DecisionOutcome.from_proto(pb.outcome), reason=pb.reason, operation_id=pb.operation_id,
        turns=pb.turns, create_time=time_field(pb, "create_time"),
    )


def memory_cluster(pb: Any) -> types.MemoryCluster:
    return types.MemoryCluster(kind=Kind.from_proto(pb.kind), members=memories(pb.members),
                               consolidated=memory(pb.consolidated) if pb.HasField("consolidated") else None)


_RULE_FIELDS = ("ttl_days", "unused_days", "unused_below_confidence", "value_half_life_days", "min_value",
                "review_min_uses", "review_below_confidence", "demote_after_days", "demote_max_uses",
                "demote_min_confidence", "demote_weight")


def lifecycle_policy(pb: admin_pb.LifecyclePolicy) -> types.LifecyclePolicy:
    """A LifecyclePolicy from its proto."""
    return types.LifecyclePolicy(
        tenant_id=pb.tenant_id, enabled=pb.enabled, hard_delete=pb.hard_delete,
        archive_tasks_after_days=pb.archive_tasks_after_days,
        rules=tuple(types.LifecycleKindRule(Kind.from_proto(r.kind), **{n: getattr(r, n) for n in _RULE_FIELDS})
                    for r in pb.rules),
        is_set=pb.is_set, update_time=time_field(pb, "update_time"),
    )


def lifecycle_policy_pb(policy: types.LifecyclePolicy) -> admin_pb.LifecyclePolicy:
    """The proto of a LifecyclePolicy (output-only fields left out)."""
    pb = admin_pb.LifecyclePolicy(tenant_id=policy.tenant_id, enabled=policy.enabled, hard_delete=policy.hard_delete,
                                  archive_tasks_after_days=policy.archive_tasks_after_days)
    for r in policy.rules:
        pb.rules.add(kind=Kind.parse(r.kind).value, **{n: getattr(r, n) for n in _RULE_FIELDS})
    return pb


def lifecycle_report(pb: admin_pb.LifecycleReport) -> types.LifecycleReport:
    """A LifecycleReport from its proto."""
    return types.LifecycleReport(
        tenant_id=pb.tenant_id, run_time=time_field(pb, "run_time"), dry_run=pb.dry_run, examined=pb.examined,
        counts={r.rule: r.count for r in pb.results}, memory_ids={r.rule: tuple(r.memory_ids) for r in pb.results},
    )


def content_policy(pb: admin_pb.ContentPolicy) -> types.ContentPolicy:
    """A ContentPolicy from its proto."""
    return types.ContentPolicy(
        tenant_id=pb.tenant_id, domain=pb.domain,
        rules={r.name: ContentAction.from_proto(r.action) for r in pb.rules},
        effective={r.name: ContentAction.from_proto(r.action) for r in pb.effective},
        is_set=pb.is_set, update_time=time_field(pb, "update_time"), updated_by=pb.updated_by,
    )


def content_scan_report(pb: admin_pb.ContentScanReport) -> types.ContentScanReport:
    """A ContentScanReport from its proto."""
    return types.ContentScanReport(
        examined=pb.examined,
        counts={(c.detector, ContentAction.from_proto(c.action)): c.memories for c in pb.counts},
        refused=pb.refused, redacted=pb.redacted, tagged=pb.tagged,
        refused_memory_ids=tuple(pb.refused_memory_ids), redacted_memory_ids=tuple(pb.redacted_memory_ids),
        tagged_memory_ids=tuple(pb.tagged_memory_ids),
    )


def token_budget(pb: admin_pb.TokenBudget) -> types.TokenBudget:
    """A TokenBudget from its proto."""
    return types.TokenBudget(tenant_id=pb.tenant_id, tokens_per_day=pb.tokens_per_day, is_set=pb.is_set,
                             update_time=time_field(pb, "update_time"), updated_by=pb.updated_by)


def token_usage(pb: admin_pb.GetTokenUsageResponse) -> types.TokenUsage:
    """A TokenUsage from GetTokenUsage's response."""
    return types.TokenUsage(
        tenant_id=pb.tenant_id, start_day=date.fromisoformat(pb.start_day), end_day=date.fromisoformat(pb.end_day),
        counts=tuple(types.TokenCount(date.fromisoformat(c.day), c.stage, c.model, c.input_tokens, c.output_tokens,
                                      c.completions) for c in pb.counts),
        budget=token_budget(pb.budget), spent_today=pb.spent_today)


def usage_report(pb: admin_pb.GetUsageResponse) -> types.UsageReport:
    """A UsageReport from GetUsage's response."""
    return types.UsageReport(
        start_day=date.fromisoformat(pb.start_day), end_day=date.fromisoformat(pb.end_day),
        tenants=tuple(types.TenantUsage(t.tenant_id, tuple(
            types.DayUsage(date.fromisoformat(d.day), dict(d.calls), d.texts_embedded, dict(d.tokens),
                           tuple(types.StoredUsage(Layer.from_proto(s.layer), Scope.from_proto(s.scope), s.memories,
                                                   s.bytes) for s in d.stored),
                           time_field(d, "stored_at")) for d in t.days)) for t in pb.tenants))
