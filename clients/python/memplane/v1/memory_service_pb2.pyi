import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from memplane.v1 import memory_pb2 as _memory_pb2
from memplane.v1 import operation_pb2 as _operation_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InferMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INFER_MODE_UNSPECIFIED: _ClassVar[InferMode]
    INFER_MODE_ASYNC: _ClassVar[InferMode]
    INFER_MODE_SYNC: _ClassVar[InferMode]

class WriteOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE_OUTCOME_UNSPECIFIED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_CREATED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_MERGED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_SUPERSEDED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_NEEDS_CONFIRMATION: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_REPLAYED: _ClassVar[WriteOutcome]

class TaskOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_OUTCOME_UNSPECIFIED: _ClassVar[TaskOutcome]
    TASK_OUTCOME_SUCCESS: _ClassVar[TaskOutcome]
    TASK_OUTCOME_FAILURE: _ClassVar[TaskOutcome]
    TASK_OUTCOME_PARTIAL: _ClassVar[TaskOutcome]

class ReflectMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REFLECT_MODE_UNSPECIFIED: _ClassVar[ReflectMode]
    REFLECT_MODE_SYNC: _ClassVar[ReflectMode]
    REFLECT_MODE_ASYNC: _ClassVar[ReflectMode]

class EraseMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERASE_MODE_UNSPECIFIED: _ClassVar[EraseMode]
    ERASE_MODE_SYNC: _ClassVar[EraseMode]
    ERASE_MODE_ASYNC: _ClassVar[EraseMode]

class HistoryAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HISTORY_ACTION_UNSPECIFIED: _ClassVar[HistoryAction]
    HISTORY_ACTION_CREATED: _ClassVar[HistoryAction]
    HISTORY_ACTION_UPDATED: _ClassVar[HistoryAction]
    HISTORY_ACTION_SUPERSEDED: _ClassVar[HistoryAction]
    HISTORY_ACTION_MERGED: _ClassVar[HistoryAction]
    HISTORY_ACTION_DELETED: _ClassVar[HistoryAction]
    HISTORY_ACTION_RESTORED: _ClassVar[HistoryAction]
    HISTORY_ACTION_FEEDBACK: _ClassVar[HistoryAction]
    HISTORY_ACTION_REOBSERVED: _ClassVar[HistoryAction]
    HISTORY_ACTION_ERASED: _ClassVar[HistoryAction]
    HISTORY_ACTION_STALE: _ClassVar[HistoryAction]
    HISTORY_ACTION_CONFIRMED: _ClassVar[HistoryAction]

class PromoteMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROMOTE_MODE_UNSPECIFIED: _ClassVar[PromoteMode]
    PROMOTE_MODE_PROMOTE: _ClassVar[PromoteMode]
    PROMOTE_MODE_DISCARD: _ClassVar[PromoteMode]

class ConflictSide(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_SIDE_UNSPECIFIED: _ClassVar[ConflictSide]
    CONFLICT_SIDE_CURRENT: _ClassVar[ConflictSide]
    CONFLICT_SIDE_CHALLENGER: _ClassVar[ConflictSide]

class AdviceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ADVICE_KIND_UNSPECIFIED: _ClassVar[AdviceKind]
    ADVICE_KIND_RISK: _ClassVar[AdviceKind]
    ADVICE_KIND_RULE: _ClassVar[AdviceKind]
    ADVICE_KIND_PREFERENCE: _ClassVar[AdviceKind]

class DecisionSubject(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_SUBJECT_UNSPECIFIED: _ClassVar[DecisionSubject]
    DECISION_SUBJECT_TASK: _ClassVar[DecisionSubject]
    DECISION_SUBJECT_SESSION: _ClassVar[DecisionSubject]
    DECISION_SUBJECT_SEARCH: _ClassVar[DecisionSubject]

class DecisionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_OUTCOME_UNSPECIFIED: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_RAN: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_SKIPPED: _ClassVar[DecisionOutcome]
    DECISION_OUTCOME_SIGNAL: _ClassVar[DecisionOutcome]

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_KIND_UNSPECIFIED: _ClassVar[ChangeKind]
    CHANGE_KIND_CREATED: _ClassVar[ChangeKind]
    CHANGE_KIND_SUPERSEDED: _ClassVar[ChangeKind]
    CHANGE_KIND_UPDATED: _ClassVar[ChangeKind]
    CHANGE_KIND_FORGOTTEN: _ClassVar[ChangeKind]
    CHANGE_KIND_ERASED: _ClassVar[ChangeKind]
    CHANGE_KIND_SUMMARY_STALE: _ClassVar[ChangeKind]
INFER_MODE_UNSPECIFIED: InferMode
INFER_MODE_ASYNC: InferMode
INFER_MODE_SYNC: InferMode
WRITE_OUTCOME_UNSPECIFIED: WriteOutcome
WRITE_OUTCOME_CREATED: WriteOutcome
WRITE_OUTCOME_MERGED: WriteOutcome
WRITE_OUTCOME_SUPERSEDED: WriteOutcome
WRITE_OUTCOME_NEEDS_CONFIRMATION: WriteOutcome
WRITE_OUTCOME_REPLAYED: WriteOutcome
TASK_OUTCOME_UNSPECIFIED: TaskOutcome
TASK_OUTCOME_SUCCESS: TaskOutcome
TASK_OUTCOME_FAILURE: TaskOutcome
TASK_OUTCOME_PARTIAL: TaskOutcome
REFLECT_MODE_UNSPECIFIED: ReflectMode
REFLECT_MODE_SYNC: ReflectMode
REFLECT_MODE_ASYNC: ReflectMode
ERASE_MODE_UNSPECIFIED: EraseMode
ERASE_MODE_SYNC: EraseMode
ERASE_MODE_ASYNC: EraseMode
HISTORY_ACTION_UNSPECIFIED: HistoryAction
HISTORY_ACTION_CREATED: HistoryAction
HISTORY_ACTION_UPDATED: HistoryAction
HISTORY_ACTION_SUPERSEDED: HistoryAction
HISTORY_ACTION_MERGED: HistoryAction
HISTORY_ACTION_DELETED: HistoryAction
HISTORY_ACTION_RESTORED: HistoryAction
HISTORY_ACTION_FEEDBACK: HistoryAction
HISTORY_ACTION_REOBSERVED: HistoryAction
HISTORY_ACTION_ERASED: HistoryAction
HISTORY_ACTION_STALE: HistoryAction
HISTORY_ACTION_CONFIRMED: HistoryAction
PROMOTE_MODE_UNSPECIFIED: PromoteMode
PROMOTE_MODE_PROMOTE: PromoteMode
PROMOTE_MODE_DISCARD: PromoteMode
CONFLICT_SIDE_UNSPECIFIED: ConflictSide
CONFLICT_SIDE_CURRENT: ConflictSide
CONFLICT_SIDE_CHALLENGER: ConflictSide
ADVICE_KIND_UNSPECIFIED: AdviceKind
ADVICE_KIND_RISK: AdviceKind
ADVICE_KIND_RULE: AdviceKind
ADVICE_KIND_PREFERENCE: AdviceKind
DECISION_SUBJECT_UNSPECIFIED: DecisionSubject
DECISION_SUBJECT_TASK: DecisionSubject
DECISION_SUBJECT_SESSION: DecisionSubject
DECISION_SUBJECT_SEARCH: DecisionSubject
DECISION_OUTCOME_UNSPECIFIED: DecisionOutcome
DECISION_OUTCOME_RAN: DecisionOutcome
DECISION_OUTCOME_SKIPPED: DecisionOutcome
DECISION_OUTCOME_SIGNAL: DecisionOutcome
CHANGE_KIND_UNSPECIFIED: ChangeKind
CHANGE_KIND_CREATED: ChangeKind
CHANGE_KIND_SUPERSEDED: ChangeKind
CHANGE_KIND_UPDATED: ChangeKind
CHANGE_KIND_FORGOTTEN: ChangeKind
CHANGE_KIND_ERASED: ChangeKind
CHANGE_KIND_SUMMARY_STALE: ChangeKind

class MemoryInput(_message.Message):
    __slots__ = ("scope", "domain", "layer", "kind", "content", "context", "entity", "attribute", "value", "tags", "metadata", "confidence", "user_id", "session_id", "source", "occurred_at", "valid_from", "valid_to", "ttl", "state_key")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    LAYER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    STATE_KEY_FIELD_NUMBER: _ClassVar[int]
    scope: _memory_pb2.Scope
    domain: str
    layer: _memory_pb2.Layer
    kind: _memory_pb2.Kind
    content: str
    context: str
    entity: str
    attribute: str
    value: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    confidence: float
    user_id: str
    session_id: str
    source: _memory_pb2.Source
    occurred_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    ttl: _duration_pb2.Duration
    state_key: str
    def __init__(self, scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., domain: _Optional[str] = ..., layer: _Optional[_Union[_memory_pb2.Layer, str]] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., content: _Optional[str] = ..., context: _Optional[str] = ..., entity: _Optional[str] = ..., attribute: _Optional[str] = ..., value: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., confidence: _Optional[float] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., source: _Optional[_Union[_memory_pb2.Source, _Mapping]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., state_key: _Optional[str] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("memories", "request_id", "infer", "time_zone")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    INFER_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryInput]
    request_id: str
    infer: InferMode
    time_zone: str
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryInput, _Mapping]]] = ..., request_id: _Optional[str] = ..., infer: _Optional[_Union[InferMode, str]] = ..., time_zone: _Optional[str] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("memories", "operation", "extracted", "results", "extraction_degraded")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_DEGRADED_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    operation: _operation_pb2.Operation
    extracted: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    results: _containers.RepeatedCompositeFieldContainer[WriteResult]
    extraction_degraded: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., operation: _Optional[_Union[_operation_pb2.Operation, _Mapping]] = ..., extracted: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., results: _Optional[_Iterable[_Union[WriteResult, _Mapping]]] = ..., extraction_degraded: _Optional[str] = ...) -> None: ...

class WriteResult(_message.Message):
    __slots__ = ("outcome", "related_memory_id", "reason")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RELATED_MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    outcome: WriteOutcome
    related_memory_id: str
    reason: str
    def __init__(self, outcome: _Optional[_Union[WriteOutcome, str]] = ..., related_memory_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ScopeWeight(_message.Message):
    __slots__ = ("scope", "weight")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    scope: _memory_pb2.Scope
    weight: float
    def __init__(self, scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., weight: _Optional[float] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "filter", "top_k", "token_budget", "as_of_time", "scope_weights", "explain", "time_zone")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    AS_OF_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    query: str
    filter: _memory_pb2.MemoryFilter
    top_k: int
    token_budget: int
    as_of_time: _timestamp_pb2.Timestamp
    scope_weights: _containers.RepeatedCompositeFieldContainer[ScopeWeight]
    explain: bool
    time_zone: str
    def __init__(self, query: _Optional[str] = ..., filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ..., top_k: _Optional[int] = ..., token_budget: _Optional[int] = ..., as_of_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope_weights: _Optional[_Iterable[_Union[ScopeWeight, _Mapping]]] = ..., explain: _Optional[bool] = ..., time_zone: _Optional[str] = ...) -> None: ...

class ScoreComponent(_message.Message):
    __slots__ = ("name", "value", "rank", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    rank: int
    detail: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ..., rank: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class ScoreExplanation(_message.Message):
    __slots__ = ("components",)
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[ScoreComponent]
    def __init__(self, components: _Optional[_Iterable[_Union[ScoreComponent, _Mapping]]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("memory", "score", "explanation")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    score: float
    explanation: ScoreExplanation
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., score: _Optional[float] = ..., explanation: _Optional[_Union[ScoreExplanation, _Mapping]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits",)
    HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ...) -> None: ...

class TaskStep(_message.Message):
    __slots__ = ("action", "observation", "occurred_at")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    action: str
    observation: str
    occurred_at: _timestamp_pb2.Timestamp
    def __init__(self, action: _Optional[str] = ..., observation: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TaskTrajectory(_message.Message):
    __slots__ = ("task_id", "request", "steps", "outcome", "feedback", "used_memory_ids", "attempts")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    USED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    request: str
    steps: _containers.RepeatedCompositeFieldContainer[TaskStep]
    outcome: TaskOutcome
    feedback: str
    used_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    attempts: int
    def __init__(self, task_id: _Optional[str] = ..., request: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[TaskStep, _Mapping]]] = ..., outcome: _Optional[_Union[TaskOutcome, str]] = ..., feedback: _Optional[str] = ..., used_memory_ids: _Optional[_Iterable[str]] = ..., attempts: _Optional[int] = ...) -> None: ...

class SessionSelector(_message.Message):
    __slots__ = ("session_id", "user_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    user_id: str
    def __init__(self, session_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class ReflectRequest(_message.Message):
    __slots__ = ("task", "session", "scope", "domain", "mode", "request_id", "decide")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DECIDE_FIELD_NUMBER: _ClassVar[int]
    task: TaskTrajectory
    session: SessionSelector
    scope: _memory_pb2.Scope
    domain: str
    mode: ReflectMode
    request_id: str
    decide: bool
    def __init__(self, task: _Optional[_Union[TaskTrajectory, _Mapping]] = ..., session: _Optional[_Union[SessionSelector, _Mapping]] = ..., scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., domain: _Optional[str] = ..., mode: _Optional[_Union[ReflectMode, str]] = ..., request_id: _Optional[str] = ..., decide: _Optional[bool] = ...) -> None: ...

class ReflectResult(_message.Message):
    __slots__ = ("memories", "summary", "merged_count", "used_llm", "reason", "skipped", "dropped")
    class DroppedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    MERGED_COUNT_FIELD_NUMBER: _ClassVar[int]
    USED_LLM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    summary: str
    merged_count: int
    used_llm: bool
    reason: str
    skipped: bool
    dropped: _containers.ScalarMap[str, int]
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., summary: _Optional[str] = ..., merged_count: _Optional[int] = ..., used_llm: _Optional[bool] = ..., reason: _Optional[str] = ..., skipped: _Optional[bool] = ..., dropped: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ReflectResponse(_message.Message):
    __slots__ = ("result", "operation")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    result: ReflectResult
    operation: _operation_pb2.Operation
    def __init__(self, result: _Optional[_Union[ReflectResult, _Mapping]] = ..., operation: _Optional[_Union[_operation_pb2.Operation, _Mapping]] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("ids", "filter", "erase_user_id", "hard", "dry_run", "request_id", "reason", "everything", "erase_mode")
    IDS_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ERASE_USER_ID_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EVERYTHING_FIELD_NUMBER: _ClassVar[int]
    ERASE_MODE_FIELD_NUMBER: _ClassVar[int]
    ids: MemoryIds
    filter: _memory_pb2.MemoryFilter
    erase_user_id: str
    hard: bool
    dry_run: bool
    request_id: str
    reason: str
    everything: bool
    erase_mode: EraseMode
    def __init__(self, ids: _Optional[_Union[MemoryIds, _Mapping]] = ..., filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ..., erase_user_id: _Optional[str] = ..., hard: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., request_id: _Optional[str] = ..., reason: _Optional[str] = ..., everything: _Optional[bool] = ..., erase_mode: _Optional[_Union[EraseMode, str]] = ...) -> None: ...

class MemoryIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ForgetResponse(_message.Message):
    __slots__ = ("forgotten_count", "forgotten_ids", "receipt", "operation")
    FORGOTTEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    forgotten_count: int
    forgotten_ids: _containers.RepeatedScalarFieldContainer[str]
    receipt: _operation_pb2.ErasureReceipt
    operation: _operation_pb2.Operation
    def __init__(self, forgotten_count: _Optional[int] = ..., forgotten_ids: _Optional[_Iterable[str]] = ..., receipt: _Optional[_Union[_operation_pb2.ErasureReceipt, _Mapping]] = ..., operation: _Optional[_Union[_operation_pb2.Operation, _Mapping]] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("filter", "page_size", "page_token")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    filter: _memory_pb2.MemoryFilter
    page_size: int
    page_token: str
    def __init__(self, filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("memory", "update_mask", "request_id")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    update_mask: _field_mask_pb2.FieldMask
    request_id: str
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ListMemoryHistoryRequest(_message.Message):
    __slots__ = ("memory_id", "entity", "page_size", "page_token")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    entity: EntityRef
    page_size: int
    page_token: str
    def __init__(self, memory_id: _Optional[str] = ..., entity: _Optional[_Union[EntityRef, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class EntityRef(_message.Message):
    __slots__ = ("entity", "attribute")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    entity: str
    attribute: str
    def __init__(self, entity: _Optional[str] = ..., attribute: _Optional[str] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ("memory_id", "action", "snapshot", "change_time", "actor", "reason")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    action: HistoryAction
    snapshot: _memory_pb2.Memory
    change_time: _timestamp_pb2.Timestamp
    actor: str
    reason: str
    def __init__(self, memory_id: _Optional[str] = ..., action: _Optional[_Union[HistoryAction, str]] = ..., snapshot: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., change_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListMemoryHistoryResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SubmitFeedbackRequest(_message.Message):
    __slots__ = ("memory_ids", "useful", "comment", "task_id", "outcome")
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    USEFUL_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    useful: bool
    comment: str
    task_id: str
    outcome: TaskOutcome
    def __init__(self, memory_ids: _Optional[_Iterable[str]] = ..., useful: _Optional[bool] = ..., comment: _Optional[str] = ..., task_id: _Optional[str] = ..., outcome: _Optional[_Union[TaskOutcome, str]] = ...) -> None: ...

class SubmitFeedbackResponse(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class GetWorkingMemoryRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetWorkingMemoryResponse(_message.Message):
    __slots__ = ("state", "items", "expire_time")
    class StateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    state: _containers.ScalarMap[str, str]
    items: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, state: _Optional[_Mapping[str, str]] = ..., items: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id", "promote", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    promote: PromoteMode
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., promote: _Optional[_Union[PromoteMode, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("promoted",)
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    promoted: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, promoted: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: _memory_pb2.MemoryFilter
    def __init__(self, filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ...) -> None: ...

class StatCount(_message.Message):
    __slots__ = ("key", "count")
    KEY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    key: str
    count: int
    def __init__(self, key: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("total", "by_scope", "by_layer", "by_kind", "by_status", "newest_time", "sessions_awaiting_context", "context_backlog_seconds", "sessions_awaiting_upgrade")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_SCOPE_FIELD_NUMBER: _ClassVar[int]
    BY_LAYER_FIELD_NUMBER: _ClassVar[int]
    BY_KIND_FIELD_NUMBER: _ClassVar[int]
    BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_AWAITING_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BACKLOG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_AWAITING_UPGRADE_FIELD_NUMBER: _ClassVar[int]
    total: int
    by_scope: _containers.RepeatedCompositeFieldContainer[StatCount]
    by_layer: _containers.RepeatedCompositeFieldContainer[StatCount]
    by_kind: _containers.RepeatedCompositeFieldContainer[StatCount]
    by_status: _containers.RepeatedCompositeFieldContainer[StatCount]
    newest_time: _timestamp_pb2.Timestamp
    sessions_awaiting_context: int
    context_backlog_seconds: float
    sessions_awaiting_upgrade: int
    def __init__(self, total: _Optional[int] = ..., by_scope: _Optional[_Iterable[_Union[StatCount, _Mapping]]] = ..., by_layer: _Optional[_Iterable[_Union[StatCount, _Mapping]]] = ..., by_kind: _Optional[_Iterable[_Union[StatCount, _Mapping]]] = ..., by_status: _Optional[_Iterable[_Union[StatCount, _Mapping]]] = ..., newest_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sessions_awaiting_context: _Optional[int] = ..., context_backlog_seconds: _Optional[float] = ..., sessions_awaiting_upgrade: _Optional[int] = ...) -> None: ...

class ListConflictsRequest(_message.Message):
    __slots__ = ("entity", "page_size", "page_token")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entity: str
    page_size: int
    page_token: str
    def __init__(self, entity: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Conflict(_message.Message):
    __slots__ = ("current", "challenger", "reason")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    CHALLENGER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    current: _memory_pb2.Memory
    challenger: _memory_pb2.Memory
    reason: str
    def __init__(self, current: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., challenger: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ListConflictsResponse(_message.Message):
    __slots__ = ("conflicts", "next_page_token")
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedCompositeFieldContainer[Conflict]
    next_page_token: str
    def __init__(self, conflicts: _Optional[_Iterable[_Union[Conflict, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ResolveConflictRequest(_message.Message):
    __slots__ = ("challenger_id", "keep", "reason")
    CHALLENGER_ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    challenger_id: str
    keep: ConflictSide
    reason: str
    def __init__(self, challenger_id: _Optional[str] = ..., keep: _Optional[_Union[ConflictSide, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ResolveConflictResponse(_message.Message):
    __slots__ = ("kept", "superseded")
    KEPT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    kept: _memory_pb2.Memory
    superseded: _memory_pb2.Memory
    def __init__(self, kept: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., superseded: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ForeseeRequest(_message.Message):
    __slots__ = ("task", "entities", "tools", "top_k", "filter")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    task: str
    entities: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedScalarFieldContainer[str]
    top_k: int
    filter: _memory_pb2.MemoryFilter
    def __init__(self, task: _Optional[str] = ..., entities: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[str]] = ..., top_k: _Optional[int] = ..., filter: _Optional[_Union[_memory_pb2.MemoryFilter, _Mapping]] = ...) -> None: ...

class Advice(_message.Message):
    __slots__ = ("memory", "kind", "why", "score")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    kind: AdviceKind
    why: str
    score: float
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., kind: _Optional[_Union[AdviceKind, str]] = ..., why: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class ForeseeResponse(_message.Message):
    __slots__ = ("advice",)
    ADVICE_FIELD_NUMBER: _ClassVar[int]
    advice: _containers.RepeatedCompositeFieldContainer[Advice]
    def __init__(self, advice: _Optional[_Iterable[_Union[Advice, _Mapping]]] = ...) -> None: ...

class ReflectionDecision(_message.Message):
    __slots__ = ("id", "subject", "subject_id", "outcome", "reason", "operation_id", "turns", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    subject: DecisionSubject
    subject_id: str
    outcome: DecisionOutcome
    reason: str
    operation_id: str
    turns: int
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., subject: _Optional[_Union[DecisionSubject, str]] = ..., subject_id: _Optional[str] = ..., outcome: _Optional[_Union[DecisionOutcome, str]] = ..., reason: _Optional[str] = ..., operation_id: _Optional[str] = ..., turns: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListReflectionDecisionsRequest(_message.Message):
    __slots__ = ("subject", "subject_id", "page_size", "page_token")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    subject: DecisionSubject
    subject_id: str
    page_size: int
    page_token: str
    def __init__(self, subject: _Optional[_Union[DecisionSubject, str]] = ..., subject_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListReflectionDecisionsResponse(_message.Message):
    __slots__ = ("decisions", "next_page_token")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[ReflectionDecision]
    next_page_token: str
    def __init__(self, decisions: _Optional[_Iterable[_Union[ReflectionDecision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchFilter(_message.Message):
    __slots__ = ("scopes", "session_id", "entity", "kinds", "change_kinds")
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_KINDS_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedScalarFieldContainer[_memory_pb2.Scope]
    session_id: str
    entity: str
    kinds: _containers.RepeatedScalarFieldContainer[_memory_pb2.Kind]
    change_kinds: _containers.RepeatedScalarFieldContainer[ChangeKind]
    def __init__(self, scopes: _Optional[_Iterable[_Union[_memory_pb2.Scope, str]]] = ..., session_id: _Optional[str] = ..., entity: _Optional[str] = ..., kinds: _Optional[_Iterable[_Union[_memory_pb2.Kind, str]]] = ..., change_kinds: _Optional[_Iterable[_Union[ChangeKind, str]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("filter", "after_position")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AFTER_POSITION_FIELD_NUMBER: _ClassVar[int]
    filter: WatchFilter
    after_position: int
    def __init__(self, filter: _Optional[_Union[WatchFilter, _Mapping]] = ..., after_position: _Optional[int] = ...) -> None: ...

class ChangeEvent(_message.Message):
    __slots__ = ("position", "change_kind", "action", "memory_id", "memory", "change_time", "scope", "kind", "session_id", "entity")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CHANGE_KIND_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    position: int
    change_kind: ChangeKind
    action: HistoryAction
    memory_id: str
    memory: _memory_pb2.Memory
    change_time: _timestamp_pb2.Timestamp
    scope: _memory_pb2.Scope
    kind: _memory_pb2.Kind
    session_id: str
    entity: str
    def __init__(self, position: _Optional[int] = ..., change_kind: _Optional[_Union[ChangeKind, str]] = ..., action: _Optional[_Union[HistoryAction, str]] = ..., memory_id: _Optional[str] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., change_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., session_id: _Optional[str] = ..., entity: _Optional[str] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("events", "position")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ChangeEvent]
    position: int
    def __init__(self, events: _Optional[_Iterable[_Union[ChangeEvent, _Mapping]]] = ..., position: _Optional[int] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("scope", "domain", "dry_run")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    scope: _memory_pb2.Scope
    domain: str
    dry_run: bool
    def __init__(self, scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., domain: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class MemoryCluster(_message.Message):
    __slots__ = ("kind", "members", "consolidated")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_FIELD_NUMBER: _ClassVar[int]
    kind: _memory_pb2.Kind
    members: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    consolidated: _memory_pb2.Memory
    def __init__(self, kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., members: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., consolidated: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ConsolidateResponse(_message.Message):
    __slots__ = ("clusters",)
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[MemoryCluster]
    def __init__(self, clusters: _Optional[_Iterable[_Union[MemoryCluster, _Mapping]]] = ...) -> None: ...
